"""Qwen2, Qwen3, Mistral, Gemma, Gemma 2, Gemma 3 and Phi-3 against transformers.

For each family a tiny random transformers model is written to GGUF in llama.cpp's conventions
(tests/tiny_models.py, ``ARCH_SPECS``: F16 and one quantized type per family) and akunu's
teacher-forced logits are compared with transformers float32 running the GGUF's dequantized
weights. Criterion as in test_reference_logits.py: argmax agreement >= 99%, mean KL <= 1e-3.
Prompts (~300 tokens) are far longer than the tiny sliding windows (32-48), so windows matter.

The ``test_reference_*`` tests check the reference side: transformers' own GGUF loader reads our
files into the same weights (names, Q/K permutation, Gemma's folded + 1), and references with one
feature removed (bias, QK-norm, softcaps, window, local RoPE base, embedding scale, partial rotary)
fail the criterion, so every akunu comparison here can fail.
"""
from __future__ import annotations

import numpy as np
import pytest

import gguf_writer as gw
import references as rf
import tiny_models as tm

CASES = list(tm.ARCH_SPECS)



@pytest.fixture(scope="module")
def tokens(varied_ids):
    return varied_ids


@pytest.fixture(scope="module")
def arch_gguf(gguf_dir):
    """name in ARCH_SPECS -> (path, original HF model), built once per module."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = gw.build_gguf(tm.ARCH_SPECS[name], gguf_dir)
        return cache[name]

    return get


@pytest.fixture(scope="module")
def arch_ref(arch_gguf, tokens):
    """name -> reference logits from the GGUF's dequantized weights."""
    cache = {}

    def get(name):
        if name not in cache:
            path, _ = arch_gguf(name)
            cache[name] = rf.hf_logits(rf.reference_from_gguf(path, tm.ARCH_SPECS[name]), tokens)
        return cache[name]

    return get


@pytest.fixture(scope="module")
def arch_akunu(akunu_mod, arch_gguf):
    cache = {}

    def get(name):
        if name not in cache:
            path, _ = arch_gguf(name)
            cache[name] = akunu_mod.Model(str(path), backend="cpu")
        return cache[name]

    return get


# ------------------------------------------------------------------ reference side


@pytest.mark.parametrize("name", CASES)
def test_reference_gguf_roundtrip(name, arch_gguf, arch_ref, tokens):
    """The GGUF -> reference path reproduces the original model up to the file's rounding, and the
    reference's predictions are not degenerate."""
    path, orig = arch_gguf(name)
    ref = arch_ref(name)
    c = rf.compare_logits(rf.hf_logits(orig, tokens), ref)
    assert 0 < c["max_abs"], "the file's dtype must round something"
    if tm.ARCH_SPECS[name].dtype == "F16":
        assert c["agree"] >= 0.97, c
    assert len(set(ref.argmax(-1).tolist())) >= 30, "reference argmax is degenerate"


# transformers' GGUF loader knows these families (it cannot map Qwen3's key_length or Phi-3's vocab).
@pytest.mark.parametrize("name", ["qwen2_q8_0", "mistral_q8_0", "gemma2_f16", "gemma3_q8_0"])
def test_reference_weights_match_transformers_gguf_loader(name, arch_gguf):
    """transformers' own GGUF reader (independent names, un-permute, Gemma's - 1) loads our file
    into exactly the weights our reference holds: the writer follows llama.cpp's conventions."""
    import torch
    from transformers import AutoModelForCausalLM

    path, _ = arch_gguf(name)
    ours = rf.reference_from_gguf(path, tm.ARCH_SPECS[name]).state_dict()
    theirs = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                  dtype=torch.float32).state_dict()
    assert sorted(ours) == sorted(theirs)
    for k, v in ours.items():
        assert theirs[k].shape == v.shape, k
        assert torch.equal(theirs[k], v) or (theirs[k] - v).abs().max() < 1e-6, k


def _zero_qkv_bias(model):
    import torch

    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.zero_()


def _drop_qk_norm(model):
    import torch

    for layer in model.model.layers:
        layer.self_attn.q_norm = torch.nn.Identity()
        layer.self_attn.k_norm = torch.nn.Identity()


def _drop_embedding_scale(model):
    model.model.embed_tokens.embed_scale.fill_(1.0)


_GEMMA3_SAME_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 1e6}}

