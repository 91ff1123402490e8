"""`akunu serve` through the official openai client and raw HTTP, on SmolLM2 (CPU): replies equal
the Python API's for the same request, usage counts equal the tokenizer's, structured output
validates, bad requests get OpenAI-shaped 4xx errors naming the problem, and the scheduler's
queue limit, cancellation on disconnect, idle unload, API key and several models work."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import httpx
import jsonschema
import openai
import pytest

from akunu import Model
from akunu.server import ModelSpec, ServerConfig, load_config_file
from akunu.server.scheduler import Job
from server_harness import running_server, smollm2_config

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server(smollm2_path):
    with running_server(smollm2_config(smollm2_path, max_tokens_limit=512)) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return server.openai()


@pytest.fixture(scope="module")
def reference(smollm2_path):
    """A model of its own to compute what the server should answer."""
    return Model(str(smollm2_path), backend="cpu")


def chat_ids(model: Model, messages) -> list[int]:
    return model.tokenizer.encode(model.format_chat(messages), add_special=False, parse_special=True)


# --- replies and usage ------------------------------------------------------------------------

def test_chat_reply_and_usage_equal_the_python_api(client, reference):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=24, temperature=0)
    ids = chat_ids(reference, QUESTION)
    tokens = reference.generate_tokens(ids, max_tokens=24)
    assert r.choices[0].message.content == reference.tokenizer.decode(tokens)
    assert r.choices[0].message.role == "assistant"
    assert r.usage.prompt_tokens == len(ids)
    assert r.usage.completion_tokens == len(tokens)
    assert r.usage.total_tokens == len(ids) + len(tokens)
    assert r.choices[0].finish_reason == ("length" if len(tokens) == 24 else "stop")
    assert r.object == "chat.completion" and r.model == "smollm2" and r.id.startswith("chatcmpl-")


def test_chat_stream_equals_the_whole_reply(client):
    kw = dict(model="smollm2", messages=QUESTION, max_tokens=20, temperature=0)
    whole = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert all(c.id == chunks[0].id for c in chunks)


def test_stream_without_usage_option_sends_no_usage(client):
    chunks = list(client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=4, temperature=0,
                                                 stream=True))
    assert all(c.usage is None for c in chunks) and all(c.choices for c in chunks)


def test_completions_equal_generate(client, reference):
    r = client.completions.create(model="smollm2", prompt="The sea is", max_tokens=12, temperature=0)
    expected = reference.generate("The sea is", max_tokens=12)
    assert r.choices[0].text == expected
    assert r.usage.prompt_tokens == len(reference.tokenizer.encode("The sea is", add_special=True, parse_special=True))
    assert r.usage.completion_tokens == 12 and r.choices[0].finish_reason == "length"
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="smollm2", prompt="The sea is", max_tokens=12, temperature=0, stream=True))
    assert streamed == expected


def test_completions_default_max_tokens_is_openais_16(client):
    r = client.completions.create(model="smollm2", prompt="Once upon a time", temperature=0)
    assert r.usage.completion_tokens == 16 and r.choices[0].finish_reason == "length"


def test_completions_token_prompts_several_prompts_and_echo(client, reference):
    ids = reference.tokenizer.encode("Paris is", add_special=True, parse_special=True)
    by_ids = client.completions.create(model="smollm2", prompt=ids, max_tokens=6, temperature=0)
    by_text = client.completions.create(model="smollm2", prompt="Paris is", max_tokens=6, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    two = client.completions.create(model="smollm2", prompt=["Paris is", "The sea is"], max_tokens=6, temperature=0)
    assert [c.index for c in two.choices] == [0, 1]
    assert two.choices[0].text == by_text.choices[0].text
    assert two.usage.prompt_tokens == len(ids) + len(reference.tokenizer.encode("The sea is", add_special=True,
                                                                                   parse_special=True))
    echoed = client.completions.create(model="smollm2", prompt="Paris is", max_tokens=6, temperature=0, echo=True)
    assert echoed.choices[0].text == "Paris is" + by_text.choices[0].text


def test_n_choices_and_seeds(client):
    kw = dict(model="smollm2", messages=[{"role": "user", "content": "Name an animal."}], max_tokens=8,
              temperature=1.0, seed=7)
    r = client.chat.completions.create(**kw, n=3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    again = client.chat.completions.create(**kw, n=3)
    assert [c.message.content for c in r.choices] == [c.message.content for c in again.choices]  # seeded
    one = client.chat.completions.create(**kw)
    assert one.choices[0].message.content == r.choices[0].message.content  # choice 0 uses the seed itself
    # Choice i is the request with seed + i; usage adds up every choice's tokens.
    singles = [client.chat.completions.create(**{**kw, "seed": 7 + i}) for i in range(3)]
    assert [x.choices[0].message.content for x in singles] == [c.message.content for c in r.choices]
    assert r.usage.completion_tokens == sum(x.usage.completion_tokens for x in singles)
    assert r.usage.prompt_tokens == singles[0].usage.prompt_tokens


def test_frequency_and_presence_penalties_are_openais(client, reference):
    """Additive penalties over every token of the reply so far (the engine's SamplingParams with a
    window as long as the reply); they change a greedy reply that repeats itself."""
    messages = [{"role": "user", "content": "Write a poem about the sea."}]
    plain = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=40, temperature=0)
    r = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=40, temperature=0,
                                       frequency_penalty=1.5, presence_penalty=0.5)
    expected = reference.chat(messages, max_tokens=40, frequency_penalty=1.5, presence_penalty=0.5, repeat_last_n=64)
    assert r.choices[0].message.content == expected != plain.choices[0].message.content


def test_stop_strings_cut_the_text_and_the_count(client, reference):
    kw = dict(model="smollm2", messages=QUESTION, max_tokens=24, temperature=0)
    full = client.chat.completions.create(**kw).choices[0].message.content
    stop = full.split()[3]
    r = client.chat.completions.create(**kw, stop=[stop])
    assert r.choices[0].message.content == full[:full.index(stop)]
    assert r.choices[0].finish_reason == "stop"
    # Tokens up to the one that completed the stop string are counted, none after it.
    ids = chat_ids(reference, QUESTION)
    tokens = reference.generate_tokens(ids, max_tokens=24)
    pieces, n = "", 0
    while stop not in pieces:
        pieces = reference.tokenizer.decode(tokens[:n + 1])
        n += 1
    assert r.usage.completion_tokens == n


def test_logprobs_are_the_models_and_greedy_picks_the_top(client):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=10, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert len(t.top_logprobs) == 3
        assert [x.logprob for x in t.top_logprobs] == sorted((x.logprob for x in t.top_logprobs), reverse=True)
        assert t.token == t.top_logprobs[0].token and t.logprob == pytest.approx(t.top_logprobs[0].logprob)
        assert t.logprob <= 0 and bytes(t.bytes).decode() == t.token
    c = client.completions.create(model="smollm2", prompt="The sea is", max_tokens=5, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert "".join(lp.tokens) == c.choices[0].text and len(lp.token_logprobs) == 5
    assert all(max(top.values()) == pytest.approx(v) for top, v in zip(lp.top_logprobs, lp.token_logprobs))


# --- structured output --------------------------------------------------------------------------

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                                                 "minItems": 1, "maxItems": 3}},
     "required": ["colors"], "additionalProperties": False},
    {"type": "array", "items": {"type": "number"}, "maxItems": 4},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_response_format_json_schema_validates(client, schema):
    r = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Answer in JSON."}], max_tokens=120, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_response_format_json_object(client):
    r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "The capital of France "
                                                                   "as a JSON object with the key city."}],
                                       max_tokens=200, temperature=0, response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_response_format_streams_valid_json(client):
    schema = SCHEMAS[0]
    chunks = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "A person."}], max_tokens=80, temperature=0, stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}})
    jsonschema.validate(json.loads("".join(c.choices[0].delta.content or "" for c in chunks if c.choices)), schema)


# --- tools ------------------------------------------------------------------------------------

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_tool_round_trip(client):
    first = client.chat.completions.create(model="smollm2", messages=ASK, tools=TOOLS, tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=80, temperature=0)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_") and call.function.name in ("get_weather", "get_time")
    schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call.function.name)
    jsonschema.validate(json.loads(call.function.arguments), schema)
    history = ASK + [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 18})}]
    final = client.chat.completions.create(model="smollm2", messages=history, tools=TOOLS, tool_choice="none",
                                           max_tokens=40, temperature=0)
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason in ("stop", "length")
    alone = client.chat.completions.create(model="smollm2", messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=1)
    assert final.usage.prompt_tokens > alone.usage.prompt_tokens + 10  # the call and its result are in the prompt


def test_named_tool_choice_and_streamed_calls(client):
    named = {"type": "function", "function": {"name": "get_time"}}
    r = client.chat.completions.create(model="smollm2", messages=ASK, tools=TOOLS, tool_choice=named, max_tokens=60,
                                       temperature=0)
    [call] = r.choices[0].message.tool_calls
    assert call.function.name == "get_time" and "city" in json.loads(call.function.arguments)
    chunks = list(client.chat.completions.create(model="smollm2", messages=ASK, tools=TOOLS, tool_choice=named,
                                                 max_tokens=60, temperature=0, stream=True))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(c.function.name, c.function.arguments) for c in calls] == [(call.function.name, call.function.arguments)]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert not "".join(c.choices[0].delta.content or "" for c in chunks).strip()  # the call is not content


def test_tool_choice_auto_and_none_answer_in_text(client):
    for choice in ("auto", "none"):
        r = client.chat.completions.create(model="smollm2", messages=QUESTION, tools=TOOLS, tool_choice=choice,
                                           max_tokens=30, temperature=0)
        message = r.choices[0].message
        if message.tool_calls:  # auto may call; whatever it calls must be well formed
            assert choice == "auto" and r.choices[0].finish_reason == "tool_calls"
            for call in message.tool_calls:
                json.loads(call.function.arguments)
        else:
            assert message.content and r.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("kwargs,words", [
    (dict(tool_choice="required"), "tool_choice"),
    (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}), "nope"),
    (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]), "parameters"),
    (dict(tools=[{"type": "function", "function": {"name": "bad name!"}}]), "name"),
    (dict(tools=TOOLS, tool_choice="required", response_format={"type": "json_object"}), "response_format"),
])
def test_bad_tools_are_400(client, kwargs, words):
    e = error_of(lambda: client.chat.completions.create(model="smollm2", messages=ASK, max_tokens=8, **kwargs))
    assert e.status_code == 400 and words in e.body["message"], e.body


# --- errors -------------------------------------------------------------------------------------

def error_of(call) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as info:
        call()
    body = info.value.body
    assert set(body) >= {"message", "type", "param", "code"}, body  # OpenAI's error object
    return info.value


def test_unknown_model_is_404(client):
    e = error_of(lambda: client.chat.completions.create(model="gpt-4", messages=QUESTION))
    assert e.status_code == 404 and e.body["code"] == "model_not_found" and "smollm2" in e.body["message"]


@pytest.mark.parametrize("field,value,words", [
    ("temperature", 3, "temperature"),
    ("top_p", 0, "top_p"),
    ("max_tokens", 0, "max_tokens"),
    ("max_tokens", 100000, "at most 512"),
    ("n", 0, "n"),
    ("frequency_penalty", 3, "frequency_penalty"),
    ("logit_bias", {"42": 5}, "logit_bias"),
    ("stop", [""], "non-empty"),
    ("seed", -1, "seed"),
    ("top_logprobs", 3, "top_logprobs needs logprobs"),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object",
                                                                                         "nullable": True}}}, "nullable"),
    ("response_format", {"type": "xml"}, "response_format"),
    ("stream_options", {"include_usage": True}, "stream_options"),
    ("unknown_setting", 1, "unknown_setting"),
    ("functions", [], "tools"),
])
def test_bad_parameters_are_400_naming_them(client, field, value, words):
    e = error_of(lambda: client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=4,
                                                        extra_body={field: value}))
    assert e.status_code == 400 and e.body["type"] == "invalid_request_error"
    assert words in e.body["message"], e.body


def test_bad_messages_are_400(client):
    for messages, words in [([], "messages"), ([{"role": "wizard", "content": "x"}], "role"),
                            ([{"role": "user"}], "no content"),
                            ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
                             "image_url")]:
        e = error_of(lambda: client.chat.completions.create(model="smollm2", messages=messages, max_tokens=4))
        assert e.status_code == 400 and words in e.body["message"], e.body


def test_text_content_parts_are_joined(client):
    parts = [{"type": "text", "text": "What is the capital"}, {"type": "text", "text": "of France?"}]
    a = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": parts}], max_tokens=8,
                                       temperature=0)
    b = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "What is the capital\n"
                                                                                               "of France?"}],
                                       max_tokens=8, temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content


def test_too_long_prompt_is_400_context_length_exceeded(server, smollm2_path):
    # A model with a short context, so the prompt is quick to make.
    spec = ModelSpec("short", str(smollm2_path), backend="cpu", context_length=64)
    with running_server(ServerConfig(models=[spec])) as s:
        e = error_of(lambda: s.openai().chat.completions.create(
            model="short", messages=[{"role": "user", "content": "word " * 100}], max_tokens=4))
        assert e.status_code == 400 and e.body["code"] == "context_length_exceeded" and "64" in e.body["message"]
        assert e.body["param"] == "messages"
        e = error_of(lambda: s.openai().completions.create(model="short", prompt=[1] * 70, max_tokens=4))
        assert e.body["code"] == "context_length_exceeded" and e.body["param"] == "prompt"


def test_raw_http_errors(server):
    url = server.url
    r = httpx.post(url + "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    r = httpx.post(url + "/v1/chat/completions", json={"messages": QUESTION})
    assert r.status_code == 400 and "model" in r.json()["error"]["message"]
    r = httpx.get(url + "/v1/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.get(url + "/v1/nothing-here")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.post(url + "/v1/completions", json={"model": "smollm2", "prompt": [999999]})
    assert r.status_code == 400 and "vocabulary" in r.json()["error"]["message"]
    r = httpx.post(url + "/v1/completions", json={"model": "smollm2", "prompt": "x", "suffix": "y"})
    assert r.status_code == 400 and "suffix" in r.json()["error"]["message"]


def test_request_body_size_is_capped(smollm2_path):
    with running_server(smollm2_config(smollm2_path, max_body_bytes=1000)) as s:
        r = httpx.post(s.v1 + "/chat/completions", json={"model": "smollm2", "messages": [
            {"role": "user", "content": "x" * 2000}]})
        assert r.status_code == 413 and "1000" in r.json()["error"]["message"]


# --- tokenizer, models, health, metrics ---------------------------------------------------------

def test_tokenize_and_detokenize(server, reference):
    r = httpx.post(server.url + "/tokenize", json={"model": "smollm2", "prompt": "Hello world"}).json()
    assert r["tokens"] == reference.tokenizer.encode("Hello world", add_special=True, parse_special=True)
    assert r["count"] == len(r["tokens"]) and r["max_model_len"] == reference.context_length
    chat = httpx.post(server.url + "/tokenize", json={"messages": QUESTION}).json()  # model optional with one
    assert chat["tokens"] == chat_ids(reference, QUESTION)
    back = httpx.post(server.url + "/detokenize", json={"tokens": r["tokens"]}).json()
    assert back["prompt"] == "Hello world"
    assert httpx.post(server.url + "/tokenize", json={}).status_code == 400


def test_models_health_and_metrics(server, client):
    assert [m.id for m in client.models.list().data] == ["smollm2"]
    assert client.models.retrieve("smollm2").id == "smollm2"
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["models"]["smollm2"]["loaded"]
    client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=3)
    text = httpx.get(server.url + "/metrics").text
    assert 'akunu_requests_total{route="/v1/chat/completions",status="200"}' in text
    assert 'akunu_completion_tokens_total{model="smollm2"}' in text
    assert 'akunu_queue_waiting{model="smollm2"} 0.0' in text


def test_chat_page_is_served(server):
    r = httpx.get(server.url + "/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "/v1/chat/completions" in r.text


# --- security, scheduling, several models ----------------------------------------------------------

def test_api_key(smollm2_path):
    with running_server(smollm2_config(smollm2_path, api_key="sesame")) as s:
        e = error_of(lambda: s.openai(api_key="wrong").models.list())
        assert e.status_code == 401 and e.body["code"] == "invalid_api_key"
        assert httpx.get(s.v1 + "/models").status_code == 401
        assert httpx.get(s.url + "/metrics").status_code == 401
        assert [m.id for m in s.openai(api_key="sesame").models.list().data] == ["smollm2"]
        assert httpx.get(s.url + "/health").status_code == 200


def _stream_in_thread(s, max_tokens: int, results: list):
    def run():
        try:
            n = sum(1 for _ in s.openai().chat.completions.create(model="smollm2", messages=QUESTION,
                                                                  max_tokens=max_tokens, temperature=0, stream=True))
            results.append(("ok", n))
        except openai.APIStatusError as e:
            results.append((e.status_code, e.response.headers.get("retry-after")))
    t = threading.Thread(target=run)
    t.start()
    return t


# A schema whose only answer is a long string: the generation cannot end early on its own.
ENDLESS = {"type": "json_schema", "json_schema": {"name": "long", "schema": {"type": "string", "minLength": 4000}}}


def test_full_queue_is_429_with_retry_after(smollm2_path):
    with running_server(smollm2_config(smollm2_path, max_queue=1)) as s:
        worker = s.worker("smollm2")
        hold = threading.Event()
        # Occupy the worker with a job that waits, and the one queue place with a request.
        blocker = Job(lambda model, job: hold.wait(30), asyncio.new_event_loop())
        worker.submit(blocker)
        deadline = time.monotonic() + 10
        while not worker.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        results = []
        waiting = _stream_in_thread(s, 4, results)
        while worker.waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        e = error_of(lambda: s.openai().chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=4))
        assert e.status_code == 429 and e.body["code"] == "queue_full"
        assert int(e.response.headers["retry-after"]) >= 1
        hold.set()
        waiting.join(30)
        assert results and results[0][0] == "ok"  # the queued request still completes


def test_disconnect_cancels_the_generation(smollm2_path, caplog):
    caplog.set_level("INFO", logger="akunu.server")
    with running_server(smollm2_config(smollm2_path, max_tokens_limit=4096)) as s:
        worker = s.worker("smollm2")
        with httpx.stream("POST", s.v1 + "/chat/completions", json={
                "model": "smollm2", "messages": QUESTION, "max_tokens": 4000, "stream": True,
                "response_format": ENDLESS}) as r:
            lines = r.iter_lines()
            for _ in range(4):
                next(lines)
            assert worker.busy
        left = time.monotonic()
        while worker.busy and time.monotonic() - left < 10:
            time.sleep(0.02)
        assert not worker.busy, "the worker kept generating for a client that left"
        assert worker.model.stats.generated_tokens < 1000
    cancelled = [r.getMessage() for r in caplog.records if "cancelled" in r.getMessage()]
    assert len(cancelled) == 1 and "POST /v1/chat/completions 200" in cancelled[0], caplog.text


def test_stream_whose_client_leaves_while_queued_never_runs(smollm2_path):
    with running_server(smollm2_config(smollm2_path)) as s:
        worker = s.worker("smollm2")
        s.openai().chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=2)
        before = worker.model.stats.prompt_tokens
        hold = threading.Event()
        worker.submit(Job(lambda model, job: hold.wait(30), asyncio.new_event_loop()))
        long_prompt = [{"role": "user", "content": "word " * 50}]
        with pytest.raises(httpx.ReadTimeout):  # the client gives up while its request waits
            with httpx.stream("POST", s.v1 + "/chat/completions", timeout=httpx.Timeout(60, read=0.5), json={
                    "model": "smollm2", "messages": long_prompt, "max_tokens": 8, "stream": True}) as r:
                r.read()
        time.sleep(1.5)  # the server looks for a departed client every 0.5 s while a request waits
        hold.set()
        deadline = time.monotonic() + 10
        while (worker.busy or worker.waiting) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.model.stats.prompt_tokens == before, "the abandoned request was generated anyway"


def test_idle_model_is_unloaded_and_reloaded(smollm2_path):
    with running_server(smollm2_config(smollm2_path, idle_unload_seconds=0.5)) as s:
        worker = s.worker("smollm2")
        deadline = time.monotonic() + 15
        while worker.loaded and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not worker.loaded and httpx.get(s.url + "/health").json()["models"]["smollm2"]["loaded"] is False
        r = s.openai().chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=4, temperature=0)
        assert r.choices[0].message.content


def test_several_models_by_name(smollm2_path):
    specs = [ModelSpec("small-a", str(smollm2_path), backend="cpu"),
             ModelSpec("small-b", str(smollm2_path), backend="cpu", chat_template="{% for m in messages %}"
                       "{{ m['content'] }}\n{% endfor %}")]
    with running_server(ServerConfig(models=specs)) as s:
        c = s.openai()
        assert sorted(m.id for m in c.models.list().data) == ["small-a", "small-b"]
        a = c.chat.completions.create(model="small-a", messages=QUESTION, max_tokens=6, temperature=0)
        b = c.chat.completions.create(model="SMALL-B", messages=QUESTION, max_tokens=6, temperature=0)
        assert a.model == "small-a" and b.model == "small-b"
        assert a.usage.prompt_tokens != b.usage.prompt_tokens  # each model's own template
        assert httpx.post(s.url + "/tokenize", json={"prompt": "x"}).status_code == 400  # which model?


# --- configuration and the command ---------------------------------------------------------------

def test_config_file(tmp_path, smollm2_path):
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"port": 9000, "models": [{"path": str(smollm2_path), "backend": "cpu"}]}))
    config = load_config_file(str(path))
    assert config.port == 9000 and config.models[0].name == "SmolLM2-135M-Instruct.Q4_1"
    path.write_text(json.dumps({"models": [{"path": "x.gguf", "ctx": 5}]}))
    with pytest.raises(ValueError, match="ctx"):
        load_config_file(str(path))
    with pytest.raises(ValueError, match="share the name"):
        ServerConfig(models=[ModelSpec("a", "x"), ModelSpec("a", "y")])
    assert ModelSpec.from_argument("fast=/models/m.gguf").name == "fast"


def test_akunu_serve_command(smollm2_path):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "akunu.cli", "serve", "-m", f"tiny={smollm2_path}", "--port",
                             str(port), "--backend", "cpu", "-c", "512"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.2)
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        r = c.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4)
        assert r.usage.completion_tokens >= 1
        assert httpx.post(f"http://127.0.0.1:{port}/tokenize", json={"prompt": "hi"}).json()["max_model_len"] == 512
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "POST /v1/chat/completions 200" in err and "model=tiny" in err  # one log line per request


def test_serve_command_refuses_a_missing_model(tmp_path):
    r = subprocess.run([sys.executable, "-m", "akunu.cli", "serve", "-m", str(tmp_path / "none.gguf")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not found" in r.stderr
