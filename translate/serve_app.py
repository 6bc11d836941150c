"""translate-serve's HTTP application: routes, limits, the API key and the metrics.

FastAPI validates the JSON (422 naming the field) and writes the OpenAPI page at /docs;
prometheus_client writes /metrics; uvicorn serves and, on SIGTERM, stops accepting and lets
the requests in flight finish. What none of them does, batching independent clients'
sentences (into the model's running search, or into whole batches by a token budget), is
`translate.serve_batching` with `translate.serve_continuous`.
"""

from __future__ import annotations

import contextlib
import hmac
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor
from dataclasses import dataclass
from importlib import resources

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from translate import pipeline
from translate.checkpoint import Translator
from translate.errors import UsageError
from translate.serve_batching import Batcher, ContinuousBatcher, QueueFull, SearchKey
from translate.serve_continuous import ContinuousTranslator
from translate.serve_worker import translate_with

WARM_UP_LINE = "Hello."
ROUTES = ("/", "/translate", "/health", "/ready", "/info", "/metrics", "/docs", "/openapi.json")


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


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: list[str] = Field(description="lines to translate; one translation comes back for each, in order")
    beam: int | None = Field(None, ge=1, description="beam size (default: the checkpoint's)")
    length_penalty: float | None = Field(None, ge=0, description="GNMT alpha (default: the checkpoint's)")
    target_lang: str | None = Field(None, description="output language of a many-to-many model")
    source_lang: str | None = Field(None, description="the input's language, where known")


class TranslateResponse(BaseModel):
    translations: list[str]
    beam: int
    length_penalty: float
    target_lang: str | None
    seconds: float


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()  # one per app: tests build several apps in one process
        self.requests = Counter("translate_requests", "HTTP requests by path and status", ["path", "status"],
                                registry=self.registry)
        self.latency = Histogram("translate_request_seconds", "request latency, /translate",
                                 buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=self.registry)
        self.sentences = Counter("translate_sentences", "lines translated", registry=self.registry)
        self.tokens = Counter("translate_source_tokens", "source tokens translated", registry=self.registry)
        self.batch_size = Histogram("translate_batch_sentences", "sentences per batch",
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), registry=self.registry)
        self.queue_depth = Gauge("translate_queued_lines", "lines waiting for a batch", registry=self.registry)
        # Its rate is the model's utilisation: how much of the time it had a batch to translate.
        self.model_seconds = Counter("translate_model_seconds", "seconds the model spent translating batches",
                                     registry=self.registry)

    def batch(self, sentences: int, tokens: int, seconds: float, searching: int | None = None) -> None:
        """A batch translated; with continuous batching, a turn of the running search that
        answered `sentences` lines and ended with `searching` lines in it (its batch size)."""
        self.sentences.inc(sentences)
        self.tokens.inc(tokens)
        self.batch_size.observe(sentences if searching is None else searching)
        self.model_seconds.inc(seconds)


