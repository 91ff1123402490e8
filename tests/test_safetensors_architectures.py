"""Qwen2, Qwen3, Mistral, Gemma, Gemma 2, Gemma 3 (text) and Phi-3 from Hugging Face SafeTensors.

Each family's tiny random transformers model (tests/tiny_models.py ``ARCH_BASE``: peaked attention,
real argmax margins, windows far shorter than the ~300-token prompt) is saved by transformers'
own save_pretrained(safe_serialization=True) in F32, F16 or BF16, and akunu's teacher-forced
logits are compared with transformers float32 reading that directory back (so the stored,
rounded weights are what both run). Criterion as in test_reference_logits.py: argmax agreement
>= 99%, mean KL <= 1e-3.

What differs from the GGUF path is in the checkpoint itself: rotate-half Q/K rows (no reorder for
the NeoX-RoPE families), Gemma's norms stored without the + 1, Phi-3's fused qkv/gate_up, the
config keys (layer_types, per-layer-type RoPE, query_pre_attn_scalar, softcaps, windows). The
``test_wrong_*`` tests load the same checkpoints with one table entry broken (no + 1, a Q/K
reorder, no window, no local RoPE, ...) and check the criterion fails: each comparison can fail.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hf_checkpoints as hc
import references as rf
import tiny_models as tm

# name -> (family spec, stored dtype, shard size). F32/F16/BF16 each carry a Gemma (the + 1 is
# added to each dtype's stored value).
CASES = {
    "qwen2_f16": (tm.ARCH_BASE["qwen2"], "F16", None),
    "qwen3_bf16": (tm.ARCH_BASE["qwen3"], "BF16", None),
    "mistral_f32_sharded": (tm.ARCH_BASE["mistral"], "F32", "12MB"),
    "gemma_f16": (tm.ARCH_BASE["gemma"], "F16", None),
    "gemma2_f32": (tm.ARCH_BASE["gemma2"], "F32", None),
    "gemma3_bf16": (tm.ARCH_BASE["gemma3"], "BF16", None),
    "gemma3_linear_f16": (tm.ARCH_SPECS["gemma3_f16_linear"], "F16", None),  # scaled global RoPE only
    "phi3_f16": (tm.ARCH_BASE["phi3"], "F16", None),
}
ARCHITECTURE = {"qwen2": "qwen2", "qwen3": "qwen3", "mistral": "llama", "gemma": "gemma", "gemma2": "gemma2",
                "gemma3": "gemma3", "phi3": "phi3"}


@pytest.fixture(scope="module")
def tokens(varied_ids):
    return varied_ids


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tokenizer_dir, tokens):
    """name in CASES -> (dir, transformers' reference logits)."""
    return hc.checkpoint_cache(hc.save_arch_checkpoint, CASES, tmp_path_factory, tokenizer_dir, tokens)


def _sliding_layers(spec) -> list:
    n = spec.n_layers
    return {"mistral": [True] * n, "gemma2": [i % 2 == 0 for i in range(n)],
            "gemma3": [i % 6 != 5 for i in range(n)]}.get(spec.family, [False] * n)


@pytest.mark.parametrize("name", list(CASES))
def test_logits_match_transformers(name, checkpoint, tokens, akunu_mod):
    spec, dtype, shard = CASES[name]
    path, ref = checkpoint(name)
    assert len(set(ref.argmax(-1).tolist())) >= 30, "reference argmax is degenerate"
    if shard:
        assert len(list(path.glob("*.safetensors"))) >= 2 and (path / "model.safetensors.index.json").exists()
    m = akunu_mod.Model(str(path), backend="cpu")
    assert m.format == "safetensors"
    cfg = m.config
    expect = dict(architecture=ARCHITECTURE[spec.family], dim=spec.hidden, n_layers=spec.n_layers,
                  n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads, head_dim=spec.head_dim, ffn_dim=spec.ffn,
                  vocab_size=32000, tie_embeddings=spec.tied, rope_dim=spec.rope_dim,
                  sliding_layers=_sliding_layers(spec), sliding_window=spec.sliding_window or 0)
    assert {k: cfg[k] for k in expect} == expect
    assert cfg["attn_logit_softcap"] == pytest.approx(spec.attn_softcap or 0.0)
    assert cfg["final_logit_softcap"] == pytest.approx(spec.final_softcap or 0.0)
    assert cfg["embedding_scale"] == pytest.approx(spec.hidden ** 0.5 if spec.family in tm.GEMMA_FAMILY else 0.0)
    matrices = {t[1] for t in m.tensors if len(t[2]) == 2}
    assert matrices == {dtype}, matrices
    got = m.logits(tokens)
    assert got.shape == ref.shape and got.dtype == np.float32 and np.isfinite(got).all()
    ok, c = rf.criterion(ref, got)
    assert ok, f"{name}: {c}"


@pytest.mark.parametrize("name", ["mistral_f32_sharded", "gemma3_bf16", "phi3_f16"])
def test_decode_table_matches_teacher_forcing(name, checkpoint, tokens, akunu_mod):
    """Decoding one token at a time past the window (the config Python built: window, sliding
    flags, local RoPE) predicts what the all-rows pass predicts for the same sequence."""
    path, _ = checkpoint(name)
    m = akunu_mod.Model(str(path), backend="cpu")
    prompt = tokens[:60]
    first = m._engine.prefill(prompt)
    gen = [first] + list(m._engine.chain_decode(first, 59))
    m._engine.reset()
    assert gen == m.logits(prompt + gen[:-1])[len(prompt) - 1:].argmax(-1).tolist()


# ------------------------------------------------------------------ each comparison can fail


def _drop(spec, *names):
    return replace(spec, norms_plus_one=tuple(n for n in spec.norms_plus_one if n not in names))


# (case, what is broken, model_type, ArchSpec -> broken ArchSpec)
WRONG = [
    ("gemma_f16", "no_plus_one", "gemma", lambda a: replace(a, norms_plus_one=())),
    ("gemma_f16", "no_embedding_scale", "gemma", lambda a: replace(a, embedding_scale_sqrt_dim=False)),
    ("gemma2_f32", "no_plus_one_on_post_norms", "gemma2", lambda a: _drop(a, "post_attention_norm", "post_ffn_norm")),
    ("gemma2_f32", "no_softcaps", "gemma2", lambda a: replace(a, read_softcaps=False)),
    ("gemma3_bf16", "no_plus_one_on_qk_norms", "gemma3_text", lambda a: _drop(a, "attention.q_norm",
                                                                               "attention.k_norm")),
    ("qwen2_f16", "llama_qk_reorder", "qwen2", lambda a: replace(a, permute_rows={"attention.q": "n_heads",
                                                                                   "attention.k": "n_kv_heads"})),
    ("mistral_f32_sharded", "no_window", "mistral", lambda a: replace(a, sliding=None)),
]


@pytest.mark.parametrize("name,broken,model_type,edit", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_table_entry_fails_the_criterion(name, broken, model_type, edit, checkpoint, tokens, akunu_mod,
                                               monkeypatch):
    from akunu import hf_architectures

    path, ref = checkpoint(name)
    monkeypatch.setitem(hf_architectures.ARCHITECTURES, model_type, edit(hf_architectures.ARCHITECTURES[model_type]))
    ok, c = rf.criterion(ref, akunu_mod.Model(str(path), backend="cpu").logits(tokens))
    assert not ok, f"{name} loaded with {broken} still passes: {c}"


# (case, what is misread, config edit): what akunu would compute if it ignored the key
WRONG_CONFIG = [
    ("phi3_f16", "partial_rotary", lambda c: c["rope_parameters"].update(partial_rotary_factor=1.0)),
    ("gemma3_bf16", "local_rope_base", lambda c: c["rope_parameters"]["sliding_attention"].update(rope_theta=1e6)),
]


@pytest.mark.parametrize("name,misread,edit", WRONG_CONFIG, ids=[f"{w[0]}-{w[1]}" for w in WRONG_CONFIG])
def test_misread_config_fails_the_criterion(name, misread, edit, checkpoint, tokens, tmp_path, akunu_mod):
    path, ref = checkpoint(name)
    wrong = hc.edited_copy(path, tmp_path / "wrong", edit)
    ok, c = rf.criterion(ref, akunu_mod.Model(str(wrong), backend="cpu").logits(tokens))
    assert not ok, f"{name} with {misread} misread still passes: {c}"


# ------------------------------------------------------------------ config spellings


def _gemma3_old(cfg):  # transformers 4: rope_theta / rope_local_base_freq / sliding_window_pattern
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope["full_attention"]["rope_theta"]
    cfg["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
    scaling = {k: v for k, v in rope["full_attention"].items() if k != "rope_theta"}
    if scaling.get("rope_type", "default") != "default":
        cfg["rope_scaling"] = scaling
    cfg.pop("layer_types")
    cfg.pop("_sliding_window_pattern", None)
    cfg["sliding_window_pattern"] = 6


def _phi3_old(cfg):
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope["rope_theta"]
    cfg["partial_rotary_factor"] = rope["partial_rotary_factor"]


@pytest.mark.parametrize("name,edit", [("gemma3_linear_f16", _gemma3_old),
                                       ("gemma2_f32", lambda c: c.pop("layer_types")), ("phi3_f16", _phi3_old)])
def test_older_config_spellings_read_the_same(name, edit, checkpoint, tokens, tmp_path, akunu_mod):
    """Configs written before transformers 5 (no layer_types, top-level rope_theta, Gemma 3's
    rope_local_base_freq and sliding_window_pattern, Phi-3's top-level partial_rotary_factor)
    load into the same model."""
    path, _ = checkpoint(name)
    old = hc.edited_copy(path, tmp_path / "old", edit)
    a, b = akunu_mod.Model(str(old), backend="cpu"), akunu_mod.Model(str(path), backend="cpu")
    assert {k: v for k, v in a.config.items() if k != "name"} == {k: v for k, v in b.config.items() if k != "name"}
    np.testing.assert_array_equal(a.logits(tokens[:64]), b.logits(tokens[:64]))


def test_qwen2_window_from_max_window_layers(checkpoint, tokens, tmp_path, akunu_mod):
    """Qwen2's window counts only with use_sliding_window, on layers >= max_window_layers (the
    config written without layer_types): matches transformers reading the same config."""
    path, _ = checkpoint("qwen2_f16")
    off = hc.edited_copy(path, tmp_path / "off", lambda c: c.update(sliding_window=16, layer_types=None))
    assert akunu_mod.Model(str(off), backend="cpu").config["sliding_window"] == 0
    on = hc.edited_copy(off, tmp_path / "on", lambda c: c.update(use_sliding_window=True, max_window_layers=1))
    m = akunu_mod.Model(str(on), backend="cpu")
    assert (m.config["sliding_window"], m.config["sliding_layers"]) == (16, [False, True])
    ref = rf.hf_logits(hc.load_reference(on), tokens)
    assert ref.shape == (len(tokens), 32000)
    ok, c = rf.criterion(ref, m.logits(tokens))
    assert ok, c
    _, full = checkpoint("qwen2_f16")
    assert not rf.criterion(ref, full)[0], "the window must change the model"


# ------------------------------------------------------------------ MLX, refusals


def test_mlx_gemma3_matches_transformers_on_dequantized_weights(tmp_path, tokenizer_dir, tokens, akunu_mod):
    """The tensor table is shared with SafeTensors: an MLX 4-bit Gemma 3 (tied quantized embedding,
    (1 + w) norms and QK-norms kept float) runs as transformers does on its dequantized weights."""
    path, ref, _ = hc.save_mlx_checkpoint(tm.ARCH_BASE["gemma3"], tmp_path / "mlx", tokenizer_dir, 4, 64)
    m = akunu_mod.Model(str(path), backend="cpu")
    assert m.format == "mlx" and m.config["architecture"] == "gemma3"
    ok, c = rf.criterion(rf.hf_logits(ref, tokens), m.logits(tokens))
    assert ok, c


@pytest.mark.parametrize("model_type", ["gemma3", "falcon", "phi"])
def test_unsupported_model_type_is_named(model_type, checkpoint, tmp_path, akunu_mod):
    path, _ = checkpoint("gemma3_bf16")
    bad = hc.edited_copy(path, tmp_path / "bad", lambda c: c.update(model_type=model_type))
    with pytest.raises(akunu_mod.UnsupportedError) as info:
        akunu_mod.Model(str(bad))
    msg = str(info.value)
    assert f"model_type '{model_type}'" in msg
    for supported in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3"):
        assert supported in msg


def test_unknown_layer_type_refused(checkpoint, tmp_path, akunu_mod):
    path, _ = checkpoint("gemma2_f32")
    bad = hc.edited_copy(path, tmp_path / "bad",
                         lambda c: c.update(layer_types=["chunked_attention", "full_attention"]))
    with pytest.raises(akunu_mod.UnsupportedError, match="chunked_attention"):
        akunu_mod.Model(str(bad))
