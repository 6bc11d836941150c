"""Subtitles: SubRip (.srt) and WebVTT (.vtt), each cue's text a text to translate.

A cue's lines are one text, joined by a space (a sentence split over two lines is translated
whole). Its formatting tags (SubRip's <i> <b> <u> <s> <font ...>; WebVTT's <c.class> <i> <b> <u>
<v Speaker> <lang xx> <ruby> <rt>) make the runs of the text, and what holds no text to translate
(a WebVTT timestamp <00:01.000> or tag it does not know, an end tag that ends nothing, SubRip's
{\\an8}) is a mark (`inline`). A SubRip tag of another name (<Laughs>) is text. WebVTT's character
references (&amp; &lt; &nbsp;) are read as their characters and `&`, `<` and `>` written as
references again.

The translation replaces a cue's text and nothing else: indices, timings, cue settings,
identifiers, NOTE, STYLE and REGION blocks, the blank lines, the line breaks (LF, CR LF) and a
byte-order mark stay as written. A cue of one line is written on one line; a cue of two or more
on two, broken at the space nearest the middle (the upper line the shorter where two are as
near), or before a dialogue dash where each of the cue's lines began with one, unless a line would
then run over the longer of 42 characters and the cue's longest line and a break in the middle
would not. A cue whose translation is its text unchanged is written as it was.

SubRip's cues are found with the srt library's own grammar (`srt.SRT_REGEX`, the expression
`srt.parse` reads with, for where each cue's text lies) and its errors are `srt.parse`'s; a
timing line the library would read past (a timestamp cut short, a cue swallowed into the text of
the one before) is an error too. WebVTT is read here, block by block as the WebVTT standard and
webvtt-py's reader split it, because webvtt-py writes a file again its own way (LF only, blank
lines collapsed, timestamps and NOTE blocks reformatted).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

import srt

from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions, Translated
from translate.documents.inline import Inline, Mark, Run, Tagged, merged
from translate.documents.safe import DEFAULT_LIMITS, Limits, check_size, text_of
from translate.text.sentences import lines_of

LINE_LIMIT = 42  # characters a subtitle line may hold, unless the cue's own lines were longer
_DASHES = "-\u2013\u2014"
_DEPTH = 16  # tags open at once, at most: a start tag within as many is kept as a mark
_SPACES = re.compile(r"[ \t\r\n\f\v\u2028\u2029]+")
_NAME = re.compile(r"</?\s*([A-Za-z][A-Za-z0-9-]*)")
_VTT_SIGNATURE = re.compile(r"WEBVTT(?:[ \t]|$)")
_VTT_TIME = r"(?:\d+:)?\d{1,2}:\d{1,2}\.\d{1,3}"
_VTT_TIMINGS = re.compile(rf"[ \t]*{_VTT_TIME}[ \t]*-->[ \t]*{_VTT_TIME}(?:[ \t].*)?")


@dataclass(frozen=True)
class _Markup:
    """How a format writes formatting within a cue's text."""

    # group `tag`: a tag formatting a run (start or end); group `mark`: an inline object
    pattern: re.Pattern[str]
    references: bool  # & < > written as character references (WebVTT)


_SRT = _Markup(
    re.compile(r"(?P<tag></?(?:[ibus]|font)(?:\s[^<>]*)?>)|(?P<mark>\{\\[^{}]*\})", re.IGNORECASE),
    references=False,
)
_VTT = _Markup(
    re.compile(r"(?P<tag></?(?:c|i|b|u|v|lang|ruby|rt)(?=[\s.>])[^<>]*>)|(?P<mark><[^<>]*>)"),
    references=True,
)


@dataclass(frozen=True)
class _Frame:
    """A formatting tag around a run: as it starts, and as it ends ("" where it is not ended)."""

    start: str
    end: str


@dataclass(frozen=True)
class _Payload:
    """Where a cue's text lies in the file, and the line break it is written with."""

    start: int
    end: int
    eol: str


@dataclass(frozen=True)
class Cue:
    """A cue's text: where it lies, how it was laid out, and its runs and marks as tags."""

    start: int  # the cue's text, text[start:end] of the file
    end: int
    eol: str
    lines: int  # the text's lines, blank ones not counted
    longest: int  # characters of its longest line, tags left out
    dialogue: bool  # each line begins with a dash
    tagged: Tagged


