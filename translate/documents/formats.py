"""The formats a document may be in, chosen by its file's extension or by name (`--format`), and
what every format's module gives: `read(data, name, limits)`, a `Document`."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Protocol

from translate.documents.errors import DocumentError
from translate.documents.safe import DEFAULT_LIMITS, Limits

REVIEW_BELOW = 0.3  # flags about a quarter of the bad translations (docs/files-and-terms.md)


@dataclass(frozen=True)
class Translated:
    """A text's translation and the model's confidence in it (0 to 1)."""

    text: str
    confidence: float
    formatting_lost: int = 0  # sentences that lost a run's formatting (`translating.Plan`)


@dataclass(frozen=True)
class RenderOptions:
    """What writing a translated document needs besides the translations."""

    source_lang: str | None = None
    target_lang: str | None = None
    # a catalogue's (po, XLIFF) translation under this confidence is marked fuzzy / needs review
    review_below: float = REVIEW_BELOW


class Document(Protocol):
    """A file read as its format."""

    def texts(self) -> list[str]:
        """What to translate, in document order, inline formatting as tags (`inline`)."""

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        """The file with each text replaced by its translation (one a text, in order)."""


@dataclass(frozen=True)
class Format:
    name: str  # as --format and /frontend/settings name it
    extensions: tuple[str, ...]  # lower case, with the dot
    media_type: str
    module: str  # translate.documents.<module> has read(data, name, limits) -> Document

    def read(self, data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> Document:
        reader = importlib.import_module(f"translate.documents.{self.module}")
        return reader.read(data, name, limits)


FORMATS: tuple[Format, ...] = (
    Format("txt", (".txt",), "text/plain", "plain"),
    Format("html", (".html", ".htm", ".xhtml"), "text/html", "html"),
    Format("md", (".md", ".markdown"), "text/markdown", "markdown"),
    Format("srt", (".srt",), "application/x-subrip", "subtitles"),
    Format("vtt", (".vtt",), "text/vtt", "subtitles"),
    Format("po", (".po", ".pot"), "text/x-gettext-translation", "gettext"),
    Format("xliff", (".xlf", ".xliff"), "application/xliff+xml", "xliff"),
    Format(
        "docx",
        (".docx",),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "office",
    ),
    Format(
        "pptx",
        (".pptx",),
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "office",
    ),
    Format(
        "xlsx",
        (".xlsx",),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "office",
    ),
    Format("odt", (".odt",), "application/vnd.oasis.opendocument.text", "office"),
    Format("odp", (".odp",), "application/vnd.oasis.opendocument.presentation", "office"),
    Format("ods", (".ods",), "application/vnd.oasis.opendocument.spreadsheet", "office"),
)
NAMES = tuple(fmt.name for fmt in FORMATS)
EXTENSIONS = tuple(ext for fmt in FORMATS for ext in fmt.extensions)


def format_named(name: str) -> Format:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise DocumentError(f"--format {name}: not a format; one of {', '.join(NAMES)}")


def format_of(path: str) -> Format:
    """The format of a file named `path`, by its extension (in any case)."""
    suffix = PurePath(path).suffix.lower()
    for fmt in FORMATS:
        if suffix in fmt.extensions:
            return fmt
    raise DocumentError(
        f"{path}: no format has the extension {suffix or '(none)'!r}; the extensions are "
        f"{', '.join(EXTENSIONS)} (or name one with --format)"
    )
