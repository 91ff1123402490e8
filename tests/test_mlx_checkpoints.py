"""MLX (mlx-community style) quantized checkpoints.

The quantizer is written in tests/hf_checkpoints.py from MLX's documented affine formula (no mlx
package here). Checks: the bit packing on a hand-worked example, the engine's conversion of one
matrix for every bits/group_size against numpy dequantization, and whole tiny models against
transformers running the dequantized weights (criterion of test_reference_logits.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import hf_checkpoints as hc
import references as rf
import tiny_models as tm
from akunu import _testing


def test_packing_hand_example():
    """3-bit values 0..7 form the bit stream 0o76543210 = 0xFAC688: bytes 88 C6 FA, little-endian;
    6-bit values straddle bytes; 4-bit puts element 0 in the low nibble."""
    q = np.array([[0, 1, 2, 3, 4, 5, 6, 7] * 4], dtype=np.uint8)  # 32 values = 3 words
    packed = hc.mlx_pack(q, 3)
    assert packed.shape == (1, 3)
    assert packed.tobytes()[:6] == bytes([0x88, 0xC6, 0xFA, 0x88, 0xC6, 0xFA])
    q6 = np.array([[1, 2, 3, 63] * 16], dtype=np.uint8)
    assert hc.mlx_pack(q6, 6).tobytes()[:3] == bytes([0x81, 0x30, 0xFC])  # 000001 000010 000011 111111
    q4 = np.array([list(range(8)) * 4], dtype=np.uint8)
    assert int(hc.mlx_pack(q4, 4)[0, 0]) == 0x76543210


def test_quantizer_follows_mlx_formula():
    """Each group's larger edge and zero are exact (MLX adjusts the scale so that both are), and the
    reconstruction error stays within a step (half a step, plus clipping at the far edge that
    the adjusted scale may no longer reach)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 128)).astype(np.float32)
    for bits in (3, 4, 6, 8):
        q, s, b = hc.mlx_quantize(w, bits, 32, np.float32)
        assert q.max() <= 2 ** bits - 1
        d = hc.mlx_dequantize(q, s, b, 32)
        step = np.abs(s).repeat(32, axis=1)
        assert (np.abs(d - w) <= step + 1e-6).all(), bits
        assert np.median(np.abs(d - w) / step) < 0.3, bits
        g = w.reshape(8, 4, 32)
        edge = np.where(np.abs(g.min(-1)) > np.abs(g.max(-1)), g.min(-1), g.max(-1))
        np.testing.assert_allclose(b, edge, rtol=0, atol=0)
        zero_q = -b / s  # the q that decodes to 0.0 is an integer in range
        np.testing.assert_allclose(zero_q, np.rint(zero_q), atol=1e-4)
        assert ((zero_q > -0.5) & (zero_q < 2 ** bits - 0.5)).all()


@pytest.mark.parametrize("bits", [3, 4, 6, 8])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("scale_dtype", ["F16", "BF16"])
def test_convert_one_matrix(bits, group_size, scale_dtype):
    """The engine's load-time conversion of one matrix equals numpy's dequantization: exactly for
    4-bit (Q4_1 blocks, scale = d, bias = m), within fp16 rounding for the F16 fallback."""
    import torch

    rng = np.random.default_rng(bits * 1000 + group_size)
    rows, cols = 6, 384
    w = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 3, (rows, 1))).astype(np.float32)
    q, s, b = hc.mlx_quantize(w, bits, group_size, np.float32)
    tdt = torch.float16 if scale_dtype == "F16" else torch.bfloat16
    s_t, b_t = torch.from_numpy(s).to(tdt), torch.from_numpy(b).to(tdt)
    raw = lambda t: t.view(torch.int16).numpy().tobytes()  # noqa: E731
    expect = hc.mlx_dequantize(q, s_t.float().numpy(), b_t.float().numpy(), group_size)
    exact_in_fp16 = bool((s_t.float().half().float() == s_t.float()).all() and
                         (b_t.float().half().float() == b_t.float()).all())
    dtype, got = _testing.mlx_convert(hc.mlx_pack(q, bits).tobytes(), raw(s_t), raw(b_t), scale_dtype, rows, cols,
                                      bits, group_size)
    assert got.shape == (rows, cols)
    if bits == 4 and exact_in_fp16:
        assert dtype == "Q4_1"
        np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-7)
    else:
        assert dtype == "F16"
        # fp16 rounding of scale * q + bias (one fp16 half-ulp; float32 FMA may differ by an ulp)
        assert (np.abs(got - expect) <= np.abs(expect) * 2.0 ** -11 + 2.0 ** -24).all()
    if scale_dtype == "F16":  # sanity: within a step of the original (bf16 scales round more coarsely)
        step = np.abs(s).repeat(group_size, axis=1)
        assert (np.abs(got - w) <= step * 1.01 + 1e-2).all()