def error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def create_app(translator: Translator, settings: ServeSettings,
               worker: tuple[Callable[[], Executor], Callable] | None = None) -> FastAPI:
    """The application; `worker` (a function starting an executor, and the function it runs:
    `serve_worker.advance`, or `serve_worker.translate` with `settings.batching` "batch") moves
    the model out of this process, else a thread translates with `translator`."""
    metrics = Metrics()
    defaults = translator.search_defaults()
    state: dict = {"ready": False}
    continuous = settings.batching == "continuous"

    def translate(lines: list[str], key: SearchKey) -> tuple[list[str], float]:
        return translate_with(translator, lines, key, settings.batch_tokens)

    def count_tokens(line: str) -> int:
        return len(translator.vocab.source.processor.encode(line)) + 1

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if worker:
            new_worker, run = worker
        else:
            new_worker, run = None, ContinuousTranslator(translator, settings.batch_tokens).advance if continuous else translate
        if continuous:
            batcher = ContinuousBatcher(run, count_tokens, settings.max_wait_ms / 1000, settings.max_queued_lines,
                                        on_batch=metrics.batch, new_worker=new_worker)
        else:
            batcher = Batcher(run, count_tokens, settings.batch_tokens, settings.max_wait_ms / 1000,
                              settings.max_queued_lines, on_batch=metrics.batch, new_worker=new_worker)
        batcher.start()
        state["batcher"] = batcher
        metrics.queue_depth.set_function(lambda: batcher.queued_lines)
        await batcher.submit([WARM_UP_LINE], search_key(TranslateRequest(text=[]), first_target()))
        state["ready"] = True
        yield
        state["ready"] = False
        await batcher.stop()

    app = FastAPI(title="translate-serve", lifespan=lifespan,
                  description="Translation with the checkpoint's model; sentences of concurrent requests are batched.")

    def first_target() -> str | None:
        return translator.target_languages()[0] if translator.multilingual() else None

    def search_key(body: TranslateRequest, target_lang: str | None) -> SearchKey:
        return SearchKey(body.beam or defaults["beam"],
                         defaults["length_penalty"] if body.length_penalty is None else body.length_penalty,
                         target_lang, body.source_lang)

    async def authorized(request: Request) -> None:  # async: no trip to a thread pool per request
        if settings.api_key is None:
            return
        given = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        # compare_digest: the time taken does not reveal how much of the key was right
        if not hmac.compare_digest(given.encode(), settings.api_key.encode()):
            raise HTTPException(401, "a valid API key is required (header X-API-Key or Authorization: Bearer)")

    @app.middleware("http")
    async def limits_and_counts(request: Request, call_next):
        started = time.perf_counter()
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > settings.max_body_bytes:
            response = error(413, f"request body of {length} bytes is over the limit of {settings.max_body_bytes} "
                                  "(--max-body-bytes)")
        else:
            response = await call_next(request)
        path = request.url.path if request.url.path in ROUTES else "other"  # bounded label values
        metrics.requests.labels(path, str(response.status_code)).inc()
        if request.url.path == "/translate":
            metrics.latency.observe(time.perf_counter() - started)
        return response

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail), **(exc.headers or {}))

    @app.post("/translate", response_model=TranslateResponse, dependencies=[Depends(authorized)])
    async def translate_endpoint(body: TranslateRequest) -> TranslateResponse:
        started = time.perf_counter()
        if len(body.text) > settings.max_lines:
            raise HTTPException(413, f"text has {len(body.text)} lines; at most {settings.max_lines} a request "
                                     "(--max-lines)")
        for index, line in enumerate(body.text):
            if len(line) > settings.max_line_chars:
                raise HTTPException(413, f"text[{index}] has {len(line)} characters; at most "
                                         f"{settings.max_line_chars} a line (--max-line-chars)")
        if body.beam is not None and body.beam > settings.max_beam:
            raise HTTPException(422, f"beam {body.beam} is over this server's limit of {settings.max_beam} (--max-beam)")
        try:
            direction = pipeline.direction_for(translator, body.target_lang, body.source_lang)
        except UsageError as exc:
            raise HTTPException(422, str(exc).replace("--target-lang", "target_lang")) from None
        key = search_key(body, direction.target_lang)
        try:
            translations = await state["batcher"].submit(body.text, key)
        except QueueFull as exc:
            raise HTTPException(503, f"the server is busy: {exc}; retry shortly", headers={"Retry-After": "1"}) from None
        except BrokenExecutor:
            raise HTTPException(503, "the model process stopped while translating this request (killed or out of "
                                     "memory); a new one is starting, retry shortly", headers={"Retry-After": "5"}) from None
        return TranslateResponse(translations=translations, beam=key.beam, length_penalty=key.length_penalty,
                                 target_lang=key.target_lang, seconds=time.perf_counter() - started)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "alive"}

    @app.get("/ready")
    async def ready() -> Response:
        if not state["ready"]:
            return error(503, "loading: the model has not translated its warm-up line yet")
        return JSONResponse({"status": "ready"})

    @app.get("/info", dependencies=[Depends(authorized)])
    async def info() -> dict:
        cfg = translator.model.cfg
        return {
            "checkpoint": translator.path, "checkpoint_sha256": settings.checkpoint_digest,
            "directions": [list(d) for d in translator.directions()],
            "target_languages": translator.target_languages() if translator.multilingual() else
            ([translator.languages()[1]] if translator.languages() else []),
            "multilingual": translator.multilingual(), "tie_embeddings": cfg.tie_embeddings,
            "d_model": cfg.d_model, "source_vocab_size": len(translator.vocab.source),
            "target_vocab_size": len(translator.vocab.target), "joint_vocab": translator.vocab.joint,
            "search_defaults": defaults, "batching": settings.batching,
            "limits": {"max_lines": settings.max_lines, "max_line_chars": settings.max_line_chars,
                       "max_body_bytes": settings.max_body_bytes, "max_beam": settings.max_beam},
        }

    @app.get("/metrics", dependencies=[Depends(authorized)])
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    page = resources.files("translate").joinpath("web", "index.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> str:
        return page.replace("__API_KEY_REQUIRED__", "true" if settings.api_key else "false")

    return app
