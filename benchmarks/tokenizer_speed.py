"""Tokenizer encoding speed against llama.cpp's (issue 33, acceptance 2): for every llama.cpp vocab file
akunu loads, about 1 MB of the exactness corpus's mixed text (scripts, numbers, whitespace runs, code,
emoji) joined by newlines, encoded whole by akunu (akunu.Tokenizer.encode) and by llama.cpp
(llama-cpp-python's Llama(vocab_only=True).tokenize), special-token parsing off, alternately, median
of --reps runs each. Also checks that the two engines' ids for the whole text are identical.

    python benchmarks/tokenizer_speed.py [--mb 1] [--reps 3] [--vocabs qwen2,gpt-2]

One process, one thread per engine; numbers move with the machine's load, the ratio of one run is
what compares the engines.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import akunu  # noqa: E402
from paths import llama_cpp_vocabs  # noqa: E402
from test_tokenizer_exactness import LOADED  # noqa: E402
from tokenizer_corpus import make_corpus  # noqa: E402


def mixed_text(n_bytes: int) -> str:
    """The corpus's strings joined by newlines, cut to about n_bytes of UTF-8 (at a string boundary)."""
    parts, size, seed = [], 0, 33
    while size < n_bytes:
        for s in make_corpus(500, seed=seed):
            parts.append(s)
            size += len(s.encode()) + 1
            if size >= n_bytes:
                break
        seed += 1
    return "\n".join(parts)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=1.0, help="text size in MB")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--vocabs", default=",".join(LOADED))
    args = ap.parse_args()
    import llama_cpp

    text = mixed_text(int(args.mb * 1e6))
    data = text.encode()
    d = llama_cpp_vocabs()
    print(f"{platform.processor() or platform.machine()}; llama-cpp-python {llama_cpp.__version__}, akunu "
          f"{akunu.__version__}; {len(data) / 1e6:.2f} MB of mixed text, median of {args.reps}")
    print(f"{'vocab':<16}{'model':<7}{'tokens':>9}{'llama.cpp MB/s':>16}{'akunu MB/s':>12}{'ratio':>8}  ids")
    mismatched = 0
    for name in args.vocabs.split(","):
        path = d / f"ggml-vocab-{name}.gguf"
        tok = akunu.Tokenizer.from_file(str(path))
        ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        ours = tok.encode(text, add_special=False, parse_special=False)
        theirs = ref.tokenize(data, add_bos=False, special=False)
        same = list(ours) == list(theirs)
        mismatched += not same
        t_ref, t_ours = [], []
        for _ in range(args.reps):  # alternately, so drift hits both
            t_ref.append(timed(lambda: ref.tokenize(data, add_bos=False, special=False)))
            t_ours.append(timed(lambda: tok.encode(text, add_special=False, parse_special=False)))
        mb = len(data) / 1e6
        r, o = mb / statistics.median(t_ref), mb / statistics.median(t_ours)
        print(f"{name:<16}{tok.model:<7}{len(ours):>9}{r:>16.2f}{o:>12.2f}{o / r:>7.2f}x  "
              f"{'same' if same else 'DIFFER'}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
