"""HTML translated in place: the text nodes of an HTML fragment listed to translate, and the
fragment written again with each one replaced by its translation.

The markup comes from anyone and the output is shown in browsers, so it is read as the HTML
standard's tokenizer reads it (https://html.spec.whatwg.org/#tokenization) as the content of an
HTML element such as a div, by a reader of its own: Python's html.parser reads much of it
otherwise, and its reading changes between Python releases. It is written again by replacing only
the text nodes where they stand in the input: the tags, comments and whitespace between them are
the input's own characters, so a browser reads the output as it reads the input. Rebuilding it
from a parse tree would not: a tree keeps what its parser understood, and where that differs from
a browser, what was inert can come out live. The size is capped while it is parsed, in time
linear in the input. Left untranslated: script, style and the other elements whose content is raw
text, code, pre and template, elements marked translate="no", comments and declarations; and all
that follows a start tag of svg, math, select or noscript, after which what a browser's tokenizer
makes of the rest depends on its tree construction (foreign content; the select element, whose
parsing browsers have changed; scripting on or off): left as it was written, the rest reads as it
did, whatever a browser makes of it.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html import unescape
from html.entities import html5
from itertools import islice

MAX_NODES = 20_000  # elements (with their attributes), text nodes and comments a fragment may hold
MAX_DEPTH = 512  # elements open at once (nesting), as browsers' parsers cap it

HTML_SPACE = " \t\n\r\f"  # HTML's whitespace; a no-break space (&nbsp;) is text
# Elements whose content the standard reads as text up to their own end tag (plaintext: to the
# end of the input), not as markup.
RAW_TEXT_TAGS = frozenset(
    {"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript"}
    | {"plaintext"}
)
UNTRANSLATED_TAGS = RAW_TEXT_TAGS | {"code", "pre", "template"}
# Elements that have no content, so no end: the standard's void elements.
VOID_TAGS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
    | {"track", "wbr", "basefont", "bgsound", "frame", "keygen", "param"}
)
# Start tags after which the tokenizer's reading depends on the tree: nothing is translated after.
_TREE_DEPENDENT_TAGS = frozenset({"svg", "math", "select", "noscript"})


class MarkupTooLarge(ValueError):
    """A fragment over a cap: `what` ("nodes" or "depth") passed `limit`."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} over {limit}")
        self.what = what
        self.limit = limit


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
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

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


def _name(name: str) -> str:
    """A tag or attribute name lower-cased as the standard does, in ASCII only ("onclic\u212a",
    with a Kelvin sign, is no "onclick")."""
    return name.translate(_ASCII_LOWER)


def _value(value: str) -> str:
    """An attribute value, unquoted, its character references decoded as the standard decodes
    them in attributes (named character reference state): a named one without ";" before "=" or
    a letter or digit ("?a&copy=1") is left as written, where html.unescape decodes it."""
    if value[:1] in ("'", '"'):
        value = value[1:-1]
    return _REFERENCE.sub(
        lambda ref: unescape(ref[0]) if ref[1][0] == "#" or ref[1] in html5 else ref[0], value
    )


