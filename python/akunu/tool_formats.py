"""How each model family writes a tool call, and how to read one back out of generated text.

Three families of chat templates in use define their own call syntax:

- "hermes" (Hermes 2/3, Qwen 2.5/3, and akunu's choice for templates with no tool support of their
  own, such as SmolLM2's ChatML): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`,
  one block per call.
- "llama3" (Llama 3.1 / 3.2 / 3.3): the reply is one JSON object `{"name": ..., "parameters": {...}}`,
  possibly after the `<|python_tag|>` token.
- "mistral" (Mistral v3 tokenizers, Mistral-Nemo): `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`;
  "mistral-v11" (Mistral-Small 3.2, Devstral, Ministral 3): `[TOOL_CALLS]name[ARGS]{...}` per call.

Markers such as `[TOOL_CALLS]`, `[ARGS]` and `<|python_tag|>` are control tokens in those
vocabularies, and Model's text output leaves control tokens out: the parsers therefore read a call
with or without its markers.

A ToolFormat knows its syntax three ways: as text (to write the calls and results of earlier turns
into a prompt whose template knows nothing of tools, and the system-prompt block that describes the
tools), as a parser, and as the pieces a grammar forces (akunu.tool_grammar)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class FoundCall:
    """A call found in generated text: text[start:end] is the call's text (markers included)."""

    start: int
    end: int
    name: str
    arguments: str  # JSON text of an object


class ToolFormat:
    """A family's tool-call syntax. Subclasses fill in the text forms and find()."""

    name = ""
    template_markers: tuple[str, ...] = ()   # text in a chat template that says it writes this format
    trigger: Optional[str] = None            # the text (or control token) that opens a call; None: a JSON reply
    arguments_key = "arguments"

    # --- text for prompts -------------------------------------------------------------------

    def instructions(self, tools: list[dict]) -> str:
        """The system-prompt block that lists `tools` and the call syntax (for templates without
        tool support)."""
        raise NotImplementedError

    def render_calls(self, calls: list[tuple[str, dict]]) -> str:
        """An assistant turn's calls [(name, arguments)] as the model writes them."""
        raise NotImplementedError

    def render_results(self, contents: list[str]) -> str:
        """Tool results, for a user turn (templates without tool support)."""
        return "\n".join(f"<tool_response>\n{c}\n</tool_response>" for c in contents)

    # --- parsing --------------------------------------------------------------------------

    def find(self, text: str, accept: Callable[[object], Optional[tuple[str, str]]]) -> list[FoundCall]:
        """The calls in `text`, in order. `accept(obj)` turns a decoded call object into
        (name, arguments JSON) or None when it is not a valid call (unknown name, no arguments)."""
        raise NotImplementedError

    def openings(self, names: Iterable[str]) -> list[str]:
        """Texts a call can begin with (for streaming: text from the first of them on is held back
        until the reply is complete, as it may be a call)."""
        return [self.trigger]

    # --- grammar pieces (akunu.tool_grammar), in llguidance's Lark -------------------------------
    # `atom(text)` is the Lark for a marker: its control token where the vocabulary has one, else text.

    repeats = True       # several calls are several blocks, each after its own opening
    separator = ""       # between those blocks

    def function_rule(self, name: str, arguments: str, atom) -> str:
        """One call to `name`, its arguments given as Lark (an inline %json schema)."""
        prefix = f'{{"name": {json.dumps(name)}, "{self.arguments_key}": '
        return f'{json.dumps(prefix)} {arguments} "}}"'

    def block_rule(self, parallel: bool, atom) -> str:
        """What follows the opening in one block of calls (`fn` is any one call)."""
        return "fn"

    def __repr__(self) -> str:
        return f"ToolFormat({self.name!r})"


def _call_dict(name: str, arguments: dict, key: str = "arguments") -> str:
    return json.dumps({"name": name, key: arguments}, ensure_ascii=False)


def _decode_at(text: str, at: int):
    """The JSON value starting at text[at] and the index after it, or (None, at) if there is none."""
    try:
        return _DECODER.raw_decode(text, at)
    except ValueError:
        return None, at


