"""Sliding-window layers keep only their window in the KV cache (CPU backend).

A sliding-window layer's cache is a ring of window + 512 rows (the most rows one forward pass
writes: a prefill chunk); position p lives at row p % ring. Checks: the cache's memory follows
the layer kinds, and prompts long enough to wrap the ring several times still give transformers'
logits (Gemma 2: softcaps, every other layer sliding; Gemma 3: five local layers in six; Mistral:
every layer sliding), for the F16 and the Q8_0 cache, through prefill chunks and decode replays.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

import gguf_writer as gw
import references as rf
import tiny_models as tm
from test_kv_cache_dtype import q8_reference_logits

RING_EXTRA_ROWS = 512  # ChipConfig::for_cpu's max_prefill_chunk: a pass writes at most this many rows
CONTEXT = 4096

WINDOWED = {
    "gemma2": tm.ARCH_SPECS["gemma2_f16"],
    "gemma3": tm.ARCH_SPECS["gemma3_q8_0"],
    "mistral": tm.ARCH_SPECS["mistral_f16"],
    # head_dim 32 for the Q8_0 cache (whole 32-element blocks)
    "gemma2_q8_cache": replace(tm.ARCH_BASE["gemma2"], name="gemma2_f16_hd32", dtype="F16"),
}


def _long_ids(varied_ids, n):
    """n teacher-forcing tokens: the varied text repeated (a ring of 32 + 512 rows wraps at 544)."""
    return (varied_ids * (n // len(varied_ids) + 1))[:n]


def _row_bytes(cfg, kv_cache_dtype):
    """K plus V bytes of one position of one layer."""
    per_head = cfg["head_dim"] * 2 if kv_cache_dtype == "f16" else cfg["head_dim"] + cfg["head_dim"] // 32 * 2
    return 2 * cfg["n_kv_heads"] * per_head


@pytest.mark.parametrize("name, kv_cache_dtype", [("gemma2", "f16"), ("gemma3", "f16"), ("mistral", "f16"),
                                                  ("gemma2_q8_cache", "q8_0")])
def test_sliding_layers_hold_their_window(name, kv_cache_dtype, akunu_mod, gguf_dir):
    path, _ = gw.build_gguf(WINDOWED[name], gguf_dir)
    model = akunu_mod.Model(str(path), backend="cpu", context_length=CONTEXT, kv_cache_dtype=kv_cache_dtype)
    cfg = model.config
    local = sum(1 for s in cfg["sliding_layers"] if s)
    assert cfg["sliding_window"] and local, cfg
    ring = cfg["sliding_window"] + RING_EXTRA_ROWS
    rows = (cfg["n_layers"] - local) * CONTEXT + local * ring
    assert model.kv_cache_bytes == rows * _row_bytes(cfg, kv_cache_dtype)
    full = cfg["n_layers"] * CONTEXT * _row_bytes(cfg, kv_cache_dtype)
    assert model.kv_cache_bytes < full  # what a full-length cache on every layer would take


def test_window_wider_than_the_context_keeps_the_context(akunu_mod, gguf_dir):
    """A ring is never longer than the context: 32 + 512 rows > a 256-token context."""
    path, _ = gw.build_gguf(WINDOWED["mistral"], gguf_dir)
    model = akunu_mod.Model(str(path), backend="cpu", context_length=256)
    cfg = model.config
    assert model.kv_cache_bytes == cfg["n_layers"] * 256 * _row_bytes(cfg, "f16")


@pytest.mark.parametrize("name, kv_cache_dtype", [("gemma2", "f16"), ("gemma3", "f16"), ("mistral", "f16"),
                                                  ("gemma2_q8_cache", "q8_0")])
def test_wrapped_ring_matches_transformers(name, kv_cache_dtype, akunu_mod, gguf_dir, varied_ids):
    """1300 positions: the ring of 544 rows wraps twice, under logits passes of 64 rows. Against
    transformers (for the Q8_0 cache, transformers with its K/V rounded to Q8_0, as
    tests/test_kv_cache_dtype.py builds it); then greedy decode replays past the wraps read the
    ring as the all-rows passes do."""
    spec = WINDOWED[name]
    path, _ = gw.build_gguf(spec, gguf_dir)
    ids = _long_ids(varied_ids, 1300)
    model = akunu_mod.Model(str(path), backend="cpu", context_length=CONTEXT, kv_cache_dtype=kv_cache_dtype)
    ref = (rf.hf_logits(rf.reference_from_gguf(path, spec), ids) if kv_cache_dtype == "f16"
           else q8_reference_logits(spec, path, ids))
    ok, c = rf.criterion(ref, model.logits(ids))
    assert ok, f"{name} ({kv_cache_dtype} cache) over {len(ids)} tokens against transformers: {rf.describe(c)}"
    rf.assert_decode_matches_teacher_forcing(model, ids[:600], 41)
