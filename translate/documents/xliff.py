"""XLIFF 1.2 (and 1.1, read alike) and 2.0: each unit's source translated into its target, inline codes kept, and every
other node (notes, skeletons, alt-trans, other namespaces' elements and attributes, comments,
processing instructions, whitespace) written back as it was.

Read through `safe.parse_xml` (no DTD, no entities); the version is the root's namespace
(urn:oasis:names:tc:xliff:document:1.1, :1.2 or :2.0), any other root is an error. The rules:

- What is translated: 1.2, each `<trans-unit>`'s `<source>`, or where its `<seg-source>` holds
  `<mrk mtype="seg">` segments, each segment; 2.0, each `<segment>` of a `<unit>`. Not a unit
  (or 2.0 segment) under `translate="no"` (its own or its nearest `<group>`'s or `<file>`'s), nor
  a source without words (only inline codes or spaces: left as it is).
- Kept, not translated: a unit whose target has content and a state that is not a draft. 1.2:
  `approved="yes"`, or a target state other than new, needs-translation, needs-adaptation,
  needs-l10n and the needs-review ones (translated, final, signed-off, an `x-` state, or none).
  2.0: a state other than `initial` (translated, reviewed, final, or none).
- Inline codes: a paired element with words in it (1.2 `<g>` and `<mrk>`, 2.0 `<pc>` and `<mrk>`)
  is a run (`inline.Run`) whose tag the translation carries; its copy in the target has its
  attributes. Every other inline node (1.2 `<x/>`, `<bx/>`, `<ex/>`, `<ph>`, `<bpt>`, `<ept>`,
  `<it>`, `<mrk mtype="protected">`; 2.0 `<ph/>`, `<sc/>`, `<ec/>`, `<cp/>`, `<sm/>`, `<em/>`,
  `<mrk translate="no">`; a paired element without words; a comment or an element of another
  namespace) is a mark: copied as it is, inside the paired element that held it where that one is
  open in the translation. A `<sub>`'s text inside a code is not translated.
- The target: replaced where there is one (its attributes kept), else written after `<source>`
  (1.2: after `<seg-source>`, whose segmentation it copies) with the source's indentation and
  `xml:space`. 1.2: `xml:lang` the file's target language, `state="translated"`, or
  `"needs-review-translation"` under `RenderOptions.review_below` (a unit of several segments:
  the least confident). 2.0, on the `<segment>`: `state="translated"`, or `state="initial"` with
  `subState="translate:needs-review"` (the prefix this package's name: XLIFF 2.0 reserves `xlf`).
- The language, where anything is translated: 1.2 `<file target-language>`, 2.0 `<xliff
  trgLang>`, the target language where missing (one given is kept).
- Written: the XML declaration, what precedes the root and the trailing whitespace as they were;
  the rest as lxml writes it (attributes in double quotes, `<a></a>` as `<a/>`, a character
  reference as its character): a file already so written comes back byte for byte.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lxml import etree

from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions, Translated
from translate.documents.inline import Inline, Mark, Run, Tagged
from translate.documents.safe import (
    DEFAULT_LIMITS,
    Limits,
    check_size,
    check_texts,
    parse_xml,
    xml_bytes,
)
from translate.text.sentences import is_blank

XML_NS = "http://www.w3.org/XML/1998/namespace"
SUBSTATE_REVIEW = "translate:needs-review"


@dataclass(frozen=True)
class _Version:
    """What tells one XLIFF version's units, inline codes and states apart."""

    number: str
    ns: str
    paired: frozenset[str]  # inline elements holding text: runs
    drafts: frozenset[str]  # target states a translation may replace ("" where none is given)

    def q(self, local: str) -> str:
        return f"{{{self.ns}}}{local}"

    @property
    def first(self) -> bool:
        """XLIFF 1.x (1.1 and 1.2 read alike): trans-units, `<g>`, target states."""
        return self.number.startswith("1.")


V12 = _Version(
    "1.2",
    "urn:oasis:names:tc:xliff:document:1.2",
    frozenset(("g", "mrk")),
    frozenset(
        (
            "new",
            "needs-translation",
            "needs-adaptation",
            "needs-l10n",
            "needs-review-adaptation",
            "needs-review-l10n",
            "needs-review-translation",
        )
    ),
)
# 1.1 (translate-toolkit's po2xliff writes it) has 1.2's units, codes and states
V11 = replace(V12, number="1.1", ns="urn:oasis:names:tc:xliff:document:1.1")
V20 = _Version(
    "2.0",
    "urn:oasis:names:tc:xliff:document:2.0",
    frozenset(("pc", "mrk")),
    frozenset(("initial",)),
)


