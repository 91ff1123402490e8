"""llama-bench style measurements: pp (prompt processing) and tg (token generation) in tokens/s,
mean ± standard deviation over repetitions after one warm-up run."""

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


def measure_pp(model, n_prompt: int, seed: int = 0) -> float:
    tokens = _prompt_tokens(model, n_prompt, seed)
    model.reset()
    t0 = time.perf_counter()
    model.prefill(tokens)
    return n_prompt / (time.perf_counter() - t0)


def measure_tg(model, n_gen: int) -> float:
    # Greedy chain decode from a one-token context, as llama-bench's tg test.
    model.reset()
    first = model.tokenizer.bos_id if model.tokenizer.bos_id >= 0 else 0
    model.prefill([first])
    token = 0
    t0 = time.perf_counter()
    remaining = n_gen
    while remaining > 0:
        chunk = model.chain_decode(token, remaining)
        remaining -= len(chunk)
        token = chunk[-1]
    return n_gen / (time.perf_counter() - t0)


def run_tests(model, n_prompt: int, n_gen: int, repetitions: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    if n_prompt > 0:
        measure_pp(model, n_prompt, seed=-1)  # warm-up
        results[f"pp{n_prompt}"] = [measure_pp(model, n_prompt, seed=r) for r in range(repetitions)]
    if n_gen > 0:
        measure_tg(model, n_gen)
        results[f"tg{n_gen}"] = [measure_tg(model, n_gen) for _ in range(repetitions)]
    return results


def run_bench(model, n_prompt: int, n_gen: int, repetitions: int) -> str:
    if n_prompt < 0 or n_gen < 0 or repetitions < 1:
        raise ValueError("n_prompt and n_gen must be >= 0 and repetitions >= 1")
    if n_prompt + 1 > model.context_length or n_gen + 1 > model.context_length:
        raise ValueError(f"pp{n_prompt}/tg{n_gen} do not fit the context length {model.context_length}")
    results = run_tests(model, n_prompt, n_gen, repetitions)
    c = model.config
    size_mb = sum(t[3] for t in model.tensors) / 1e6
    name = os.path.basename(model.path)
    lines = [
        f"device: {model.device_name}",
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
