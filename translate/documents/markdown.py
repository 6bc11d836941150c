"""Markdown (CommonMark, with GitHub's tables and ~~strikethrough~~), read with markdown-it-py.

The texts are the inline content of every paragraph, heading and table cell, in lists and block
quotes too; code blocks, fenced code, HTML blocks, link reference definitions and a leading front
matter block (`---` to `---` or `...`) are not, and stay as written.

The file is written again by replacing only the source of each text's inline content: list
markers, `#`s, `>`s, indentation, table pipes and everything between the texts stay as written,
byte for byte, and a text whose translation is the text unchanged stays as written too. Within a
text, emphasis, strong emphasis, strikethrough and links are runs (`inline`), written back with
their delimiters as the source wrote them (`*`, `__`, `~~`, `[` and the link's `](url "title")`
or `][ref]`; a reference by the link's own text, `[text]`, names its label so that it still
finds it). Code spans, autolinks, raw inline HTML, images (their alt text kept), hard line
breaks and a run whose only content is those (**`code`**) are marks, written back as written,
within the delimiters they were in that the run before or after them is in too.

A translated text is written on one line (a hard line break starts a new one with the prefix the
source's next line had: `> `, indentation), its text escaped where Markdown would read it as
markup (`*`, `_`, `[`, `<`, a `#`, `-` or `1.` beginning a paragraph's line, `|` in a table
cell, a closing `#` sequence in a heading), spaces at the edges of a run moved outside its
delimiters, and a no-break space at either end written as a reference (the parser trims it).

markdown-it-py does not say where an inline construct lies in the source; its rules for those
with a source to keep are wrapped (`_noting`) to note where each began and ended in its block's
content. A text this module cannot place in the file (a table row starting on a list item's
line) or whose delimiters nest more than `_DEPTH` deep is left as written, untranslated.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt, rules_inline
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from translate.documents.formats import RenderOptions, Translated
from translate.documents.inline import Inline, Mark, Run, Tagged, merged
from translate.documents.safe import DEFAULT_LIMITS, Limits, check_size, check_texts, text_of
from translate.text.sentences import lines_of

_SPAN = "translate.documents.markdown.span"  # a noted token's meta: its `_Span`
_SPACES = re.compile(r"[ \t\r\n\f\v\u2028\u2029]+")
_ESCAPED = re.compile(r"[\\`*\[\]<~]|&(?=#?\w+;)|(?<![^\W_])_|_(?![^\W_])")
_TRIMMED = re.compile(
    r"^[\t\v\f\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
    r"|[\t\v\f\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$"
)
_DEPTH = 16  # delimiters open at once, at most: a text nested deeper is left as written
_FRAMES = frozenset({"em_open", "strong_open", "s_open", "link_open"})
_TEXT = frozenset({"text", "text_special"})


@dataclass(frozen=True)
class _Span:
    """Where a construct lies in its block's content; a link's `]` at `label_end` (else -1)."""

    start: int
    end: int
    label_end: int = -1


def _noting(
    rule: Callable[[StateInline, bool], bool], kind: str
) -> Callable[[StateInline, bool], bool]:
    """`rule`, noting on the token of type `kind` it makes the span of source it read."""

    def noted(state: StateInline, silent: bool) -> bool:
        start, count = state.pos, len(state.tokens)
        found = rule(state, silent)
        if found and not silent:
            for token in state.tokens[count:]:
                if token.type == kind and _SPAN not in token.meta:
                    label_end = -1
                    if kind == "link_open" and state.src[start] == "[":
                        label_end = state.md.helpers.parseLinkLabel(state, start, True)
                    token.meta[_SPAN] = _Span(start, state.pos, label_end)
                    break
        return found

    return noted


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    for name, rule, kind in (
        ("link", rules_inline.link, "link_open"),
        ("image", rules_inline.image, "image"),
        ("autolink", rules_inline.autolink, "link_open"),
        ("html_inline", rules_inline.html_inline, "html_inline"),
        ("backticks", rules_inline.backtick, "code_inline"),
        ("newline", rules_inline.newline, "hardbreak"),
        ("escape", rules_inline.escape, "hardbreak"),
    ):
        md.inline.ruler.at(name, _noting(rule, kind))
    return md


@dataclass(frozen=True)
class _Block:
    """What writing a text needs to know of the block holding it."""

    cell: bool  # a table cell: `|` escaped, marks' pipes too
    atx: bool  # an ATX heading: a closing `#` sequence escaped
    breaks: tuple[str, ...]  # before content line k + 1: the line break and that line's prefix


@dataclass(frozen=True)
class _Frame:
    """A run's delimiters as the source wrote them."""

    start: str
    end: str


