"""Tool calling (OpenAI function calling) for any chat model: the layer between an
OpenAI-compatible request and the model.

    from akunu import Model
    from akunu.tool_calls import prepare_tools

    model = Model("SmolLM2-135M-Instruct.Q4_1.gguf")
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    session = prepare_tools(model, [{"role": "user", "content": "Weather in Paris?"}], tools, "required")
    text = model.generate(session.prompt_ids, grammar=session.grammar, max_tokens=64)
    reply = session.parse(text)        # reply.content, reply.tool_calls ([ToolCall(id, name, arguments)])
    reply.message()                    # {"role": "assistant", "content": None, "tool_calls": [...]}
    reply.finish_reason(model.finish_reason)   # "tool_calls"

prepare_tools validates `tools` and `tool_choice` (ValueError naming the field), picks the model's
tool-call format (akunu.tool_formats: Hermes/Qwen, Llama 3, Mistral), renders the prompt
(akunu.tool_prompt: through the template's own tool support, or with the tools described in the
system prompt), and builds the grammar (akunu.tool_grammar; GrammarError for a schema akunu cannot
enforce):

- "none": no tools in the prompt, no grammar, nothing parsed (earlier calls and results in the
  conversation are still rendered).
- "auto": free text; once the model opens a call (`<tool_call>`, `[TOOL_CALLS]`, a Llama 3 reply
  starting with "{"), the grammar forces a well-formed call with valid arguments.
- "required": the reply is one or more calls (one with parallel_tool_calls=False).
- {"type": "function", "function": {"name": ...}}: the reply is one call to that function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from .chat_template import template_variables
from .grammar import Grammar
from .tool_formats import ToolFormat, template_format, vocabulary_format
from .tool_grammar import arguments_schema, tool_grammar
from .tool_parse import ParsedReply, ToolCall, new_call_id, parse_tool_calls
from .tool_prompt import injected_messages, native_messages, normalize_messages
from .tool_stream import ToolStreamParser

__all__ = ["prepare_tools", "chat_with_tools", "ToolSession", "ToolCall", "ParsedReply", "ToolStreamParser",
           "parse_tool_calls", "new_call_id", "validate_tools", "validate_tool_choice", "model_tool_format"]

TOOL_CHOICES = ("auto", "none", "required")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for function names


# --- validation -----------------------------------------------------------------------------------

def validate_tools(tools) -> list[dict]:
    """`tools` checked and copied as {"type": "function", "function": {"name", "description"?,
    "parameters"}} ([] for None). ValueError naming the field: a missing or malformed function
    name, a name declared twice, parameters that are not a JSON schema of an object."""
    if tools is None:
        return []
    if not isinstance(tools, (list, tuple)):
        raise ValueError("tools must be a list of {'type': 'function', 'function': {...}} objects")
    out, seen = [], set()
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise ValueError(f"{where} must be an object {{'type': 'function', 'function': {{...}}}}")
        if tool.get("type", "function") != "function":
            raise ValueError(f"{where}.type must be 'function', got {tool['type']!r}")
        fn = tool.get("function")
        if not isinstance(fn, dict):
            raise ValueError(f"{where}.function is missing or not an object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.function.name is missing")
        if not _NAME.fullmatch(name):
            raise ValueError(f"{where}.function.name {name!r} must be 1 to 64 letters, digits, '_' or '-'")
        if name in seen:
            raise ValueError(f"{where}.function.name {name!r} is declared twice")
        seen.add(name)
        description = fn.get("description")
        if description is not None and not isinstance(description, str):
            raise ValueError(f"{where}.function.description must be a string")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise ValueError(f"{where}.function.parameters must be a JSON schema of an object "
                             f"({{'type': 'object', 'properties': {{...}}}}), got {params!r}")
        function = {"name": name, **({"description": description} if description else {}), "parameters": params}
        out.append({"type": "function", "function": function})
    return out


def validate_tool_choice(tool_choice, tools: list[dict]) -> tuple[str, Optional[str]]:
    """(mode, function name): mode "auto", "none", "required" or "function" (with the name).
    Without tool_choice: "auto" with tools, "none" without. ValueError for a tool_choice without
    tools, an unknown value, or a function not among the tools."""
    names = [t["function"]["name"] for t in tools]
    if tool_choice is None:
        return ("auto" if tools else "none"), None
    if not tools:
        raise ValueError("tool_choice is only allowed when tools are given")
    if isinstance(tool_choice, str) and tool_choice in TOOL_CHOICES:
        return tool_choice, None
    if isinstance(tool_choice, dict):
        if tool_choice.get("type") != "function":
            raise ValueError(f"tool_choice.type must be 'function', got {tool_choice.get('type')!r}")
        fn = tool_choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str):
            raise ValueError("tool_choice.function.name is missing")
        if name not in names:
            raise ValueError(f"tool_choice.function.name {name!r} is not one of the tools: {names}")
        return "function", name
    raise ValueError(f"tool_choice must be 'auto', 'none', 'required' or "
                     f"{{'type': 'function', 'function': {{'name': ...}}}}, got {tool_choice!r}")


# --- the model's format ----------------------------------------------------------------------------

def _single_token(tokenizer, text: str, control: bool = False) -> Optional[int]:
    """The id of `text` if the vocabulary has it as one token (a control token with control=True)."""
    ids = tokenizer.encode(text, add_special=False, parse_special=True)
    if len(ids) == 1 and tokenizer.token_text(ids[0]) == text and (not control or tokenizer.is_control(ids[0])):
        return ids[0]
    return None


def model_tool_format(model) -> tuple[ToolFormat, bool]:
    """(format, native) for `model`: the format its chat template writes calls in, else the one
    its vocabulary's control tokens are for, else Hermes; native when the template also renders
    the tool definitions itself (it reads `tools`)."""
    template = model.effective_chat_template
    fmt = template_format(template)
    if fmt is not None:
        return fmt, "tools" in template_variables(template)
    return vocabulary_format(lambda text: _single_token(model.tokenizer, text) is not None), False


def _template_has_system_role(model) -> bool:
    """Whether the template renders a system message (Gemma 2's refuses one)."""
    try:
        text = model.format_chat([{"role": "system", "content": "\x01"}, {"role": "user", "content": "u"}])
    except ValueError:
        return False
    return "\x01" in text


# --- the session -----------------------------------------------------------------------------------

@dataclass
class ToolSession:
    """One chat request with tools, ready to generate: feed prompt_ids with grammar (None for
    tool_choice "none", or "auto" with constrain_auto=False) to Model.generate / stream, then
    parse() the text (or feed a stream_parser() the pieces).

    - format: the tool-call format; native: whether the template rendered the tools itself.
    - tool_choice: "auto", "none", "required" or "function" (then `function` names it).
    - tools: the validated tool definitions.
    """

    format: ToolFormat
    native: bool
    tool_choice: str
    function: Optional[str]
    tools: list[dict]
    prompt: str
    prompt_ids: list[int] = field(repr=False)
    grammar: Optional[Grammar] = None

    def parse(self, text: str) -> ParsedReply:
        """The reply `text` split into content and calls (none with tool_choice "none")."""
        if self.tool_choice == "none":
            return ParsedReply(text, [])
        return parse_tool_calls(text, self.format, self.names)

    def stream_parser(self) -> ToolStreamParser:
        """A parser for this reply streamed piece by piece (akunu.tool_stream)."""
        return ToolStreamParser(self.format, self.names, enabled=self.tool_choice != "none")

    @property
    def names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]


