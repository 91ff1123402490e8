"""akunu's GGUF tokenizers against llama.cpp's own, through llama-cpp-python, on every vocab file of
the llama.cpp source distribution (issue 33).

* Every ``ggml-vocab-*.gguf`` in llama-cpp-python's sdist (tests/paths.py finds or fetches them; a
  missing file fails) loads.
* For each one: its ``.inp``/``.out`` vectors, then a generated corpus
  (tests/tokenizer_corpus.py: mixed scripts, numbers, whitespace runs, code, emoji, contractions,
  special-token text) encoded by both with parse_special off and on must give identical ids, and
  decode(encode(text)) must give the text back. WordPiece (bert) and Unigram (t5) normalize the text
  (lowercase, accents, whitespace), so they cannot round-trip: for them decode must equal llama.cpp's
  detokenize of the same ids (llama-cpp-python's ``detokenize``, less the space in front of the first
  word that both models put there; akunu's decode drops it).
* CI runs the first 200 corpus strings per vocab; AKUNU_TOKENIZER_CORPUS=N runs N (the benchmark job,
  ``benchmarks/tokenizer_exactness.py``, runs 2000).
"""
from __future__ import annotations

import os

import pytest

import akunu
from paths import LLAMA_CPP_PYTHON_VERSION, LLAMA_CPP_VOCABS, llama_cpp_vocabs
from tokenizer_corpus import make_corpus

# Every vocab file loads (SentencePiece, byte-level BPE, WordPiece, Unigram, gemma4); an unknown
# tokenizer.ggml.model is refused naming it (tests/test_tokenizer.py::test_unknown_tokenizer_model).
# Models whose normalization loses text: decode is compared with llama.cpp's detokenize.
NORMALIZING = ("bert", "t5")
LOADED = list(LLAMA_CPP_VOCABS)
N_CORPUS = int(os.environ.get("AKUNU_TOKENIZER_CORPUS", "200"))
SEP = "\n__ggml_vocab_test__\n"


@pytest.fixture(scope="module")
def vocab_dir():
    try:
        return llama_cpp_vocabs()
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def llama_cpp():
    try:
        import llama_cpp as mod
    except ImportError:
        pytest.fail(f"llama-cpp-python is the reference tokenizer: pip install "
                    f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", pytrace=False)
    if mod.__version__ != LLAMA_CPP_PYTHON_VERSION:
        pytest.fail(f"llama-cpp-python {mod.__version__} installed, the vocab files are from "
                    f"{LLAMA_CPP_PYTHON_VERSION}", pytrace=False)
    return mod


def special_texts(tok: akunu.Tokenizer, n: int = 40) -> list[str]:
    """Up to n control-token texts of the vocab, spread over its ids."""
    ids = [i for i in range(len(tok)) if tok.is_control(i) and tok.token_text(i)]
    step = max(1, len(ids) // n)
    return [tok.token_text(i) for i in ids[::step][:n]]


def compare(tok: akunu.Tokenizer, ref, corpus: list[str]) -> list[str]:
    """Descriptions of every string where akunu and llama.cpp differ (ids, or akunu's round trip; for
    WordPiece / Unigram akunu's decode against llama.cpp's detokenize)."""
    bad = []
    normalizing = tok.model in NORMALIZING
    for s in corpus:
        for special in (False, True):
            got = tok.encode(s, add_special=False, parse_special=special)
            want = ref.tokenize(s.encode("utf-8"), add_bos=False, special=special)
            if got != want:
                bad.append(f"parse_special={special} {s!r}: akunu {got} llama.cpp {want}")
        ids = tok.encode(s)
        back = tok.decode(ids)
        if normalizing:
            want_text = ref.detokenize(ids).decode("utf-8", errors="replace")
            want_text = want_text[1:] if want_text.startswith(" ") else want_text
            if back != want_text:
                bad.append(f"decode {s!r} -> {back!r}, llama.cpp {want_text!r}")
            # [CLS] ... [SEP] (WordPiece) and BOS / EOS (Unigram) as llama.cpp adds them.
            got = tok.encode(s, add_special=True)
            want = ref.tokenize(s.encode("utf-8"), add_bos=True, special=False)
            if got != want:
                bad.append(f"add_special {s!r}: akunu {got} llama.cpp {want}")
        elif back != s:
            bad.append(f"round trip {s!r} -> {back!r}")
    return bad


def _cases(path):
    raw = path.with_suffix(".gguf.inp").read_bytes().decode("utf-8")
    texts = raw.split(SEP)
    if raw.endswith(SEP):  # as test-tokenizer-0: no empty case after a final separator
        texts.pop()
    lines = path.with_suffix(".gguf.out").read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    assert len(lines) == len(texts)
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]


@pytest.mark.parametrize("name", LOADED)
def test_matches_llama_cpp(vocab_dir, llama_cpp, name):
    path = vocab_dir / f"ggml-vocab-{name}.gguf"
    tok = akunu.Tokenizer.from_file(str(path))
    if path.with_suffix(".gguf.inp").is_file():
        for text, ids in _cases(path):
            assert tok.encode(text, add_special=False, parse_special=False) == ids, f"{name}: {text!r}"
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    bad = compare(tok, ref, make_corpus(N_CORPUS, specials=special_texts(tok)))
    assert not bad, f"{name}: {len(bad)} differences of {N_CORPUS} strings, first: " + "\n".join(bad[:3])
