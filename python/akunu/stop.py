"""Stop strings for streamed text: cut the output before the first stop string, and hold back
only as much text as could still turn out to be the start of one."""

from __future__ import annotations

from typing import Sequence


class StopMatcher:
    def __init__(self, stops: Sequence[str]):
        """`stops`: non-empty strings (SamplingParams.stop, checked there)."""
        self.stops = list(stops)
        self.held = ""
        self.stopped = False

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to emit, whether a stop string was found)."""
        if self.stopped:
            return "", True
        if not self.stops:
            return text, False
        buf = self.held + text
        cut = min((i for i in (buf.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.held, self.stopped = "", True
            return buf[:cut], True
        hold = max((self._partial_suffix(buf, s) for s in self.stops), default=0)
        self.held = buf[len(buf) - hold:] if hold else ""
        return buf[:len(buf) - hold], False

    def flush(self) -> str:
        rest, self.held = self.held, ""
        return "" if self.stopped else rest

    @staticmethod
    def _partial_suffix(buf: str, stop: str) -> int:
        """Length of the longest suffix of buf that is a proper prefix of stop."""
        for n in range(min(len(stop) - 1, len(buf)), 0, -1):
            if buf.endswith(stop[:n]):
                return n
        return 0
