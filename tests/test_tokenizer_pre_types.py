"""Every byte-level BPE pre-tokenizer name akunu maps (tokenizer.ggml.pre) against llama.cpp's own,
through llama-cpp-python, on a vocab file whose only change is that name (issue 33).

llama.cpp picks the pre-tokenizer's regex list from tokenizer.ggml.pre alone, so one real vocab
(qwen2's: 151k tokens, many scripts) with its pre value rewritten exercises each name's splitter
(and its ignore_merges and add_bos settings: that file has no tokenizer.ggml.add_bos_token): the first
200 generated corpus strings (tests/tokenizer_corpus.py) and a few strings aimed at single splitters
must give identical ids with add_special and parse_special each off and on, and decode back to the
text. The names llama.cpp runs over raw UTF-8 instead of GPT-2's byte alphabet are checked the same
way on Gemma 4's vocab (raw UTF-8 with <0xXX> byte tokens) written as a "gpt2" vocab without its
tokenizer.ggml.add_bos_token. The one name akunu refuses gives an UnsupportedError naming it.
"""
from __future__ import annotations

import os

import pytest

import akunu
from gguf import GGUFValueType, GGUFReader, GGUFWriter
from paths import LLAMA_CPP_PYTHON_VERSION, llama_cpp_vocabs
from tokenizer_corpus import make_corpus

# Names whose regex list (llama.cpp's llm_tokenizer_bpe) akunu reproduces; grouped as llama.cpp's
# llama_vocab::impl::load maps them to LLAMA_VOCAB_PRE_TYPE_*.
SUPPORTED = [
    # GPT2 regex (the last three also set add_sep, which llama.cpp's tokenizer does not read)
    "olmo", "jais", "trillion", "granite-docling", "exaone4", "gigachat", "a.x-4.0", "mellum",
    "modern-bert", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe",
    # llama3 regex (ignore_merges for the first group, add_bos for all of it but glm4 / glm5)
    "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "glm4", "glm5", "dbrx", "smaug-bpe",
    "chatglm-bpe",
    # qwen2 regex (bailingmoe's spelling of it gives the same pieces)
    "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "hunyuan", "solar-open", "grok-2", "bailingmoe",
    "bailingmoe2", "llada-moe",
    # \p{N} then GPT2
    "codeshell", "exaone", "minerva-7b", "mellum2",
    # their own splitters
    "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2", "tekken", "deepseek-v3", "hunyuan-dense",
    "joyai-llm", "hy_v4", "seed-coder", "ufakzeka", "spark2_5", "afmoe", "minicpm5", "jais-2", "exaone-moe",
    "granite-embed-multi-97m", "youtu", "tiny_aya", "cohere2moe", "laguna", "kimi-k2", "poro-chat", "bloom",
    "gpt3-finnish", "viking", "chameleon", "superbpe",
]
# Names llama.cpp runs over raw UTF-8 (byte_encode off): gemma4 and granite-embed-multi-311m as Gemma 4's
# tokenizer (spaces as U+2581, BOS forced on), sarvam-moe the same without the forced BOS and whole newline
# runs.
RAW_UTF8 = ["gemma4", "granite-embed-multi-311m", "sarvam-moe"]
# A name llama.cpp defines that akunu refuses: with a "gpt2" vocab llama.cpp aborts on text holding two
# spaces in a row (see PreTokenizer::from_name).
UNSUPPORTED = "whitespace"
N_CORPUS = int(os.environ.get("AKUNU_TOKENIZER_CORPUS", "200"))
BASE = "qwen2"
RAW_BASE = "gemma-4"
# Text for the corners of single splitters: chameleon's sentinel and image tokens and space runs, jais-2's
# whitespace runs cut into powers of two, exaone-moe's words joined by single spaces, the digit groups of
# afmoe / tiny_aya / superbpe, kimi-k2's Han runs, youtu's scripts and combining marks inside words.
EXTRA = ["<sentinel:42> IMGIMGABCDZ IMGIMGABCDEZ IMGIMGZ x<sentinel:>",
         "a\tb\nc  d   e    f     g      h", " " * 600 + "x" + " " * 37 + "y " + " " * 9 + "1", "\t \n" * 5,
         "Hello big  world foo\u0301 bar's", "1 12 123 1234 12345 123456 1234567 a1234b ١٢٣٤٥", "x12,345,678.9y",
         "中文English日本語テキストabc한국어ㄱㄴ ㄅㄆ “quoted”…！", "It's 中's I'M",
         "cafe\u0301 E\u0301COLE \u0301x ที่นี่ नमस्ते HelloWorld ABCdef's xYZ'LL"]


