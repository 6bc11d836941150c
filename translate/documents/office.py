"""Office documents edited in place: Office Open XML (docx, pptx, xlsx) and OpenDocument (odt, odp,
ods) packages with their text translated and every other byte kept.

The rules it follows:
- A package is opened with `safe.Package`; its kind is what it says it is (the main part's type
  in `[Content_Types].xml`, the `mimetype` entry), and a file name's office extension must agree.
  An OLE compound file (an encrypted or a legacy binary Office file) is refused by its signature.
- The parts that hold text are parsed with `safe.parse_xml`: a docx's document, headers, footers,
  footnotes, endnotes and comments; a pptx's slides and notes; an xlsx's shared strings, inline
  strings and comments; an OpenDocument's content and its headers and footers.
- A text is a paragraph (`w:p`, `a:p`, `si`/`is`, `text:p`/`text:h`) holding a letter. Its runs of
  text are `inline.Run`s keyed by their formatting: the run's properties and the wrappers around
  it (a hyperlink, a content control, a span, a link). Every other inline element (a tab, a break,
  an image, a field, a bookmark, a note) is a `Mark`, adjacent ones one mark, and those at either
  end are left out of the text. Only string cells of a spreadsheet are read (not numbers, dates,
  formulas, sheet names).
- A paragraph whose translation differs is written again from `Tagged.read`: each run cloned from
  a run of its formatting, each mark the original element moved; fields, bookmarks, comment
  ranges and other paired marks keep their order. Spell-check and layout caches (`w:proofErr`,
  `w:lastRenderedPageBreak`, `text:soft-page-break`) and soft hyphens are left out of a changed
  paragraph; every other element of it comes back. A part with no changed paragraph, and every
  other entry, is copied byte for byte (`Package.written`); a changed part keeps its XML
  declaration as it was written.
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from types import MappingProxyType

from lxml import etree

from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions
from translate.documents.inline import Inline, Mark, Run, Tagged, merged
from translate.documents.safe import (
    DEFAULT_LIMITS,
    Limits,
    Package,
    check_texts,
    parse_xml,
    xml_bytes,
)
from translate.documents.translating import Translated

_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE compound file's first bytes
_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_XML_ID = "{http://www.w3.org/XML/1998/namespace}id"
_STRICT = "http://purl.oclc.org/ooxml/"  # ISO 29500 Strict's namespaces begin so
_CONTENT_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}"
_RELATIONSHIPS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_OFFICE_TYPE = "application/vnd.openxmlformats-officedocument."
_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"

_KINDS = MappingProxyType(
    {
        "docx": "an Office Open XML text document",
        "pptx": "an Office Open XML presentation",
        "xlsx": "an Office Open XML spreadsheet",
        "odt": "an OpenDocument text",
        "odp": "an OpenDocument presentation",
        "ods": "an OpenDocument spreadsheet",
    }
)
_ODF_KINDS = MappingProxyType(
    {
        "application/vnd.oasis.opendocument.text": "odt",
        "application/vnd.oasis.opendocument.text-template": "odt",
        "application/vnd.oasis.opendocument.text-master": "odt",
        "application/vnd.oasis.opendocument.presentation": "odp",
        "application/vnd.oasis.opendocument.presentation-template": "odp",
        "application/vnd.oasis.opendocument.spreadsheet": "ods",
        "application/vnd.oasis.opendocument.spreadsheet-template": "ods",
    }
)
# the content types (after _OFFICE_TYPE) of the parts besides the main one that hold text
_TEXT_PARTS = MappingProxyType(
    {
        "docx": tuple(
            f"wordprocessingml.{part}+xml"
            for part in ("header", "footer", "footnotes", "endnotes", "comments")
        ),
        "pptx": ("presentationml.slide+xml", "presentationml.notesSlide+xml"),
        "xlsx": (
            "spreadsheetml.sharedStrings+xml",
            "spreadsheetml.worksheet+xml",
            "spreadsheetml.comments+xml",
        ),
    }
)
# elements written as inline tags whose order a translation must not change
_ORDERED = frozenset({"fldChar", "instrText", "commentReference", "annotation", "annotation-end"})
_ORDERED_ENDS = ("Start", "End", "-start", "-end")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MAX_SPACES = 10_000  # a text:s's count at most


@dataclass(frozen=True)
class Counts:
    """What a package's text parts hold (to compare a translation's with its source's)."""

    paragraphs: int  # paragraphs read, with text or not
    texts: int  # those translated (holding a letter)
    runs: int  # runs of text in one formatting
    marks: int  # inline objects (caches left out of a changed paragraph not counted)


