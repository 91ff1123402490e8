"""Response bodies in OpenAI's shapes: chat.completion / text_completion objects, their streaming
chunks (server-sent events), usage and logprobs."""

from __future__ import annotations

import json
import secrets
import time
from typing import Optional

from .generation import End, TokenLogprob


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def sse(data) -> bytes:
    """One server-sent event; `data` is a JSON-able object or the literal [DONE]."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n".encode()


def usage(ends: list[End], prompt_tokens: int, cached_tokens: int) -> dict:
    completion = sum(e.completion_tokens for e in ends)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


def _piece(tokenizer, token: int) -> tuple[str, list[int]]:
    raw = b"" if tokenizer.is_control(token) else tokenizer.token_to_piece(token)
    if not raw:  # a control token: its text, as OpenAI shows special tokens
        raw = tokenizer.token_text(token).encode()
    return raw.decode("utf-8", errors="replace"), list(raw)


def chat_logprobs(tokenizer, items: Optional[list[TokenLogprob]]) -> Optional[dict]:
    if items is None:
        return None
    content = []
    for lp in items:
        text, raw = _piece(tokenizer, lp.token)
        top = []
        for t, v in lp.top:
            t_text, t_raw = _piece(tokenizer, t)
            top.append({"token": t_text, "logprob": v, "bytes": t_raw})
        content.append({"token": text, "logprob": lp.logprob, "bytes": raw, "top_logprobs": top})
    return {"content": content, "refusal": None}


def completion_logprobs(tokenizer, items: Optional[list[TokenLogprob]], text_offset: int) -> Optional[dict]:
    """The legacy shape: tokens, token_logprobs, top_logprobs (token text -> logprob), text_offset."""
    if items is None:
        return None
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for lp in items:
        text, _ = _piece(tokenizer, lp.token)
        out["tokens"].append(text)
        out["token_logprobs"].append(lp.logprob)
        out["top_logprobs"].append({_piece(tokenizer, t)[0]: v for t, v in lp.top})
        out["text_offset"].append(text_offset)
        text_offset += len(text)
    return out


class ChunkWriter:
    """The chunks of one streamed response: same id, created time and model on each."""

    def __init__(self, obj: str, model: str, fingerprint: str, include_usage: bool):
        self.id = new_id("chatcmpl" if obj == "chat.completion.chunk" else "cmpl")
        self.obj, self.model, self.fingerprint = obj, model, fingerprint
        self.created = int(time.time())
        self.include_usage = include_usage

    def chunk(self, choices: list[dict], usage_body: Optional[dict] = None) -> bytes:
        body = {"id": self.id, "object": self.obj, "created": self.created, "model": self.model,
                "system_fingerprint": self.fingerprint, "choices": choices}
        if self.include_usage:
            body["usage"] = usage_body
        return sse(body)
