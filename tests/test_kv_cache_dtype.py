"""The 8-bit KV cache (kv_cache_dtype="q8_0", src/core/kv_cache_q8.h, docs/adr/0011-q8-kv-cache.md).

Kernel level, through the test seams in akunu._testing (src/python/bind_testing_device.cpp):
  _testing.device_rope_kv_write(backend, kv_cache_dtype, qkv, n_heads, n_kv_heads, head_dim, rope_dim, max_seq,
                                position, inv_freq, neox) -> (qkv rotated, k_cache bytes, v_cache bytes)
  _testing.device_attention(backend, kv_cache_dtype, q, k_cache, v_cache, n_heads, n_kv_heads, head_dim, max_seq,
                            position, scale, window, softcap) -> out
the cache written by the q8 RoPE + KV-write kernels is gguf-py's Q8_0 of the RoPE-rotated V rows and
of the K rows taken into the Hadamard basis of kv_cache_q8.h (docs/adr/0031), byte for byte; the
queries come out in the same basis, the attention kernel dequantizes the cache exactly as gguf-py
does, and attention over it matches a float64 reference on the dequantized cache.

Model level: the Q8_0 cache against the F16 cache on SmolLM2 over ~4096 tokens of real English,
on tiny Gemma 2 / Gemma 3 / Mistral models (sliding windows, soft-capped scores), and the API.
"""
from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

import gguf
import gguf_writer as gw
import references as rf
import tiny_models as tm
from akunu import _core, _testing

Q8_0 = gguf.GGMLQuantizationType.Q8_0
BLOCK = 32


# ------------------------------------------------------------------ kernel level


