"""Quantizers for the GGUF dtypes gguf-py can dequantize but not quantize (Q2_K .. Q6_K, IQ4_NL,
IQ4_XS), and tiny random Llama GGUFs whose matrices use them, one dtype per file or mixed per tensor.

The quantizers are deliberately simple (per-group min/max or absmax fits, scales rounded to the
stored width; no error search like llama.cpp's): they only have to produce valid blocks whose
dequantization (by gguf-py, the reference) is close to the input, so a model written with them
still behaves like the float model. Packing follows gguf-py's dequantize for each type, and
``quantize()`` is checked against it by the tests (round trip within the type's resolution).
Q5_0 / Q5_1 and the older types go through gguf-py's own quantizer.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as QT

import tiny_models as tm

IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)


def _f16(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).astype(np.float16)


def _bytes16(a) -> np.ndarray:
    """float16 values [n] -> uint8 [n, 2]."""
    return _f16(a).reshape(-1, 1).view(np.uint8)


def _div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


def _nibbles_q4_order(n: np.ndarray) -> np.ndarray:
    """[..., 32] values 0..15 -> [..., 16] bytes: low nibble element j, high nibble element j + 16."""
    return (n[..., :16] | (n[..., 16:] << 4)).astype(np.uint8)


def _scale_min_fit(b: np.ndarray, qmax: int, sub_bits: int):
    """Per-group unsigned fit value = scale * q - min (min >= 0) with q in 0..qmax, the scales and
    mins stored as sub_bits-bit multiples of per-block fp16 d / dmin. b: [n, groups, size]."""
    lo = np.minimum(b.min(-1), 0.0)
    scale = (b.max(-1) - lo) / qmax
    mn = -lo
    smax = (1 << sub_bits) - 1
    d = _f16(scale.max(-1) / smax).astype(np.float32)
    dmin = _f16(mn.max(-1) / smax).astype(np.float32)
    sc = np.clip(np.rint(_div(scale, d[:, None])), 0, smax).astype(np.uint8)
    m = np.clip(np.rint(_div(mn, dmin[:, None])), 0, smax).astype(np.uint8)
    eff_scale = d[:, None] * sc
    eff_min = dmin[:, None] * m
    q = np.clip(np.rint(_div(b + eff_min[..., None], eff_scale[..., None])), 0, qmax).astype(np.uint8)
    return d, dmin, sc, m, q


def _pack_k_scales(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Q4_K / Q5_K: eight 6-bit scales and mins [n, 8] -> the 12 packed bytes [n, 12]."""
    s = np.zeros((sc.shape[0], 12), np.uint8)
    s[:, 0:4] = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    s[:, 4:8] = m[:, :4] | ((m[:, 4:] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:] & 15) | ((m[:, 4:] & 15) << 4)
    return s


def quantize_q2_k(x):
    b = x.reshape(-1, 16, 16)
    d, dmin, sc, m, q = _scale_min_fit(b, 3, 4)
    q = q.reshape(-1, 2, 4, 32)  # element 128 h + 32 s + l -> bits 2s of qs[32 h + l]
    qs = (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)
    return np.concatenate([sc | (m << 4), qs, _bytes16(d), _bytes16(dmin)], axis=1)


def quantize_q4_k(x):
    b = x.reshape(-1, 8, 32)
    d, dmin, sc, m, q = _scale_min_fit(b, 15, 6)
    q = q.reshape(-1, 4, 2, 32)  # element 64 c + 32 h + l -> nibble h of qs[32 c + l]
    qs = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)
    return np.concatenate([_bytes16(d), _bytes16(dmin), _pack_k_scales(sc, m), qs], axis=1)


def quantize_q5_k(x):
    b = x.reshape(-1, 8, 32)
    d, dmin, sc, m, q = _scale_min_fit(b, 31, 6)
    qh = np.zeros((q.shape[0], 32), np.uint8)  # bit j of qh[l]: 5th bit of element 32 j + l
    for j in range(8):
        qh |= ((q[:, j] >> 4) & 1) << j
    lo = (q & 15).reshape(-1, 4, 2, 32)
    qs = (lo[:, :, 0] | (lo[:, :, 1] << 4)).reshape(-1, 128)
    return np.concatenate([_bytes16(d), _bytes16(dmin), _pack_k_scales(sc, m), qh, qs], axis=1)


def _signed_fit(b: np.ndarray, qmin: int, qmax: int, sub_max: int):
    """Per-group symmetric fit value = d * sc * q, sc in 0..sub_max, q in qmin..qmax."""
    scale = np.abs(b).max(-1) / qmax
    d = _f16(scale.max(-1) / sub_max).astype(np.float32)
    sc = np.clip(np.rint(_div(scale, d[:, None])), 0, sub_max).astype(np.int32)
    q = np.clip(np.rint(_div(b, (d[:, None] * sc)[..., None])), qmin, qmax).astype(np.int32)
    return d, sc, q


