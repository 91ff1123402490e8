"""CUDA backend vs the CPU backend (itself validated against transformers) on the same GGUFs.

Skipped only when no CUDA device is usable (or this build has no CUDA backend). Checks:
teacher-forced logits (argmax agreement >= 99%, mean KL <= 1e-3, as test_reference_logits.py),
the first 32 greedy tokens equal on both backends, chain_decode == repeated decode_step on CUDA,
and one dispatch table (one graph per chunk size) replayed at many start positions.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import akunu
import akunu._testing

if not akunu._testing.cuda_available():
    pytest.skip("CUDA vs CPU tests need an NVIDIA GPU: no CUDA device is visible (or akunu was built without CUDA)",
                allow_module_level=True)

import gguf_writer as gw  # noqa: E402
from grammar_checks import all_tokens_mask, check_forced_runs, constrained_run, mask_of  # noqa: E402
import references as rf  # noqa: E402
import sampling_reference as ref  # noqa: E402
import tiny_models as tm  # noqa: E402

# The reference specs plus the dtypes only the engines' own comparison covers.
SPECS = dict(tm.LLAMA_SPECS)
SPECS["q4_1_untied"] = replace(tm.LLAMA_SPECS["q8_0_untied"], name="q4_1_untied", dtype="Q4_1", seed=11)
SPECS["bf16_tied"] = replace(tm.LLAMA_SPECS["q4_0_tied"], name="bf16_tied", dtype="BF16", seed=12)
# Real models' head sizes for the tensor-core prefill attention (the others use 16 and 32).
SPECS["f16_hd64"] = tm.family_spec("llama", "f16_hd64", dtype="F16", hidden=256, n_heads=4, n_kv_heads=2, head_dim=64,
                                   seed=13)
SPECS["q8_0_hd128"] = tm.family_spec("llama", "q8_0_hd128", dtype="Q8_0", hidden=256, n_heads=2, n_kv_heads=1,
                                     head_dim=128, seed=14)
# Wide enough (hidden 1024) for the integer decode GEMV of the g8 formats (cuda/gemv_q16.cuh).
SPECS["q4_0_wide"] = tm.family_spec("llama", "q4_0_wide", dtype="Q4_0", hidden=1024, n_heads=8, n_kv_heads=2,
                                    head_dim=128, ffn=2048, seed=15)
# The Llama-3.2-1B attention shape (32 heads x 64, GQA groups of 4); with AKUNU_CUDA_ATTN_CLUSTER=1 on
# Hopper its decode splits merge inside a thread-block cluster (cuda/attention_decode.cu).
SPECS["f16_heads32"] = tm.family_spec("llama", "f16_heads32", dtype="F16", hidden=2048, n_layers=1, n_heads=32,
                                      n_kv_heads=8, head_dim=64, seed=16)
# Wide heads: the decode attention's lanes hold 8 (head_dim 256) and 16 dims (320: lanes 20-31 idle).
SPECS["f16_hd256"] = tm.family_spec("llama", "f16_hd256", dtype="F16", hidden=512, n_layers=1, n_heads=2, n_kv_heads=1,
                                    head_dim=256, seed=17)
SPECS["f16_hd320"] = tm.family_spec("llama", "f16_hd320", dtype="F16", hidden=640, n_layers=1, n_heads=2, n_kv_heads=2,
                                    head_dim=320, seed=18)
# The handoff of decode rows in the integer GEMV's quantized form (cuda/q16_activation.cuh) on a
# 132-SM GPU (H100 / H200): hidden 2560 (320 g8 groups, over 2 x 132) makes o_proj and down run
# 32-row items, and ffn 14336 (1792 gate/up items) makes gate_up's one-wave grid walk runs of 4
# items, so every GEMV of a layer takes its input quantized by the command before it.
SPECS["q4_0_handoff"] = tm.family_spec("llama", "q4_0_handoff", dtype="Q4_0", hidden=2560, n_heads=20, n_kv_heads=4,
                                       head_dim=128, ffn=14336, seed=19)

PROMPTS = [
    "Once upon a time, in a small village by the sea, there lived",
    "def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n",
    "The capital of France is",
]


def cpu_cuda_pairs(build):
    """name -> (cpu Model, cuda Model) of the model file build(name) writes; each built once."""
    cache = {}

    def get(name):
        if name not in cache:
            path = build(name)
            cache[name] = (akunu.Model(str(path), backend="cpu"), akunu.Model(str(path), backend="cuda"))
        return cache[name]

    return get


@pytest.fixture(scope="module")
def pair(gguf_dir):
    """Llama GGUFs of SPECS (tiny_models.LLAMA_SPECS plus the ones above)."""
    return cpu_cuda_pairs(lambda name: gw.build_gguf(SPECS[name], gguf_dir)[0])


def _tokens(model, n=300):
    ids = model.tokenizer.encode(rf.VARIED_TEXT)
    while len(ids) < 256:
        ids = ids + model.tokenizer.encode(" " + rf.VARIED_TEXT)
    return ids[:n]


def test_auto_picks_cuda(pair, gguf_dir):
    path, _ = gw.build_gguf(SPECS["f32_untied"], gguf_dir)
    assert akunu.Model(str(path)).backend == "cuda"
    assert pair("f32_untied")[1].backend == "cuda"


def assert_logits_match(cpu, cuda):
    """Teacher-forced logits of the two backends clear the reference bar."""
    ids = _tokens(cpu)
    ref = np.asarray(cpu.logits(ids))
    got = np.asarray(cuda.logits(ids))
    assert np.isfinite(got).all()
    c = rf.compare_logits(ref, got)
    assert rf.meets_bar(c), rf.describe(c)


@pytest.mark.parametrize("name", list(SPECS))
def test_logits_match_cpu(name, pair):
    assert_logits_match(*pair(name))


@pytest.mark.parametrize("name", ["f16_hd64", "bf16_tied"])
@pytest.mark.parametrize("cublas", [True, False])
def test_float_model_prefill_paths_match_cpu(name, cublas, gguf_dir, monkeypatch):
    """A float model's prompt (fused Q/K/V and gate/up parts, the residual added by the GEMM) through
    cuBLAS, and through akunu's own tiles with AKUNU_CUDA_CUBLAS=0, against the CPU."""
    if not cublas:
        monkeypatch.setenv("AKUNU_CUDA_CUBLAS", "0")
    path, _ = gw.build_gguf(SPECS[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b) for b in ("cpu", "cuda"))
    before = akunu._testing.cuda_cublas_gemms()
    assert_logits_match(cpu, cuda)
    assert (akunu._testing.cuda_cublas_gemms() > before) == cublas


def _greedy(model, ids, n):
    model._engine.reset()
    first = model._engine.prefill(ids)
    return [first] + list(model._engine.chain_decode(first, n - 1))


def assert_greedy_match(cpu, cuda, n=32):
    """The first n greedy tokens of every test prompt are the same on both backends."""
    for prompt in PROMPTS:
        ids = cpu.tokenizer.encode(prompt)
        a, b = _greedy(cpu, ids, n), _greedy(cuda, ids, n)
        assert a == b, (prompt, a, b)


@pytest.mark.parametrize("name", ["f32_untied", "q4_0_tied", "q8_0_untied", "q4_1_untied", "q4_0_wide"])
def test_greedy_matches_cpu(name, pair):
    assert_greedy_match(*pair(name))


@pytest.mark.parametrize("handoff", ["on", "off"])
def test_quantized_handoff_matches_cpu(handoff, gguf_dir, monkeypatch):
    """Decode GEMVs that copy their input row as the command before them left it quantized (attention
    -> o_proj, o_proj -> gate_up, gate_up -> down, down -> the next layer's qkv and the logits;
    cuda/q16_activation.cuh), and the same model with the handoff switched off
    (AKUNU_CUDA_Q16_HANDOFF=0), against the CPU."""
    if handoff == "off":
        monkeypatch.setenv("AKUNU_CUDA_Q16_HANDOFF", "0")
    path, _ = gw.build_gguf(SPECS["q4_0_handoff"], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b) for b in ("cpu", "cuda"))
    # Handoffs are set up when a token's commands are captured: one decode step captures one token.
    ids = cuda.tokenizer.encode(PROMPTS[0])
    first = cuda._engine.prefill(ids)
    before = akunu._testing.cuda_q16_handoffs()
    settled = akunu._testing.cuda_settled_accumulates()
    cuda._engine.decode_step(first)
    # 2 layers x (attention -> o_proj, o_proj -> gate_up, gate_up -> down, down -> qkv or logits)
    assert akunu._testing.cuda_q16_handoffs() - before == (8 if handoff == "on" else 0)
    # o_proj and down add into the residual, which the commands before them (attention, gate_up)
    # do not write: they read its old values before their wait (LaunchArgs::output_settled)
    assert akunu._testing.cuda_settled_accumulates() - settled == 4
    assert_greedy_match(cpu, cuda)
    assert_logits_match(cpu, cuda)


def _steps(model, ids, n):
    model._engine.reset()
    cur = model._engine.prefill(ids)
    out = [cur]
    for _ in range(n - 1):
        cur = model._engine.decode_step(cur)
        out.append(cur)
    return out


@pytest.mark.parametrize("name", ["f32_untied", "q4_0_untied_llama3", "q4_0_wide"])
def test_chain_equals_steps(name, pair):
    _, cuda = pair(name)
    ids = cuda.tokenizer.encode(PROMPTS[0])
    n = 150  # crosses the chain chunk (64 on GPUs) with a ragged last chunk
    assert _greedy(cuda, ids, n) == _steps(cuda, ids, n)
    assert cuda._engine.position == len(ids) + n - 1