def q8_planes(raw: bytes, n_kv_heads: int, max_seq: int, head_dim: int):
    """The Q8_0 cache layout: int8 values [n_kv_heads, max_seq, head_dim], then fp16 scales
    [n_kv_heads, max_seq, head_dim / 32]."""
    n_values = n_kv_heads * max_seq * head_dim
    n_scales = n_values // BLOCK
    assert len(raw) == n_values + 2 * n_scales, len(raw)
    values = np.frombuffer(raw, np.int8, n_values).reshape(n_kv_heads, max_seq, head_dim)
    scales = np.frombuffer(raw, np.uint16, n_scales, offset=n_values).reshape(n_kv_heads, max_seq, head_dim // BLOCK)
    return values, scales


def as_gguf_blocks(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """One cache row's planes as GGUF Q8_0 blocks (fp16 d, then 32 int8) for byte comparison."""
    nb = scales.shape[-1]
    out = np.empty((nb, 34), np.uint8)
    out[:, :2] = scales.view(np.uint8).reshape(nb, 2)
    out[:, 2:] = values.view(np.uint8).reshape(nb, BLOCK)
    return out.reshape(-1)


def dequantized_planes(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    d = np.repeat(scales.view(np.float16).astype(np.float32), BLOCK, axis=-1)
    return d * values.astype(np.float32)


def inv_freq(rope_dim: int, theta: float = 10000.0) -> np.ndarray:
    if rope_dim == 0:
        return np.ones(1, np.float32)  # the kernel reads none; the hook wants a buffer
    return (1.0 / theta ** (np.arange(0, rope_dim, 2, dtype=np.float64) / rope_dim)).astype(np.float32)


def hadamard_blocks(x: np.ndarray) -> np.ndarray:
    """kv_cache_q8.h's key transform of float32 rows: each 32-dim block through the unnormalized
    Walsh-Hadamard butterflies, stage h = 1, 2, 4, 8, 16, (x[i], x[i + h]) <- (x[i] + x[i + h],
    x[i] - x[i + h]), in float32 as the kernels do (so byte comparisons hold)."""
    b = np.array(x, np.float32).reshape(*x.shape[:-1], -1, BLOCK)
    h = 1
    while h < BLOCK:
        pairs = b.reshape(*b.shape[:-1], BLOCK // (2 * h), 2, h)
        low, high = pairs[..., 0, :].copy(), pairs[..., 1, :].copy()
        pairs[..., 0, :], pairs[..., 1, :] = low + high, low - high
        h *= 2
    return b.reshape(x.shape)


def sylvester_hadamard(n: int) -> np.ndarray:
    H = np.ones((1, 1))
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return H


def test_hadamard_butterflies_are_the_hadamard_transform():
    """The butterflies above are x @ H32 (Sylvester's +-1 matrix, symmetric, H H = 32 I): the basis
    change that leaves every q . k unchanged once q is also transformed and scaled by 1/32."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 96)).astype(np.float32)
    H = sylvester_hadamard(BLOCK)
    expect = (x.astype(np.float64).reshape(5, 3, BLOCK) @ H).reshape(5, 96)
    assert np.allclose(hadamard_blocks(x), expect, rtol=1e-6, atol=1e-5)
    q = rng.standard_normal(96).astype(np.float32)
    assert np.isclose(hadamard_blocks(q) @ hadamard_blocks(x).T / BLOCK, q @ x.T, rtol=1e-5).all()


def hard_rows(rng, n_rows: int, head_dim: int) -> np.ndarray:
    """Random rows whose blocks include the cases that decide bit-exactness: all zeros, ties at .5
    (amax 127 gives d = 1, so x.5 must round away from zero), tiny values (subnormal fp16 scales),
    large ones and outlier channels."""
    rows = rng.standard_normal((n_rows, head_dim)).astype(np.float32)
    blocks = rows.reshape(n_rows, head_dim // BLOCK, BLOCK)
    blocks[0, 0] = 0.0
    ties = (rng.integers(-120, 120, BLOCK) + 0.5).astype(np.float32)
    ties[0] = 127.0
    blocks[1 % n_rows, 0] = ties
    blocks[2 % n_rows, -1] *= np.float32(1e-6)
    blocks[3 % n_rows, 0] *= np.float32(3000.0)
    blocks[4 % n_rows, :, 5] = np.float32(40.0)  # an outlier channel in every block of the row
    return rows


def write_cache(kv_cache_dtype, k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, position, rope_dim, seed=0):
    """One RoPE + KV-write command for len(k_rows) // n_kv_heads token rows (K/V rows per token,
    head by head) with random Q: (qkv after rotation, k bytes, v bytes)."""
    rows = k_rows.shape[0] // n_kv_heads
    q = np.random.default_rng(seed).standard_normal((rows, n_heads * head_dim)).astype(np.float32)
    qkv = np.concatenate([q, k_rows.reshape(rows, -1), v_rows.reshape(rows, -1)], axis=1)
    return _testing.device_rope_kv_write("cpu", kv_cache_dtype, np.ascontiguousarray(qkv), n_heads, n_kv_heads,
                                         head_dim, rope_dim, max_seq, position, inv_freq(rope_dim), True)


@pytest.mark.parametrize("head_dim,rope_dim", [(64, 0), (64, 64), (128, 96), (32, 32)])
def test_q8_write_is_gguf_q8_0_byte_for_byte(head_dim, rope_dim):
    n_heads, n_kv_heads, max_seq, position, rows = 4, 2, 24, 5, 7
    rng = np.random.default_rng(head_dim + rope_dim)
    k_rows = hard_rows(rng, rows * n_kv_heads, head_dim)
    v_rows = hard_rows(rng, rows * n_kv_heads, head_dim)[::-1].copy()
    rotated, k_raw, v_raw = write_cache("q8_0", k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, position,
                                        rope_dim)
    rotated_f16, _, _ = write_cache("f16", k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, position, rope_dim)
    q_dim, kv_dim = n_heads * head_dim, n_kv_heads * head_dim
    # Both caches take the same RoPE; the Q8_0 one then leaves the queries in the keys' basis (times
    # 1/32, exact) and the K and V rows in qkv as RoPE left them.
    assert np.array_equal(rotated[:, :q_dim], hadamard_blocks(rotated_f16[:, :q_dim]) * np.float32(1 / BLOCK))
    assert np.array_equal(rotated[:, q_dim:], rotated_f16[:, q_dim:])
    for raw, start, basis in ((k_raw, q_dim, hadamard_blocks), (v_raw, q_dim + kv_dim, lambda x: x)):
        values, scales = q8_planes(raw, n_kv_heads, max_seq, head_dim)
        for r in range(rows):
            for h in range(n_kv_heads):
                x = basis(rotated_f16[r, start + h * head_dim:start + (h + 1) * head_dim])
                expect = gguf.quants.quantize(x.reshape(1, -1), Q8_0).reshape(-1)
                got = as_gguf_blocks(values[h, position + r], scales[h, position + r])
                assert np.array_equal(got, expect), f"row {r} head {h}: differs from gguf-py's Q8_0"
                assert np.array_equal(dequantized_planes(values[h, position + r], scales[h, position + r]),
                                      gguf.quants.dequantize(expect, Q8_0).reshape(-1))
        untouched = np.ones(max_seq, bool)
        untouched[position:position + rows] = False
        assert not values[:, untouched].any() and not scales[:, untouched].any(), "only the rows' positions are written"


def test_q8_write_and_attention_give_the_scores_of_the_unrotated_keys():
    """RoPE + KV-write then attention, both Q8_0, for the last 16 of 48 tokens, against float64
    attention of the RoPE-rotated q, K and V as they were before quantization: the basis change
    cancels, and what is left is Q8_0's rounding, a fraction of the plain Q8_0 keys' on keys with an
    outlier dim (measured over seeds 0-9: RMS error 0.23-0.33x plain Q8_0's)."""
    n_heads, n_kv_heads, head_dim, max_seq, n_tokens, rows = 4, 2, 64, 48, 48, 16
    rng = np.random.default_rng(0)
    k_rows = rng.standard_normal((n_tokens * n_kv_heads, head_dim)).astype(np.float32)
    k_rows[:, 7] *= 30.0  # an outlier dim, as real keys have
    v_rows = rng.standard_normal((n_tokens * n_kv_heads, head_dim)).astype(np.float32)
    rotated, k_raw, v_raw = write_cache("q8_0", k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, 0, head_dim)
    rotated_f16, _, _ = write_cache("f16", k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, 0, head_dim)
    q_dim, kv_dim, position = n_heads * head_dim, n_kv_heads * head_dim, n_tokens - rows
    got = _testing.device_attention("cpu", "q8_0", np.ascontiguousarray(rotated[-rows:, :q_dim]), k_raw, v_raw,
                                    n_heads, n_kv_heads, head_dim, max_seq, position, 0.125)
    K, V = (rotated_f16[:, q_dim + i * kv_dim:q_dim + (i + 1) * kv_dim].reshape(n_tokens, n_kv_heads, head_dim)
            .swapaxes(0, 1) for i in (0, 1))
    q_f16 = rotated_f16[-rows:, :q_dim]
    exact = reference_attention(q_f16, K, V, n_heads, n_kv_heads, position, 0.125, 0, 0.0)
    plain_K, plain_V = (gguf.quants.dequantize(gguf.quants.quantize(x, Q8_0), Q8_0) for x in (K, V))
    plain = reference_attention(q_f16, plain_K, plain_V, n_heads, n_kv_heads, position, 0.125, 0, 0.0)
    rms, plain_rms = np.sqrt(np.mean((got - exact) ** 2)), np.sqrt(np.mean((plain - exact) ** 2))
    assert rms < 0.5 * plain_rms, f"keys in the Hadamard basis: RMS error {rms:.2e}; plain Q8_0 keys {plain_rms:.2e}"


def test_q8_attention_dequantizes_exactly_like_gguf():
    """Attention over a single cached key weighs it by exactly 1, so the output is the kernel's
    dequantized V row: fp16(d) * q, bit for bit as gguf-py's dequantize."""
    n_heads = n_kv_heads = 2
    head_dim, max_seq = 96, 4
    rng = np.random.default_rng(7)
    k_rows = rng.standard_normal((n_kv_heads, head_dim)).astype(np.float32)
    v_rows = hard_rows(rng, 5, head_dim)[3:5].copy()  # the large block and the outlier channel
    _, k_raw, v_raw = write_cache("q8_0", k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, 0, 0)
    q = rng.standard_normal((1, n_heads * head_dim)).astype(np.float32)
    out = _testing.device_attention("cpu", "q8_0", q, k_raw, v_raw, n_heads, n_kv_heads, head_dim, max_seq, 0, 0.125)
    expect = gguf.quants.dequantize(gguf.quants.quantize(v_rows, Q8_0), Q8_0)
    assert np.array_equal(out.reshape(n_kv_heads, head_dim), expect)


def reference_attention(q, K, V, n_heads, n_kv_heads, position, scale, window, softcap):
    """float64 causal attention: q [rows, n_heads * hd], K/V [n_kv_heads, max_seq, hd] (dequantized)."""
    rows, hd = q.shape[0], K.shape[-1]
    group = n_heads // n_kv_heads
    out = np.zeros((rows, n_heads * hd))
    for r in range(rows):
        n_ctx = position + r + 1
        first = n_ctx - window if window and n_ctx > window else 0
        for h in range(n_heads):
            k, v = K[h // group, first:n_ctx].astype(np.float64), V[h // group, first:n_ctx].astype(np.float64)
            s = k @ q[r, h * hd:(h + 1) * hd].astype(np.float64) * scale
            if softcap:
                s = softcap * np.tanh(s / softcap)
            w = np.exp(s - s.max())
            out[r, h * hd:(h + 1) * hd] = (w / w.sum()) @ v
    return out


@pytest.mark.parametrize("kv_cache_dtype", ["q8_0", "f16"])
@pytest.mark.parametrize("head_dim,window,softcap", [(64, 0, 0.0), (128, 9, 0.0), (32, 0, 5.0), (96, 6, 4.0)])
def test_attention_matches_reference_on_the_dequantized_cache(kv_cache_dtype, head_dim, window, softcap):
    n_heads, n_kv_heads, max_seq, n_cached = 6, 2, 48, 40
    rng = np.random.default_rng(head_dim + window)
    k_rows = (2.0 * rng.standard_normal((n_cached * n_kv_heads, head_dim))).astype(np.float32)
    v_rows = rng.standard_normal((n_cached * n_kv_heads, head_dim)).astype(np.float32)
    k_rows[:, 3] += 8.0  # an outlier channel, as real keys have
    _, k_raw, v_raw = write_cache(kv_cache_dtype, k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, 0, 0)
    if kv_cache_dtype == "q8_0":
        K = dequantized_planes(*q8_planes(k_raw, n_kv_heads, max_seq, head_dim))
        V = dequantized_planes(*q8_planes(v_raw, n_kv_heads, max_seq, head_dim))
        # The cache holds gguf-py's Q8_0 of the rows (the keys in their Hadamard basis): attention
        # error is float rounding on top of it. The queries here are random rows of that basis.
        assert np.array_equal(K[:, :n_cached], gguf.quants.dequantize(gguf.quants.quantize(
            hadamard_blocks(k_rows).reshape(n_cached, n_kv_heads, head_dim).swapaxes(0, 1), Q8_0), Q8_0))
    else:
        K = np.frombuffer(k_raw, np.float16).reshape(n_kv_heads, max_seq, head_dim).astype(np.float32)
        V = np.frombuffer(v_raw, np.float16).reshape(n_kv_heads, max_seq, head_dim).astype(np.float32)
    scale = 1.0 / np.sqrt(head_dim)
    for position, rows in ((0, 1), (30, 10), (39, 1), (17, 5)):  # prefill chunks and decode rows
        q_stride = n_heads * head_dim + 8  # rows inside a wider qkv buffer, as in the engine
        q = rng.standard_normal((rows, q_stride)).astype(np.float32)
        got = _testing.device_attention("cpu", kv_cache_dtype, q, k_raw, v_raw, n_heads, n_kv_heads, head_dim,
                                        max_seq, position, scale, window, softcap)
        ref = reference_attention(q[:, :n_heads * head_dim], K, V, n_heads, n_kv_heads, position, scale, window,
                                  softcap)
        err = np.abs(got - ref).max()
        assert err < 2e-5 * max(1.0, np.abs(ref).max()), f"position {position}, rows {rows}: max error {err:.3e}"


def test_kernel_hooks_reject_unknown_dtypes():
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        write_cache("q4_0", np.zeros((2, 32), np.float32), np.zeros((2, 32), np.float32), 2, 2, 32, 4, 0, 0)


# ------------------------------------------------------------------ API


@pytest.mark.parametrize("bad", ["q4", "Q8_0", "q8", "", "f32", 5, None, b"q8_0"])
def test_bad_kv_cache_dtype_is_a_value_error(akunu_mod, smollm2_path, bad):
    with pytest.raises(ValueError, match=r"kv_cache_dtype must be one of \('f16', 'q8_0'\)"):
        akunu_mod.Model(str(smollm2_path), kv_cache_dtype=bad)


def test_core_rejects_bad_kv_cache_dtype(smollm2_path):
    with pytest.raises(ValueError, match="kv_cache_dtype must be 'f16' or 'q8_0'"):
        _core.Model(str(smollm2_path), "cpu", 64, 0, "q4")


# The CPU's kernels are this file's subject (tests/test_cuda.py compares other backends with them).
@pytest.fixture(scope="module")
def smollm2_f16(akunu_mod, smollm2_path):
    return akunu_mod.Model(str(smollm2_path), backend="cpu", kv_cache_dtype="f16", context_length=4096)


@pytest.fixture(scope="module")
def smollm2_q8(akunu_mod, smollm2_path):
    return akunu_mod.Model(str(smollm2_path), backend="cpu", kv_cache_dtype="q8_0", context_length=4096)


def test_q8_cache_is_the_size_of_its_planes(smollm2_f16, smollm2_q8):
    assert smollm2_f16.kv_cache_dtype == "f16" and smollm2_q8.kv_cache_dtype == "q8_0"
    c = smollm2_f16.config
    assert smollm2_q8.context_length == smollm2_f16.context_length == 4096
    head_dim = c["head_dim"]
    f16_bytes = 2 * c["n_layers"] * c["n_kv_heads"] * smollm2_f16.context_length * head_dim * 2
    assert smollm2_f16.kv_cache_bytes == f16_bytes
    # int8 values plus one fp16 scale per 32: (head_dim + head_dim / 32 * 2) / (head_dim * 2) of F16.
    assert smollm2_q8.kv_cache_bytes * (head_dim * 2) == f16_bytes * (head_dim + head_dim // 32 * 2)


def test_q8_decode_table_runs_the_q8_kernels(smollm2_q8):
    kernels = {cmd["kernel"] for cmd in smollm2_q8.dispatch_table}
    assert {"rope_interleaved_kv_write_q8", "attention_q8kv"} <= kernels
    assert not any(k.endswith(("f16kv", "_kv_write")) for k in kernels), kernels


def test_q8_greedy_generation_matches_f16(smollm2_f16, smollm2_q8):
    prompt = "The capital of France is"
    f16 = smollm2_f16.generate_tokens(prompt, max_tokens=16)
    q8 = smollm2_q8.generate_tokens(prompt, max_tokens=16)
    assert q8[:8] == f16[:8], (f16, q8)
    assert "Paris" in smollm2_q8.generate(prompt, max_tokens=8)
    chat = smollm2_q8.chat([{"role": "user", "content": "Name three colors of the rainbow."}], max_tokens=24)
    colors = ("red", "orange", "yellow", "green", "blue", "indigo", "violet")
    assert sum(color in chat.lower() for color in colors) >= 2, chat


def test_q8_needs_head_dim_a_multiple_of_32(akunu_mod, tiny_gguf):
    path, _ = tiny_gguf("f16_tied")  # head_dim 16
    with pytest.raises(akunu_mod.UnsupportedError, match=r"kv_cache_dtype 'q8_0' needs head_dim a multiple of 32.*16"):
        akunu_mod.Model(str(path), backend="cpu", kv_cache_dtype="q8_0")
    assert akunu_mod.Model(str(path), backend="cpu", kv_cache_dtype="f16").kv_cache_dtype == "f16"


def akunu_cli(*args):
    return subprocess.run([sys.executable, "-m", "akunu.cli", *args], capture_output=True, text=True, timeout=300)


def test_cli_takes_kv_cache_dtype(smollm2_path):
    r = akunu_cli("inspect", str(smollm2_path), "--backend", "cpu", "--kv-cache-dtype", "q8_0")
    assert r.returncode == 0, r.stderr
    assert re.search(r"kv cache:\s+[\d.]+ MB \(q8_0\)", r.stdout), r.stdout
    assert "attention_q8kv" in r.stdout
    r = akunu_cli("bench", "-m", str(smollm2_path), "--backend", "cpu", "-p", "16", "-n", "4", "-r", "1",
                  "--kv-cache-dtype", "q8_0")
    assert r.returncode == 0, r.stderr
    assert "kv cache: q8_0" in r.stdout and len([x for x in r.stdout.splitlines() if x.startswith("| SmolLM2")]) == 2
    r = akunu_cli("run", "-m", str(smollm2_path), "--kv-cache-dtype", "q4", "hi")
    assert r.returncode == 2 and "--kv-cache-dtype" in r.stderr and "q8_0" in r.stderr


# ------------------------------------------------------------------ quality on a real model

# Prose-heavy standard-library modules: their docstrings are real English already on disk.
DOC_MODULES = ("argparse", "subprocess", "difflib", "heapq", "textwrap", "json", "csv", "logging", "pickle",
               "unittest", "string", "functools")
LONG_TOKENS = 4096


def long_english_text() -> str:
    parts = []
    for name in DOC_MODULES:
        module = importlib.import_module(name)
        if module.__doc__:
            parts.append(inspect.cleandoc(module.__doc__))
        for attr, obj in sorted(vars(module).items()):
            doc = inspect.getdoc(obj) if not attr.startswith("_") and getattr(obj, "__module__", None) == name else None
            if doc and len(doc) > 200:
                parts.append(doc)
    return "\n\n".join(parts)


def chunked_kl_and_margin(ref: np.ndarray, got: np.ndarray, rows: int = 256):
    """Per position: KL(softmax(ref) || softmax(got)) and ref's top-1 minus top-2 logit (chunked:
    float64 copies of [4096, vocab] would not fit comfortably)."""
    kl, margin = [], []
    for i in range(0, ref.shape[0], rows):
        lp, lq = rf.log_softmax(ref[i:i + rows]), rf.log_softmax(got[i:i + rows])
        kl.append((np.exp(lp) * (lp - lq)).sum(-1))
        top2 = np.partition(ref[i:i + rows], -2, axis=-1)[:, -2:]
        margin.append(top2[:, 1] - top2[:, 0])
    return np.concatenate(kl), np.concatenate(margin)


def test_q8_cache_quality_on_smollm2_long_context(smollm2_f16, smollm2_q8):
    """Teacher-forced logits of ~4096 tokens of standard-library docstrings, Q8_0 cache against
    F16 cache: issue 31's bars, mean KL <= 2e-3 and argmax agreement >= 99 %, and >= 99.9 % where the
    F16 prediction leads by >= 0.5 logit. Measured (docs/adr/0031): 99.34 %, mean KL 2.6e-4 with the
    keys in their Hadamard basis; 98.85 %, 5.6e-4 with plain Q8_0 keys, which would fail the 99 %
    (transformers with its K/V fake-quantized the same two ways: 99.27 % and 99.05 %)."""
    ids = smollm2_f16.tokenizer.encode(long_english_text(), add_special=True)[:LONG_TOKENS]
    assert len(ids) == LONG_TOKENS, len(ids)
    f16 = smollm2_f16.logits(ids)
    q8 = smollm2_q8.logits(ids)
    assert q8.shape == f16.shape and np.isfinite(q8).all()
    agree = f16.argmax(-1) == q8.argmax(-1)
    kl, margin = chunked_kl_and_margin(f16, q8)
    confident = margin >= 0.5
    measured = (f"argmax agreement {agree.mean():.4f} ({(~agree).sum()} of {len(ids)} flipped, largest F16 margin "
                f"flipped {margin[~agree].max(initial=0):.3f}), {agree[confident].mean():.4f} where the margin is "
                f">= 0.5 ({confident.sum()} positions), mean KL {kl.mean():.3e}, max KL {kl.max():.3e}")
    print(measured)
    assert kl.mean() <= 2e-3, measured
    assert agree.mean() >= 0.99, measured
    assert agree[confident].mean() >= 0.999, measured


# ------------------------------------------------------------------ sliding windows and soft-capping

# Gemma 2: a 32-token window on every other layer and soft-capped scores; Gemma 3: windows on 5 of 6
# layers with their own RoPE base, QK-norm (head_dim 32 here: its base spec has 16, which Q8_0
# cannot hold); Mistral: a 48-token window on every layer, interleaved RoPE. The ~300-token prompt
# runs far past every window.
WINDOWED = {
    "gemma2": tm.ARCH_SPECS["gemma2_f16"],
    "gemma3": replace(tm.ARCH_BASE["gemma3"], name="gemma3_f16_hd32", dtype="F16", head_dim=32),
    "mistral": tm.ARCH_SPECS["mistral_f16"],
}


def fake_q8_0(x, interleaved: bool, keys: bool):
    """torch K or V [..., head_dim] through the Q8_0 cache and back, blocks of 32 taken in the cache's
    element order: for interleaved RoPE the GGUF's permuted order (element j of the cache row is HF's
    j // 2 + (j % 2) * head_dim / 2), which transformers un-permutes. Keys are quantized in the
    Hadamard basis (x @ H32 per block, back with H32 / 32: Sylvester's matrix, not the kernels'
    butterflies)."""
    import torch

    hd = x.shape[-1]
    order = torch.tensor([j // 2 + (j % 2) * (hd // 2) for j in range(hd)]) if interleaved else torch.arange(hd)
    blocks = x[..., order].float().reshape(*x.shape[:-1], hd // BLOCK, BLOCK)
    H = torch.tensor(sylvester_hadamard(BLOCK), dtype=torch.float32)
    if keys:
        blocks = blocks @ H
    d = blocks.abs().amax(-1, keepdim=True) / 127
    q = torch.round(blocks * torch.where(d == 0, torch.zeros_like(d), 1 / d))
    blocks = d.half().float() * q
    if keys:
        blocks = blocks @ H / BLOCK
    out = torch.empty_like(x, dtype=torch.float32)
    out[..., order] = blocks.reshape(*x.shape[:-1], hd)
    return out


def q8_reference_logits(spec, path, tokens) -> np.ndarray:
    """transformers float32 on the GGUF's dequantized weights with its post-RoPE K and V
    fake-quantized to Q8_0 before attention: what an exact Q8_0 cache computes."""
    module = importlib.import_module(f"transformers.models.{spec.family}.modeling_{spec.family}")
    eager = module.eager_attention_forward
    interleaved = spec.family in gw.PERMUTED_QK  # converted by LlamaModel: Q/K permuted

    def q8_attention(attn, query, key, value, *args, **kwargs):
        return eager(attn, query, fake_q8_0(key, interleaved, keys=True), fake_q8_0(value, False, keys=False), *args,
                     **kwargs)

    module.eager_attention_forward = q8_attention
    try:
        return rf.hf_logits(rf.reference_from_gguf(path, spec), tokens)
    finally:
        module.eager_attention_forward = eager


@pytest.mark.parametrize("name", list(WINDOWED))
def test_q8_cache_matches_q8_reference_with_windows_and_softcaps(name, akunu_mod, gguf_dir, varied_ids):
    """Against transformers with its K/V fake-quantized to Q8_0, at the bar of test_architectures.py
    (measured: mean KL 3e-10 Gemma 2, 2e-4 Gemma 3, 7e-12 Mistral). Not against akunu's F16 cache:
    the gap there is the quantization itself, which these tiny models, built with peaked attention
    so that every error shows, amplify (Gemma 3: ~94 % argmax agreement, transformers with and
    without Q8_0 K/V alike)."""
    spec = WINDOWED[name]
    path, _ = gw.build_gguf(spec, gguf_dir)
    q8 = akunu_mod.Model(str(path), backend="cpu", kv_cache_dtype="q8_0")
    cfg = q8.config
    assert cfg["sliding_window"] and any(cfg["sliding_layers"]) and len(varied_ids) > 4 * cfg["sliding_window"]
    assert (cfg["attn_logit_softcap"] > 0) == (name == "gemma2")
    ref = q8_reference_logits(spec, path, varied_ids)
    ok, c = rf.criterion(ref, q8.logits(varied_ids))
    assert ok, f"{name}, Q8_0 cache against transformers with Q8_0 K/V: {rf.describe(c)}"
    # The comparison tells the caches apart: the F16 cache is much further from this reference.
    f16 = rf.compare_logits(ref, akunu_mod.Model(str(path), backend="cpu").logits(varied_ids))
    assert f16["kl_mean"] > 100 * c["kl_mean"], f"{name}: Q8_0 cache {rf.describe(c)}; F16 cache {rf.describe(f16)}"
    # The decode table (one token per replay, past the window) reads the cache as the all-rows pass does.
    rf.assert_decode_matches_teacher_forcing(q8, varied_ids[:60], 60)
