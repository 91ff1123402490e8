"""The HTTP routes of `akunu serve` (FastAPI): OpenAI's /v1/chat/completions, /v1/completions and
/v1/models, plus /tokenize, /detokenize, /health, /metrics and the chat page at /.

A generation request is validated (protocol.py), turned into a Plan with the model's tokenizer
(plans.py), queued on the model's scheduler (scheduler.py) and answered from the events its
worker emits: all at once, or as server-sent events with stream: true."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import defaultdict
from typing import AsyncIterator, Optional

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response, StreamingResponse

from .. import __version__
from .._core import ContextOverflowError
from ..grammar import GrammarError
from ..model import Model
from ..tool_calls import ToolSession
from .config import ServerConfig
from .errors import APIError, error_body, install_error_handlers
from .generation import End, Plan, run_plan
from .metrics import CONTENT_TYPE, ServerMetrics
from .middleware import APIKeyCheck, BodyLimit, RequestLog
from .openapi import (ChatCompletion, ChatCompletionChunk, Completion, CompletionChunk, DetokenizeResponse, Health,
                      ModelCard, ModelList, TokenizeResponse, describe, errors, ok, text_ok)
from .plans import chat_messages, chat_plan, chat_prompt, completion_plan, response_grammar, tool_session
from .protocol import ChatCompletionRequest, CompletionRequest, DetokenizeRequest, TokenizeRequest
from .registry import ModelRegistry
from .responses import ChunkWriter, chat_logprobs, completion_logprobs, new_id, sse, usage
from .scheduler import Job, ModelWorker, QueueFull

# What a route that runs on a model may answer besides 200 (413: the body limit's middleware).
MODEL_ERRORS = errors(400, 404, 413, 429, 503)
CHAT_PAGE = os.path.join(os.path.dirname(__file__), "static", "chat.html")


def create_app(config: ServerConfig, models: Optional[dict[str, Model]] = None) -> FastAPI:
    """The server's ASGI app for `config`. `models`: already loaded akunu.Models by name, used for
    the config's models of those names instead of loading them again (tests, notebooks)."""
    registry = ModelRegistry(config, models)
    metrics = ServerMetrics(registry)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        unloader = asyncio.create_task(_unload_idle_models(registry, config.idle_unload_seconds))
        try:
            yield
        finally:
            unloader.cancel()
            registry.close()

    app = FastAPI(title="akunu", version=__version__, lifespan=lifespan,
                  description="OpenAI-compatible API of the akunu inference engine")
    app.state.registry = registry

    def openapi_document() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = describe(app, api_key_required=bool(config.api_key))
        return app.openapi_schema

    app.openapi = openapi_document
    install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    if config.api_key:
        app.add_middleware(APIKeyCheck, api_key=config.api_key)
    app.add_middleware(RequestLog, counter=metrics.requests)
    created = int(time.time())

    def fingerprint(worker: ModelWorker) -> str:
        return f"akunu-{__version__}-{worker.spec.backend}"

    # --- plain routes -------------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    async def chat_page():
        return FileResponse(CHAT_PAGE, media_type="text/html")

    @app.get("/health", responses=ok(Health))
    async def health():
        return {"status": "ok", "models": {name: {"loaded": w.loaded, "waiting": w.waiting, "busy": w.busy}
                                           for name, w in registry.workers.items()}}

    @app.get("/metrics", response_class=Response,
             responses=text_ok(CONTENT_TYPE.split(";")[0], "Prometheus text format"))
    async def prometheus_metrics():
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    def model_card(name: str) -> dict:
        return {"id": name, "object": "model", "created": created, "owned_by": "akunu"}

    @app.get("/v1/models", responses=ok(ModelList))
    async def list_models():
        return {"object": "list", "data": [model_card(n) for n in registry.names()]}

    @app.get("/v1/models/{name:path}", responses={**ok(ModelCard), **errors(404)})
    async def get_model(name: str):
        return model_card(registry.resolve(name).spec.name)

    @app.post("/tokenize", responses={**ok(TokenizeResponse), **MODEL_ERRORS})
    async def tokenize(body: TokenizeRequest):
        worker = registry.resolve(body.model)
        model = await _loaded_model(worker)
        if (body.prompt is None) == (body.messages is None):
            raise APIError(400, "give exactly one of 'prompt' and 'messages'", param="prompt")

        def run():
            if body.messages is not None:
                text = chat_prompt(model, chat_messages(body), body.add_generation_prompt)
                return model.tokenizer.encode(text, add_special=False, parse_special=True)
            return model.tokenizer.encode(body.prompt, add_special=body.add_special_tokens, parse_special=True)

        tokens = await run_in_threadpool(run)
        return {"tokens": tokens, "count": len(tokens), "max_model_len": model.context_length}

    @app.post("/detokenize", responses={**ok(DetokenizeResponse), **MODEL_ERRORS})
    async def detokenize(body: DetokenizeRequest):
        worker = registry.resolve(body.model)
        model = await _loaded_model(worker)
        vocab = model.config["vocab_size"]
        bad = [t for t in body.tokens if not 0 <= t < vocab]
        if bad:
            raise APIError(400, f"token {bad[0]} is outside the vocabulary [0, {vocab})", param="tokens")
        return {"prompt": model.tokenizer.decode(body.tokens)}

    # --- generation routes ------------------------------------------------------------------

    @app.post("/v1/chat/completions", responses={**ok(ChatCompletion, ChatCompletionChunk), **MODEL_ERRORS})
    async def chat_completions(body: ChatCompletionRequest, request: Request):
        worker = registry.resolve(body.model)
        model = await _loaded_model(worker)

        def plan_it() -> tuple[Plan, Optional[ToolSession]]:
            messages = chat_messages(body)
            tools = tool_session(body, model, messages)
            grammar = tools.grammar if tools is not None else None
            if grammar is None:
                grammar = response_grammar(body)
            prompt = tools.prompt if tools is not None else chat_prompt(model, messages)
            return chat_plan(body, model, config, prompt, grammar), tools

        plan, tools = await run_in_threadpool(plan_it)
        job = _submit(worker, plan, metrics)
        route = "/v1/chat/completions"
        if body.stream:
            writer = ChunkWriter("chat.completion.chunk", worker.spec.name, fingerprint(worker),
                                 bool(body.stream_options and body.stream_options.include_usage))
            return await _stream(request, job, plan, writer, ChatChoices(model, tools), worker, metrics, route)
        texts, logprobs, ends = await _collect(request, job, plan, worker, metrics, route)
        choices = []
        for i in sorted(ends):
            message, finish = {"role": "assistant", "content": texts[i]}, ends[i].finish_reason
            if tools is not None:
                reply = tools.parse(texts[i])
                message, finish = reply.message(), reply.finish_reason(finish)
            choices.append({"index": i, "message": {**message, "refusal": None},
                            "logprobs": chat_logprobs(model.tokenizer, logprobs[i]) if plan.logprobs is not None
                            else None, "finish_reason": finish})
        return {"id": new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
                "model": worker.spec.name, "system_fingerprint": fingerprint(worker), "choices": choices,
                "usage": _usage(plan, ends)}

    @app.post("/v1/completions", responses={**ok(Completion, CompletionChunk), **MODEL_ERRORS})
    async def completions(body: CompletionRequest, request: Request):
        worker = registry.resolve(body.model)
        model = await _loaded_model(worker)
        plan = await run_in_threadpool(completion_plan, body, model, config)
        echo = [model.tokenizer.decode(p) for p in plan.prompts] if body.echo else None
        job = _submit(worker, plan, metrics)
        route = "/v1/completions"
        if body.stream:
            writer = ChunkWriter("text_completion", worker.spec.name, fingerprint(worker),
                                 bool(body.stream_options and body.stream_options.include_usage))
            return await _stream(request, job, plan, writer, CompletionChoices(model, echo, plan.n), worker,
                                 metrics, route)
        texts, logprobs, ends = await _collect(request, job, plan, worker, metrics, route)
        choices = []
        for i in sorted(ends):
            prefix = echo[i // plan.n] if echo else ""
            choices.append({"index": i, "text": prefix + texts[i], "finish_reason": ends[i].finish_reason,
                            "logprobs": completion_logprobs(model.tokenizer, logprobs[i], 0)
                            if plan.logprobs is not None else None})
        return {"id": new_id("cmpl"), "object": "text_completion", "created": int(time.time()),
                "model": worker.spec.name, "system_fingerprint": fingerprint(worker), "choices": choices,
                "usage": _usage(plan, ends)}

    return app


# --- running a plan ---------------------------------------------------------------------------

async def _loaded_model(worker: ModelWorker) -> Model:
    """The worker's model, loaded again on its thread first if it was unloaded while idle."""
    model = worker.model
    if model is not None:
        return model
    job = Job(lambda model, job: None, asyncio.get_running_loop())
    _submit_job(worker, job)
    async for _ in _events(job):
        pass
    if worker.model is None:
        raise APIError(503, f"model {worker.spec.name!r} could not be loaded", code="model_unavailable")
    return worker.model


def _submit_job(worker: ModelWorker, job: Job) -> None:
    try:
        worker.submit(job)
    except QueueFull as e:
        raise APIError(429, str(e), code="queue_full", headers={"Retry-After": str(e.retry_after)}) from None


def _submit(worker: ModelWorker, plan: Plan, metrics: ServerMetrics) -> Job:
    job = Job(lambda model, job: run_plan(model, plan, job), asyncio.get_running_loop())
    try:
        _submit_job(worker, job)
    except APIError:
        metrics.rejected.labels(worker.spec.name).inc()
        raise
    return job


def _as_api_error(e: BaseException) -> APIError:
    if isinstance(e, APIError):
        return e
    if isinstance(e, ContextOverflowError):
        return APIError(400, f"the prompt and its completion do not fit the context: {e}",
                        code="context_length_exceeded")
    if isinstance(e, (GrammarError, ValueError)):
        return APIError(400, str(e))
    return APIError(500, f"internal error: {type(e).__name__}: {e}")


async def _events(job: Job, request: Optional[Request] = None) -> AsyncIterator[tuple[str, object]]:
    """The job's events until it is done; an error event is raised as an APIError. With `request`,
    a client that disconnects cancels the job (checked every half second while waiting)."""
    while True:
        try:
            kind, payload = await asyncio.wait_for(job.events.get(), 0.5)
        except asyncio.TimeoutError:
            if request is not None and await request.is_disconnected():
                job.cancel()
            continue
        if kind == "done":
            return
        if kind == "error":
            raise _as_api_error(payload)
        yield kind, payload


def _usage(plan: Plan, ends: dict[int, End]) -> dict:
    firsts = [ends[i] for i in ends if i % plan.n == 0]
    return usage(list(ends.values()), sum(len(p) for p in plan.prompts), sum(e.cached_tokens for e in firsts))


def _log_line(request_state, worker: ModelWorker, ends: dict[int, End]) -> None:
    if not ends:
        return
    e = ends[min(ends)]
    prefilled = max(e.prompt_tokens - e.cached_tokens, 0)
    prefill = prefilled * 1000 / e.prefill_ms if e.prefill_ms > 0 else 0
    decode = e.completion_tokens * 1000 / e.decode_ms if e.decode_ms > 0 else 0
    completion = sum(x.completion_tokens for x in ends.values())
    request_state.log = (f"model={worker.spec.name} prompt={e.prompt_tokens} cached={e.cached_tokens} "
                         f"completion={completion} prefill={prefill:.0f} t/s decode={decode:.0f} t/s "
                         f"finish={','.join(sorted({x.finish_reason for x in ends.values()}))}")


def _record(metrics: ServerMetrics, worker: ModelWorker, route: str, plan: Plan, ends: dict[int, End],
            started: float) -> None:
    name = worker.spec.name
    metrics.prompt_tokens.labels(name).inc(sum(len(p) for p in plan.prompts))
    metrics.cached_tokens.labels(name).inc(sum(e.cached_tokens for i, e in ends.items() if i % plan.n == 0))
    metrics.completion_tokens.labels(name).inc(sum(e.completion_tokens for e in ends.values()))
    metrics.latency.labels(name, route).observe(time.monotonic() - started)


async def _collect(request: Request, job: Job, plan: Plan, worker: ModelWorker, metrics: ServerMetrics, route: str):
    """Every choice's text, logprobs and end, for a response sent all at once."""
    started = time.monotonic()
    texts, logprobs, ends = defaultdict(str), defaultdict(list), {}
    first = True
    async for kind, p in _events(job, request):
        if kind == "delta":
            if first:
                metrics.first_token.labels(worker.spec.name).observe(time.monotonic() - job.submitted_at)
                first = False
            texts[p.index] += p.text
            logprobs[p.index] += p.logprobs or []
        elif kind == "choice_end":
            ends[p.index] = p
    if job.cancelled.is_set():
        raise APIError(499, "the client closed the request")
    _record(metrics, worker, route, plan, ends, started)
    _log_line(request.state, worker, ends)
    return texts, logprobs, ends


async def _stream(request: Request, job: Job, plan: Plan, writer: ChunkWriter, choices, worker: ModelWorker,
                  metrics: ServerMetrics, route: str) -> Response:
    """A streamed response; `choices` (ChatChoices, CompletionChoices) turns events into the
    choices of chunks. The first event is awaited before answering, so that an error before any
    text (a prompt that does not fit, a grammar the engine rejects) is an HTTP error, not a 200
    with an error event."""
    started = time.monotonic()
    # Until the response starts, a client that leaves (while its request waits in the queue, or
    # during its prefill) is noticed by polling; after that by the response's own disconnect watch.
    waiting = _events(job, request)
    try:
        first = await waiting.__anext__()
    except StopAsyncIteration:
        first = None
    except APIError:
        job.cancel()
        raise
    finally:
        await waiting.aclose()
    events = _events(job)

    async def all_events():
        if first is not None:
            yield first
            async for e in events:
                yield e

    async def body():
        ends: dict[int, End] = {}
        opened = set()
        sent_tokens, done = 0, False
        try:
            async for kind, p in all_events():
                if not opened:
                    metrics.first_token.labels(worker.spec.name).observe(time.monotonic() - job.submitted_at)
                if p.index not in opened:
                    opened.add(p.index)
                    yield writer.chunk(choices.opening(p.index))
                if kind == "delta":
                    sent_tokens += len(p.tokens)
                    parts = choices.delta(p)
                else:
                    ends[p.index] = p
                    parts = choices.end(p)
                for part in parts:
                    yield writer.chunk([part])
            if writer.include_usage:
                yield writer.chunk([], _usage(plan, ends))
            yield sse("[DONE]")
            done = True
            _record(metrics, worker, route, plan, ends, started)
            _log_line(request.state, worker, ends)
        except APIError as e:  # after the 200 went out: the error as the last event
            done = True
            yield sse(error_body(e.status, e.message, e.param, e.code))
        finally:
            job.cancel()  # a client that disconnected stops its generation here
            if not done:
                request.state.log = (f"model={worker.spec.name} cancelled: the client left after {sent_tokens} "
                                     "generated tokens")

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class ChatChoices:
    """chat.completion.chunk choices: the role first, content deltas, tool calls (parsed when the
    reply is complete; the text that may be a call is held back meanwhile), the finish reason."""

    def __init__(self, model: Model, tools: Optional[ToolSession]):
        self.tokenizer, self.tools = model.tokenizer, tools
        self.parsers = {}

    def opening(self, index: int) -> list[dict]:
        if self.tools is not None:
            self.parsers[index] = self.tools.stream_parser()
        return [{"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                 "finish_reason": None}]

    def delta(self, d) -> list[dict]:
        text = self.parsers[d.index].feed(d.text) if self.tools is not None else d.text
        if not text and d.logprobs is None:
            return []
        return [{"index": d.index, "delta": {"content": text}, "logprobs": chat_logprobs(self.tokenizer, d.logprobs),
                 "finish_reason": None}]

    def end(self, e: End) -> list[dict]:
        out, finish = [], e.finish_reason
        if self.tools is not None:
            reply = self.parsers.pop(e.index).finish()
            finish = reply.finish_reason(finish)
            if reply.content:
                out.append({"index": e.index, "delta": {"content": reply.content}, "logprobs": None,
                            "finish_reason": None})
            if reply.tool_calls:
                calls = [{"index": k, **c.to_dict()} for k, c in enumerate(reply.tool_calls)]
                out.append({"index": e.index, "delta": {"tool_calls": calls}, "logprobs": None, "finish_reason": None})
        out.append({"index": e.index, "delta": {}, "logprobs": None, "finish_reason": finish})
        return out


class CompletionChoices:
    """text_completion chunk choices (the echoed prompt first, with echo)."""

    def __init__(self, model: Model, echo: Optional[list[str]], n: int):
        self.tokenizer, self.echo, self.n = model.tokenizer, echo, n

    def opening(self, index: int) -> list[dict]:
        return [{"index": index, "text": self.echo[index // self.n] if self.echo else "", "logprobs": None,
                 "finish_reason": None}]

    def delta(self, d) -> list[dict]:
        return [{"index": d.index, "text": d.text, "logprobs": completion_logprobs(self.tokenizer, d.logprobs, 0),
                 "finish_reason": None}]

    def end(self, e: End) -> list[dict]:
        return [{"index": e.index, "text": "", "logprobs": None, "finish_reason": e.finish_reason}]


async def _unload_idle_models(registry: ModelRegistry, idle_seconds: float) -> None:
    if idle_seconds <= 0:
        return
    while True:
        await asyncio.sleep(min(idle_seconds / 4, 5.0))
        await asyncio.to_thread(registry.unload_idle, idle_seconds)
