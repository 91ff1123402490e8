"""llama-bench style measurements: pp (prompt processing) and tg (token generation) in tokens/s,
mean ± standard deviation over repetitions after one warm-up run, optionally at context depths
(llama-bench's -d: that many tokens already in the KV cache when the timed test starts)."""

from __future__ import annotations

import os
import random
import statistics
import time


def _prompt_tokens(model, n: int, seed: int) -> list[int]:
    # Random ids like llama-bench: speed does not depend on which tokens they are.
    rng = random.Random(seed)
    vocab = model.config["vocab_size"]
    return [rng.randrange(vocab) for _ in range(n)]


def _fill_context(model, depth: int, seed: int) -> None:
    # llama-bench's -d: `depth` tokens already in the KV cache before the timed test (untimed).
    model._engine.reset()
    if depth > 0:
        model._engine.prefill(_prompt_tokens(model, depth, seed))


def measure_pp(model, n_prompt: int, seed: int = 0, depth: int = 0) -> float:
    """Tokens/s of one prefill of `n_prompt` random tokens after `depth` tokens of context."""
    _fill_context(model, depth, seed + 1_000_003)
    tokens = _prompt_tokens(model, n_prompt, seed)
    t0 = time.perf_counter()
    model._engine.prefill(tokens)
    return n_prompt / (time.perf_counter() - t0)


def measure_tg(model, n_gen: int, depth: int = 0) -> float:
    """Tokens/s of greedy chain decode of `n_gen` tokens, as llama-bench's tg test: after a one-token
    context, or after `depth` tokens."""
    if depth > 0:
        _fill_context(model, depth, 7)
    else:
        model._engine.reset()
        model._engine.prefill([model.tokenizer.bos_id if model.tokenizer.bos_id >= 0 else 0])
    token = 0
    t0 = time.perf_counter()
    remaining = n_gen
    while remaining > 0:
        chunk = model._engine.chain_decode(token, remaining)
        remaining -= len(chunk)
        token = chunk[-1]
    return n_gen / (time.perf_counter() - t0)


def test_name(kind: str, n: int, depth: int) -> str:
    """llama-bench's names: pp512, tg128, and at a depth pp512 @ d4096."""
    return f"{kind}{n}" + (f" @ d{depth}" if depth else "")


def run_tests(model, n_prompt: int, n_gen: int, repetitions: int, depths=(0,)) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    for depth in depths:
        if n_prompt > 0:
            measure_pp(model, n_prompt, seed=-1, depth=depth)  # warm-up
            results[test_name("pp", n_prompt, depth)] = [measure_pp(model, n_prompt, seed=r, depth=depth)
                                                         for r in range(repetitions)]
        if n_gen > 0:
            measure_tg(model, n_gen, depth)
            results[test_name("tg", n_gen, depth)] = [measure_tg(model, n_gen, depth) for _ in range(repetitions)]
    return results


def run_bench(model, n_prompt: int, n_gen: int, repetitions: int, depths=(0,)) -> str:
    depths = list(depths)
    if n_prompt < 0 or n_gen < 0 or repetitions < 1 or not depths or min(depths) < 0:
        raise ValueError("n_prompt, n_gen and depths must be >= 0 and repetitions >= 1")
    need = max(depths) + max(n_prompt, n_gen + 1)
    if need > model.context_length:
        raise ValueError(f"depth {max(depths)} + pp{n_prompt}/tg{n_gen} do not fit the context length "
                         f"{model.context_length} (pass -c {need} or more)")
    results = run_tests(model, n_prompt, n_gen, repetitions, depths)
    c = model.config
    size_mb = sum(t[3] for t in model.tensors) / 1e6
    name = os.path.basename(model.path)
    lines = [
        f"device: {model.device_name}",
        f"kv cache: {model.kv_cache_dtype}, {model.kv_cache_bytes / 1e6:.1f} MB for {model.context_length} tokens",
        "",
        "| model | size | backend | threads | test | t/s |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    threads = model.device_name.rsplit("(", 1)[-1].split()[0] if "(" in model.device_name else "-"
    for test, values in results.items():
        mean = statistics.fmean(values)
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        lines.append(f"| {name} ({c['architecture']}) | {size_mb:.1f} MB | {model.backend} | {threads} | {test} | "
                     f"{mean:.2f} ± {std:.2f} |")
    return "\n".join(lines)
