"""The JSON Schema corpus (tests/data/json_schemas.json) that structured output (issue 34) is tested
and benchmarked on, checked without a model:

- the corpus itself: enough schemas, unique names, each a valid Draft 2020-12 schema whose `valid`
  examples validate and `invalid` ones don't (jsonschema, formats checked), covering the features
  applications send;
- llguidance accepts every corpus schema without warnings, and refuses every schema of
  json_schemas_unsupported.json with the expected message (so akunu can raise, never ignore);
- random walks through llguidance's token masks over the SmolLM2 vocabulary (tests/json_schema_walk.py)
  end in text that parses and validates: whatever the model picks among the allowed tokens, the
  output is valid;
- json_schemas_loose.json pins what llguidance accepts more or less than the schema says."""

from __future__ import annotations

import json
import re
from collections import Counter

import jsonschema
import llguidance
import pytest

from json_schema_walk import (DATA, LLGuidanceMatcher, format_checker, formats, keywords, known_format_leniency,
                              llguidance_grammar, llguidance_vocabulary, load_corpus, load_unsupported, object_depth,
                              validator, walk_with_retry)

CORPUS = load_corpus()
UNSUPPORTED = load_unsupported()
LOOSE = json.loads((DATA / "json_schemas_loose.json").read_text(encoding="utf-8"))
WALK_SEEDS = (0, 1, 2)


def _ids(entries):
    return [e["name"] for e in entries]


# --- the corpus ------------------------------------------------------------------------------------

def test_corpus_size_and_names():
    names = _ids(CORPUS)
    assert len(names) >= 110
    assert len(names) == len(set(names)), [n for n, c in Counter(names).items() if c > 1]
    for e in CORPUS:
        assert set(e) == {"name", "prompt", "schema", "valid", "invalid"}, e["name"]
        assert re.fullmatch(r"[a-z0-9_]+", e["name"]), e["name"]
        assert e["prompt"].strip() and e["valid"] and e["invalid"], e["name"]


def coverage() -> dict[str, list[str]]:
    """Feature -> names of the schemas using it."""
    def has(*kws):
        return lambda s: bool(keywords(s) & set(kws))

    def has_bounded_array(s):
        return bool(keywords(s) & {"minItems", "maxItems"})

    features = {
        "$ref": has("$ref"),
        "anyOf/oneOf": has("anyOf", "oneOf"),
        "pattern": has("pattern", "patternProperties"),
        "format": lambda s: bool(formats(s)),
        "enum": has("enum"),
        "const": has("const"),
        "arrays with minItems/maxItems": has_bounded_array,
        "nested objects 3+ deep": lambda s: object_depth(s) >= 3,
        "additionalProperties false": lambda s: '"additionalProperties": false' in json.dumps(s),
        "type unions": lambda s: '"type": [' in json.dumps(s),
        "numeric bounds": has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
        "multipleOf": has("multipleOf"),
        "string lengths": has("minLength", "maxLength"),
        "allOf": has("allOf"),
        "prefixItems": has("prefixItems"),
        "min/maxProperties": has("minProperties", "maxProperties"),
    }
    return {f: [e["name"] for e in CORPUS if pred(e["schema"])] for f, pred in features.items()}


def test_corpus_feature_coverage():
    cov = coverage()
    for feature in ("$ref", "anyOf/oneOf", "pattern", "format", "enum", "arrays with minItems/maxItems",
                    "nested objects 3+ deep"):
        assert len(cov[feature]) >= 10, (feature, cov[feature])
    for feature, names in cov.items():
        assert names, feature
    recursive = [e["name"] for e in CORPUS if any(
        isinstance(d, dict) and f'"$ref": "#/$defs/{k}"' in json.dumps(d)
        for k, d in e["schema"].get("$defs", {}).items())]
    assert len(recursive) >= 5, recursive


def test_every_format_is_checked():
    """jsonschema skips a format it has no checker for; every format the corpus uses must have one."""
    used = set().union(*(formats(e["schema"]) for e in CORPUS))
    assert used <= set(format_checker().checkers), used - set(format_checker().checkers)


@pytest.mark.parametrize("entry", CORPUS, ids=_ids(CORPUS))
def test_schema_and_examples(entry):
    jsonschema.Draft202012Validator.check_schema(entry["schema"])
    v = validator(entry["schema"])
    for instance in entry["valid"]:
        errors = [e.message for e in v.iter_errors(instance)]
        assert not errors, (instance, errors)
    for instance in entry["invalid"]:
        assert not v.is_valid(instance), instance