class HermesFormat(ToolFormat):
    name = "hermes"
    template_markers = ("<tool_call>",)
    trigger = "<tool_call>"
    close = "</tool_call>"

    _BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)

    def instructions(self, tools: list[dict]) -> str:
        # Qwen 2.5's wording, which Hermes-trained and ChatML models follow.
        listed = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n"
                f"<tools>\n{listed}\n</tools>\n\n"
                "For each function call, return a json object with function name and arguments within "
                "<tool_call></tool_call> XML tags:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')

    def render_calls(self, calls):
        return "\n".join(f"<tool_call>\n{_call_dict(n, a)}\n</tool_call>" for n, a in calls)

    separator = "\n"

    def block_rule(self, parallel, atom):
        return f'"\\n" fn "\\n" {atom(self.close)}'

    def find(self, text, accept):
        found = []
        for m in self._BLOCK.finditer(text):
            inner = m.group(1).strip()
            if not m.group(0).endswith(self.close):  # cut off (max_tokens): a partial "</tool_call>" may end it
                inner = next((inner[:-k].rstrip() for k in range(len(self.close) - 1, 0, -1)
                              if inner.endswith(self.close[:k])), inner)
            obj, end = _decode_at(inner, 0)
            call = accept(obj) if obj is not None and end == len(inner) else None
            if call:
                found.append(FoundCall(m.start(), m.end(), *call))
        return found


class Llama3Format(ToolFormat):
    name = "llama3"
    template_markers = ("<|python_tag|>", '"parameters": ')
    trigger = None
    python_tag = "<|python_tag|>"
    arguments_key = "parameters"

    _START = re.compile(r'(?:<\|python_tag\|>\s*)?\{\s*"(?:name|type)"\s*:')

    def instructions(self, tools):
        # The Llama 3.1 template's wording (its tools-in-system-prompt variant).
        listed = "".join(json.dumps(t, indent=4, ensure_ascii=False) + "\n\n" for t in tools)
        return ("You have access to the following functions. To call a function, please respond with JSON for a "
                'function call. Respond in the format {"name": function name, "parameters": dictionary of argument '
                f'name and its value}}. Do not use variables.\n\n{listed}').rstrip()

    def render_calls(self, calls):
        return "; ".join(_call_dict(n, a, "parameters") for n, a in calls)

    def openings(self, names):
        return [self.python_tag, "{"]

    def find(self, text, accept):
        found, at = [], 0
        while (m := self._START.search(text, at)) is not None:
            brace = text.index("{", m.start())
            obj, end = _decode_at(text, brace)
            # a bare JSON object in a reply is a call only with its arguments key
            call = accept(obj) if isinstance(obj, dict) and ("parameters" in obj or "arguments" in obj) else None
            if not call:
                at = m.start() + 1
                continue
            sep = re.match(r"\s*;", text[end:])  # Llama 3.2 separates several calls with ";"
            found.append(FoundCall(m.start(), end + (sep.end() if sep else 0), *call))
            at = found[-1].end
        return found


