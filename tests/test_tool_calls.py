"""Tool calling (issue 35): akunu.tool_calls and the modules under it.

- Parsing each format (Hermes/Qwen, Llama 3, Mistral list and [ARGS]) from hand-written model
  output: several calls, text around them, unknown names and broken JSON left as content, the
  markers missing (Model's text leaves control tokens out).
- Rendering: through vendors' templates that render tools (Qwen 2.5/3, Llama 3.1/3.2, Hermes 3,
  from llama.cpp's collection) the prompt equals transformers' apply_chat_template rendering of
  the same conversation; through templates that do not (SmolLM2's, Gemma 2's), the tools block,
  earlier calls and results are written as text.
- Grammars: each format's grammar accepts its calls and refuses other names, invalid arguments and
  (in "auto") a broken call after free text, on SmolLM2's vocabulary and with a control-token trigger.
- End to end on SmolLM2: "required" and a named function give calls whose arguments validate
  against the schema; a round trip (call, result, answer) runs; streaming holds calls back.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import akunu
from akunu import GrammarError, Model
from akunu.chat_template import render_chat
from akunu.grammar import GrammarCompiler
from akunu.tool_calls import (ParsedReply, ToolCall, chat_with_tools, model_tool_format, parse_tool_calls,
                              prepare_tools, validate_tool_choice, validate_tools)
from akunu.tool_formats import HERMES, LLAMA3, MISTRAL, MISTRAL_V11, template_format, vocabulary_format
from akunu.tool_grammar import arguments_schema, tool_grammar
from akunu.tool_prompt import mistral_call_id
from akunu.tool_stream import ToolStreamParser
from paths import llama_cpp_templates

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}
TOOLS = [WEATHER, ADD]
NAMES = ["get_weather", "add"]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
QUESTION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the weather in Paris?"}]


def conversation(call_id: str = "call_abc") -> list[dict]:
    """QUESTION, the assistant's call (OpenAI shape: arguments as JSON text, content null), its result."""
    return QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "22 C and sunny"}]


def calls_of(reply: ParsedReply) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in reply.tool_calls]


@pytest.fixture(scope="module")
def templates() -> Path:
    return llama_cpp_templates()


@pytest.fixture(scope="module")
def with_template(smollm2_path, templates):
    """Factory: SmolLM2 with a vendor's template (llama.cpp's models/templates/NAME.jinja)."""
    cache = {}

    def get(name: str) -> Model:
        if name not in cache:
            cache[name] = Model(str(smollm2_path), chat_template=(templates / f"{name}.jinja").read_text())
        return cache[name]

    return get


# --- parsing ---------------------------------------------------------------------------------------

def test_hermes_several_calls_after_text():
    text = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>')
    reply = parse_tool_calls(text, "hermes", NAMES)
    assert reply.content == "Let me check."
    assert calls_of(reply) == [("get_weather", {"city": "Paris"}), ("add", {"a": 1, "b": 2})]
    ids = [c.id for c in reply.tool_calls]
    assert all(i.startswith("call_") and len(i) == 29 for i in ids) and len(set(ids)) == 2


def test_hermes_leaves_bad_calls_as_content():
    unknown = '<tool_call>\n{"name": "delete_all", "arguments": {}}\n</tool_call>'
    broken = '<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call>'
    assert parse_tool_calls(unknown, HERMES, NAMES) == (unknown, [])
    assert parse_tool_calls(broken + " more", HERMES, NAMES) == (broken + " more", [])
    good = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    reply = parse_tool_calls(f"{broken}\n{good}", HERMES, NAMES)
    assert reply.content == broken and calls_of(reply) == [("add", {"a": 1, "b": 2})]
    # any name is a call when no names are given
    assert calls_of(parse_tool_calls(unknown, HERMES)) == [("delete_all", {})]


