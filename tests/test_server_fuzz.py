"""Requests that fuzzing `akunu serve` against its OpenAPI description showed answered wrong, one
test each, on SmolLM2 served from a loopback port."""

from __future__ import annotations

import httpx
import pytest

from server_harness import running_server, smollm2_config

MODEL = "smollm2"
MAX_TOKENS = 8
REQUEST_TIMEOUT = 60


@pytest.fixture(scope="module")
def server(smollm2_path):
    config = smollm2_config(smollm2_path, MODEL, max_tokens_limit=MAX_TOKENS)
    with running_server(config) as s:
        yield s


# --- regressions: what the fuzzing found -------------------------------------------------------

def test_405_names_the_allowed_methods(server):
    r = httpx.request("TRACE", server.url + "/health", timeout=10)
    assert r.status_code == 405
    assert r.headers["allow"] == "GET"
    assert r.json()["error"]["type"] == "invalid_request_error"
