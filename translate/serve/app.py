"""translate-serve's HTTP application: routes, validation, limits, the API key, metrics and the drain.

FastAPI validates the JSON and writes the OpenAPI page, whose assets fastapi-offline serves from
this process (no CDN); prometheus_client writes /metrics; uvicorn serves. `RequestGuard` sees
every request before FastAPI reads its body: the API key, the body limit counted as bytes
arrive, the drain, every status counted. What none of them does, batching independent clients'
sentences, is `translate.serve.batching` with `translate.serve.continuous`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor
from dataclasses import dataclass
from importlib import resources

import uvicorn
from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi_offline import FastAPIOffline
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as AnyHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from translate.decode import pipeline
from translate.decode.settings import SearchSettings
from translate.defaults import LENGTH_PENALTY_RANGE
from translate.errors import UsageError
from translate.model.checkpoint import Translator
from translate.serve.batching import Batcher, ContinuousBatcher, QueueFull, ShuttingDown
from translate.serve.continuous import ContinuousTranslator
from translate.serve.worker import translate_with

WARM_UP_LINE = "Hello."
ROUTES = ("/", "/translate", "/health", "/ready", "/info", "/metrics", "/docs", "/openapi.json")
PROTECTED = ("/translate", "/info", "/metrics")  # need the API key where one is set
MAX_ERRORS_LISTED = 5  # of a request's validation errors, in its one-line message
log = logging.getLogger("translate.serve")


@dataclass
class ServeSettings:
    batch_tokens: int = 4096
    max_wait_ms: float = 10.0
    max_lines: int = 256  # per request
    max_line_chars: int = 4000
    max_body_bytes: int = 1 << 20
    max_queued_lines: int = 4096
    max_beam: int = 16
    batching: str = "continuous"  # or "batch": each batch translated to its end before the next
    api_key: str | None = None
    checkpoint_digest: str = ""
    drain_seconds: float = 30.0  # after SIGTERM, for the requests in flight; then 503


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: list[StrictStr] = Field(
        description="lines to translate; one translation comes back for each, in order"
    )
    beam: StrictInt | None = Field(None, ge=1, description="beam size (default: the checkpoint's)")
    length_penalty: StrictFloat | None = Field(
        None,
        ge=LENGTH_PENALTY_RANGE[0],
        le=LENGTH_PENALTY_RANGE[1],
        allow_inf_nan=False,
        description="GNMT alpha (default: the checkpoint's)",
    )
    target_lang: StrictStr | None = Field(
        None, description="output language of a many-to-many model"
    )
    source_lang: StrictStr | None = Field(None, description="the input's language, where known")


class TranslateResponse(BaseModel):
    translations: list[str]
    beam: int
    length_penalty: float
    target_lang: str | None
    seconds: float


class ErrorResponse(BaseModel):
    error: str


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()  # one per app: tests build several apps in one process
        self.requests = Counter(
            "translate_requests",
            "HTTP requests by path and status",
            ["path", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "translate_request_seconds",
            "request latency, /translate",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.sentences = Counter("translate_sentences", "lines translated", registry=self.registry)
        self.tokens = Counter(
            "translate_source_tokens", "source tokens translated", registry=self.registry
        )
        self.batch_size = Histogram(
            "translate_batch_sentences",
            "sentences per batch",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "translate_queued_lines", "lines waiting for a batch", registry=self.registry
        )
        # Its rate is the model's utilisation: how much of the time it had a batch to translate.
        self.model_seconds = Counter(
            "translate_model_seconds",
            "seconds the model spent translating batches",
            registry=self.registry,
        )

    def batch(
        self, sentences: int, tokens: int, seconds: float, searching: int | None = None
    ) -> None:
        """A batch translated; with continuous batching, a turn of the running search that
        answered `sentences` lines and ended with `searching` lines in it (its batch size)."""
        self.sentences.inc(sentences)
        self.tokens.inc(tokens)
        self.batch_size.observe(sentences if searching is None else searching)
        self.model_seconds.inc(seconds)

    def request(self, path: str, status: int, seconds: float) -> None:
        self.requests.labels(
            path if path in ROUTES else "other", str(status)
        ).inc()  # bounded label values
        if path == "/translate":
            self.latency.observe(seconds)


def error(status: int, message: str, **headers: str) -> JSONResponse:
    """Every error the server sends has this one shape: {"error": message}."""
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


class BodyTooLarge(HTTPException):
    """Raised while FastAPI reads a body, so FastAPI passes it on as it is (it turns other
    errors there into 400); Connection: close, so the rest of the body is never read."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request body is over the limit of {limit} bytes (--max-body-bytes)",
            headers={"Connection": "close"},
        )


