"""akunu.Grammar and grammar-constrained generation on the CPU backend.

The engine's constrained session (choose_token / feed) is checked against what it must equal: with
every token allowed, the tokens of plain greedy or sampled generation (the sampler's noise depends
on the position alone, so feeding tokens one by one or as a prefill pass draws the same ones); with
a mask, the argmax of the teacher-forced logits over the allowed tokens. The grammars are checked
by independent judges: the `jsonschema` package, Python's `re`, and an Earley parser built from
llama.cpp's GBNF files (tests/gbnf_reference.py)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import akunu
from akunu import Grammar, GrammarError, SamplingParams
from grammar_checks import all_tokens_mask, check_forced_runs, constrained_run, mask_of, pieces_of

PROMPT = "The three primary colors are"
PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "hobbies"],
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 3}}}
PERSON_CHAT = [{"role": "user", "content": "Describe a fictional person as JSON with name, age and hobbies."}]


# --- the engine's constrained session ------------------------------------------------------------

def test_all_allowed_greedy_equals_plain_greedy(smollm2):
    ids = smollm2.tokenizer.encode(PROMPT, add_special=True)
    plain = smollm2.generate_tokens(ids, max_tokens=40)
    config = SamplingParams(max_tokens=40).to_core()
    assert constrained_run(smollm2._engine, ids, len(plain), config) == plain


def test_all_allowed_sampled_equals_plain_sampled(smollm2):
    """The Gumbel noise is a function of (seed, position, token): one token per submission draws
    what the chained sampler draws."""
    ids = smollm2.tokenizer.encode(PROMPT, add_special=True)
    params = SamplingParams(temperature=0.9, top_k=40, top_p=0.95, min_p=0.02, repeat_penalty=1.1, seed=7,
                            max_tokens=40)
    plain = smollm2.generate_tokens(ids, params)
    assert constrained_run(smollm2._engine, ids, len(plain), params.to_core()) == plain


def test_feeding_several_tokens_is_one_prefill_pass_with_the_same_result(smollm2):
    """Forced tokens arrive in one feed(): the cache and the next choice are what feeding them one
    at a time gives (teacher-forced on plain greedy output)."""
    engine = smollm2._engine
    ids = smollm2.tokenizer.encode(PROMPT, add_special=True)
    plain = smollm2.generate_tokens(ids, max_tokens=30)
    mask = all_tokens_mask(engine)
    for pieces in ([1, 5, 2, 9], [3, 3, 3, 3, 3], [12]):
        engine._begin_constrained(ids, SamplingParams(max_tokens=30).to_core())
        at = 0
        assert engine._choose_token(mask) == plain[0]
        for size in pieces:
            engine._feed(plain[at:at + size])
            at += size
            assert engine.position == len(ids) + at
            assert engine._choose_token(mask) == plain[at], (pieces, at)
        engine._end_constrained(at, "length")


def test_forced_runs_replay_kept_tables_at_any_position(smollm2):
    """Runs of 2 to 64 forced tokens replay a prefill table kept per row count (built at the first
    run of that size, patched to each start position); longer ones, a pass built per call. Each
    leaves the logits a fresh prefill of the same tokens gives."""
    ids = smollm2.tokenizer.encode(PROMPT, add_special=True)
    check_forced_runs(smollm2, ids, [5, 1, 5, 12, 2, 5, 64, 3, 12, 65, 2], kept=[2, 3, 5, 12, 64], not_kept=[1, 65])


def test_masked_choice_is_argmax_over_allowed_tokens(smollm2):
    engine = smollm2._engine
    ids = smollm2.tokenizer.encode(PROMPT, add_special=True)
    logits = smollm2.logits(ids)[-1]
    vocab = smollm2.config["vocab_size"]
    rng = np.random.default_rng(0)
    order = np.argsort(-logits)
    cases = [[int(order[0])], [int(order[1])], [int(order[-1])], [vocab - 1], [0], order[5:9].tolist(),
             rng.choice(vocab, 3, replace=False).tolist(), rng.choice(vocab, vocab // 2, replace=False).tolist(),
             list(range(vocab - 40, vocab))]
    for allowed in cases:
        engine._begin_constrained(ids, SamplingParams().to_core())
        token = engine._choose_token(mask_of(allowed, engine))
        engine._end_constrained(0, "stop")
        assert token in allowed
        best = max(allowed, key=lambda t: logits[t])
        assert logits[token] >= logits[best] - 1e-3, (allowed[:5], token, best)


def test_masked_sampling_draws_only_allowed_tokens(smollm2):
    engine = smollm2._engine
    ids = smollm2.tokenizer.encode(PROMPT, add_special=True)
    vocab = smollm2.config["vocab_size"]
    rng = np.random.default_rng(1)
    settings = [dict(temperature=1.5), dict(temperature=0.8, top_k=5), dict(temperature=1.0, top_p=0.5),
                dict(temperature=1.0, min_p=0.5), dict(temperature=0.7, repeat_penalty=1.3)]
    for i in range(40):
        allowed = rng.choice(vocab, int(rng.integers(1, 50)), replace=False).tolist()
        params = SamplingParams(seed=i, **settings[i % len(settings)])
        engine._begin_constrained(ids, params.to_core())
        token = engine._choose_token(mask_of(allowed, engine))
        engine._end_constrained(0, "stop")
        assert token in allowed, (i, settings[i % len(settings)])


def test_constrained_session_misuse_raises(smollm2):
    engine = smollm2._engine
    ids = smollm2.tokenizer.encode(PROMPT, add_special=True)
    engine._begin_constrained(ids, SamplingParams().to_core())
    with pytest.raises(ValueError, match="words"):
        engine._choose_token(np.full(engine.token_mask_words - 1, -1, dtype=np.int32))
    token = engine._choose_token(all_tokens_mask(engine))
    with pytest.raises(RuntimeError, match="not been fed"):
        engine._choose_token(all_tokens_mask(engine))
    with pytest.raises(RuntimeError, match="grammar-constrained"):
        engine._next_tokens()
    with pytest.raises(ValueError, match="out of range"):
        engine._feed([smollm2.config["vocab_size"]])
    engine._feed([token])
    engine._end_constrained(1, "length")
    with pytest.raises(RuntimeError, match="running constrained session"):
        engine._feed([token])


# --- Grammar objects -----------------------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: Grammar.json_schema({"type": "strin"}), "at type"),
    (lambda: Grammar.json_schema({"type": "array", "uniqueItems": True}), "uniqueItems"),
    (lambda: Grammar.json_schema({"type": "object", "if": {"required": ["a"]}, "then": {}}), "if"),
    (lambda: Grammar.json_schema({"$ref": "#/$defs/missing"}), "missing"),
    (lambda: Grammar.json_schema({"type": "integer", "minimum": 5, "maximum": 1}), "minimum"),
    (lambda: Grammar.json_schema("{not json"), "not valid JSON"),
    (lambda: Grammar.json_schema(42), "must be a dict"),
    (lambda: Grammar.json_schema({"type": "string", "pattern": "(["}), "at pattern"),
    (lambda: Grammar.gbnf("root ::= missing-rule"), "missing-rule"),
    (lambda: Grammar.gbnf("root ::= [a-"), "line 1"),
    (lambda: Grammar.gbnf(""), "non-empty"),
    (lambda: Grammar.lark("start: undefined_rule"), "undefined_rule"),
    (lambda: Grammar.regex("(ab"), "unclosed group"),
    (lambda: Grammar.choice([]), "one or more"),
    (lambda: Grammar.choice(["a", ""]), "non-empty"),
    (lambda: Grammar.choice("yes"), "list of strings"),
    (lambda: Grammar.json().with_trigger_text(""), "non-empty"),
    (lambda: Grammar.json().with_trigger_text("</think>").with_trigger_text("x"), "already"),
])
def test_bad_grammars_raise_grammar_error_naming_the_problem(make, message):
    with pytest.raises(GrammarError, match=re.escape(message)):
        make()


def test_grammar_error_is_an_akunu_error_and_a_value_error():
    assert issubclass(GrammarError, akunu.AkunuError) and issubclass(GrammarError, ValueError)


def test_grammar_made_only_by_its_constructors(smollm2):
    with pytest.raises(TypeError, match="Grammar.json_schema"):
        Grammar("json", "{}")
    with pytest.raises(ValueError, match="akunu.Grammar"):
        smollm2.generate(PROMPT, grammar='{"type": "object"}')


def test_json_schema_from_text_and_pydantic_equal_the_dict():
    import pydantic  # the test extra's

    class Point(pydantic.BaseModel):
        x: int
        y: int

    from_model = Grammar.json_schema(Point)
    assert from_model == Grammar.json_schema(Point.model_json_schema())
    assert from_model == Grammar.json_schema(json.dumps(Point.model_json_schema()))
    assert Grammar.json_schema(PERSON) == Grammar.json_schema(json.loads(json.dumps(PERSON)))


# --- generation ----------------------------------------------------------------------------------

def test_json_schema_chat_validates_and_finishes(smollm2):
    import jsonschema

    for params in (SamplingParams(), SamplingParams(temperature=0.8, seed=3)):
        text = smollm2.chat(PERSON_CHAT, dataclasses_replace(params, grammar=Grammar.json_schema(PERSON)))
        assert smollm2.finish_reason == "stop", text
        jsonschema.validate(json.loads(text), PERSON)


class CountingEngine:
    """The engine with its constrained-session calls counted (a stand-in for model._engine)."""

    def __init__(self, engine):
        self._engine, self.choices, self.feeds = engine, 0, []

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def _choose_token(self, mask):
        self.choices += 1
        return self._engine._choose_token(mask)

    def _feed(self, tokens):
        self.feeds.append(len(tokens))
        return self._engine._feed(tokens)


def test_forced_tokens_need_no_choice_and_go_in_one_pass(smollm2, monkeypatch):
    """The keys and punctuation the schema fixes are not chosen by the model: they are fed with the
    chosen token, one pass for the piece (CPU), and the first ones with the prompt."""
    counting = CountingEngine(smollm2._engine)
    monkeypatch.setattr(smollm2, "_engine", counting)
    ids = smollm2.tokenizer.encode(smollm2.format_chat(PERSON_CHAT), add_special=False, parse_special=True)
    tokens = smollm2.generate_tokens(ids, grammar=Grammar.json_schema(PERSON))
    assert smollm2.finish_reason == "stop" and smollm2.stats.generated_tokens == len(tokens)
    first, pieces = pieces_of(smollm2, Grammar.json_schema(PERSON), tokens)
    assert first and counting.choices == len(pieces) <= 0.7 * len(tokens), (len(first), len(pieces), len(tokens))
    # On the CPU each piece is one pass; the last one completes the grammar and is not fed.
    assert counting.feeds == [len(piece) for piece in pieces[:-1]]
    assert any(len(piece) > 1 for piece in pieces)


def test_max_tokens_before_the_grammar_completes_says_length(smollm2):
    text = smollm2.chat(PERSON_CHAT, grammar=Grammar.json_schema(PERSON), max_tokens=6)
    assert smollm2.finish_reason == "length"
    assert smollm2.stats.generated_tokens == 6
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_stream_pieces_join_to_generate(smollm2):
    grammar = Grammar.json_schema(PERSON)
    whole = smollm2.chat(PERSON_CHAT, grammar=grammar)
    pieces = list(smollm2.chat(PERSON_CHAT, grammar=grammar, stream=True))
    assert len(pieces) > 3 and "".join(pieces) == whole


def test_stop_strings_apply_to_constrained_text(smollm2):
    whole = smollm2.chat(PERSON_CHAT, grammar=Grammar.json_schema(PERSON))
    cut = smollm2.chat(PERSON_CHAT, grammar=Grammar.json_schema(PERSON), stop='"age"')
    assert cut == whole[:whole.index('"age"')]


@pytest.mark.parametrize("pattern", [r"\d{4}-\d{2}-\d{2}", r"\(\d{3}\) \d{3}-\d{4}", r"[a-z]{2,12}@[a-z]{2,12}\.(com|org)",
                                     r"#[0-9a-f]{6}", r"(yes|no|maybe), because [a-z ]{5,30}\."])
def test_regex_output_fullmatches(smollm2, pattern):
    for params in (SamplingParams(max_tokens=64), SamplingParams(temperature=1.0, seed=5, max_tokens=64)):
        text = smollm2.generate("Here it is:", dataclasses_replace(params, grammar=Grammar.regex(pattern)))
        assert smollm2.finish_reason == "stop", text
        assert re.fullmatch(pattern, text), (pattern, text)


def test_choice_output_is_one_of_the_options(smollm2):
    options = ["Paris", "London", "Berlin", "Rome", "Lisbon, Portugal"]
    grammar = Grammar.choice(options)
    assert smollm2.generate("The capital of France is", grammar=grammar) == "Paris"
    for seed in range(12):
        text = smollm2.generate("A city:", grammar=grammar, temperature=1.5, seed=seed)
        assert text in options and smollm2.finish_reason == "stop"


def test_choice_fully_forced_needs_no_forward_pass(smollm2):
    tokens = smollm2.generate_tokens(PROMPT, grammar=Grammar.choice(["red, yellow and blue"]))
    assert smollm2.tokenizer.decode(tokens) == "red, yellow and blue"
    assert smollm2.finish_reason == "stop" and smollm2.stats.decode_steps == 0


def test_trigger_text_leaves_text_before_it_free(smollm2):
    """Up to the trigger the model writes what it writes unconstrained; after it, the grammar."""
    free = smollm2.generate(PROMPT, max_tokens=12)
    trigger = free.split()[1]  # a word the model writes anyway, and where it first does
    prefix = free[:free.index(trigger) + len(trigger)]
    grammar = Grammar.choice(["red", "blue"]).with_trigger_text(trigger)
    text = smollm2.generate(PROMPT, grammar=grammar, max_tokens=40)
    assert smollm2.finish_reason == "stop", text
    assert text.startswith(prefix) and re.fullmatch(r"[ \t\r\n]*(red|blue)", text[len(prefix):]), (prefix, text)


def test_compiled_grammars_are_cached_per_model(smollm2, monkeypatch):
    import akunu.grammar as grammar_module

    made = []
    real = grammar_module.LLMatcher

    def counting_matcher(tokenizer, definition, **kwargs):
        made.append(definition)
        return real(tokenizer, definition, **kwargs)

    schema = {"type": "object", "properties": {"cached": {"type": "boolean"}}, "required": ["cached"],
              "additionalProperties": False}
    grammars = [Grammar.json_schema(schema) for _ in range(3)]  # equal objects, made separately
    monkeypatch.setattr(grammar_module, "LLMatcher", counting_matcher)
    for grammar in grammars:
        assert json.loads(smollm2.generate("JSON:", grammar=grammar)) in ({"cached": True}, {"cached": False})
    assert len(made) == 1


def test_superseded_constrained_stream_raises_and_leaves_the_new_session_alone(smollm2):
    old = smollm2.chat(PERSON_CHAT, grammar=Grammar.json_schema(PERSON), stream=True)
    next(old)
    expected = smollm2.generate(PROMPT, max_tokens=10)
    new = smollm2.stream(PROMPT, max_tokens=10)
    with pytest.raises(RuntimeError, match="superseded"):
        list(old)
    del old
    assert "".join(new) == expected


def test_padded_vocabulary_and_tokenizer_json_checkpoint(tokenizer_dir, tmp_path, akunu_mod):
    """A Hugging Face checkpoint (akunu.HFTokenizer) whose output rows pass its tokenizer's
    vocabulary: the rows without a token are never allowed."""
    import hf_checkpoints as hc
    import tiny_models as tm

    spec = tm.family_spec("llama", "grammar_padded", hidden=64, head_dim=16, n_layers=1, ffn=128, seed=31)
    path, _ = hc.save_checkpoint(spec, tmp_path / "padded", tokenizer_dir, vocab=32070)  # not a multiple of 32
    m = akunu_mod.Model(str(path))
    assert m._engine.token_mask_words == (32070 + 31) // 32
    for seed in range(5):
        tokens = m.generate_tokens("Pick:", grammar=Grammar.choice(["alpha", "beta gamma"]), temperature=2.0,
                                   seed=seed, max_tokens=20)
        assert all(t < 32000 for t in tokens)
        assert m.tokenizer.decode(tokens) in ("alpha", "beta gamma")
    text = m.generate("Number:", grammar=Grammar.regex(r"[0-9]{3,6}"), temperature=1.0, seed=1)
    assert re.fullmatch(r"[0-9]{3,6}", text), text


def dataclasses_replace(params, **changes):
    import dataclasses

    return dataclasses.replace(params, **changes)


def test_readme_structured_output_example_runs(smollm2_path, capsys):
    """The README's notebook-style example, as written (on the test model)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Structured output"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]
    code = code.replace('Model("SmolLM2-135M-Instruct.Q4_1.gguf")', f"Model({str(smollm2_path)!r})")
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "stop" in printed and "uniqueItems" in printed
    assert set(json.loads(namespace["reply"])) == {"name", "age"}


