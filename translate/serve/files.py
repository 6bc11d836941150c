"""LibreTranslate's file API: `POST /translate_file` (a multipart form: `file`, `source`,
`target`, `api_key`) answers `{"translatedFileUrl": ".../download_file/<name>"}`, and
`GET /download_file/<name>` gives the translated file as an attachment.

A file is read as the format of its extension (`translate.documents.formats`), its texts cut
into sentences and translated together as one request's sentences (the cross-client batches
of `/translate`, with its key, rate and size limits), and written again with every text
translated and everything else as it was. Reading and writing run in a thread of their own, so
that a large file delays neither the event loop nor the other requests' reading.

The rules: a file that cannot be read as its format (not that format, truncated, encrypted, a
zip or XML bomb, empty, over `--file-max-bytes`) is a 400 (413 for its size) with a one-line
`{"error": ...}`, never a 500. Translated files are kept under a random name (`<uuid>.<name>
_<target><ext>`, as LibreTranslate names them) in the files directory, a temporary one removed
at exit unless one is given, and removed once `--file-expiry-seconds` have passed since they
were written; a download names nothing but such a file, never a path outside the directory.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import time
import unicodedata
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePath
from typing import TypeVar

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import QueryParams, UploadFile
from starlette.types import Scope

from translate.decode.pipeline import Translation
from translate.documents.errors import DocumentError
from translate.documents.formats import FORMATS, Document, Format, RenderOptions, Translated
from translate.documents.safe import Limits
from translate.documents.translating import Plan, without_tags
from translate.serve.detection import Detected
from translate.serve.libretranslate import (
    check_direction,
    check_key,
    client_address,
    model_language,
    read_form,
)
from translate.serve.schema import invalid_unicode
from translate.serve.service import Service

T = TypeVar("T")

FILE_ROUTE = "/translate_file"
DOWNLOAD_ROUTE = "/download_file"
# A form's fields, boundaries and part headers, beyond the file itself, that a body may hold.
FORM_OVERHEAD_BYTES = 64 * 2**10
# LibreTranslate detects a file's language from the first 4,096 characters of its texts.
DETECTION_CHARS = 4096
MAX_NAME_CHARS = 100  # of a stored file's name, between its uuid and its target code

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# What the store writes, and all that a download may name.
STORED_NAME = re.compile(rf"({_UUID})\.([A-Za-z0-9_-]{{1,{2 * MAX_NAME_CHARS}}}\.[a-z0-9]{{1,10}})")
PARTIAL_PREFIX = ".part-"  # a file being written, renamed once whole
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")

log = logging.getLogger("translate.serve")


@dataclass(frozen=True)
class FileSettings:
    """Where translated files are kept and for how long, and how large an upload may be."""

    directory: Path | None = None  # None: a temporary directory, removed at exit
    max_bytes: int = 10 * 2**20  # a file uploaded (--file-max-bytes)
    expiry_seconds: float = 1800.0  # LibreTranslate's 30 minutes (--file-expiry-seconds)


def available_formats() -> tuple[Format, ...]:
    """The formats whose module this installation has and can import (its libraries
    installed), imported now; one that cannot be is said in the log and left out."""
    found = []
    for fmt in FORMATS:
        name = f"translate.documents.{fmt.module}"
        if importlib.util.find_spec(name) is None:
            continue
        try:
            importlib.import_module(name)
        except ImportError as fault:
            log.warning("translate-serve: no %s files: %s", fmt.name, fault)
            continue
        found.append(fmt)
    return tuple(found)


class FileStore:
    """The files directory (made at `start`, removed at `stop` where it is a temporary one),
    the translated files in it, removed once expired (checked at every download, and swept
    every minute at most), and the thread that reads and writes documents."""

    def __init__(self, settings: FileSettings) -> None:
        self.settings = settings
        self.formats = available_formats()
        self.extensions = tuple(ext for fmt in self.formats for ext in fmt.extensions)
        self.limits = Limits(max_bytes=settings.max_bytes)
        self.directory = settings.directory
        self.temporary = settings.directory is None
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="translate-files")
        self.sweeper: asyncio.Task | None = None

    @property
    def body_bytes(self) -> int:
        """What an upload's request body may hold: the file and its form."""
        return self.settings.max_bytes + FORM_OVERHEAD_BYTES

    async def start(self) -> None:
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="translate-serve-files-"))
        else:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.sweeper = asyncio.create_task(self._sweep_forever())

    async def stop(self) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
            await asyncio.gather(self.sweeper, return_exceptions=True)
        self.worker.shutdown(wait=False, cancel_futures=True)
        if self.temporary and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def off_loop(self, work: Callable[..., T], *args) -> T:
        """`work(*args)` in the files thread, the event loop free meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self.worker, partial(work, *args))

    async def _sweep_forever(self) -> None:
        interval = min(60.0, max(self.settings.expiry_seconds / 2, 0.05))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.off_loop(self.sweep)
            except OSError as fault:  # the directory gone or unreadable: said, tried again
                log.warning("translate-serve: sweeping %s: %s", self.directory, fault)

    def sweep(self, now: float | None = None) -> int:
        """The expired files removed (and files left half written as long ago): how many. Only
        names the store writes are touched, so a directory given holds other files safely."""
        now = time.time() if now is None else now
        removed = 0
        for entry in os.scandir(self.directory):
            ours = STORED_NAME.fullmatch(entry.name) or entry.name.startswith(PARTIAL_PREFIX)
            if not ours or not entry.is_file(follow_symlinks=False):
                continue
            try:
                if self.expired(entry.stat(follow_symlinks=False).st_mtime, now):
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:  # removed meanwhile (a download found it expired)
                pass
        return removed

    def expired(self, written: float, now: float) -> bool:
        return now - written > self.settings.expiry_seconds

    def save(self, data: bytes, name: str, target_code: str, extension: str) -> str:
        """`data` kept under a new name, `<uuid>.<name>_<target><extension>`: that name."""
        stored = f"{uuid.uuid4()}.{safe_stem(name)}_{ascii_name(target_code)}{extension}"
        handle, partial_path = tempfile.mkstemp(prefix=PARTIAL_PREFIX, dir=self.directory)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(partial_path, self.directory / stored)
        except BaseException:
            Path(partial_path).unlink(missing_ok=True)
            raise
        return stored

    def load(self, name: str, now: float | None = None) -> bytes:
        """The stored file `name`: 400 for a name the store never writes (a path, `..`), 404
        for one it does not hold (never made, or expired: removed now)."""
        found = STORED_NAME.fullmatch(name)
        path = self.directory / name
        if not found or path.resolve().parent != self.directory.resolve():
            raise HTTPException(400, "Invalid filename")
        now = time.time() if now is None else now
        try:
            if not path.is_file() or path.is_symlink():
                raise FileNotFoundError(name)
            if self.expired(path.stat().st_mtime, now):
                path.unlink(missing_ok=True)
                raise FileNotFoundError(name)
            return path.read_bytes()
        except FileNotFoundError:
            raise HTTPException(
                404,
                f"{name}: no such file (never made, or removed: translated files are kept "
                f"{self.settings.expiry_seconds:g} s)",
            ) from None

    def format_of(self, name: str) -> Format | None:
        suffix = PurePath(name).suffix.lower()
        return next((fmt for fmt in self.formats if suffix in fmt.extensions), None)


def safe_stem(name: str) -> str:
    """`name`'s stem in ASCII letters, digits, `_` and `-` (as werkzeug's secure_filename
    keeps a name LibreTranslate stores): accents dropped, anything else one `_`."""
    return ascii_name(PurePath(base_name(name)).stem)


def ascii_name(text: str) -> str:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _UNSAFE.sub("_", plain).strip("_-")[:MAX_NAME_CHARS] or "file"


def base_name(name: str) -> str:
    """The name without the folders a client put in front of it (either slash)."""
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def shown_name(name: str) -> str:
    """The file's name as messages show it: one line, at most 200 characters."""
    kept = "".join(
        "?" if unicodedata.category(char).startswith("C") else char for char in base_name(name)
    )
    return kept[:200] or "(no name)"