def test_one_table_replayed_at_many_positions(pair):
    """The decode table is built once; its graph replays at every start position (prompts of
    different lengths, resumed chains) and matches the CPU each time."""
    cpu, cuda = pair("q4_0_untied_llama3")
    builds = cuda._engine.table_builds
    for k, prompt in enumerate(PROMPTS + [rf.VARIED_TEXT[:400]]):
        ids = cpu.tokenizer.encode(prompt)
        for m in (cpu, cuda):
            m._engine.reset()
        outs = []
        for m in (cpu, cuda):
            first = m._engine.prefill(ids)
            seq = [first]
            for chunk in (5, 17, 5):  # resumed chains: same graph per count, new start positions
                seq += list(m._engine.chain_decode(seq[-1], chunk))
            outs.append(seq)
        assert outs[0] == outs[1], (k, outs)
    assert cuda._engine.table_builds == builds == 1


def assert_long_decode_matches(cpu, cuda, n_ctx, steps):
    """Prefill n_ctx tokens, then decode `steps` tokens on both backends, both fed the CPU's tokens;
    where their argmaxes differ, the CPU's own logits must show a near tie between the two tokens
    (random tiny models have some: q8_0_hd128 at 1000 positions has its top two 3e-4 apart, while
    CPU and CUDA logits differ by ~0.02 everywhere)."""
    ids = _tokens(cpu, 300)
    ids = (ids * (n_ctx // len(ids) + 1))[:n_ctx]
    cpu._engine.reset()
    cuda._engine.reset()
    a, b = cpu._engine.prefill(ids), cuda._engine.prefill(ids)
    seq, disagreements = list(ids), []
    for _ in range(steps):
        if a != b:
            disagreements.append((len(seq), a, b))
        seq.append(a)
        a, b = cpu._engine.decode_step(a), cuda._engine.decode_step(a)
    assert len(disagreements) <= 2, disagreements
    for n, a, b in disagreements:
        logits = cpu.logits(seq[:n])[-1]
        assert logits[a] - logits[b] < 0.05, (n, a, b, logits[a], logits[b])


@pytest.mark.parametrize("name", ["f16_tied", "f16_hd64", "q8_0_hd128", "f16_heads32", "f16_hd256", "f16_hd320"])
def test_long_context_attention_matches_cpu(name, pair):
    """Decode far into the context: split-K attention over ~1000 cached positions (head sizes 16 to
    320; GQA groups of 1, 2 and 4; the splits of a head merged by the last one to finish)."""
    assert_long_decode_matches(*pair(name), n_ctx=1000, steps=24)


@pytest.mark.parametrize("name, switch, value", [("f16_hd64", "AKUNU_CUDA_ATTN_CLUSTER", "1"),
                                                 ("f16_heads32", "AKUNU_CUDA_ATTN_CLUSTER", "1"),
                                                 ("f16_hd64", "AKUNU_CUDA_FUSE_ROPE", "0"),
                                                 ("q8_0_hd128", "AKUNU_CUDA_FUSE_ROPE", "0"),
                                                 ("f16_hd64", "AKUNU_CUDA_ATTN_WARPS", "4"),
                                                 ("f16_hd64", "AKUNU_CUDA_ATTN_WARPS", "16"),
                                                 ("q8_0_hd128", "AKUNU_CUDA_ATTN_WARPS", "4"),
                                                 ("q8_0_hd128", "AKUNU_CUDA_ATTN_WARPS", "8")])
def test_long_context_attention_variants_match_cpu(name, switch, value, gguf_dir, monkeypatch):
    """The same with the splits of head_dim 64 merged inside a thread-block cluster through
    distributed shared memory (opt-in on Hopper; elsewhere the switch changes nothing), with RoPE
    and the KV write as a command of their own before the decode attention (its plain variant), or
    with decode-attention blocks of another warp count than head_dim's default (4, 8 or 16 warps)."""
    monkeypatch.setenv(switch, value)
    path, _ = gw.build_gguf(SPECS[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b) for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=1000, steps=24)


@pytest.mark.parametrize("warps", ["4", "8"])
def test_splits_of_many_steps_match_cpu(warps, gguf_dir, monkeypatch):
    """At 4400 keys (4 heads, 32 splits) each warp of each split of the per-query-head decode
    attention (the tensor-core kernel switched off) walks several steps of K and V (blocks of 4
    warps: ~5, of 8, head_dim 64's default: ~3), and the newest key ends the last split."""
    monkeypatch.setenv("AKUNU_CUDA_ATTN_WARPS", warps)
    monkeypatch.setenv("AKUNU_CUDA_ATTN_LONG", "0")
    path, _ = gw.build_gguf(SPECS["f16_hd64"], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, context_length=4608) for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=4400, steps=8)


# Decode attention on the tensor cores (cuda/attention_decode_gqa.cu): one block per (KV head, split)
# for the whole GQA group, used from AKUNU_CUDA_ATTN_LONG cached keys (1024 by default; lowered
# here so that the tiny models' contexts reach it). Head sizes 64 and 128; groups of 2, 4 and 5
# (q4_0_handoff: its output handed to o_proj quantized); RoPE, QK-norm and the KV append in the
# kernel, or (AKUNU_CUDA_FUSE_ROPE=0) q rotated and the cache written by a command before it.
@pytest.mark.parametrize("name, fuse_rope", [("f16_hd64", "1"), ("q8_0_hd128", "1"), ("f16_heads32", "1"),
                                             ("q4_0_wide", "1"), ("q4_0_handoff", "1"), ("f16_hd64", "0"),
                                             ("q8_0_hd128", "0")])
def test_gqa_decode_attention_matches_cpu(name, fuse_rope, gguf_dir, monkeypatch):
    monkeypatch.setenv("AKUNU_CUDA_ATTN_LONG", "256")
    monkeypatch.setenv("AKUNU_CUDA_FUSE_ROPE", fuse_rope)
    path, _ = gw.build_gguf(SPECS[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b) for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=1000, steps=24)


# Its very-long-context shape (AKUNU_CUDA_ATTN_VERY_LONG keys on, 12288 by default; lowered here):
# F16-cache blocks of 8 warps, 128 keys a chunk in 2 stages, at least 512 keys a split (one split at
# 1000 keys; 8 per KV head at 4400); the Q8_0 cache keeps its 4 warps (q8_0_hd128: the switch must
# change nothing there). With the threshold at 1004 the decode crosses it: replays of both shapes,
# each its own captured graph.
@pytest.mark.parametrize("name, fuse_rope, n_ctx, very_long", [("f16_hd64", "1", 1000, "512"),
                                                               ("q4_0_handoff", "1", 1000, "512"),
                                                               ("f16_hd64", "0", 1000, "512"),
                                                               ("q8_0_hd128", "1", 1000, "512"),
                                                               ("f16_hd64", "1", 1000, "1004"),
                                                               ("f16_heads32", "1", 4400, "512"),
                                                               ("f16_heads32", "0", 4400, "512")])
def test_gqa_decode_attention_in_eight_warps_matches_cpu(name, fuse_rope, n_ctx, very_long, gguf_dir, monkeypatch):
    monkeypatch.setenv("AKUNU_CUDA_ATTN_LONG", "256")
    monkeypatch.setenv("AKUNU_CUDA_ATTN_VERY_LONG", very_long)
    monkeypatch.setenv("AKUNU_CUDA_FUSE_ROPE", fuse_rope)
    path, _ = gw.build_gguf(SPECS[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, context_length=4608) for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=n_ctx, steps=12)


def test_gqa_decode_attention_many_splits_match_cpu(gguf_dir, monkeypatch):
    """At 4400 keys with the default threshold: many splits of several chunks each, merged by the
    last split of each KV head; the newest key (appended by the kernel) ends the last split."""
    path, _ = gw.build_gguf(SPECS["f16_heads32"], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, context_length=4608) for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=4400, steps=8)


@pytest.mark.parametrize("kv_cache_dtype", ["f16", "q8_0"])
def test_gqa_decode_attention_over_32_splits_match_cpu(kv_cache_dtype, gguf_dir):
    """One KV head at 9000 keys: 35 splits of 256 keys (two per lane in the merge of the split
    weights), with the F16 and the Q8_0 cache."""
    path, _ = gw.build_gguf(SPECS["q8_0_hd128"], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, context_length=9216, kv_cache_dtype=kv_cache_dtype)
                 for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=9000, steps=6)


# Other architectures at head_dim 64: QK-norm and NeoX RoPE (Qwen3, a group of 4), score soft-capping
# and sliding windows (Gemma 2, Mistral), decoded past the window on the tensor-core kernel. (The tiny
# Gemma 2 greedy-decodes one token over and over, so its case shows little beyond the kernel running
# with both; Qwen3 here (row_sigma 0.2) and Mistral produce varied tokens.)
GQA_ARCH = {
    "qwen3_hd64": replace(tm.ARCH_BASE["qwen3"], name="qwen3_hd64", hidden=128, head_dim=64, n_heads=4, n_kv_heads=1,
                          row_sigma=0.2),
    "gemma2_hd64": replace(tm.ARCH_BASE["gemma2"], name="gemma2_hd64", head_dim=64),
    "mistral_hd64": replace(tm.ARCH_BASE["mistral"], name="mistral_hd64", hidden=256, head_dim=64, dtype="Q8_0"),
}


