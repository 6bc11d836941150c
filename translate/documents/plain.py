"""Plain text: every line a text, the line breaks (LF, CR LF, CR) and a byte-order mark kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from translate.documents.formats import RenderOptions, Translated
from translate.documents.safe import DEFAULT_LIMITS, Limits, check_size, check_texts, text_of
from translate.text.sentences import join_lines, lines_of


@dataclass(frozen=True)
class PlainText:
    lines: list[str]
    breaks: list[str]
    bom: bool

    def texts(self) -> list[str]:
        return list(self.lines)

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        text = join_lines([t.text for t in translated], self.breaks)
        return ("\ufeff" if self.bom else "").encode() + text.encode("utf-8")


def read(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> PlainText:
    check_size(data, name, limits)
    text, bom = text_of(data, name)
    lines, breaks = lines_of(text)
    check_texts(len(lines), name, limits)
    return PlainText(lines, breaks, bom)
