"""Rendering a model's chat template (the GGUF's tokenizer.chat_template, a Jinja2 template)."""

from __future__ import annotations

import datetime
from functools import lru_cache

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


@lru_cache(maxsize=16)
def _compile(template: str):
    # Sandboxed like Hugging Face's apply_chat_template: templates come from downloaded files.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(template)


def validate_messages(messages) -> list[dict]:
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise ValueError("messages must be a list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content'")
        if not isinstance(m["role"], str) or not isinstance(m["content"], str):
            raise ValueError(f"message {i}: 'role' and 'content' must be strings")
        out.append(dict(m))
    if not out:
        raise ValueError("messages is empty")
    return out


def render_chat(template: str, messages, bos_token: str, eos_token: str, add_generation_prompt: bool = True) -> str:
    """The prompt text for `messages` in the format of `template` (see chat_templates.py for the
    built-in ones a model without a template gets)."""
    try:
        return _compile(template).render(
            messages=validate_messages(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
        )
    except jinja2.exceptions.TemplateError as e:
        raise ValueError(f"the model's chat template failed: {e}") from e


def check_template(template, bos_token: str = "<s>", eos_token: str = "</s>") -> str:
    """`template` (a chat_template= argument) if it is a Jinja string that renders a one-message
    conversation to text; ValueError naming the problem otherwise."""
    if not isinstance(template, str) or not template.strip():
        raise ValueError(f"chat_template must be a non-empty Jinja template string, got {template!r}")
    try:
        _compile(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise ValueError(f"chat_template is not a valid Jinja template: {e.message} (line {e.lineno})") from e
    messages = [{"role": "user", "content": "Hello"}]
    try:
        text = _compile(template).render(messages=messages, add_generation_prompt=True,
                                         bos_token=bos_token, eos_token=eos_token)
    except Exception as e:  # any error of the template's code: undefined names, raise_exception, ...
        raise ValueError(f"chat_template fails to render a conversation [{{'role': 'user', 'content': 'Hello'}}]: "
                         f"{type(e).__name__}: {e}") from e
    if "Hello" not in text:
        raise ValueError("chat_template renders a conversation [{'role': 'user', 'content': 'Hello'}] without "
                         f"the message's content: {text!r}")
    return template
