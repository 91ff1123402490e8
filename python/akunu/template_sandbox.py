"""The Jinja environment chat templates run in, and the limits that keep a hostile template (a
GGUF's tokenizer.chat_template, a downloaded tokenizer_config.json) from hanging or exhausting
the process (docs/adr/0022-fuzzing-untrusted-inputs.md).

Jinja's ImmutableSandboxedEnvironment (what Hugging Face's apply_chat_template uses) already
blocks attribute tricks, mutation and ranges over 100,000 items; it does not bound time or memory:
``{{ "x" * 10**10 }}``, ``{{ 9 ** 9 ** 9 }}``, a doubling ``~`` in a loop or two nested loops of
100,000 all run until the machine gives out. ``TemplateSandbox`` adds:

* a size check before every step that can build a large value from small ones: ``*``, ``**``, ``+``,
  ``%`` and ``~``, the padding / joining / replacing str methods and filters, and ``str.format``
  widths: no value over MAX_VALUE_CHARS characters (items, for lists);
* a per-render budget: the characters all those steps build and the output, together, at most
  RENDER_CHAR_BUDGET (a template cannot keep many large values alive either);
* a deadline: a render running past RENDER_SECONDS is interrupted.

Each limit raises jinja2.exceptions.SecurityError (a TemplateError); akunu.chat_template turns it
into ValueError. Real templates stay far below every limit.
"""

from __future__ import annotations

import contextvars
import ctypes
import math
import re
import string
import threading
from collections.abc import Sized

from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_VALUE_CHARS = 1 << 24        # 16M characters (or items) in any one value a template builds
RENDER_CHAR_BUDGET = 1 << 26     # 64M characters built and output by one render, in all
MAX_COUNT_ARGUMENT = 1 << 20     # widths and counts passed to str methods and filters
MAX_INT_BITS = 1 << 16           # ** results: integers of at most 65536 bits
MAX_JSON_INDENT = 16
RENDER_SECONDS = 5.0

# str methods whose result can outgrow their inputs, and the size bound of each (before the call).
_PADDING_METHODS = ("center", "ljust", "rjust", "zfill")


class TemplateTimeout(BaseException):
    """Raised inside a render that ran past its deadline (see render). A BaseException, like
    KeyboardInterrupt: an ``except Exception`` in Jinja or a filter must not swallow it."""


class _Budget:
    def __init__(self, chars: int):
        self.left = chars


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("akunu_template_budget", default=None)


def _refuse(what: str) -> None:
    raise SecurityError(f"the template {what} (limits of akunu.template_sandbox)")


def check_size(chars: int, what: str) -> None:
    """Refuses a value of `chars` characters before it is built, and charges it to the render's budget."""
    if chars > MAX_VALUE_CHARS:
        _refuse(f"builds a value of {chars} characters with {what}, over {MAX_VALUE_CHARS}")
    budget = _budget.get()
    if budget is not None:
        budget.left -= chars
        if budget.left < 0:
            _refuse(f"builds more than {RENDER_CHAR_BUDGET} characters in one render")


def _length(value) -> int:
    return len(value) if isinstance(value, Sized) else len(str(value))


def _check_count(value, what: str) -> None:
    if isinstance(value, int) and value > MAX_COUNT_ARGUMENT:
        _refuse(f"passes {value} to {what}, over {MAX_COUNT_ARGUMENT}")


# printf-style conversions: %[(key)][flags][width][.precision]type
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_percent_format(fmt: str, what: str) -> None:
    widths = 0
    for width, precision in _PERCENT_SPEC.findall(fmt):
        if "*" in (width, precision):
            _refuse(f"uses a '*' width in {what}")
        widths += int(width or 0) + int(precision or 0)
    check_size(len(fmt) + widths, what)


_FORMAT_WIDTH = re.compile(r"(\d+)")


def _check_brace_format(fmt: str) -> None:
    widths = 0
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format will raise the same ValueError
    for _, _, spec, _ in fields:
        if spec and "{" in spec:
            _refuse("uses a nested width in str.format")
        widths += sum(int(n) for n in _FORMAT_WIDTH.findall(spec or ""))
    check_size(len(fmt) + widths, "str.format")


def _check_binop(operator: str, left, right) -> None:
    sequences = (str, list, tuple)
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, sequences) and isinstance(n, int):
                check_size(len(seq) * max(n, 0), "'*'")
    elif operator == "+":
        if isinstance(left, sequences) and isinstance(right, sequences):
            check_size(len(left) + len(right), "'+'")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            if right * math.log2(abs(left)) > MAX_INT_BITS:
                _refuse(f"computes {left} ** {right}, an integer over {MAX_INT_BITS} bits")
    elif operator == "%" and isinstance(left, str):
        _check_percent_format(left, "'%'")


def _check_str_method(text: str, name: str, args: tuple, kwargs: dict) -> None:
    for value in (*args, *kwargs.values()):
        _check_count(value, f"str.{name}")
    if name in _PADDING_METHODS and args and isinstance(args[0], int):
        check_size(max(len(text), args[0]), f"str.{name}")
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        check_size(len(text) * max(tabsize if isinstance(tabsize, int) else 8, 1), "str.expandtabs")
    elif name == "join" and args:
        items = list(args[0]) if not isinstance(args[0], Sized) else args[0]
        check_size(sum(_length(x) for x in items) + len(text) * max(len(items) - 1, 0), "str.join")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        old, new = args[0], args[1]
        hits = len(text) + 1 if not old else len(text) // len(old)
        check_size(len(text) + hits * max(len(new) - len(old), 0), "str.replace")