def quantize_q3_k(x):
    b = x.reshape(-1, 16, 16)
    d, sc, q = _signed_fit(b, -4, 3, 31)
    u = (sc + 32).astype(np.uint8)  # 6-bit scale codes
    scales = np.zeros((u.shape[0], 12), np.uint8)
    for g in range(16):
        scales[:, g % 8] |= (u[:, g] & 15) << (4 * (g // 8))
        scales[:, 8 + g % 4] |= ((u[:, g] >> 4) & 3) << (2 * (g // 4))
    qq = (q + 4).astype(np.uint8).reshape(-1, 256)  # low 2 bits + 4 * high bit
    low = (qq & 3).reshape(-1, 2, 4, 32)
    qs = (low[:, :, 0] | (low[:, :, 1] << 2) | (low[:, :, 2] << 4) | (low[:, :, 3] << 6)).reshape(-1, 64)
    high = (qq >> 2).reshape(-1, 8, 32)
    hmask = np.zeros((qq.shape[0], 32), np.uint8)
    for j in range(8):
        hmask |= high[:, j] << j
    return np.concatenate([hmask, qs, scales, _bytes16(d)], axis=1)


def quantize_q6_k(x):
    b = x.reshape(-1, 16, 16)
    scale = np.abs(b).max(-1) / 31
    d = _f16(scale.max(-1) / 127).astype(np.float32)
    sc = np.clip(np.rint(_div(scale, d[:, None])), -128, 127).astype(np.int8)
    q = np.clip(np.rint(_div(b, (d[:, None] * sc)[..., None])), -32, 31).astype(np.int32)
    u = (q + 32).astype(np.uint8).reshape(-1, 2, 128)
    r = np.arange(128)
    ql = np.zeros((u.shape[0], 2, 64), np.uint8)
    qh = np.zeros((u.shape[0], 2, 32), np.uint8)
    for part in range(2):  # element 128 h + r: nibble r // 64 of ql[64 h + r % 64]
        ql |= (u[:, :, r[part * 64:(part + 1) * 64]] & 15) << (4 * part)
    for s in range(4):  # high 2 bits: bits 2 (r // 32) of qh[32 h + r % 32]
        qh |= (u[:, :, r[s * 32:(s + 1) * 32]] >> 4) << (2 * s)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.view(np.uint8), _bytes16(d)], axis=1)


def _nearest_iq4(v: np.ndarray) -> np.ndarray:
    return np.abs(v[..., None] - IQ4_VALUES).argmin(-1).astype(np.uint8)


def quantize_iq4_nl(x):
    b = x.reshape(-1, 32)
    d = _f16(np.abs(b).max(-1) / 127).astype(np.float32)
    n = _nearest_iq4(_div(b, d[:, None]))
    return np.concatenate([_bytes16(d), _nibbles_q4_order(n)], axis=1)


def quantize_iq4_xs(x):
    b = x.reshape(-1, 8, 32)
    target = np.abs(b).max(-1) / 127
    d = _f16(target.max(-1) / 31).astype(np.float32)
    ls = np.clip(np.rint(_div(target, d[:, None])), 0, 31).astype(np.int32) + 32  # stored codes
    n = _nearest_iq4(_div(b, (d[:, None] * (ls - 32))[..., None]))
    scales_h = np.zeros(b.shape[0], np.uint16)
    scales_l = np.zeros((b.shape[0], 4), np.uint8)
    for j in range(8):
        scales_h |= ((ls[:, j] >> 4) & 3).astype(np.uint16) << (2 * j)
        scales_l[:, j // 2] |= ((ls[:, j] & 15) << (4 * (j % 2))).astype(np.uint8)
    qs = _nibbles_q4_order(n).reshape(-1, 128)
    return np.concatenate([_bytes16(d), scales_h.reshape(-1, 1).view(np.uint8), scales_l, qs], axis=1)


_QUANTIZERS = {
    QT.Q2_K: quantize_q2_k, QT.Q3_K: quantize_q3_k, QT.Q4_K: quantize_q4_k, QT.Q5_K: quantize_q5_k,
    QT.Q6_K: quantize_q6_k, QT.IQ4_NL: quantize_iq4_nl, QT.IQ4_XS: quantize_iq4_xs,
}


def quantize(x: np.ndarray, qtype: QT) -> np.ndarray:
    """float32 [..., k] -> uint8 GGUF blocks [..., k / block_size * type_size] (gguf-py's shape)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    fn = _QUANTIZERS.get(qtype)
    if fn is None:
        return np.asarray(gguf.quants.quantize(x, qtype))
    return fn(x).reshape(gguf.quants.quant_shape_to_byte_shape(x.shape, qtype))


# --------------------------------------------------------------------------------------
# tiny GGUF models
# --------------------------------------------------------------------------------------

# Llama spec fields (tiny_models.ArchSpec): every matrix dimension a multiple of 256 (the superblock).
# (gguf_writer is imported lazily: it needs the tokenizer test data, the quantizers above do not.)
KQ_SHAPE = dict(hidden=256, n_heads=4, n_kv_heads=2, head_dim=64, ffn=512, n_layers=2)

# A llama.cpp Q4_K_M-style mix: Q4_K matrices, Q6_K for attn_v / ffn_down / output, and the
# rest of the new dtypes sprinkled over the other tensors so that one file exercises them all.
MIXED_DTYPES = {
    "token_embd": QT.Q4_K, "output": QT.Q6_K,
    "blk.0.attn_q": QT.Q4_K, "blk.0.attn_k": QT.Q5_K, "blk.0.attn_v": QT.Q6_K, "blk.0.attn_output": QT.Q3_K,
    "blk.0.ffn_gate": QT.Q2_K, "blk.0.ffn_up": QT.IQ4_XS, "blk.0.ffn_down": QT.Q6_K,
    "blk.1.attn_q": QT.Q5_0, "blk.1.attn_k": QT.Q5_1, "blk.1.attn_v": QT.IQ4_NL, "blk.1.attn_output": QT.Q4_K,
    "blk.1.ffn_gate": QT.Q4_K, "blk.1.ffn_up": QT.Q8_0, "blk.1.ffn_down": QT.Q5_K,
}
# The same dtypes in other roles (Q6_K token embedding, the small formats in the FFN, ...).
MIXED_DTYPES_B = {
    "token_embd": QT.Q6_K, "output": QT.Q4_K,
    "blk.0.attn_q": QT.Q3_K, "blk.0.attn_k": QT.IQ4_NL, "blk.0.attn_v": QT.Q5_1, "blk.0.attn_output": QT.Q4_K,
    "blk.0.ffn_gate": QT.Q5_K, "blk.0.ffn_up": QT.Q4_K, "blk.0.ffn_down": QT.Q2_K,
    "blk.1.attn_q": QT.IQ4_XS, "blk.1.attn_k": QT.IQ4_XS, "blk.1.attn_v": QT.Q6_K, "blk.1.attn_output": QT.Q5_0,
    "blk.1.ffn_gate": QT.Q5_0, "blk.1.ffn_up": QT.Q5_0, "blk.1.ffn_down": QT.Q6_K,
}


@dataclass(frozen=True)
class KQuantCase:
    name: str
    dtype: str | dict  # one ggml type name for every matrix, or a map like MIXED_DTYPES
    tied: bool = False
    seed: int = 0
    spec_overrides: dict = field(default_factory=dict)
    shape: dict = field(default_factory=lambda: dict(KQ_SHAPE))

    @property
    def spec(self):
        return tm.family_spec("llama", self.name, dtype="F32", tied=self.tied, seed=self.seed, **self.shape,
                              **self.spec_overrides)

    def matrix_dtype(self, tensor_name: str) -> QT:
        if isinstance(self.dtype, str):
            return QT[self.dtype]
        return self.dtype[tensor_name.removesuffix(".weight")]


NEW_DTYPES = ["Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"]
# Uniform files of the Q4_K_M family (the embedding included), and two mixed files that between
# them put every new dtype in several roles. (Each file costs ~10 s of transformers work.)
CASES = {c.name: c for c in [
    KQuantCase("q4_k_tied", "Q4_K", tied=True, seed=20),
    KQuantCase("q5_k", "Q5_K", tied=False, seed=21),
    KQuantCase("q6_k_tied", "Q6_K", tied=True, seed=22),
    KQuantCase("mixed_q4_k_m", MIXED_DTYPES, tied=False, seed=40),
    KQuantCase("mixed_b_tied_llama3", MIXED_DTYPES_B, tied=True, seed=41, spec_overrides={"llama3_rope": True}),
]}


def write_case_gguf(path: Path, case: KQuantCase, tensors: dict[str, np.ndarray]) -> Path:
    """gguf_writer.write_gguf, with each 2-D tensor quantized to case.matrix_dtype(name) by quantize()."""
    import gguf_writer as gw

    mixed = {name: case.matrix_dtype(name) for name, arr in tensors.items() if np.ndim(arr) == 2}
    return gw.write_gguf(path, case.spec, tensors, dtype_override=mixed, quantize=quantize,
                         file_type=gguf.LlamaFileType.MOSTLY_Q4_K_M)


def build_case_gguf(case: KQuantCase, out_dir: Path):
    """Create (or reuse) the GGUF of ``case``; returns (path, original HF model)."""
    import gguf_writer as gw

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = case.spec
    model = tm.make_hf_model(spec, gw.vocab_size_of())
    path = out_dir / f"tiny-kq-{case.name}.gguf"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        write_case_gguf(tmp, case, gw.gguf_tensors_from_hf(model, spec))
        os.replace(tmp, path)
    return path, model