def test_hermes_unclosed_last_call_and_plain_text():
    # generation can stop at the end-of-turn token before </tool_call>
    reply = parse_tool_calls('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}', HERMES, NAMES)
    assert reply.content == "" and calls_of(reply) == [("add", {"a": 1, "b": 2})]
    cut = parse_tool_calls('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool', HERMES, NAMES)
    assert cut.content == "" and calls_of(cut) == [("add", {"a": 1, "b": 2})]
    assert parse_tool_calls("  Hello there.\n", HERMES, NAMES) == ("  Hello there.\n", [])
    # arguments written as a JSON string are read too
    reply = parse_tool_calls('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}</tool_call>',
                             HERMES, NAMES)
    assert calls_of(reply) == [("add", {"a": 1, "b": 2})]


def test_llama3_calls():
    reply = parse_tool_calls('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', LLAMA3, NAMES)
    assert reply.content == "" and calls_of(reply) == [("get_weather", {"city": "Paris"})]
    # without the control token (Model's text leaves it out), several separated by ";", text before
    text = 'Sure: {"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "add", "parameters": {"a": 1, "b": 2}}'
    reply = parse_tool_calls(text, "llama3", NAMES)
    assert reply.content == "Sure:"
    assert calls_of(reply) == [("get_weather", {"city": "Paris"}), ("add", {"a": 1, "b": 2})]
    for text in ['{"name": "get_weather", "parameters": {"city": "Par',  # cut off
                 'A JSON object {"name": "add"} is not a call without its arguments',
                 '{"name": "nope", "parameters": {}}']:
        assert parse_tool_calls(text, LLAMA3, NAMES) == (text, [])


def test_mistral_lists():
    text = ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
            '{"name": "add", "arguments": {"a": 1, "b": 2}}]')
    for t in (text, text.removeprefix("[TOOL_CALLS]"), "Sure. " + text):
        reply = parse_tool_calls(t, MISTRAL, NAMES)
        assert calls_of(reply) == [("get_weather", {"city": "Paris"}), ("add", {"a": 1, "b": 2})]
        assert reply.content in ("", "Sure.")
    unknown = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "nope", "arguments": {}}]'
    assert parse_tool_calls(unknown, MISTRAL, NAMES) == (unknown, [])  # a list with a bad call stays text
    assert parse_tool_calls("[1, 2] and [{}]", MISTRAL, NAMES) == ("[1, 2] and [{}]", [])


def test_mistral_v11_calls():
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}'
    expected = [("get_weather", {"city": "Paris"}), ("add", {"a": 1, "b": 2})]
    assert calls_of(parse_tool_calls(text, MISTRAL_V11, NAMES)) == expected
    # without the control tokens: name{...} at the start of the reply or right after a call
    bare = 'get_weather{"city": "Paris"}add{"a": 1, "b": 2}'
    assert calls_of(parse_tool_calls(bare, MISTRAL_V11, NAMES)) == expected
    mention = 'You could call get_weather{"city": "Paris"} yourself.'
    assert parse_tool_calls(mention, MISTRAL_V11, NAMES) == (mention, [])


def test_reply_message_and_finish_reason():
    call = ToolCall("call_1", "add", '{"a": 1, "b": 2}')
    assert ParsedReply("", [call]).message() == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}
    assert ParsedReply("Hi", []).message() == {"role": "assistant", "content": "Hi"}
    assert ParsedReply("", [call]).finish_reason("stop") == "tool_calls"
    assert ParsedReply("Hi", []).finish_reason("length") == "length"