# --- how each vocabulary writes a paragraph ------------------------------------------------------
@dataclass(frozen=True)
class _Vocabulary:
    """The elements of a paragraph in one XML vocabulary, by local name in namespace `ns`."""

    ns: str
    run: str | None  # a run of text (w:r); None: text is the paragraph's and its wrappers' own
    props: str  # a run's formatting (w:rPr)
    text: str  # a run's text (w:t); OpenDocument's repeated spaces (text:s)
    wrappers: frozenset[str]  # whose content is the paragraph's: a hyperlink, a span
    kept: frozenset[str] = frozenset()  # children of a paragraph staying where they are (w:pPr)
    dropped: frozenset[str] = frozenset()  # caches left out of a changed paragraph
    ignored: frozenset[str] = frozenset()  # attributes of a run's formatting telling none apart
    preserve: bool = False  # a new text element says xml:space="preserve"

    def tag(self, local: str) -> str:
        return f"{{{self.ns}}}{local}"

    def local(self, element: etree._Element) -> str | None:
        """The element's local name in this vocabulary's namespace (None: another's, or no
        element)."""
        tag = element.tag
        if isinstance(tag, str) and tag.startswith(f"{{{self.ns}}}"):
            return tag[len(self.ns) + 2 :]
        return None

    def is_property(self, element: etree._Element) -> bool:
        """A wrapper's own properties (w:sdtPr), which a clone of it carries."""
        name = self.local(element)
        return name is not None and name.endswith("Pr")

    def content(self, wrapper: etree._Element) -> etree._Element | None:
        """Where a wrapper's runs are: a content control's w:sdtContent, other wrappers' own."""
        if self.local(wrapper) == "sdt":
            return wrapper.find(self.tag("sdtContent"))
        return wrapper


def _word(ns: str) -> _Vocabulary:
    return _Vocabulary(
        ns,
        run="r",
        props="rPr",
        text="t",
        wrappers=frozenset(
            {"hyperlink", "smartTag", "customXml", "ins", "moveTo", "sdt", "dir", "bdo"}
        ),
        kept=frozenset({"pPr"}),
        dropped=frozenset({"proofErr", "lastRenderedPageBreak", "softHyphen"}),
        preserve=True,
    )


def _drawing(ns: str) -> _Vocabulary:
    return _Vocabulary(
        ns,
        run="r",
        props="rPr",
        text="t",
        wrappers=frozenset(),
        kept=frozenset({"pPr", "endParaRPr"}),
        ignored=frozenset({"dirty", "err", "smtClean", "smtId"}),
    )


def _cells(ns: str) -> _Vocabulary:
    return _Vocabulary(
        ns,
        run="r",
        props="rPr",
        text="t",
        wrappers=frozenset(),
        kept=frozenset({"rPh", "phoneticPr"}),
        preserve=True,
    )


_ODF = _Vocabulary(
    _TEXT,
    run=None,
    props="",
    text="s",
    wrappers=frozenset({"span", "a"}),
    dropped=frozenset({"soft-page-break"}),
)


# --- a paragraph read --------------------------------------------------------------------------
def _signature(element: etree._Element, ignored: frozenset[str] = frozenset()) -> Hashable:
    """What an element is, to compare formatting by: its name, attributes, text and children."""
    attributes = tuple(sorted((k, v) for k, v in element.attrib.items() if k not in ignored))
    children = tuple(_signature(child) for child in element if isinstance(child.tag, str))
    return (element.tag, attributes, (element.text or "").strip(), children)