def one_line(message: str) -> str:
    return " ".join(message.split())


@dataclass(frozen=True)
class Upload:
    """A /translate_file call's fields: the file's name and bytes (None where no file came)."""

    source: str | None
    target: str | None
    api_key: str | None
    name: str | None
    data: bytes | None


def read_upload(scope: Scope, body: bytes) -> Upload:
    """The call's fields from its multipart form (`source`, `target` and `api_key` from the
    query string too, as /translate reads them); the file read whole. Run off the event loop."""
    form = read_form(scope, body)
    try:
        fields = []
        for field in ("source", "target", "api_key"):
            value = None
            for source in (QueryParams(scope.get("query_string", b"")), form):
                values = source.getlist(field)
                if values:
                    value = values[0]
                    break
            if isinstance(value, UploadFile):
                raise HTTPException(400, f"Invalid request: {field} must be text, not a file")
            if value is not None and (position := invalid_unicode(value)) is not None:
                raise HTTPException(
                    400, f"Invalid request: {field} holds a lone surrogate at character {position}"
                )
            fields.append(value)
        files = form.getlist("file")
        if files and not isinstance(files[0], UploadFile):
            raise HTTPException(400, "Invalid request: file must be a file, not text")
        upload = files[0] if files else None
        name = None if upload is None else upload.filename or ""
        data = None if upload is None else upload.file.read()
        return Upload(*fields, name=name, data=data)
    finally:
        for _, value in form.multi_items():
            if isinstance(value, UploadFile):
                value.file.close()