def test_stream_parser_holds_back_calls():
    def run(fmt, text, size=3, names=NAMES):
        parser = ToolStreamParser(fmt, names)
        sent = "".join(parser.feed(text[i:i + size]) for i in range(0, len(text), size))
        return sent, parser.finish()

    text = 'Checking <tool_ca now.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    sent, rest = run(HERMES, text)
    assert sent == "Checking <tool_ca now." and rest.content == ""
    assert calls_of(rest) == [("get_weather", {"city": "Paris"})]
    sent, rest = run(HERMES, "No call, only a <b> tag and <tool")  # a partial opening at the end
    assert sent + rest.content == "No call, only a <b> tag and <tool" and rest.tool_calls == []
    sent, rest = run(LLAMA3, '{"name": "add", "parameters": {"a": 1, "b": 2}}')
    assert sent == "" and calls_of(rest) == [("add", {"a": 1, "b": 2})]
    sent, rest = run(MISTRAL, 'Sure. [{"name": "add", "arguments": {"a": 1, "b": 2}}]')
    assert sent == "Sure. " and calls_of(rest) == [("add", {"a": 1, "b": 2})]
    parser = ToolStreamParser(HERMES, NAMES, enabled=False)  # tool_choice "none": all text is content
    assert parser.feed("<tool_call>x") == "<tool_call>x" and parser.finish() == ("", [])


# --- validation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("tools, field", [
    ("get_weather", "tools must be a list"),
    ([{"type": "function", "function": {"description": "no name"}}], "tools[0].function.name is missing"),
    ([WEATHER, {"type": "function", "function": {"name": "bad name!"}}], "tools[1].function.name"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}], "tools[0].function.parameters"),
    ([{"type": "function", "function": {"name": "f", "parameters": "{}"}}], "tools[0].function.parameters"),
    ([{"type": "retrieval"}], "tools[0].type"),
    ([{"type": "function"}], "tools[0].function"),
    ([WEATHER, WEATHER], "declared twice"),
])
def test_bad_tools_name_the_field(tools, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        validate_tools(tools)


def test_tool_choice_validation():
    tools = validate_tools(TOOLS)
    assert validate_tools(None) == []
    assert validate_tools([{"type": "function", "function": {"name": "ping"}}])[0]["function"]["parameters"] == \
        {"type": "object", "properties": {}}
    assert validate_tool_choice(None, tools) == ("auto", None)
    assert validate_tool_choice(None, []) == ("none", None)
    assert validate_tool_choice("required", tools) == ("required", None)
    assert validate_tool_choice({"type": "function", "function": {"name": "add"}}, tools) == ("function", "add")
    with pytest.raises(ValueError, match="tool_choice.function.name 'nope' is not one of the tools"):
        validate_tool_choice({"type": "function", "function": {"name": "nope"}}, tools)
    with pytest.raises(ValueError, match="tool_choice is only allowed when tools are given"):
        validate_tool_choice("required", [])
    with pytest.raises(ValueError, match="tool_choice must be"):
        validate_tool_choice("any", tools)
    with pytest.raises(ValueError, match="tool_choice.function.name is missing"):
        validate_tool_choice({"type": "function"}, tools)


def test_bad_messages_and_schemas(smollm2):
    with pytest.raises(ValueError, match=r"messages\[1\].tool_call_id is required"):
        prepare_tools(smollm2, [QUESTION[1], {"role": "tool", "content": "x"}], TOOLS)
    bad_args = conversation()
    bad_args[2]["tool_calls"][0]["function"]["arguments"] = "{city: Paris}"
    with pytest.raises(ValueError, match=r"messages\[2\].tool_calls\[0\].function.arguments is not valid JSON"):
        prepare_tools(smollm2, bad_args, TOOLS)
    # a schema the grammar engine refuses: GrammarError (a ValueError) naming the tool
    unique = {"type": "function", "function": {"name": "tag", "parameters": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}}}
    with pytest.raises(GrammarError, match=r"tools\[1\].function.parameters.*uniqueItems"):
        prepare_tools(smollm2, QUESTION, [ADD, unique], "required")
    with pytest.raises(GrammarError, match=r"tools\[0\].function.parameters.*nullable"):
        prepare_tools(smollm2, QUESTION, [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"type": "string", "nullable": True}}}}}])
    # nothing constrained, nothing checked: "none", and "auto" left unconstrained
    assert prepare_tools(smollm2, QUESTION, [unique], "none").grammar is None
    free = prepare_tools(smollm2, QUESTION, [unique], "auto", constrain_auto=False)
    assert free.grammar is None and free.tool_choice == "auto"
    assert free.parse('<tool_call>\n{"name": "tag", "arguments": {"tags": ["a"]}}\n</tool_call>').tool_calls