@dataclass(frozen=True)
class _Style:
    """A formatting of text: the wrappers around it, outermost first, and a run of it (None:
    OpenDocument's text, or a spreadsheet string's bare `t`)."""

    chain: tuple[etree._Element, ...]
    run: etree._Element | None


@dataclass(frozen=True)
class _Piece:
    """An inline element kept as it is: the wrappers it was in, and the run (w:r) it was in."""

    element: etree._Element
    chain: tuple[etree._Element, ...]
    run: etree._Element | None


@dataclass
class _Flat:
    """A paragraph read as runs (keyed by a style) and marks (keyed by a tuple of pieces)."""

    element: etree._Element
    vocab: _Vocabulary
    where: str  # the file and part, for errors
    items: list[Inline] = field(default_factory=list)
    styles: dict[Hashable, _Style] = field(default_factory=dict)
    pieces: list[_Piece] = field(default_factory=list)
    content: list[etree._Element] = field(default_factory=list)  # children written again
    space: bool = True  # OpenDocument: the text read so far is empty or ends in white space

    def add_text(self, text: str, chain: tuple, run: etree._Element | None) -> None:
        props = None if run is None else run.find(self.vocab.tag(self.vocab.props))
        shells = tuple(self._shell_signature(wrapper) for wrapper in chain)
        if props is None or not (len(props) or set(props.attrib) - self.vocab.ignored):
            key = (shells, None)
        else:
            key = (shells, _signature(props, self.vocab.ignored))
        self.styles.setdefault(key, _Style(chain, run))
        self.items.append(Run(text, key))

    def add_piece(
        self, element: etree._Element, chain: tuple, run: etree._Element | None = None
    ) -> None:
        self.pieces.append(_Piece(element, chain, run))
        self.items.append(Mark(len(self.pieces) - 1))
        self.space = False

    def add_odf_text(self, raw: str, chain: tuple) -> None:
        """Character data as OpenDocument shows it: white space collapsed to one space, none at
        the paragraph's start."""
        out = []
        for char in raw:
            if char in " \t\r\n":
                if not self.space:
                    out.append(" ")
                self.space = True
            else:
                out.append(char)
                self.space = False
        self.add_text("".join(out), chain, None)

    def _shell_signature(self, wrapper: etree._Element) -> Hashable:
        attributes = tuple(sorted(wrapper.attrib.items()))
        props = tuple(_signature(c) for c in wrapper if self.vocab.is_property(c))
        return (wrapper.tag, attributes, props)

    def ordered(self, group: tuple[int, ...]) -> bool:
        return any(_ordered(self.pieces[k].element) for k in group)


def _ordered(element: etree._Element) -> bool:
    name = etree.QName(element).localname if isinstance(element.tag, str) else ""
    return name in _ORDERED or name.endswith(_ORDERED_ENDS)


def _integer(text: str | None) -> int | None:
    """`text` as a whole number of at most 18 digits (None: another text, or none)."""
    return int(text) if text is not None and re.fullmatch(r"-?[0-9]{1,18}", text) else None


def _read_ooxml(flat: _Flat, element: etree._Element, chain: tuple) -> None:
    vocab = flat.vocab
    name = vocab.local(element)
    if name == vocab.run:
        for part in element:
            part_name = vocab.local(part)
            if part_name == vocab.props or not isinstance(part.tag, str):
                continue
            if part_name == vocab.text:
                flat.add_text(part.text or "", chain, element)
            elif part_name not in vocab.dropped:
                flat.add_piece(part, chain, element)
    elif name == vocab.text:  # a spreadsheet string's bare text
        flat.add_text(element.text or "", chain, None)
    elif name in vocab.wrappers and vocab.content(element) is not None:
        for part in vocab.content(element):
            if isinstance(part.tag, str) and not vocab.is_property(part):
                _read_ooxml(flat, part, (*chain, element))
    elif name not in vocab.dropped:
        flat.add_piece(element, chain)


