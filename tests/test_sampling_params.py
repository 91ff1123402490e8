"""akunu.SamplingParams: one object for how to generate, taken by generate / stream / chat /
generate_tokens beside the keyword settings (the same tokens either way), checked in one place
(the engine's SamplingConfig::validate); akunu.Model holds the engine instead of being one;
backend names are the ones built in."""
from __future__ import annotations

import dataclasses
import math
import sys

import pytest

from akunu import SamplingParams

PROMPT = "Here is a short story about a robot who learns to paint:"
MESSAGES = [{"role": "user", "content": "Write one sentence about the sea."}]
# Every setting away from its default, so that one not reaching the engine changes the tokens.
SAMPLED = dict(max_tokens=24, temperature=0.9, top_k=40, top_p=0.95, min_p=0.02, repeat_penalty=1.1, repeat_last_n=32,
               frequency_penalty=0.3, presence_penalty=0.2, seed=1234)


@pytest.fixture(scope="module")
def sampled_ids(smollm2):
    ids = smollm2.generate_tokens(PROMPT, **SAMPLED)
    assert len(ids) == SAMPLED["max_tokens"], ids
    assert ids != smollm2.generate_tokens(PROMPT, max_tokens=SAMPLED["max_tokens"]), "sampling should leave greedy"
    return ids


# ------------------------------------------------------------------ object and keywords: the same tokens


def test_generate_tokens_object_equals_keywords(smollm2, sampled_ids):
    params = SamplingParams(**SAMPLED)
    assert smollm2.generate_tokens(PROMPT, params) == sampled_ids
    assert smollm2.generate_tokens(PROMPT, sampling=params) == sampled_ids
    assert smollm2.generate_tokens(PROMPT, dataclasses.replace(params, seed=4321)) != sampled_ids


CHANGED = {"top_k": 2, "repeat_penalty": 1.8, "repeat_last_n": 0, "frequency_penalty": 2.0, "presence_penalty": 2.0}


@pytest.mark.parametrize("setting", list(CHANGED))
def test_each_setting_reaches_the_engine(smollm2, sampled_ids, setting):
    changed = CHANGED[setting]
    assert smollm2.generate_tokens(PROMPT, SamplingParams(**dict(SAMPLED, **{setting: changed}))) != sampled_ids


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_text_object_equals_keywords(smollm2, sampled_ids, method):
    run = getattr(smollm2, method)
    by_keywords = "".join(run(PROMPT, **SAMPLED))
    by_object = "".join(run(PROMPT, SamplingParams(**SAMPLED)))
    assert by_object == by_keywords == smollm2.tokenizer.decode(sampled_ids)


@pytest.mark.parametrize("stream", [False, True])
def test_chat_object_equals_keywords(smollm2, stream):
    by_keywords = "".join(smollm2.chat(MESSAGES, stream=stream, **SAMPLED))
    by_object = "".join(smollm2.chat(MESSAGES, SamplingParams(**SAMPLED), stream=stream))
    assert by_object == by_keywords
    greedy = smollm2.chat(MESSAGES, max_tokens=SAMPLED["max_tokens"])
    assert by_object != greedy, "sampling should leave greedy"
    assert "".join(smollm2.chat(MESSAGES, SamplingParams(max_tokens=SAMPLED["max_tokens"]), stream=stream)) == greedy


