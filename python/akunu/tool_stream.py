"""Tool calls in a streamed reply: pass the model's text through as it comes, except what may be a
call, which is held back and parsed once the reply is complete.

    parser = session.stream_parser()
    for piece in model.stream(session.prompt_ids, grammar=session.grammar):
        send_content(parser.feed(piece))
    rest = parser.finish()          # ParsedReply: the held-back content, and the calls
    send_content(rest.content); send_tool_calls(rest.tool_calls)

Text is held from the first place a call could begin (the format's openings: `<tool_call>`,
`[TOOL_CALLS]`, "{" for Llama 3, ...), including a partial opening at the end of what has arrived
("<tool_ca"), so no call text is ever sent as content. Text that only looked like a call comes out
of finish() as content: it is late, never lost."""

from __future__ import annotations

from typing import Sequence

from .tool_formats import ToolFormat
from .tool_parse import ParsedReply, parse_tool_calls


class ToolStreamParser:
    """Splits streamed reply text into content to send now and calls parsed at the end."""

    def __init__(self, fmt: ToolFormat, names: Sequence[str], enabled: bool = True):
        self._fmt = fmt
        self._names = list(names)
        self._openings = [o for o in fmt.openings(self._names) if o] if enabled else []
        self._held = ""
        self._holding = False  # an opening was seen: everything from it on waits for finish()

    def feed(self, piece: str) -> str:
        """The part of the text so far that can be sent as content now."""
        self._held += piece
        if self._holding or not self._openings:
            out, self._held = ("", self._held) if self._holding else (self._held, "")
            return out
        cut, full = self._first_opening(self._held)
        self._holding = full
        out, self._held = self._held[:cut], self._held[cut:]
        return out

    def finish(self) -> ParsedReply:
        """The held-back text split into content and calls."""
        held, self._held = self._held, ""
        if not self._openings:
            return ParsedReply(held, [])
        return parse_tool_calls(held, self._fmt, self._names)

    def _first_opening(self, text: str) -> tuple[int, bool]:
        """(where text must start being held, whether a whole opening is there). A partial opening
        at the end holds only until the next piece shows what it is."""
        cut, full = len(text), False
        for opening in self._openings:
            at = text.find(opening)
            if at != -1 and at <= cut:
                cut, full = at, True
            for k in range(min(len(opening) - 1, len(text)), 0, -1):
                if text.endswith(opening[:k]):
                    if len(text) - k < cut:
                        cut, full = len(text) - k, False
                    break
        return cut, full
