"""akunu.SamplingParams: how a generation picks its tokens, how many it makes and where its text
stops, in one object that travels from Model.generate / stream / chat / generate_tokens to the
engine (as vLLM's SamplingParams does from LLM.generate to its sampler). New generation settings
(grammars, logprobs, speculative decoding) become fields here.

Each range is checked once: by the engine's SamplingConfig::validate (src/inference/sampler.cpp),
which to_core() calls when the object is made, and the seed's here (the engine holds it as an
unsigned 64-bit integer). A SamplingParams that exists is one the engine accepts."""

from __future__ import annotations

import dataclasses
import numbers
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

from . import _core
from .grammar import Grammar

_FLOATS = ("temperature", "top_p", "min_p", "repeat_penalty", "frequency_penalty", "presence_penalty")
_INTS = ("top_k", "repeat_last_n")
_INT32_MAX = 2**31 - 1  # the engine's ints; more tokens than that means the same as that many


@dataclass(frozen=True)
class SamplingParams:
    """How to generate: SamplingParams(temperature=0.7, top_p=0.9, seed=1, max_tokens=64, stop="\\n\\n").

    - temperature: 0 (the default) is greedy decoding (argmax); above 0 tokens are drawn from
      softmax(logits / temperature) over the tokens the filters below keep.
    - top_k: keep the k most likely tokens (0: off).
    - top_p: keep the fewest most likely tokens whose probabilities add up to top_p, in (0, 1] (1: off).
    - min_p: drop tokens less likely than min_p times the most likely one, in [0, 1] (0: off).
    - repeat_penalty: > 0; the logits of tokens among the last repeat_last_n are divided by it when
      positive and multiplied when negative (llama.cpp's rule; 1: off).
    - repeat_last_n: how many recent tokens (prompt included) the penalties look at, >= 0.
    - frequency_penalty, presence_penalty: OpenAI's, each in [-2, 2] (0: off). A token generated
      count > 0 times has frequency_penalty * count + presence_penalty subtracted from its logit:
      positive values make repeats less likely, negative ones more. The counts are over the
      generated tokens among the last repeat_last_n tokens: the prompt's tokens are not counted
      (OpenAI's and vLLM's meaning; llama.cpp's penalties sampler counts them too). Counting the
      prompt would penalize the words a reply must echo (names, code identifiers) and the chat
      template's turn tokens, end-of-turn among them, so replies would run long. OpenAI counts
      every generated token: repeat_last_n >= max_tokens gives exactly its rule; the default 64
      counts the latest 64 generated tokens.
    - seed: the draw's seed, an integer in [0, 2**64): the same seed gives the same tokens, on every
      backend up to its rounding of the logits. None: a fresh random seed for each generation.
    - max_tokens: the most tokens to generate, >= 0. None: the method's default (128; chat: 256).
    - stop: a string or strings; generated text ends before the first of them (generate, stream,
      chat; generate_tokens, which returns token ids, takes none).
    - grammar: an akunu.Grammar the output must follow (JSON schema, GBNF, regex, choice), or None.
      Generation then ends when the grammar is complete; model.finish_reason is "length" when
      max_tokens (or the context) ran out first, so the output is incomplete.

    The engine applies the penalties (repetition, then frequency and presence), top-k, temperature,
    min-p and top-p in that order, then a seeded Gumbel-max draw; greedy decoding (temperature 0)
    takes the argmax of the penalized logits. A setting out of range raises ValueError naming it
    and its range when the object is made; dataclasses.replace(params, temperature=0.2) makes a
    changed copy.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: Union[int, None] = None
    max_tokens: Union[int, None] = None
    stop: tuple[str, ...] = ()
    grammar: Optional[Grammar] = None

    def __post_init__(self):
        # Types here (numbers become plain float / int, stop a tuple); ranges in the engine, below.
        for name in _FLOATS:
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise ValueError(f"{name} must be a number, got {value!r}")
            object.__setattr__(self, name, float(value))
        for name in _INTS + ("max_tokens",):
            value = getattr(self, name)
            if value is None and name == "max_tokens":
                continue
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.seed is not None:
            if not isinstance(self.seed, numbers.Integral) or isinstance(self.seed, bool) or not 0 <= self.seed < 2**64:
                raise ValueError(f"seed must be None or an integer in [0, 2**64), got {self.seed!r}")
            object.__setattr__(self, "seed", int(self.seed))
        stop = self.stop
        if stop is None:
            stop = ()
        elif isinstance(stop, str):
            stop = (stop,)
        elif isinstance(stop, Iterable):
            stop = tuple(stop)
        if not isinstance(stop, tuple) or not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop must be a string or strings, none of them empty, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        if self.grammar is not None and not isinstance(self.grammar, Grammar):
            raise ValueError(f"grammar must be an akunu.Grammar (Grammar.json_schema(...), Grammar.gbnf(...), ...) or "
                             f"None, got {self.grammar!r}")
        try:
            self.to_core()
        except ValueError as e:
            raise ValueError(str(e)) from None

    def to_core(self, default_max_tokens: int = 128) -> _core.SamplingConfig:
        """The engine's SamplingConfig: a drawn seed when seed is None, default_max_tokens when
        max_tokens is None. Raises ValueError for a setting out of its range."""
        max_tokens = default_max_tokens if self.max_tokens is None else self.max_tokens
        return _core.SamplingConfig(
            temperature=self.temperature, top_k=min(self.top_k, _INT32_MAX), top_p=self.top_p, min_p=self.min_p,
            repeat_penalty=self.repeat_penalty, repeat_last_n=min(self.repeat_last_n, _INT32_MAX),
            frequency_penalty=self.frequency_penalty, presence_penalty=self.presence_penalty,
            seed=secrets.randbits(64) if self.seed is None else self.seed, max_tokens=min(max_tokens, _INT32_MAX))


_FIELDS = tuple(f.name for f in dataclasses.fields(SamplingParams))


def sampling_from_arguments(method: str, sampling: Any, settings: Mapping[str, Any]) -> SamplingParams:
    """The SamplingParams of a `method(prompt, sampling=None, **settings)` call: `sampling`, or one
    made of the keyword settings (SamplingParams' fields); TypeError for both, or a stray keyword."""
    unknown = [k for k in settings if k not in _FIELDS]
    if unknown:
        raise TypeError(f"{method}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                        f"the settings are SamplingParams' fields: {', '.join(_FIELDS)}")
    if sampling is None:
        return SamplingParams(**settings)
    if not isinstance(sampling, SamplingParams):
        raise TypeError(f"{method}(): sampling must be an akunu.SamplingParams, got {sampling!r} "
                        f"({type(sampling).__name__}); settings go as keywords, e.g. max_tokens=32")
    if settings:
        raise TypeError(f"{method}(): pass the settings either as sampling=SamplingParams(...) or as keywords, not "
                        f"both (got sampling= and {', '.join(settings)}); dataclasses.replace(sampling, ...) makes "
                        "a changed copy")
    return sampling