@dataclass(frozen=True)
class _Code:
    """A mark's node, and the paired elements around it in its source (outermost first)."""

    node: etree._Element
    path: tuple[etree._Element, ...]


@dataclass(frozen=True)
class _Text:
    """One text: an element of the source whose content is translated."""

    element: etree._Element
    tagged: Tagged | None  # None: no words, its content copied as it is


@dataclass(frozen=True)
class _Job:
    """A unit (1.2 trans-unit, 2.0 segment) to translate."""

    holder: etree._Element  # where source and target are
    source: etree._Element  # <source>, or 1.2's <seg-source> with segments
    texts: tuple[_Text, ...]
    file: etree._Element


@dataclass(frozen=True)
class Xliff:
    data: bytes
    name: str
    version: _Version
    found: tuple[str, ...]

    def texts(self) -> list[str]:
        return list(self.found)

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        if len(translated) != len(self.found):
            raise ValueError(f"{len(self.found)} texts, {len(translated)} translations")
        tree = parse_xml(self.data, self.name)
        jobs = _jobs(tree, self.version, self.name)
        if not jobs:
            return self.data
        language = options.target_lang
        root = tree.getroot()
        if self.version is V20 and language and not root.get("trgLang"):
            root.set("trgLang", language)
        found = iter(translated)
        for job in jobs:
            mine = [next(found) for text in job.texts if text.tagged is not None]
            below = min(t.confidence for t in mine) < options.review_below
            if self.version.first:
                if language and not job.file.get("target-language"):
                    job.file.set("target-language", language)
                _write_12(job, mine, below, self.version)
            else:
                _write_20(job, mine, below)
        return xml_bytes(tree, self.data)


