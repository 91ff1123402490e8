"""Model lifetime and concurrency: close(), no memory growth across loads, thread-safe sharing,
and per-command profiling of the decode table."""

from __future__ import annotations

import resource
import threading

import pytest


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_close_then_use_raises(akunu_mod, smollm2_path):
    m = akunu_mod.Model(smollm2_path, context_length=256)
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m.generate("hi", max_tokens=1)


def test_repeated_load_does_not_leak(akunu_mod, smollm2_path):
    def cycle():
        m = akunu_mod.Model(smollm2_path, context_length=256)
        m.generate("Hello", max_tokens=4)
        m.close()

    cycle()
    before = _rss_mb()
    for _ in range(8):
        cycle()
    grown = _rss_mb() - before
    # Each load allocates ~30 MB of KV cache and scratch; 8 leaked loads would add > 200 MB.
    assert grown < 60, f"resident memory grew by {grown:.0f} MB over 8 load/close cycles"


def test_one_model_shared_by_threads(akunu_mod, smollm2):
    expected = smollm2.generate("The capital of France is", max_tokens=12)
    results, errors = [], []

    def worker():
        try:
            results.append(smollm2.generate("The capital of France is", max_tokens=12))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert results == [expected] * 4


def test_profile_decode_step_labels_every_command(smollm2):
    smollm2._engine.reset()
    smollm2._engine.prefill([1, 2, 3])
    profile = smollm2._engine.profile_decode_step(4)
    table = smollm2.dispatch_table
    assert [(label, kernel) for label, kernel, _ in profile] == [(c["label"], c["kernel"]) for c in table]
    assert all(ms >= 0 for _, _, ms in profile)
    assert sum(ms for _, _, ms in profile) > 0
    assert smollm2._engine.position == 4
    n_layers = smollm2.config["n_layers"]
    assert sum(1 for label, _, _ in profile if label.endswith(".attention")) == n_layers


def test_interleaved_streams_fail_clearly(smollm2):
    first = smollm2.stream("One two three", max_tokens=20)
    next(first)
    second = smollm2.stream("Four five six", max_tokens=3)
    assert "".join(second)
    with pytest.raises(RuntimeError, match="superseded"):
        for _ in first:
            pass