async def receive_upload(store: FileStore, request: Request) -> Upload:
    body = await request.body()
    try:
        return await store.off_loop(read_upload, request.scope, body)
    except (UnicodeError, LookupError):  # a charset such as punycode that fails on any text
        raise HTTPException(
            400, "Invalid request: the form's charset cannot be read; send UTF-8"
        ) from None


@dataclass(frozen=True)
class ReadFile:
    """A document read: its texts, and what the model translates of them (`plan.lines`)."""

    document: Document
    texts: list[str]
    plan: Plan


def guarded(name: str, fmt: Format, work: Callable[[], T]) -> T:
    """`work()`, a document module's, whose faults are the file's: a DocumentError is a 400 with
    its message, any other fault a 400 saying the file cannot be read as its format (the
    traceback in the log: a file no module should fail on)."""
    try:
        return work()
    except DocumentError as fault:
        raise HTTPException(400, f"Invalid request: {one_line(str(fault))}") from None
    except Exception as fault:  # noqa: BLE001 (no file may make a 500)
        log.exception("translate-serve: %s read as %s", name, fmt.name)
        raise HTTPException(
            400,
            f"Invalid request: {name}: cannot be read as {fmt.name} ({type(fault).__name__})",
        ) from None


def read_document(fmt: Format, data: bytes, name: str, limits: Limits, max_chars: int) -> ReadFile:
    def read() -> ReadFile:
        document = fmt.read(data, name, limits)
        texts = document.texts()
        return ReadFile(document, texts, Plan.of(texts, max_chars))

    return guarded(name, fmt, read)


def render_document(
    read: ReadFile, found: list[Translation] | None, options: RenderOptions, name: str, fmt: Format
) -> bytes:
    """The file written again: each text translated (`found`, one a sentence), or as it was
    (None: in the target language already)."""

    def render() -> bytes:
        if found is None:
            translated = [Translated(text, 1.0) for text in read.texts]
        else:
            translated = read.plan.translated(found)
        return read.document.render(translated, options)

    return guarded(name, fmt, render)


