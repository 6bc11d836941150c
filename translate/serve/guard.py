"""`RequestGuard`, pure ASGI, sees every request before FastAPI reads its body: the API key,
the body limit counted as bytes arrive, the drain, every status counted."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from fastapi import HTTPException
from fastapi.responses import Response
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from translate.serve.schema import (
    CORS_HEADERS,
    KEY_IN_BODY,
    KEY_REQUIRED,
    PROTECTED,
    TRANSLATE_ROUTES,
    error,
)
from translate.serve.service import Service, header_key

CORS = [(name.lower().encode(), value.encode()) for name, value in CORS_HEADERS.items()]

log = logging.getLogger("translate.serve")

# The status counted for a request whose client left before it could be answered (nginx's
# "client closed request"); never sent.
CLIENT_LEFT = 499


@dataclass(frozen=True)
class BodyLimit:
    """The bytes a request body may hold, and the flag that sets them (the 413 names it)."""

    max_bytes: int
    flag: str = "--max-body-bytes"


@dataclass(frozen=True)
class RouteLimit:
    """A route whose bodies have a limit of their own (an upload's) instead of --max-body-bytes."""

    path: str
    limit: BodyLimit


class BodyTooLarge(HTTPException):
    """Raised while FastAPI reads a body, so FastAPI passes it on as it is (it turns other
    errors there into 400); Connection: close, so the rest of the body is never read."""

    def __init__(self, limit: BodyLimit) -> None:
        super().__init__(
            413,
            f"the request body is over the limit of {limit.max_bytes} bytes ({limit.flag})",
            headers={"Connection": "close"},
        )


class GuardedExchange:
    """One request and its response as `RequestGuard` sees them: the body's bytes counted as
    they arrive, the response's status kept for the metrics."""

    def __init__(self, receive: Receive, send: Send, limit: BodyLimit) -> None:
        self._receive, self._send, self.limit = receive, send, limit
        self.received = 0
        self.status: int | None = None

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit.max_bytes:
                raise BodyTooLarge(self.limit)
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            message = {**message, "headers": [*message.get("headers", []), *CORS]}
        await self._send(message)


class RequestGuard:
    """ASGI middleware in front of every route, before any body is read: LibreTranslate's CORS
    headers on every answer (and a preflight answered), the API key of a header on the protected
    routes, the body limit (by Content-Length, else counted as a chunked body
    arrives), new translations refused while draining, a JSON 500 for an unexpected fault
    (its traceback in the log, not to the client), a client that leaves mid-body counted as
    499 and logged in one line, and every status counted in the metrics. `routes` are those whose
    bodies have a limit of their own."""

    def __init__(self, app: ASGIApp, service: Service, routes: tuple[RouteLimit, ...] = ()) -> None:
        self.app, self.service, self.routes = app, service, routes

    def body_limit(self, path: str) -> BodyLimit:
        for route in self.routes:
            if route.path == path:
                return route.limit
        return BodyLimit(self.service.settings.max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, path = time.perf_counter(), scope["path"]
        exchange = GuardedExchange(receive, send, self.body_limit(path))
        refusal = self.refusal(scope)
        try:
            if refusal is not None:
                await refusal(scope, receive, exchange.send)
            else:
                await self.app(scope, exchange.receive, exchange.send)
        except BodyTooLarge as fault:  # read outside FastAPI's body parsing (it never is today)
            if exchange.status is None:
                await error(fault.status_code, fault.detail, **fault.headers)(
                    scope, receive, exchange.send
                )
        except ClientDisconnect:  # gone before its body arrived: nothing to answer, no fault
            log.info(
                "translate-serve: %s %s: the client left before sending its body",
                scope["method"],
                path,
            )
            exchange.status = exchange.status or CLIENT_LEFT
        except Exception:
            log.exception("translate-serve: %s %s failed", scope["method"], path)
            if exchange.status is None:
                await error(500, "internal error: the server's log says more")(
                    scope, receive, exchange.send
                )
        self.service.metrics.request(path, exchange.status or 500, time.perf_counter() - started)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer a request gets before anything of its body is read, or None to go on."""
        headers, service, path = Headers(scope=scope), self.service, scope["path"]
        if scope["method"] == "OPTIONS":  # a browser's preflight: the CORS headers say it all
            return Response(status_code=200)
        body_key = path in KEY_IN_BODY and not header_key(headers)
        if path in PROTECTED and not body_key and not service.key_accepted(headers):
            return error(
                401,
                KEY_REQUIRED,
                Connection="close",
            )
        length, limit = headers.get("content-length"), self.body_limit(path)
        if length is not None and length.isdigit() and int(length) > limit.max_bytes:
            return error(
                413,
                f"the request body of {length} bytes is over the limit of "
                f"{limit.max_bytes} bytes ({limit.flag})",
                Connection="close",
            )
        if service.draining and scope["path"] in TRANSLATE_ROUTES:
            return error(
                503,
                "the server is shutting down; retry",
                **{"Retry-After": "5", "Connection": "close"},
            )
        return None
