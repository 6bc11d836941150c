"""Which element a text of an HTML fragment stands in, as the standard's tree construction
decides it (https://html.spec.whatwg.org/#tree-construction) for a fragment in a div: the
elements a start tag closes, the end tags a browser ignores, the formatting elements it creates
again (the adoption agency, the list of active formatting elements), tables. The tokenizer of
`translate.text.markup` feeds it the tags it reads and asks, for each text, whether it stands in
an element left untranslated (translate="no", code, pre, raw text)."""

from __future__ import annotations

import string
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable

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
_RAW_TEXT_PUSHED = RAW_TEXT_TAGS - {"xmp", "plaintext"}  # the others close a paragraph first
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def ascii_lower(name: str) -> str:
    """A tag or attribute name lower-cased as the standard does, in ASCII only ("onclic\u212a",
    with a Kelvin sign, is no "onclick")."""
    return name.translate(_ASCII_LOWER)


class MarkupTooLarge(ValueError):
    """A fragment over a cap: `what` ("nodes" or "depth") passed `limit`."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} over {limit}")
        self.what = what
        self.limit = limit


class Element:
    """An element as the tree construction holds it: its name and attributes, whether it is
    untranslated itself (translate="no", code, pre) and whether it stands in an untranslated
    element (itself included), and whether it is open (on the stack of open elements)."""

    __slots__ = ("name", "attributes", "own", "untranslated", "open")

    def __init__(self, name: str, attributes: dict[str, str] | None = None) -> None:
        self.name = name
        self.attributes = attributes or {}
        self.own = (
            name in ("code", "pre") or ascii_lower(self.attributes.get("translate", "")) == "no"
        )
        self.untranslated = self.own
        self.open = False

    def clone(self) -> Element:
        """The element a browser creates again for it: same name, same attributes."""
        return Element(self.name, self.attributes)


class ActiveFormatting(list):
    """The list of active formatting elements (None is a marker), with the set of its elements.
    What `last` finds is kept until the list changes: an end tag repeated finds it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, Element | None] = {}
        self.elements: set[Element] = set()

    def last(self, name: str) -> Element | None:
        """The last element of that name after the last marker."""
        if name not in self.found:
            self.found[name] = None
            for entry in reversed(self):
                if entry is None or entry.name == name:
                    self.found[name] = entry
                    break
        return self.found[name]

    def holds(self, element: Element) -> bool:
        return element in self.elements

    def _changed(self, gone: Element | None, new: Element | None) -> None:
        self.found.clear()
        self.elements.discard(gone)
        if new is not None:
            self.elements.add(new)

    def append(self, entry: Element | None) -> None:
        self._changed(None, entry)
        super().append(entry)

    def insert(self, index: int, entry: Element | None) -> None:
        self._changed(None, entry)
        super().insert(index, entry)

    def remove(self, entry: Element | None) -> None:
        """Removes that entry (most often one of the last: it is looked for from the end)."""
        index = len(self) - 1
        while self[index] is not entry:
            index -= 1
        self.pop(index)

    def pop(self, index: int = -1) -> Element | None:
        entry = super().pop(index)
        self._changed(entry, None)
        return entry

    def __setitem__(self, index: int, entry: Element | None) -> None:
        self._changed(self[index], entry)
        super().__setitem__(index, entry)


class TreeBuilder:
    """The standard's tree construction of a fragment in a div, as far as it decides the element
    each text lands in: the stack of open elements, the list of active formatting elements (None
    a marker), the insertion mode (in body, or one of a table's) and the form element pointer.
    Foreign content, select and template are skipped by `_Reader`; raw-text elements are pushed
    at their start tag and popped at their end tag. Text that a table moves before it
    (foster parenting) counts as standing in the table. `unsure` once html5lib and the standard
    part, or quirks mode would read the markup otherwise; then `frozen` (nothing is translated from
    there) as soon as an untranslated element is held."""

    def __init__(self, max_depth: int, count: Callable[[int], None]) -> None:
        self.root = Element("html")
        self.root.open = True
        self.stack = [self.root]
        # Where on the stack the open elements of each name, and the special ones, stand.
        self.positions: defaultdict[str, list[int]] = defaultdict(list, html=[0])
        self.specials = [0]
        self.formatting = ActiveFormatting()
        self.mode = "body"
        self.form: Element | None = None
        self.unsure = self.frozen = False
        self.max_depth, self.count = max_depth, count

    # What the reader tells it.

    def start(self, name: str, attributes: dict[str, str]) -> None:
        """A start tag, in the current insertion mode. svg, math, select and template push no
        element: `_Reader` skips them to their end, which leaves the stack as it was."""
        element = Element(name, attributes)
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

    def _push(self, element: Element) -> None:
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

    def _pop(self) -> Element:
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

    def _remove(self, element: Element) -> None:
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

    def _index(self, target: Element) -> int:
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

    def _element_in_scope(self, target: Element) -> bool:
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

    def _push_formatting(self, element: Element) -> None:
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

    def _adopt(self, target: Element, at: int, block_at: int) -> None:
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

    def _start(self, element: Element) -> None:
        getattr(self, f"_start_{self.mode}")(element)

    def _start_body(self, element: Element) -> None:
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

    def _start_block(self, element: Element) -> None:
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

    def _start_list_item(self, element: Element) -> None:
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

    def _start_formatting(self, element: Element) -> None:
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

    def _start_other(self, element: Element) -> None:
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

    def _start_table(self, element: Element) -> None:
        name = element.name
        if name in ("caption", "colgroup") or name in _SECTIONS:
            self._clear_to("table")
            if name == "caption":
                self.formatting.append(None)
            self._push(element)
            self.mode = {"caption": "caption", "colgroup": "column_group"}.get(name, "table_body")
        elif name in ("col", "td", "th", "tr"):
            self._start_table(Element("colgroup" if name == "col" else "tbody"))
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
            name == "input" and ascii_lower(element.attributes.get("type", "")) == "hidden"
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

    def _start_table_body(self, element: Element) -> None:
        name = element.name
        if name == "tr":
            self._clear_to(*_SECTIONS)
            self._push(element)
            self.mode = "row"
        elif name in ("td", "th"):
            self._start_table_body(Element("tr"))
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

    def _start_row(self, element: Element) -> None:
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

    def _start_cell(self, element: Element) -> None:
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

    def _start_caption(self, element: Element) -> None:
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

    def _start_column_group(self, element: Element) -> None:
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
