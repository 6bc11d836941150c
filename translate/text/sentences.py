"""A text cut into what a model translates, one sentence at a time, and put together again with
everything between the sentences (line breaks, blank lines, indentation, the spaces after a full
stop) exactly as it was written.

Models are trained on sentences and short paragraphs: a text of several lines sent whole reads as
one long sentence, and a small model drops what does not fit (a three-line text came back with
two). So each line is translated apart, as LibreTranslate and Argos do, and each sentence of a
line apart; a sentence longer than `max_chars` is cut at a space.

Where a sentence ends: after `.`, `!`, `?` or `…` (several of them, and closing quotes or
brackets, allowed) followed by a space and then anything but a lower-case letter; after
`。`, `！` or `？` with or without a space. Not after a single letter (`J. Smith`), an
abbreviation with an inner dot (`e.g.`, `z.B.`), one of `ABBREVIATIONS`, or a number that begins
its sentence (`1. Click OK. 2. Save.` are two numbered steps; `Select cell 15. Save.` two
sentences).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_LINE_BREAK_KEPT = re.compile(r"(\r\n|\n|\r)")
# Where a sentence may end: a final mark, then closing quotes or brackets; a full-width mark
# needs no space after it.
_END = re.compile(r"(?:[.!?…]+[\"'»“”’)\]]*(?=\s)|[。！？]+[\"'»“”’)\]」』）]*)")
_NEXT_CHAR = re.compile(r"\s*(\S)")
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st vs cf approx incl fig figs no nr vol ca bzw usw ggf vgl sog".split()
)


def is_blank(text: str) -> bool:
    """Nothing to translate: only whitespace (any Unicode space, tabs), control characters such
    as NUL, or invisible format characters (a stray byte-order mark, zero-width spaces). Such a
    text gives an empty translation; decoded, it would give invented words."""
    return all(_blank_char(char) for char in text)


def _blank_char(char: str) -> bool:
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf")


@dataclass(frozen=True)
class SplitText:
    """`pieces`, what to translate, and `between`, the text around them as written (one more
    than the pieces): text == between[0] + pieces[0] + between[1] + ... + pieces[-1] +
    between[-1]."""

    pieces: tuple[str, ...]
    between: tuple[str, ...]

    def join(self, translations: Sequence[str]) -> str:
        """The text with each piece replaced by its translation (one a piece, in order)."""
        if len(translations) != len(self.pieces):
            raise ValueError(f"{len(self.pieces)} pieces, {len(translations)} translations")
        parts = [self.between[0]]
        for translation, after in zip(translations, self.between[1:]):
            parts += [translation, after]
        return "".join(parts)


def lines_of(text: str) -> tuple[list[str], list[str]]:
    """The text's lines and the line breaks between them (`\n`, `\r\n` or `\r`; one fewer than
    the lines), as written: `join_lines` gives the text back."""
    parts = _LINE_BREAK_KEPT.split(text)
    return parts[0::2], parts[1::2]


def join_lines(lines: Sequence[str], breaks: Sequence[str]) -> str:
    """Lines joined by the breaks between them (`lines_of`'s inverse)."""
    return "".join(line + after for line, after in zip(lines, [*breaks, ""]))


def split_text(text: str, sentences: bool = True, max_chars: int | None = None) -> SplitText:
    """Each line's sentences (`sentences`) or each whole line, whitespace around them left out;
    blank lines are left as they are. A piece over `max_chars` characters is cut at its last
    space before the limit (where one is in the limit's second half), else at the limit."""
    if max_chars is not None and max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    spans: list[tuple[int, int]] = []
    lines, breaks = lines_of(text)
    start = 0
    for line, after in zip(lines, [*breaks, ""]):
        found = _sentence_spans(line) if sentences else [(0, len(line))]
        found = [span for span in (_trimmed(text, start + a, start + b) for a, b in found) if span]
        for a, b in found:
            spans += _cut(text, a, b, max_chars) if max_chars else [(a, b)]
        start += len(line) + len(after)
    between = [text[prev:a] for prev, (a, _) in zip([0, *(b for _, b in spans)], spans)]
    between.append(text[spans[-1][1] :] if spans else text)
    return SplitText(tuple(text[a:b] for a, b in spans), tuple(between))


def _sentence_spans(line: str) -> list[tuple[int, int]]:
    """Where the line's sentences start and end (each span up to the next sentence's start)."""
    cuts = []
    for match in _END.finditer(line):
        after = match.end()
        following = _NEXT_CHAR.match(line, after)  # the next character that is not a space
        if following is None:
            continue
        full_width = match.group()[0] in "。！？"
        sentence_start = cuts[-1] if cuts else 0
        if not full_width and (
            following[1].islower() or _abbreviation(line, match.start(), sentence_start)
        ):
            continue
        cuts.append(after)
    starts = [0, *cuts]
    return list(zip(starts, [*cuts, len(line)]))


def _abbreviation(line: str, mark: int, sentence_start: int) -> bool:
    """Whether the `.` at `mark` ends a word that is not a sentence's end: a single letter, a
    word with a dot inside, a known abbreviation, or a number that begins its sentence (a step's
    number, `2. Save.`)."""
    if line[mark] != ".":
        return False
    start = mark
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    word = line[start:mark].lstrip("\"'«“‘([")
    if not word:
        return True
    if len(word) == 1 and word.isalpha():
        return True
    if "." in word or word.lower() in ABBREVIATIONS:
        return True
    return word.isdigit() and not line[sentence_start:start].strip()


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span without the blank characters at its ends, or None where it is all blank."""
    while start < end and _blank_char(text[start]):
        start += 1
    while end > start and _blank_char(text[end - 1]):
        end -= 1
    return (start, end) if start < end else None


def _cut(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """The span in pieces of at most `limit` characters, cut at spaces where it can."""
    spans = []
    while end - start > limit:
        window = text[start + limit // 2 : start + limit + 1]
        space = max(window.rfind(" "), window.rfind("\t"))
        cut = start + limit // 2 + space if space >= 0 else start + limit
        spans.append(_trimmed(text, start, cut) or (start, cut))
        start = cut
        while start < end and _blank_char(text[start]):
            start += 1
    if start < end:
        spans.append((start, end))
    return spans