def _read_odf(flat: _Flat, element: etree._Element, chain: tuple) -> None:
    if element.text:
        flat.add_odf_text(element.text, chain)
    for child in element:
        name = _ODF.local(child)
        if name in _ODF.wrappers:
            _read_odf(flat, child, (*chain, child))
        elif name == _ODF.text:
            flat.add_text(" " * _spaces(child, flat.where), chain, None)
            flat.space = False
        elif isinstance(child.tag, str) and name not in _ODF.dropped:
            flat.add_piece(child, chain)
        if child.tail:
            flat.add_odf_text(child.tail, chain)


def _spaces(element: etree._Element, where: str) -> int:
    count = element.get(f"{{{_TEXT}}}c", "1")
    if _integer(count) is None or not 1 <= int(count) <= _MAX_SPACES:
        raise DocumentError(
            f"{where} line {element.sourceline}: text:s has text:c={count!r}, not a count of "
            f"spaces (1 to {_MAX_SPACES})"
        )
    return int(count)


def _flat(element: etree._Element, vocab: _Vocabulary, where: str) -> _Flat:
    flat = _Flat(element, vocab, where)
    if vocab.run is None:
        flat.content = list(element)
        _read_odf(flat, element, ())
    else:
        for child in element:
            if isinstance(child.tag, str) and vocab.local(child) not in vocab.kept:
                flat.content.append(child)
                _read_ooxml(flat, child, ())
    grouped: list[Inline] = []
    for item in merged(flat.items):
        if isinstance(item, Mark) and grouped and isinstance(grouped[-1], Mark):
            grouped[-1] = Mark((*grouped[-1].key, item.key))
        else:
            grouped.append(Mark((item.key,)) if isinstance(item, Mark) else item)
    flat.items = grouped
    return flat


@dataclass
class _Paragraph:
    """A paragraph of a part, its text (marks at either end left out) when it holds a letter."""

    entry: str
    flat: _Flat
    prefix: list[Inline]
    body: list[Inline]
    suffix: list[Inline]
    tagged: Tagged | None

    @classmethod
    def of(cls, entry: str, flat: _Flat) -> _Paragraph:
        runs = [k for k, item in enumerate(flat.items) if isinstance(item, Run)]
        if not runs:
            return cls(entry, flat, list(flat.items), [], [], None)
        first, last = runs[0], runs[-1] + 1
        body = flat.items[first:last]
        letters = any(c.isalpha() for item in body if isinstance(item, Run) for c in item.text)
        tagged = Tagged.write(body) if letters else None
        return cls(entry, flat, flat.items[:first], body, flat.items[last:], tagged)


# --- a paragraph written again -----------------------------------------------------------------
class _Ids:
    """Fresh w:id values for a wrapper written twice (a tracked insertion a translation splits),
    above every id the document's parts hold."""

    def __init__(self, trees: Sequence[etree._ElementTree], ns: str) -> None:
        self._trees, self._ns, self._next = trees, ns, None

    def take(self) -> str:
        if self._next is None:
            key, values = f"{{{self._ns}}}id", [0]
            for tree in self._trees:
                for element in tree.iter():
                    value = element.get(f"{{{self._ns}}}val") if element.tag == key else None
                    values += [_integer(text) or 0 for text in (element.get(key), value)]
            self._next = max(values) + 1
        self._next += 1
        return str(self._next - 1)


@dataclass
class _Sink:
    """Where the next element goes: `parent` at `index`."""

    parent: etree._Element
    index: int

    def add(self, element: etree._Element) -> None:
        self.parent.insert(self.index, element)
        self.index += 1

    def text(self, text: str) -> None:
        if self.index == 0:
            self.parent.text = (self.parent.text or "") + text
        else:
            before = self.parent[self.index - 1]
            before.tail = (before.tail or "") + text


