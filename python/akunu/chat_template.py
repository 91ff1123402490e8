"""Rendering a model's chat template (the GGUF's tokenizer.chat_template, a Jinja2 template)."""

from __future__ import annotations

import datetime
import json
from functools import lru_cache

import jinja2
import jinja2.meta

from .template_sandbox import TemplateSandbox, TemplateTimeout
from .template_sandbox import render as render_bounded

def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Hugging Face's tojson, not Jinja's: keys in their order and <, >, & as they are (Jinja's sorts
    # keys and escapes them for HTML), so tool schemas and call arguments read as the model was trained.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _environment():
    # Sandboxed like Hugging Face's apply_chat_template (templates come from downloaded files), with
    # limits on time and memory (template_sandbox.py).
    env = TemplateSandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.add_filter("tojson", _tojson)
    return env


# What compiling or rendering a template may raise: TemplateError (syntax, undefined names,
# raise_exception, the sandbox's limits), anything its own code does (TypeError, ZeroDivisionError,
# OverflowError, ...), RecursionError (its macros, or its source nested too deeply), the deadline
# (TemplateTimeout, a BaseException). The arguments are checked before, so each is the template's
# fault and becomes a ValueError naming it.
_TEMPLATE_FAILURES = (Exception, TemplateTimeout)


def _failure(e: BaseException) -> str:
    if isinstance(e, (jinja2.exceptions.TemplateError, TemplateTimeout)) or type(e) is ValueError:
        return str(e)
    return f"{type(e).__name__}: {e}"


@lru_cache(maxsize=16)
def _compile_cached(template: str):
    return _environment().from_string(template)


def _compile(template: str):
    """The compiled template; ValueError (from its TemplateSyntaxError or the compiler's error) if
    it is not valid Jinja. Syntax errors keep their cause, for the line number."""
    try:
        return _compile_cached(template)
    except jinja2.exceptions.TemplateSyntaxError:
        raise
    except _TEMPLATE_FAILURES as e:
        raise ValueError(f"the chat template cannot be compiled: {_failure(e)}") from e


@lru_cache(maxsize=16)
def template_variables(template: str) -> frozenset:
    """The variables `template` reads from its caller (messages, add_generation_prompt, tools, ...):
    a template that reads `tools` renders tool definitions itself."""
    try:
        return frozenset(jinja2.meta.find_undeclared_variables(_environment().parse(template)))
    except _TEMPLATE_FAILURES as e:
        raise ValueError(f"the model's chat template failed: {_failure(e)}") from e


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


def render_chat(template: str, messages, bos_token: str, eos_token: str, add_generation_prompt: bool = True,
                tools: list[dict] | None = None) -> str:
    """The prompt text for `messages` in the format of `template` (see chat_templates.py for the
    built-in ones a model without a template gets). `tools` (OpenAI function definitions) is passed
    to the template as its `tools` variable, for templates that describe tools themselves
    (akunu.tool_calls decides); without it the variable is left undefined, as templates expect."""
    extra = {} if tools is None else {"tools": tools}
    variables = dict(messages=validate_messages(messages), add_generation_prompt=add_generation_prompt,
                     bos_token=bos_token, eos_token=eos_token, **extra)
    try:
        return render_bounded(_compile(template), variables)
    except _TEMPLATE_FAILURES as e:
        raise ValueError(f"the model's chat template failed: {_failure(e)}") from e


def check_template(template, bos_token: str = "<s>", eos_token: str = "</s>") -> str:
    """`template` (a chat_template= argument) if it is a Jinja string that renders a one-message
    conversation to text; ValueError naming the problem otherwise."""
    if not isinstance(template, str) or not template.strip():
        raise ValueError(f"chat_template must be a non-empty Jinja template string, got {template!r}")
    try:
        compiled = _compile(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise ValueError(f"chat_template is not a valid Jinja template: {e.message} (line {e.lineno})") from e
    messages = [{"role": "user", "content": "Hello"}]
    try:
        text = render_bounded(compiled, dict(messages=messages, add_generation_prompt=True,
                                             bos_token=bos_token, eos_token=eos_token))
    except _TEMPLATE_FAILURES as e:  # any error of the template's code: undefined names, raise_exception, ...
        raise ValueError(f"chat_template fails to render a conversation [{{'role': 'user', 'content': 'Hello'}}]: "
                         f"{type(e).__name__}: {e}") from e
    if "Hello" not in text:
        raise ValueError("chat_template renders a conversation [{'role': 'user', 'content': 'Hello'}] without "
                         f"the message's content: {text!r}")
    return template
