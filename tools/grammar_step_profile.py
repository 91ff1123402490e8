"""Where a grammar-constrained generation's time goes, step by step: the engine calls (choose_token
waits for the device; feed starts a pass) and the matcher calls (mask, forced tokens), timed by
wrapping both in proxies around akunu.constrained.constrained_tokens. Prints totals per call and
the forced runs' sizes. With --sweep, the device time of one forced run by its length instead:
feed(n tokens) then choose_token, which waits for the pass. For finding what to speed up, not a
benchmark.

    python tools/grammar_step_profile.py --model GGUF --backend cuda [--sweep]
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

import akunu
from akunu import Grammar
from akunu.constrained import constrained_tokens

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from grammar_decode import ORDER, ORDER_PROMPT  # noqa: E402


class Timed:
    """Forwards attribute access to `inner`, timing the calls of the methods named in `names`."""

    def __init__(self, inner, names, totals, sizes):
        self._inner, self._names, self._totals, self._sizes = inner, names, totals, sizes

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if name not in self._names:
            return value

        def timed(*args):
            t0 = time.perf_counter()
            out = value(*args)
            self._totals[name][0] += 1
            self._totals[name][1] += time.perf_counter() - t0
            if name == "_feed":
                self._sizes[len(args[0])] += 1
            return out
        return timed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--sweep", action="store_true")
    a = ap.parse_args()
    model = akunu.Model(a.model or str(akunu.default_model_path()), backend=a.backend, context_length=2048)
    if a.sweep:
        return sweep(model, a.r)
    ids = model.tokenizer.encode(model.format_chat([{"role": "user", "content": ORDER_PROMPT}]), add_special=False,
                                 parse_special=True)
    grammar = Grammar.json_schema(ORDER)
    config = akunu.SamplingParams(max_tokens=256).to_core()
    for rep in range(a.r + 1):  # the first warms up
        totals = collections.defaultdict(lambda: [0, 0.0])
        sizes = collections.Counter()
        engine = Timed(model._engine, {"_feed", "_choose_token", "_begin_constrained"}, totals, sizes)
        matcher = Timed(model._grammars.matcher(grammar),
                        {"unsafe_compute_mask_ptr", "compute_ff_tokens", "consume_token", "consume_tokens"},
                        totals, sizes)
        t0 = time.perf_counter()
        out = [t for piece in constrained_tokens(engine, model.tokenizer, matcher, ids, config, lambda: True)
               for t in piece]
        wall = (time.perf_counter() - t0) * 1000
        if rep == 0:
            continue
        print(f"rep {rep}: {len(out)} tokens in {wall:.2f} ms; feed sizes {dict(sorted(sizes.items()))}")
        for name, (calls, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
            print(f"  {name:26s} {calls:4d} calls {seconds * 1000:8.2f} ms  ({seconds * 1e6 / calls:7.1f} us each)")
    return 0


def sweep(model, reps: int) -> int:
    engine = model._engine
    ids = model.tokenizer.encode("Once upon a time", add_special=True)
    mask = np.full(engine.token_mask_words, -1, dtype=np.int32)
    for n in (1, 2, 3, 4, 6, 8, 12, 16, 32, 64):
        times = []
        engine._begin_constrained(ids, akunu.SamplingParams().to_core())
        token = engine._choose_token(mask)
        for rep in range(reps + 1):
            t0 = time.perf_counter()
            engine._feed([token] * n)
            token = engine._choose_token(mask)
            if rep:
                times.append((time.perf_counter() - t0) * 1000)
        engine._end_constrained(0, "length")
        print(f"forced run of {n:3d}: feed + choose {min(times):7.3f} ms min, {sorted(times)[len(times) // 2]:7.3f} ms median")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