def read(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> Xliff:
    check_size(data, name, limits)
    tree = parse_xml(data, name)
    version = _version(tree.getroot(), name)
    texts = [
        text.tagged.text
        for job in _jobs(tree, version, name)
        for text in job.texts
        if text.tagged is not None
    ]
    check_texts(len(texts), name, limits, "texts to translate")
    return Xliff(data, name, version, tuple(texts))


def _version(root: etree._Element, name: str) -> _Version:
    tag = etree.QName(root)
    for version in (V11, V12, V20):
        if tag.namespace == version.ns and tag.localname == "xliff":
            return version
    if tag.localname == "xliff":
        raise DocumentError(
            f"{name}: XLIFF {root.get('version', '(no version)')} in namespace "
            f"{tag.namespace or '(none)'}; only XLIFF 1.1 and 1.2 ({V12.ns}) and 2.0 ({V20.ns}) are read"
        )
    raise DocumentError(f"{name}: not XLIFF (its root element is <{tag.localname}>)")


# --- reading ------------------------------------------------------------------------------
def _jobs(tree: etree._ElementTree, version: _Version, name: str) -> list[_Job]:
    """The units to translate, in document order."""
    jobs = []
    for file in tree.getroot().iter(version.q("file")):
        unit_tag = "trans-unit" if version.first else "unit"
        for unit in file.iter(version.q(unit_tag)):
            if _translate_no(unit, file):
                continue
            holders = [unit] if version.first else unit.findall(version.q("segment"))
            for holder in holders:
                job = _job(holder, file, version, name)
                if job is not None:
                    jobs.append(job)
    return jobs


def _translate_no(unit: etree._Element, file: etree._Element) -> bool:
    """Whether the unit, or its nearest group or file saying, says translate="no"."""
    node = unit
    while node is not None:
        if node.get("translate") is not None:
            return node.get("translate") == "no"
        if node is file:
            return False
        node = node.getparent()
    return False


def _job(holder: etree._Element, file, version: _Version, name: str) -> _Job | None:
    source = holder.find(version.q("source"))
    if source is None:
        what = f"trans-unit {holder.get('id')!r}" if version.first else "segment"
        raise DocumentError(f"{name} line {holder.sourceline}: {what} has no <source>")
    if _kept(holder, version):
        return None
    texts = [source]
    if version.first:
        segmented = holder.find(version.q("seg-source"))
        segments = _segments(segmented, version) if segmented is not None else []
        if segments:
            source, texts = segmented, segments
    found = tuple(_Text(element, _tagged(element, version)) for element in texts)
    if all(text.tagged is None for text in found):
        return None
    return _Job(holder, source, found, file)


def _kept(holder: etree._Element, version: _Version) -> bool:
    """Whether the unit already holds a translation to keep."""
    target = holder.find(version.q("target"))
    if target is None or not len(target) and is_blank(target.text or ""):
        return False
    if version.first:
        if holder.get("approved") == "yes":
            return True
        return target.get("state", "") not in version.drafts
    return holder.get("state", "") not in version.drafts


def _segments(seg_source: etree._Element, version: _Version) -> list[etree._Element]:
    return [mrk for mrk in seg_source.iter(version.q("mrk")) if mrk.get("mtype") == "seg"]


def _tagged(element: etree._Element, version: _Version) -> Tagged | None:
    """The element's content as a text with its inline codes as tags; None where it has no
    words."""
    items = _items(element, version, ())
    if is_blank("".join(item.text for item in items if isinstance(item, Run))):
        return None
    return Tagged.write(items)


def _items(element: etree._Element, version: _Version, path: tuple) -> list[Inline]:
    items: list[Inline] = [Run(element.text or "", path)]
    for child in element:
        if _is_run(child, version):
            items += _items(child, version, (*path, child))
        else:
            items.append(Mark(_Code(child, path)))
        items.append(Run(child.tail or "", path))
    return items


def _is_run(node: etree._Element, version: _Version) -> bool:
    if not isinstance(node.tag, str):
        return False  # a comment or processing instruction
    local = node.tag[len(version.ns) + 2 :]
    if node.tag != version.q(local) or local not in version.paired:
        return False
    if local == "mrk" and (node.get("mtype") == "protected" or node.get("translate") == "no"):
        return False
    return not is_blank("".join(node.itertext()))


# --- writing ------------------------------------------------------------------------------
def _write_12(job: _Job, translated: list[Translated], below: bool, version: _Version) -> None:
    target = _target(job, version)
    if target.get(f"{{{XML_NS}}}lang") is None and job.file.get("target-language"):
        target.set(f"{{{XML_NS}}}lang", job.file.get("target-language"))
    target.set("state", "needs-review-translation" if below else "translated")
    _fill_target(job, target, translated, version)


def _write_20(job: _Job, translated: list[Translated], below: bool) -> None:
    target = _target(job, V20)
    _fill_target(job, target, translated, V20)
    if below:
        job.holder.set("state", "initial")
        job.holder.set("subState", SUBSTATE_REVIEW)
    else:
        job.holder.set("state", "translated")
        job.holder.attrib.pop("subState", None)


def _target(job: _Job, version: _Version) -> etree._Element:
    """The unit's target, emptied, or a new one after its source (1.2: after its seg-source)."""
    target = job.holder.find(version.q("target"))
    if target is not None:
        target.text = None
        del target[:]
        return target
    anchor = job.holder.find(version.q("seg-source")) if version.first else None
    anchor = anchor if anchor is not None else job.holder.find(version.q("source"))
    target = job.holder.makeelement(version.q("target"), {})
    space = anchor.get(f"{{{XML_NS}}}space")
    if space is not None:
        target.set(f"{{{XML_NS}}}space", space)
    before = anchor.getprevious()
    indent = before.tail if before is not None else job.holder.text
    anchor.addnext(target)
    target.tail = anchor.tail
    if indent is not None and not indent.strip():
        anchor.tail = indent
    return target


def _fill_target(
    job: _Job, target: etree._Element, translated: list[Translated], version: _Version
) -> None:
    """The target's content: each text's translation with its inline codes, a segmented
    source's segmentation and what lies between its segments copied."""
    if job.source.tag == version.q("seg-source"):
        target.text = job.source.text
        for child in job.source:
            target.append(copy.deepcopy(child))
        places = _segments(target, version)
    else:
        places = [target]
    found = iter(translated)
    for text, place in zip(job.texts, places):
        if text.tagged is not None:
            _fill(place, text.tagged.read(next(found).text))


def _fill(container: etree._Element, items: list[Inline]) -> None:
    """`container`'s content made of `items`: each run in copies of the paired elements its key
    names (one opened where the previous run's are not), each mark where its paired elements
    are open."""
    container.text = None
    del container[:]
    stack: list[tuple[etree._Element, tuple]] = [(container, ())]
    for item in items:
        if isinstance(item, Run):
            path = item.key
        else:
            path = _common(stack[-1][1], item.key.path)
        while stack[-1][1] != path[: len(stack[-1][1])]:
            stack.pop()
        for element in path[len(stack[-1][1]) :]:
            parent, at = stack[-1]
            opened = parent.makeelement(element.tag, element.attrib)
            parent.append(opened)
            stack.append((opened, (*at, element)))
        if isinstance(item, Run):
            _append_text(stack[-1][0], item.text)
        else:
            node = copy.deepcopy(item.key.node)
            node.tail = None
            stack[-1][0].append(node)


def _common(one: tuple, other: tuple) -> tuple:
    n = 0
    while n < min(len(one), len(other)) and one[n] is other[n]:
        n += 1
    return one[:n]


def _append_text(element: etree._Element, text: str) -> None:
    if len(element):
        element[-1].tail = (element[-1].tail or "") + text
    else:
        element.text = (element.text or "") + text
