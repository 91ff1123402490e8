"""Random walks through a grammar engine's token masks: a model-free way to check that every output a
JSON Schema grammar lets through is JSON that the schema accepts.

A walk starts from a fresh matcher, asks for the mask of allowed tokens, picks one at random (seeded)
and feeds it back, until the engine allows an end-of-generation token and the walk decides to stop.
The choice depends only on the mask, the token bytes and the seed, so two engines that compute the
same masks walk the same path (benchmarks/grammar_engines.py times both on the same walks).

Uniform picks would wander for thousands of tokens inside a string, so the walk "closes": from
`close_after` steps on (and on a random quarter of the steps before), it prefers tokens that end
what is open: a closing quote inside a string; `}` or `]`, then `,` outside one; then single-byte
tokens. The engine still decides what is allowed, so the bias never makes an output valid.

Used by tests/test_json_schema_corpus.py and benchmarks/grammar_engines.py."""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path

import jsonschema
import numpy as np

from akunu import json_schema_keywords

DATA = Path(__file__).resolve().parent / "data"
CORPUS_PATH = DATA / "json_schemas.json"
UNSUPPORTED_PATH = DATA / "json_schemas_unsupported.json"

# The JSON layout akunu asks for: compact, with a space after ',' and ':' (what models write).
LLGUIDANCE_JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def load_corpus() -> list[dict]:
    return json.loads(CORPUS_PATH.read_text(encoding="utf-8"))


def load_unsupported() -> list[dict]:
    return json.loads(UNSUPPORTED_PATH.read_text(encoding="utf-8"))


# --- format checking -------------------------------------------------------------------------------
# jsonschema checks only the formats whose optional packages are installed (uri needs rfc3987,
# hostname fqdn, date-time and time rfc3339-validator) and silently passes the others. The corpus's
# formats must all be checked, so the missing ones get small stand-ins (RFC 3339 / 3986 / 1123).

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s\"<>\\^`{|}]*$")
_HOSTNAME_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_TIME = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")


def _check_uri(s: object) -> bool:
    return not isinstance(s, str) or bool(_URI.match(s))


def _check_hostname(s: object) -> bool:
    if not isinstance(s, str):
        return True
    return 0 < len(s) <= 253 and all(_HOSTNAME_LABEL.match(label) for label in s.split("."))


def _check_time(s: object) -> bool:
    return not isinstance(s, str) or bool(_TIME.match(s))


def _check_date_time(s: object) -> bool:
    if not isinstance(s, str):
        return True
    d, sep, t = s.partition("T") if "T" in s else s.partition("t")
    if not sep or not _check_time(t):
        return False
    try:
        date.fromisoformat(d)
    except ValueError:
        return False
    return len(d) == 10


def format_checker() -> jsonschema.FormatChecker:
    """jsonschema's format checks, completed for every format the corpus uses."""
    # A bare FormatChecker() mixes the drafts' checkers (its "time" is draft 3's "%H:%M:%S"): start
    # from the 2020-12 validator's own.
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
    fallbacks = {"uri": _check_uri, "hostname": _check_hostname, "time": _check_time, "date-time": _check_date_time}
    for name, fn in fallbacks.items():
        if name not in checker.checkers:
            checker.checks(name)(fn)
    return checker


def _decimal_multiple_of(validator, multiple, instance, schema):
    # jsonschema divides floats: 524753.45 / 0.01 is not an integer in binary, so it calls a valid
    # amount invalid. The decimal digits as written decide here.
    if validator.is_type(instance, "number") and not isinstance(instance, bool):
        if Decimal(repr(instance)) % Decimal(repr(multiple)) != 0:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {multiple!r}")


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"multipleOf": _decimal_multiple_of})


def validator(schema: dict) -> jsonschema.protocols.Validator:
    """Draft 2020-12 with every corpus format checked and multipleOf decided in decimal."""
    return _Validator(schema, format_checker=format_checker())