@pytest.mark.parametrize("name", list(GQA_ARCH))
def test_gqa_decode_attention_archs_match_cpu(name, gguf_dir, monkeypatch):
    monkeypatch.setenv("AKUNU_CUDA_ATTN_LONG", "64")
    path, _ = gw.build_gguf(GQA_ARCH[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b) for b in ("cpu", "cuda"))
    ids = _tokens(cpu, 100)
    assert _greedy(cpu, ids, 40) == _greedy(cuda, ids, 40)
    assert_long_decode_matches(cpu, cuda, n_ctx=600, steps=16)


# ------------------------------------------------------------------ sliding-window rings
# A sliding-window layer's cache is a ring of window + the most rows one pass writes (ChipConfig::
# for_gpu's prefill chunk, 2048; the CPU's 512), position p at row p % ring (cuda/common.cuh's
# kv_cache_row in every kernel that touches the cache; docs/adr/0013-sliding-window-kv-ring.md).

CUDA_RING_EXTRA_ROWS = 2048


@pytest.mark.parametrize("name", ["mistral_hd64", "gemma2_hd64"])
def test_sliding_layers_hold_a_ring_on_cuda(name, gguf_dir):
    path, _ = gw.build_gguf(GQA_ARCH[name], gguf_dir)
    model = akunu.Model(str(path), backend="cuda", context_length=4096)
    cfg = model.config
    local = sum(1 for s in cfg["sliding_layers"] if s)
    assert cfg["sliding_window"] and local, cfg
    rows = (cfg["n_layers"] - local) * 4096 + local * (cfg["sliding_window"] + CUDA_RING_EXTRA_ROWS)
    assert model.kv_cache_bytes == rows * 2 * cfg["n_kv_heads"] * cfg["head_dim"] * 2


@pytest.mark.parametrize("name, kv_cache_dtype, attn_long", [("mistral_hd64", "f16", "1024"),
                                                             ("mistral_hd64", "f16", "0"),
                                                             ("gemma2_hd64", "f16", "1024"),
                                                             ("gemma2_hd64", "f16", "0"),
                                                             ("mistral_hd64", "q8_0", "1024")])
def test_wrapped_ring_matches_cpu(name, kv_cache_dtype, attn_long, gguf_dir, monkeypatch):
    """2600 positions wrap the CUDA ring once (its second prefill chunk writes across the wrap) and
    the CPU's four times; decode then reads windows that straddle the wrap, on the tensor-core
    kernel (from 1024 keys by default) or the per-query-head one (AKUNU_CUDA_ATTN_LONG=0), over the
    F16 or the Q8_0 cache."""
    monkeypatch.setenv("AKUNU_CUDA_ATTN_LONG", attn_long)
    path, _ = gw.build_gguf(GQA_ARCH[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, context_length=4096, kv_cache_dtype=kv_cache_dtype)
                 for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=2600, steps=16)


# ------------------------------------------------------------------ the Q8_0 KV cache
# kv_cache_dtype="q8_0" on CUDA (cuda/kv_cache_q8.cuh): the RoPE + KV-write kernels quantize as the
# CPU does (tests/test_kv_cache_dtype.py holds the CPU to gguf-py's Q8_0 byte for byte), the
# tensor-core decode and prefill attention read the cache the CPU wrote, and whole models decode
# as the CPU's Q8_0-cache models do.

import test_kv_cache_dtype as kvq  # noqa: E402


def _rope_kv_write(backend, k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, position, rope_dim, neox,
                   kv_cache_dtype="q8_0"):
    rows = k_rows.shape[0] // n_kv_heads
    q = np.random.default_rng(7).standard_normal((rows, n_heads * head_dim)).astype(np.float32)
    qkv = np.ascontiguousarray(np.concatenate([q, k_rows.reshape(rows, -1), v_rows.reshape(rows, -1)], axis=1))
    return akunu._testing.device_rope_kv_write(backend, kv_cache_dtype, qkv, n_heads, n_kv_heads, head_dim, rope_dim,
                                               max_seq, position, kvq.inv_freq(rope_dim), neox)


@pytest.mark.parametrize("head_dim, rope_dim, neox", [(64, 0, True), (128, 0, False), (32, 0, True), (64, 64, True),
                                                     (128, 96, False), (128, 128, True)])
def test_q8_kv_write_matches_cpu(head_dim, rope_dim, neox):
    """Rows RoPE does not touch (rope_dim 0: V, and K past rope_dim, which the GPU takes into the
    keys' Hadamard basis with the CPU's float additions) quantize to the CPU's bytes exactly, ties at
    .5 and subnormal scales included; rotated K rows may differ only where the GPU's rotation
    (fused multiply-adds) moved a value across a rounding boundary."""
    n_heads, n_kv_heads, max_seq, position, rows = 4, 2, 40, 5, 9
    rng = np.random.default_rng(head_dim + rope_dim)
    k_rows = kvq.hard_rows(rng, rows * n_kv_heads, head_dim)
    v_rows = kvq.hard_rows(rng, rows * n_kv_heads, head_dim)[::-1].copy()
    args = (k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, position, rope_dim, neox)
    (rot_c, k_c, v_c), (rot_g, k_g, v_g) = (_rope_kv_write(b, *args) for b in ("cpu", "cuda"))
    np.testing.assert_allclose(rot_g, rot_c, rtol=1e-5, atol=1e-5 * np.abs(rot_c).max())
    assert v_g == v_c, "V rows are quantized from the same floats: the same bytes"
    if rope_dim == 0:
        assert k_g == k_c
    else:
        (kv_c, ks_c), (kv_g, ks_g) = (kvq.q8_planes(raw, n_kv_heads, max_seq, head_dim) for raw in (k_c, k_g))
        diff = np.abs(kv_c.astype(np.int32) - kv_g.astype(np.int32))
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01, (diff.max(), (diff > 0).mean())
        np.testing.assert_allclose(ks_g.view(np.float16).astype(np.float32), ks_c.view(np.float16).astype(np.float32),
                                   rtol=2e-3)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("n_heads, n_kv_heads, window, softcap", [(4, 4, 0, 0.0), (8, 2, 0, 0.0), (10, 2, 0, 0.0),
                                                                  (16, 1, 0, 0.0), (8, 2, 300, 0.0),
                                                                  (4, 2, 0, 30.0)])
def test_q8_attention_matches_cpu(head_dim, n_heads, n_kv_heads, window, softcap):
    """attention_q8kv on CUDA over the cache bytes the CPU wrote: decode rows (one split, many
    splits with a partly filled last chunk) and prefill tiles (rows not a multiple of 64, a
    window), GQA groups 1 to 16, soft-capped scores."""
    max_seq = 3000
    rng = np.random.default_rng(head_dim + n_heads)
    k_rows = (rng.standard_normal((max_seq * n_kv_heads, head_dim)) * 1.5).astype(np.float32)
    v_rows = rng.standard_normal((max_seq * n_kv_heads, head_dim)).astype(np.float32)
    # K/V rows per token, head by head, at positions 0..max_seq - 1
    _, k_raw, v_raw = _rope_kv_write("cpu", k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, 0, 0, True)
    scale = 1.0 / np.sqrt(head_dim)
    for position, rows in ((36, 1), (700, 1), (2998, 1), (0, 70), (900, 130), (2870, 2)):
        q = rng.standard_normal((rows, (n_heads + 2 * n_kv_heads) * head_dim)).astype(np.float32)
        cpu, cuda = (akunu._testing.device_attention(b, "q8_0", q, k_raw, v_raw, n_heads, n_kv_heads, head_dim,
                                                     max_seq, position, scale, window, softcap) for b in ("cpu", "cuda"))
        err = np.abs(cuda - cpu).max()
        assert err < 4e-3 * max(1.0, np.abs(cpu).max()), f"position {position}, rows {rows}: max error {err:.3e}"