# Prompts that suit each of llama.cpp's grammars (tests/paths.py: LLAMA_CPP_GRAMMARS).
GBNF_PROMPTS = {
    "arithmetic": "Write an arithmetic expression:",
    "c": "Write a short C program:\n",
    "chess": "The moves of a chess game: 1.",
    "english": "Write a sentence about the sea:",
    "japanese": "日本語で書いてください:",
    "json": "A JSON object describing a book:",
    "json_arr": "A JSON list of three fruits:",
    "list": "A shopping list:\n",
}


@pytest.mark.parametrize("name", sorted(GBNF_PROMPTS))
def test_llama_cpp_gbnf_grammars_produce_only_their_language(smollm2, name):
    """Each grammar of llama.cpp's grammars/ folder, greedy and sampled: every completed output is
    in the language and every output cut by max_tokens begins a string of it (judged by
    tests/gbnf_reference.py's Earley recognizer, built from the same file independently of the
    engine)."""
    from gbnf_reference import GbnfLanguage
    from paths import llama_cpp_grammars

    text = (llama_cpp_grammars() / f"{name}.gbnf").read_text(encoding="utf-8")
    language = GbnfLanguage(text)
    grammar = Grammar.gbnf(text)
    for i, params in enumerate([SamplingParams(max_tokens=96), SamplingParams(temperature=0.8, seed=1, max_tokens=96),
                                SamplingParams(temperature=1.2, top_k=50, seed=2, max_tokens=96)]):
        out = smollm2.generate(GBNF_PROMPTS[name], dataclasses_replace(params, grammar=grammar))
        if smollm2.finish_reason == "stop":
            assert language.accepts(out), (name, i, out)
        else:
            assert smollm2.stats.generated_tokens == 96 and language.accepts_prefix(out), (name, i, out)