def validation_message(exc: RequestValidationError) -> str:
    """FastAPI's list of faults as one line: `beam: Input should be a valid integer; ...`."""
    faults = []
    for fault in exc.errors():
        place = [part for part in fault["loc"] if part != "body"]
        if fault["type"] == "json_invalid":
            faults.append(
                f"the body is not valid JSON (at character {place[0] if place else 0}: "
                f"{fault.get('ctx', {}).get('error', fault['msg'])})"
            )
            continue
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in place
        ).lstrip(".")
        faults.append(f"{where or 'the body'}: {fault['msg']}")
    more = len(faults) - MAX_ERRORS_LISTED
    return "; ".join(faults[:MAX_ERRORS_LISTED]) + (f" (and {more} more)" if more > 0 else "")


def invalid_unicode(line: str) -> int | None:
    """The index of a lone surrogate (JSON can escape one; no text encoding can hold it), or None."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as fault:
        return fault.start
    return None


class Service:
    """What the routes share: the model's translator, the settings, the metrics, the batcher,
    and where the server is in its life (loading, ready, draining)."""

    def __init__(
        self,
        translator: Translator,
        settings: ServeSettings,
        worker: tuple[Callable[[], Executor], Callable] | None,
    ) -> None:
        self.translator, self.settings, self.worker = translator, settings, worker
        page = resources.files("translate.serve").joinpath("web", "index.html").read_text("utf-8")
        self.page = page.replace("__API_KEY_REQUIRED__", "true" if settings.api_key else "false")
        self.metrics = Metrics()
        self.defaults = translator.search_defaults()
        # The checkpoint's languages, read once: requests are checked against them.
        self.multilingual = translator.multilingual()
        self.targets = translator.target_languages()
        self.sources = sorted({source for source, _ in translator.directions()})
        self.batcher: Batcher | None = None
        self.ready = False
        self.draining = False

    async def start(self) -> None:
        """The batcher and its worker started, and a warm-up line translated: then ready."""
        continuous = self.settings.batching == "continuous"
        if self.worker:
            new_worker, run = self.worker
        else:
            new_worker, run = (
                None,
                (
                    ContinuousTranslator(self.translator, self.settings.batch_tokens).advance
                    if continuous
                    else self.translate_here
                ),
            )
        wait = self.settings.max_wait_ms / 1000
        if continuous:
            self.batcher = ContinuousBatcher(
                run,
                self.count_tokens,
                wait,
                self.settings.max_queued_lines,
                on_batch=self.metrics.batch,
                new_worker=new_worker,
            )
        else:
            self.batcher = Batcher(
                run,
                self.count_tokens,
                self.settings.batch_tokens,
                wait,
                self.settings.max_queued_lines,
                on_batch=self.metrics.batch,
                new_worker=new_worker,
            )
        self.batcher.start()
        self.metrics.queue_depth.set_function(lambda: self.batcher.queued_lines)
        first_target = self.targets[0] if self.multilingual else None
        await self.batcher.submit(
            [WARM_UP_LINE],
            self.search_settings(TranslateRequest(text=[], target_lang=first_target)),
        )
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        if self.batcher is not None:
            await self.batcher.stop()

    def begin_drain(self) -> None:
        """On SIGTERM: no new translations, and those in flight get `drain_seconds`; whatever is
        still unanswered then gets 503 with Retry-After (uvicorn would cancel it: a 500)."""
        if self.draining or self.batcher is None:
            return
        self.draining, self.ready = True, False
        message = (
            f"the server is shutting down and did not finish this request within its drain time of "
            f"{self.settings.drain_seconds:g} s (--drain-seconds); retry"
        )
        asyncio.get_running_loop().call_later(
            self.settings.drain_seconds, self.batcher.fail_all, ShuttingDown(message)
        )

    def translate_here(self, lines: list[str], key: SearchSettings) -> tuple[list[str], float]:
        return translate_with(self.translator, lines, key, self.settings.batch_tokens)

    def count_tokens(self, line: str) -> int:
        return len(self.translator.vocab.source.processor.encode(line)) + 1

    def key_accepted(self, headers: Headers) -> bool:
        if self.settings.api_key is None:
            return True
        given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        # compare_digest: the time taken does not reveal how much of the key was right
        return hmac.compare_digest(given.encode(), self.settings.api_key.encode())

    def search_settings(self, body: TranslateRequest) -> SearchSettings:
        """The request's search settings, its languages checked against the model's; HTTPException
        (422) naming the field at fault."""
        if body.beam is not None and body.beam > self.settings.max_beam:
            raise HTTPException(
                422,
                f"beam {body.beam} is over this server's limit of {self.settings.max_beam} "
                "(--max-beam)",
            )
        targets, sources = self.targets, self.sources
        if body.target_lang is not None and targets and body.target_lang not in targets:
            raise HTTPException(
                422,
                f"target_lang {body.target_lang!r}: this model translates into "
                f"{', '.join(targets)}",
            )
        if body.source_lang is not None and sources and body.source_lang not in sources:
            raise HTTPException(
                422,
                f"source_lang {body.source_lang!r}: this model translates from "
                f"{', '.join(sources)}",
            )
        if body.target_lang is None and self.multilingual and len(targets) > 1:
            raise HTTPException(
                422,
                f"target_lang is required: this many-to-many model translates into "
                f"{', '.join(targets)}",
            )
        try:
            direction = pipeline.direction_for(self.translator, body.target_lang, body.source_lang)
        except (
            UsageError
        ) as fault:  # the checks above should leave none; never the checkpoint's path
            raise HTTPException(
                422, str(fault).replace(str(self.translator.path), "this model")
            ) from None
        return SearchSettings(
            beam=body.beam or self.defaults["beam"],
            length_penalty=(
                self.defaults["length_penalty"]
                if body.length_penalty is None
                else body.length_penalty
            ),
            target_lang=direction.target_lang,
            source_lang=body.source_lang,
        )

    def check_lines(self, text: list[str]) -> None:
        limits = self.settings
        if len(text) > limits.max_lines:
            raise HTTPException(
                413,
                f"text has {len(text)} lines; at most {limits.max_lines} a request (--max-lines)",
            )
        for index, line in enumerate(text):
            if len(line) > limits.max_line_chars:
                raise HTTPException(
                    413,
                    f"text[{index}] has {len(line)} characters; at most "
                    f"{limits.max_line_chars} a line (--max-line-chars)",
                )
            position = invalid_unicode(line)
            if position is not None:
                raise HTTPException(
                    422,
                    f"text[{index}] holds a lone surrogate at character {position}, "
                    "which is not Unicode text",
                )

    async def translate(self, body: TranslateRequest) -> TranslateResponse:
        started = time.perf_counter()
        self.check_lines(body.text)
        key = self.search_settings(body)
        try:
            translations = await self.batcher.submit(body.text, key)
        except QueueFull as fault:
            raise HTTPException(
                503, f"the server is busy: {fault}; retry shortly", headers={"Retry-After": "1"}
            ) from None
        except ShuttingDown as fault:
            raise HTTPException(503, str(fault), headers={"Retry-After": "5"}) from None
        except BrokenExecutor:
            raise HTTPException(
                503,
                "the model process stopped while translating this request (killed or out of "
                "memory); a new one is starting, retry shortly",
                headers={"Retry-After": "5"},
            ) from None
        return TranslateResponse(
            translations=translations,
            beam=key.beam,
            length_penalty=key.length_penalty,
            target_lang=key.target_lang,
            seconds=time.perf_counter() - started,
        )

    def info(self) -> dict:
        translator, settings = self.translator, self.settings
        cfg = translator.model.cfg
        return {
            "checkpoint": (translator.path or "")
            .replace("\\", "/")
            .rsplit("/", 1)[-1],  # its name, not where it is
            "checkpoint_sha256": settings.checkpoint_digest,
            "directions": [list(d) for d in translator.directions()],
            "target_languages": self.targets
            if self.multilingual
            else ([translator.languages()[1]] if translator.languages() else []),
            "multilingual": self.multilingual,
            "tie_embeddings": cfg.tie_embeddings,
            "d_model": cfg.d_model,
            "source_vocab_size": len(translator.vocab.source),
            "target_vocab_size": len(translator.vocab.target),
            "joint_vocab": translator.vocab.joint,
            "search_defaults": self.defaults,
            "batching": settings.batching,
            "limits": {
                "max_lines": settings.max_lines,
                "max_line_chars": settings.max_line_chars,
                "max_body_bytes": settings.max_body_bytes,
                "max_beam": settings.max_beam,
                "length_penalty": list(LENGTH_PENALTY_RANGE),
                "drain_seconds": settings.drain_seconds,
            },
        }


class GuardedExchange:
    """One request and its response as `RequestGuard` sees them: the body's bytes counted as
    they arrive, the response's status kept for the metrics."""

    def __init__(self, receive: Receive, send: Send, limit: int) -> None:
        self._receive, self._send, self.limit = receive, send, limit
        self.received = 0
        self.status: int | None = None

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                raise BodyTooLarge(self.limit)
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self._send(message)


