"""The server's OpenAPI description (GET /openapi.json): what each route answers, successes and
errors, so that clients and API fuzzers (the tests run schemathesis against it) can check the
responses. The models here only document; the routes build their bodies as plain dicts
(responses.py), and the fuzz test holds the two together.

FastAPI would declare a 422 with its own error shape on every route with a body; this server
answers validation problems with OpenAI's 400 instead (errors.py), so describe() replaces those."""

from __future__ import annotations

from typing import Any, Literal, Optional

from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .middleware import OPEN_PATHS


# --- errors ----------------------------------------------------------------------------------

class ErrorDetail(BaseModel):
    message: str
    type: str
    param: Optional[str]
    code: Optional[str]


class ErrorResponse(BaseModel):
    """OpenAI's error body, for every 4xx and 5xx the server sends."""

    error: ErrorDetail


_ERROR_TEXT = {
    400: "The request is malformed or asks for something the server does not do (the message says what)",
    401: "Missing or wrong API key",
    404: "No such model",
    413: "The request body is over the server's limit",
    429: "The model's queue is full; retry after the Retry-After header's seconds",
    503: "The model could not be loaded",
}


def errors(*statuses: int) -> dict:
    return {s: {"model": ErrorResponse, "description": _ERROR_TEXT[s]} for s in statuses}


# --- successes -------------------------------------------------------------------------------

class ModelState(BaseModel):
    loaded: bool
    waiting: int
    busy: bool


class Health(BaseModel):
    status: Literal["ok"]
    models: dict[str, ModelState]


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class TokenizeResponse(BaseModel):
    tokens: list[int]
    count: int
    max_model_len: int


class DetokenizeResponse(BaseModel):
    prompt: str


class PromptTokensDetails(BaseModel):
    cached_tokens: int


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(BaseModel):
    content: list[TokenLogprob]
    refusal: Optional[str]


class ResponseFunctionCall(BaseModel):
    name: str
    arguments: str


class ResponseToolCall(BaseModel):
    id: str
    type: Literal["function"]
    function: ResponseFunctionCall


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: Optional[str]
    refusal: Optional[str] = None
    tool_calls: Optional[list[ResponseToolCall]] = None


FinishReason = Literal["stop", "length", "tool_calls"]


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: Optional[ChatLogprobs]
    finish_reason: FinishReason


class ChatCompletion(BaseModel):
    """The answer with stream: false; with stream: true, server-sent events of chat.completion.chunk
    objects, then `data: [DONE]`."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChoice]
    usage: Usage


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: Optional[CompletionLogprobs]
    finish_reason: FinishReason


class Completion(BaseModel):
    """The answer with stream: false; with stream: true, server-sent events of text_completion
    objects, then `data: [DONE]`."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[CompletionChoice]
    usage: Usage


class ChunkDelta(BaseModel):
    role: Optional[Literal["assistant"]] = None
    content: Optional[str] = None
    tool_calls: Optional[list[dict[str, Any]]] = None


class ChatChunkChoice(BaseModel):
    index: int
    delta: ChunkDelta
    logprobs: Optional[ChatLogprobs]
    finish_reason: Optional[FinishReason]


class ChatCompletionChunk(BaseModel):
    """One server-sent event of a chat completion with stream: true."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChunkChoice]
    usage: Optional[Usage] = None  # only with stream_options.include_usage: null but on the last chunk


class CompletionChunkChoice(BaseModel):
    index: int
    text: str
    logprobs: Optional[CompletionLogprobs]
    finish_reason: Optional[FinishReason]


class CompletionChunk(BaseModel):
    """One server-sent event of a text completion with stream: true."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[CompletionChunkChoice]
    usage: Optional[Usage] = None


# Models the document refers to by name without FastAPI having seen them (describe() adds them).
_EXTRA_MODELS = (ErrorResponse, ChatCompletionChunk, CompletionChunk)


def _ref(model: type[BaseModel]) -> dict:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _events_of(chunk: type[BaseModel]) -> dict:
    """A server-sent event of a streamed answer, as schemathesis and OpenAPI 3.2's itemSchema read
    them: its data is a `chunk`, an error (after the 200 went out) or the closing [DONE]."""
    return {"type": "object", "required": ["data"], "properties": {"data": {
        "type": "string",
        "if": {"const": "[DONE]"},
        "else": {"contentMediaType": "application/json",
                 "contentSchema": {"anyOf": [_ref(chunk), _ref(ErrorResponse)]}}}}}


def ok(model: type[BaseModel], stream_chunk: Optional[type[BaseModel]] = None) -> dict:
    """The 200 of a route answering `model` as JSON, and with stream: true server-sent events of
    `stream_chunk`s when given."""
    response: dict[str, Any] = {"model": model, "description": "Success"}
    if stream_chunk is not None:
        response["content"] = {"text/event-stream": {"schema": _events_of(stream_chunk)}}
    return {200: response}


def text_ok(media_type: str, description: str) -> dict:
    return {200: {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}}


# --- the document ----------------------------------------------------------------------------

def describe(app, api_key_required: bool) -> dict:
    """The OpenAPI document of `app`: FastAPI's, without its 422s (this server answers 400), with a
    401 and the bearer scheme on every route but OPEN_PATHS when the server has an API key."""
    spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    for path, operations in spec.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if responses.pop("422", None) is not None:
                responses.setdefault("400", _error_ref(400))
            if api_key_required and path not in OPEN_PATHS:
                responses.setdefault("401", _error_ref(401))
                operation["security"] = [{"bearer": []}]
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    _, defs = models_json_schema([(m, "serialization") for m in _EXTRA_MODELS],
                                 ref_template="#/components/schemas/{model}")
    for name, definition in defs["$defs"].items():
        schemas.setdefault(name, definition)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    if api_key_required:
        spec["components"].setdefault("securitySchemes", {})["bearer"] = {
            "type": "http", "scheme": "bearer"}
    return spec


def _error_ref(status: int) -> dict:
    return {"description": _ERROR_TEXT[status],
            "content": {"application/json": {"schema": _ref(ErrorResponse)}}}