@dataclass(frozen=True)
class _Object:
    """An inline construct kept as written, and the delimiters it was within."""

    written: str
    frames: tuple[_Frame, ...]


@dataclass(frozen=True)
class _Break:
    """A hard line break, as it is written: `\\` or two spaces, the break, the next prefix."""

    written: str


@dataclass(frozen=True)
class _Part:
    """A text: where its source lies, its block, its runs and marks as tags."""

    start: int  # the inline content's source, text[start:end] of the file
    end: int
    block: _Block
    tagged: Tagged


@dataclass(frozen=True)
class MarkdownDocument:
    """A Markdown file read: its text, and the inline contents with text to translate."""

    text: str  # the file's text, without its byte-order mark
    bom: bool
    parts: tuple[_Part, ...]

    def texts(self) -> list[str]:
        return [part.tagged.text for part in self.parts]

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        if len(translated) != len(self.parts):
            raise ValueError(f"{len(self.parts)} texts, {len(translated)} translations")
        out, at = [], 0
        for part, translation in zip(self.parts, translated):
            out.append(self.text[at : part.start])
            if translation.text == part.tagged.text:
                out.append(self.text[part.start : part.end])
            else:
                out.append(_written(part.tagged.read(translation.text), part.block))
            at = part.end
        out.append(self.text[at:])
        return ("\ufeff" if self.bom else "").encode() + "".join(out).encode("utf-8")


@dataclass(frozen=True)
class _Lines:
    """The file's lines: as written, with their breaks and offsets, and as the parser reads
    them (NUL as U+FFFD, front matter blank)."""

    written: list[str]
    breaks: list[str]
    starts: list[int]
    parsed: list[str]


