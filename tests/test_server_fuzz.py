"""Requests that fuzzing `akunu serve` against its OpenAPI description showed answered wrong, one
test each, on SmolLM2 served from a loopback port."""

from __future__ import annotations

import httpx
import pytest

from akunu.server import ModelSpec, ServerConfig
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


def test_tokenize_empty_messages_is_400(server):
    """Was a 500 (ValueError "messages is empty" from the chat template)."""
    r = httpx.post(server.url + "/tokenize", json={"model": MODEL, "messages": []}, timeout=10)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "messages"


def test_tokenize_image_part_is_400(server):
    """Was a 500 (AttributeError: /tokenize joined the text of every content part)."""
    part = {"type": "image_url", "image_url": {"url": "data:,"}}
    r = httpx.post(server.url + "/tokenize", json={"model": MODEL, "messages": [{"role": "user", "content": [part]}]},
                   timeout=10)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "messages[0].content[0].type"


@pytest.mark.parametrize("body", [{"tokens": ["0"]}, {"tokens": [1.5]}, {"tokens": [True]},
                                  {"prompt": "x", "add_special_tokens": 0}])
def test_wrong_json_types_are_400_not_coerced(server, body):
    """Were accepted (pydantic's lax mode turned "0" into 0, 0 into False)."""
    route = "/detokenize" if "tokens" in body else "/tokenize"
    r = httpx.post(server.url + route, json={"model": MODEL, **body}, timeout=10)
    assert r.status_code == 400, r.text


def test_integral_floats_are_integers(server):
    """JSON Schema's "integer" takes 2.0: so does the server (strict types must not refuse it)."""
    r = httpx.post(server.url + "/detokenize", json={"model": MODEL, "tokens": [28.0, 29]}, timeout=10)
    assert r.status_code == 200, r.text
    r = httpx.post(server.v1 + "/completions", json={"model": MODEL, "prompt": [28.0], "max_tokens": 2.0, "n": 1.0},
                   timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == 1


@pytest.mark.parametrize("extra,param", [
    ({"stream_options": {"include_usage": 1}, "stream": True}, "stream_options.include_usage"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f", "strict": 3}}]}, "tools[0].function.strict"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 7}]}]}, "messages[0].content"),
])
def test_error_param_is_the_field_path(server, extra, param):
    """Were wrong: field names starting with "str" or "int" were dropped from the path
    ("include_usage", "tools[0].function"), pydantic's union members were kept in it
    ("tool_choice.literal['none','auto','required']"), and a text part with a non-string text was
    called an unsupported part type 'text'."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, **extra}
    r = httpx.post(server.v1 + "/chat/completions", json=body, timeout=10)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    assert "literal[" not in error["message"] and "is not supported" not in error["message"], error


def test_chat_template_refusal_is_400(smollm2_path):
    """Was a 500: a chat template's raise_exception (here: no system messages, as some models'
    templates refuse roles that do not alternate) escaped as a ValueError, on /v1/chat/completions
    and /tokenize."""
    template = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system role') }}"
                "{% endif %}{{ m['content'] }}\n{% endfor %}")
    config = ServerConfig(models=[ModelSpec(MODEL, str(smollm2_path), backend="cpu", chat_template=template)],
                          max_tokens_limit=MAX_TOKENS)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    with running_server(config) as s:
        for route, body in (("/v1/chat/completions", {"messages": messages, "max_tokens": 2}),
                            ("/v1/chat/completions", {"messages": messages, "max_tokens": 2, "stream": True}),
                            ("/tokenize", {"messages": messages})):
            r = httpx.post(s.url + route, json={"model": MODEL, **body}, timeout=REQUEST_TIMEOUT)
            assert r.status_code == 400, (route, r.text)
            assert "no system role" in r.json()["error"]["message"]
            assert r.json()["error"]["param"] == "messages"


@pytest.mark.parametrize("route,body", [
    ("/chat/completions", {"messages": [{"role": "user", "content": "Tell a story"}]}),
    ("/completions", {"prompt": "Once upon a time"}),
])
def test_default_max_tokens_is_within_the_limit(server, route, body):
    """Was not: a request without max_tokens got default_max_tokens (1024; 16 for completions)
    even on a server whose max_tokens_limit is 8."""
    r = httpx.post(server.v1 + route, json={"model": MODEL, "temperature": 0, **body}, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == MAX_TOKENS and r.json()["choices"][0]["finish_reason"] == "length"
