"""The prompt of a conversation with tools: OpenAI messages (assistant `tool_calls`, `tool`
results) and tool definitions, rendered through the model's chat template.

Two ways, chosen per model (akunu.tool_calls.model_tool_format):
- native: the template reads a `tools` variable and writes calls in a format akunu parses (Qwen
  2.5/3, Hermes, Llama 3.1+, Mistral templates). Tools go to the template as `tools`; the
  messages are given as Hugging Face templates expect them (arguments as objects, not JSON text).
- injected: the template knows nothing of tools (SmolLM2's ChatML). The format's block describing
  the tools and the call syntax joins the system prompt, earlier calls are written into the
  assistant turn as the model would write them, and tool results become a user turn wrapped in
  <tool_response>, so any template renders the conversation."""

from __future__ import annotations

import base64
import hashlib
import json
import re

from .tool_formats import MistralFormat, ToolFormat


def normalize_messages(messages) -> list[dict]:
    """OpenAI chat messages as chat templates take them: content as text (text parts joined,
    null content of an assistant turn with calls as ""), each call's arguments decoded to an
    object. ValueError naming the message and field when one is malformed."""
    if isinstance(messages, (str, bytes, dict)) or not hasattr(messages, "__iter__"):
        raise ValueError("messages must be a list of {'role': ..., 'content': ...} objects")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"{where} must be an object with a string 'role'")
        msg = dict(m)
        msg["content"] = _text_content(m.get("content"), where)
        calls = msg.pop("tool_calls", None)
        if calls:  # None or [] (as some clients send) mean no calls
            if m["role"] != "assistant":
                raise ValueError(f"{where}.tool_calls: only assistant messages carry tool calls")
            msg["tool_calls"] = [_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(_as_list(calls, where))]
        if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), str):
            raise ValueError(f"{where}.tool_call_id is required for a 'tool' message (the id of the call it answers)")
        out.append(msg)
    if not out:
        raise ValueError("messages is empty")
    return out


def _as_list(calls, where):
    if not isinstance(calls, (list, tuple)):
        raise ValueError(f"{where}.tool_calls must be a list")
    return calls


def _text_content(content, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         and isinstance(p.get("text"), str) for p in content):
        return "\n".join(p["text"] for p in content)
    raise ValueError(f"{where}.content must be a string or a list of text parts ({{'type': 'text', 'text': ...}})")


def _call(call, where: str) -> dict:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise ValueError(f"{where}.function.name is missing")
    args = fn.get("arguments", "{}")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise ValueError(f"{where}.function.arguments is not valid JSON: {args!r}") from None
    if not isinstance(args, dict):
        raise ValueError(f"{where}.function.arguments must be a JSON object, got {args!r}")
    call_id = call.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise ValueError(f"{where}.id must be a string")
    return {"id": call_id or "", "type": "function", "function": {"name": fn["name"], "arguments": args}}


def native_messages(fmt: ToolFormat, messages: list[dict]) -> list[dict]:
    """`messages` (normalized) for a template that handles tools itself. Mistral's templates
    accept only 9-character alphanumeric call ids: other ids are mapped to one, the same for a
    call and the result that answers it."""
    if not isinstance(fmt, MistralFormat):
        return messages
    out = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [dict(c, id=mistral_call_id(c["id"])) for c in m["tool_calls"]]
        if m["role"] == "tool":
            m["tool_call_id"] = mistral_call_id(m["tool_call_id"])
        out.append(m)
    return out


def mistral_call_id(call_id: str) -> str:
    """`call_id` as Mistral's templates want it: 9 letters or digits (a hash when it is not)."""
    if re.fullmatch(r"[A-Za-z0-9]{9}", call_id):
        return call_id
    digest = base64.b32encode(hashlib.sha256(call_id.encode()).digest()).decode()
    return digest[:9]


def injected_messages(fmt: ToolFormat, messages: list[dict], tools: list[dict] | None,
                      system_role: bool = True) -> list[dict]:
    """`messages` (normalized) as plain user / assistant / system text for a template without
    tool support: the tools block in the system prompt (or, with system_role False, at the top of
    the first user message), calls as the model writes them, results in a user turn."""
    out: list[dict] = []
    for m in messages:
        if m["role"] == "tool":
            result = fmt.render_results([m["content"]])
            if out and out[-1].get("_results"):  # consecutive results share one user turn
                out[-1]["content"] += "\n" + result
            else:
                out.append({"role": "user", "content": result, "_results": True})
            continue
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls", [])]
        m = {k: v for k, v in m.items() if k != "tool_calls"}
        if calls:
            m["content"] = (m["content"] + "\n" if m["content"] else "") + fmt.render_calls(calls)
        if m["role"] == "user" and out and out[-1].get("_results"):  # results then a question: one turn
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + m["content"]}
            continue
        out.append(m)
    out = [{k: v for k, v in m.items() if k != "_results"} for m in out]
    if tools:
        block = fmt.instructions(tools)
        if out[0]["role"] == "system":
            out[0] = dict(out[0], content=out[0]["content"] + "\n\n" + block)
        elif system_role:
            out.insert(0, {"role": "system", "content": block})
        else:
            first_user = next((i for i, m in enumerate(out) if m["role"] == "user"), 0)
            out[first_user] = dict(out[first_user], content=block + "\n\n" + out[first_user]["content"])
    return out