class RequestGuard:
    """ASGI middleware in front of every route, before any body is read: the API key on the
    protected routes, the body limit (by Content-Length, else counted as a chunked body
    arrives), new translations refused while draining, a JSON 500 for an unexpected fault
    (its traceback in the log, not to the client), and every status counted in the metrics."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, path = time.perf_counter(), scope["path"]
        exchange = GuardedExchange(receive, send, self.service.settings.max_body_bytes)
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
        except Exception:
            log.exception("translate-serve: %s %s failed", scope["method"], path)
            if exchange.status is None:
                await error(500, "internal error: the server's log says more")(
                    scope, receive, exchange.send
                )
        self.service.metrics.request(path, exchange.status or 500, time.perf_counter() - started)

    def refusal(self, scope: Scope) -> JSONResponse | None:
        """The answer a request gets before anything of its body is read, or None to go on."""
        headers, service = Headers(scope=scope), self.service
        if scope["path"] in PROTECTED and not service.key_accepted(headers):
            return error(
                401,
                "a valid API key is required (header X-API-Key or Authorization: Bearer)",
                Connection="close",
            )
        length = headers.get("content-length")
        if (
            length is not None
            and length.isdigit()
            and int(length) > service.settings.max_body_bytes
        ):
            return error(
                413,
                f"the request body of {length} bytes is over the limit of "
                f"{service.settings.max_body_bytes} bytes (--max-body-bytes)",
                Connection="close",
            )
        if service.draining and scope["path"] == "/translate":
            return error(
                503,
                "the server is shutting down; retry",
                **{"Retry-After": "5", "Connection": "close"},
            )
        return None


router = APIRouter()
ERRORS = {status: {"model": ErrorResponse} for status in (401, 413, 422, 503)}


def service_of(request: Request) -> Service:
    """The application's one state object (`create_app`)."""
    return request.app.state.service