@pytest.mark.parametrize("warps", ["4", "8"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("n_heads, n_kv_heads, window, softcap", [(8, 2, 0, 0.0), (10, 2, 0, 0.0), (8, 2, 300, 0.0),
                                                                  (4, 2, 0, 30.0)])
def test_f16_prefill_attention_tiles_match_cpu(warps, head_dim, n_heads, n_kv_heads, window, softcap, monkeypatch):
    """The tensor-core prefill attention over the F16 cache in blocks of 4 warps (64 query rows) and
    of 8 (128 rows), against the CPU on the same cache bytes: rows not a multiple of either tile,
    prompts at depth (the chunks wholly visible to a warp skip the mask), a window, soft-capping."""
    monkeypatch.setenv("AKUNU_CUDA_PREFILL_ATTN_WARPS", warps)
    max_seq = 2600
    rng = np.random.default_rng(head_dim + n_heads + window)
    k_rows = (rng.standard_normal((max_seq * n_kv_heads, head_dim)) * 1.5).astype(np.float32)
    v_rows = rng.standard_normal((max_seq * n_kv_heads, head_dim)).astype(np.float32)
    _, k_raw, v_raw = _rope_kv_write("cpu", k_rows, v_rows, n_heads, n_kv_heads, head_dim, max_seq, 0, 0, True,
                                     kv_cache_dtype="f16")
    scale = 1.0 / np.sqrt(head_dim)
    for position, rows in ((0, 300), (900, 130), (2000, 257), (2590, 10)):
        q = rng.standard_normal((rows, (n_heads + 2 * n_kv_heads) * head_dim)).astype(np.float32)
        cpu, cuda = (akunu._testing.device_attention(b, "f16", q, k_raw, v_raw, n_heads, n_kv_heads, head_dim,
                                                     max_seq, position, scale, window, softcap) for b in ("cpu", "cuda"))
        err = np.abs(cuda - cpu).max()
        assert err < 2e-3 * max(1.0, np.abs(cpu).max()), f"position {position}, rows {rows}: max error {err:.3e}"


Q8_KV_MODELS = ["f16_hd64", "q8_0_hd128", "f16_heads32", "q4_0_handoff"]


@pytest.mark.parametrize("name", Q8_KV_MODELS)
@pytest.mark.parametrize("fuse_rope", ["1", "0"])
def test_q8_kv_cache_models_match_cpu(name, fuse_rope, gguf_dir, monkeypatch):
    """Whole models on the Q8_0 cache, CUDA against the CPU: a 1000-token prefill, then decode with
    RoPE and the quantized KV append inside the attention kernel or as a command before it."""
    monkeypatch.setenv("AKUNU_CUDA_FUSE_ROPE", fuse_rope)
    path, _ = gw.build_gguf(SPECS[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, kv_cache_dtype="q8_0") for b in ("cpu", "cuda"))
    assert cuda.kv_cache_dtype == "q8_0"
    assert_long_decode_matches(cpu, cuda, n_ctx=1000, steps=24)


def test_q8_kv_cache_many_splits_match_cpu(gguf_dir):
    path, _ = gw.build_gguf(SPECS["f16_heads32"], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, context_length=4608, kv_cache_dtype="q8_0") for b in ("cpu", "cuda"))
    assert_long_decode_matches(cpu, cuda, n_ctx=4400, steps=8)


@pytest.mark.parametrize("name", list(GQA_ARCH))
def test_q8_kv_cache_archs_match_cpu(name, gguf_dir):
    """QK-norm and NeoX RoPE (Qwen3), soft-capped scores and sliding windows (Gemma 2, Mistral)."""
    path, _ = gw.build_gguf(GQA_ARCH[name], gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b, kv_cache_dtype="q8_0") for b in ("cpu", "cuda"))
    # (Not greedy runs compared token for token: a K value the GPU's rotation rounds across a
    # quantization step moves a score by ~1/254 of its block's amax, enough to flip a near tie.)
    assert_long_decode_matches(cpu, cuda, n_ctx=100, steps=40)
    assert_long_decode_matches(cpu, cuda, n_ctx=600, steps=16)


SPECS_Q8_REFUSED = {
    "head_dim 256": SPECS["f16_hd256"],
    "a group of 18": tm.family_spec("llama", "f16_group18", dtype="F16", hidden=1152, n_layers=1, n_heads=18,
                                    n_kv_heads=1, head_dim=64, seed=17),
}


@pytest.mark.parametrize("case", list(SPECS_Q8_REFUSED))
def test_q8_kv_cache_shapes_cuda_lacks_are_refused_at_load(case, gguf_dir):
    """The shapes the tensor-core kernels do not cover are refused before any weight is uploaded,
    naming what is needed and the way out; the CPU runs them."""
    path, _ = gw.build_gguf(SPECS_Q8_REFUSED[case], gguf_dir)
    with pytest.raises(akunu.UnsupportedError, match=r"kv_cache_dtype 'q8_0' on the cuda backend needs head_dim 64 "
                                                     r"or 128 and at most 16 query heads per KV head.*'f16'"):
        akunu.Model(str(path), backend="cuda", kv_cache_dtype="q8_0")
    akunu.Model(str(path), backend="cpu", kv_cache_dtype="q8_0")


# ------------------------------------------------------------------ single GEMM / embedding commands
# Every weight dtype (Q4_0 / Q4_1 / Q8_0 in the g8 layout, cuda/layout_g8.h; the float and
# group-scaled ones as stored): one GEMM / embedding command on the CUDA device against float64
# numpy on gguf-py's dequantization; then whole models (tests/gguf_kquants.py) against the CPU.

import gguf_kquants as kq  # noqa: E402
from test_quant_kernels import DTYPES, gguf_dequantize, random_block_weights, random_weights  # noqa: E402

FLOAT_DTYPES = {"F32", "F16", "BF16"}


def _gemm_case(name, m, n_rows, k, weights, seed):
    rng = np.random.default_rng(seed)
    w_raw = (random_block_weights if weights == "random_blocks" else random_weights)(rng, name, n_rows, k)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 3.0, (m, 1))).astype(np.float32)
    y = np.asarray(akunu._testing.device_gemm("cuda", name, w_raw.tobytes(), n_rows, k, x))
    w = gguf_dequantize(name, w_raw).astype(np.float64).reshape(n_rows, k)
    ref = x.astype(np.float64) @ w.T
    err = np.abs(y - ref) / (np.abs(x.astype(np.float64)) @ np.abs(w).T + 1e-30)
    # M = 1: the fp32 GEMV. M > 1: tensor cores on fp16 copies of x and of the dequantized weights.
    tol = 1e-4 if m == 1 else 3e-3
    assert err.max() < tol, f"{name} m={m} n={n_rows} k={k}: max relative error {err.max():.3g}"


# Quantized dtypes also with random blocks (every quant / sub-scale bit random, not a quantizer's output).
GEMM_WEIGHTS = [(d, w) for d in DTYPES
                for w in (("quantized",) if d in FLOAT_DTYPES else ("quantized", "random_blocks"))]


@pytest.mark.parametrize("name, weights", GEMM_WEIGHTS)
@pytest.mark.parametrize("m", [1, 3, 70])
def test_gemm_matches_float64(name, m, weights):
    # 37 rows: not a multiple of the g8 group (8) nor of a GEMM tile; k = 1024: 4 superblocks.
    _gemm_case(name, m, 37, 1024, weights, seed=m * 7 + len(name))


@pytest.mark.parametrize("name", ["Q4_0", "Q8_0", "Q4_K", "F16", "BF16"])
@pytest.mark.parametrize("m, n_rows, k",
                         [(1, 4000, 4096), (1, 16400, 2048), (1, 600, 14336), (600, 4100, 512), (130, 300, 2048),
                          (600, 64, 14336)])
@pytest.mark.parametrize("dequant_library", ["1", "0"])
def test_gemm_large_shapes_match_float64(name, m, n_rows, k, dequant_library, monkeypatch):
    # The launch variants: GEMV blocks of 2 g8 groups of 16 warps (4000 rows: a grid that fits the
    # GPU at once, 132 SMs on an H100) or 8 warps (16400 rows), of 1 group (600 rows), 128- and 64-row
    # tensor-core tiles (enough tiles to fill the GPU or not), long K, and f32 activations read by
    # the tiles directly (600 x 14336 is more than the workspace's f16 copy holds; F16 / BF16 go to
    # cuBLAS there in two runs of rows). Quantized ones of 256 rows or more go to cuBLAS too, their
    # weights dequantized (docs/adr/0025), unless AKUNU_CUDA_DEQUANT_CUBLAS=0 keeps them on the tiles.
    monkeypatch.setenv("AKUNU_CUDA_DEQUANT_CUBLAS", dequant_library)
    _gemm_case(name, m, n_rows, k, "quantized", seed=n_rows + k)


# F16 prefill GEMMs (and BF16 ones: BF16 matrices are F16 on CUDA, converted at load) run through
# cuBLAS (docs/adr/0010), or, with AKUNU_CUDA_CUBLAS=0 (or without the library), through akunu's
# own tiles; both against float64.
@pytest.mark.parametrize("name", ["F16", "BF16"])
@pytest.mark.parametrize("cublas", [True, False])
def test_float_prefill_gemm_paths(name, cublas, monkeypatch):
    if not cublas:
        monkeypatch.setenv("AKUNU_CUDA_CUBLAS", "0")
    _assert_library_gemms(1 if cublas else 0, name, 200, 300, 2048, "quantized", seed=3)


def _assert_library_gemms(expected, *gemm_case, **kwargs):
    """_gemm_case(*gemm_case, **kwargs), which must run `expected` cuBLAS GEMMs."""
    before = akunu._testing.cuda_cublas_gemms()
    _gemm_case(*gemm_case, **kwargs)
    assert akunu._testing.cuda_cublas_gemms() - before == expected


# Quantized prefill GEMMs of 256 rows or more dequantize their g8 weights to f16, slice by slice,
# for cuBLAS (docs/adr/0025); with AKUNU_CUDA_DEQUANT_CUBLAS=0 (or without the library) akunu's own
# tiles run. Both against float64, on random blocks (every quant and sub-scale bit random).
G8_DTYPES = [d for d in DTYPES if d not in FLOAT_DTYPES and d not in ("Q2_K", "Q3_K")]


@pytest.mark.parametrize("name", G8_DTYPES)
@pytest.mark.parametrize("library", [True, False])
def test_quantized_prefill_gemm_paths(name, library, monkeypatch):
    if not library:
        monkeypatch.setenv("AKUNU_CUDA_DEQUANT_CUBLAS", "0")
    _assert_library_gemms(1 if library else 0, name, 300, 300, 2048, "random_blocks", seed=5)


def test_quantized_prefill_gemm_slices():
    # 2400 rows of 14336: the 64 MiB f16 slice holds 2304 of them, so two library GEMMs; 300 x rows.
    _assert_library_gemms(2, "Q4_K", 300, 2400, 14336, "quantized", seed=9)


