"""Errors as OpenAI shapes them: {"error": {"message", "type", "param", "code"}} with the HTTP
status that fits, so clients (the openai package raises BadRequestError, NotFoundError, ...) see
what went wrong."""

from __future__ import annotations

import re
from typing import Optional

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import protocol
from .protocol import UNSUPPORTED

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 405: "invalid_request_error", 413: "invalid_request_error",
          429: "rate_limit_error", 500: "server_error", 503: "service_unavailable"}


class APIError(Exception):
    def __init__(self, status: int, message: str, *, param: Optional[str] = None, code: Optional[str] = None,
                 headers: Optional[dict] = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.headers = status, message, param, code, headers

    def body(self) -> dict:
        return error_body(self.status, self.message, self.param, self.code)


def error_body(status: int, message: str, param: Optional[str] = None, code: Optional[str] = None) -> dict:
    return {"error": {"message": message, "type": _TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}


def error_response(error: APIError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


# The names pydantic puts in an error's location for the member of a union that was tried: a type
# ("str", "list[int]", "literal['none','auto']", "function-after[...]") or a model's class name.
_UNION_MEMBER = re.compile(r"^(str|int|float|bool|none|any|[a-z][a-z-]*\[.*\])$")
_MODEL_NAMES = {m.__name__ for m in vars(protocol).values() if isinstance(m, type) and issubclass(m, BaseModel)}


def _dotted(loc) -> str:
    """pydantic's location ("body", "messages", 0, "content") as OpenAI's param ("messages[0].content"),
    without the union members pydantic names in it ("tool_choice", "literal[...]")."""
    out = ""
    for i, part in enumerate(loc):
        if part == "body" and i == 0:
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and not _UNION_MEMBER.match(str(part)) and str(part) not in _MODEL_NAMES:
            out += ("." if out else "") + str(part)
    return out


def validation_error(exc: RequestValidationError) -> APIError:
    """The first problem pydantic found, in words (all of them in the message when several)."""
    messages, first_param = [], None
    for err in exc.errors():
        param = _dotted(err.get("loc", ()))
        if err.get("type") == "extra_forbidden":
            field = param.rsplit(".", 1)[-1]
            text = UNSUPPORTED.get(field) or f"unsupported field '{param}'"
        elif err.get("type") == "json_invalid":
            text = f"the request body is not valid JSON: {err.get('ctx', {}).get('error', err.get('msg'))}"
        elif err.get("type") == "missing":
            text = f"missing required field '{param}'"
        else:
            text = f"'{param}': {err.get('msg')}" if param else str(err.get("msg"))
        if text not in messages:
            messages.append(text)
        first_param = first_param or param or None
    return APIError(400, "; ".join(messages[:5]) or "invalid request", param=first_param)


def install_error_handlers(app) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError):
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        return error_response(validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        message = {404: f"no route {request.method} {request.url.path}",
                   405: f"method {request.method} is not allowed on {request.url.path}"}.get(exc.status_code,
                                                                                             str(exc.detail))
        return error_response(APIError(exc.status_code, message, headers=exc.headers))  # 405's Allow

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        return error_response(APIError(500, f"internal error: {type(exc).__name__}: {exc}"))