# (case, what is removed, reference overrides, post-load edit)
BROKEN = [
    ("qwen2_q8_0", "qkv_bias", {}, _zero_qkv_bias),
    ("qwen3_q4_0", "qk_norm", {}, _drop_qk_norm),
    ("mistral_q8_0", "sliding_window", {"sliding_window": None}, None),
    ("gemma_q8_0", "embedding_scale", {}, _drop_embedding_scale),
    ("gemma_q8_0", "norm_plus_one_unfolded", {"unfold_norms": False}, None),
    ("gemma_q8_0", "gelu_tanh", {"hidden_act": "silu"}, None),
    ("gemma2_q8_0", "attn_softcap", {"attn_logit_softcapping": None}, None),
    ("gemma2_q8_0", "final_softcap", {"final_logit_softcapping": None}, None),
    ("gemma2_q8_0", "sliding_window", {"layer_types": ["full_attention"] * 2}, None),
    ("gemma3_q8_0", "sliding_window", {"layer_types": ["full_attention"] * 6}, None),
    ("gemma3_q8_0", "local_rope_base", {"rope_parameters": _GEMMA3_SAME_ROPE}, None),
    ("gemma3_q8_0", "qk_norm", {}, _drop_qk_norm),
    ("gemma3_f16_linear", "global_rope_scaling",
     {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}, None),
    ("gemma3_f16_linear", "local_layers_unscaled",
     {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                          "sliding_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 10000.0}}},
     None),
    ("phi3_q4_0", "partial_rotary",
     {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}}, None),
]


@pytest.mark.parametrize("name,feature,overrides,edit", BROKEN, ids=[f"{b[0]}-{b[1]}" for b in BROKEN])
def test_reference_criterion_detects_missing_feature(name, feature, overrides, edit, arch_gguf, arch_ref, tokens):
    """A reference without the feature fails the criterion: an engine missing it would fail too."""
    path, _ = arch_gguf(name)
    model = rf.reference_from_gguf(path, tm.ARCH_SPECS[name], **overrides)
    if edit is not None:
        edit(model)
    ok, c = rf.criterion(arch_ref(name), rf.hf_logits(model, tokens))
    assert not ok, f"{name} without {feature} would pass: {rf.describe(c)}"


# ------------------------------------------------------------------ akunu vs reference


@pytest.mark.parametrize("name", CASES)
def test_akunu_config_matches_gguf(name, arch_akunu):
    spec = tm.ARCH_SPECS[name]
    cfg = arch_akunu(name).config
    expect = dict(architecture=gw.GGUF_ARCH[spec.family], dim=spec.hidden, n_layers=spec.n_layers,
                  n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads, head_dim=spec.head_dim, ffn_dim=spec.ffn,
                  vocab_size=32000, tie_embeddings=spec.tied, rope_dim=spec.rope_dim)
    assert {k: cfg[k] for k in expect} == expect
    n = spec.n_layers
    sliding = {"mistral": [True] * n, "gemma2": [i % 2 == 0 for i in range(n)],
               "gemma3": [i % 6 != 5 for i in range(n)]}.get(spec.family, [False] * n)
    assert cfg["sliding_layers"] == sliding
    assert cfg["sliding_window"] == (spec.sliding_window or 0 if spec.family != "phi3" else 0)
    assert cfg["attn_logit_softcap"] == pytest.approx(spec.attn_softcap or 0.0)
    assert cfg["final_logit_softcap"] == pytest.approx(spec.final_softcap or 0.0)
    gemma = spec.family in tm.GEMMA_FAMILY
    assert cfg["embedding_scale"] == pytest.approx(spec.hidden ** 0.5 if gemma else 0.0)


@pytest.mark.parametrize("name", CASES)
def test_akunu_logits_match_transformers(name, arch_akunu, arch_ref, tokens):
    ref = arch_ref(name)
    got = arch_akunu(name).logits(tokens)
    assert got.shape == ref.shape and got.dtype == np.float32 and np.isfinite(got).all()
    ok, c = rf.criterion(ref, got)
    assert ok, f"{name} ({tm.ARCH_SPECS[name].dtype}): {rf.describe(c)}"


@pytest.mark.parametrize("name", ["mistral_q8_0", "gemma2_f16", "gemma3_q8_0", "qwen2_f16", "phi3_q4_0"])
def test_akunu_decode_table_matches_teacher_forcing(name, arch_akunu, tokens):
    """The patched decode table (one token at a time, past the window) predicts what the
    all-rows pass predicts for the same sequence."""
    m = arch_akunu(name)
    m._engine.reset()
    prompt = tokens[:60]
    first = m._engine.prefill(prompt)
    gen = [first] + list(m._engine.chain_decode(first, 59))
    m._engine.reset()
    logits = m.logits(prompt + gen[:-1])
    assert gen == logits[len(prompt) - 1:].argmax(-1).tolist()


def test_llama_decode_table_unchanged(akunu_mod, tiny_gguf):
    """A Llama's decode table has exactly the book's per-layer recipe: no bias, QK-norm, post-norm
    or softcap command."""
    path, _ = tiny_gguf("q8_0_untied")
    table = akunu_mod.Model(str(path), backend="cpu").dispatch_table
    per_layer = ["attention_norm", "qkv.quantize", "qkv", "rope_kv_write", "attention", "o_proj.quantize",
                 "o_proj", "ffn_norm", "gate_up.quantize", "gate_up", "activation", "down.quantize", "down"]
    expect = ["embedding"] + [f"layer.{i}.{s}" for i in range(2) for s in per_layer]
    expect += ["output_norm", "logits.quantize", "logits", "argmax"]
    assert [c["label"] for c in table] == expect