def test_bf16_beyond_f16_range_is_refused():
    w = np.full((8, 64), 0.5, np.float32)
    w[3, 5] = 1e5  # a bf16 value, but no f16 one
    raw = (w.view(np.uint32) >> 16).astype(np.uint16)
    with pytest.raises(akunu.UnsupportedError, match="beyond the F16 range"):
        akunu._testing.device_gemm("cuda", "BF16", raw.tobytes(), 8, 64, np.ones((2, 64), np.float32))


def _silu(g):
    return g * 0.5 * (1.0 + np.tanh(0.5 * g))  # g * sigmoid(g), without exp overflow


def _gelu_tanh(g):
    return 0.5 * g * (1.0 + np.tanh(0.7978845608028654 * (g + 0.044715 * g ** 3)))


# The decode GEMV's fusions (ChipConfig::fuse_gemv_norm_max_dim / fuse_gemv_activation): the input RMSNorm and the gated
# output. Shapes reach every launch variant: GGUF-row blocks of 4 (k < 2048) and 16 rows, g8 blocks
# of 1 or 2 groups of 4 (k <= 512), 8 or 16 warps (k >= 2048 on small grids: 300 rows, and 4000
# rows plain, not gated, on an H100's 132 SMs), row counts that are not whole groups or blocks.
@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q8_0", "F16", "Q4_K", "Q6_K"])
@pytest.mark.parametrize("n_rows, k", [(37, 512), (300, 1024), (300, 2048), (4000, 2048)])
@pytest.mark.parametrize("norm, activation", [(True, ""), (True, "silu"), (False, "silu"), (True, "gelu_tanh")])
def test_fused_gemv_matches_float64(name, n_rows, k, norm, activation):
    _fused_gemv_case(name, n_rows, k, norm, activation)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q8_0"])
def test_fused_gemv_walking_items_matches_float64(name):
    # 9000 gated rows: 1125 items, more than an H100 holds at once (at most 8 blocks of 8 warps per
    # SM), so one wave of integer-GEMV blocks walks them, each block's x normed and quantized once.
    _fused_gemv_case(name, 9000, 1024, True, "silu")


def _fused_gemv_case(name, n_rows, k, norm, activation):
    rng = np.random.default_rng(n_rows + k + len(name))
    parts = 2 if activation else 1
    make = random_weights if name in FLOAT_DTYPES else random_block_weights
    w_raw = np.concatenate([make(rng, name, n_rows, k) for _ in range(parts)])
    x = (rng.standard_normal(k) * 3.0).astype(np.float32)
    norm_w = rng.uniform(0.5, 1.5, k).astype(np.float32) if norm else None
    eps = 1e-5
    y = np.asarray(akunu._testing.device_gemv_fused("cuda", name, w_raw.tobytes(), n_rows, k, x, norm_w, eps,
                                                    activation))

    w = gguf_dequantize(name, w_raw).astype(np.float64).reshape(parts * n_rows, k)
    xn = x.astype(np.float64)
    if norm:
        xn = xn / np.sqrt(np.mean(xn * xn) + eps) * norm_w
    dots = w @ xn
    bound = np.abs(w) @ np.abs(xn) + 1e-30  # the size of the rounding each dot can carry
    if not activation:
        err = np.abs(y - dots) / bound
    else:
        act = _silu if activation == "silu" else _gelu_tanh
        gate, up = dots[:n_rows], dots[n_rows:]
        ref = act(gate) * up
        # d(act(g) u) = act'(g) u dg + act(g) du, with |act'| <= 1.1 for both activations
        err = np.abs(y - ref) / (1.1 * np.abs(up) * bound[:n_rows] + np.abs(act(gate)) * bound[n_rows:] + 1e-30)
    assert err.max() < 1e-4, f"{name} n={n_rows} k={k} norm={norm} act={activation!r}: max error {err.max():.3g}"


@pytest.mark.parametrize("name", [d for d in DTYPES if d != "F32"])
def test_embedding_matches_gguf(name):
    rng = np.random.default_rng(3)
    k, n_rows = 512, 20
    raw = (random_weights if name in FLOAT_DTYPES else random_block_weights)(rng, name, n_rows, k)
    ids = np.array([0, 19, 7, 7, 3, 16], dtype=np.uint32)
    got = np.asarray(akunu._testing.device_embedding("cuda", name, raw.tobytes(), n_rows, k, ids))
    ref = gguf_dequantize(name, raw).reshape(n_rows, k)[ids]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())


@pytest.fixture(scope="module")
def kq_pair(gguf_dir):
    """GGUFs of gguf_kquants.CASES (group-scaled and mixed dtypes)."""
    return cpu_cuda_pairs(lambda name: kq.build_case_gguf(kq.CASES[name], gguf_dir)[0])


@pytest.mark.parametrize("name", list(kq.CASES))
def test_group_scaled_logits_match_cpu(name, kq_pair):
    assert_logits_match(*kq_pair(name))


@pytest.mark.parametrize("name", ["mixed_q4_k_m", "q6_k_tied"])
def test_group_scaled_greedy_matches_cpu(name, kq_pair):
    assert_greedy_match(*kq_pair(name))


# A layer's Q, K and V in two dtypes, as llama.cpp's mixes write them (attn_v Q6_K in some layers of
# Q4_K_M and Q5_K_M files, Q5_K in IQ4_XS, IQ4_NL and Q4_K_S ones): one pair command
# ("gemm_A+gemm_B", GemmParams::second_part) runs both. Rows of 1024 give the decode GEMV 8-warp
# integer blocks, so the pair runs as one launch (gemv_g8_q16_pair_kernel); the prompt (M > 1) runs
# its halves one after the other. Every registered pair (AKUNU_CUDA_G8_PAIRS) has a layer.
PAIR_LAYERS = [("Q4_K", "Q6_K"), ("Q5_K", "Q6_K"), ("IQ4_XS", "Q5_K"), ("IQ4_NL", "Q5_K"), ("Q4_K", "Q5_K")]
PAIR_DTYPES = {"token_embd": kq.QT.Q4_K, "output": kq.QT.Q6_K}
for _i, (_qk, _v) in enumerate(PAIR_LAYERS):
    PAIR_DTYPES.update({f"blk.{_i}.attn_q": kq.QT[_qk], f"blk.{_i}.attn_k": kq.QT[_qk], f"blk.{_i}.attn_v": kq.QT[_v],
                        f"blk.{_i}.attn_output": kq.QT[_qk], f"blk.{_i}.ffn_gate": kq.QT[_qk],
                        f"blk.{_i}.ffn_up": kq.QT[_qk], f"blk.{_i}.ffn_down": kq.QT[_v]})
PAIR_CASE = kq.KQuantCase("qkv_pairs", PAIR_DTYPES, seed=45,
                          shape=dict(hidden=1024, n_heads=8, n_kv_heads=2, head_dim=128, ffn=2816,
                                     n_layers=len(PAIR_LAYERS)))


def test_qkv_of_two_dtypes_runs_as_one_command(gguf_dir):
    path, _ = kq.build_case_gguf(PAIR_CASE, gguf_dir)
    cpu, cuda = (akunu.Model(str(path), backend=b) for b in ("cpu", "cuda"))
    names = [c["kernel"] for c in cuda._engine.dispatch_table if c["label"].endswith("qkv")]
    assert names == [f"gemm_{qk.lower()}_g8+gemm_{v.lower()}_g8" for qk, v in PAIR_LAYERS], names
    # The CPU has no pair kernels: Q/K and V stay two commands there.
    assert all("+" not in c["kernel"] for c in cpu._engine.dispatch_table)
    ids = cuda.tokenizer.encode(PROMPTS[0])
    first = cuda._engine.prefill(ids)
    before = akunu._testing.cuda_pair_gemvs()
    cuda._engine.decode_step(first)
    assert akunu._testing.cuda_pair_gemvs() - before == len(PAIR_LAYERS)
    assert_logits_match(cpu, cuda)
    assert_greedy_match(cpu, cuda)