def texts(corpus):
    return corpus + EXTRA


def read_fields(name: str):
    try:
        path = llama_cpp_vocabs() / f"ggml-vocab-{name}.gguf"
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    reader = GGUFReader(str(path))
    assert not reader.tensors
    out = []
    for key, fld in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        vtype = fld.types[0]
        sub = fld.types[-1] if vtype == GGUFValueType.ARRAY else None
        out.append((key, fld.contents(), vtype, sub))
    return out


@pytest.fixture(scope="module")
def base_fields():
    return read_fields(BASE)


@pytest.fixture(scope="module")
def llama_cpp():
    try:
        import llama_cpp as mod
    except ImportError:
        pytest.fail(f"llama-cpp-python is the reference tokenizer: pip install "
                    f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", pytrace=False)
    return mod


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(N_CORPUS)


@pytest.fixture(scope="module")
def raw_fields():
    """Gemma 4's vocab as a "gpt2" vocab without tokenizer.ggml.add_bos_token (so the name's own BOS default
    shows)."""
    out = []
    for key, val, vtype, sub in read_fields(RAW_BASE):
        if key == "tokenizer.ggml.add_bos_token":
            continue
        if key == "tokenizer.ggml.model":
            val = "gpt2"
        out.append((key, val, vtype, sub))
    if not any(k == "tokenizer.ggml.pre" for k, _, _, _ in out):
        out.append(("tokenizer.ggml.pre", "", GGUFValueType.STRING, None))
    return out


def with_pre(fields, pre: str, path) -> str:
    """A copy of the base vocab with tokenizer.ggml.pre = `pre` (every other KV as it was)."""
    arch = next(v for k, v, _, _ in fields if k == "general.architecture")
    w = GGUFWriter(str(path), arch)
    for key, val, vtype, sub in fields:
        if key == "general.architecture":
            continue
        if key == "tokenizer.ggml.pre":
            val = pre
        w.add_key_value(key, val, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def compare(llama_cpp, path: str, pre: str, strings) -> None:
    tok = akunu.Tokenizer.from_file(path)
    assert tok.pre == pre
    ref = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    bad = []
    for s in strings:
        for add in (False, True):  # add_special: BOS (and EOS) as the name and the file say
            for special in (False, True):
                got = tok.encode(s, add_special=add, parse_special=special)
                want = ref.tokenize(s.encode("utf-8"), add_bos=add, special=special)
                if got != want:
                    bad.append(f"add_special={add} parse_special={special} {s!r}: akunu {got} llama.cpp {want}")
        # skip_special off: a word such as poro-chat's "</s>9" can merge into a control token's text
        if tok.decode(tok.encode(s), skip_special=False) != s:
            bad.append(f"round trip {s!r}")
    assert not bad, f"{pre}: {len(bad)} differences of {len(strings)} strings, first: " + "\n".join(bad[:3])


@pytest.mark.parametrize("pre", SUPPORTED)
def test_pre_type_matches_llama_cpp(base_fields, llama_cpp, corpus, tmp_path, pre):
    compare(llama_cpp, with_pre(base_fields, pre, tmp_path / f"vocab-{pre}.gguf"), pre, texts(corpus))


@pytest.mark.parametrize("pre", RAW_UTF8)
def test_raw_utf8_pre_type_matches_llama_cpp(raw_fields, llama_cpp, corpus, tmp_path, pre):
    compare(llama_cpp, with_pre(raw_fields, pre, tmp_path / f"vocab-{pre}.gguf"), pre, texts(corpus))


def test_unimplemented_pre_type_refused(base_fields, tmp_path):
    path = with_pre(base_fields, UNSUPPORTED, tmp_path / "vocab-unsupported.gguf")
    with pytest.raises(akunu.UnsupportedError, match=f"'{UNSUPPORTED}'"):
        akunu.Tokenizer.from_file(path)