def detection_text(texts: Sequence[str]) -> str:
    """What detection reads of a file: its first texts, up to 4,096 characters, without tags."""
    sample, length = [], 0
    for text in texts:
        words = without_tags(text, " ").strip()
        if words:
            sample.append(words)
            length += len(words) + 1
        if length >= DETECTION_CHARS:
            break
    return " ".join(sample)[:DETECTION_CHARS]


def check_file_chars(service: Service, texts: list[str]) -> None:
    """--char-limit: the characters of a file's texts, together (its inline tags included)."""
    limit = service.settings.char_limit
    total = sum(map(len, texts))
    if limit is not None and total > limit:
        raise HTTPException(400, f"Invalid request: request ({total}) exceeds text limit ({limit})")


async def translate_file(
    service: Service, store: FileStore, request: Request, call: Upload
) -> JSONResponse:
    """POST /translate_file: checked in LibreTranslate's order (the key, the fields, the format,
    the languages), then the file read, its sentences charged to the client as /translate's
    (413 for more than a request may hold, 429 past the rate), translated, written and kept."""
    check_key(service, request, call.api_key)
    for field, value in (("file", call.data), ("source", call.source), ("target", call.target)):
        if value is None or (field != "file" and not value):
            raise HTTPException(400, f"Invalid request: missing {field} parameter")
    if not call.name:
        raise HTTPException(400, "Invalid request: empty file")
    name = shown_name(call.name)
    fmt = store.format_of(name)
    if fmt is None:
        suffix = PurePath(name).suffix.lower() or "(none)"
        raise HTTPException(
            400,
            f"Invalid request: file format not supported: {suffix} (the formats are "
            f"{', '.join(store.extensions)})",
        )
    auto = call.source.strip().lower() == "auto"
    source = None if auto else model_language(service, call.source)
    target = model_language(service, call.target)
    if len(call.data) > store.settings.max_bytes:
        raise HTTPException(
            413,
            f"Invalid request: {name} has {len(call.data):,} bytes, more than the "
            f"{store.settings.max_bytes:,} a file may hold (--file-max-bytes)",
        )
    if not call.data:
        raise HTTPException(400, f"Invalid request: {name} is empty (0 bytes)")
    max_chars = service.settings.max_line_chars
    read = await store.off_loop(read_document, fmt, call.data, name, store.limits, max_chars)
    check_file_chars(service, read.texts)
    lines = list(read.plan.lines)
    service.check_sentences(len(lines))
    if auto:
        found = await service.off_loop(service.detector.ranked, detection_text(read.texts))
        detected = found[0]
    else:
        detected = Detected(source, 100.0)
    check_direction(service, detected.language, target)
    address, translated = client_address(request), None
    if detected.language != target and detected.confidence > 0 and lines:
        settings = service.libre_settings(detected.language, target)
        work = await service.prepare(lines, settings)
        service.admit([work], call.api_key, address)
        translated = await service.run(work)
    else:
        service.admit([], call.api_key, address)
    codes = service.codes.libre
    options = RenderOptions(codes[detected.language], codes[target])
    data = await store.off_loop(render_document, read, translated, options, name, fmt)
    stored = await store.off_loop(
        store.save, data, name, codes[target], PurePath(name).suffix.lower()
    )
    return JSONResponse(
        {"translatedFileUrl": str(request.url_for("download_file", filename=stored))}
    )


async def download_file(store: FileStore, filename: str) -> Response:
    """GET /download_file/<name>: the file as an attachment named as uploaded, with `_<target>`
    added (LibreTranslate's name: the stored one without its uuid)."""
    data = await store.off_loop(store.load, filename)
    download = STORED_NAME.fullmatch(filename).group(2)
    fmt = store.format_of(download)
    return Response(
        data,
        headers={  # the type without a charset: the file's own encoding is the format's
            "Content-Type": fmt.media_type if fmt is not None else "application/octet-stream",
            "Content-Disposition": f'attachment; filename="{download}"',
        },
    )