# --- formats and rendering -------------------------------------------------------------------------

@pytest.mark.parametrize("name, fmt, native", [
    ("Qwen-Qwen2.5-7B-Instruct", HERMES, True),
    ("Qwen-Qwen3-0.6B", HERMES, True),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", HERMES, True),
    ("meta-llama-Llama-3.1-8B-Instruct", LLAMA3, True),
    ("meta-llama-Llama-3.2-3B-Instruct", LLAMA3, True),
    ("mistralai-Mistral-Nemo-Instruct-2407", MISTRAL, True),
    ("Mistral-Small-3.2-24B-Instruct-2506", MISTRAL_V11, True),
    ("google-gemma-2-2b-it", HERMES, False),  # no tool support: the vocabulary decides (SmolLM2's: Hermes)
])
def test_model_tool_format(with_template, name, fmt, native):
    assert model_tool_format(with_template(name)) == (fmt, native)


def test_format_of_smollm2_and_vocabularies(smollm2):
    assert template_format(smollm2.chat_template) is None
    assert model_tool_format(smollm2) == (HERMES, False)
    has = lambda *tokens: (lambda t: t in tokens)  # noqa: E731
    assert vocabulary_format(has("[TOOL_CALLS]")) is MISTRAL
    assert vocabulary_format(has("[TOOL_CALLS]", "[ARGS]")) is MISTRAL_V11
    assert vocabulary_format(has("<|python_tag|>")) is LLAMA3
    assert vocabulary_format(has("<|python_tag|>", "<tool_call>")) is HERMES  # Hermes 3 on a Llama 3.1 vocabulary
    assert vocabulary_format(has()) is HERMES


def hf_render(template: str, messages: list[dict], tools, model: Model) -> str:
    """transformers' apply_chat_template rendering (the reference), with the model's BOS/EOS text."""
    from transformers.utils.chat_template_utils import render_jinja_template

    tok = model.tokenizer
    rendered, _ = render_jinja_template([messages], tools=tools, chat_template=template, add_generation_prompt=True,
                                        bos_token=tok.token_text(tok.bos_id) if tok.bos_id >= 0 else "",
                                        eos_token=tok.token_text(tok.eos_id))
    return rendered[0]


@pytest.mark.parametrize("name", ["Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct",
                                  "meta-llama-Llama-3.2-3B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
                                  "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506"])
