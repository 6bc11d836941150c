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
(https://html.spec.whatwg.org/#tree-construction), kept by `_Tree` as far as it decides that: the
elements a start tag closes, the end tags a browser ignores, the formatting elements it creates
again (the adoption agency, the list of active formatting elements), tables. Left untranslated:
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
"""

from __future__ import annotations

import re
import string
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Sequence
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

# The tree construction's kinds of element (https://html.spec.whatwg.org/#special).
_SPECIAL = frozenset(
    {"address", "applet", "area", "article", "aside", "base", "basefont", "bgsound", "blockquote"}
    | {"body", "br", "button", "caption", "center", "col", "colgroup", "dd", "details", "dir"}
    | {"div", "dl", "dt", "embed", "fieldset", "figcaption", "figure", "footer", "form", "frame"}
    | {"frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html"}
    | {"iframe", "img", "input", "keygen", "li", "link", "listing", "main", "marquee", "menu"}
    | {"meta", "nav", "noembed", "noframes", "noscript", "object", "ol", "p", "param"}
    | {"plaintext", "pre", "script", "search", "section", "select", "source", "style", "summary"}
    | {"table", "tbody", "td", "template", "textarea", "tfoot", "th", "thead", "title", "tr"}
    | {"track", "ul", "wbr", "xmp"}
)
_FORMATTING = frozenset(
    {"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt"}
    | {"u"}
)
_SCOPE = frozenset({"applet", "caption", "html", "table", "td", "th", "marquee", "object"})
_LIST_SCOPE = _SCOPE | {"ol", "ul"}
_BUTTON_SCOPE = _SCOPE | {"button"}
_TABLE_SCOPE = frozenset({"html", "table"})
_IMPLIED_END = frozenset({"dd", "dt", "li", "optgroup", "option", "p", "rb", "rp", "rt", "rtc"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CLOSING_P = frozenset(
    {"address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div"}
    | {"dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu"}
    | {"nav", "ol", "p", "search", "section", "summary", "ul", "pre", "listing", "plaintext"}
)
_BLOCK_ENDS = (_CLOSING_P - {"p", "plaintext"}) | {"button"}
_IGNORED_IN_BODY = frozenset(
    {"html", "body", "frameset", "head", "caption", "col", "colgroup", "frame", "tbody", "td"}
    | {"tfoot", "th", "thead", "tr", "base", "basefont", "bgsound", "link", "meta", "param"}
    | {"source", "track"}
)
_RECONSTRUCTING_VOID = frozenset({"area", "br", "embed", "img", "image", "input", "keygen", "wbr"})
_SECTIONS = frozenset({"tbody", "tfoot", "thead"})
_TABLE_PARTS = _SECTIONS | {"caption", "col", "colgroup", "td", "th", "tr"}
_FOSTERING = _SECTIONS | {"table", "tr"}  # text in them goes before the table
_MODES = {"td": "cell", "th": "cell", "tr": "row", "caption": "caption", "table": "table"}
_MODES |= {"colgroup": "column_group", **dict.fromkeys(_SECTIONS, "table_body")}
# Where html5lib reads otherwise than the standard: elements it does not count as special, start
# tags it reads otherwise (search, dialog and the ruby elements it does not know, isindex and
# command it still does).
_SPECIAL_IN_THE_STANDARD_ONLY = frozenset({"figcaption", "hgroup", "main", "search", "summary"})
_READ_OTHERWISE = frozenset({"search", "rb", "rtc", "isindex", "command"})
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
_RAW_TEXT_PUSHED = RAW_TEXT_TAGS - {"xmp", "plaintext"}  # the others close a paragraph first
_IN_SELECT = frozenset({"option", "optgroup"})
_IN_NOSCRIPT = frozenset({"img", "br", "wbr"})


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
# What html.unescape reads as a reference in text, where it decodes it.
_TEXT_REFERENCE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
# Bare, these would start markup or a character reference.
_MARKUP_LT = re.compile(r"<(?=[a-zA-Z/!?])")
_REFERENCE_AMP = re.compile(r"&(?=[a-zA-Z0-9#])")
_STARTING = {"<": re.compile(r"[a-zA-Z/!?]"), "&": re.compile(r"[a-zA-Z0-9#]")}  # what comes next
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


def _attributes(found: list[re.Match[str]]) -> dict[str, str]:
    """A tag's attributes as a browser keeps them: of a name written twice, the first."""
    attributes: dict[str, str] = {}
    for attribute in found:
        attributes.setdefault(_name(attribute[1]), attribute[2] or "")
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


class _Element:
    """An element as the tree construction holds it: its name and attributes, whether it is
    untranslated itself (translate="no", code, pre) and whether it stands in an untranslated
    element (itself included), and whether it is open (on the stack of open elements)."""

    __slots__ = ("name", "attributes", "own", "untranslated", "open")

    def __init__(self, name: str, attributes: dict[str, str] | None = None) -> None:
        self.name = name
        self.attributes = attributes or {}
        self.own = name in ("code", "pre") or _name(self.attributes.get("translate", "")) == "no"
        self.untranslated = self.own
        self.open = False

    def clone(self) -> _Element:
        """The element a browser creates again for it: same name, same attributes."""
        return _Element(self.name, self.attributes)


class _Formatting(list):
    """The list of active formatting elements (None is a marker), with the set of its elements.
    What `last` finds is kept until the list changes: an end tag repeated finds it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, _Element | None] = {}
        self.elements: set[_Element] = set()

    def last(self, name: str) -> _Element | None:
        """The last element of that name after the last marker."""
        if name not in self.found:
            self.found[name] = None
            for entry in reversed(self):
                if entry is None or entry.name == name:
                    self.found[name] = entry
                    break
        return self.found[name]

    def holds(self, element: _Element) -> bool:
        return element in self.elements

    def _changed(self, gone: _Element | None, new: _Element | None) -> None:
        self.found.clear()
        self.elements.discard(gone)
        if new is not None:
            self.elements.add(new)

    def append(self, entry: _Element | None) -> None:
        self._changed(None, entry)
        super().append(entry)

    def insert(self, index: int, entry: _Element | None) -> None:
        self._changed(None, entry)
        super().insert(index, entry)

    def remove(self, entry: _Element | None) -> None:
        """Removes that entry (most often one of the last: it is looked for from the end)."""
        index = len(self) - 1
        while self[index] is not entry:
            index -= 1
        self.pop(index)

    def pop(self, index: int = -1) -> _Element | None:
        entry = super().pop(index)
        self._changed(entry, None)
        return entry

    def __setitem__(self, index: int, entry: _Element | None) -> None:
        self._changed(self[index], entry)
        super().__setitem__(index, entry)


class _Tree:
    """The standard's tree construction of a fragment in a div, as far as it decides the element
    each text lands in: the stack of open elements, the list of active formatting elements (None
    a marker), the insertion mode (in body, or one of a table's) and the form element pointer.
    Foreign content, select and template are skipped by `_Reader`; raw-text elements are pushed
    at their start tag and popped at their end tag. Text that a table moves before it
    (foster parenting) counts as standing in the table. `unsure` once html5lib and the standard
    part, or quirks mode would read the markup otherwise; then `frozen` (nothing is translated from
    there) as soon as an untranslated element is held."""

    def __init__(self, max_depth: int, count: Callable[[int], None]) -> None:
        self.root = _Element("html")
        self.root.open = True
        self.stack = [self.root]
        # Where on the stack the open elements of each name, and the special ones, stand.
        self.positions: defaultdict[str, list[int]] = defaultdict(list, html=[0])
        self.specials = [0]
        self.formatting = _Formatting()
        self.mode = "body"
        self.form: _Element | None = None
        self.unsure = self.frozen = False
        self.max_depth, self.count = max_depth, count

    # What the reader tells it.

    def start(self, name: str, attributes: dict[str, str]) -> None:
        """A start tag, in the current insertion mode. svg, math, select and template push no
        element: `_Reader` skips them to their end, which leaves the stack as it was."""
        element = _Element(name, attributes)
        if self.unsure and element.own:
            self.frozen = True  # where the model may be wrong, its elements may be held otherwise
        self._start(element)

    def end(self, name: str) -> None:
        getattr(self, f"_end_{self.mode}")(name)

    def end_raw_text(self, name: str) -> None:
        """The end of a raw-text element's content: the element, the current node, popped."""
        if self.stack[-1].name == name:
            self._pop()

    def text(self, blank: bool) -> bool:
        """A text node inserted (`blank`: all of it HTML whitespace): whether the element it lands
        in is untranslated. In a table, text outside a cell lands before the table; here it
        counts as standing in the table."""
        current = self.stack[-1]
        if self.mode == "column_group":
            if blank or current.name != "colgroup":
                return True  # whitespace in the colgroup; other text a browser drops
            self._pop()
            self.mode = "table"
            return self.text(blank)
        if self.mode in ("table", "table_body", "row"):
            if current.name in _FOSTERING:
                if not blank:
                    self._reconstruct()
                return self.stack[-1].untranslated
            if blank and self._reconstruct_pending():
                self._set_unsure()  # html5lib leaves whitespace here as it is
        self._reconstruct()
        return self.stack[-1].untranslated

    def freeze(self) -> None:
        self.frozen = True

    # The stack of open elements.

    def _push(self, element: _Element) -> None:
        element.untranslated = element.own or self.stack[-1].untranslated
        element.open = True
        self.positions[element.name].append(len(self.stack))
        if element.name in _SPECIAL:
            self.specials.append(len(self.stack))
        self.stack.append(element)
        if len(self.stack) - 1 > self.max_depth:
            raise MarkupTooLarge("depth", self.max_depth)
        if self.unsure and element.untranslated:
            self.frozen = True

    def _pop(self) -> _Element:
        element = self.stack.pop()
        element.open = False
        self.positions[element.name].pop()
        if element.name in _SPECIAL:
            self.specials.pop()
        return element

    def _pop_until(self, name: str) -> None:
        """Pops up to the innermost element of that name, which is open."""
        while self._pop().name != name:
            pass

    def _remove(self, element: _Element) -> None:
        """An element taken off the stack where it stands (not only at its top)."""
        self.stack.remove(element)
        element.open = False
        self._reindex()

    def _reindex(self) -> None:
        """`positions` and `specials` anew, after the stack changed below its top."""
        self.positions.clear()
        self.specials.clear()
        for index, element in enumerate(self.stack):
            self.positions[element.name].append(index)
            if element.name in _SPECIAL:
                self.specials.append(index)

    def _top(self, name: str) -> int:
        """Where the innermost open element of that name stands (-1: none is open)."""
        where = self.positions.get(name)
        return where[-1] if where else -1

    def _index(self, target: _Element) -> int:
        where = self.positions.get(target.name, ())
        return next((index for index in reversed(where) if self.stack[index] is target), -1)

    def _clear_to(self, *names: str) -> None:
        """Pops up to an element of `names` (clear the stack back to a table context, ...)."""
        while self.stack[-1].name not in names and self.stack[-1] is not self.root:
            self._pop()

    def _in_scope(self, name: str, boundaries: frozenset[str] = _SCOPE) -> bool:
        """Whether an element of that name is open with none of `boundaries` in it (has an
        element in scope, in list item, button or table scope)."""
        return self._in_scope_at(self._top(name), boundaries)

    def _any_in_scope(self, names: frozenset[str], boundaries: frozenset[str]) -> bool:
        return self._in_scope_at(max(map(self._top, names)), boundaries)

    def _element_in_scope(self, target: _Element) -> bool:
        return self._in_scope_at(self._index(target), _SCOPE)

    def _in_scope_at(self, index: int, boundaries: frozenset[str]) -> bool:
        """Whether the element at `index` (the root is html, at 0) stands in no element of
        `boundaries` but itself."""
        return index > 0 and index >= max(map(self._top, boundaries))

    def _implied(self, exclude: str = "") -> None:
        """Generate implied end tags (but for `exclude`)."""
        while self.stack[-1].name in _IMPLIED_END and self.stack[-1].name != exclude:
            self._pop()

    def _close_p(self) -> None:
        if self._in_scope("p", _BUTTON_SCOPE):
            self._implied("p")
            self._pop_until("p")

    def _set_unsure(self) -> None:
        """From here a browser may read the markup otherwise than the model: nothing more is
        translated if an untranslated element is held (or, from then on, once one is)."""
        if not self.unsure:
            self.unsure = True
            held = any(element.untranslated for element in self.stack)
            self.frozen |= held or any(entry and entry.own for entry in self.formatting)

    def _reset_mode(self) -> None:
        """Reset the insertion mode appropriately (the fragment's context is a div)."""
        self.mode = next(
            (_MODES[element.name] for element in reversed(self.stack) if element.name in _MODES),
            "body",
        )

    # The list of active formatting elements.

    def _push_formatting(self, element: _Element) -> None:
        """Pushed onto the list; of four alike after the last marker, the earliest is dropped."""
        alike = []
        for entry in reversed(self.formatting):
            if entry is None:
                break
            if entry.name == element.name and entry.attributes == element.attributes:
                alike.append(entry)
        if len(alike) >= 3:
            self.formatting.remove(alike[-1])
        self.formatting.append(element)

    def _clear_to_marker(self) -> None:
        while self.formatting and self.formatting.pop() is not None:
            pass

    def _reconstruct_pending(self) -> bool:
        return (
            bool(self.formatting)
            and self.formatting[-1] is not None
            and not self.formatting[-1].open
        )

    def _reconstruct(self) -> None:
        """Reconstruct the active formatting elements: those after the last marker no longer
        open are created again, in order, in the current node."""
        if not self._reconstruct_pending():
            return
        entries, first = self.formatting, len(self.formatting) - 1
        while first > 0 and entries[first - 1] is not None and not entries[first - 1].open:
            first -= 1
        for index in range(first, len(entries)):
            clone = entries[index].clone()
            self.count(1)
            self._push(clone)
            entries[index] = clone

    def _adoption(self, name: str) -> None:
        """The adoption agency algorithm, for an end tag of a formatting element."""
        current, formatting = self.stack[-1], self.formatting
        if current.name == name and not formatting.holds(current):
            if formatting.last(name) is not None:
                self._set_unsure()  # html5lib runs the algorithm on that one instead
            self._pop()
            return
        for _ in range(8):
            target = formatting.last(name)
            if target is None:
                self._end_other(name)
                return
            if not target.open:
                formatting.remove(target)
                return
            at = self._index(target)
            if not self._in_scope_at(at, _SCOPE):
                self._set_unsure()  # html5lib reads it as any other end tag
                return
            furthest = bisect_right(self.specials, at)  # the first special element in it
            if furthest == len(self.specials):
                while self._pop() is not target:
                    pass
                formatting.remove(target)
                return
            self._adopt(target, at, self.specials[furthest])

    def _adopt(self, target: _Element, at: int, block_at: int) -> None:
        """The adoption agency's inner loop and after, with the furthest block at `block_at`:
        the formatting elements between are created again around it, `target` again in it, and
        the elements from the common ancestor up to that one stand in each other as on the
        stack."""
        stack, formatting = self.stack, self.formatting
        common, block = stack[at - 1], stack[block_at]
        if block.name in _SPECIAL_IN_THE_STANDARD_ONLY or block_at - at > 4:
            self._set_unsure()  # html5lib's furthest block, or its inner loop, is another
        after, last, index, inner = None, block, block_at, 0  # bookmark: after `after`
        while True:
            inner += 1
            index -= 1
            node = stack[index]
            if node is target:
                break
            if inner > 3 and formatting.holds(node):
                formatting.remove(node)
            if not formatting.holds(node):
                del stack[index]
                node.open = False
                continue
            clone = node.clone()
            self.count(1)
            formatting[formatting.index(node)] = clone
            stack[index], node.open, clone.open = clone, False, True
            if last is block:
                after = clone
            last = clone
        again = target.clone()
        self.count(1)
        bookmark = formatting.index(target) if after is None else formatting.index(after) + 1
        if formatting.index(target) < bookmark - 1 < len(formatting) - 1:
            self._set_unsure()  # html5lib puts it one entry further
        formatting.insert(bookmark, again)
        formatting.remove(target)
        del stack[index]
        target.open, again.open = False, True
        stack.insert(stack.index(block) + 1, again)
        self._reindex()
        parent = common.untranslated
        for element in stack[stack.index(common) + 1 : stack.index(again) + 1]:
            element.untranslated = parent = element.own or parent

    # The insertion modes.

    def _start(self, element: _Element) -> None:
        getattr(self, f"_start_{self.mode}")(element)

    def _start_body(self, element: _Element) -> None:
        """In body (and for what a table, a cell or a caption leaves to it)."""
        name = element.name
        if name in _IGNORED_IN_BODY:
            return
        if name in _READ_OTHERWISE or (name == "table" and self._in_scope("p", _BUTTON_SCOPE)):
            self._set_unsure()  # quirks mode leaves the p open around a table
        if name == "dialog" and self._in_scope("p", _BUTTON_SCOPE):
            self._set_unsure()  # html5lib leaves the p open
        if name in _RAW_TEXT_PUSHED:
            self._push(element)
        elif name == "template":
            self._start_template()
        elif name in ("select", "svg", "math") or name in _RECONSTRUCTING_VOID:
            self._reconstruct()
        elif name in _CLOSING_P or name in _HEADINGS or name in ("hr", "table", "xmp"):
            self._start_block(element)
        elif name == "form":
            if self.form is None:
                self._close_p()
                self._push(element)
                self.form = element
        elif name in ("li", "dd", "dt"):
            self._start_list_item(element)
        elif name in _FORMATTING:
            self._start_formatting(element)
        else:
            self._start_other(element)

    def _start_block(self, element: _Element) -> None:
        """The start tags that close a paragraph (a heading another heading too)."""
        self._close_p()
        name = element.name
        if name in _HEADINGS and self.stack[-1].name in _HEADINGS:
            self._pop()
        if name == "xmp":
            self._reconstruct()
        if name != "hr":
            self._push(element)
        if name == "table":
            self.mode = "table"

    def _start_template(self) -> None:
        if self._reconstruct_pending():
            self._set_unsure()  # html5lib reads template as any other element

    def _start_list_item(self, element: _Element) -> None:
        closes = ("li",) if element.name == "li" else ("dd", "dt")
        for node in reversed(self.stack):
            if node.name in closes:
                self._implied(node.name)
                self._pop_until(node.name)
                break
            if node.name in _SPECIAL and node.name not in ("address", "div", "p"):
                break
        self._close_p()
        self._push(element)

    def _start_formatting(self, element: _Element) -> None:
        name = element.name
        if name == "a" and (open_a := self.formatting.last("a")) is not None:
            self._adoption("a")
            if self.formatting.holds(open_a):
                self.formatting.remove(open_a)
            if open_a.open:
                self._remove(open_a)
        self._reconstruct()
        if name == "nobr" and self._in_scope("nobr"):
            self._adoption("nobr")
            self._reconstruct()
        self._push(element)
        self._push_formatting(element)

    def _start_other(self, element: _Element) -> None:
        name = element.name
        if name == "button" and self._in_scope("button"):
            self._implied()
            self._pop_until("button")
        if name in ("option", "optgroup") and self.stack[-1].name == "option":
            self._pop()
        if name in ("rb", "rtc", "rp", "rt") and self._in_scope("ruby"):
            self._implied("rtc" if name in ("rp", "rt") else "")
        if name not in ("rb", "rtc", "rp", "rt"):
            self._reconstruct()
        self._push(element)
        if name in ("applet", "marquee", "object"):
            self.formatting.append(None)

    def _end_body(self, name: str) -> None:
        if name in _BLOCK_ENDS or name in ("applet", "marquee", "object", "dd", "dt"):
            if self._in_scope(name):
                self._implied("" if name in _BLOCK_ENDS else name)
                self._pop_until(name)
                if name in ("applet", "marquee", "object"):
                    self._clear_to_marker()
        elif name in ("p", "li"):
            if self._in_scope(name, _BUTTON_SCOPE if name == "p" else _LIST_SCOPE):
                self._implied(name)
                self._pop_until(name)
        elif name in _HEADINGS:
            if self._any_in_scope(_HEADINGS, _SCOPE):
                self._implied()
                while self._pop().name not in _HEADINGS:
                    pass
        elif name == "form":
            self._end_form()
        elif name in _FORMATTING:
            self._adoption(name)
        elif name == "br":
            self._reconstruct()
        elif name not in ("body", "html"):
            self._end_other(name)

    def _end_form(self) -> None:
        form, self.form = self.form, None
        if form is not None and self._element_in_scope(form):
            self._implied()
            self._remove(form)

    def _end_other(self, name: str) -> None:
        """Any other end tag: closes the innermost element of that name, unless a special
        element stands between (then it is ignored)."""
        top = self._top(name)
        if top > 0 and self.specials[-1] <= top:
            self._implied(name)
            while len(self.stack) > top:
                self._pop()

    def _start_table(self, element: _Element) -> None:
        name = element.name
        if name in ("caption", "colgroup") or name in _SECTIONS:
            self._clear_to("table")
            if name == "caption":
                self.formatting.append(None)
            self._push(element)
            self.mode = {"caption": "caption", "colgroup": "column_group"}.get(name, "table_body")
        elif name in ("col", "td", "th", "tr"):
            self._start_table(_Element("colgroup" if name == "col" else "tbody"))
            self._start(element)
        elif name == "table":
            if self._in_scope("table", _TABLE_SCOPE):
                self._set_unsure()  # html5lib drops a table's start tag in a table
                self._pop_until("table")
                self._reset_mode()
                self._start(element)
        elif name in ("style", "script"):
            self._push(element)
        elif name == "template":
            self._start_template()
        elif name == "form" or (
            name == "input" and _name(element.attributes.get("type", "")) == "hidden"
        ):
            if name == "form" and self.form is None:
                self.form = element
        else:
            self._start_body(element)

    def _end_table(self, name: str) -> None:
        if name == "table":
            if self._in_scope("table", _TABLE_SCOPE):
                self._pop_until("table")
                self._reset_mode()
        elif name not in _TABLE_PARTS | {"body", "html"}:
            self._end_body(name)

    def _start_table_body(self, element: _Element) -> None:
        name = element.name
        if name == "tr":
            self._clear_to(*_SECTIONS)
            self._push(element)
            self.mode = "row"
        elif name in ("td", "th"):
            self._start_table_body(_Element("tr"))
            self._start(element)
        elif name in _TABLE_PARTS:
            if self._any_in_scope(_SECTIONS, _TABLE_SCOPE):
                self._close_section()
                self._start(element)
        else:
            self._start_table(element)

    def _close_section(self) -> None:
        self._clear_to(*_SECTIONS)
        self._pop()
        self.mode = "table"

    def _end_table_body(self, name: str) -> None:
        if name in _SECTIONS:
            if self._in_scope(name, _TABLE_SCOPE):
                self._close_section()
        elif name == "table":
            if self._any_in_scope(_SECTIONS, _TABLE_SCOPE):
                self._close_section()
                self.end(name)
        elif name not in _TABLE_PARTS | {"body", "html"}:
            self._end_table(name)

    def _start_row(self, element: _Element) -> None:
        if element.name in ("td", "th"):
            self._clear_to("tr")
            self._push(element)
            self.mode = "cell"
            self.formatting.append(None)
        elif element.name in _TABLE_PARTS:
            if self._in_scope("tr", _TABLE_SCOPE):
                self._close_row()
                self._start(element)
        else:
            self._start_table(element)

    def _close_row(self) -> None:
        self._clear_to("tr")
        self._pop()
        self.mode = "table_body"

    def _end_row(self, name: str) -> None:
        if name in ("tr", "table") or name in _SECTIONS:
            if self._in_scope(name, _TABLE_SCOPE) and self._in_scope("tr", _TABLE_SCOPE):
                self._close_row()
                if name != "tr":
                    self.end(name)
        elif name not in _TABLE_PARTS | {"body", "html"}:
            self._end_table(name)

    def _start_cell(self, element: _Element) -> None:
        if element.name not in _TABLE_PARTS:
            self._start_body(element)
        elif self._in_scope("td", _TABLE_SCOPE) or self._in_scope("th", _TABLE_SCOPE):
            self._close_cell()
            self._start(element)

    def _close_cell(self) -> None:
        self._implied()
        while self._pop().name not in ("td", "th"):
            pass
        self._clear_to_marker()
        self.mode = "row"

    def _end_cell(self, name: str) -> None:
        if name in ("td", "th"):
            if self._in_scope(name, _TABLE_SCOPE):
                self._close_cell()
        elif name in ("table", "tr") or name in _SECTIONS:
            if self._in_scope(name, _TABLE_SCOPE):
                self._close_cell()
                self.end(name)
        elif name not in ("body", "caption", "col", "colgroup", "html"):
            self._end_body(name)

    def _start_caption(self, element: _Element) -> None:
        if element.name not in _TABLE_PARTS:
            self._start_body(element)
        elif self._in_scope("caption", _TABLE_SCOPE):
            self._close_caption()
            self._start(element)

    def _close_caption(self) -> None:
        self._implied()
        self._pop_until("caption")
        self._clear_to_marker()
        self.mode = "table"

    def _end_caption(self, name: str) -> None:
        if name in ("caption", "table"):
            if self._in_scope("caption", _TABLE_SCOPE):
                self._close_caption()
                if name == "table":
                    self.end(name)
        elif name not in _TABLE_PARTS | {"body", "html"}:
            self._end_body(name)

    def _start_column_group(self, element: _Element) -> None:
        if element.name == "template":
            self._set_unsure()  # html5lib closes the colgroup first
        elif element.name not in ("col", "html") and self.stack[-1].name == "colgroup":
            self._pop()
            self.mode = "table"
            self._start(element)

    def _end_column_group(self, name: str) -> None:
        if name != "col" and self.stack[-1].name == "colgroup":
            self._pop()
            self.mode = "table"
            if name != "colgroup":
                self.end(name)


class _Reader:
    """The standard's tokenizer in the states that decide where text, tags, comments and raw text
    begin and end, over the whole input at once: a construct still open at its end is what the
    standard makes of it there (a tag is dropped, a comment runs to the end). The text of a text
    node is decoded by html.unescape, which decodes character references as the standard does in
    text. The tags go to `_Tree`, but in the stretches skipped whole: foreign content (svg and
    math, where the names of its open elements are kept), select and template. The caps are
    counted as it goes."""

    def __init__(self, markup: str, max_nodes: int, max_depth: int) -> None:
        self.markup = markup
        self.max_nodes, self.max_depth = max_nodes, max_depth
        self.nodes = self.steps = 0
        self.tree = _Tree(max_depth, self._count)
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
        if self.tree.frozen or self.foreign is not None or self.skipping:
            return
        text = unescape(self.markup[start:end]).replace("\x00", "")
        blank = not text.strip(HTML_SPACE)
        if text and not self.tree.text(blank) and not blank:
            self.spans.append((start, end))
            self.texts.append(text)

    def _markup(self, nodes: int) -> None:
        self._end_text()
        self._count(nodes)

    def _unclosed(self) -> int:
        """A tag that runs into the end of the input: dropped, and the input read."""
        self._end_text()
        return len(self.markup)

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
                return self._comment(lt + 4)
            if self.foreign is not None and self.markup.startswith("[CDATA[", lt + 2):
                return self._cdata(lt + 9)
            return self._bogus_comment(lt + 2)
        if after == "?":
            return self._bogus_comment(lt + 1)
        self._text(lt, lt + 1)
        return lt + 1

    def _start_tag(self, lt: int) -> int:
        """A start tag read by `_TAG`, to the tree, or in a stretch skipped whole. "/>" closes
        elements of svg and math only: "<style/>" starts raw text and "<b/>" opens a b."""
        tag = _TAG.match(self.markup, lt)
        if tag[3] is None:
            return self._unclosed()
        name = _name(tag[1])
        found = list(islice(_ATTRIBUTE.finditer(tag[2]), self.max_nodes))  # enough to refuse
        self._markup(1 + len(found))
        attributes = _attributes(found)
        if self.foreign is not None and self._foreign_start(name, attributes, tag[3] == "/>"):
            return tag.end()
        if self.skipping:
            if self.skipping == "select" and name in _IN_SELECT:
                return tag.end()
            self._unsure()
        self.tree.start(name, attributes)
        if name in RAW_TEXT_TAGS:
            self.raw_text = name
        elif name in ("svg", "math") and tag[3] == ">":
            self.foreign = [name]
        elif name in ("select", "template"):
            self.skipping = name
        return tag.end()

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
                return self._unclosed()
            self._markup(0)
            self._end_tag(_name(tag[1]))
            return tag.end()
        if after == ">":
            self._markup(0)
            return lt + 3
        if not after:
            self._text(lt, lt + 1)
            self._text(lt + 1, lt + 2)
            return lt + 2
        return self._bogus_comment(lt + 2)

    def _end_tag(self, name: str) -> None:
        """An end tag: in svg or math, it closes the innermost open element of its name (and
        those in it), the svg or math itself ending the skip; in a select or template, its own
        end tag ends it, option and optgroup are kept in a select; any other makes the reader
        unsure, and goes to the tree."""
        if self.foreign is not None:
            if name in self.foreign:
                del self.foreign[len(self.foreign) - 1 - self.foreign[::-1].index(name) :]
                self.foreign = self.foreign or None
                return
            self._unsure()
        elif self.skipping:
            if name == self.skipping:
                self.skipping = ""
                return
            if self.skipping == "select" and name in _IN_SELECT:
                return
            self._unsure()
        self.tree.end(name)

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
        if end == len(markup):
            return end
        if name == "noscript" and not self._noscript_alike(at, end):
            self._unsure()
        self.raw_text = None
        tag = _TAG.match(markup, end)
        if tag[3] is None:
            return self._unclosed()
        self._count(0)
        self.tree.end_raw_text(name)
        return tag.end()

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
                if tag[3] is None or tag.end() > end or _name(tag[1]) not in _IN_NOSCRIPT:
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
