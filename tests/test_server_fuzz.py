"""schemathesis against `akunu serve`'s own OpenAPI description (GET /openapi.json), on SmolLM2.

For every operation schemathesis generates requests, valid and invalid under the spec (examples,
boundary "coverage" cases, random fuzzing), sends them to a live server on a loopback port and
checks each answer: never a 5xx, only status codes the spec declares (200 and the OpenAI-shaped
errors of openapi.py), the declared content type and body schema, a rejection (4xx) for what the
spec forbids, `Allow` on 405s, and an answer within REQUEST_TIMEOUT (a hang fails).

The spec given to schemathesis is the server's with one change: the "model" fields name the served
model only (pinned_to_model), else nearly every generated body would be a 404 for an unknown model
and never reach generation. The server caps max_tokens at 8, so each generation is short.

The regression tests below them are the bugs this fuzzing found, one request each."""

from __future__ import annotations

import collections
import copy
import json

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from akunu.server import ModelSpec, ServerConfig
from server_harness import running_server, smollm2_config

MODEL = "smollm2"
VOCAB = 49152         # SmolLM2's
MAX_TOKENS = 8
REQUEST_TIMEOUT = 60  # seconds; a request without an answer by then is a hang
EXAMPLES = 40         # fuzzed requests per operation, besides the examples and boundary cases
GENERATIONS = 40      # runnable generation requests per generation route
SENT: collections.Counter = collections.Counter()  # runnable requests per route

# (operation, streamed) -> status -> count, for the checks that the fuzzing reached the model.
ANSWERS: dict = collections.defaultdict(collections.Counter)


@pytest.fixture(scope="module")
def server(smollm2_path):
    config = smollm2_config(smollm2_path, MODEL, max_tokens_limit=MAX_TOKENS)  # default_max_tokens: 1024
    with running_server(config) as s:
        yield s


def pinned_to_model(spec: dict, name: str) -> dict:
    """`spec` with every request body's "model" property allowed only `name` (or null where the
    field is optional)."""
    spec = copy.deepcopy(spec)
    for schema in spec["components"]["schemas"].values():
        prop = schema.get("properties", {}).get("model")
        if prop is None or "Request" not in schema.get("title", ""):
            continue
        one = {"type": "string", "enum": [name]}
        schema["properties"]["model"] = one if "model" in schema.get("required", []) else \
            {"anyOf": [one, {"type": "null"}]}
    return spec


