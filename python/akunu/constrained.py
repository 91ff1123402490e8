"""The grammar-constrained generation loop: the engine's constrained session (feed / choose_token,
src/inference/constrained_generation.cpp) driven by an llguidance matcher.

Per step: the matcher computes the allowed-token mask while the device runs the forward pass of
the tokens just fed (the engine returns from feed() at once on CUDA), choose_token applies the mask
on the device before its argmax or sampler, and the tokens the grammar then forces (a fixed key, a
closing brace) are fed without a choice each: on the CPU with the chosen token in one pass, on
CUDA after it (docs/adr/0017-constrained-decoding-session.md)."""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
from llguidance import LLMatcher

from .grammar import GrammarError


def constrained_tokens(engine, tokenizer, matcher: LLMatcher, prompt: list[int], config,
                       is_current: Callable[[], bool]) -> Iterator[list[int]]:
    """Yields the generated tokens in pieces (each chosen token with the tokens forced after it);
    ends the engine's session with "stop" when the grammar is complete or the model ends it, and
    "length" when max_tokens or the context runs out first (the output is then incomplete).
    is_current() says whether the engine's session is still this one (a later call may have
    started another: then this one must not end it)."""
    max_tokens = config.max_tokens

    def check(ok: bool) -> None:
        if not ok or matcher.is_error():
            raise GrammarError(f"the grammar engine failed: {matcher.get_error()}")

    def forced(limit: int) -> list[int]:
        ff = matcher.compute_ff_tokens()[:max(limit, 0)]
        if ff:
            check(matcher.consume_tokens(ff))
        return ff

    # Text the grammar forces before the model chooses anything (`{"` of a JSON object) goes in
    # with the prompt's prefill.
    first = forced(min(max_tokens, engine.context_length - len(prompt)))
    engine._begin_constrained(prompt + first, config)
    generated = len(first)
    reason = "length"
    try:
        if first:
            yield first
        mask = np.zeros(engine.token_mask_words, dtype=np.int32)
        asynchronous = engine.backend != "cpu"
        while not matcher.is_stopped() and generated < max_tokens:
            matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)
            check(True)
            token = engine._choose_token(mask)
            if tokenizer.is_eog(token):  # the mask allows it only where the grammar may end
                reason = "stop"
                break
            generated += 1
            more = generated < max_tokens and engine.position < engine.context_length
            # Where feed() returns before the pass runs (CUDA), feed the token before the grammar
            # takes it, so the device starts at once (the mask made the token valid; if it completes
            # the grammar, that pass is wasted, but nobody waits for it). On the CPU, where feed()
            # runs the pass, the token goes in one pass with the tokens the grammar then forces.
            fed = more and asynchronous
            if fed:
                engine._feed([token])
            check(matcher.consume_token(token))
            piece = [token]
            if more:
                ff = forced(min(max_tokens - generated, engine.context_length - engine.position - (not fed)))
                generated += len(ff)
                piece += ff
                unfed = ff if fed else piece
                if unfed and generated < max_tokens and not matcher.is_stopped():  # a next choice needs them
                    engine._feed(unfed)
            yield piece
            if not more:
                break
        if matcher.is_stopped():
            reason = "stop"
    finally:
        if is_current():
            engine._end_constrained(generated, reason)
