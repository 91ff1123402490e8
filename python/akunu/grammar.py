"""akunu.Grammar: structured output. A grammar limits which tokens the model may choose at each
step, so the text it generates is always in the grammar's language: JSON that validates against a
schema, a string a GBNF grammar or a regular expression accepts, one of a fixed set of choices.

    from akunu import Model, Grammar
    model = Model("SmolLM2-135M-Instruct.Q4_1.gguf")
    person = Grammar.json_schema({"type": "object", "properties": {"name": {"type": "string"}},
                                  "required": ["name"]})
    model.chat([{"role": "user", "content": "Invent a person."}], grammar=person)   # '{"name": "Ada"}'

The grammar engine is llguidance (docs/adr/0016-grammar-engine.md): it compiles a grammar against
the model's vocabulary and computes each step's allowed-token mask on the CPU while the device
runs the forward pass; the device applies the mask before its argmax or sampler
(Model.choose_token in the engine). Compiled grammars are cached per model (GrammarCompiler)."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import llguidance
from llguidance import LLMatcher

from ._core import AkunuError
from .grammar_tokenizer import grammar_tokenizer
from .json_schema_keywords import check_keywords, with_format_bounds


class GrammarError(AkunuError, ValueError):
    """An invalid grammar or schema, or a feature the grammar engine cannot enforce; the message
    names the position (line and column) or the keyword."""


# JSON as most models write it and Python's json.dumps prints it: ", " and ": " between items, no
# other whitespace (a model allowed any whitespace can wander into newlines forever).
_JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


@dataclass(frozen=True)
class Grammar:
    """A grammar for generate / stream / chat / generate_tokens (grammar=...). Make one with
    Grammar.json_schema, Grammar.json, Grammar.gbnf, Grammar.lark, Grammar.regex or Grammar.choice;
    each checks its input at once and raises GrammarError naming what is wrong.

    - kind: "json_schema", "json", "gbnf", "lark", "regex" or "choice".
    - source: the schema (as JSON text), grammar or pattern as given.
    - trigger_text: None, or text that must appear before the grammar starts (with_trigger_text).
    """

    kind: str
    source: str
    trigger_text: Optional[str] = None
    definition: str = field(default="", repr=False)  # for llguidance: its grammar JSON, or Lark text

    def __post_init__(self):
        if not self.definition:
            raise TypeError("make a Grammar with Grammar.json_schema, json, gbnf, lark, regex or choice")

    # --- constructors --------------------------------------------------------------------------

    @classmethod
    def json_schema(cls, schema: Any, *, any_whitespace: bool = False) -> "Grammar":
        """JSON that validates against `schema`: a dict, JSON text, or a pydantic model class.
        The layout is json.dumps's (", " and ": ", no newlines) unless any_whitespace=True.
        Keywords the engine cannot enforce (if/then/else, uniqueItems, ...), unknown keywords (a
        misspelling, OpenAPI's nullable) and format on numbers raise GrammarError: a schema is never
        enforced only in part."""
        if isinstance(schema, type) and hasattr(schema, "model_json_schema"):  # pydantic v2 model
            schema = schema.model_json_schema()
        if isinstance(schema, (str, bytes)):
            try:
                schema = json.loads(schema)
            except ValueError as e:
                raise GrammarError(f"the JSON schema is not valid JSON: {e}") from None
        if not isinstance(schema, (dict, bool)):
            raise GrammarError(f"a JSON schema must be a dict, JSON text or a pydantic model class, got "
                               f"{type(schema).__name__}")
        _check_schema(schema)
        try:
            check_keywords(schema)
        except ValueError as e:
            raise GrammarError(f"invalid JSON schema at {e}") from None
        source = json.dumps(schema, sort_keys=True)
        layout = {"whitespace_flexible": True} if any_whitespace else _JSON_LAYOUT
        try:
            definition = LLMatcher.grammar_from_json_schema(with_format_bounds(schema), defaults=layout)
        except ValueError as e:
            raise GrammarError(f"invalid JSON schema: {e}") from None
        return cls._checked("json_schema", source, definition)

    @classmethod
    def json(cls, *, any_value: bool = False) -> "Grammar":
        """Any JSON object (JSON mode), or any JSON value with any_value=True."""
        return cls.json_schema({} if any_value else {"type": "object"})._renamed("json")

    @classmethod
    def gbnf(cls, text: str) -> "Grammar":
        """A grammar in llama.cpp's GBNF (`root ::= ...`), e.g. one from llama.cpp's grammars/ folder."""
        _check_text("GBNF grammar", text)
        try:
            definition = llguidance.grammar_from("gbnf", text)
        except ValueError as e:
            raise GrammarError(f"invalid GBNF grammar: {_strip_prefix(str(e))}") from None
        return cls._checked("gbnf", text, definition)

    @classmethod
    def lark(cls, text: str) -> "Grammar":
        """A grammar in llguidance's Lark syntax (`start: ...`, regular expressions as /.../)."""
        _check_text("Lark grammar", text)
        return cls._checked("lark", text, LLMatcher.grammar_from_lark(text))

    @classmethod
    def regex(cls, pattern: str) -> "Grammar":
        """Text that matches `pattern` in full (Rust regex syntax, which is Python's for the common
        constructs; no backreferences or lookaround)."""
        _check_text("regular expression", pattern)
        return cls._checked("regex", pattern, LLMatcher.grammar_from_regex(pattern))

    @classmethod
    def choice(cls, options: Iterable[str]) -> "Grammar":
        """Exactly one of `options` (non-empty strings)."""
        if isinstance(options, str):
            raise GrammarError("choice() takes a list of strings, not one string")
        options = list(options)
        if not options or not all(isinstance(o, str) and o for o in options):
            raise GrammarError(f"choice() needs one or more non-empty strings, got {options!r}")
        lark = "start: " + " | ".join(json.dumps(o, ensure_ascii=False) for o in dict.fromkeys(options))
        return cls._checked("choice", json.dumps(options, ensure_ascii=False), LLMatcher.grammar_from_lark(lark))

    def with_trigger_text(self, text: str) -> "Grammar":
        """This grammar, starting only after `text` (deferred activation, as the book's
        set_trigger_text): for reasoning models, Grammar.json_schema(s).with_trigger_text("</think>")
        leaves the thinking free and constrains what follows its first "</think>" (whitespace
        between the two is allowed)."""
        _check_text("trigger text", text)
        if self.trigger_text is not None:
            raise GrammarError("this grammar already has a trigger text")
        inner = _grammar_list(self.definition)
        if len(inner) != 1:
            raise GrammarError("with_trigger_text takes a grammar made by one of Grammar's constructors")
        # The free text is lazy: it ends at the first occurrence of the trigger.
        lark = (f"start: free_text trigger_gap @constrained\n"
                f"free_text[lazy]: /(?s:.*)/ {json.dumps(text, ensure_ascii=False)}\n"
                f"trigger_gap: /[ \\t\\r\\n]*/")
        definition = json.dumps({"grammars": [{"lark_grammar": lark}, dict(inner[0], name="constrained")]})
        return Grammar._checked(self.kind, self.source, definition, trigger_text=text)

    # --- helpers -------------------------------------------------------------------------------

    @classmethod
    def _checked(cls, kind: str, source: str, definition: str, trigger_text: Optional[str] = None) -> "Grammar":
        is_error, messages = LLMatcher.validate_grammar_with_warnings(definition)
        if is_error:
            raise GrammarError(f"invalid {_KIND_NAMES[kind]}: {messages[0].strip()}")
        return cls(kind, source, trigger_text, definition)

    def _renamed(self, kind: str) -> "Grammar":
        return Grammar(kind, self.source, self.trigger_text, self.definition)

    def __repr__(self) -> str:
        source = self.source if len(self.source) <= 60 else self.source[:57] + "..."
        trigger = f", trigger_text={self.trigger_text!r}" if self.trigger_text is not None else ""
        return f"Grammar.{self.kind}({source!r}{trigger})"


_KIND_NAMES = {"json_schema": "JSON schema", "json": "JSON schema", "gbnf": "GBNF grammar", "lark": "Lark grammar",
               "regex": "regular expression", "choice": "choice"}


def _grammar_list(definition: str) -> list[dict]:
    """The grammars of an llguidance definition: JSON ({"grammars": [...]}), or Lark text."""
    try:
        return json.loads(definition)["grammars"]
    except ValueError:
        return [{"lark_grammar": definition}]


def _check_text(what: str, text: Any) -> None:
    if not isinstance(text, str) or not text:
        raise GrammarError(f"the {what} must be a non-empty string, got {text!r}")


def _strip_prefix(message: str) -> str:
    return message.removeprefix("Failed to convert the grammar from GBNF to Lark: ")


def _check_schema(schema: Any) -> None:
    """The schema against the JSON Schema meta-schema (the draft it names, else 2020-12), so that
    a misspelt type or a malformed keyword is reported by its path."""
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise GrammarError(f"invalid JSON schema at {where}: {e.message}") from None


class GrammarCompiler:
    """A model's grammar engine: its vocabulary as llguidance sees it (built on first use, ~0.2 s
    for 50k tokens) and the grammars compiled against it, the most recent `capacity` kept, so a
    schema sent again costs nothing."""

    def __init__(self, tokenizer, n_vocab: int, capacity: int = 64):
        self._tokenizer = tokenizer
        self._n_vocab = n_vocab
        self._capacity = capacity
        self._ll_tokenizer: Optional[llguidance.LLTokenizer] = None
        self._compiled: OrderedDict[str, LLMatcher] = OrderedDict()

    @property
    def ll_tokenizer(self) -> llguidance.LLTokenizer:
        if self._ll_tokenizer is None:
            self._ll_tokenizer = grammar_tokenizer(self._tokenizer, self._n_vocab)
        return self._ll_tokenizer

    def matcher(self, grammar: Grammar) -> LLMatcher:
        """A fresh matcher for `grammar` at its start (a copy of the cached compiled one)."""
        if not isinstance(grammar, Grammar):
            raise TypeError(f"grammar must be an akunu.Grammar, got {grammar!r}")
        compiled = self._compiled.get(grammar.definition)
        if compiled is None:
            compiled = LLMatcher(self.ll_tokenizer, grammar.definition, log_level=0)
            if compiled.is_error():
                raise GrammarError(f"the {_KIND_NAMES[grammar.kind]} does not compile for this model's vocabulary: "
                                   f"{compiled.get_error()}")
            self._compiled[grammar.definition] = compiled
            if len(self._compiled) > self._capacity:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(grammar.definition)
        return compiled.deep_copy()