def test_convert_bf16_scales_fp16_cannot_hold():
    """4-bit with bf16 scales that fp16 cannot represent exactly falls back to dequantized F16
    instead of rounding the scales into Q4_1."""
    import torch

    q = np.tile(np.arange(16, dtype=np.uint8), (2, 4))  # [2, 64]
    s = torch.tensor([[1e-6, 3.0e-5], [70000.0 / 15, 0.5]], dtype=torch.bfloat16)  # 1e-6: fp16 subnormal
    b = torch.tensor([[0.0, -1.0], [-65000.0, 0.25]], dtype=torch.bfloat16)
    raw = lambda t: t.view(torch.int16).numpy().tobytes()  # noqa: E731
    dtype, got = _testing.mlx_convert(hc.mlx_pack(q, 4).tobytes(), raw(s), raw(b), "BF16", 2, 64, 4, 32)
    assert dtype in ("F16", "F32")
    expect = hc.mlx_dequantize(q, s.float().numpy(), b.float().numpy(), 32)
    np.testing.assert_allclose(got, expect, rtol=1e-3, atol=1e-6)


# ------------------------------------------------------------------ whole models

MODELS = {
    # 4-bit, group 64, fp16 scales: every matrix and the embedding become Q4_1 (exact)
    "q4_g64_f16_untied": dict(spec=tm.family_spec("llama", "mlx_q4", seed=21), bits=4, group_size=64,
                              scale_dtype="F16"),
    # a per-layer mix as mlx-lm writes it: 3-, 6- and 8-bit with group sizes 32/64/128, bf16 scales,
    # tied (quantized) embedding
    "mixed_bf16_tied": dict(
        spec=tm.family_spec("llama", "mlx_mixed", tied=True, llama3_rope=True, seed=22), bits=6, group_size=64,
        scale_dtype="BF16",
        overrides={"model.embed_tokens": {"bits": 8, "group_size": 32},
                   "model.layers.0.self_attn.q_proj": {"bits": 3, "group_size": 128},
                   "model.layers.0.self_attn.k_proj": {"bits": 3, "group_size": 32},
                   "model.layers.1.mlp.down_proj": {"bits": 8, "group_size": 128},
                   "model.layers.1.mlp.up_proj": {"bits": 4, "group_size": 128}}),
}


@pytest.fixture(scope="module")
def tokens(varied_ids):
    return varied_ids


@pytest.mark.parametrize("name", list(MODELS))
def test_mlx_model_matches_transformers_on_dequantized_weights(name, tmp_path, tokenizer_dir, tokens, akunu_mod):
    case = MODELS[name]
    path, ref, deq = hc.save_mlx_checkpoint(case["spec"], tmp_path / name, tokenizer_dir, case["bits"],
                                            case["group_size"], case["scale_dtype"], case.get("overrides"))
    m = akunu_mod.Model(str(path))
    assert m.format == "mlx"
    dtypes = {t[0]: t[1] for t in m.tensors}
    if name.startswith("q4"):
        assert {d for n, d in dtypes.items() if n.endswith("proj.weight") or "embed" in n or "lm_head" in n} == {"Q4_1"}
        if m.backend == "cpu":  # the CPU repacks Q4_1 at upload: the converted copies are freed
            assert m._engine.loader_owned_bytes == 0
    else:
        # 4-bit with bf16 scales of ordinary magnitude: fp16 holds them exactly, so still Q4_1
        assert dtypes["model.layers.1.mlp.up_proj.weight"] == "Q4_1"
        assert dtypes["model.layers.0.self_attn.q_proj.weight"] == "F16"  # 3-bit: dequantized
        assert dtypes["model.embed_tokens.weight"] == "F16"  # 8-bit: dequantized
    got = m.logits(tokens)
    want = rf.hf_logits(ref, tokens)
    c = rf.compare_logits(want, got)
    assert rf.meets_bar(c), f"{name}: {c}"
    # and the dequantized weights really are the quantized model, not the float original
    orig = tm.make_hf_model(case["spec"], hc.vocab_size())
    assert rf.compare_logits(want, rf.hf_logits(orig, tokens))["max_abs"] > 1e-2
