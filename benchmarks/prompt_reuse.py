"""Prompt reuse (issue 35, acceptance 3): time to first token over a 10-turn chat, with the KV cache
reused from turn to turn against the same turns prefilled whole (reset() before each), one model
file, one process:

- reuse: one Model carries the conversation; turn N prefills only what turn N - 1 did not leave in
  its cache (the new question and the template around it).
- reset: a second Model of the same file, reset() before each turn, prefills the whole history.

Each turn sends both the same messages (the history with the replies so far); the replies must be
the same text (prompt reuse never changes the output). TTFT: wall time from chat(stream=True) to its
first text piece (rendering the template and tokenizing included, as a user waits for it); the
engine's own part (stats.prefill_ms: reuse, then the prefill) beside it. The two models take turns
within each turn; median over -r runs of the whole chat.

    python benchmarks/prompt_reuse.py [--model GGUF] [--backend cpu|cuda] [-n 128] [-r 3]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import akunu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from prompt_reuse_checks import QUESTIONS  # noqa: E402


def first_token_ms(model, messages, max_tokens) -> tuple[float, str]:
    """(ms from the call to the first text piece, the whole reply)."""
    t0 = time.perf_counter()
    pieces = model.chat(messages, stream=True, max_tokens=max_tokens)
    first = next(pieces, "")
    ttft = (time.perf_counter() - t0) * 1000
    return ttft, first + "".join(pieces)


def run_chat(reuse, reset, max_tokens):
    """One 10-turn chat through both models: per turn (prompt tokens, cached tokens, TTFT reuse,
    TTFT reset, engine ms reuse, engine ms reset)."""
    reuse.reset()
    messages, rows = [], []
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        ttft_reuse, reply = first_token_ms(reuse, messages, max_tokens)
        s = reuse.stats
        reset.reset()
        ttft_reset, reply_reset = first_token_ms(reset, messages, max_tokens)
        if reply != reply_reset:
            raise SystemExit(f"turn {len(rows) + 1}: the reply with reuse differs from the reply without:\n"
                             f"{reply!r}\n{reply_reset!r}")
        rows.append((s.prompt_tokens, s.cached_tokens, ttft_reuse, ttft_reset, s.prefill_ms, reset.stats.prefill_ms))
        messages.append({"role": "assistant", "content": reply})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("-n", type=int, default=128, help="most tokens per reply")
    ap.add_argument("-r", "--reps", type=int, default=3, help="runs of the whole chat (median per turn)")
    a = ap.parse_args()
    path = a.model or str(akunu.default_model_path())
    reuse = akunu.Model(path, backend=a.backend)
    reset = akunu.Model(path, backend=a.backend, prompt_cache_bytes=0)
    print(f"model {Path(path).name}, backend {reuse.backend} ({reuse.device_name}), {platform.processor() or ''}"
          f" akunu {akunu.__version__}, {len(QUESTIONS)} turns, replies of at most {a.n} tokens, median of {a.reps}")
    first_token_ms(reuse, [{"role": "user", "content": "Hi"}], 4)  # warm-up
    first_token_ms(reset, [{"role": "user", "content": "Hi"}], 4)

    runs = [run_chat(reuse, reset, a.n) for _ in range(a.reps)]
    print("| turn | prompt tokens | reused | TTFT reuse (ms) | TTFT reset (ms) | reset / reuse | engine reuse (ms) "
          "| engine reset (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for turn, per_run in enumerate(zip(*runs), 1):
        prompt, cached = per_run[0][:2]
        med = [statistics.median(r[i] for r in per_run) for i in range(2, 6)]
        print(f"| {turn} | {prompt} | {cached} | {med[0]:.1f} | {med[1]:.1f} | {med[1] / med[0]:.1f}x "
              f"| {med[2]:.1f} | {med[3]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