def known_format_leniency(value, fmt: str) -> str | None:
    """Why llguidance's format regexes let `value` through though the format rejects it, if that is a
    known leniency (tests/data/json_schemas_loose.json pins both): a leap second (":60") at any time
    of day, and February 29 in any year."""
    if not isinstance(value, str):
        return None
    m = re.match(r"^(\d{4})-02-29", value) if fmt in ("date", "date-time") else None
    if m:
        year = int(m.group(1))
        if not (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)):
            return "February 29 in a common year"
    if fmt in ("time", "date-time") and re.search(r"\d\d:\d\d:60", value):
        return "leap second"
    return None


def explained_by_leniency(err: jsonschema.ValidationError) -> bool:
    """Whether a validation error is one of the known leniencies: a format error, or an anyOf / oneOf
    failure of which some branch fails only by them."""
    if err.validator == "format":
        return known_format_leniency(err.instance, err.schema["format"]) is not None
    if err.validator in ("anyOf", "oneOf") and err.context:
        branches: dict = {}
        for sub in err.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        return any(all(explained_by_leniency(sub) for sub in subs) for subs in branches.values())
    return False


def unexplained_errors(schema: dict, instance) -> list[str]:
    """The messages of `instance`'s validation errors against `schema` that no known leniency explains."""
    return [f"{err.json_path}: {err.message}" for err in validator(schema).iter_errors(instance)
            if not explained_by_leniency(err)]


# --- schema structure (coverage counts) ------------------------------------------------------------

def subschemas(node):
    """The schema nodes directly inside `node` (never property names or other data): the package's
    own walk (akunu.json_schema_keywords), boolean schemas left out."""
    if isinstance(node, dict):
        yield from (sub for _, sub in json_schema_keywords.subschemas(node) if isinstance(sub, dict))


def keywords(schema) -> set[str]:
    """Every keyword used anywhere in `schema`."""
    out: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.update(node)
            stack.extend(subschemas(node))
    return out


def formats(schema) -> set[str]:
    out: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("format"), str):
                out.add(node["format"])
            stack.extend(subschemas(node))
    return out


def object_depth(schema, root=None, seen=()) -> int:
    """How many objects nest inside each other (through arrays, unions and local $refs; a recursive
    $ref counts once)."""
    root = schema if root is None else root
    if not isinstance(schema, dict):
        return 0
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
        target = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        base = object_depth(target, root, seen + (ref,))
    else:
        base = 0
    is_object = any(k in schema for k in ("properties", "patternProperties")) or (
        isinstance(schema.get("additionalProperties"), dict))
    inner = max((object_depth(s, root, seen) for s in subschemas(schema)), default=0)
    return max(base, inner + (1 if is_object else 0))


# --- the walk --------------------------------------------------------------------------------------

class Vocabulary:
    """Token bytes and end-of-generation ids, with the per-token facts the walk's choice reads."""

    def __init__(self, tokens: list[bytes], eog_ids: list[int]):
        self.tokens = tokens
        self.n = len(tokens)
        self.eog_ids = list(eog_ids)
        self.words = (self.n + 31) // 32
        self.is_eog = np.zeros(self.n, dtype=bool)
        self.is_eog[self.eog_ids] = True
        first = np.array([t[0] if t else 0 for t in tokens], dtype=np.int16)
        length = np.array([len(t) for t in tokens])
        self.starts_quote = first == ord('"')
        self.starts_close = (first == ord("}")) | (first == ord("]"))
        self.starts_comma = first == ord(",")
        self.single_byte = length == 1


@dataclass
class WalkResult:
    tokens: list[int] = field(default_factory=list)
    text: bytes = b""
    end: str = ""            # "eos" (stopped by an end-of-generation token), "cap", "dead-end", "rejected"
    mask_s: list[float] = field(default_factory=list)     # seconds per mask computation
    consume_s: list[float] = field(default_factory=list)  # seconds per token fed back


def _in_string_after(data: bytes, in_string: bool, escaped: bool) -> tuple[bool, bool]:
    """JSON lexer state (inside a string? after a backslash?) after `data`."""
    for b in data:
        if escaped:
            escaped = False
        elif in_string and b == 0x5C:  # backslash
            escaped = True
        elif b == 0x22:  # quote
            in_string = not in_string
    return in_string, escaped


