"""A small run of benchmarks/serve_load.py's load test as a test: 8 concurrent streaming clients, 2
requests each, a queue of 2 (so some get 429 and retry), every 4th request disconnecting after its
first text, on SmolLM2 served in-process from a loopback port. The same checks as the benchmark
(every request completes or gets a clean 429, no output mixes, disconnects stop the generation, the
server stays healthy), no timing assertions: that a disconnect stops the generation is checked by
the tokens the engine generated for it, not by how soon the worker was idle."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from akunu.server import ModelSpec, ServerConfig
from server_harness import running_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import serve_load  # noqa: E402

PLAN = serve_load.Plan(clients=8, requests=2, max_tokens=8, disconnect_every=4, max_wait=10, time_limit=300)
PROBE_TOKENS = 256


@pytest.fixture(scope="module")
def server(smollm2_path):
    config = ServerConfig(models=[ModelSpec(serve_load.MODEL, str(smollm2_path), backend="cpu")], max_queue=2,
                          max_tokens_limit=PROBE_TOKENS)
    with running_server(config) as s:
        yield s


def test_load(server):
    expected = asyncio.run(serve_load.alone(server.url, PLAN))
    assert all(o.done and not o.problem for o in expected.values()), expected
    assert len({o.text for o in expected.values()}) == PLAN.clients  # every client's reply is its own

    outcomes, wall = asyncio.run(serve_load.load(server.url, PLAN))
    print(serve_load.summary(outcomes, wall))
    assert serve_load.check_load(outcomes, expected) == []
    assert len(outcomes) == PLAN.clients * PLAN.requests

    worker = server.worker(serve_load.MODEL)
    probe = asyncio.run(serve_load.disconnect_probe(server.url, PROBE_TOKENS, timing=False))
    assert probe.problems == [] and probe.whole_finish == "length" and probe.received
    # Alone the completion runs to PROBE_TOKENS; disconnected, the engine stopped long before.
    generated = worker.model.stats.generated_tokens
    assert generated < PROBE_TOKENS // 2, generated

    assert asyncio.run(serve_load.after_load(server.url, expected[0], PLAN)) == []
    assert worker._thread.is_alive() and not worker.busy and worker.waiting == 0