class _Writer:
    """A paragraph's content written from runs and pieces, in order: wrappers opened (cloned)
    and closed as the runs' and pieces' chains ask."""

    def __init__(self, flat: _Flat, ids: _Ids) -> None:
        self.flat, self.vocab, self.ids = flat, flat.vocab, ids
        paragraph = flat.element
        index = paragraph.index(flat.content[0]) if flat.content else len(paragraph)
        for child in flat.content:
            paragraph.remove(child)
        if self.vocab.run is None:
            paragraph.text = None
        self.stack: list[tuple[etree._Element | None, _Sink]] = [(None, _Sink(paragraph, index))]
        self.used: dict[etree._Element, int] = {}
        self.space = True  # OpenDocument: what is written so far is empty or ends in a space
        self.last: tuple[etree._Element, _Sink, etree._Element] | None = None

    def write(self, item: Run | _Piece) -> None:
        if isinstance(item, Run):
            style = self.flat.styles[item.key]
            sink = self._enter(style.chain)
            text = _NOT_XML.sub("", item.text)
            if self.vocab.run is None:
                self._odf_text(sink, text)
            else:
                self._ooxml_text(sink, text, style.run)
            self.last = None
            return
        sink = self._enter(item.chain)
        item.element.tail = None
        if item.run is None:
            sink.add(item.element)
            self.last = None
        elif self.last and self.last[0] is item.run and self.last[1] is sink:
            self.last[2].append(item.element)
        else:
            run = self._run(sink, item.run)
            run.append(item.element)
            self.last = (item.run, sink, run)
        self.space = False

    def _enter(self, chain: tuple[etree._Element, ...]) -> _Sink:
        depth = 0
        while (
            depth < len(chain)
            and depth + 1 < len(self.stack)
            and self.stack[depth + 1][0] is chain[depth]
        ):
            depth += 1
        del self.stack[depth + 1 :]
        for wrapper in chain[depth:]:
            self.stack.append((wrapper, self._shell(wrapper, self.stack[-1][1])))
        return self.stack[-1][1]

    def _shell(self, wrapper: etree._Element, sink: _Sink) -> _Sink:
        """A clone of `wrapper` without its content; one written before gets fresh ids."""
        shell = sink.parent.makeelement(wrapper.tag, dict(wrapper.attrib))
        sink.add(shell)
        for child in wrapper:
            if self.vocab.is_property(child):
                shell.append(copy.deepcopy(child))
        if self.used.get(wrapper):
            shell.attrib.pop(_XML_ID, None)
            key = self.vocab.tag("id")
            if key in shell.attrib:
                shell.set(key, self.ids.take())
            for element in shell.iter(key):
                element.set(self.vocab.tag("val"), self.ids.take())
        self.used[wrapper] = self.used.get(wrapper, 0) + 1
        if self.vocab.local(wrapper) == "sdt":
            content = shell.makeelement(self.vocab.tag("sdtContent"), {})
            shell.append(content)
            return _Sink(content, 0)
        return _Sink(shell, 0)

    def _run(self, sink: _Sink, template: etree._Element) -> etree._Element:
        run = sink.parent.makeelement(template.tag, dict(template.attrib))
        sink.add(run)
        props = template.find(self.vocab.tag(self.vocab.props))
        if props is not None:
            run.append(copy.deepcopy(props))
        return run

    def _ooxml_text(self, sink: _Sink, text: str, template: etree._Element | None) -> None:
        element = sink.parent.makeelement(self.vocab.tag(self.vocab.text), {})
        if template is None:
            sink.add(element)
        else:
            self._run(sink, template).append(element)
        element.text = text
        if self.vocab.preserve:
            element.set(_SPACE, "preserve")

    def _odf_text(self, sink: _Sink, text: str) -> None:
        """`text` as OpenDocument keeps it: a space after a space, or at the paragraph's start,
        written as text:s."""
        chars: list[str] = []
        spaces = 0
        for char in text:
            if char in " \t\r\n" and self.space:
                spaces += 1
                continue
            if spaces:
                self._odf_flush(sink, chars, spaces)
                chars, spaces = [], 0
            chars.append(" " if char in "\t\r\n" else char)
            self.space = char in " \t\r\n"
        self._odf_flush(sink, chars, spaces)

    def _odf_flush(self, sink: _Sink, chars: list[str], spaces: int) -> None:
        if chars:
            sink.text("".join(chars))
        if spaces:
            element = sink.parent.makeelement(_ODF.tag(_ODF.text), {})
            if spaces > 1:
                element.set(_ODF.tag("c"), str(spaces))
            sink.add(element)
            self.space = False


