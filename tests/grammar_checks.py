"""Helpers for driving the engine's grammar-constrained session directly (token masks in
llguidance's layout: bit i % 32 of int32 word i // 32 allows token i)."""
from __future__ import annotations

import numpy as np


def all_tokens_mask(engine) -> np.ndarray:
    return np.full(engine.token_mask_words, -1, dtype=np.int32)


def mask_of(allowed, engine) -> np.ndarray:
    bits = np.zeros(engine.token_mask_words * 32, dtype=np.uint8)
    bits[list(allowed)] = 1
    return np.packbits(bits, bitorder="little").view(np.int32).copy()


def constrained_run(engine, prompt_ids, n, config):
    """n tokens of a constrained session with every token allowed, each fed on its own."""
    engine._begin_constrained(prompt_ids, config)
    mask = all_tokens_mask(engine)
    out = []
    while True:
        out.append(engine._choose_token(mask))
        if len(out) == n:
            break
        engine._feed([out[-1]])
    engine._end_constrained(len(out), "length")
    return out