def test_native_rendering_matches_transformers(with_template, templates, name):
    model = with_template(name)
    # Hugging Face's form of the conversation: arguments as an object; Mistral's 9-character ids
    call_id = "abcDEF123"
    hf_messages = conversation(call_id)
    hf_messages[2] = dict(hf_messages[2], content="", tool_calls=[
        {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])
    session = prepare_tools(model, conversation(call_id), TOOLS)
    assert session.native
    expected = hf_render((templates / f"{name}.jinja").read_text(), hf_messages, TOOLS, model)
    assert session.prompt == expected
    assert session.prompt_ids == model.tokenizer.encode(expected, add_special=False, parse_special=True)
    assert "22 C and sunny" in session.prompt and "The city, e.g. Paris" in session.prompt


def test_mistral_ids_are_mapped(with_template):
    model = with_template("mistralai-Mistral-Nemo-Instruct-2407")  # its template refuses other ids
    prompt = prepare_tools(model, conversation("call_0123456789abcdefghijklmn"), TOOLS).prompt
    short = mistral_call_id("call_0123456789abcdefghijklmn")
    assert len(short) == 9 and short.isalnum() and prompt.count(f'"{short}"') == 2


def test_tools_in_a_template_without_tool_support(smollm2):
    session = prepare_tools(smollm2, conversation(), TOOLS)
    assert not session.native and session.format is HERMES
    tools_json = "\n".join(json.dumps(t) for t in TOOLS)
    assert session.prompt == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{tools_json}\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n22 C and sunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n")
    # tool_choice "none": no tools block, no grammar, no parsing; the earlier call is still rendered
    none = prepare_tools(smollm2, conversation(), TOOLS, "none")
    assert "<tools>" not in none.prompt and "<tool_call>\n{\"name\": \"get_weather\"" in none.prompt
    assert none.grammar is None and none.parse('<tool_call>\n{"name": "add", "arguments": {}}') == \
        ('<tool_call>\n{"name": "add", "arguments": {}}', [])
    # no system message: the block becomes one (replacing SmolLM2's default system prompt)
    assert prepare_tools(smollm2, QUESTION[1:], TOOLS).prompt.startswith("<|im_start|>system\n# Tools\n")
    # several results and then a question: one user turn
    two = conversation() + [{"role": "tool", "tool_call_id": "call_abc", "content": "humid"},
                            {"role": "user", "content": "And tomorrow?"}]
    assert ("<|im_start|>user\n<tool_response>\n22 C and sunny\n</tool_response>\n<tool_response>\nhumid\n"
            "</tool_response>\n\nAnd tomorrow?<|im_end|>") in prepare_tools(smollm2, two, TOOLS).prompt
    # a client's own consecutive user messages stay two turns
    assert prepare_tools(smollm2, QUESTION + [{"role": "user", "content": "Hello?"}], TOOLS).prompt.endswith(
        "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>user\nHello?<|im_end|>\n"
        "<|im_start|>assistant\n")


def test_template_without_system_role(with_template):
    model = with_template("google-gemma-2-2b-it")  # raises on a system message
    prompt = prepare_tools(model, QUESTION[1:], TOOLS).prompt
    assert prompt.startswith(model.tokenizer.token_text(model.tokenizer.bos_id) + "<start_of_turn>user\n# Tools\n")
    assert "</tool_call>\n\nWhat is the weather in Paris?<end_of_turn>" in prompt


def test_hugging_face_tojson():
    # keys in the order given, <, > and & as they are, as transformers renders
    out = render_chat("{{ messages[0] | tojson }}", [{"role": "user", "content": "<a> & b"}], "", "")
    assert out == '{"role": "user", "content": "<a> & b"}'


# --- grammars --------------------------------------------------------------------------------------

def acceptor(compiler: GrammarCompiler, tok):
    """accepts(grammar, pieces): whether the grammar's matcher takes `pieces` (text, tokenized
    plainly, or token ids) to an accepting state."""

    def accepts(grammar, pieces) -> bool:
        matcher = compiler.matcher(grammar)
        for piece in pieces:
            ids = [piece] if isinstance(piece, int) else tok.encode(piece, add_special=False, parse_special=False)
            if not all(matcher.consume_token(i) for i in ids):
                return False
        return matcher.is_accepting()

    return accepts


def grammar_of(fmt, required=True, parallel=True, names=NAMES, special=None):
    functions = [(n, arguments_schema(SCHEMAS[n], n)) for n in names]
    return tool_grammar(fmt, functions, required=required, parallel=parallel,
                        special_id=lambda text: (special or {}).get(text))


@pytest.fixture(scope="module")
def accepts(smollm2):
    return acceptor(smollm2._grammars, smollm2.tokenizer)


WEATHER_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
ADD_CALL = '{"name": "add", "arguments": {"a": 1, "b": 2}}'


def test_hermes_grammars(accepts):
    block = lambda call: f"<tool_call>\n{call}\n</tool_call>"  # noqa: E731
    required = grammar_of(HERMES)
    assert accepts(required, [block(WEATHER_CALL)])
    assert accepts(required, [block(WEATHER_CALL) + "\n" + block(ADD_CALL)])
    assert not accepts(required, ["Sure. " + block(WEATHER_CALL)])  # calls only
    assert not accepts(required, [block('{"name": "nope", "arguments": {}}')])
    assert not accepts(required, [block('{"name": "add", "arguments": {"a": "1", "b": 2}}')])
    assert not accepts(required, [block('{"name": "add", "arguments": {"a": 1}}')])  # b is required
    assert not accepts(required, [block('{"name": "get_weather", "arguments": {"city": "Paris", "x": 1}}')])
    single = grammar_of(HERMES, parallel=False)
    assert accepts(single, [block(ADD_CALL)]) and not accepts(single, [block(ADD_CALL) + "\n" + block(ADD_CALL)])
    named = grammar_of(HERMES, parallel=False, names=["add"])
    assert accepts(named, [block(ADD_CALL)]) and not accepts(named, [block(WEATHER_CALL)])
    auto = grammar_of(HERMES, required=False)
    assert accepts(auto, ["Paris is sunny, no tool needed."]) and accepts(auto, [block(ADD_CALL)])
    assert accepts(auto, ["Let me look.\n" + block(WEATHER_CALL)])
    assert accepts(auto, ["A " + block(WEATHER_CALL) + "\nand " + block(ADD_CALL)])
    assert not accepts(auto, ['Let me look.<tool_call>\n{"name": "nope"'])  # once opened, a call is forced
    assert not accepts(auto, ["Let me look.<tool_call>\nI changed my mind"])


def test_arguments_schema_closes_objects():
    params = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "tags": {"type": "array", "items": {
        "type": "object", "properties": {"k": {"type": "string"}}}}},
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}}}}
    before = json.dumps(params)
    out = arguments_schema(params, "p")
    assert json.dumps(params) == before  # a copy
    assert out["additionalProperties"] is False and out["$defs"]["A"]["additionalProperties"] is False
    assert out["properties"]["tags"]["items"]["additionalProperties"] is False
    assert out["x-guidance"] == {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
    # what the schema says is kept; objects an allOf merges stay open (closing one would refuse the other's keys)
    typed = {"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}}
    assert arguments_schema(typed, "p")["additionalProperties"] == {"type": "integer"}
    merged = {"allOf": [{"type": "object", "properties": {"a": {}}}, {"type": "object", "properties": {"b": {}}}]}
    assert "additionalProperties" not in json.dumps(arguments_schema(merged, "p"))


def test_llama3_and_mistral_grammars(accepts):
    llama_call = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    assert accepts(grammar_of(LLAMA3), [llama_call])
    assert not accepts(grammar_of(LLAMA3), ['{"name": "get_weather", "arguments": {"city": "Paris"}}'])
    auto = grammar_of(LLAMA3, required=False)
    assert accepts(auto, ["It is sunny in Paris."]) and accepts(auto, ["\n" + llama_call])
    assert not accepts(auto, ['{"name": "nope", "parameters": {}}'])
    lists = f"[TOOL_CALLS][{WEATHER_CALL}, {ADD_CALL}]"
    assert accepts(grammar_of(MISTRAL), [lists])
    assert not accepts(grammar_of(MISTRAL, parallel=False), [lists])
    assert accepts(grammar_of(MISTRAL, required=False), ["Sure. " + lists])
    v11 = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}'
    assert accepts(grammar_of(MISTRAL_V11), [v11])
    assert not accepts(grammar_of(MISTRAL_V11), ['[TOOL_CALLS]add[ARGS]{"a": 1}'])


def test_control_token_markers():
    """Markers the vocabulary has as control tokens are forced as those tokens: Llama 3's vocabulary,
    with two of its reserved control tokens standing for the markers."""
    from paths import tokenizer_testdata

    tok = akunu.Tokenizer.from_file(str(tokenizer_testdata() / "ggml-vocab-llama-bpe.gguf"))
    accepts = acceptor(GrammarCompiler(tok, tok.vocab_size), tok)
    calls, args = 128010, 128011
    assert tok.is_control(calls) and tok.is_control(args)
    special = {"[TOOL_CALLS]": calls, "[ARGS]": args}
    auto = grammar_of(MISTRAL, required=False, special=special)
    assert accepts(auto, ["Sure. ", calls, f"[{ADD_CALL}]"])
    assert accepts(auto, ["Sure. [TOOL_CALLS]", '[{"name": "nope"}]'])  # as text it opens nothing
    assert not accepts(auto, ["Sure. ", calls, '[{"name": "nope"'])
    assert accepts(auto, ["No call here."])
    llama = grammar_of(LLAMA3, required=False, special={"<|python_tag|>": calls})
    assert accepts(llama, [calls, '{"name": "add", "parameters": {"a": 1, "b": 2}}'])
    assert not accepts(llama, [calls, "Some text"])
    v11 = grammar_of(MISTRAL_V11, special=special)
    assert accepts(v11, [calls, "add", args, '{"a": 1, "b": 2}'])
    assert not accepts(v11, [calls, 'add[ARGS]{"a": 1, "b": 2}'])


# --- end to end on SmolLM2 -----------------------------------------------------------------------------

def test_required_gives_a_valid_call(smollm2):
    result = chat_with_tools(smollm2, QUESTION, TOOLS, "required", parallel_tool_calls=False, max_tokens=48)
    assert result["finish_reason"] == "tool_calls"
    [call] = result["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])


def test_named_function_gives_a_call_to_it(smollm2):
    ask = [{"role": "user", "content": "What is 12 plus 30?"}]
    for name in NAMES:
        choice = {"type": "function", "function": {"name": name}}
        result = chat_with_tools(smollm2, ask, TOOLS, choice, max_tokens=48)
        assert result["finish_reason"] == "tool_calls" and result["message"]["content"] is None
        [call] = result["message"]["tool_calls"]
        assert call["function"]["name"] == name
        jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[name])


@pytest.mark.parametrize("template", ["Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct",
                                      "mistralai-Mistral-Nemo-Instruct-2407"])
def test_required_through_native_templates(with_template, template):
    result = chat_with_tools(with_template(template), QUESTION, TOOLS, "required", parallel_tool_calls=False,
                             max_tokens=48)
    [call] = result["message"]["tool_calls"]
    jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])