class MistralFormat(ToolFormat):
    """Mistral's [TOOL_CALLS]: a JSON list (v3 tokenizers), or name[ARGS]{...} per call (v11)."""

    name = "mistral"
    template_markers = ("[TOOL_CALLS]",)
    trigger = "[TOOL_CALLS]"

    _LIST = re.compile(r"(?:\[TOOL_CALLS\]\s*)?(?=\[\s*\{)")
    # [TOOL_CALLS]name[ARGS]{...}; without the control tokens the text is name{...}
    _NAMED = re.compile(r"(\[TOOL_CALLS\])?\s*(?<![\w.-])([\w.-]{1,64})(?:\[CALL_ID\]\w*)?(\[ARGS\])?\s*(?=\{)")

    def instructions(self, tools):
        return (f"[AVAILABLE_TOOLS]{json.dumps(tools, ensure_ascii=False)}[/AVAILABLE_TOOLS]\n"
                'To call functions, answer with [TOOL_CALLS] and a JSON list of {"name": ..., "arguments": {...}} '
                "objects.")

    def render_calls(self, calls):
        return "[TOOL_CALLS][" + ", ".join(_call_dict(n, a) for n, a in calls) + "]"

    def openings(self, names):
        # Without its control tokens a call starts with "[" (a list) or a function's name.
        return [self.trigger, "["] + list(names)

    repeats = False  # one list holds them all

    def block_rule(self, parallel, atom):
        return '"[" fn ("," " " fn)* "]"' if parallel else '"[" fn "]"'

    def find(self, text, accept):
        found = self._find_lists(text, accept)
        return sorted(found + self._find_named(text, accept, found), key=lambda c: c.start)

    def _find_lists(self, text, accept):
        found, at = [], 0
        while (m := self._LIST.search(text, at)) is not None:
            items, end = _decode_at(text, m.end())
            calls = [accept(o) for o in items] if isinstance(items, list) and items else []
            if not calls or not all(calls):  # a list holds calls only; otherwise it is text
                at = m.end() + 1
                continue
            # the list's calls share its text: the first spans it, the others are empty spans at its end
            found.append(FoundCall(m.start(), end, *calls[0]))
            found += [FoundCall(end, end, *c) for c in calls[1:]]
            at = end
        return found

    def _find_named(self, text, accept, lists):
        found, at = [], 0
        ends = {0} | {c.end for c in lists}  # where a call may start without markers
        while (m := self._NAMED.search(text, at)) is not None:
            obj, end = _decode_at(text, m.end())
            marked = m.group(1) or m.group(3)
            starts_reply = m.start() in ends or not text[:m.start()].strip()
            inside_list = any(c.start <= m.start() < c.end for c in lists)
            call = accept({"name": m.group(2), "arguments": obj}) \
                if isinstance(obj, dict) and (marked or starts_reply) and not inside_list else None
            if not call:
                at = m.start() + 1
                continue
            found.append(FoundCall(m.start(), end, *call))
            ends.add(end)
            at = end
        return found


class MistralV11Format(MistralFormat):
    name = "mistral-v11"
    template_markers = ("[ARGS]",)
    args_marker = "[ARGS]"

    def render_calls(self, calls):
        return "".join(f"[TOOL_CALLS]{n}[ARGS]{json.dumps(a, ensure_ascii=False)}" for n, a in calls)

    repeats = True

    def function_rule(self, name, arguments, atom):
        return f"{json.dumps(name)} {atom(self.args_marker)} {arguments}"

    def block_rule(self, parallel, atom):
        return "fn"


HERMES = HermesFormat()
LLAMA3 = Llama3Format()
MISTRAL = MistralFormat()
MISTRAL_V11 = MistralV11Format()
FORMATS = {f.name: f for f in (HERMES, LLAMA3, MISTRAL, MISTRAL_V11)}


def template_format(template: str) -> Optional[ToolFormat]:
    """The format a chat template writes tool calls in, from its text; None if it writes none we
    read (or writes them some other way: Qwen3-Coder's XML inside <tool_call>)."""
    if "<function=" in template:
        return None
    for fmt in (MISTRAL_V11, MISTRAL, HERMES):
        if any(m in template for m in fmt.template_markers):
            return fmt
    if "<|python_tag|>" in template or ('"parameters": ' in template and "<|start_header_id|>" in template):
        return LLAMA3
    return None


def vocabulary_format(has_token: Callable[[str], bool]) -> ToolFormat:
    """The format a model's vocabulary was made for (its tool-call control tokens), for templates
    that name none; Hermes when it has none of them."""
    if has_token("[TOOL_CALLS]"):
        return MISTRAL_V11 if has_token("[ARGS]") else MISTRAL
    if has_token("<|python_tag|>") and not has_token("<tool_call>"):
        return LLAMA3
    return HERMES


def resolve_format(fmt) -> ToolFormat:
    """A ToolFormat from itself or its name."""
    if isinstance(fmt, ToolFormat):
        return fmt
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    raise ValueError(f"unknown tool-call format {fmt!r}; one of {sorted(FORMATS)}")


def call_acceptor(names: Optional[Iterable[str]]) -> Callable[[object], Optional[tuple[str, str]]]:
    """accept(obj) for ToolFormat.find: a call object {"name": ..., "arguments" or "parameters": {...}}
    to a function in `names` (any name when None) -> (name, arguments as JSON text)."""
    known = None if names is None else set(names)

    def accept(obj):
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        if known is not None and obj["name"] not in known:
            return None
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):  # some models write the arguments as a JSON string
            quoted = args.strip()
            args, end = _decode_at(quoted, 0)
            if end != len(quoted):
                return None
        if not isinstance(args, dict):
            return None
        return obj["name"], json.dumps(args, ensure_ascii=False)

    return accept