def load_schema(server):
    spec = httpx.get(server.url + "/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(pinned_to_model(spec, MODEL))
    schema.config.update(base_url=server.url, request_timeout=REQUEST_TIMEOUT)
    return schema


@pytest.fixture(scope="module")
def api_schema(server):
    return load_schema(server)


@pytest.fixture(scope="module")
def generation_schema(server):
    schema = load_schema(server)
    schema.config.generation.update(modes=[GenerationMode.POSITIVE], max_examples=GENERATIONS)
    return schema


def check_answer(case, response) -> None:
    """What schemathesis cannot see in a 200: a stream ends with [DONE] (or an error event) and
    every event is JSON; a generation stays within max_tokens per choice."""
    ANSWERS[(case.operation.label, isinstance(case.body, dict) and case.body.get("stream") is True)][
        response.status_code] += 1
    if response.status_code != 200 or case.operation.method != "POST" or "completions" not in case.operation.path:
        return
    if response.headers["content-type"].startswith("text/event-stream"):
        events = [e for e in response.text.split("\n\n") if e]
        assert all(e.startswith("data: ") for e in events), events
        assert events[-1] == "data: [DONE]" or "error" in json.loads(events[-1][6:]), events[-1]
        for e in events[:-1]:
            json.loads(e[6:])
    else:
        body = response.json()
        assert body["usage"]["completion_tokens"] <= MAX_TOKENS * len(body["choices"])


# positive_data_acceptance is left out: a body valid under the schema may still be refused with a
# 400 for what a schema cannot say (top_logprobs without logprobs, a prompt that does not fit the
# context, max_tokens over the server's limit, a tool message without content).
NOT_CHECKED = [positive_data_acceptance]


@schemathesis.pytest.from_fixture("api_schema").parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_openapi_fuzz(case):
    """Every operation, valid and invalid requests."""
    check_answer(case, case.call_and_validate(excluded_checks=NOT_CHECKED))


def runnable(body: dict, path: str, stream: bool) -> dict:
    """A schema-valid generation body changed where the server would refuse it for reasons the
    schema does not state, so that it reaches the model: every message has content, n <= 2, at
    most 2 prompts of in-vocabulary tokens, no settings the server refuses with a 400. Streamed if
    `stream` (the fuzzer seldom sets it)."""
    body = dict(body)
    if stream:
        body["stream"] = True
    for name in ("logit_bias", "best_of", "suffix"):
        body.pop(name, None)
    if not body.get("stream"):
        body.pop("stream_options", None)
    for name in ("top_p", "repeat_penalty"):  # 0 or inf in the engine's float32: "must be > 0, got 0"
        if body.get(name) is not None and not 1e-30 < body[name] < 1e30:
            body.pop(name)
    if body.get("seed") is not None and body["seed"] >= 2**64:  # 2**64 as a float, rounded up
        body.pop("seed")
    stop = body.get("stop")
    if stop is not None:
        body["stop"] = ([s for s in stop if s] or None) if isinstance(stop, list) else (stop or None)
    body["n"] = min(body.get("n", 1), 2)
    for name in ("max_tokens", "max_completion_tokens"):
        if body.get(name) is not None:
            body[name] = min(body[name], MAX_TOKENS)
    if path.endswith("/chat/completions"):
        text_only = lambda c: isinstance(c, str) or all(p.get("type") == "text" for p in c)  # noqa: E731
        body["messages"] = [{**m, "content": "Hi"} if m.get("content") in (None, [], "") or
                            not text_only(m["content"]) else m for m in body["messages"]]
        if not body.get("logprobs"):
            body.pop("top_logprobs", None)
        rf = body.get("response_format")
        if rf and rf.get("type") == "json_schema" and not (rf.get("json_schema") or {}).get("schema"):
            body.pop("response_format")
    else:
        prompt = body["prompt"]
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
            prompt = [[t % VOCAB for t in p] or [1] for p in prompt[:2]]
        elif isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            prompt = [t % VOCAB for t in prompt]
        elif isinstance(prompt, list):
            prompt = prompt[:2]
        body["prompt"] = prompt or "Hi"
        if body.get("logprobs") is not None:
            body.pop("echo", None)
    return body


@schemathesis.pytest.from_fixture("generation_schema").include(path_regex="completions$").parametrize()
@settings(max_examples=GENERATIONS, deadline=None, suppress_health_check=list(HealthCheck))
def test_openapi_fuzz_generation(case):
    """The generation routes with valid requests made runnable: sampling settings, stop strings,
    json_schema grammars, logprobs, n, streaming, all reaching the model."""
    SENT[case.operation.path] += 1
    case.body = runnable(case.body, case.operation.path, stream=SENT[case.operation.path] % 2 == 0)
    check_answer(case, case.call_and_validate(excluded_checks=NOT_CHECKED))


def test_fuzzing_reached_the_model_and_left_it_healthy(server):
    """Runs after the fuzzing (file order): generations ran, streamed and not, on both routes; the
    worker is idle with nothing queued and still answers."""
    for route in ("POST /v1/chat/completions", "POST /v1/completions"):
        for streamed in (False, True):
            assert ANSWERS[(route, streamed)][200] >= 3, (route, streamed, dict(ANSWERS[(route, streamed)]))
    state = httpx.get(server.url + "/health", timeout=10).json()["models"][MODEL]
    assert state == {"loaded": True, "waiting": 0, "busy": False}
    r = httpx.post(server.v1 + "/chat/completions", timeout=REQUEST_TIMEOUT,
                   json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    assert r.status_code == 200, r.text


def test_spec_of_a_server_with_an_api_key(smollm2_path):
    """With --api-key every route but /health declares the bearer scheme and a 401, and answers one
    in the declared shape without the key."""
    with running_server(smollm2_config(smollm2_path, MODEL, api_key="sekrit")) as s:
        spec = httpx.get(s.url + "/openapi.json", headers={"Authorization": "Bearer sekrit"}, timeout=10).json()
        assert spec["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
        for path, operations in spec["paths"].items():
            for method, operation in operations.items():
                if path == "/health":
                    assert "401" not in operation["responses"] and "security" not in operation
                    continue
                assert "401" in operation["responses"] and operation["security"] == [{"bearer": []}], (method, path)
                r = httpx.request(method, s.url + path.replace("{name}", MODEL), json={}, timeout=10)
                assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", (method, path)
                assert r.headers["www-authenticate"] == "Bearer"


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