@pytest.mark.parametrize("schema, message", [
    ({"type": "string", "maxLenght": 3}, "/maxLenght: unknown keyword"),
    ({"type": "object", "properties": {"a": {"type": "string", "nullable": True}}}, "/properties/a/nullable"),
    ({"type": "integer", "format": "int32"}, "format 'int32' on a number"),
    ({"type": "array", "items": {"type": "object", "properties": {"b": {"minimun": 1}}}}, "/items/properties/b/minimun"),
    ({"anyOf": [{"type": "string"}, {"type": "number", "format": "double"}]}, "/anyOf/1/format"),
    ({"$defs": {"x": {"type": "string", "patern": "^a"}}, "$ref": "#/$defs/x"}, "/$defs/x/patern"),
])
def test_schema_keywords_the_engine_would_skip_are_refused(schema, message):
    """llguidance skips keywords it does not know (tests/data/json_schemas_loose.json): akunu refuses them."""
    with pytest.raises(GrammarError, match=re.escape(message)):
        Grammar.json_schema(schema)


def test_annotations_extensions_and_property_names_are_not_keywords():
    Grammar.json_schema({"title": "T", "description": "d", "x-vendor": 1, "type": "object", "examples": [{}],
                         "properties": {"maxLenght": {"type": "string", "contentEncoding": "base64"},
                                        "nullable": {"type": "boolean", "default": True}}})


