"""Chat formats and end-of-generation tokens of models that ship no chat template (issue 33).

- Each built-in family template (akunu.chat_templates) renders exactly what llama.cpp's own
  formatter (llm_chat_apply_template, through llama-cpp-python) writes for that format.
- A tiny model of each family written WITHOUT tokenizer.chat_template chats in its family's
  format: format_chat == BOS (where the tokenizer adds one) + llama.cpp's text, and chat()
  stops at the family's end-of-turn token.
- akunu's end-of-generation set equals llama.cpp's (llama_vocab_is_eog) on every vocab file.
- Model(chat_template=...) overrides, and a broken template is refused naming the problem.

Vocabularies: the real llama.cpp vocab files where one has the family's tokens (llama-bpe for
Llama 3, qwen2 for ChatML, phi-3, llama-spm for Llama 2). No shipped vocab has Gemma's
<start_of_turn> / <end_of_turn> or Mistral v3's [INST] control tokens: for those the tiny model's
vocabulary is llama-spm with the family's tokens appended as control tokens.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType

import akunu
import gguf_writer as gw
from akunu.chat_templates import FAMILY_TEMPLATES, detect_family
from paths import llama_cpp_vocabs
from test_tokenizer_exactness import LOADED
from tiny_models import family_spec, make_hf_model

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "  Hi there\n"}],
    [{"role": "system", "content": " Be kind. "}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": " 4 "}, {"role": "user", "content": "And 3+3?\n\nThanks"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"},
     {"role": "assistant", "content": "d"}],
]


@pytest.fixture(scope="module")
def llama_cpp():
    import llama_cpp as mod
    return mod


def llama_cpp_format(lc, name: str, messages, add_ass: bool) -> str:
    """llama.cpp's formatting of `messages` with its built-in template `name`."""
    keep = [(m["role"].encode(), m["content"].encode()) for m in messages]
    arr = (lc.llama_chat_message * len(keep))(*[lc.llama_chat_message(r, c) for r, c in keep])
    buf = ctypes.create_string_buffer(1 << 16)
    n = lc.llama_chat_apply_template(name.encode(), arr, len(keep), add_ass, buf, len(buf))
    assert 0 < n < len(buf), (name, n)
    return buf.raw[:n].decode()


@pytest.mark.parametrize("name", list(FAMILY_TEMPLATES))
def test_family_template_matches_llama_cpp(llama_cpp, name):
    from akunu.chat_template import render_chat

    for messages in CONVERSATIONS:
        for add_ass in (False, True):
            ours = render_chat(FAMILY_TEMPLATES[name], messages, "<s>", "</s>", add_ass)
            assert ours == "<s>" + llama_cpp_format(llama_cpp, name, messages, add_ass), (name, messages, add_ass)


def test_detect_family():
    none = lambda t: False  # noqa: E731
    tokens = lambda *ts: (lambda t: t in ts)  # noqa: E731
    assert detect_family("gemma3", none, "llama") == "gemma"
    assert detect_family("phi3", none, "llama") == "phi3"
    assert detect_family("qwen2", none, "gpt2") == "chatml"
    assert detect_family("llama", none, "llama") == "llama2-sys-bos"
    assert detect_family("llama", none, "gpt2") == "chatml"
    assert detect_family("gpt2", none, "gpt2") == "chatml"
    # the vocabulary's tokens decide before the architecture
    assert detect_family("llama", tokens("<|im_start|>", "<|im_end|>"), "gpt2") == "chatml"
    assert detect_family("llama", tokens("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"), "gpt2") == "llama3"
    assert detect_family("llama", tokens("[INST]", "[/INST]"), "llama") == "mistral-v3"
    assert detect_family("llama", tokens("[INST]", "[/INST]"), "gpt2") == "mistral-v3-tekken"
    assert detect_family("llama", tokens("[INST]", "[/INST]", "[SYSTEM_PROMPT]"), "llama") == "mistral-v7"
    assert detect_family("qwen2", tokens("<start_of_turn>", "<end_of_turn>"), "llama") == "gemma"
    assert detect_family("llama", tokens("<|user|>", "<|assistant|>", "<|end|>"), "llama") == "phi3"
    assert detect_family("phi3", tokens("<|im_start|>", "<|im_sep|>", "<|im_end|>"), "gpt2") == "phi4"
    assert detect_family("deepseek2", tokens("<｜User｜>", "<｜Assistant｜>"), "gpt2") == "deepseek3"
    assert detect_family("command-r", tokens("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>"),
                         "gpt2") == "command-r"
    assert detect_family("granite", tokens("<|start_of_role|>", "<|end_of_role|>"), "gpt2") == "granite"