def _write(paragraph: _Paragraph, translation: str, ids: _Ids) -> None:
    """The paragraph's content replaced by `translation`'s runs and marks."""
    flat = paragraph.flat
    out = paragraph.tagged.read(translation)
    slots = [k for k, item in enumerate(out) if isinstance(item, Mark) and flat.ordered(item.key)]
    for k, group in zip(slots, sorted((out[k].key for k in slots), key=min)):
        out[k] = Mark(group)
    if flat.vocab.run is not None and not any(isinstance(item, Run) for item in out):
        out.insert(0, Run("", paragraph.tagged.base))  # a string keeps a text element
    writer = _Writer(flat, ids)
    for item in [*paragraph.prefix, *out, *paragraph.suffix]:
        if isinstance(item, Run):
            writer.write(item)
        else:
            for k in item.key:
                writer.write(flat.pieces[k])


# --- the package -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    """A part that holds text: its name, and what it is (`main`, `sheet`, `styles`, `text`)."""

    name: str
    role: str


def _inspect(package: Package, name: str) -> tuple[str, tuple[_Entry, ...]]:
    """The package's kind and its parts that hold text, the main part first."""
    names = package.names()
    if "mimetype" in names:
        kind, entries = _inspect_odf(package, name, names)
    elif "[Content_Types].xml" in names:
        kind, entries = _inspect_ooxml(package, name, names)
    else:
        raise DocumentError(
            f"{name}: not an Office Open XML or OpenDocument package (it has neither "
            "[Content_Types].xml nor mimetype)"
        )
    extension = PurePath(name).suffix.lower().lstrip(".")
    if extension in _KINDS and extension != kind:
        raise DocumentError(f"{name}: is {_KINDS[kind]} ({kind}), not {extension}")
    return kind, entries


def _inspect_odf(package: Package, name: str, names: list[str]) -> tuple[str, tuple]:
    mimetype = package.read("mimetype").decode("ascii", "replace").strip()
    kind = _ODF_KINDS.get(mimetype)
    if kind is None:
        raise DocumentError(
            f"{name}: an OpenDocument package of type {mimetype[:100]!r}, not a text, "
            "presentation or spreadsheet"
        )
    if "content.xml" not in names:
        raise DocumentError(f"{name}: the main part content.xml is missing")
    if "META-INF/manifest.xml" in names:
        manifest = parse_xml(
            package.read("META-INF/manifest.xml"), f"{name}, part META-INF/manifest.xml"
        )
        if next(manifest.iter(f"{_MANIFEST}encryption-data"), None) is not None:
            raise DocumentError(f"{name}: encrypted (a password-protected OpenDocument file)")
    entries = [_Entry("content.xml", "main")]
    if "styles.xml" in names:
        entries.append(_Entry("styles.xml", "styles"))
    return kind, tuple(entries)


