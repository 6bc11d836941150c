"""HTML pages (.html, .htm, .xhtml), a whole document or a fragment, translated with their
structure: the text of a paragraph, a list item, a table cell, a heading (any element that is not
inline) is one text, its inline elements written in it as tags (`inline`), so a sentence across a
link or a bold word is translated whole.

The page is read as browsers read it, by `translate.text.markup` (`HtmlTokens`): the tokens of the
input where they stand, which text nodes a browser places in a translated element, the element
each start tag opened. Left untranslated as markup.py decides: script, style and the other raw-text
elements (textarea too), template, code, pre, an element marked translate="no" and what is in
them, comments, svg, math, select (its options) and noscript. Translated besides the text: the
page's `<title>`, the values of alt, title, placeholder and aria-label on any translated element,
and the content of `<meta name="description">`, each a text of its own.

One text is a stretch of text nodes, comments and inline elements (`INLINE`, `MARKS`) with no other
tag between; its text nodes are runs keyed by the inline elements around them (their start tags,
outermost first), its comments, br, wbr and img, and each inline element holding no text to
translate (code, an anchor `<a name="x"></a>`) are marks holding their markup as written. An
inline element opened and not closed in the stretch (or closed and not opened in it) splits it
there. The stretch is one text only where every tag pairs up in it and the tree the browser
builds agrees: each text node and each start tag stands in exactly the inline elements open
around it in the stretch, nothing created again (a formatting element a browser reopens), no text
moved before a table; otherwise each of its text nodes is a text of its own, as markup.py gives
them. Whitespace at a text's start and end (outside its inline elements) is left out of it and
kept as written; a line break within it (with the spaces around it) is given to translate as one
space: HTML shows it as one, and a text is translated a line at a time.

Written again: an unchanged text is left as written, byte for byte; a translated one replaces the
stretch's text and inline markup, each inline element's start and end tag and each mark exactly
once, as written: an element around the text its tag is around in the translation, opened at its
first run and closed after its last (where the translation splits an element's runs, the later
text is written outside it), an element whose tag the translation lost written empty at the
stretch's end. Text is escaped as markup.py escapes it (`escape_text`), an attribute value in
its quotes (unquoted ones are given double quotes), a title all of &, < and >. Everything else
is the input's own characters.

The bytes are UTF-8 (a byte-order mark kept), or the encoding a `<meta charset>` (or http-equiv
Content-Type, or an XML declaration) in the first 1024 bytes declares, where Python has it and it
reads ASCII as ASCII (not UTF-7 or UTF-16); the page is written in the same encoding, a character
it cannot hold as a character reference. The size is capped by markup.py's MAX_NODES and
MAX_DEPTH.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions
from translate.documents.inline import Inline, Mark, Run, Tagged
from translate.documents.safe import DEFAULT_LIMITS, Limits, check_size, check_texts, text_of
from translate.documents.translating import Translated
from translate.text.html_tree import Element, ascii_lower
from translate.text.markup import (
    Attribute,
    HtmlTokens,
    Kind,
    MarkupTooLargeAt,
    Token,
    escape_text,
)
from translate.text.sentences import is_blank

# Inline (phrasing) elements whose text is a run of the text around them.
INLINE = frozenset(
    {"a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em"}
    | {"font", "i", "ins", "kbd", "mark", "nobr", "q", "s", "samp", "small", "span", "strike"}
    | {"strong", "sub", "sup", "time", "tt", "u", "var"}
)
MARKS = frozenset({"br", "wbr", "img"})  # void inline elements: a mark in the text
TRANSLATED_ATTRIBUTES = ("alt", "title", "placeholder", "aria-label")
# Text in these lands before the table in a browser (foster parenting).
_FOSTERING = frozenset({"table", "tbody", "tfoot", "thead", "tr"})
_SPACE = " \t\n\r\f"
# A run of HTML whitespace holding a line break, within a text (not at its start or end).
_LINE_BREAK = re.compile(r"(?<=[^ \t\n\r\f])[ \t\n\r\f]*[\n\r][ \t\n\r\f]*(?=[^ \t\n\r\f])")
_PRESCAN = 1024  # bytes searched for a declared encoding, as the standard's prescan
_COMMENT = re.compile(rb"<!--.*?-->", re.DOTALL)
_META = re.compile(rb"<meta[\t\n\f\r /][^>]*>", re.IGNORECASE)
_CHARSET = re.compile(rb"""charset[\t\n\f\r ]*=[\t\n\f\r ]*["']?([^\t\n\f\r "';>/]+)""", re.I)
_XML_ENCODING = re.compile(rb"""<\?xml[^>]*?encoding[\t\n\r ]*=[\t\n\r ]*["']([A-Za-z0-9._-]+)""")
_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n\f\r"
# Labels the standard reads as UTF-8 (a meta cannot declare UTF-16), or as windows-1252.
_UTF8_LABELS = frozenset({"utf-8", "utf8", "unicode-1-1-utf-8", "utf-16", "utf-16le", "utf-16be"})
_LATIN_LABELS = frozenset(
    {"ascii", "us-ascii", "ansi_x3.4-1968", "iso-8859-1", "iso8859-1", "iso88591", "iso_8859-1"}
    | {"latin1", "l1", "cp819", "ibm819", "iso-ir-100", "csisolatin1", "windows-1252", "cp1252"}
    | {"x-cp1252"}
)


@dataclass(frozen=True)
class _Stretch:
    """Inline content translated as one text: tokens `first` to `stop` (not included)."""

    first: int
    stop: int
    tagged: Tagged
    ends: dict[int, int]  # an inline element's start token: its end token
    elements: tuple[int, ...]  # the start tokens of the inline elements holding runs
    marks: dict[Hashable, tuple[int, ...]]  # a mark's key: the elements it stands in
    written: str  # its text nodes as written (what escaping may leave bare)
    lead: str = ""  # whitespace at its start and end, outside its inline elements: kept
    trail: str = ""


@dataclass(frozen=True)
class _Node:
    """A text node translated alone (`token`)."""

    token: int


@dataclass(frozen=True)
class _Value:
    """An attribute value of a start tag (`token`)."""

    token: int
    attribute: Attribute


@dataclass(frozen=True)
class _Title:
    """The content of a title element (`token`, raw text)."""

    token: int


_Part = _Stretch | _Node | _Value | _Title


@dataclass(frozen=True)
class _Encoding:
    """How the page's bytes are text: `codec` (None: UTF-8), with a byte-order mark or not."""

    codec: str | None
    bom: bool

    def encode(self, text: str) -> bytes:
        if self.codec is None:
            return ("\ufeff" if self.bom else "").encode() + text.encode("utf-8")
        return text.encode(self.codec, "xmlcharrefreplace")


@dataclass(frozen=True)
class HtmlDocument:
    """A page read: its text, its tokens, what is translated (`parts`, one a text)."""

    markup: str
    tokens: tuple[Token, ...]
    parts: tuple[_Part, ...]
    sources: tuple[str, ...]  # each part's text, as `texts` gives it
    encoding: _Encoding

    def texts(self) -> list[str]:
        return list(self.sources)

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        if len(translated) != len(self.parts):
            raise ValueError(f"{len(self.parts)} texts, {len(translated)} translations")
        writer = _Writer(self.markup, self.tokens)
        stretches: dict[int, tuple[_Stretch, str]] = {}
        for part, source, translation in zip(self.parts, self.sources, translated):
            if translation.text == source:
                continue  # left as written
            if isinstance(part, _Stretch):
                stretches[part.first] = (part, translation.text)
            elif isinstance(part, _Node):
                written = writer.source(part.token)
                writer.replaced[part.token] = escape_text(translation.text, written)
            elif isinstance(part, _Value):
                writer.values.setdefault(part.token, []).append((part.attribute, translation.text))
            else:
                writer.replaced[part.token] = escape_text(translation.text)
        out, at = [], 0
        while at < len(self.tokens):
            if at in stretches:
                stretch, text = stretches[at]
                out.append(writer.stretch(stretch, text))
                at = stretch.stop
            else:
                out.append(writer.piece(at))
                at += 1
        return self.encoding.encode("".join(out))


class _Writer:
    """The page's tokens written again: each as written, or with what replaces it (a text node's
    or title's translation, attribute values), and a stretch with its translation."""

    def __init__(self, markup: str, tokens: Sequence[Token]) -> None:
        self.markup, self.tokens = markup, tokens
        self.replaced: dict[int, str] = {}  # a token written as this instead
        self.values: dict[int, list[tuple[Attribute, str]]] = {}  # a start tag's new values

    def source(self, index: int) -> str:
        token = self.tokens[index]
        return self.markup[token.start : token.end]

    def piece(self, index: int) -> str:
        """A token as written, or with its replacement or its attributes' new values."""
        if index in self.replaced:
            return self.replaced[index]
        token = self.tokens[index]
        if index not in self.values:
            return self.markup[token.start : token.end]
        pieces, at = [], token.start
        for attribute, value in sorted(self.values[index], key=lambda found: found[0].start):
            written = self.markup[attribute.start : attribute.end]
            quote = written[0] if written[:1] in ("'", '"') else '"'
            pieces += [self.markup[at : attribute.start], quote, _attribute(value, quote), quote]
            at = attribute.end
        pieces.append(self.markup[at : token.end])
        return "".join(pieces)

    def pieces(self, first: int, last: int) -> str:
        return "".join(self.piece(index) for index in range(first, last + 1))

    def stretch(self, stretch: _Stretch, translation: str) -> str:
        """The stretch with its translation's runs and marks, each inline element's tags and each
        mark written once: an element opened at the first run or mark it holds and closed where
        a run or mark it does not hold comes; a run of an element already closed is written
        outside it; an element the translation lost, written empty at the end (in those of them
        it stood in). Runs that come together with no markup between are escaped as one text."""
        out: list[str] = [stretch.lead]
        text: list[str] = []
        open_elements: list[int] = []
        done: set[int] = set()  # elements opened (and maybe closed)

        def write(markup: str) -> None:
            if text:
                out.append(escape_text("".join(text), stretch.written))
                text.clear()
            out.append(markup)

        around = _marks_in(stretch.tagged, translation)
        base = stretch.tagged.base
        for item in stretch.tagged.read(translation):
            key = item.key
            if isinstance(item, Mark):
                key = around.get(item.key, base)
                if key == base:  # in the bare text: in those of its own elements it holds
                    key = _common(base, stretch.marks[item.key])
            wanted = [index for index in key if index not in done or index in open_elements]
            kept = 0
            while kept < min(len(open_elements), len(wanted)):
                if open_elements[kept] != wanted[kept]:
                    break
                kept += 1
            while len(open_elements) > kept:
                write(self.piece(stretch.ends[open_elements.pop()]))
            for index in wanted[kept:]:
                if index not in done:
                    done.add(index)
                    open_elements.append(index)
                    write(self.piece(index))
            if isinstance(item, Mark):
                write(self.pieces(*item.key))
            else:
                text.append(item.text)
        while open_elements:
            write(self.piece(stretch.ends[open_elements.pop()]))
        for index in stretch.elements:
            if index in done:
                continue
            while open_elements and stretch.ends[open_elements[-1]] < index:
                write(self.piece(stretch.ends[open_elements.pop()]))
            open_elements.append(index)
            write(self.piece(index))
        while open_elements:
            write(self.piece(stretch.ends[open_elements.pop()]))
        write(stretch.trail)
        return "".join(out)


def _common(one: tuple[int, ...], other: tuple[int, ...]) -> tuple[int, ...]:
    """The elements two keys both begin with."""
    common = 0
    while common < min(len(one), len(other)) and one[common] == other[common]:
        common += 1
    return one[:common]


def _marks_in(tagged: Tagged, translation: str) -> dict[Hashable, Hashable]:
    """For each mark of the translation (its key), the formatting of the tag around it (the
    innermost), as `Tagged.read` takes a run's: the elements it stands in."""
    tags = re.compile(rf"<(/?)({tagged.pair}|{tagged.single})(\d+)(/?)>")
    around: dict[Hashable, Hashable] = {}
    open_tags: list[Hashable] = []
    seen: set[int] = set()
    for found in tags.finditer(translation):
        closing, letter, number, empty = found.groups()
        k = int(number)
        if not 1 <= k <= len(tagged.tags) or (k in seen and not closing):
            continue
        tag = tagged.tags[k - 1]
        if isinstance(tag, Mark):
            if letter == tagged.single and empty and not closing:
                seen.add(k)
                around[tag.key] = open_tags[-1] if open_tags else tagged.base
        elif letter == tagged.pair and not empty:
            if not closing:
                seen.add(k)
                open_tags.append(tag.key)
            elif open_tags and open_tags[-1] == tag.key:
                open_tags.pop()
    return around


def _attribute(value: str, quote: str) -> str:
    """A value written in `quote`s: &, <, > and the quote as references, a no-break space as
    &nbsp;."""
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = value.replace(quote, "&quot;" if quote == '"' else "&#39;")
    return value.replace("\xa0", "&nbsp;")


def _flowing(text: str) -> str:
    """A line break within a text, with the whitespace around it, as one space."""
    return _LINE_BREAK.sub(" ", text)


# Reading: the stretches of inline content, and what is translated.


def _inline(token: Token, end: int) -> bool:
    """Whether the token may stand in a text: a text node, a comment (or other inert token) that
    does not run to the input's `end` (moved, an unfinished one would take in what follows it),
    a tag of an inline element."""
    if token.kind is Kind.TEXT:
        return True
    if token.kind is Kind.OTHER:
        return token.end < end
    if token.kind is Kind.START:
        return token.name in INLINE or token.name in MARKS
    return token.kind is Kind.END and token.name in INLINE


def _stretches(tokens: Sequence[Token], end: int) -> list[tuple[int, int]]:
    """The longest runs of tokens that may stand in a text (`_inline`), holding a text node
    markup.py lists."""
    found, first = [], None
    for index, token in enumerate([*tokens, Token(Kind.RAW, 0, 0)]):
        if _inline(token, end):
            first = index if first is None else first
        elif first is not None:
            if any(tokens[at].listed for at in range(first, index)):
                found.append((first, index))
            first = None
    return found


def _pairs(
    tokens: Sequence[Token], first: int, stop: int
) -> tuple[dict[int, int] | None, list[int]]:
    """The inline elements' start tags of a stretch with their end tags, and the tags that pair
    with none in it (where it splits); None for the pairs where they are nested otherwise."""
    ends: dict[int, int] = {}
    unpaired, open_tags = [], []
    for index in range(first, stop):
        token = tokens[index]
        if token.kind is Kind.START and token.name in INLINE:
            open_tags.append(index)
        elif token.kind is Kind.END:
            if open_tags and tokens[open_tags[-1]].name == token.name:
                ends[open_tags.pop()] = index
            elif any(tokens[at].name == token.name for at in open_tags):
                return None, []
            else:
                unpaired.append(index)
    return ends, sorted(unpaired + open_tags)


@dataclass(frozen=True)
class _Open:
    """An inline element's start tag (`index`, its token) in a stretch."""

    index: int


@dataclass(frozen=True)
class _Close:
    index: int  # the start tag's token


def _text(
    tokens: Sequence[Token], markup: str, first: int, stop: int, ends: dict[int, int]
) -> _Stretch | None:
    """Tokens `first` to `stop` as one text, or None where the tree a browser builds does not
    hold them as their tags nest (then each text node is a text of its own)."""
    base: tuple[Element, ...] | None = None

    def stands(path: tuple[Element, ...] | None, inner: tuple[Element, ...]) -> bool:
        nonlocal base
        if path is None or len(path) <= len(inner):
            return False
        outer = path[: len(path) - len(inner)]
        if base is None:
            base = outer
        return outer == base and path[len(outer) :] == inner and base[-1].name not in _FOSTERING

    events: list[Run | Mark | _Open | _Close] = []
    marks: dict[Hashable, tuple[int, ...]] = {}
    open_tags: list[int] = []
    written: list[str] = []
    index = first
    while index < stop:
        token = tokens[index]
        inner = tuple(tokens[at].element for at in open_tags)
        if token.kind is Kind.START and token.name in MARKS or token.kind is Kind.OTHER:
            events.append(Mark((index, index)))
            marks[index, index] = tuple(open_tags)
        elif token.kind is Kind.START:
            if token.element is None or not stands(token.path, (*inner, token.element)):
                return None
            end = ends[index]
            if not any(tokens[at].listed for at in range(index, end)):  # code, an anchor
                events.append(Mark((index, end)))
                marks[index, end] = tuple(open_tags)
                index = end
            else:
                open_tags.append(index)
                events.append(_Open(index))
        elif token.kind is Kind.END:
            events.append(_Close(open_tags.pop()))
        elif token.translated:
            if not stands(token.path, inner):
                return None
            events.append(Run(token.text, tuple(open_tags)))
            written.append(markup[token.start : token.end])
        elif token.text:
            return None  # text left untranslated outside an element left so
        else:
            events.append(Mark((index, index)))  # only NUL: a browser drops it
            marks[index, index] = tuple(open_tags)
        index += 1
    elements = tuple(event.index for event in events if isinstance(event, _Open))
    lead = trail = ""
    if isinstance(events[0], Run) and not events[0].key:
        text = events[0].text.lstrip(_SPACE)
        lead, events[0] = events[0].text[: len(events[0].text) - len(text)], Run(text, ())
    if isinstance(events[-1], Run) and not events[-1].key:
        text = events[-1].text.rstrip(_SPACE)
        trail, events[-1] = events[-1].text[len(text) :], Run(text, ())
    tagged = _tagged(events)
    return _Stretch(first, stop, tagged, ends, elements, marks, " ".join(written), lead, trail)


def _tagged(events: Sequence[Run | Mark | _Open | _Close]) -> Tagged:
    """The stretch's text with a tag for each inline element around its runs, nested as the
    elements are (one for an element and the one it holds, where it holds only that), and one
    for each mark, numbered in order; the elements around every run are the bare text's
    formatting (`Tagged.base`). A run's key is the start tags of the elements
    around it, outermost first (the key of the innermost tag around it, as `Tagged.read` reads
    it back)."""
    runs = [event for event in events if isinstance(event, Run)]
    base = runs[0].key
    for run in runs:
        base = _common(base, run.key)
    letters = Tagged.write([Run("".join(run.text for run in runs), None)])  # those it leaves free
    pair, single = letters.pair, letters.single
    closes = {event.index: at for at, event in enumerate(events) if isinstance(event, _Close)}
    parts: list[str] = []
    tags: list[Inline] = []
    numbers: dict[int, int] = {}  # an element's start token: its tag's number
    path: list[int] = []
    for at, event in enumerate(events):
        if isinstance(event, _Open):
            path.append(event.index)
            inner = events[at + 1]
            if isinstance(inner, _Open) and closes[inner.index] + 1 == closes[event.index]:
                continue  # it holds one element and nothing else: that one's tag stands for both
            if len(path) > len(base):
                tags.append(Run("", tuple(path)))
                numbers[event.index] = len(tags)
                parts.append(f"<{pair}{len(tags)}>")
        elif isinstance(event, _Close):
            path.pop()
            if event.index in numbers:
                parts.append(f"</{pair}{numbers[event.index]}>")
        elif isinstance(event, Mark):
            tags.append(event)
            parts.append(f"<{single}{len(tags)}/>")
        else:
            parts.append(event.text)
    return Tagged(_flowing("".join(parts)), base, tuple(tags), pair, single)


def _trimmed(tokens: Sequence[Token], first: int, stop: int) -> tuple[int, int]:
    """Tokens `first` to `stop` without the text nodes of only whitespace at either end: those
    are left as written."""

    def blank(index: int) -> bool:
        token = tokens[index]
        return token.kind is Kind.TEXT and not token.text.strip(_SPACE)

    while first < stop and blank(first):
        first += 1
    while stop > first and blank(stop - 1):
        stop -= 1
    return first, stop


def _parts(tokens: Sequence[Token], markup: str) -> list[_Part]:
    """What is translated, in the page's order: each stretch of inline content as one text
    (or its text nodes one by one), attribute values, the title."""
    stretches: dict[int, _Stretch] = {}
    alone: set[int] = set()
    for first, stop in _stretches(tokens, len(markup)):
        ends, unpaired = _pairs(tokens, first, stop)
        bounds = [first - 1, *unpaired, stop] if ends is not None else []
        for before, after in zip(bounds, bounds[1:]):
            begin, end = _trimmed(tokens, before + 1, after)
            if not any(tokens[at].listed for at in range(begin, end)):
                continue
            stretch = _text(tokens, markup, begin, end, ends)
            if stretch is None:
                alone.update(at for at in range(begin, end) if tokens[at].listed)
            else:
                stretches[begin] = stretch
        if ends is None:
            alone.update(at for at in range(first, stop) if tokens[at].listed)
    parts: list[_Part] = []
    kept = _kept(tokens)
    for index, token in enumerate(tokens):
        if kept is not None and index >= kept:
            parts = [part for part in parts if isinstance(part, _Title) or _in_head(part, tokens)]
            break
        if index in stretches:
            parts.append(stretches[index])
        elif index in alone:
            parts.append(_Node(index))
        if token.kind is Kind.START and token.translated:
            parts += [_Value(index, attribute) for attribute in _translated_values(token)]
        elif token.kind is Kind.RAW and token.name == "title" and token.translated:
            if not is_blank(token.text):
                parts.append(_Title(index))
    return parts


def _kept(tokens: Sequence[Token]) -> int | None:
    """Where a page marked translate="no" on its html (from its start) or body element (from
    there, but for the title and a description meta) is left untranslated (a browser reads the
    attributes of every html and body start tag onto its one html and body element; the fragment
    markup.py reads has none); None where it is not."""
    for index, token in enumerate(tokens):
        if token.kind is Kind.START and token.name in ("html", "body"):
            marked = {attribute.name: attribute.value for attribute in token.attributes}
            if ascii_lower(marked.get("translate", "")) == "no":
                return 0 if token.name == "html" else index
    return None


def _in_head(part: _Part, tokens: Sequence[Token]) -> bool:
    """Whether a part is what a page's head has translated: a description meta's content."""
    return isinstance(part, _Value) and tokens[part.token].name == "meta"


def _translated_values(token: Token) -> list[Attribute]:
    """The attributes of a start tag whose values are translated: alt, title, placeholder and
    aria-label, a description meta's content; not a blank one."""
    named = {attribute.name: attribute for attribute in token.attributes}
    chosen = [named[name] for name in TRANSLATED_ATTRIBUTES if name in named]
    if token.name == "meta" and "content" in named and "name" in named:
        if ascii_lower(named["name"].value.strip(_SPACE)) == "description":
            chosen.append(named["content"])
    return sorted((a for a in chosen if not is_blank(a.value)), key=lambda a: a.start)


def _source(part: _Part, tokens: Sequence[Token]) -> str:
    """A part's text, as given to translate."""
    if isinstance(part, _Stretch):
        return part.tagged.text
    if isinstance(part, _Value):
        return _flowing(part.attribute.value)
    return _flowing(tokens[part.token].text)


# The bytes as text.


def _declared(data: bytes) -> str | None:
    """The encoding the page's start declares: a meta's charset (or its http-equiv
    Content-Type's), or an XML declaration's encoding; the label as written, lower-cased."""
    head = _COMMENT.sub(b"", data[:_PRESCAN])
    if found := _XML_ENCODING.match(head):
        return found[1].decode("ascii").lower()
    for meta in _META.finditer(head):
        if found := _CHARSET.search(meta[0]):
            return found[1].decode("latin-1").strip().lower()
    return None


def _encoding(label: str, name: str) -> str | None:
    """The codec of a declared label (None: UTF-8): one Python has that reads ASCII as ASCII."""
    if label in _UTF8_LABELS:
        return None
    if label in _LATIN_LABELS:
        return "cp1252"
    try:
        codec = codecs.lookup(label).name
        compatible = _ASCII.decode(codec) == _ASCII.decode("ascii")
        compatible = compatible and _ASCII.decode("ascii").encode(codec) == _ASCII
    except (LookupError, UnicodeError):
        compatible = False
    if not compatible:
        raise DocumentError(
            f"{name}: declares the character encoding {label!r}, which is not one HTML is read "
            "in here (UTF-8, or one that reads ASCII as ASCII)"
        )
    return None if codec == "utf-8" else codec


def _decoded(data: bytes, name: str) -> tuple[str, _Encoding]:
    """The page's text: UTF-8 with or without a byte-order mark, or in the encoding it
    declares."""
    label = None if data.startswith(b"\xef\xbb\xbf") else _declared(data)
    codec = _encoding(label, name) if label else None
    if codec is None:
        text, bom = text_of(data, name)
        return text, _Encoding(None, bom)
    try:
        return data.decode(codec), _Encoding(codec, False)
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DocumentError(f"{name} line {line}: not {label} text, as it declares") from None


def read(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> HtmlDocument:
    check_size(data, name, limits)
    markup, encoding = _decoded(data, name)
    try:
        tokens = tuple(HtmlTokens.parse(markup, document=True).tokens)
    except MarkupTooLargeAt as error:
        line = markup.count("\n", 0, error.at) + 1
        what = (
            "nodes (elements, attributes, texts, comments)"
            if error.what == "nodes"
            else "elements open at once (nested)"
        )
        raise DocumentError(f"{name} line {line}: more than {error.limit:,} {what}") from None
    parts = _parts(tokens, markup)
    check_texts(len(parts), name, limits)
    sources = tuple(_source(part, tokens) for part in parts)
    return HtmlDocument(markup, tokens, tuple(parts), sources, encoding)