def test_json_schema_corpus_through_smollm2(smollm2):
    """Issue 34's acceptance 1: every schema of tests/data/json_schemas.json (139: nested objects,
    arrays with bounds, enums, patterns, formats, $ref, anyOf / oneOf), asked for with its prompt
    in SmolLM2's chat format, greedy and (every third) sampled: every completed output parses and
    validates with the jsonschema package (formats checked; llguidance's two known date leniencies
    named, tests/data/json_schemas_loose.json)."""
    from json_schema_walk import load_corpus, unexplained_errors

    corpus = load_corpus()
    completed, failures = 0, []
    # A mild repetition penalty: greedy SmolLM2 loops ("Fashion", "Fashion", ...) in one schema in
    # five until max_tokens; with it, one in fifteen. (Plain greedy is covered above.)
    runs = [(entry, SamplingParams(max_tokens=300, repeat_penalty=1.15)) for entry in corpus]
    runs += [(entry, SamplingParams(max_tokens=300, temperature=0.8, repeat_penalty=1.15, seed=i))
             for i, entry in enumerate(corpus[::3])]
    for entry, params in runs:
        grammar = Grammar.json_schema(entry["schema"])
        text = smollm2.chat([{"role": "user", "content": entry["prompt"]}], dataclasses_replace(params, grammar=grammar))
        if smollm2.finish_reason != "stop":
            continue
        completed += 1
        try:
            instance = json.loads(text)
        except json.JSONDecodeError as e:
            failures.append((entry["name"], f"not JSON: {e}", text))
            continue
        failures += [(entry["name"], message, text) for message in unexplained_errors(entry["schema"], instance)]
    assert not failures, failures[:5]
    assert completed >= 0.9 * len(runs), (completed, len(runs))


def test_hostname_length_is_enforced(smollm2):
    """llguidance bounds each label of a hostname but not the whole name (RFC 1123: 253 characters,
    found by the random-weight corpus run on CUDA); Grammar.json_schema writes the bound out."""
    import llguidance

    from json_schema_walk import unexplained_errors

    schema = {"type": "string", "format": "hostname"}
    too_long = ".".join(["b" * 60] * 5)  # labels of 60: each fine, 304 in all
    assert unexplained_errors(schema, too_long)
    ll_tokenizer = smollm2._grammars.ll_tokenizer
    tokens = smollm2.tokenizer.encode(json.dumps(too_long), add_special=False)
    bare = llguidance.LLMatcher(ll_tokenizer, llguidance.LLMatcher.grammar_from_json_schema(schema), log_level=0)
    assert all(bare.consume_token(t) for t in tokens) and bare.is_accepting()  # the engine's leniency
    ours = llguidance.LLMatcher(ll_tokenizer, Grammar.json_schema(schema).definition, log_level=0)
    assert not all(ours.consume_token(t) for t in tokens)
    shorter = Grammar.json_schema({"type": "string", "format": "hostname", "maxLength": 20})
    assert '"maxLength": 20' in json.dumps(json.loads(shorter.definition))
