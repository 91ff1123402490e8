"""Helpers for driving the engine's grammar-constrained session directly (token masks in
llguidance's layout: bit i % 32 of int32 word i // 32 allows token i)."""
from __future__ import annotations

import numpy as np

import akunu


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


def check_forced_runs(model, ids, sizes, kept, not_kept, tol=1e-3):
    """Feeds greedy output in runs of `sizes` (the tokens a grammar would force) and, after each
    run, probes the logits it left with a masked choice between two tokens of ranks 1..8 of the
    reference: the logits of a fresh prefill of the same tokens (model.logits). Runs of one size at
    several positions replay one kept table (a CUDA graph) at each. After, engine.forced_run_tables
    lists every size of `kept` and none of `not_kept`."""
    engine = model._engine
    plain = model.generate_tokens(ids, max_tokens=sum(sizes) + 1)
    assert len(plain) == sum(sizes) + 1, "the model stopped early: pick another prompt"
    references = model.logits(ids + plain)  # row i: the logits after token i (its own session)
    engine._begin_constrained(ids, akunu.SamplingParams().to_core())
    at = 0
    assert engine._choose_token(all_tokens_mask(engine)) == plain[0]
    for step, size in enumerate(sizes):
        engine._feed(plain[at:at + size])
        at += size
        assert engine.position == len(ids) + at
        reference = references[len(ids) + at - 1]
        order = np.argsort(-reference)
        allowed = [int(order[1 + step % 4]), int(order[5 + step % 3])]
        token = engine._choose_token(mask_of(allowed, engine))
        scale = max(1.0, float(np.abs(reference).max()))
        assert token in allowed and reference[token] >= reference[allowed].max() - tol * scale, (size, at, allowed)
    engine._end_constrained(at, "length")
    tables = set(engine.forced_run_tables)
    assert set(kept) <= tables and not set(not_kept) & tables, (tables, kept, not_kept)