def _inspect_ooxml(package: Package, name: str, names: list[str]) -> tuple[str, tuple]:
    types = parse_xml(package.read("[Content_Types].xml"), f"{name}, part [Content_Types].xml")
    defaults, overrides = {}, {}
    for element in types.getroot():
        if element.tag == f"{_CONTENT_TYPES}Default":
            defaults[element.get("Extension", "").lower()] = element.get("ContentType", "")
        elif element.tag == f"{_CONTENT_TYPES}Override":
            part = element.get("PartName", "").lstrip("/").lower()
            overrides[part] = element.get("ContentType", "")

    def type_of(entry: str) -> str:
        suffix = PurePath(entry).suffix.lower().lstrip(".")
        return overrides.get(entry.lower(), defaults.get(suffix, ""))

    main = _main_part(package, name, names)
    main_type = type_of(main)
    kind = _ooxml_kind(main_type)
    if kind is None:
        raise DocumentError(
            f"{name}: its main part {main} is {main_type or 'of no type'}, not a text document, "
            "presentation or spreadsheet"
        )
    wanted = _TEXT_PARTS[kind]

    def order(entry: str) -> tuple:  # slides before notes, slide2 before slide10
        numbered = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", entry)]
        return (wanted.index(type_of(entry).removeprefix(_OFFICE_TYPE)), numbered)

    others = sorted(
        (e for e in names if e != main and type_of(e).removeprefix(_OFFICE_TYPE) in wanted),
        key=order,
    )
    entries = [_Entry(main, "main")] if kind == "docx" else []
    for entry in others:
        sheet = type_of(entry).endswith("worksheet+xml")
        entries.append(_Entry(entry, "sheet" if sheet else "text"))
    return kind, tuple(entries)


def _main_part(package: Package, name: str, names: list[str]) -> str:
    if "_rels/.rels" not in names:
        raise DocumentError(f"{name}: no main part (the package has no _rels/.rels)")
    rels = parse_xml(package.read("_rels/.rels"), f"{name}, part _rels/.rels")
    for relation in rels.getroot().iter(f"{_RELATIONSHIPS}Relationship"):
        if (
            relation.get("Type", "").endswith("/officeDocument")
            and relation.get("TargetMode") != "External"
        ):
            target = posixpath.normpath(relation.get("Target", "").lstrip("/"))
            if target not in names:
                raise DocumentError(f"{name}: the main part {target} is missing")
            return target
    raise DocumentError(f"{name}: no main part (_rels/.rels names no officeDocument)")


def _ooxml_kind(content_type: str) -> str | None:
    families = (
        ("docx", ("wordprocessingml.", "ms-word.")),
        ("pptx", ("presentationml.", "ms-powerpoint.")),
        ("xlsx", ("spreadsheetml.", "ms-excel.")),
    )
    for kind, words in families:
        if content_type.endswith("main+xml") and any(word in content_type for word in words):
            return kind
    return None


def _paragraphs(kind: str, entry: _Entry, tree: etree._ElementTree, where: str) -> Iterator[_Flat]:
    """The paragraphs of one part, in document order (a note's or a text box's after the
    paragraph holding it)."""
    root = tree.getroot()
    strict = isinstance(root.tag, str) and root.tag.startswith(f"{{{_STRICT}")
    if kind == "docx":
        vocab = _word(etree.QName(root).namespace or "")
        elements = root.iter(vocab.tag("p"))
    elif kind == "pptx":
        ns = (
            f"{_STRICT}drawingml/main"
            if strict
            else "http://schemas.openxmlformats.org/drawingml/2006/main"
        )
        vocab = _drawing(ns)
        elements = root.iter(vocab.tag("p"))
    elif kind == "xlsx":
        vocab = _cells(etree.QName(root).namespace or "")
        comment = vocab.tag("comment")
        elements = (
            element
            for element in root.iter(vocab.tag("si"), vocab.tag("is"), vocab.tag("text"))
            if element.tag != vocab.tag("text") or element.getparent().tag == comment
        )
    else:
        vocab = _ODF
        elements = (
            element
            for element in root.iter(_ODF.tag("p"), _ODF.tag("h"))
            if _odf_translated(element, entry.role == "styles")
        )
    for element in elements:
        yield _flat(element, vocab, where)


