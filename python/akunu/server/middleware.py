"""ASGI middleware of the server, outermost first: one log line per request, the API key, the
request body's size limit. Plain ASGI (not BaseHTTPMiddleware) so streamed responses pass through
untouched and the log line is written when the last byte has gone."""

from __future__ import annotations

import hmac
import json
import logging
import time

from .errors import error_body

logger = logging.getLogger("akunu.server")

OPEN_PATHS = ("/health", "/")  # no key needed: the liveness probe, and the chat page (a static file;
                               # its API calls carry the key the user types in)


async def _send_error(send, status: int, message: str, code=None, headers=()) -> None:
    body = json.dumps(error_body(status, message, code=code)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


class RequestLog:
    """`METHOD path status ms` plus what the route left in request.state.log (tokens, speeds);
    counts the request in `counter` (a prometheus Counter labelled route, status)."""

    def __init__(self, app, counter):
        self.app, self.counter = app, counter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.monotonic(), []

        async def send_and_note(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            detail = scope.get("state", {}).get("log", "")
            route = scope.get("route")
            self.counter.labels(getattr(route, "path", "unrouted"), str(status[0]) if status else "-").inc()
            logger.info("%s %s %s %.0f ms%s", scope["method"], scope["path"], status[0] if status else "-",
                        (time.monotonic() - start) * 1000, f" {detail}" if detail else "")


class APIKeyCheck:
    """Every route but OPEN_PATHS needs `Authorization: Bearer <key>`."""

    def __init__(self, app, api_key: str):
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                return await _send_error(send, 401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                         code="invalid_api_key", headers=[(b"www-authenticate", b"Bearer")])
        return await self.app(scope, receive, send)


class BodyLimit:
    """Reads a request's body (at most `limit` bytes, else 413) before the app sees it."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _send_error(send, 413, f"the request body has {int(declared)} bytes; the limit is {self.limit}")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await _send_error(send, 413, f"the request body is over the limit of {self.limit} bytes")
            if not message.get("more_body"):
                break
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        return await self.app(scope, replay, send)
