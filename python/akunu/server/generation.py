"""What a request asks the model to do, and doing it on the model's worker thread.

A Plan is made on the HTTP side from a validated request (tokenized prompt, sampling, grammar,
how many choices); run_plan executes it on the worker (scheduler.Job.work) and emits:

    ("delta", Delta)       text (and its tokens) of one choice, as it is generated
    ("choice_end", End)    a choice is finished: why, how many tokens, timings, logprobs

Prompt tokens that the KV cache already holds from an earlier request are not prefilled again
(the engine's prompt reuse), so a chat's next turn costs only its new tokens."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..model import Model
from ..sampling import SamplingParams
from ..stop import StopMatcher


@dataclass
class Plan:
    prompts: list[list[int]]          # one or more tokenized prompts (completions may send several)
    params: SamplingParams
    n: int = 1                        # choices per prompt (params.max_tokens is always set)
    logprobs: Optional[int] = None    # None: off; k: each token's logprob and the k most likely


@dataclass
class Delta:
    index: int
    text: str
    tokens: list[int]
    logprobs: Optional[list["TokenLogprob"]] = None


@dataclass
class TokenLogprob:
    token: int
    logprob: float
    top: list[tuple[int, float]]  # the most likely tokens at that step, most likely first


@dataclass
class End:
    index: int
    finish_reason: str  # "stop" or "length" ("tool_calls" is decided by the HTTP side)
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    prefill_ms: float
    decode_ms: float
    text: str


def run_plan(model: Model, plan: Plan, job) -> None:
    """Job work: every choice of every prompt, in order; stops early if the job is cancelled."""
    for p, prompt in enumerate(plan.prompts):
        for i in range(plan.n):
            if job.cancelled.is_set():
                return
            index = p * plan.n + i
            params = plan.params
            if i and params.seed is not None:  # n choices from one seed: seed, seed + 1, ...
                params = dataclasses.replace(params, seed=(params.seed + i) % 2**64)
            _run_choice(model, prompt, params, plan, index, job)


def _run_choice(model: Model, prompt: list[int], params: SamplingParams, plan: Plan, index: int, job) -> None:
    matcher = StopMatcher(params.stop)
    pieces = model._text_pieces(matcher, model._token_chunks(prompt, params, params.max_tokens))
    buffered = plan.logprobs is not None  # logprobs need the whole output first (one teacher-forced pass)
    tokens, texts, held = [], [], []
    for text, piece_tokens in pieces:
        if job.cancelled.is_set():
            return
        tokens += piece_tokens
        texts.append(text)
        if buffered:
            held.append((text, piece_tokens))
        elif text:
            job.emit("delta", Delta(index, text, piece_tokens))
    stats = model.stats
    finish = "stop" if matcher.stopped else (model.finish_reason or "stop")
    if buffered:
        logprobs = token_logprobs(model, prompt, tokens, plan.logprobs)
        at = 0
        for text, piece_tokens in held:
            if text or piece_tokens:
                job.emit("delta", Delta(index, text, piece_tokens, logprobs[at:at + len(piece_tokens)]))
            at += len(piece_tokens)
    job.emit("choice_end", End(index, finish, len(prompt), getattr(stats, "cached_tokens", 0), len(tokens),
                               stats.prefill_ms, stats.decode_ms, "".join(texts)))


def token_logprobs(model: Model, prompt: list[int], output: list[int], top: int) -> list[TokenLogprob]:
    """The log-probability of each output token under the model (log-softmax of its logits, before
    temperature and filters, as OpenAI reports them) and the `top` most likely alternatives, from
    one teacher-forced pass over prompt + output."""
    if not output:
        return []
    rows = model.logits(prompt + output[:-1], first=len(prompt) - 1).astype(np.float64)
    rows -= rows.max(axis=1, keepdims=True)
    rows -= np.log(np.exp(rows).sum(axis=1, keepdims=True))
    out = []
    for row, token in zip(rows, output):
        best = np.argpartition(-row, top)[:top] if 0 < top < row.size else np.arange(row.size if top else 0)
        best = best[np.argsort(-row[best], kind="stable")]
        out.append(TokenLogprob(token, float(row[token]), [(int(t), float(row[t])) for t in best]))
    return out