def read(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> MarkdownDocument:
    check_size(data, name, limits)
    text, bom = text_of(data, name)
    written, breaks = lines_of(text)
    starts = [0]
    for line, after in zip(written, breaks):
        starts.append(starts[-1] + len(line) + len(after))
    front = _front_matter(written)
    parsed = [""] * front + [line.replace("\0", "\ufffd") for line in written[front:]]
    lines = _Lines(written, breaks, starts, parsed)
    tokens = _parser().parse("\n".join(parsed))
    parts: list[_Part] = []
    depth = 0  # block quotes open
    cells: list[tuple[int, int]] = []
    cell = 0
    for index, token in enumerate(tokens):
        if token.type == "blockquote_open":
            depth += 1
        elif token.type == "blockquote_close":
            depth -= 1
        elif token.type == "tr_open" and token.map:
            cells, cell = _cells(parsed[token.map[0]], depth), 0
        elif token.type in ("th_open", "td_open"):
            cell += 1
        elif token.type == "inline" and token.map and token.content.strip():
            opener = tokens[index - 1]
            if opener.type in ("th_open", "td_open"):
                placed = _cell_placed(lines, token, cells[cell - 1] if cell <= len(cells) else None)
            else:
                atx = opener.type == "heading_open" and opener.markup.startswith("#")
                placed = _placed(lines, token, atx)
            if placed is None:
                continue
            start, end, block = placed
            items = _items(token.children or [], token.content, block)
            if items is not None and any(isinstance(i, Run) and i.text.strip() for i in items):
                parts.append(_Part(start, end, block, Tagged.write(merged(items))))
    check_texts(len(parts), name, limits)
    return MarkdownDocument(text, bom, tuple(parts))


def _front_matter(lines: list[str]) -> int:
    """The lines of a leading YAML front matter block (0 where there is none)."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for number in range(1, len(lines)):
        if lines[number].rstrip() in ("---", "..."):
            return number + 1
    return 0


# --- where a text lies in the file ---------------------------------------------------------
def _placed(lines: _Lines, token: Token, atx: bool) -> tuple[int, int, _Block] | None:
    """A paragraph's or heading's content: from its first character on its first line to its
    last on its last, and each later line's prefix."""
    pieces = token.content.split("\n")
    first = token.map[0]
    last = first + len(pieces) - 1
    if last >= len(lines.parsed):
        return None
    found = [lines.parsed[first + k].rfind(piece.lstrip()) for k, piece in enumerate(pieces)]
    if min(found) < 0:
        return None
    breaks = tuple(
        lines.breaks[first + k - 1] + lines.written[first + k][: found[k]]
        for k in range(1, len(pieces))
    )
    start = lines.starts[first] + found[0]
    end = lines.starts[last] + found[-1] + len(pieces[-1].lstrip())
    return start, end, _Block(cell=False, atx=atx, breaks=breaks)


def _cells(line: str, depth: int) -> list[tuple[int, int]]:
    """Where each cell of a table row lies in its line, split as markdown-it splits it (at a
    `|` not after a backslash; the row's leading and trailing `|` ending no cell)."""
    at = 0
    for _ in range(depth):
        quote = re.match(r"[ \t]{0,3}>[ \t]?", line[at:])
        if quote:
            at += quote.end()
    while at < len(line) and line[at] in " \t":
        at += 1
    spans, start, escaped = [], at, False
    for pos in range(at, len(line)):
        if line[pos] == "|" and not escaped:
            spans.append((start, pos))
            start = pos + 1
        escaped = line[pos] == "\\"
    spans.append((start, len(line)))
    if spans[0][0] == spans[0][1]:
        spans.pop(0)
    if spans and spans[-1][0] == spans[-1][1]:
        spans.pop()
    out = []
    for start, end in spans:
        cell = line[start:end]
        start += len(cell) - len(cell.lstrip())
        out.append((start, start + len(cell.strip())))
    return out


def _cell_placed(
    lines: _Lines, token: Token, span: tuple[int, int] | None
) -> tuple[int, int, _Block] | None:
    row = token.map[0]
    if span is None or lines.parsed[row][span[0] : span[1]].replace("\\|", "|") != token.content:
        return None
    block = _Block(cell=True, atx=False, breaks=())
    return lines.starts[row] + span[0], lines.starts[row] + span[1], block


# --- a text's runs and marks ---------------------------------------------------------------
def _closing(tokens: Sequence[Token], index: int) -> int:
    level = 0
    for k in range(index, len(tokens)):
        level += tokens[k].nesting
        if level == 0:
            return k
    return len(tokens) - 1


def _worded(tokens: Sequence[Token]) -> bool:
    """Whether `tokens` hold text to translate (an autolink's is not)."""
    k = 0
    while k < len(tokens):
        if tokens[k].type == "link_open" and tokens[k].markup == "autolink":
            k = _closing(tokens, k)
        elif tokens[k].type in _TEXT and tokens[k].content.strip():
            return True
        k += 1
    return False


def _clean(source: str, block: _Block) -> str:
    """A construct's source written on one line (a line break in it is a space), `|` escaped in
    a table cell (markdown-it took the backslashes off)."""
    source = re.sub(r"\n[ \t]*", " ", source)
    return source.replace("|", "\\|") if block.cell else source


def _verbatim(tokens: Sequence[Token], content: str, block: _Block) -> str | None:
    """The source of constructs holding no text to translate."""
    out = []
    k = 0
    while k < len(tokens):
        token = tokens[k]
        span = token.meta.get(_SPAN)
        if token.type in ("link_open", "code_inline", "html_inline", "image"):
            if span is None:
                return None
            out.append(_clean(content[span.start : span.end], block))
            if token.type == "link_open":
                k = _closing(tokens, k)
        elif token.type in _TEXT:
            out.append(token.content)  # spaces only
        elif token.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif token.nesting:
            out.append(token.markup)
        else:
            return None
        k += 1
    return "".join(out)


def _frame(token: Token, content: str, block: _Block) -> _Frame | None:
    if token.type != "link_open":
        return _Frame(token.markup, token.markup)
    span = token.meta.get(_SPAN)
    if span is None or span.label_end < 0:
        return None
    end = content[span.label_end : span.end]
    if end in ("]", "][]"):  # a reference by the link's text: name the label, not the text
        end = "][" + content[span.start + 1 : span.label_end] + "]"
    return _Frame("[", _clean(end, block))


def _items(children: Sequence[Token], content: str, block: _Block) -> list[Inline] | None:
    """The inline content as runs (keyed by the delimiters around them) and marks; None where
    a construct's source is not known or delimiters nest deeper than `_DEPTH`."""
    items: list[Inline] = []
    stack: list[_Frame] = []
    newlines: list[int] | None = None  # where the content's lines end, once a break needs it
    k = 0
    while k < len(children):
        token = children[k]
        if token.type in _TEXT:
            items.append(Run(token.content, tuple(stack)))
        elif token.type == "softbreak":
            items.append(Run(" ", tuple(stack)))
        elif token.type == "hardbreak":
            span = token.meta.get(_SPAN)
            if newlines is None:
                newlines = [found.start() for found in re.finditer("\n", content)]
            line = bisect.bisect_left(newlines, span.end) if span else 0
            if not 1 <= line <= len(block.breaks):
                return None
            style = "\\" if content[span.start] == "\\" else "  "
            items.append(Mark(_Break(style + block.breaks[line - 1])))
        elif token.type in _FRAMES:
            end = _closing(children, k)
            if token.markup == "autolink" or not _worded(children[k + 1 : end]):
                source = _verbatim(children[k : end + 1], content, block)
                if source is None:
                    return None
                items.append(Mark(_Object(source, tuple(stack))))
                k = end
            else:
                frame = _frame(token, content, block)
                if frame is None or len(stack) >= _DEPTH:
                    return None
                stack.append(frame)
        elif token.nesting < 0:
            stack.pop()
        else:
            source = _verbatim([token], content, block)
            if source is None:
                return None
            items.append(Mark(_Object(source, tuple(stack))))
        k += 1
    return items


# --- writing a translated text ---------------------------------------------------------------
def _escaped(text: str, line_start: bool, block: _Block) -> str:
    """Text written so that Markdown reads it as text."""
    out = _ESCAPED.sub(lambda found: "\\" + found.group(), text)
    if block.cell:
        return out.replace("|", "\\|")
    if line_start and not block.atx:  # an ATX heading's text starts no block
        number = re.match(r"\d{1,9}[.)]", out)
        if number:
            out = out[: number.end() - 1] + "\\" + out[number.end() - 1 :]
        elif out[:1] in ("#", ">", "+", "=", "-"):
            out = "\\" + out
    return out


def _common(one: tuple[_Frame, ...], other: tuple[_Frame, ...]) -> int:
    """How many delimiters, from the outermost, two runs share."""
    common = 0
    while common < min(len(one), len(other)) and one[common] == other[common]:
        common += 1
    return common


class _Writer:
    """Markdown written left to right: the delimiters open, whether a space is owed, whether
    the line has anything on it yet."""

    def __init__(self, block: _Block) -> None:
        self.block = block
        self.out: list[str] = []
        self.stack: tuple[_Frame, ...] = ()
        self.space = False
        self.fresh = True

    def close_to(self, key: tuple[_Frame, ...]) -> None:
        """The delimiters open that `key` does not start with closed."""
        common = _common(self.stack, key)
        self.out += [frame.end for frame in reversed(self.stack[common:])]
        self.stack = self.stack[:common]

    def write(self, key: tuple[_Frame, ...], written: str, text: bool) -> None:
        """`written` within the delimiters `key`: text (escaped) or a construct's source."""
        self.close_to(key)
        if self.space and not self.fresh:
            self.out.append(" ")
        opens = key[len(self.stack) :]
        self.out += [frame.start for frame in opens]
        self.out.append(
            _escaped(written, self.fresh and not opens, self.block) if text else written
        )
        self.stack, self.space, self.fresh = key, False, False

    def line_break(self, written: str) -> None:
        self.out.append(written)
        self.space, self.fresh = False, True


def _written(items: Sequence[Inline], block: _Block) -> str:
    """A translation's runs and marks as Markdown, on one line but at hard line breaks. A mark
    is written within the delimiters it was in that the run before or after it is in too."""
    items = list(items)
    while items and isinstance(items[0], Mark) and isinstance(items[0].key, _Break):
        items.pop(0)
    while items and isinstance(items[-1], Mark) and isinstance(items[-1].key, _Break):
        items.pop()
    ahead: list[tuple[_Frame, ...]] = []  # the delimiters of each item's next run
    key: tuple[_Frame, ...] = ()
    for item in reversed(items):
        ahead.append(key)
        if isinstance(item, Run) and item.text.strip():
            key = item.key
    ahead.reverse()
    writer = _Writer(block)
    for item, after in zip(items, ahead):
        if isinstance(item, Mark):
            if isinstance(item.key, _Break):
                writer.line_break(item.key.written)
                continue
            frames = item.key.frames
            shared = max(_common(frames, writer.stack), _common(frames, after))
            writer.write(frames[:shared], item.key.written, text=False)
            continue
        text = _SPACES.sub(" ", item.text)
        core = text.strip(" ")
        if not core:  # spaces: outside the delimiters they are outside of
            writer.close_to(item.key)
            writer.space = writer.space or bool(text)
            continue
        writer.space = writer.space or text[0] == " "
        writer.write(item.key, core, text=True)
        writer.space = text[-1] == " "
    writer.close_to(())
    # the parser trims a block's content of these (a no-break space too): written as references
    written = _TRIMMED.sub(
        lambda found: "".join(f"&#x{ord(char):X};" for char in found.group()), "".join(writer.out)
    )
    if block.atx:  # a closing sequence of #s would be read as the heading's end
        written = re.sub(r"(^|[ \t])(#+)$", r"\1\\\2", written)
    return written