def test_round_trip(smollm2):
    """Request with tools -> call -> the tool's result -> a final answer, as an OpenAI client does it."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = chat_with_tools(smollm2, messages, TOOLS, {"type": "function", "function": {"name": "get_weather"}},
                            max_tokens=48)
    assert first["finish_reason"] == "tool_calls"
    messages.append(first["message"])
    for call in first["message"]["tool_calls"]:
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "22 C and sunny"})
    session = prepare_tools(smollm2, messages, TOOLS, "auto")
    assert "<tool_response>\n22 C and sunny\n</tool_response>" in session.prompt
    text = smollm2.generate(session.prompt_ids, grammar=session.grammar, max_tokens=24)
    final = session.parse(text)
    assert final.content or final.tool_calls
    assert final.finish_reason(smollm2.finish_reason) in ("stop", "length", "tool_calls")
    # the same with tool_choice "none": an answer in words
    answer = chat_with_tools(smollm2, messages, TOOLS, "none", max_tokens=24)
    assert answer["message"]["content"] and "tool_calls" not in answer["message"]


def test_streamed_call(smollm2):
    session = prepare_tools(smollm2, QUESTION, TOOLS, {"type": "function", "function": {"name": "add"}})
    parser = session.stream_parser()
    sent = "".join(parser.feed(piece) for piece in smollm2.stream(session.prompt_ids, grammar=session.grammar,
                                                                  max_tokens=48))
    rest = parser.finish()
    assert sent == "" and rest.content == ""
    [call] = rest.tool_calls
    jsonschema.validate(json.loads(call.arguments), SCHEMAS["add"])