# Filters that can build large values from small arguments: each checked before it runs.
def _check_filter(name: str, value, args: tuple, kwargs: dict):
    """Checks a filter call; returns the value to pass on (an iterator made a list, to be measured)."""
    for arg in (*args, *kwargs.values()):
        _check_count(arg, f"the '{name}' filter")
    text = value if isinstance(value, str) else None
    if name == "center" and text is not None:
        check_size(max(len(text), args[0] if args and isinstance(args[0], int) else 80), "'center'")
    elif name == "indent" and text is not None:
        width = args[0] if args else kwargs.get("width", 4)
        check_size(len(text) + (text.count("\n") + 1) * _length(width), "'indent'")
    elif name == "wordwrap" and text is not None:
        width = args[0] if args else kwargs.get("width", 79)
        wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring") or "\n"
        breaks = len(text) // max(width if isinstance(width, int) else 79, 1) + text.count("\n") + 1
        check_size(len(text) + breaks * _length(wrap), "'wordwrap'")
    elif name == "format" and text is not None:
        _check_percent_format(text, "the 'format' filter")
    elif name == "join":
        value = list(value) if not isinstance(value, Sized) else value
        sep = args[0] if args else kwargs.get("d", "")
        check_size(sum(_length(x) for x in value) + _length(sep) * max(len(value) - 1, 0), "'join'")
    elif name == "replace" and text is not None and len(args) >= 2:
        _check_str_method(text, "replace", args[:2], {})
    elif name == "tojson":  # Jinja's (value, indent) and Hugging Face's (value, ensure_ascii, indent, ...)
        for indent in (*args, *kwargs.values()):
            if isinstance(indent, int) and indent > MAX_JSON_INDENT:
                _refuse(f"asks tojson for an indent of {indent}, over {MAX_JSON_INDENT}")
    return value


def _bounded_filter(name: str, original):
    # Jinja passes the context / environment first to filters marked for it (jinja_pass_arg).
    passes_first = hasattr(original, "jinja_pass_arg")

    def bounded(*call_args, **kwargs):
        head = call_args[:1] if passes_first else ()
        value, args = call_args[len(head)], call_args[len(head) + 1:]
        value = _check_filter(name, value, args, kwargs)
        return original(*head, value, *args, **kwargs)

    bounded.__name__ = getattr(original, "__name__", name)
    if passes_first:
        bounded.jinja_pass_arg = original.jinja_pass_arg
    return bounded


_CHECKED_FILTERS = ("center", "indent", "wordwrap", "format", "join", "replace", "tojson", "batch", "slice",
                    "truncate")


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles ``~`` (string concatenation) through TemplateSandbox.bounded_concat: the sandbox
    has no hook for it, and doubling a string with ``~`` in a loop is the cheapest way to grow one."""

    def visit_Concat(self, node, frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class TemplateSandbox(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment with size limits on what a template builds (module docstring)."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset(["*", "**", "+", "%"])

    def __init__(self, **options):
        super().__init__(**options)
        self.globals.pop("lipsum", None)  # lorem ipsum of any length: no chat template needs it
        for name in _CHECKED_FILTERS:
            if name in self.filters:
                self.add_filter(name, self.filters[name])

    def add_filter(self, name: str, function) -> None:
        """Installs a filter, with the checks of the built-in one of that name."""
        self.filters[name] = _bounded_filter(name, function) if name in _CHECKED_FILTERS else function

    def call_binop(self, context, operator, left, right):
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (Jinja's own spelling)
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            _check_str_method(owner, getattr(__obj, "__name__", ""), args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value):
        wrapper = super().wrap_str_format(value)
        if wrapper is not None:
            _check_brace_format(value.__self__)
        return wrapper

    def bounded_concat(self, parts) -> str:
        texts = [str(p) for p in parts]
        check_size(sum(map(len, texts)), "'~'")
        return "".join(texts)


# ---- one render: budget, output limit and deadline ----

def _interrupt(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(TemplateTimeout))


def _cancel_interrupt(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


def render(template, variables: dict) -> str:
    """`template` (compiled by a TemplateSandbox) rendered with `variables` within the budget and
    the deadline. Raises SecurityError for a limit, TemplateTimeout past RENDER_SECONDS."""
    # Python code cannot be stopped from outside except by raising in its thread: a timer raises
    # TemplateTimeout there (checked between bytecodes; each step of a render is short, the size
    # limits see to that). The lock keeps the timer from firing once the render has finished.
    thread_id = threading.get_ident()
    state = {"running": True, "fired": False}
    lock = threading.Lock()

    def expire() -> None:
        with lock:
            if state["running"]:
                state["fired"] = True
                _interrupt(thread_id)

    timer = threading.Timer(RENDER_SECONDS, expire)
    token = _budget.set(_Budget(RENDER_CHAR_BUDGET))
    try:
        timer.start()
        try:
            chunks = []
            for chunk in template.generate(**variables):
                check_size(len(chunk), "its output")
                chunks.append(chunk)
            return "".join(chunks)
        finally:
            timer.cancel()
            with lock:
                state["running"] = False
                if state["fired"]:
                    _cancel_interrupt(thread_id)  # raised or not, nothing is left pending
    except TemplateTimeout:
        raise TemplateTimeout(f"the template ran longer than {RENDER_SECONDS:g} s") from None
    finally:
        _budget.reset(token)
