"""Grammars that make a model's tool calls well-formed: the format's call syntax, a declared
function's name, and arguments valid under that function's `parameters` schema.

One Lark grammar (llguidance's dialect, Grammar.lark) per request, each function's arguments an
inline `%json {...}` schema:

- tool_choice "required" / a named function: the whole reply is the call(s).
- "auto": free text, until the format's opening (`<tool_call>`, `[TOOL_CALLS]`) appears; from there
  the call is forced, as in llguidance's tool-calling recipe (docs/syntax.md, "Tool calling"): a
  lazy lexeme ends the free text at the first opening. Llama 3's calls have no opening: a reply
  that starts with "{" (or <|python_tag|>) is a call, any other reply is free text.

Each `parameters` schema first goes through Grammar.json_schema, so one akunu refuses raises
GrammarError naming the keyword, exactly as a response_format schema would. The grammar's copy is
then made stricter in one way that keeps every output valid: objects that list properties and say
nothing of others get "additionalProperties": false (llama.cpp does the same), without which a
small model invents property after property."""

from __future__ import annotations

import json
from typing import Callable, Optional

from .grammar import Grammar, GrammarError
from .json_schema_keywords import with_format_bounds
from .tool_formats import LLAMA3, ToolFormat

# The JSON layout of Grammar.json_schema (json.dumps's), written into each inline schema.
_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def arguments_schema(parameters: dict, where: str) -> dict:
    """The inline schema for a function's arguments: checked as Grammar.json_schema checks a schema
    (GrammarError naming `where` otherwise), closed, format bounds written out, the layout set."""
    try:
        Grammar.json_schema(parameters)
    except GrammarError as e:
        raise GrammarError(f"{where}: {e}") from None
    schema = with_format_bounds(_closed(parameters) if not _merges_objects(parameters) else parameters)
    schema["x-guidance"] = {**_LAYOUT, **parameters.get("x-guidance", {})}
    return schema


def _closed(schema):
    """`schema` (a copy) with additionalProperties: false on every object schema that lists
    properties and leaves other properties open by saying nothing."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    open_ended = {"additionalProperties", "patternProperties", "unevaluatedProperties"} & set(schema)
    if "properties" in schema and not open_ended:
        out["additionalProperties"] = False
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _closed(sub) for name, sub in value.items()}
        elif key in ("prefixItems", "anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [_closed(sub) for sub in value]
        elif key in ("items", "additionalProperties"):
            out[key] = [_closed(s) for s in value] if isinstance(value, list) else _closed(value)
    return out


def _merges_objects(schema) -> bool:
    """Whether an allOf anywhere combines two or more schemas (closing one of them would forbid the
    other's properties: such a schema is used as it is)."""
    if isinstance(schema, dict):
        if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) > 1:
            return True
        return any(_merges_objects(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_merges_objects(v) for v in schema)
    return False


def tool_grammar(fmt: ToolFormat, functions: list[tuple[str, dict]], *, required: bool, parallel: bool,
                 special_id: Callable[[str], Optional[int]]) -> Grammar:
    """The grammar for calls to `functions` [(name, inline arguments schema)] in `fmt`.

    required: the reply is calls only (tool_choice "required" or a named function); otherwise free
    text with constrained calls ("auto"). parallel: several calls allowed (else at most one).
    special_id(text): the id of `text` when the vocabulary has it as one control token (the
    markers are forced as that token, as the model was trained), else None (forced as text)."""

    def atom(text: str) -> str:
        token = special_id(text)
        return f"<[{token}]>" if token is not None else json.dumps(text, ensure_ascii=False)

    rules = [f"fn: {' | '.join(f'fn_{i}' for i in range(len(functions)))}"]
    rules += [f"fn_{i}: " + fmt.function_rule(name, f"%json {json.dumps(schema, ensure_ascii=False)}", atom)
              for i, (name, schema) in enumerate(functions)]
    if fmt.trigger is None:
        start = _json_reply_start(required, special_id(LLAMA3.python_tag))
    else:
        start = _triggered_start(fmt, required, parallel, atom, special_id(fmt.trigger))
    return Grammar.lark("\n".join(start + rules) + "\n")


def _triggered_start(fmt: ToolFormat, required: bool, parallel: bool, atom, trigger_id: Optional[int]) -> list[str]:
    """Calls that open with a marker; in "auto", free text until the marker (a lazy lexeme ends
    the text at the marker's first appearance, or the marker's control token ends it)."""
    rest = fmt.block_rule(parallel, atom)
    repeat = parallel and fmt.repeats
    if required:
        separator = f"{json.dumps(fmt.separator)} " if fmt.separator else ""
        return [f"start: call ({separator}call)*" if repeat else "start: call",
                f"call: {atom(fmt.trigger)} {rest}"]
    head = (f"head: TEXT <[{trigger_id}]>" if trigger_id is not None
            else f"head[lazy]: TEXT {json.dumps(fmt.trigger)}")
    return ["start: (head call_rest)* TEXT" if repeat else "start: TEXT | head call_rest",
            f"call_rest: {rest}", head, r"TEXT: /(.|\n)*/"]


def _json_reply_start(required: bool, python_tag_id: Optional[int]) -> list[str]:
    """Llama 3: a call is the whole reply, one JSON object (the Llama 3.1 template refuses an
    assistant turn with more than one call), possibly after <|python_tag|>."""
    if required:
        return ["start: fn"]
    tagged = [f"<[{python_tag_id}]> WS fn"] if python_tag_id is not None else []
    return ["start: " + " | ".join(["TEXT", "WS fn"] + tagged),
            r"TEXT: /(\s*[^{\s](.|\n)*)?/",  # a reply that does not open with "{" is free text
            r"WS: /\s*/"]