@pytest.mark.parametrize("n", [1, 7, 4096, 32003, 49152, 128256])
def test_argmax_matches_numpy(n):
    """The argmax command (many blocks, four logits per thread, a tail) returns numpy's first
    maximum, wherever it lies: the first or last element, a block boundary, ties between blocks."""
    rng = np.random.default_rng(n)
    for where in {0, n - 1, n // 2, min(n - 1, 4096), min(n - 1, 4097)}:
        x = rng.standard_normal(n).astype(np.float32)
        x[where] = 10.0
        assert akunu._testing.device_argmax("cuda", x) == where
        if n > 1:
            other = (where + n // 3 + 1) % n  # a tie: the lower index wins
            x[other] = 10.0
            assert akunu._testing.device_argmax("cuda", x) == min(where, other)


# ------------------------------------------------------------------ sampling on the device

SAMPLE_CONFIGS = [
    dict(temperature=1.0, seed=1),
    dict(temperature=0.7, top_k=40, seed=2),
    dict(temperature=1.2, top_p=0.9, seed=3),
    dict(temperature=0.8, top_k=200, top_p=0.95, min_p=0.02, seed=2**40 + 4),
    dict(temperature=1.0, min_p=0.1, repeat_penalty=1.3, repeat_last_n=32, seed=5),
    dict(temperature=0.9, top_k=1000, top_p=0.7, repeat_penalty=0.7, repeat_last_n=300, seed=6),
    dict(temperature=0.0, repeat_penalty=1.4, repeat_last_n=64, seed=0),
    dict(temperature=0.8, top_k=40, frequency_penalty=0.7, presence_penalty=0.4, repeat_last_n=300, seed=7),
    dict(temperature=0.0, repeat_penalty=1.2, frequency_penalty=1.1, presence_penalty=-0.6, repeat_last_n=128, seed=0),
]


@pytest.mark.parametrize("n", [7, 3000, 32003, 49152, 128256, 151936, 262144])
@pytest.mark.parametrize("cfg", SAMPLE_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("shape", ["peaked", "flat", "crowded"])
def test_sample_matches_cpu(n, cfg, shape):
    """The CUDA sampling command (cuts from value-bin histograms and a sort of the tokens in the
    boundary bin, or by radix selection when that bin is crowded; a grid-wide Gumbel-max) draws
    exactly the CPU command's tokens (the host reference, itself checked against NumPy in
    test_sampling.py), with the penalty's window spanning the buffer's recent tokens and the
    chain's earlier draws."""
    rng = np.random.default_rng(n + len(str(cfg)))
    x = (rng.standard_normal(n) * (3 if shape == "peaked" else 0.3)).astype(np.float32)
    if shape == "peaked":
        x[rng.integers(0, n, 30)] += 12  # a few likely tokens, as a trained model's logits
    if shape == "crowded":
        x = np.round(x * 4) / 4  # a handful of values, thousands of tokens each: the radix path
    x[rng.integers(0, n, 50)] = x[rng.integers(0, n, 50)]  # exact ties
    recent = rng.integers(0, n, 400).tolist()
    chain = rng.integers(0, n, 9).tolist()
    positions = np.arange(1000, 1024)
    want = ref.device_draws("cpu", x, positions, cfg, recent, chain, recent_generated=150)
    got = ref.device_draws("cuda", x, positions, cfg, recent, chain, recent_generated=150)
    assert got.tolist() == want.tolist()


PENALTY_CONFIGS = [
    dict(temperature=0.0, frequency_penalty=0.6),
    dict(temperature=0.0, presence_penalty=1.2, repeat_penalty=1.3),
    dict(temperature=0.9, top_k=50, top_p=0.95, frequency_penalty=0.9, presence_penalty=0.3),
    dict(temperature=1.0, min_p=0.05, frequency_penalty=-0.8, presence_penalty=-1.5),
    dict(temperature=0.7, top_p=0.8, repeat_penalty=0.9, frequency_penalty=2.0, presence_penalty=2.0),
]


@pytest.mark.parametrize("n", [50, 3000, 49152, 151936])
@pytest.mark.parametrize("window", [8, 64, 700, 3000])
@pytest.mark.parametrize("cfg", PENALTY_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_sample_penalties_match_cpu(n, window, cfg):
    """The frequency and presence penalties on CUDA (the window's tokens penalized in parallel, each
    distinct token once, its count among the generated tokens staged through shared memory a tile of
    1024 at a time) draw exactly the CPU command's tokens, and the reference's: windows full of
    repeats of the likeliest tokens, out-of-vocabulary ids, prompt and generated parts (the chain's
    draws generated too), longer than a block's threads and tile."""
    rng = np.random.default_rng(n + window + len(str(cfg)))
    for case in range(4):
        x = (rng.standard_normal(n) * 3).astype(np.float32)
        x[rng.integers(0, n, 20)] += 8
        hot = np.argsort(-x)[:16]
        size = window + int(rng.integers(-window // 2, window // 2 + 1))
        tokens = np.where(rng.random(size) < 0.85, rng.choice(hot, size), rng.integers(0, n + 100, size)).tolist()
        recent, chain = tokens[:-9] if size > 9 else tokens, tokens[-9:] if size > 9 else []
        recent_generated = int(rng.integers(0, len(recent) + 1))
        c = dict(cfg, repeat_last_n=window, seed=int(rng.integers(1 << 62)))
        positions = np.arange(500 + case * 16, 516 + case * 16)
        want = ref.device_draws("cpu", x, positions, c, recent, chain, recent_generated)
        got = ref.device_draws("cuda", x, positions, c, recent, chain, recent_generated)
        assert got.tolist() == want.tolist(), case
        w, g = ref.window_of(c, recent, chain, recent_generated)
        assert want.tolist()[:4] == [ref.draw(x, c, int(p), w, g) for p in positions[:4]], case


def test_sample_distribution_on_cuda():
    """Chi-square of 20000 CUDA draws against softmax(x / T) over the kept tokens."""
    x = (np.random.default_rng(7).standard_normal(60) * 1.5).astype(np.float32)
    cfg = dict(temperature=1.0, top_k=30, top_p=0.9, min_p=0.03)
    draws = ref.device_draws("cuda", x, np.arange(20000), dict(cfg, seed=99))
    ref.assert_draws_follow(draws, ref.kept_probabilities(x, cfg))


SAMPLED_GENERATION = [
    dict(temperature=0.7, top_k=40, top_p=0.95, seed=11),
    dict(temperature=0.8, min_p=0.05, repeat_penalty=1.3, seed=12),
    dict(temperature=1.0, seed=2**33 + 13),
    dict(temperature=0.8, top_k=40, frequency_penalty=0.8, presence_penalty=0.5, seed=14),
    dict(temperature=0.0, frequency_penalty=1.5, presence_penalty=0.5, repeat_last_n=128, seed=0),
]


@pytest.mark.parametrize("name", ["q4_0_untied_llama3", "f32_untied"])
@pytest.mark.parametrize("cfg", SAMPLED_GENERATION, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_sampled_generation_matches_cpu(name, cfg, pair):
    """Sampled generation (CUDA: 64 chained draws per graph launch; CPU: 8 per replay) draws the
    same tokens on both backends for one seed. The backends' logits differ by ~1e-2, so the outputs
    may part where two Gumbel scores nearly tie: at their first difference, the CPU's own logits
    must show such a tie (scores within 0.1), as for greedy decoding in assert_long_decode_matches."""
    cpu, cuda = pair(name)
    agreed = total = 0
    for prompt in PROMPTS:
        ids = cpu.tokenizer.encode(prompt)
        a = cpu.generate_tokens(ids, max_tokens=80, **cfg)
        b = cuda.generate_tokens(ids, max_tokens=80, **cfg)
        j = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        agreed, total = agreed + j, total + min(len(a), len(b))
        if j == min(len(a), len(b)):
            assert len(a) == len(b), (prompt, a, b)
            continue
        pos = len(ids) + j
        seen = (ids + a)[:pos]
        window, generated = ref.window_of(cfg, seen, recent_generated=j)
        scores = ref.scores(cpu.logits(seen)[-1], cfg, pos, window, generated)
        assert abs(float(scores[a[j]] - scores[b[j]])) < 0.1, (prompt, j, a[j], b[j], scores[a[j]], scores[b[j]])
    assert agreed >= total // 2, (agreed, total)


def test_sampled_generation_plumbing(pair):
    """Exact checks of the sampled table on CUDA: top_k=1 draws the greedy output (the sampler's slot,
    position and graph replays across chunks), a seed repeats its output, and another seed changes it."""
    _, cuda = pair("q4_0_untied_llama3")
    ids = cuda.tokenizer.encode(PROMPTS[0])
    greedy = cuda.generate_tokens(ids, max_tokens=150)
    assert len(greedy) == 150
    assert cuda.generate_tokens(ids, max_tokens=150, temperature=0.9, top_k=1, seed=3) == greedy
    kw = dict(max_tokens=150, temperature=1.0, top_p=0.9)
    first = cuda.generate_tokens(ids, seed=77, **kw)
    assert cuda.generate_tokens(ids, seed=77, **kw) == first
    assert cuda.generate_tokens(ids, seed=78, **kw) != first


# ------------------------------------------------------------------ other architectures


@pytest.fixture(scope="module")
def arch_pair(gguf_dir):
    """GGUFs of tiny_models.ARCH_SPECS (the other architectures)."""
    return cpu_cuda_pairs(lambda name: gw.build_gguf(tm.ARCH_SPECS[name], gguf_dir)[0])


@pytest.mark.parametrize("name", list(tm.ARCH_SPECS))
def test_arch_logits_match_cpu(name, arch_pair):
    """Biases, QK-norm, NeoX/partial RoPE, GELU-tanh, post-norms, softcaps and sliding windows on
    CUDA agree with the CPU (which tests/test_architectures.py checks against transformers)."""
    assert_logits_match(*arch_pair(name))


@pytest.mark.parametrize("name", ["mistral_q8_0", "gemma2_f16", "gemma3_q8_0", "qwen3_f16", "phi3_q4_0"])
def test_arch_decode_past_window_matches_cpu(name, arch_pair):
    """Decode replays (split-K attention with a window, patched positions) past the window."""
    cpu, cuda = arch_pair(name)
    ids = _tokens(cpu, 100)
    a, b = _greedy(cpu, ids, 40), _greedy(cuda, ids, 40)
    assert a == b


# ------------------------------------------------------------------ SafeTensors checkpoints of other families

import hf_checkpoints as hc  # noqa: E402

# (family spec, stored dtype): Qwen2 biases (F16), Gemma 3's (1 + w) norms/QK-norms, local RoPE
# and windows (BF16), Phi-3's fused tensors split into row ranges (F16).
ST_ARCH = {"qwen2_f16": (tm.ARCH_BASE["qwen2"], "F16"), "gemma3_bf16": (tm.ARCH_BASE["gemma3"], "BF16"),
           "phi3_f16": (tm.ARCH_BASE["phi3"], "F16")}


@pytest.fixture(scope="module")
def st_arch_pair(tmp_path_factory, tokenizer_dir):
    """name in ST_ARCH -> (cpu Model, cuda Model) of the same save_pretrained checkpoint."""

    def build(name):
        spec, dtype = ST_ARCH[name]
        return hc.save_arch_checkpoint(spec, tmp_path_factory.mktemp(name), tokenizer_dir, dtype)[0]

    return cpu_cuda_pairs(build)


@pytest.mark.parametrize("name", list(ST_ARCH))
def test_safetensors_arch_logits_match_cpu(name, st_arch_pair):
    """Checkpoint-built tensors (BF16 matrices, F32 w + 1 norms, split fused rows) on CUDA agree
    with the CPU (tests/test_safetensors_architectures.py checks the CPU against transformers)."""
    cpu, cuda = st_arch_pair(name)
    assert cuda.format == "safetensors"
    assert_logits_match(cpu, cuda)


@pytest.mark.parametrize("name", ["gemma3_bf16", "phi3_f16"])
def test_safetensors_arch_greedy_matches_cpu(name, st_arch_pair):
    cpu, cuda = st_arch_pair(name)
    ids = _tokens(cpu, 100)
    assert _greedy(cpu, ids, 40) == _greedy(cuda, ids, 40)


# ------------------------------------------------------------------ grammar-constrained decoding


@pytest.mark.parametrize("cfg", [{}, SAMPLED_GENERATION[0], SAMPLED_GENERATION[1]],
                         ids=["greedy", "sampled", "sampled-penalty"])
def test_constrained_all_allowed_equals_plain_generation_on_cuda(cfg, pair):
    """choose_token's graph (mask, then the argmax or the sampler) after feed()'s forward graph
    draws what the chained tables draw, on the same backend."""
    _, cuda = pair("q4_0_untied_llama3")
    for prompt in PROMPTS:
        ids = cuda.tokenizer.encode(prompt)
        params = akunu.SamplingParams(max_tokens=60, **cfg)
        plain = cuda.generate_tokens(ids, params)
        assert constrained_run(cuda._engine, ids, len(plain), params.to_core()) == plain


def test_constrained_forced_pieces_and_masks_on_cuda(pair):
    """Several tokens fed as one prefill pass continue like plain greedy decoding; a masked choice
    is the argmax over the allowed tokens of CUDA's own logits."""
    _, cuda = pair("q4_0_untied_llama3")
    engine = cuda._engine
    ids = cuda.tokenizer.encode(PROMPTS[0])
    plain = cuda.generate_tokens(ids, max_tokens=30)
    engine._begin_constrained(ids, akunu.SamplingParams().to_core())
    at = 0
    for size in [1, 4, 7, 2]:
        assert engine._choose_token(all_tokens_mask(engine)) == plain[at]
        engine._feed(plain[at:at + size])
        at += size
    assert engine._choose_token(all_tokens_mask(engine)) == plain[at]
    engine._end_constrained(at, "length")

    logits = cuda.logits(ids)[-1]
    vocab = cuda.config["vocab_size"]
    rng = np.random.default_rng(5)
    for allowed in [[int(np.argmin(logits))], [vocab - 1], rng.choice(vocab, 7, replace=False).tolist(),
                    rng.choice(vocab, vocab // 3, replace=False).tolist()]:
        engine._begin_constrained(ids, akunu.SamplingParams().to_core())
        token = engine._choose_token(mask_of(allowed, engine))
        engine._end_constrained(0, "stop")
        assert token in allowed and logits[token] >= max(logits[t] for t in allowed) - 1e-3


def test_forced_runs_replay_kept_graphs_at_any_position_on_cuda(pair):
    """Forced runs of 4 to 64 tokens replay a kept prefill table's graph, captured at its first
    start position and replayed at others (positions from device memory); shorter ones chain the
    decode graph, longer ones a pass built per call. Each leaves CUDA's fresh-prefill logits."""
    _, cuda = pair("q4_0_untied_llama3")
    ids = cuda.tokenizer.encode(PROMPTS[0])
    check_forced_runs(cuda, ids, [5, 1, 5, 12, 3, 5, 64, 4, 12, 65, 2], kept=[4, 5, 12, 64], not_kept=[1, 2, 3, 65])


def test_grammars_hold_on_cuda(pair):
    """A random-weight model on CUDA (its choices are arbitrary, so only the grammar keeps the output
    in shape): JSON valid against a schema, llama.cpp's json.gbnf judged by the independent
    recognizer, a regex in full; greedy and sampled."""
    import json
    import re

    import jsonschema

    from gbnf_reference import GbnfLanguage
    from paths import llama_cpp_grammars
    from test_grammar import PERSON

    _, cuda = pair("q4_0_untied_llama3")
    gbnf = (llama_cpp_grammars() / "json.gbnf").read_text(encoding="utf-8")
    pattern = r"\(\d{3}\) \d{3}-\d{4}"
    for cfg in ({}, dict(temperature=1.0, seed=3)):
        text = cuda.generate("A person:", grammar=akunu.Grammar.json_schema(PERSON), max_tokens=400, **cfg)
        assert cuda.finish_reason == "stop", text
        jsonschema.validate(json.loads(text), PERSON)
        text = cuda.generate("JSON:", grammar=akunu.Grammar.gbnf(gbnf), max_tokens=200, **cfg)
        language = GbnfLanguage(gbnf)
        assert language.accepts(text) if cuda.finish_reason == "stop" else language.accepts_prefix(text), text
        assert re.fullmatch(pattern, cuda.generate("Call", grammar=akunu.Grammar.regex(pattern), **cfg))


def test_json_schema_corpus_on_cuda(pair):
    """Every schema of tests/data/json_schemas.json on CUDA, a random-weight model sampling at
    temperature 1 (arbitrary choices: the grammar alone keeps the output valid): every completed
    output validates with jsonschema (tests/test_grammar.py runs the corpus through SmolLM2 on the CPU)."""
    import json

    from json_schema_walk import load_corpus, unexplained_errors

    _, cuda = pair("q4_0_untied_llama3")
    corpus = load_corpus()
    completed, failures = 0, []
    for i, entry in enumerate(corpus):
        text = cuda.generate("JSON:", grammar=akunu.Grammar.json_schema(entry["schema"]), max_tokens=300,
                             temperature=1.0, seed=i)
        if cuda.finish_reason == "stop":
            completed += 1
            failures += [(entry["name"], m, text) for m in unexplained_errors(entry["schema"], json.loads(text))]
    assert not failures, failures[:5]
    assert completed >= len(corpus) // 4, completed


# ------------------------------------------------------------------ akunu serve on CUDA


@pytest.fixture(scope="module")
def cuda_server(gguf_dir):
    """`akunu serve` over a random-weight Llama-3-vocabulary model on CUDA, and the same file
    loaded on CUDA through the Python API (the reference for the server's replies)."""
    from akunu.server import ModelSpec, ServerConfig
    from server_harness import running_server

    path = gw.build_gguf(SPECS["q4_0_untied_llama3"], gguf_dir)[0]
    with running_server(ServerConfig(models=[ModelSpec("tiny", str(path), backend="cuda")])) as server:
        yield server, akunu.Model(str(path), backend="cuda")


def test_server_replies_equal_the_python_api_on_cuda(cuda_server):
    server, ref = cuda_server
    client = server.openai()
    messages = [{"role": "user", "content": PROMPTS[0]}]
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=24, temperature=0)
    ids = ref.tokenizer.encode(ref.format_chat(messages), add_special=False, parse_special=True)
    assert r.choices[0].message.content == ref.chat(messages, max_tokens=24)
    assert r.usage.prompt_tokens == len(ids)
    assert r.usage.completion_tokens == len(ref.generate_tokens(ids, max_tokens=24))
    chunks = client.chat.completions.create(model="tiny", messages=messages, max_tokens=24, temperature=0, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == r.choices[0].message.content
    c = client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=16, temperature=0.8, seed=5)
    assert c.choices[0].text == ref.generate(PROMPTS[1], max_tokens=16, temperature=0.8, seed=5)


def test_server_structured_output_on_cuda(cuda_server):
    import json

    import jsonschema

    from test_grammar import PERSON

    server, _ = cuda_server
    r = server.openai().chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "A person"}], max_tokens=400, temperature=1.0, seed=2,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_server_tool_round_trip_on_cuda(cuda_server):
    import json

    import jsonschema

    from test_server import ASK, TOOLS

    server, _ = cuda_server
    client = server.openai()
    first = client.chat.completions.create(model="tiny", messages=ASK, tools=TOOLS, tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=200, temperature=1.0, seed=4)
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = first.choices[0].message.tool_calls
    schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call.function.name)
    jsonschema.validate(json.loads(call.function.arguments), schema)
    history = ASK + [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "18 degrees"}]
    final = client.chat.completions.create(model="tiny", messages=history, tools=TOOLS, tool_choice="none",
                                           max_tokens=16, temperature=0)
    assert final.choices[0].message.content and final.usage.completion_tokens >= 1


def test_server_errors_on_cuda(cuda_server):
    import openai

    server, ref = cuda_server
    client = server.openai()
    too_long = [{"role": "user", "content": "word " * (ref.context_length + 10)}]
    for kwargs, status in [(dict(model="nope"), 404), (dict(model="tiny", temperature=-1), 400),
                           (dict(model="tiny", messages=too_long), 400)]:
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(**{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                                              **kwargs})
        assert info.value.status_code == status

# ------------------------------------------------------------------ prompt reuse
# tests/test_prompt_reuse.py's checks on CUDA (docs/adr/0018-prompt-reuse.md): a model reusing its
# cache against one reset before every request. On the CPU a position's K/V rows come out bit for
# bit alike from a decode step and a prefill pass; CUDA computes them with other kernels (GEMVs and
# the split-K decode attention vs tiled GEMMs and the tensor-core prefill attention), so a reply
# after reuse equals a fresh model's only where those agree. A failing reply test says where the
# tokens part and the fresh model's logit gap there (a near tie: rounding; a wide gap: a wrong cache).

import prompt_reuse_checks as pr  # noqa: E402


# A random-weight Llama (the GPU machines have no SmolLM2): head_dim 64 so that CUDA takes the Q8_0
# cache too. Its logits are flat, so near ties are common: a stricter test of bit-identical caches.
SPECS["reuse_hd64"] = tm.family_spec("llama", "reuse_hd64", dtype="Q4_0", hidden=256, n_heads=4, n_kv_heads=2,
                                     head_dim=64, ffn=512, seed=23)


@pytest.fixture(scope="module")
def reuse_cuda(gguf_dir):
    """(served, fresh) models on CUDA with the F16 and the Q8_0 KV cache (SPECS["reuse_hd64"])."""
    path = gw.build_gguf(SPECS["reuse_hd64"], gguf_dir)[0]
    cache = {}

    def get(kv_cache_dtype):
        if kv_cache_dtype not in cache:
            cache[kv_cache_dtype] = tuple(akunu.Model(str(path), backend="cuda", kv_cache_dtype=kv_cache_dtype,
                                                      prompt_cache_bytes=size) for size in (None, 0))
        return cache[kv_cache_dtype]

    return get


@pytest.mark.parametrize("kv_cache_dtype", ["f16", "q8_0"])
@pytest.mark.parametrize("settings", [{}, pr.SEEDED], ids=["greedy", "seeded"])
def test_prompt_reuse_chat_equals_fresh_on_cuda(settings, kv_cache_dtype, reuse_cuda):
    """10 turns, each reply identical to a fresh CUDA model's, each turn reusing the previous prompt whole."""
    served, fresh = reuse_cuda(kv_cache_dtype)
    turns = pr.run_chat(served, fresh, pr.QUESTIONS, **settings)
    # Each turn reuses at least the previous turn's prompt (its reply as the template writes it
    # may tokenize otherwise than it was generated).
    assert all(cached >= previous - 2 for (previous, _), (_, cached) in zip(turns, turns[1:])), turns


@pytest.mark.parametrize("kv_cache_dtype", ["f16", "q8_0"])
def test_prompt_reuse_logits_on_cuda(kv_cache_dtype, reuse_cuda):
    """Rolled back into the prompt and into the decoded output (which CUDA runs again): the next
    logits are a fresh CUDA model's within the CUDA-vs-CPU tolerance. Not bit for bit: a CUDA
    prefill row rounds differently with the rows around it in its pass (H200: up to 0.0214 on a
    logit of -49.6, 4e-4 of it, with split-K GEMMs), as a fresh model's own long prompt does split
    into max_prefill_chunk passes."""
    served, fresh = reuse_cuda(kv_cache_dtype)
    ids = pr.chat_ids(served, [{"role": "user", "content": "Write a long story about the sea."}])

    def build(model):
        model.reset()
        model.generate_tokens(ids, max_tokens=24)

    new = served.tokenizer.encode(" Actually, never mind.", add_special=False)
    points = [1, len(ids) // 2, len(ids), len(ids) + 10]
    pr.assert_rollback_logits(served, fresh, build, new, points, atol=2e-2, rtol=1e-3)


def test_prompt_cache_round_trip_is_exact_on_cuda(reuse_cuda):
    """A conversation set aside (its KV rows read back from the GPU) and restored (written again)
    continues bit for bit as it would have from the live cache."""
    served, _ = reuse_cuda("f16")
    a = pr.chat_ids(served, [{"role": "user", "content": pr.CONVERSATION_A[0]}])
    b = pr.chat_ids(served, [{"role": "user", "content": pr.CONVERSATION_B[0]}])
    more = served.tokenizer.encode(" And one more line.", add_special=False)

    def continued(set_aside: bool):
        served.reset()
        served.generate_tokens(a, max_tokens=48)
        cached = list(served._engine.cached_tokens)
        keepable = served._engine.reusable_length
        if set_aside:
            served.generate_tokens(b, max_tokens=8)
            assert served._engine.prompt_cache_entries == 1
        logits = pr.rollback_logits(served, cached + more)
        assert served.stats.cached_tokens == keepable  # the prompt's positions (decode steps round otherwise)
        return logits

    assert np.array_equal(continued(False), continued(True))


def test_prompt_reuse_interleaved_on_cuda(reuse_cuda):
    for kv_cache_dtype in ("f16", "q8_0"):
        served, fresh = reuse_cuda(kv_cache_dtype)
        pr.run_interleaved(served, fresh)


@pytest.mark.parametrize("kv_cache_dtype", ["f16", "q8_0"])
def test_prompt_reuse_window_ring_on_cuda(kv_cache_dtype, gguf_dir):
    """2600 cached positions wrap the CUDA ring (window + 2048 rows): a rollback is kept exactly while
    the ring holds the window before it, else the session starts over; outputs are a fresh model's."""
    path, _ = gw.build_gguf(GQA_ARCH["mistral_hd64"], gguf_dir)
    served, fresh = (akunu.Model(str(path), backend="cuda", context_length=4096, kv_cache_dtype=kv_cache_dtype,
                                 prompt_cache_bytes=size) for size in (None, 0))
    window = served.config["sliding_window"]
    ids = _tokens(served, 300)
    ids = (ids * 9)[:2600]

    def fill():
        served.reset()
        served.generate_tokens(ids, max_tokens=8)
        return list(served._engine.cached_tokens)

    cached = fill()
    n = len(cached)
    keepable = served._engine.reusable_length  # the 2600 prompt positions: decoded ones are run again
    boundary = n - (window + CUDA_RING_EXTRA_ROWS) + window - 1  # the smallest p the ring still serves
    for p, expect in [(n - 1, n - 1), (boundary, boundary), (boundary - 1, 0)]:
        assert fill() == cached
        other = next(t for t in ids if t != cached[p])
        prompt = cached[:p] + [other] + ids[:6]
        got = served.generate_tokens(prompt, max_tokens=12)
        assert served.stats.cached_tokens == min(expect, keepable)
        fresh.reset()
        want = fresh.generate_tokens(prompt, max_tokens=12)
        assert got == want, pr.divergence(fresh, prompt, got, want)


# --- the memory plan (docs/adr/0021-memory-plan.md) ----------------------------------------------------

def test_context_beyond_gpu_memory_is_refused_by_the_plan(gguf_dir):
    """A context whose KV cache is twice the GPU's free memory raises OutOfMemoryError from the memory
    plan — cudaMemGetInfo's free bytes, the breakdown, the largest context that fits — before any CUDA
    allocation (no CUDA error in the message; the GPU's free memory is the same afterwards). A context
    1 GiB of KV cache short of that largest one (room for what the plan does not count: CUDA graphs,
    cuBLAS's handle and workspace) then loads and generates what a small context does."""
    spec = SPECS["f16_hd64"]
    path = str(gw.build_gguf(spec, gguf_dir)[0])

    def plan(context):
        return akunu.Model.plan_memory(path, backend="cuda", context_length=context)

    before = plan(1024)
    assert before["fits"] and before["backend"] == "cuda"
    assert before["available_source"].startswith("cudaMemGetInfo free"), before
    per_token = (plan(2048)["kv_cache_bytes"] - before["kv_cache_bytes"]) // 1024
    assert per_token == spec.n_layers * 2 * spec.n_kv_heads * spec.head_dim * 2  # K and V, F16
    context = min(2**31 - 1, 2 * before["available_bytes"] // per_token)
    refused = plan(context)
    assert not refused["fits"]

    with pytest.raises(akunu.OutOfMemoryError) as info:
        akunu.Model(path, backend="cuda", context_length=context)
    e = info.value
    assert isinstance(e, MemoryError) and isinstance(e, akunu.AkunuError)
    assert e.needed == refused["total_bytes"] > e.available
    assert abs(e.available - before["available_bytes"]) < 256 << 20
    assert 0 < e.largest_context < context and e.largest_context * per_token <= e.available
    message = str(e)
    for number in (e.needed, e.available, e.largest_context):
        assert str(number) in message, message
    assert "cudaMemGetInfo free" in message and "CUDA out of memory" not in message and " failed" not in message
    after = plan(1024)
    assert abs(after["available_bytes"] - before["available_bytes"]) < 256 << 20, "the refused load left memory allocated"

    big = akunu.Model(path, backend="cuda", context_length=e.largest_context - (1 << 30) // per_token)
    small = akunu.Model(path, backend="cuda", context_length=1024)
    ids = _tokens(small, 64)
    assert big.generate_tokens(ids, max_tokens=16) == small.generate_tokens(ids, max_tokens=16)