# --- llguidance accepts the corpus and refuses the unsupported schemas -------------------------------

@pytest.mark.parametrize("entry", CORPUS, ids=_ids(CORPUS))
def test_llguidance_accepts_without_warnings(entry):
    grammar = llguidance.LLMatcher.grammar_from_json_schema(entry["schema"], defaults={
        "whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "})
    assert llguidance.LLMatcher.validate_grammar_with_warnings(grammar) == (False, [])


def test_unsupported_file_shape():
    assert len(UNSUPPORTED) >= 8
    assert len(_ids(UNSUPPORTED)) == len(set(_ids(UNSUPPORTED)))
    for e in UNSUPPORTED:
        assert set(e) == {"name", "feature", "schema", "error"}, e["name"]


@pytest.mark.parametrize("entry", UNSUPPORTED, ids=_ids(UNSUPPORTED))
def test_llguidance_refuses_unsupported(entry):
    """Each is a valid 2020-12 schema that llguidance refuses with `error` in its message: akunu must
    raise for it, not generate while ignoring the feature."""
    jsonschema.Draft202012Validator.check_schema(entry["schema"])
    with pytest.raises(ValueError) as err:
        llguidance_grammar(entry["schema"])
    assert entry["error"] in str(err.value)


# --- random walks through the masks ----------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2_vocab(smollm2_path):
    import akunu

    tokenizer = akunu.Tokenizer.from_file(str(smollm2_path))
    return llguidance_vocabulary(tokenizer, tokenizer.vocab_size)


def check_output(text: bytes, v) -> tuple[list[str], list[str]]:
    """(errors, known llguidance leniencies) of one walk's output."""
    try:
        instance = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"not JSON: {e}"], []
    errors, lenient = [], []
    for err in v.iter_errors(instance):
        why = known_format_leniency(err.instance, err.schema["format"]) if err.validator == "format" else None
        (lenient if why else errors).append(why or f"{err.json_path}: {err.message}")
    return errors, lenient


def test_random_walks_yield_valid_json(smollm2_vocab):
    llt, vocab = smollm2_vocab
    failures, lenient, ends = [], Counter(), Counter()
    for entry in CORPUS:
        grammar = llguidance_grammar(entry["schema"])
        v = validator(entry["schema"])
        for seed in WALK_SEEDS:
            result = walk_with_retry(lambda: LLGuidanceMatcher(llt, grammar), vocab, seed)
            ends[result.end] += 1
            if result.end != "eos":
                failures.append((entry["name"], seed, result.end, result.text[:300]))
                continue
            errors, why = check_output(result.text, v)
            lenient.update(why)
            if errors:
                failures.append((entry["name"], seed, errors, result.text[:300]))
    print(f"\nwalk ends: {dict(ends)}; outputs outside the schema only by a known llguidance leniency: {dict(lenient)}")
    assert not failures, failures


# --- what llguidance accepts beyond (or short of) the schema ----------------------------------------

def test_loose_file_shape():
    for e in LOOSE:
        assert set(e) == {"name", "schema", "text", "llguidance_accepts", "jsonschema_valid", "note"}, e["name"]
        jsonschema.Draft202012Validator.check_schema(e["schema"])


@pytest.mark.parametrize("entry", LOOSE, ids=_ids(LOOSE))
def test_llguidance_leniency_pinned(entry, smollm2_vocab):
    """Each entry's text is where llguidance and the schema disagree (or a keyword llguidance drops
    without a word). The test fails when either side changes, so the list stays true."""
    llt, _ = smollm2_vocab
    matcher = llguidance.LLMatcher(llt, llguidance_grammar(entry["schema"]), log_level=0)
    accepted = matcher.consume_tokens(llt.tokenize_bytes(entry["text"].encode())) and matcher.is_accepting()
    assert accepted == entry["llguidance_accepts"]
    assert validator(entry["schema"]).is_valid(json.loads(entry["text"])) == entry["jsonschema_valid"]


def test_leniency_classifier():
    assert known_format_leniency("2023-02-29", "date") and not known_format_leniency("2024-02-29", "date")
    assert known_format_leniency("12:00:60Z", "time") and not known_format_leniency("12:00:59Z", "time")
    assert known_format_leniency("2100-02-29T00:00:00Z", "date-time")  # 2100 is not a leap year
    assert not known_format_leniency("2000-02-29T00:00:00Z", "date-time")  # 2000 is
    assert not known_format_leniency("2023-06-31", "date")