def walk(matcher, vocab: Vocabulary, seed: int, max_steps: int = 400, close_after: int = 40,
         p_close: float = 0.25) -> WalkResult:
    """One random walk. `matcher` has fill(mask: np.ndarray[int32]) (bit i of word i // 32 set: token i
    allowed) and consume(token) -> bool."""
    rng = random.Random(seed)
    mask = np.zeros(vocab.words, dtype=np.int32)
    bytes_view = mask.view(np.uint8)
    out = WalkResult()
    in_string = escaped = False
    for step in range(max_steps):
        t0 = time.perf_counter()
        matcher.fill(mask)
        out.mask_s.append(time.perf_counter() - t0)
        allowed_bits = np.unpackbits(bytes_view, bitorder="little")[: vocab.n].astype(bool)
        closing = step >= close_after or rng.random() < p_close
        eog_allowed = bool(allowed_bits[vocab.is_eog].any())
        allowed_bits &= ~vocab.is_eog
        if eog_allowed and (closing or not allowed_bits.any()):
            eog = next(i for i in vocab.eog_ids if (mask[i // 32] >> (i % 32)) & 1)
            out.end = "eos" if matcher.consume(eog) else "rejected"
            break
        if not allowed_bits.any():
            out.end = "dead-end"
            break
        choice = allowed_bits
        if closing:
            prefs = ([vocab.starts_quote] if in_string and not escaped else
                     [vocab.starts_close, vocab.starts_comma]) + [vocab.single_byte]
            for pref in prefs:
                if (allowed_bits & pref).any():
                    choice = allowed_bits & pref
                    break
        candidates = np.flatnonzero(choice)
        token = int(candidates[rng.randrange(len(candidates))])
        t0 = time.perf_counter()
        ok = matcher.consume(token)
        out.consume_s.append(time.perf_counter() - t0)
        if not ok:
            out.end = "rejected"
            break
        out.tokens.append(token)
        piece = vocab.tokens[token]
        out.text += piece
        in_string, escaped = _in_string_after(piece, in_string, escaped)
    else:
        out.end = "cap"
    return out


def walk_with_retry(make_matcher, vocab: Vocabulary, seed: int, max_steps: int = 400) -> WalkResult:
    """A walk; if it hits the step cap, one more from a fresh matcher that closes from the start."""
    result = walk(make_matcher(), vocab, seed, max_steps=max_steps)
    if result.end == "cap":
        retry = walk(make_matcher(), vocab, seed, max_steps=max_steps, close_after=0)
        retry.mask_s = result.mask_s + retry.mask_s
        retry.consume_s = result.consume_s + retry.consume_s
        result = retry
    return result


# --- engines ---------------------------------------------------------------------------------------

class LLGuidanceMatcher:
    """llguidance's matcher behind the walk's fill/consume interface."""

    def __init__(self, llt, grammar: str):
        import llguidance

        self.m = llguidance.LLMatcher(llt, grammar, log_level=0)
        if self.m.is_error():
            raise ValueError(self.m.get_error())

    def fill(self, mask: np.ndarray) -> None:
        self.m.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)

    def consume(self, token: int) -> bool:
        return self.m.consume_token(token)


def llguidance_grammar(schema: dict) -> str:
    """The llguidance grammar for `schema` with akunu's JSON layout; ValueError if llguidance refuses it."""
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=LLGUIDANCE_JSON_OPTIONS)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    if is_error:
        raise ValueError(messages[0])
    return grammar


def grammar_vocabulary(tokenizer, n_vocab: int) -> Vocabulary:
    """The token bytes exactly as akunu.grammar_tokenizer hands them to llguidance (special tokens
    prefixed with 0xFF, padding rows empty) and the end-of-generation ids."""
    from akunu.grammar_tokenizer import VocabularyView, end_of_generation_ids

    return Vocabulary(VocabularyView(tokenizer, n_vocab).tokens, end_of_generation_ids(tokenizer))


def llguidance_vocabulary(tokenizer, n_vocab: int):
    """(llguidance.LLTokenizer, Vocabulary) for an akunu tokenizer."""
    from akunu.grammar_tokenizer import grammar_tokenizer

    return grammar_tokenizer(tokenizer, n_vocab), grammar_vocabulary(tokenizer, n_vocab)