@pytest.mark.parametrize("name", LOADED)
def test_end_of_generation_ids_match_llama_cpp(llama_cpp, name):
    path = str(llama_cpp_vocabs() / f"ggml-vocab-{name}.gguf")
    tok = akunu.Tokenizer.from_file(path)
    ref = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(ref.model)
    ours = {i for i in range(tok.vocab_size) if tok.is_eog(i)}
    theirs = {i for i in range(ref.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, i)}
    assert ours == theirs, (name, [(i, tok.token_text(i)) for i in sorted(ours ^ theirs)])


# ------------------------------------------------------------------ tiny models without a template

def vocab_with(src, out, extra: list[str]):
    """A copy of the vocab file `src` (tokenizer keys only) with `extra` appended as control tokens."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(out), "llama")
    for key, fld in GGUFReader(str(src)).fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        val, vtype = fld.contents(), fld.types[0]
        sub = fld.types[-1] if vtype == GGUFValueType.ARRAY else None
        if key == "tokenizer.ggml.tokens":
            val = list(val) + extra
        elif key == "tokenizer.ggml.scores":
            val = list(val) + [0.0] * len(extra)
        elif key == "tokenizer.ggml.token_type":
            val = list(val) + [3] * len(extra)
        w.add_key_value(key, val, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    return out


# family case -> (ARCH_BASE family, vocab file, tokens appended, the format llama.cpp names, end-of-turn text)
CASES = {
    "gemma": ("gemma", "llama-spm", ["<start_of_turn>", "<end_of_turn>"], "gemma", "<end_of_turn>"),
    "gemma3": ("gemma3", "llama-spm", ["<start_of_turn>", "<end_of_turn>"], "gemma", "<end_of_turn>"),
    "llama3": ("llama", "llama-bpe", [], "llama3", "<|eot_id|>"),
    "llama2": ("llama", "llama-spm", [], "llama2-sys-bos", "</s>"),
    "mistral-v3": ("mistral", "llama-spm", ["[INST]", "[/INST]"], "mistral-v3", "</s>"),
    "qwen2": ("qwen2", "qwen2", [], "chatml", "<|im_end|>"),
    "qwen3": ("qwen3", "qwen2", [], "chatml", "<|im_end|>"),
    "phi3": ("phi3", "phi-3", [], "phi3", "<|end|>"),
}


@pytest.fixture(scope="module")
def family_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("chat_families")
    vocabs = llama_cpp_vocabs()
    models = {}
    for case, (family, vocab, extra, _, _) in CASES.items():
        src = vocab_with(vocabs / f"ggml-vocab-{vocab}.gguf", d / f"vocab-{case}.gguf", extra)
        n_vocab = gw.vocab_size_of(src)
        spec = family_spec(family, f"chat_{case}", dtype="F16", hidden=64, head_dim=16, n_layers=1, ffn=64,
                           tied=False)
        path = gw.write_gguf(d / f"tiny-{case}.gguf", spec, gw.gguf_tensors_from_hf(make_hf_model(spec, n_vocab), spec),
                             vocab_src=src)
        assert "tokenizer.chat_template" not in GGUFReader(str(path)).fields
        models[case] = path
    return models


@pytest.mark.parametrize("case", list(CASES))
def test_family_chat_format(family_models, llama_cpp, case):
    _, _, _, fmt, _ = CASES[case]
    m = akunu.Model(family_models[case], backend="cpu", context_length=256, threads=1)
    try:
        assert m.chat_template == "" and m.chat_format == fmt
        tok = m.tokenizer
        bos = tok.token_text(tok.bos_id) if tok.add_bos else ""
        for messages in CONVERSATIONS:
            assert m.format_chat(messages) == bos + llama_cpp_format(llama_cpp, fmt, messages, True), (case, messages)
            assert m.format_chat(messages, add_generation_prompt=False) == \
                bos + llama_cpp_format(llama_cpp, fmt, messages, False)
    finally:
        m.close()


@pytest.mark.parametrize("case", list(CASES))
def test_family_stops_at_end_of_turn(family_models, case):
    """The end-of-turn token is an end-of-generation token, and chat() stops at it. A random model
    does not pick it, so the file is edited to make it the model's greedy first choice: the
    output rows (untied) of that choice and of the end-of-turn token are swapped. Unedited, chat() produces text; edited, it stops at once with finish_reason "stop"."""
    _, _, _, _, eot = CASES[case]
    path = family_models[case]
    m = akunu.Model(path, backend="cpu", context_length=256, threads=1)
    try:
        tok = m.tokenizer
        [eot_id] = tok.encode(eot, add_special=False, parse_special=True)
        assert tok.is_eog(eot_id) and tok.token_text(eot_id) == eot
        messages = [{"role": "user", "content": "Hello"}]
        ids = tok.encode(m.format_chat(messages), add_special=False, parse_special=True)
        first = int(np.argmax(m.logits(ids)[-1]))
        assert m.chat(messages, max_tokens=8) != "" and m.stats.generated_tokens == 8
    finally:
        m.close()
    assert first != eot_id
    swapped = path.with_name(path.stem + "-eot.gguf")
    _write_swapped(path, swapped, first, eot_id)
    m = akunu.Model(swapped, backend="cpu", context_length=256, threads=1)
    try:
        assert m.chat(messages, max_tokens=8) == ""
        assert m.finish_reason == "stop" and m.stats.generated_tokens <= 1
    finally:
        m.close()


def _write_swapped(src, dst, a: int, b: int):
    """A copy of the GGUF `src` with token rows a and b of output.weight swapped (F16)."""
    import shutil

    shutil.copyfile(src, dst)
    r = GGUFReader(str(dst), "r+")
    [t] = [t for t in r.tensors if t.name == "output.weight"]
    data = t.data
    row_a = np.array(data[a])
    data[a] = data[b]
    data[b] = row_a
    r.data.flush()


def test_chat_template_override(family_models):
    path = family_models["gemma"]
    tmpl = "{% for m in messages %}<<{{ m['role'] }}:{{ m['content'] }}>>{% endfor %}"
    m = akunu.Model(path, backend="cpu", context_length=256, threads=1, chat_template=tmpl)
    try:
        assert m.chat_template == tmpl and m.chat_format == "override" and m.effective_chat_template == tmpl
        assert m.format_chat([{"role": "user", "content": "hi"}]) == "<<user:hi>>"
    finally:
        m.close()


@pytest.mark.parametrize("tmpl, match", [
    ("{% for m in messages %}{{ m['content'] }", "not a valid Jinja template"),
    ("{{ raise_exception('no users here') }}", "no users here"),
    ("{{ messages[0]['content'].nope() }}", "fails to render"),
    ("just text", "without the message's content"),
    ("", "non-empty"),
    (42, "non-empty"),
])
def test_chat_template_override_refused(family_models, tmp_path, tmpl, match):
    with pytest.raises(ValueError, match=match):
        akunu.Model(family_models["gemma"], backend="cpu", chat_template=tmpl)


def test_model_template_wins(tmp_path):
    """A file with its own template keeps it (chat_format "model")."""
    from paths import smollm2_path

    m = akunu.Model(smollm2_path(), backend="cpu", context_length=256, threads=1)
    try:
        assert m.chat_template and m.chat_format == "model" and m.effective_chat_template == m.chat_template
    finally:
        m.close()


def test_cli_chat_template(family_models, tmp_path):
    """--chat-template takes a file or the template text and reaches Model(chat_template=...)."""
    from akunu.cli import _load, build_parser

    tmpl = "{% for m in messages %}[{{ m['content'] }}]{% endfor %}"
    f = tmp_path / "t.jinja"
    f.write_text(tmpl)
    for value in (str(f), tmpl):
        args = build_parser().parse_args(["chat", "-m", str(family_models["phi3"]), "--chat-template", value,
                                          "--backend", "cpu", "-t", "1", "-c", "64"])
        m = _load(args)
        try:
            assert m.chat_format == "override" and m.format_chat([{"role": "user", "content": "x"}]) == "[x]"
        finally:
            m.close()


def test_command_r_vocabulary_gets_command_r_format():
    """llama.cpp's command-r vocab file: its turn tokens pick llama.cpp's "command-r" format."""
    tok = akunu.Tokenizer.from_file(str(llama_cpp_vocabs() / "ggml-vocab-command-r.gguf"))

    def has_token(text):
        ids = tok.encode(text, add_special=False, parse_special=True)
        return len(ids) == 1 and tok.token_text(ids[0]) == text

    assert detect_family("command-r", has_token, tok.model) == "command-r"