def _escape(text: str) -> str:
    """A replacement as text: &, < and > escaped, and a no-break space as &nbsp;."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\xa0", "&nbsp;")
    )


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


class _Reader:
    """The standard's tokenizer in the states that decide where text, tags, comments and raw text
    begin and end, over the whole input at once: a construct still open at its end is what the
    standard makes of it there (a tag is dropped, a comment runs to the end). The text of a text
    node is decoded by html.unescape, which decodes character references as the standard does in
    text. The open elements are a stack, popped to the one an end tag names; the caps are counted
    as it goes."""

    def __init__(self, markup: str, max_nodes: int, max_depth: int) -> None:
        self.markup = markup
        self.max_nodes, self.max_depth = max_nodes, max_depth
        self.nodes = self.steps = 0
        self.open: list[tuple[str, bool]] = []  # each open element, and if it is untranslated
        self.open_names: Counter[str] = Counter()
        self.raw_text: str | None = None  # the element whose raw text comes next
        self.frozen = False  # after a start tag of _TREE_DEPENDENT_TAGS
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
        """The caps' count: `nodes` more nodes (an element and its attributes, a text node, a
        comment), and steps of the reader, one a node or, for what makes none, one an end tag,
        piece of a text after a stray "<" (or "<" and "/" of a "</" at the end of the input) or
        dropped "</>". Markup within the node cap takes at
        most twice as many steps; past that it is a flood of those, refused as too many nodes."""
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
        """The text node read so far ends here: kept to translate unless it stands in an
        untranslated element, after a tree-dependent start tag, or is only whitespace (a browser
        drops NUL from text)."""
        if self.text is not None:
            start, end = self.text
            self.text = None
            if self.frozen or (self.open and self.open[-1][1]):
                return
            text = unescape(self.markup[start:end]).replace("\x00", "")
            if text.strip(HTML_SPACE):
                self.spans.append((start, end))
                self.texts.append(text)

    def _markup(self, nodes: int) -> None:
        self._end_text()
        self._count(nodes)

    def _unclosed(self) -> int:
        """A tag that runs into the end of the input: dropped, and the input read."""
        self._end_text()
        return len(self.markup)

    # The open elements.

    def _open(self, name: str, attributes: list[re.Match[str]]) -> None:
        """An element opened: untranslated in an untranslated one, or as one of
        UNTRANSLATED_TAGS, or marked translate="no" (of an attribute written twice, browsers
        keep the first)."""
        translate = next((_value(a[2] or "") for a in attributes if _name(a[1]) == "translate"), "")
        untranslated = (
            (self.open and self.open[-1][1])
            or name in UNTRANSLATED_TAGS
            or _name(translate) == "no"
        )
        self.open.append((name, bool(untranslated)))
        self.open_names[name] += 1
        if len(self.open) > self.max_depth:
            raise MarkupTooLarge("depth", self.max_depth)

    def _close(self, name: str) -> None:
        """Closes the innermost open element of that name and those opened in it; an end tag
        for none open is dropped."""
        if self.open_names[name]:
            while True:
                opened, _ = self.open.pop()
                self.open_names[opened] -= 1
                if opened == name:
                    break

    # The tokenizer's states.

    def _tag_open(self, lt: int) -> int:
        """After "<" (tag open state): an ASCII letter starts a start tag, "/" an end tag, "!" a
        markup declaration, "?" a bogus comment; anything else, or the end of the input, leaves
        the "<" as text. After "<!" (markup declaration open state): "--" starts a comment;
        anything else a bogus comment, a doctype (which ends at the first ">" in all its states)
        and "<![CDATA[" (a CDATA section only in svg and math, after which nothing is
        translated) included."""
        after = self.markup[lt + 1 : lt + 2]
        if after.isascii() and after.isalpha():
            return self._start_tag(lt)
        if after == "/":
            return self._end_tag_open(lt)
        if after == "!":
            if self.markup.startswith("--", lt + 2):
                return self._comment(lt + 4)
            return self._bogus_comment(lt + 2)
        if after == "?":
            return self._bogus_comment(lt + 1)
        self._text(lt, lt + 1)
        return lt + 1

    def _start_tag(self, lt: int) -> int:
        """A start tag read by `_TAG`. It opens an element unless void or closed by "/>": the
        standard closes no HTML element with "/>", but on raw text and template, whose content it
        makes inert, that matters: "<style/>" starts raw text."""
        tag = _TAG.match(self.markup, lt)
        if tag[3] is None:
            return self._unclosed()
        name = _name(tag[1])
        attributes = list(islice(_ATTRIBUTE.finditer(tag[2]), self.max_nodes))  # enough to refuse
        self._markup(1 + len(attributes))
        if name in _TREE_DEPENDENT_TAGS:
            self.frozen = True
        inert = name in RAW_TEXT_TAGS or name == "template"
        if name not in VOID_TAGS and (tag[3] == ">" or inert):
            self._open(name, attributes)
        if name in RAW_TEXT_TAGS:
            self.raw_text = name
        return tag.end()

    def _end_tag_open(self, lt: int) -> int:
        """After "</" (end tag open state): an ASCII letter starts an end tag, read by `_TAG`
        ("</b x='>'>" ends at its second ">"); ">" is dropped; the end of the input leaves "</"
        as text; anything else starts a bogus comment ("</ b>" is one)."""
        after = self.markup[lt + 2 : lt + 3]
        if after.isascii() and after.isalpha():
            tag = _TAG.match(self.markup, lt)
            if tag[3] is None:
                return self._unclosed()
            self._markup(0)
            self._close(_name(tag[1]))
            return tag.end()
        if after == ">":
            self._markup(0)
            return lt + 3
        if not after:
            self._text(lt, lt + 1)
            self._text(lt + 1, lt + 2)
            return lt + 2
        return self._bogus_comment(lt + 2)

    def _comment(self, start: int) -> int:
        """A comment from `start`, after "<!--": "<!-->" and "<!--->" are empty ones, any other
        ends at the first "-->" or "--!>", or with the input (comment start, comment, comment
        end, comment end bang states)."""
        self._markup(1)
        if abrupt := _ABRUPT_COMMENT_END.match(self.markup, start):
            return abrupt.end()
        end = _COMMENT_END.search(self.markup, start)
        return end.end() if end else len(self.markup)

    def _bogus_comment(self, start: int) -> int:
        """A bogus comment from `start`: to the next ">", or with the input (bogus comment
        state)."""
        self._markup(1)
        end = self.markup.find(">", start)
        return end + 1 if end >= 0 else len(self.markup)

    def _raw_text(self, at: int) -> int:
        """The content of a raw-text element (RCDATA, RAWTEXT, script data, PLAINTEXT states):
        up to its appropriate end tag, read by `_TAG`, or to the end of the input (plaintext
        always). Counted as a text node; never translated."""
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
        if end == len(markup):
            return end
        self.raw_text = None
        tag = _TAG.match(markup, end)
        if tag[3] is None:
            return self._unclosed()
        self._count(0)
        self._close(name)
        return tag.end()


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
        replacement, escaped as text; every other character as it was."""
        if len(replacements) != len(self.spans):
            raise ValueError(f"{len(self.spans)} text nodes, {len(replacements)} translations")
        pieces, done = [], 0
        for (start, end), text in zip(self.spans, replacements):
            pieces += (self.markup[done:start], _escape(text))
            done = end
        pieces.append(self.markup[done:])
        return "".join(pieces)