@router.post("/translate", response_model=TranslateResponse, responses=ERRORS)
async def translate(body: TranslateRequest, request: Request) -> TranslateResponse:
    return await service_of(request).translate(body)


@router.get("/health")
async def health() -> dict:
    return {"status": "alive"}


@router.get("/ready")
async def ready(request: Request) -> Response:
    service = service_of(request)
    if service.draining:
        return error(503, "shutting down")
    if not service.ready:
        return error(503, "loading: the model has not translated its warm-up line yet")
    return JSONResponse({"status": "ready"})


@router.get("/info")
async def info(request: Request) -> dict:
    return service_of(request).info()


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    registry = service_of(request).metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index(request: Request) -> str:
    return service_of(request).page


async def http_error(request: Request, exc: AnyHTTPException) -> JSONResponse:
    """FastAPI's and Starlette's own errors (404, 405, ...) in the one shape."""
    return error(exc.status_code, str(exc.detail), **(exc.headers or {}))


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    return error(422, validation_message(exc))


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI):
    await app.state.service.start()
    yield
    await app.state.service.stop()


def create_app(
    translator: Translator,
    settings: ServeSettings,
    worker: tuple[Callable[[], Executor], Callable] | None = None,
) -> FastAPI:
    """The application: the routes above over one `Service` (`app.state.service`); `worker` (a
    function starting an executor, and the function it runs: `worker.advance`, or
    `worker.translate` with `settings.batching` "batch") moves the model out of this process,
    else a thread translates with `translator`."""
    app = FastAPIOffline(
        title="translate-serve",
        lifespan=lifespan,
        redoc_url=None,
        description="Translation with the checkpoint's model; sentences of concurrent requests "
        'are batched. Every error is {"error": message}.',
    )
    app.state.service = Service(translator, settings, worker)
    app.add_middleware(RequestGuard, service=app.state.service)
    app.add_exception_handler(AnyHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.include_router(router)
    return app


class DrainingServer(uvicorn.Server):
    """uvicorn's server that, on SIGTERM or Ctrl-C, starts the service's drain before its own
    shutdown (which stops accepting, then waits for the requests in flight)."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service

    async def shutdown(self, sockets=None) -> None:
        self.service.begin_drain()
        await super().shutdown(sockets)
