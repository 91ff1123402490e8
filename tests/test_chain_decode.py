"""Dispatch-table decode: chain_decode == repeated decode_step == argmax of teacher-forced logits."""
from __future__ import annotations

import re

import numpy as np
import pytest

PROMPTS = [
    "Once upon a time, in a small village by the sea, there lived",
    "def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n",
]


def _steps(model, prompt_tokens, n):
    model._engine.reset()
    assert model._engine.position == 0
    first = model._engine.prefill(prompt_tokens)
    assert model._engine.position == len(prompt_tokens)
    out, cur = [], first
    for _ in range(n):
        cur = model._engine.decode_step(cur)
        out.append(cur)
    assert model._engine.position == len(prompt_tokens) + n
    return first, out


def _chain(model, prompt_tokens, n):
    model._engine.reset()
    first = model._engine.prefill(prompt_tokens)
    out = model._engine.chain_decode(first, n)
    assert model._engine.position == len(prompt_tokens) + n
    return first, list(out)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_chain_decode_equals_decode_steps(smollm2, prompt):
    toks = smollm2.tokenizer.encode(prompt)
    n = 40
    f1, chain = _chain(smollm2, toks, n)
    f2, steps = _steps(smollm2, toks, n)
    assert f1 == f2
    assert len(chain) == n
    assert chain == steps
    assert len(set(chain)) > 3, f"degenerate greedy output {chain}"


def test_chain_decode_two_prompts_differ(smollm2):
    outs = [_chain(smollm2, smollm2.tokenizer.encode(p), 16)[1] for p in PROMPTS]
    assert outs[0] != outs[1]


def test_chain_decode_long_and_resumed(tiny_gguf, akunu_mod, llama_spm_tokenizer_ref):
    """N larger than any plausible chunk size (crosses chunk boundaries), and a chain resumed
    in pieces (chain(a) then chain(b)) equals one continuous step-by-step run."""
    path, _ = tiny_gguf("f32_untied")
    m = akunu_mod.Model(str(path))
    toks = llama_spm_tokenizer_ref("The lighthouse keeper climbed the stairs")["input_ids"]
    n = 300
    f1, chain = _chain(m, toks, n)
    f2, steps = _steps(m, toks, n)
    assert f1 == f2 and chain == steps
    m._engine.reset()
    first = m._engine.prefill(toks)
    a = list(m._engine.chain_decode(first, 37))
    b = list(m._engine.chain_decode(a[-1], n - 37))
    assert a + b == steps
    assert m._engine.position == len(toks) + n
    assert m._engine.table_builds == 1


def test_generate_tokens_matches_teacher_forced_argmax(smollm2):
    """Greedy generate_tokens == step-by-step argmax of model.logits on the growing sequence.
    A divergence is tolerated only at a numerical near-tie (then comparison stops)."""
    prompt = smollm2.tokenizer.encode("The three primary colors are")
    gen = smollm2.generate_tokens(prompt, max_tokens=16, temperature=0.0)
    assert 0 < len(gen) <= 16
    seq = list(prompt)
    for i, t in enumerate(gen):
        last = smollm2.logits(seq)[-1]
        best = int(np.argmax(last))
        if t != best:
            assert last[best] - last[t] < 1e-2, (
                f"token {i}: generated {t} but teacher-forced argmax is {best} "
                f"(logit gap {last[best] - last[t]:.4f})")
            break
        seq.append(t)


def test_prefill_argmax_matches_logits(smollm2):
    toks = smollm2.tokenizer.encode("Water is made of hydrogen and")
    last = smollm2.logits(toks)[-1]
    smollm2._engine.reset()
    assert smollm2._engine.prefill(toks) == int(np.argmax(last))


# ------------------------------------------------------------------ dispatch table

KINDS = {
    "embedding": ("embed", "get_rows", "gather"),
    "norm": ("norm",),
    "gemm": ("gemm", "gemv", "matmul", "matvec", "mul_mat", "linear", "dot"),
    "rope": ("rope",),
    "attention": ("attention", "attn", "flash"),
    "argmax": ("argmax",),
}
PATCHES = {"none", "token_offset", "position", "kv_seq_len", "pos_and_kv", "argmax_output"}


@pytest.fixture(scope="module")
def table(smollm2):
    t = smollm2.dispatch_table
    assert isinstance(t, list) and len(t) > 0
    for cmd in t:
        assert set(cmd) >= {"label", "kernel", "patch"}, cmd
        assert cmd["patch"] in PATCHES, cmd
    return t


def _has(cmd, words):
    text = (cmd["kernel"] + " " + cmd["label"]).lower()
    return any(w in text for w in words)


@pytest.mark.parametrize("kind", list(KINDS))
def test_table_has_kernel_kind(table, kind):
    assert any(_has(c, KINDS[kind]) for c in table), (kind, sorted({c["kernel"] for c in table}))


def test_table_single_token_and_argmax_patch(table):
    patches = [c["patch"] for c in table]
    assert patches.count("token_offset") == 1, patches.count("token_offset")
    assert patches.count("argmax_output") == 1, patches.count("argmax_output")
    tok = next(c for c in table if c["patch"] == "token_offset")
    arg = next(c for c in table if c["patch"] == "argmax_output")
    assert _has(tok, KINDS["embedding"]), tok
    assert _has(arg, KINDS["argmax"]), arg
    assert table.index(tok) < table.index(arg)


def test_table_per_layer_structure(table, smollm2):
    n_layers = smollm2.config["n_layers"]
    labels = {c["label"] for c in table}
    for i in range(n_layers):
        assert f"layer.{i}.attention" in labels, f"layer.{i}.attention missing"
        mine = [c for c in table if re.match(rf"layer\.{i}\.", c["label"])]
        attn = [c for c in mine if _has(c, KINDS["attention"]) and not _has(c, KINDS["rope"])]
        assert any(c["patch"] in ("kv_seq_len", "pos_and_kv") for c in attn), (i, attn)
        rope = [c for c in mine if _has(c, KINDS["rope"])]
        assert any(c["patch"] in ("position", "pos_and_kv") for c in rope), (i, rope)
    assert not any(re.match(rf"layer\.{n_layers}\.", c["label"]) for c in table)


def test_table_built_once(smollm2):
    for _ in range(3):
        smollm2.generate("Hello", max_tokens=4)
        smollm2._engine.reset()
    smollm2.generate_tokens(smollm2.tokenizer.encode("Hi"), max_tokens=3)
    smollm2.chat([{"role": "user", "content": "Hi"}], max_tokens=3)
    smollm2.logits([1, 2, 3])
    assert smollm2._engine.table_builds == 1
