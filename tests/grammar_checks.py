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


def pieces_of(model, grammar, tokens) -> tuple[list[int], list[list[int]]]:
    """`tokens` as the generation loop (python/akunu/constrained.py) produced them: the tokens the
    grammar forced before the first choice, then one piece per choice (the chosen token and the
    tokens forced after it), found by replaying them through the grammar."""
    matcher = model._grammars.matcher(grammar)
    first = matcher.compute_ff_tokens()
    assert tokens[:len(first)] == first
    matcher.consume_tokens(first)
    pieces, at = [], len(first)
    while at < len(tokens):
        matcher.consume_token(tokens[at])
        forced = matcher.compute_ff_tokens()[:len(tokens) - at - 1]
        if forced:
            assert tokens[at + 1:at + 1 + len(forced)] == forced
            matcher.consume_tokens(forced)
        pieces.append(tokens[at:at + 1 + len(forced)])
        at += 1 + len(forced)
    return first, pieces


def chosen_count(model, grammar, tokens) -> int:
    """How many of `tokens` the model chose (the rest the grammar forced)."""
    return len(pieces_of(model, grammar, tokens)[1])