@dataclass(frozen=True)
class Subtitles:
    """A SubRip or WebVTT file read: its text, and the cues with text to translate."""

    text: str  # the file's text, without its byte-order mark
    bom: bool
    markup: _Markup
    cues: tuple[Cue, ...]  # those with text to translate

    def texts(self) -> list[str]:
        return [cue.tagged.text for cue in self.cues]

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        if len(translated) != len(self.cues):
            raise ValueError(f"{len(self.cues)} texts, {len(translated)} translations")
        out, at = [], 0
        for cue, translation in zip(self.cues, translated):
            out.append(self.text[at : cue.start])
            if translation.text == cue.tagged.text:
                out.append(self.text[cue.start : cue.end])
            else:
                out.append(_written(cue, cue.tagged.read(translation.text), self.markup))
            at = cue.end
        out.append(self.text[at:])
        return ("\ufeff" if self.bom else "").encode() + "".join(out).encode("utf-8")


def read(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> Subtitles:
    check_size(data, name, limits)
    text, bom = text_of(data, name)
    if PurePath(name).suffix.lower() == ".vtt":
        markup, payloads = _VTT, _vtt_payloads(text, name)
    else:
        markup, payloads = _SRT, _srt_payloads(text, name)
    cues = []
    for payload in payloads:
        cue = _cue(text, payload, markup)
        if cue is not None:
            cues.append(cue)
    if len(cues) > limits.max_texts:
        raise DocumentError(
            f"{name}: {len(cues):,} cues, more than the {limits.max_texts:,} texts allowed"
        )
    return Subtitles(text, bom, markup, tuple(cues))


# --- finding the cues ----------------------------------------------------------------------
def _line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _eol_before(text: str, offset: int) -> str:
    """The line break that ends the line before `offset`."""
    if text.endswith("\r\n", 0, offset):
        return "\r\n"
    return "\r" if text.endswith("\r", 0, offset) else "\n"


def _srt_payloads(text: str, name: str) -> list[_Payload]:
    try:
        subtitles = list(srt.parse(text))
    except srt.SRTParseError as error:
        unread = error.unmatched_content
        at = error.expected_start + len(unread) - len(unread.lstrip())
        first = unread.strip().splitlines()[0] if unread.strip() else unread
        raise DocumentError(
            f"{name} line {_line_at(text, at)}: not a SubRip cue (an index, a line "
            f"'hh:mm:ss,mmm --> hh:mm:ss,mmm', its text): {first[:80]!r}"
        ) from None
    except ValueError as error:
        raise DocumentError(f"{name}: not SubRip ({error})") from None
    matches = list(srt.SRT_REGEX.finditer(text))
    if len(matches) != len(subtitles):  # one expression: never, unless the library changes
        raise DocumentError(f"{name}: the SubRip cues could not be located")
    payloads = []
    for match, subtitle in zip(matches, subtitles):
        cue = f"cue {subtitle.index}" if subtitle.index is not None else "a cue"
        settings = match.group(4)
        if settings and match.end(3) == match.start(4) and not settings[0].isspace():
            raise DocumentError(
                f"{name} line {_line_at(text, match.start(3))}: {cue}'s end time "
                f"{match.group(3) + settings!r} is not hh:mm:ss,mmm"
            )
        start, end = match.span(5)
        content = text[start:end]
        if "-->" in content:
            at = content.index("-->")
            line = next(line for line in lines_of(content)[0] if "-->" in line)
            raise DocumentError(
                f"{name} line {_line_at(text, start + at)}: the timing line {line[:80]!r} "
                f"(after {cue}) is not 'hh:mm:ss,mmm --> hh:mm:ss,mmm'"
            )
        # blank lines around the text are the file's, not the cue's
        start += len(content) - len(content.lstrip())
        end = max(start, end - (len(content) - len(content.rstrip())))
        payloads.append(_Payload(start, end, _eol_before(text, match.start(5))))
    return payloads


def _vtt_payloads(text: str, name: str) -> list[_Payload]:
    lines, breaks = lines_of(text)
    if not _VTT_SIGNATURE.match(lines[0]):
        raise DocumentError(f"{name} line 1: not WebVTT (its first line must be WEBVTT)")
    offsets = [0]
    for line, after in zip(lines, breaks):
        offsets.append(offsets[-1] + len(line) + len(after))
    # Blocks are split at blank lines; a line holding "-->" that cannot be its block's timing
    # line (the block's first, or its second after an identifier) starts a block of its own.
    blocks: list[list[int]] = []
    block = [0]
    in_header = True
    for number in range(1, len(lines)):
        line = lines[number]
        starts = bool(block) and "-->" in line
        if starts and not (in_header or len(block) > 1 or "-->" in lines[block[0]]):
            starts = False
        if not line or starts:
            if block:
                blocks.append(block)
                block = []
                in_header = False
        if line:
            block.append(number)
    if block:
        blocks.append(block)
    payloads = []
    for block in blocks[1:]:
        if "-->" in lines[block[0]]:
            timing = 0
        elif len(block) > 1 and "-->" in lines[block[1]]:
            timing = 1
        else:
            continue  # NOTE, STYLE, REGION or text no cue holds: kept as written
        timings = lines[block[timing]]
        if not _VTT_TIMINGS.fullmatch(timings):
            raise DocumentError(
                f"{name} line {block[timing] + 1}: cue timings {timings[:80]!r} are not "
                "'hh:mm:ss.ttt --> hh:mm:ss.ttt [settings]'"
            )
        text_lines = block[timing + 1 :]
        if text_lines:
            start = offsets[text_lines[0]]
            end = offsets[text_lines[-1]] + len(lines[text_lines[-1]])
            payloads.append(_Payload(start, end, breaks[block[timing]]))
    return payloads


# --- a cue's text as runs and marks --------------------------------------------------------
def _name(tag: str) -> str:
    found = _NAME.match(tag)
    return found.group(1).lower() if found else ""


def _tokens(lines: list[str], markup: _Markup) -> list[tuple[str, str]]:
    """The cue's lines as (kind, written) pairs: text, join (between lines), start, end, mark."""
    tokens: list[tuple[str, str]] = []
    for number, line in enumerate(lines):
        if number:
            tokens.append(("join", " "))
        at = 0
        for match in markup.pattern.finditer(line):
            if match.start() > at:
                tokens.append(("text", line[at : match.start()]))
            written = match.group()
            if match.lastgroup == "mark":
                tokens.append(("mark", written))
            else:
                tokens.append(("end" if written.startswith("</") else "start", written))
            at = match.end()
        if at < len(line):
            tokens.append(("text", line[at:]))
    return tokens


def _items(tokens: list[tuple[str, str]], markup: _Markup) -> list[Inline]:
    """Runs and marks: an end tag ends the innermost tag of its name open (and those opened
    after it); one that ends none, and a start tag within `_DEPTH` others, is a mark."""
    ends: dict[int, str] = {}  # a start tag's index: its end tag as written
    ended_by: dict[int, int] = {}  # an end tag's index: the start tag's
    open_tags: list[int] = []
    for index, (kind, written) in enumerate(tokens):
        if kind == "start" and len(open_tags) >= _DEPTH:
            tokens[index] = ("mark", written)
        elif kind == "start":
            open_tags.append(index)
        elif kind == "end":
            name = _name(written)
            depth = next(
                (
                    d
                    for d in reversed(range(len(open_tags)))
                    if _name(tokens[open_tags[d]][1]) == name
                ),
                None,
            )
            if depth is None:
                tokens[index] = ("mark", written)
            else:
                ends[open_tags[depth]] = written
                ended_by[index] = open_tags[depth]
                del open_tags[depth:]
    items: list[Inline] = []
    stack: list[tuple[int, _Frame]] = []
    for index, (kind, written) in enumerate(tokens):
        key = tuple(frame for _, frame in stack)
        if kind == "start":
            stack.append((index, _Frame(written, ends.get(index, ""))))
        elif kind == "end":
            while stack and stack.pop()[0] != ended_by[index]:
                pass
        elif kind == "mark":
            items.append(Mark(written))
        elif kind == "join":
            items.append(Run(" ", key))
        else:
            items.append(Run(html.unescape(written) if markup.references else written, key))
    return _settled(items)


def _settled(items: list[Inline]) -> list[Inline]:
    """A run of spaces takes the formatting of the run before it (a space shows none)."""
    out: list[Inline] = []
    last = None  # the formatting of the last run
    for item in items:
        if isinstance(item, Run):
            if not item.text.strip() and last is not None:
                item = Run(item.text, last)
            last = item.key
        out.append(item)
    return merged(out)


def _plain(tokens: list[tuple[str, str]], markup: _Markup) -> str:
    texts = [written for kind, written in tokens if kind == "text"]
    return "".join(html.unescape(t) if markup.references else t for t in texts)


def _cue(text: str, payload: _Payload, markup: _Markup) -> Cue | None:
    lines = [line.strip() for line in lines_of(text[payload.start : payload.end])[0]]
    lines = [line for line in lines if line]
    items = _items(_tokens(lines, markup), markup)
    if not any(isinstance(item, Run) and item.text.strip() for item in items):
        return None
    plain = [_plain(_tokens([line], markup), markup).strip() for line in lines]
    return Cue(
        start=payload.start,
        end=payload.end,
        eol=payload.eol,
        lines=len(lines),
        longest=max(len(line) for line in plain),
        dialogue=len(lines) > 1 and all(line[:1] in _DASHES for line in plain if line),
        tagged=Tagged.write(items),
    )


# --- writing a translated cue ----------------------------------------------------------------
def _atoms(items: Sequence[Inline]) -> list[tuple[str, bool]]:
    """The translation as (written, visible) atoms: a character of text, or a tag. Spaces are
    single, none at either end."""
    atoms: list[tuple[str, bool]] = []
    stack: tuple[_Frame, ...] = ()
    for item in items:
        if isinstance(item, Mark):
            atoms.append((item.key, False))
            continue
        key = item.key
        common = 0
        while common < min(len(stack), len(key)) and stack[common] == key[common]:
            common += 1
        atoms += [(frame.end, False) for frame in reversed(stack[common:]) if frame.end]
        atoms += [(frame.start, False) for frame in key[common:]]
        stack = key
        atoms += [(char, True) for char in _SPACES.sub(" ", item.text)]
    atoms += [(frame.end, False) for frame in reversed(stack) if frame.end]
    out: list[tuple[str, bool]] = []
    last = " "  # the last visible character kept
    for written, visible in atoms:
        if visible and written == " " and last == " ":
            continue
        if visible:
            last = written
        out.append((written, visible))
    shown = [k for k, (written, visible) in enumerate(out) if visible]
    if shown and out[shown[-1]][0] == " ":  # one at the end, at most: spaces are single
        del out[shown[-1]]
    return out


def _break_at(atoms: list[tuple[str, bool]], cue: Cue) -> int | None:
    """The atom of the space to break the translation at: nearest the middle."""
    chars = [(k, written) for k, (written, visible) in enumerate(atoms) if visible]
    total = len(chars)
    spaces = [(k, before) for before, (k, char) in enumerate(chars) if char == " "]
    if not spaces:
        return None

    def longer(candidate: tuple[int, int]) -> tuple[int, int]:
        before = candidate[1]
        return max(before, total - before - 1), before

    best = min(spaces, key=longer)
    dashes = [(k, before) for k, before in spaces if chars[before + 1][1] in _DASHES]
    if cue.dialogue and dashes:
        dash = min(dashes, key=longer)
        if longer(dash)[0] <= max(LINE_LIMIT, cue.longest, longer(best)[0]):
            return dash[0]
    return best[0]


def _written(cue: Cue, items: Sequence[Inline], markup: _Markup) -> str:
    atoms = _atoms(items)
    cut = _break_at(atoms, cue) if cue.lines > 1 else None
    out = []
    for index, (written, visible) in enumerate(atoms):
        if index == cut:
            out.append(cue.eol)
        elif visible and markup.references:
            out.append(html.escape(written, quote=False))
        else:
            out.append(written)
    return "".join(out)
