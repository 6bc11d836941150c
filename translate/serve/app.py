"""translate-serve's HTTP application: the routes, over one `Service` (service.py), assembled
with the request guard (guard.py), the request and answer models (schema.py) and the drain.

FastAPI validates the JSON and writes the OpenAPI page, whose assets fastapi-offline serves from
this process (no CDN); prometheus_client writes /metrics (metrics.py); uvicorn serves. Batching
independent clients' sentences is `translate.serve.batching` with `translate.serve.engine_loop`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi_offline import FastAPIOffline
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    generate_latest,
)
from pydantic import ValidationError
from starlette.exceptions import HTTPException as AnyHTTPException
from starlette.requests import ClientDisconnect

from translate.decode.loaded_model import LoadedModel
from translate.serve import files, libretranslate
from translate.serve.files import FileSettings, FileStore
from translate.serve.guard import BodyLimit, RequestGuard, RouteLimit
from translate.serve.schema import (
    KEY_REQUIRED,
    NATIVE_TRANSLATE,
    ErrorResponse,
    ServeSettings,
    TranslateRequest,
    TranslateResponse,
    error,
    parse_json,
    validation_message,
)
from translate.serve.service import Service, header_key
from translate.serve.worker import ModelSettings

router = APIRouter()


ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 413, 422, 503)}


def service_of(request: Request) -> Service:
    """The application's one state object (`create_app`)."""
    return request.app.state.service


@router.post(
    NATIVE_TRANSLATE,
    response_model=TranslateResponse,
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": TranslateRequest.model_json_schema()}}
        }
    },
)
async def translate_lines(request: Request) -> Response:
    """The native API: lines in, a translation (or `n_best`) a line out, in order."""
    return await unless_client_leaves(request, native_translate(request))


async def native_translate(request: Request) -> Response:
    service = service_of(request)
    if not service.key_accepted(request.headers):
        return error(401, KEY_REQUIRED)
    try:
        body = TranslateRequest.model_validate(parse_json(await request.body()))
    except ValidationError as fault:
        return error(422, validation_message(fault))
    address = libretranslate.client_address(request)
    answer = await service.translate(body, header_key(request.headers), address)
    return JSONResponse(answer.model_dump())


@router.post(
    "/translate",
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "description": "LibreTranslate's fields (q, source, target, format, alternatives, "
            "api_key) as JSON, a form or a query"
        }
    },
)
async def translate(request: Request) -> Response:
    """LibreTranslate's API, where its clients (Mastodon, Discourse, Nextcloud, Weblate, ...)
    send it."""
    service = service_of(request)
    call = await libretranslate.read_request(request)
    return await unless_client_leaves(request, libretranslate.translate(service, request, call))


@router.post(
    files.FILE_ROUTE,
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "description": "LibreTranslate's multipart form: file, source (a code or auto), "
            "target, api_key"
        }
    },
)
async def translate_file(request: Request) -> Response:
    """LibreTranslate's file translation: `{"translatedFileUrl": ...}`, where the translated
    file can be downloaded until it expires."""
    service, store = service_of(request), files_of(request)
    if service.draining:
        return error(503, "the server is shutting down; retry", **{"Retry-After": "5"})
    call = await files.receive_upload(store, request)
    return await unless_client_leaves(request, files.translate_file(service, store, request, call))


@router.get(files.DOWNLOAD_ROUTE + "/{filename}")
async def download_file(request: Request, filename: str) -> Response:
    """A translated file, as an attachment, until it expires."""
    store = request.app.state.files
    if store is None:  # as LibreTranslate answers it
        raise HTTPException(400, "Files translation are disabled on this server.")
    return await files.download_file(store, filename)


def files_of(request: Request) -> FileStore:
    """The application's file store; 403 where files translation is disabled (as
    LibreTranslate answers it)."""
    store = request.app.state.files
    if store is None:
        raise HTTPException(403, "Files translation are disabled on this server.")
    return store


async def unless_client_leaves(request: Request, work: Coroutine[Any, Any, Response]) -> Response:
    """`work`'s response, its body already read; if the client disconnects first, `work` is
    cancelled (its sentences leave the model's queue and its search at the next step) and
    ClientDisconnect is raised (counted as 499, never sent)."""
    answer = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(client_gone(request))
    try:
        await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the request itself cancelled: its work with it
        answer.cancel()
        gone.cancel()
        raise
    if answer.done() or gone.exception() is not None:  # answered, or no disconnect to wait for
        gone.cancel()
        return await answer
    answer.cancel()
    await asyncio.gather(answer, return_exceptions=True)
    raise ClientDisconnect()


async def client_gone(request: Request) -> None:
    """Returns once the client has disconnected: after its body, the server's next message is
    `http.disconnect`, sent when the connection closes (or once the response is complete)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.get("/health")
async def health() -> dict:
    """Alive (the model may still be loading: see /ready); LibreTranslate's answer."""
    return {"status": "ok"}


@router.get("/ready")
async def ready(request: Request) -> Response:
    """200 once the model has translated its warm-up line, while its process can translate; 503
    saying why not (loading, shutting down, the model process down, starting again, given up or
    not answering)."""
    service = service_of(request)
    if service.draining:
        return error(503, "shutting down")
    if not service.ready:
        return error(503, "loading: the model has not translated its warm-up line yet")
    down = service.model_down
    if down:
        return error(503, down)
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
    store: FileStore | None = app.state.files
    if store is not None:
        await store.start()
    try:
        await app.state.service.start()
        yield
        await app.state.service.stop()
    finally:
        if store is not None:
            await store.stop()


def create_app(
    loaded: LoadedModel,
    settings: ServeSettings,
    model_process: ModelSettings | None = None,
    file_settings: FileSettings | None = None,
) -> FastAPI:
    """The application: the routes above over one `Service` (`app.state.service`);
    `model_process` (how to load the model there) moves the model into a process of its own,
    else a thread of this one translates with `loaded`. With `file_settings`, LibreTranslate's
    file API is served (`app.state.files`), else it answers that it is disabled."""
    app = FastAPIOffline(
        title="translate-serve",
        lifespan=lifespan,
        redoc_url=None,
        description="Translation with the checkpoint's model; sentences of concurrent requests "
        'are batched. Every error is {"error": message}.',
    )
    app.state.service = Service(loaded, settings, model_process)
    app.state.files = FileStore(file_settings) if file_settings is not None else None
    uploads = ()
    if app.state.files is not None:
        limit = BodyLimit(app.state.files.body_bytes, "--file-max-bytes")
        uploads = (RouteLimit(files.FILE_ROUTE, limit),)
    app.add_middleware(RequestGuard, service=app.state.service, routes=uploads)
    app.add_exception_handler(AnyHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.include_router(router)
    app.include_router(libretranslate.router)
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