def test_gemma2_decode_table_has_its_features(arch_akunu):
    labels = [c["label"] for c in arch_akunu("gemma2_f16").dispatch_table]
    for s in ("layer.0.post_attention_norm", "layer.1.post_ffn_norm", "logit_softcap"):
        assert s in labels
    assert not any("qk_norm" in s or "qkv_bias" in s for s in labels)


# ------------------------------------------------------------------ refusals


def test_unsupported_architecture_lists_supported(akunu_mod, arch_gguf, tmp_path):
    spec = tm.ARCH_SPECS["qwen2_f16"]
    _, model = arch_gguf("qwen2_f16")
    path = gw.write_gguf(tmp_path / "falcon.gguf", spec, gw.gguf_tensors_from_hf(model, spec), arch="falcon")
    with pytest.raises(akunu_mod.UnsupportedError) as info:
        akunu_mod.Model(str(path))
    msg = str(info.value)
    assert "falcon" in msg
    for arch in ("llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3"):
        assert arch in msg


def test_missing_arch_tensor_is_named(akunu_mod, arch_gguf, tmp_path):
    """A Qwen2 file without a bias (or a Gemma 2 file without a post-norm) is refused by name."""
    for name, drop in (("qwen2_f16", "blk.1.attn_k.bias"), ("gemma2_f16", "blk.0.post_ffw_norm.weight")):
        spec = tm.ARCH_SPECS[name]
        _, model = arch_gguf(name)
        tensors = gw.gguf_tensors_from_hf(model, spec)
        del tensors[drop]
        path = gw.write_gguf(tmp_path / f"{name}-missing.gguf", spec, tensors)
        with pytest.raises(akunu_mod.ModelFormatError) as info:
            akunu_mod.Model(str(path))
        assert "layers.1.attention.k_bias" in str(info.value) or "layers.0.post_ffn_norm" in str(info.value)


def test_fused_tensor_with_wrong_rows_is_refused(akunu_mod, arch_gguf, tmp_path):
    spec = tm.ARCH_SPECS["phi3_f16"]
    _, model = arch_gguf("phi3_f16")
    tensors = gw.gguf_tensors_from_hf(model, spec)
    tensors["blk.0.attn_qkv.weight"] = tensors["blk.0.attn_qkv.weight"][:-8]
    path = gw.write_gguf(tmp_path / "phi3-bad.gguf", spec, tensors)
    with pytest.raises(akunu_mod.ModelFormatError) as info:
        akunu_mod.Model(str(path))
    assert "blk.0.attn_qkv.weight" in str(info.value)


def test_gemma2_27b_depth_uses_dim_per_head_query_scale(akunu_mod, gguf_dir, tokens):
    """Gemma 2 27B (46 layers) scales queries by 1/sqrt(hidden / heads), not 1/sqrt(head_dim): the
    file has no key for it, llama.cpp decides by depth and so does akunu's descriptor."""
    spec = tm.ArchSpec("depth46", "gemma2", hidden=32, n_layers=46, n_heads=2, n_kv_heads=1, head_dim=32, ffn=32, tied=True,
                       sliding_window=32, attn_softcap=6.0, final_softcap=4.0, qk_gain=1.5, seed=29)
    path, _ = gw.build_gguf(spec, gguf_dir)
    ids = tokens[:128]
    ref = rf.hf_logits(rf.reference_from_gguf(path, spec, query_pre_attn_scalar=spec.hidden // spec.n_heads), ids)
    head_dim_scaled = rf.hf_logits(rf.reference_from_gguf(path, spec), ids)
    assert not rf.criterion(ref, head_dim_scaled)[0], "the two scales must be distinguishable"
    ok, c = rf.criterion(ref, akunu_mod.Model(str(path), backend="cpu").logits(ids))
    assert ok, rf.describe(c)


def test_sliding_window_pattern_key_overrides_default(akunu_mod, arch_gguf, tmp_path):
    """attention.sliding_window_pattern, when a file has it, decides which layers slide: a period
    (uint32, llama.cpp's set_swa_pattern) or one flag per layer (bool array)."""
    spec = tm.ARCH_SPECS["gemma2_f16"]
    _, model = arch_gguf("gemma2_f16")
    tensors = gw.gguf_tensors_from_hf(model, spec)
    for value, expect in ((1, [True, True]), ([False, True], [False, True]), (0, [False, False])):
        path = gw.write_gguf(tmp_path / f"pattern-{value}.gguf", spec, tensors,
                             extra_kv=lambda w, value=value: w.add_sliding_window_pattern(value))
        assert akunu_mod.Model(str(path), backend="cpu").config["sliding_layers"] == expect, value
