"""HTML translated in place: the text nodes of an HTML fragment listed to translate, and the
fragment written again with each one replaced by its translation.

The markup comes from anyone and the output is shown in browsers, so it is read as the HTML
standard's tokenizer reads it (https://html.spec.whatwg.org/#tokenization) as the content of an
HTML element such as a div, by a reader of its own: Python's html.parser reads much of it
otherwise, and its reading changes between Python releases. It is written again by replacing only
the text nodes where they stand in the input: the tags, comments and whitespace between them are
the input's own characters, so a browser reads the output as it reads the input. Rebuilding it
from a parse tree would not: a tree keeps what its parser understood, and where that differs from
a browser, what was inert can come out live.

Which element a text lands in is the standard's tree construction's
(https://html.spec.whatwg.org/#tree-construction), kept by `html_tree.TreeBuilder` as far as it
decides that: the elements a start tag closes, the end tags a browser ignores, the formatting
elements it creates again (the adoption agency, the list of active formatting elements), tables.
Left untranslated:
script, style and the other elements whose content is raw text, template, each text a browser
places in code, pre or an element marked translate="no", however the tags around it are nested
(text a table moves before it counts as in the table), comments and declarations.

svg and math (foreign content), select and noscript are left as written and untranslated: in them
a browser reads CDATA sections, raw text and comments otherwise than in HTML, browsers differ on
select, and noscript is raw text only with scripting on. Each is skipped to where a browser's
tree construction ends it, and translation goes on after: its end tag (one of the same name
nested in it counted), or, in svg and math, a start tag of HTML that breaks out of foreign
content. Where what follows cannot be known alike for every browser (no end tag; svg or math
holding HTML: foreignObject, desc, title, mi, ...; an end tag in them that closes nothing opened
in them; a select holding more than option and optgroup; a noscript holding more than text and
images; a template holding more than text), nothing after is translated: left as written, the
rest reads as it did, whatever a browser makes of it. Where html5lib (the standard parser the
tests compare with, which follows an older version of the standard) and the standard part, or
quirks mode would read the markup otherwise (ruby, search, a table in a paragraph, ...), nothing
is translated from there on once an element left untranslated is open or may be created again.

A translation is written as text: a no-break space as &nbsp;; &, < and > escaped, but left bare
where its text node held them bare (writing them as references only where bare they would start
markup or a reference) and where in the translation they cannot start markup or a reference: a
"<" not before an ASCII letter, "/", "!" or "?", a "&" not before an ASCII letter or digit or "#",
any ">". The size is capped while it is parsed, in time linear in the input and, for the
elements a browser creates again, in the depth cap.

`HtmlTokens` gives the same reading as the tokens that make up the input, each with where it
stands (they cover the input from its start to its end, one after another): for a text node
whether it is translated and the open elements it lands in, for a start tag the element it opened
and its attributes with where each value stands, for a raw-text element's content whether it is
translated; a format that translates more than text nodes one by one (the text of a paragraph
with its inline elements, attribute values, a page's title: `translate.documents.html`) builds on
them. Read as a document (`document=True`), a noscript may also hold link and meta elements, as
a page's head does: in head or in body, with scripting on or off, they hold no text and the
noscript ends at its end tag alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from html import unescape
from html.entities import html5
from itertools import islice

from translate.text.html_tree import (
    RAW_TEXT_TAGS,
    Element,
    MarkupTooLarge,
    TreeBuilder,
    ascii_lower,
)

MAX_NODES = 20_000  # elements (with their attributes), text nodes and comments a fragment may hold
MAX_DEPTH = 512  # elements open at once (nesting), as browsers' parsers cap it

HTML_SPACE = " \t\n\r\f"  # HTML's whitespace; a no-break space (&nbsp;) is text
# Start tags of HTML that end foreign content (svg, math) where they stand.
_BREAKOUT = frozenset(
    {"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em"}
    | {"embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing"}
    | {"menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong"}
    | {"strike", "sub", "sup", "table", "tt", "u", "ul", "var"}
)
_FONT_BREAKOUT = frozenset({"color", "face", "size"})
# Elements of svg and math whose content a browser reads as HTML.
_INTEGRATION_POINTS = frozenset(
    {"foreignobject", "desc", "title", "mi", "mo", "mn", "ms", "mtext", "annotation-xml"}
)
_IN_SELECT = frozenset({"option", "optgroup"})
_IN_NOSCRIPT = frozenset({"img", "br", "wbr"})
_IN_NOSCRIPT_OF_A_DOCUMENT = _IN_NOSCRIPT | {"link", "meta"}


# A tag from "<" or "</" to its ">" (tag name, before/after attribute name, attribute name and
# value, self-closing start tag states): the name, the attributes (group 2), each split from the
# next by whitespace or "/", with a value after "=" quoted or not, a quote running to its match or
# the end of the input; then "/>" or ">" (group 3), missing where the input ends first (eof-in-tag:
# the tag is dropped). HTML's whitespace is these five characters only: "<img src=x\xa0onerror=>"
# and "<img src=x\x0bonerror=>" have one attribute.
_TAG = re.compile(
    r"""</?([a-zA-Z][^\t\n\f\r />]*)
    ((?:[\t\n\f\r ]|/(?!>)|[^\t\n\f\r />][^\t\n\f\r />=]*
        (?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:"[^"]*"?|'[^']*'?|[^\t\n\f\r >"'][^\t\n\f\r >]*)?)?)*)
    (/?>)?""",
    re.VERBOSE,
)
_ATTRIBUTE = re.compile(
    r"""([^\t\n\f\r />][^\t\n\f\r />=]*)
    (?:[\t\n\f\r ]*=[\t\n\f\r ]*("[^"]*"|'[^']*'|[^\t\n\f\r >"'][^\t\n\f\r >]*)?)?""",
    re.VERBOSE,
)
_REFERENCE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[a-zA-Z][a-zA-Z0-9]*[;=]?)")
# What html.unescape reads as a reference in text, where it decodes it.
_TEXT_REFERENCE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
# Bare, these would start markup or a character reference.
_MARKUP_LT = re.compile(r"<(?=[a-zA-Z/!?])")
_REFERENCE_AMP = re.compile(r"&(?=[a-zA-Z0-9#])")
_STARTING = {"<": re.compile(r"[a-zA-Z/!?]"), "&": re.compile(r"[a-zA-Z0-9#]")}  # what comes next

# After "<!--" (comment start, comment start dash states): "<!-->" and "<!--->" are empty
# comments; any other ends at the first "-->" or "--!>" (comment end, comment end bang states).
_ABRUPT_COMMENT_END = re.compile(r"-?>")
_COMMENT_END = re.compile(r"--!?>")


def _end_tag(name: str, then: str = "") -> re.Pattern[str]:
    """The appropriate end tag that ends raw text (RCDATA, RAWTEXT, script data end tag name
    states): "</" and the name, ASCII case-insensitive, then a space, "/" or ">"; or `then`."""
    return re.compile(rf"{then}</{name}(?=[\t\n\f\r />])", re.IGNORECASE | re.ASCII)


# RCDATA (textarea, title) and RAWTEXT end only at their appropriate end tag: "</ style>" and
# "</styles>" are text.
_RAW_TEXT_END = {name: _end_tag(name) for name in RAW_TEXT_TAGS - {"plaintext", "script"}}
# Script data, its escaped and its double-escaped states (script data less-than sign state and
# those after it): "<!--" escapes it, where "<script" double-escapes it, where "</script" only
# ends the double escape; "-->" goes back to script data from either.
_SCRIPT_DATA = _end_tag("script", "<!--|")
_SCRIPT_ESCAPED = re.compile(r"-->|</?script(?=[\t\n\f\r />])", re.IGNORECASE | re.ASCII)
_SCRIPT_DOUBLE_ESCAPED = _end_tag("script", "-->|")


def _value(value: str) -> str:
    """An attribute value, unquoted, its character references decoded as the standard decodes
    them in attributes (named character reference state): a named one without ";" before "=" or
    a letter or digit ("?a&copy=1") is left as written, where html.unescape decodes it."""
    if value[:1] in ("'", '"'):
        value = value[1:-1]
    return _REFERENCE.sub(
        lambda ref: unescape(ref[0]) if ref[1][0] == "#" or ref[1] in html5 else ref[0], value
    )


def _attributes(found: list[re.Match[str]]) -> dict[str, str]:
    """A tag's attributes as a browser keeps them: of a name written twice, the first."""
    attributes: dict[str, str] = {}
    for attribute in found:
        attributes.setdefault(ascii_lower(attribute[1]), attribute[2] or "")
    return {name: _value(value) for name, value in attributes.items()}


def _bare(written: str) -> str:
    """Those of "&", "<" and ">" that a text node as written holds bare, and as a reference only
    where bare it would start a reference or markup (as `_escape` writes them)."""
    bare = {char: written.count(char) for char in "&<>"}
    needless = set()
    for ref in _TEXT_REFERENCE.finditer(written):
        decoded = unescape(ref[0])
        if decoded != ref[0]:
            bare["&"] -= 1
            after = written[ref.end() : ref.end() + 1]
            starting = _STARTING.get(decoded)
            if not (starting and starting.match(after)):
                needless.update(char for char in decoded if char in bare)
    return "".join(char for char, count in bare.items() if count and char not in needless)


def _escape(text: str, bare: str = "") -> str:
    """A replacement as text: a no-break space as &nbsp;, and &, < and > escaped but those of
    `bare` that cannot start a character reference or markup where they stand."""
    text = _REFERENCE_AMP.sub("&amp;", text) if "&" in bare else text.replace("&", "&amp;")
    text = _MARKUP_LT.sub("&lt;", text) if "<" in bare else text.replace("<", "&lt;")
    text = text if ">" in bare else text.replace(">", "&gt;")
    return text.replace("\xa0", "&nbsp;")


def _script_end(markup: str, at: int) -> int:
    """Where the content of a script from `at` ends: at its end tag, or with the input."""
    state = _SCRIPT_DATA
    while found := state.search(markup, at):
        token = found[0]
        if token == "<!--":  # its "--" may begin the "-->" that ends the escape at once
            state, at = _SCRIPT_ESCAPED, found.start() + 2
        elif token == "-->":
            state, at = _SCRIPT_DATA, found.end()
        elif token[1] != "/":  # "<script" and the character after it
            state, at = _SCRIPT_DOUBLE_ESCAPED, found.end() + 1
        elif state is _SCRIPT_DOUBLE_ESCAPED:
            state, at = _SCRIPT_ESCAPED, found.end() + 1
        else:
            return found.start()
    return len(markup)


class Kind(Enum):
    """What a token of the input is."""

    TEXT = "text"  # a text node
    START = "start"  # a start tag the tree construction read
    END = "end"  # an end tag the tree construction read
    RAW = "raw"  # the content of a raw-text element (script, style, title, ...)
    SKIPPED = "skipped"  # a tag in a stretch left as written whole (svg, math, select, template)
    OTHER = "other"  # a comment, doctype, CDATA section, dropped or unfinished tag


@dataclass(frozen=True)
class Attribute:
    """An attribute of a start tag (the first of its name: the one a browser keeps)."""

    name: str  # lower-cased as the standard does
    value: str  # its character references decoded
    start: int  # where its value stands as written, quotes included; start == end: no value
    end: int


@dataclass(frozen=True)
class Token:
    """A piece of the input (`start` to `end`) as the reader read it. `translated`: for a text
    node, that it lands in a translated element (where the reader is sure of it), blank or not;
    for a start tag, that the element it stands for is one (its attributes may be translated);
    for raw text, that its element is one and its end tag ends it. `path`: the open elements a
    translated text node lands in, or, for a start tag that opened `element`, those it stands in
    and itself."""

    kind: Kind
    start: int
    end: int
    name: str = ""  # a tag's, or the raw-text element's, name
    text: str = ""  # a text node's text, or raw text (character references decoded in RCDATA)
    translated: bool = False
    listed: bool = False  # a text node `HtmlFragment.texts` lists
    attributes: tuple[Attribute, ...] = ()
    element: Element | None = None
    path: tuple[Element, ...] | None = None


class _Reader:
    """The standard's tokenizer in the states that decide where text, tags, comments and raw text
    begin and end, over the whole input at once: a construct still open at its end is what the
    standard makes of it there (a tag is dropped, a comment runs to the end). The text of a text
    node is decoded by html.unescape, which decodes character references as the standard does in
    text. The tags go to `TreeBuilder`, but in the stretches skipped whole: foreign content (svg and
    math, where the names of its open elements are kept), select and template. The caps are
    counted as it goes."""

    def __init__(
        self,
        markup: str,
        max_nodes: int,
        max_depth: int,
        tokens: list[Token] | None = None,
        document: bool = False,
    ) -> None:
        self.markup = markup
        self.tokens = tokens  # where the tokens are kept, if they are
        self.in_noscript = _IN_NOSCRIPT_OF_A_DOCUMENT if document else _IN_NOSCRIPT
        self.max_nodes, self.max_depth = max_nodes, max_depth
        self.nodes = self.steps = 0
        self.tree = TreeBuilder(max_depth, self._count)
        self.raw_text: str | None = None  # the element whose raw text comes next
        self.foreign: list[str] | None = None  # in svg or math: the names open in it
        self.skipping = ""  # "select" or "template" while in one
        self.text: list[int] | None = None  # the text node being read: start, end
        self.spans: list[tuple[int, int]] = []  # the text nodes to translate: start, end
        self.texts: list[str] = []

    def read(self) -> None:
        """The data state: text up to the next "<", and what the tag open state makes of that."""
        markup, at, end = self.markup, 0, len(self.markup)
        while at < end:
            if self.raw_text is not None:
                at = self._raw_text(at)
                continue
            lt = markup.find("<", at)
            if lt < 0:
                self._text(at, end)
                break
            if lt > at:
                self._text(at, lt)
            at = self._tag_open(lt)
        self._end_text()

    # The caps, and the text nodes.

    def _count(self, nodes: int) -> None:
        """The caps' count: `nodes` more nodes (an element and its attributes, one a browser
        creates again, a text node, a comment), and steps of the reader, one a node or, for what
        makes none, one an end tag, piece of a text after a stray "<" (or "<" and "/" of a "</"
        at the end of the input) or dropped "</>". Markup within the node cap takes at most twice
        as many steps; past that it is a flood of those, refused as too many nodes."""
        self.nodes += nodes
        self.steps += max(nodes, 1)
        if self.nodes > self.max_nodes or self.steps > 2 * self.max_nodes:
            raise MarkupTooLarge("nodes", self.max_nodes)

    def _text(self, start: int, end: int) -> None:
        """A piece of text (data state): a run up to a "<", or a "<" that starts no markup."""
        if self.text is None:
            self._count(1)
            self.text = [start, end]
        else:
            self._count(0)
            self.text[1] = end

    def _end_text(self) -> None:
        """The text node read so far ends here: inserted in the tree (a browser drops NUL from
        text), and kept to translate unless it lands in an untranslated element, in a stretch
        skipped whole or after the tree froze, or is only whitespace."""
        if self.text is None:
            return
        start, end = self.text
        self.text = None
        placed = listed = False
        skipped = self.tree.frozen or self.foreign is not None or self.skipping
        if not skipped or self.tokens is not None:
            text = unescape(self.markup[start:end]).replace("\x00", "")
        if not skipped:
            blank = not text.strip(HTML_SPACE)
            placed = bool(text) and not self.tree.text(blank)
            listed = placed and not blank
            if listed:
                self.spans.append((start, end))
                self.texts.append(text)
        if self.tokens is not None:
            path = tuple(self.tree.stack) if placed else None
            self._token(
                Kind.TEXT, start, end, text=text, translated=placed, listed=listed, path=path
            )

    def _token(self, kind: Kind, start: int, end: int, **fields: object) -> None:
        """A token read, kept where tokens are kept."""
        if self.tokens is not None:
            self.tokens.append(Token(kind, start, end, **fields))

    def _other(self, start: int, end: int) -> int:
        """A comment, doctype, CDATA section or dropped tag from `start` to `end`; `end`."""
        self._token(Kind.OTHER, start, end)
        return end

    def _markup(self, nodes: int) -> None:
        self._end_text()
        self._count(nodes)

    def _unclosed(self, lt: int) -> int:
        """A tag from `lt` that runs into the end of the input: dropped, and the input read."""
        self._end_text()
        return self._other(lt, len(self.markup))

    def _unsure(self) -> None:
        """What follows cannot be known alike for every browser: nothing more is translated, and
        the rest is read as HTML."""
        self.tree.freeze()
        self.foreign, self.skipping = None, ""

    # The tokenizer's states.

    def _tag_open(self, lt: int) -> int:
        """After "<" (tag open state): an ASCII letter starts a start tag, "/" an end tag, "!" a
        markup declaration, "?" a bogus comment; anything else, or the end of the input, leaves
        the "<" as text. After "<!" (markup declaration open state): "--" starts a comment,
        "[CDATA[" a CDATA section in svg and math; anything else a bogus comment, a doctype
        (which ends at the first ">" in all its states) and "<![CDATA[" in HTML included."""
        after = self.markup[lt + 1 : lt + 2]
        if after.isascii() and after.isalpha():
            return self._start_tag(lt)
        if after == "/":
            return self._end_tag_open(lt)
        if after == "!":
            if self.markup.startswith("--", lt + 2):
                return self._other(lt, self._comment(lt + 4))
            if self.foreign is not None and self.markup.startswith("[CDATA[", lt + 2):
                return self._other(lt, self._cdata(lt + 9))
            return self._other(lt, self._bogus_comment(lt + 2))
        if after == "?":
            return self._other(lt, self._bogus_comment(lt + 1))
        self._text(lt, lt + 1)
        return lt + 1

    def _start_tag(self, lt: int) -> int:
        """A start tag read by `_TAG`, to the tree, or in a stretch skipped whole. "/>" closes
        elements of svg and math only: "<style/>" starts raw text and "<b/>" opens a b."""
        tag = _TAG.match(self.markup, lt)
        if tag[3] is None:
            return self._unclosed(lt)
        name = ascii_lower(tag[1])
        found = list(islice(_ATTRIBUTE.finditer(tag[2]), self.max_nodes))  # enough to refuse
        self._markup(1 + len(found))
        attributes = _attributes(found)
        if self.foreign is not None and self._foreign_start(name, attributes, tag[3] == "/>"):
            return self._skipped(lt, tag.end(), name)
        if self.skipping:
            if self.skipping == "select" and name in _IN_SELECT:
                return self._skipped(lt, tag.end(), name)
            self._unsure()
        current = self.tree.stack[-1]
        self.tree.start(name, attributes)
        if name in RAW_TEXT_TAGS:
            self.raw_text = name
        elif name in ("svg", "math") and tag[3] == ">":
            self.foreign = [name]
        elif name in ("select", "template"):
            self.skipping = name
        if self.tokens is not None:
            self._start_token(tag, name, found, attributes, current)
        return tag.end()

    def _skipped(self, start: int, end: int, name: str) -> int:
        self._token(Kind.SKIPPED, start, end, name=name)
        return end

    def _start_token(
        self,
        tag: re.Match[str],
        name: str,
        found: list[re.Match[str]],
        attributes: dict[str, str],
        current: Element,
    ) -> None:
        """A start tag's token: the element it opened (the current node now, where that was not
        the current node before and has its name: an element created again is never the current
        node after the tag that creates it), its attributes as written."""
        top = self.tree.stack[-1]
        element = top if top is not current and top.name == name else None
        sure = not (self.tree.frozen or self.foreign is not None or self.skipping)
        own = element if element is not None else Element(name, attributes)
        translated = sure and not own.own and not top.untranslated
        kept: dict[str, Attribute] = {}
        offset = tag.start(2)
        for attribute in found:
            key = ascii_lower(attribute[1])
            if key not in kept:
                start, end = (
                    attribute.span(2) if attribute[2] is not None else (attribute.end(),) * 2
                )
                value = attributes[key] if attribute[2] is not None else ""
                kept[key] = Attribute(key, value, offset + start, offset + end)
        self._token(
            Kind.START,
            tag.start(),
            tag.end(),
            name=name,
            translated=translated,
            attributes=tuple(kept.values()),
            element=element,
            path=tuple(self.tree.stack) if element is not None else None,
        )

    def _foreign_start(self, name: str, attributes: dict[str, str], closed: bool) -> bool:
        """A start tag in svg or math: False where it is one of HTML that ends foreign content
        (then it is read as HTML), else the element is opened in it (not where "/>" closes it).
        After an element whose content is HTML (an integration point), nothing is translated."""
        if name in _BREAKOUT or (name == "font" and not _FONT_BREAKOUT.isdisjoint(attributes)):
            self.foreign = None
            return False
        if not closed:
            if name in _INTEGRATION_POINTS:
                self.tree.freeze()
            self.foreign.append(name)
            if len(self.tree.stack) - 1 + len(self.foreign) > self.max_depth:
                raise MarkupTooLarge("depth", self.max_depth)
        return True

    def _end_tag_open(self, lt: int) -> int:
        """After "</" (end tag open state): an ASCII letter starts an end tag, read by `_TAG`
        ("</b x='>'>" ends at its second ">"); ">" is dropped; the end of the input leaves "</"
        as text; anything else starts a bogus comment ("</ b>" is one)."""
        after = self.markup[lt + 2 : lt + 3]
        if after.isascii() and after.isalpha():
            tag = _TAG.match(self.markup, lt)
            if tag[3] is None:
                return self._unclosed(lt)
            self._markup(0)
            name = ascii_lower(tag[1])
            kind = Kind.END if self._end_tag(name) else Kind.SKIPPED
            self._token(kind, lt, tag.end(), name=name)
            return tag.end()
        if after == ">":
            self._markup(0)
            return self._other(lt, lt + 3)
        if not after:
            self._text(lt, lt + 1)
            self._text(lt + 1, lt + 2)
            return lt + 2
        return self._other(lt, self._bogus_comment(lt + 2))

    def _end_tag(self, name: str) -> bool:
        """An end tag: in svg or math, it closes the innermost open element of its name (and
        those in it), the svg or math itself ending the skip; in a select or template, its own
        end tag ends it, option and optgroup are kept in a select; any other makes the reader
        unsure, and goes to the tree. Whether it went to the tree."""
        if self.foreign is not None:
            if name in self.foreign:
                del self.foreign[len(self.foreign) - 1 - self.foreign[::-1].index(name) :]
                self.foreign = self.foreign or None
                return False
            self._unsure()
        elif self.skipping:
            if name == self.skipping:
                self.skipping = ""
                return False
            if self.skipping == "select" and name in _IN_SELECT:
                return False
            self._unsure()
        self.tree.end(name)
        return True

    def _comment(self, start: int) -> int:
        """A comment from `start`, after "<!--": "<!-->" and "<!--->" are empty ones, any other
        ends at the first "-->" or "--!>", or with the input (comment start, comment, comment
        end, comment end bang states)."""
        self._markup(1)
        if abrupt := _ABRUPT_COMMENT_END.match(self.markup, start):
            return abrupt.end()
        end = _COMMENT_END.search(self.markup, start)
        return end.end() if end else len(self.markup)

    def _cdata(self, start: int) -> int:
        """A CDATA section from `start`, after "<![CDATA[": to the first "]]>", or with the
        input (CDATA section state)."""
        self._markup(1)
        end = self.markup.find("]]>", start)
        return end + 3 if end >= 0 else len(self.markup)

    def _bogus_comment(self, start: int) -> int:
        """A bogus comment from `start`: to the next ">", or with the input (bogus comment
        state)."""
        self._markup(1)
        end = self.markup.find(">", start)
        return end + 1 if end >= 0 else len(self.markup)

    def _raw_text(self, at: int) -> int:
        """The content of a raw-text element (RCDATA, RAWTEXT, script data, PLAINTEXT states):
        up to its appropriate end tag, read by `_TAG`, or to the end of the input (plaintext
        always). Counted as a text node; never translated. A noscript's content must read alike
        as markup (scripting off), else the reader is unsure."""
        markup, name = self.markup, self.raw_text
        if name == "plaintext":
            end = len(markup)
        elif name == "script":
            end = _script_end(markup, at)
        else:
            found = _RAW_TEXT_END[name].search(markup, at)
            end = found.start() if found else len(markup)
        if end > at:
            self._count(1)
            if self.tokens is not None:
                self._raw_token(at, end, name)
        if end == len(markup):
            return end
        if name == "noscript" and not self._noscript_alike(at, end):
            self._unsure()
        self.raw_text = None
        tag = _TAG.match(markup, end)
        if tag[3] is None:
            return self._unclosed(end)
        self._count(0)
        self.tree.end_raw_text(name)
        self._token(Kind.END, end, tag.end(), name=name)
        return tag.end()

    def _raw_token(self, start: int, end: int, name: str) -> None:
        """The token of a raw-text element's content: translated where its element (the current
        node) is, the reader is sure of it and its end tag ends it."""
        element = self.tree.stack[-1]
        translated = (
            end < len(self.markup)
            and element.name == name
            and not element.untranslated
            and not (self.tree.frozen or self.foreign is not None or self.skipping)
        )
        text = self.markup[start:end]
        if name in ("title", "textarea"):  # RCDATA: character references are decoded
            text = unescape(text).replace("\x00", "\ufffd")
        self._token(Kind.RAW, start, end, name=name, text=text, translated=translated)

    def _noscript_alike(self, start: int, end: int) -> bool:
        """Whether a noscript's content from `start` to its end tag at `end` reads alike with
        scripting off, as markup: only text, "<" that starts nothing, and start tags of img, br
        and wbr, none running past `end`."""
        markup, at = self.markup, start
        while (lt := markup.find("<", at, end)) >= 0:
            after = markup[lt + 1 : lt + 2]
            if after in ("/", "!", "?"):
                return False
            at = lt + 1
            if after.isascii() and after.isalpha():
                tag = _TAG.match(markup, lt)
                if tag[3] is None or tag.end() > end or ascii_lower(tag[1]) not in self.in_noscript:
                    return False
                at = tag.end()
        return True


@dataclass
class HtmlFragment:
    """A fragment as written, and its text nodes to translate: where each stands in it, and its
    text (entities decoded), in document order."""

    markup: str
    spans: list[tuple[int, int]]
    nodes: list[str]

    @classmethod
    def parse(
        cls, markup: str, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH
    ) -> HtmlFragment:
        """MarkupTooLarge as soon as the fragment has more than `max_nodes` nodes or more than
        `max_depth` elements open at once."""
        reader = _Reader(markup, max_nodes, max_depth)
        reader.read()
        return cls(markup, reader.spans, reader.texts)

    def texts(self) -> list[str]:
        """What to translate: each text node as written, its entities decoded and its whitespace
        kept (nodes that are only HTML whitespace are left out)."""
        return list(self.nodes)

    def render(self, replacements: Sequence[str]) -> str:
        """The fragment with each text node (one per `texts()`) replaced whole by its
        replacement, written as text: &, < and > bare as the text node held them (`_bare`) where
        they start no markup or reference (`_escape`); every other character as it was."""
        if len(replacements) != len(self.spans):
            raise ValueError(f"{len(self.spans)} text nodes, {len(replacements)} translations")
        pieces, done = [], 0
        for (start, end), text in zip(self.spans, replacements):
            pieces += (self.markup[done:start], _escape(text, _bare(self.markup[start:end])))
            done = end
        pieces.append(self.markup[done:])
        return "".join(pieces)


def escape_text(text: str, written: str = "") -> str:
    """`text` written as a text node's content: &, < and > escaped but where the text node as
    `written` held them bare and bare they start no markup or reference (as `HtmlFragment.render`
    writes a translation)."""
    return _escape(text, _bare(written))


class MarkupTooLargeAt(MarkupTooLarge):
    """MarkupTooLarge with where in the input the reader stood (`at`, an offset)."""

    def __init__(self, what: str, limit: int, at: int) -> None:
        super().__init__(what, limit)
        self.at = at


@dataclass
class HtmlTokens:
    """An HTML document or fragment as the tokens it is read as (`Token`), one after another
    from its start to its end."""

    markup: str
    tokens: list[Token]

    @classmethod
    def parse(
        cls,
        markup: str,
        max_nodes: int = MAX_NODES,
        max_depth: int = MAX_DEPTH,
        document: bool = False,
    ) -> HtmlTokens:
        """MarkupTooLargeAt as soon as the input has more than `max_nodes` nodes or more than
        `max_depth` elements open at once; `document`: read as a whole page or a fragment of
        one (a noscript may hold link and meta)."""
        tokens: list[Token] = []
        reader = _Reader(markup, max_nodes, max_depth, tokens, document)
        try:
            reader.read()
        except MarkupTooLarge as error:
            at = tokens[-1].end if tokens else 0
            raise MarkupTooLargeAt(error.what, error.limit, at) from None
        return cls(markup, tokens)
