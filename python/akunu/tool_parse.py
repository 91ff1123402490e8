"""Generated text split into content and tool calls (ToolFormat.find does the finding): the
OpenAI shapes of a call and of the assistant message that carries it."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

from .tool_formats import call_acceptor, resolve_format

_ID_CHARS = string.ascii_letters + string.digits


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: `arguments` is JSON text of an object, as OpenAI sends it."""

    id: str
    name: str
    arguments: str

    def to_dict(self) -> dict:
        """The call as an OpenAI `tool_calls` entry."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


class ParsedReply(NamedTuple):
    """Generated text split into what the model said (content) and the calls it made."""

    content: str
    tool_calls: list[ToolCall]

    def message(self) -> dict:
        """The OpenAI assistant message: content None when the reply was only calls."""
        msg = {"role": "assistant", "content": self.content if self.content or not self.tool_calls else None}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        return msg

    def finish_reason(self, generation_reason: str) -> str:
        """"tool_calls" when a call was parsed, else the generation's own ("stop", "length")."""
        return "tool_calls" if self.tool_calls else generation_reason


def new_call_id() -> str:
    """A fresh call id, OpenAI-style: "call_" and 24 letters or digits."""
    return "call_" + "".join(secrets.choice(_ID_CHARS) for _ in range(24))


def parse_tool_calls(text: str, format, names: Optional[Sequence[str]] = None) -> ParsedReply:
    """The calls in generated `text` written in `format` (a ToolFormat or its name: "hermes",
    "llama3", "mistral", "mistral-v11"), each with a new id, and the text around them (stripped)
    as content. A call to a function not in `names` (any name when None), or one whose JSON does
    not parse, stays in the content as text. Text without calls comes back unchanged."""
    fmt = resolve_format(format)
    found = fmt.find(text, call_acceptor(names))
    if not found:
        return ParsedReply(text, [])
    pieces, at = [], 0
    for call in found:
        pieces.append(text[at:call.start])
        at = max(at, call.end)
    pieces.append(text[at:])
    return ParsedReply("".join(pieces).strip(), [ToolCall(new_call_id(), c.name, c.arguments) for c in found])