def test_stop_in_the_object(smollm2):
    text = smollm2.generate(PROMPT, max_tokens=32)
    stop = text[len(text) // 2:len(text) // 2 + 4]
    assert stop.strip(), "pick a non-blank stop string"
    expected = text[:text.index(stop)]
    assert smollm2.generate(PROMPT, SamplingParams(max_tokens=32, stop=stop)) == expected
    assert "".join(smollm2.stream(PROMPT, SamplingParams(max_tokens=32, stop=[stop]))) == expected
    assert smollm2.generate(PROMPT, max_tokens=32, stop=stop) == expected
    with pytest.raises(ValueError, match="generate_tokens.*stop"):
        smollm2.generate_tokens(PROMPT, SamplingParams(max_tokens=4, stop="x"))


def test_max_tokens_defaults(smollm2):
    """max_tokens=None is the method's default: 128, chat's 256."""
    assert SamplingParams().max_tokens is None
    assert SamplingParams().to_core(default_max_tokens=256).max_tokens == 256
    assert SamplingParams(max_tokens=7).to_core(default_max_tokens=256).max_tokens == 7
    ids = smollm2.tokenizer.encode("1, 2, 3, 4, 5,")  # counting goes on past 128 tokens
    out = smollm2.generate_tokens(ids, SamplingParams())
    assert len(out) == 128 and smollm2.finish_reason == "length"


# ------------------------------------------------------------------ one check of the ranges

BAD = [
    ("temperature", -0.5, r"temperature must be a finite number >= 0"),
    ("temperature", math.nan, r"temperature must be a finite number >= 0"),
    ("temperature", "hot", r"temperature must be a number"),
    ("top_k", -1, r"top_k must be an integer >= 0"),
    ("top_k", 1.5, r"top_k must be an integer >= 0"),
    ("top_p", 0.0, r"top_p must be in \(0, 1\]"),
    ("top_p", 1.5, r"top_p must be in \(0, 1\]"),
    ("min_p", -0.1, r"min_p must be in \[0, 1\]"),
    ("min_p", 1.5, r"min_p must be in \[0, 1\]"),
    ("repeat_penalty", 0.0, r"repeat_penalty must be a finite number > 0"),
    ("repeat_penalty", math.inf, r"repeat_penalty must be a finite number > 0"),
    ("repeat_last_n", -1, r"repeat_last_n must be an integer >= 0"),
    ("frequency_penalty", 2.5, r"frequency_penalty must be in \[-2, 2\] \(0: off\), got 2.5"),
    ("frequency_penalty", -2.01, r"frequency_penalty must be in \[-2, 2\]"),
    ("frequency_penalty", math.nan, r"frequency_penalty must be in \[-2, 2\]"),
    ("frequency_penalty", "high", r"frequency_penalty must be a number"),
    ("presence_penalty", -3, r"presence_penalty must be in \[-2, 2\] \(0: off\), got -3"),
    ("presence_penalty", math.inf, r"presence_penalty must be in \[-2, 2\]"),
    ("presence_penalty", None, r"presence_penalty must be a number"),
    ("seed", -1, r"seed must be None or an integer in \[0, 2\*\*64\)"),
    ("seed", 2**64, r"seed must be None or an integer in \[0, 2\*\*64\)"),
    ("max_tokens", -1, r"max_tokens must be an integer >= 0"),
    ("max_tokens", 2.0, r"max_tokens must be an integer >= 0"),
    ("stop", "", r"stop must be a string or strings, none of them empty"),
    ("stop", ["ok", 3], r"stop must be a string or strings, none of them empty"),
]


@pytest.mark.parametrize("name,value,message", BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_bad_setting_names_itself_and_its_range(smollm2, name, value, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**{name: value})
    for call in (smollm2.generate, smollm2.stream, smollm2.generate_tokens):
        with pytest.raises(ValueError, match=message):
            call(PROMPT, **{"max_tokens": 4, **{name: value}})
    with pytest.raises(ValueError, match=message):
        smollm2.chat(MESSAGES, **{name: value})


@pytest.mark.parametrize("name,value", [("temperature", -0.5), ("top_k", -1), ("top_p", 0.0), ("min_p", 1.5),
                                        ("repeat_penalty", 0.0), ("repeat_last_n", -1), ("frequency_penalty", 2.5),
                                        ("presence_penalty", -2.5), ("max_tokens", -1)])
def test_ranges_are_the_engines(akunu_mod, name, value):
    """SamplingParams' range errors are the engine's SamplingConfig's, word for word."""
    fields = dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, repeat_last_n=64,
                  frequency_penalty=0.0, presence_penalty=0.0, seed=0, max_tokens=1)
    with pytest.raises(ValueError) as engine:
        akunu_mod._core.SamplingConfig(**dict(fields, **{name: value}))
    with pytest.raises(ValueError) as params:
        SamplingParams(**{name: value})
    assert str(params.value) == str(engine.value)


def test_settings_are_normalized_and_frozen():
    p = SamplingParams(temperature=1, top_k=5, stop="END", seed=3)
    assert p.temperature == 1.0 and isinstance(p.temperature, float) and p.stop == ("END",)
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b") and SamplingParams(stop=None).stop == ()
    assert p == SamplingParams(temperature=1.0, top_k=5, stop=("END",), seed=3) and hash(p) == hash(dataclasses.replace(p))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.temperature = 0.5
    core = p.to_core()
    assert (core.temperature, core.top_k, core.seed, core.max_tokens) == (1.0, 5, 3, 128)
    assert (core.frequency_penalty, core.presence_penalty) == (0.0, 0.0)
    edges = SamplingParams(frequency_penalty=-2, presence_penalty=2).to_core()  # the range's ends are in it
    assert (edges.frequency_penalty, edges.presence_penalty) == (-2.0, 2.0)
    assert isinstance(SamplingParams(frequency_penalty=1).frequency_penalty, float)
    assert len({SamplingParams(temperature=1.0).to_core().seed for _ in range(4)}) > 1  # None: a fresh seed
    huge = SamplingParams(top_k=10**12, max_tokens=10**12).to_core()  # beyond the engine's ints: the same meaning
    assert huge.top_k == huge.max_tokens == 2**31 - 1


# ------------------------------------------------------------------ object or keywords, not both


@pytest.mark.parametrize("method", ["generate", "stream", "generate_tokens", "chat"])
@pytest.mark.parametrize("keyword", [dict(temperature=0.5), dict(max_tokens=8), dict(seed=None), dict(stop="x")])
def test_object_and_keywords_together_raise(smollm2, method, keyword):
    prompt = MESSAGES if method == "chat" else PROMPT
    name = next(iter(keyword))
    with pytest.raises(TypeError, match=rf"not both \(got sampling= and {name}\)"):
        getattr(smollm2, method)(prompt, SamplingParams(temperature=0.5), **keyword)


def test_stray_keywords_and_positional_max_tokens_raise(smollm2):
    with pytest.raises(TypeError, match="unexpected keyword argument.*'temprature'"):
        smollm2.generate(PROMPT, temprature=0.5)
    with pytest.raises(TypeError, match="sampling must be an akunu.SamplingParams.*max_tokens=32"):
        smollm2.generate(PROMPT, 32)
    with pytest.raises(TypeError, match="sampling must be an akunu.SamplingParams"):
        smollm2.chat(MESSAGES, {"temperature": 0.5})


# ------------------------------------------------------------------ the engine is held, not inherited


def test_model_holds_the_engine(akunu_mod, smollm2):
    assert not isinstance(smollm2, akunu_mod._core.Model)
    assert isinstance(smollm2._engine, akunu_mod._core.Model)
    for internal in ("prefill", "decode_step", "chain_decode", "profile_decode_step", "position",
                     "table_builds", "loader_owned_bytes", "_begin", "_next_tokens"):
        assert not hasattr(smollm2, internal), internal
    assert "reset" in vars(akunu_mod.Model)  # Model's own (the KV cache and the prompt cache), not the engine's
    assert smollm2.config["n_layers"] == smollm2._engine.config["n_layers"]
    assert (smollm2.backend, smollm2.device_name, smollm2.context_length, smollm2.kv_cache_dtype, smollm2.format) == \
        (smollm2._engine.backend, smollm2._engine.device_name, smollm2._engine.context_length,
         smollm2._engine.kv_cache_dtype, smollm2._engine.format)
    assert len(smollm2.tensors) > 0 and len(smollm2.dispatch_table) > 0 and smollm2.kv_cache_bytes > 0


# ------------------------------------------------------------------ backends: the ones built in


def test_unknown_backend_names_the_built_in_ones(akunu_mod, smollm2_path):
    built = akunu_mod.built_backends()
    assert "cpu" in built
    with pytest.raises(ValueError, match=r"unknown backend 'warp-drive'") as info:
        akunu_mod.Model(str(smollm2_path), backend="warp-drive")
    for name in ["auto", *built]:
        assert f"'{name}'" in str(info.value), str(info.value)


def test_metal_without_the_metal_backend_says_why(akunu_mod, smollm2_path):
    built = akunu_mod.built_backends()
    if sys.platform != "darwin":
        assert "metal" not in built  # the Metal backend is built on macOS only
    if "metal" in built:
        pytest.skip("this build has the Metal backend")
    with pytest.raises(akunu_mod.UnsupportedError, match=r"backend 'metal' is not available: .*Apple GPUs only") as info:
        akunu_mod.Model(str(smollm2_path), backend="metal")
    for name in ["auto", *built]:
        assert f"'{name}'" in str(info.value), str(info.value)


def test_cli_backend_choices_are_the_built_in_ones(akunu_mod, capsys):
    from akunu.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--backend", "metal", "Hello"])
    err = capsys.readouterr().err
    assert "invalid choice: 'metal'" in err
    for name in ["auto", *akunu_mod.built_backends()]:
        assert f"'{name}'" in err, err
    assert build_parser().parse_args(["run", "--backend", "cpu", "Hello"]).backend == "cpu"