def prepare_tools(model, messages, tools=None, tool_choice=None, *, parallel_tool_calls: bool = True,
                  constrain_auto: bool = True) -> ToolSession:
    """A ToolSession for `messages` (OpenAI chat messages, tool calls and results included) with
    `tools` and `tool_choice` as OpenAI defines them. ValueError names a malformed field;
    akunu.GrammarError a parameters schema the grammar engine refuses.

    constrain_auto=False: tool_choice "auto" generates freely and only parses (no grammar). The
    grammar costs little per token, but constrained decoding runs one token per step where free
    text chains many (docs/adr/0017-constrained-decoding-session.md), which counts on CUDA."""
    for name, flag in (("parallel_tool_calls", parallel_tool_calls), ("constrain_auto", constrain_auto)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be true or false, got {flag!r}")
    tools = validate_tools(tools)
    mode, function = validate_tool_choice(tool_choice, tools)
    messages = normalize_messages(messages)
    fmt, native = model_tool_format(model)
    shown = tools if mode != "none" else None
    if native:
        prompt = model.format_chat(native_messages(fmt, messages), tools=shown)
    else:
        prompt = model.format_chat(injected_messages(fmt, messages, shown, _template_has_system_role(model)))
    ids = model.tokenizer.encode(prompt, add_special=False, parse_special=True)
    grammar = None
    if mode != "none" and (constrain_auto or mode != "auto"):
        # every tool's schema is checked, also those a named tool_choice leaves out of the grammar
        schemas = [(t["function"]["name"],
                    arguments_schema(t["function"]["parameters"], f"tools[{i}].function.parameters"))
                   for i, t in enumerate(tools)]
        grammar = tool_grammar(fmt, [(n, s) for n, s in schemas if mode != "function" or n == function],
                               required=mode != "auto", parallel=parallel_tool_calls and mode != "function",
                               special_id=lambda text: _single_token(model.tokenizer, text, control=True))
    return ToolSession(fmt, native, mode, function, tools, prompt, ids, grammar)


def chat_with_tools(model, messages, tools=None, tool_choice=None, *, parallel_tool_calls: bool = True,
                    constrain_auto: bool = True, **settings) -> dict:
    """Generate one reply with tools: {"message": the OpenAI assistant message, "finish_reason"}.
    `settings` are Model.generate's (max_tokens defaults to 256, as chat's)."""
    if "grammar" in settings:
        raise ValueError("chat_with_tools makes its own grammar from the tools; grammar= cannot be given")
    session = prepare_tools(model, messages, tools, tool_choice, parallel_tool_calls=parallel_tool_calls,
                            constrain_auto=constrain_auto)
    settings.setdefault("max_tokens", 256)
    text = model.generate(session.prompt_ids, grammar=session.grammar, **settings)
    reply = session.parse(text)
    return {"message": reply.message(), "finish_reason": reply.finish_reason(model.finish_reason)}