def _odf_translated(paragraph: etree._Element, styles: bool) -> bool:
    """Whether an OpenDocument paragraph is text to translate: not deleted text of a tracked
    change, not a number's, a date's or a formula's cell; in styles.xml, a header's or footer's."""
    ancestors = list(paragraph.iterancestors())
    if any(a.tag == _ODF.tag("tracked-changes") for a in ancestors):
        return False
    if styles and not any(
        a.tag.startswith(_STYLE) and etree.QName(a).localname.startswith(("header", "footer"))
        for a in ancestors
    ):
        return False
    for ancestor in ancestors:
        if ancestor.tag in (f"{_OFFICE}annotation", f"{_DRAW}frame"):
            return True
        if ancestor.tag in (f"{_TABLE}table-cell", f"{_TABLE}covered-table-cell"):
            value_type = ancestor.get(f"{_OFFICE}value-type")
            formula = ancestor.get(f"{_TABLE}formula")
            return formula is None and value_type in (None, "string")
    return True


@dataclass(frozen=True)
class _Part:
    entry: _Entry
    raw: bytes
    tree: etree._ElementTree


def _serialized(part: _Part) -> bytes:
    """The part written again, its declaration and what precedes its root as they were."""
    return xml_bytes(part.tree, part.raw)


@dataclass(frozen=True)
class OfficeDocument:
    """An office package, its text parts read anew each time they are needed (so rendering
    twice gives two independent documents)."""

    package: Package
    name: str
    kind: str  # docx, pptx, xlsx, odt, odp or ods
    entries: tuple[_Entry, ...]
    found: tuple[str, ...] = ()  # the texts, as read

    @classmethod
    def of(
        cls, package: Package, name: str, kind: str, entries: tuple[_Entry, ...]
    ) -> OfficeDocument:
        document = cls(package, name, kind, entries)
        paragraphs = document._paragraphs(document._parts())
        texts = tuple(p.tagged.text for p in paragraphs if p.tagged is not None)
        return cls(package, name, kind, entries, texts)

    def _parts(self) -> list[_Part]:
        parts = []
        for entry in self.entries:
            raw = self.package.read(entry.name)
            if entry.role == "sheet" and b"inlineStr" not in raw:
                continue  # a worksheet without inline strings has no text of its own
            parts.append(_Part(entry, raw, parse_xml(raw, f"{self.name}, part {entry.name}")))
        return parts

    def _paragraphs(self, parts: list[_Part]) -> list[_Paragraph]:
        return [
            _Paragraph.of(part.entry.name, flat)
            for part in parts
            for flat in _paragraphs(
                self.kind, part.entry, part.tree, f"{self.name}, part {part.entry.name}"
            )
        ]

    def texts(self) -> list[str]:
        return list(self.found)

    def counts(self) -> Counts:
        paragraphs = self._paragraphs(self._parts())
        items = [item for p in paragraphs for item in p.flat.items]
        return Counts(
            paragraphs=len(paragraphs),
            texts=sum(p.tagged is not None for p in paragraphs),
            runs=sum(isinstance(item, Run) for item in items),
            marks=sum(len(item.key) for item in items if isinstance(item, Mark)),
        )

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        parts = self._parts()
        paragraphs = [p for p in self._paragraphs(parts) if p.tagged is not None]
        if len(translated) != len(paragraphs):
            raise ValueError(f"{len(paragraphs)} texts, {len(translated)} translations")
        vocab_ns = next((p.flat.vocab.ns for p in paragraphs), "")
        ids = _Ids([part.tree for part in parts], vocab_ns)
        changed = set()
        for paragraph, translation in zip(paragraphs, translated):
            if translation.text != paragraph.tagged.text:
                _write(paragraph, translation.text, ids)
                changed.add(paragraph.entry)
        return self.package.written(
            {part.entry.name: _serialized(part) for part in parts if part.entry.name in changed}
        )


def read(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> OfficeDocument:
    if data[: len(_OLE)] == _OLE:
        raise DocumentError(
            f"{name}: an encrypted or legacy binary Office file (an OLE compound file, not a zip "
            "package); save it unencrypted in an Office Open XML or OpenDocument format"
        )
    package = Package(data, name, limits)
    kind, entries = _inspect(package, name)
    document = OfficeDocument.of(package, name, kind, entries)
    check_texts(len(document.found), name, limits)
    return document


def counts(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> Counts:
    """The paragraphs, texts, runs and marks of an office package's text parts."""
    return read(data, name, limits).counts()
