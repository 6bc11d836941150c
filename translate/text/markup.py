"""HTML translated in place: the text of an HTML fragment cut into the pieces to translate, and
the fragment written again with their translations, markup, attributes and whitespace kept.

BeautifulSoup with Python's own parser reads any input, malformed included (a stray end tag is
dropped, an open one closed at the end), keeps tag and attribute order, and adds no <html> or
<body> around a fragment. A text node is translated as one piece, without the whitespace around
it; its inner runs of spaces and line breaks are one space, as a browser shows them. Left as they
are: script, style, code and pre, elements marked translate="no", comments and declarations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bs4 import BeautifulSoup, NavigableString
from bs4.dammit import EntitySubstitution
from bs4.formatter import HTMLFormatter

UNTRANSLATED_TAGS = frozenset({"script", "style", "code", "pre", "textarea", "template"})
HTML_SPACE = " \t\n\r\f"  # what HTML collapses; a no-break space (&nbsp;) is text


def _escape(text: str) -> str:
    """&, < and > escaped as the input needed them, and a no-break space as &nbsp; again (the
    other entities come back as the characters they stand for)."""
    return EntitySubstitution.substitute_xml(text).replace("\xa0", "&nbsp;")


class _AsWritten(HTMLFormatter):
    """Attributes in the input's order (BeautifulSoup's formatters sort them), void elements as
    HTML writes them (<br>, not <br/>)."""

    def __init__(self) -> None:
        super().__init__(entity_substitution=_escape, void_element_close_prefix=None)

    def attributes(self, tag):
        return list(tag.attrs.items())


FORMATTER = _AsWritten()


def collapse_space(text: str) -> str:
    """Runs of HTML's spaces (not the no-break space) as one space, none at either end."""
    return " ".join(part for part in text.translate(_TO_SPACE).split(" ") if part)


_TO_SPACE = str.maketrans(dict.fromkeys(HTML_SPACE, " "))


def _translatable(node: NavigableString) -> bool:
    if type(node) is not NavigableString:  # Comment, CData, Doctype, Declaration, ...
        return False
    for parent in node.parents:
        if parent.name in UNTRANSLATED_TAGS or str(parent.get("translate", "")).lower() == "no":
            return False
    return True


@dataclass
class HtmlFragment:
    """A parsed fragment and its text nodes to translate, in document order."""

    soup: BeautifulSoup
    nodes: list[NavigableString]

    @classmethod
    def parse(cls, markup: str) -> HtmlFragment:
        soup = BeautifulSoup(
            markup,
            "html.parser",
            # Whitespace between tags as it was (BeautifulSoup makes it one space or line break
            # outside these), attribute values as written (class="a  b" not re-spaced).
            preserve_whitespace_tags={"[document]", "pre", "textarea"},
            multi_valued_attributes=None,
        )
        nodes = [
            node
            for node in soup.find_all(string=True)
            if _translatable(node) and collapse_space(node)
        ]
        return cls(soup, nodes)

    def texts(self) -> list[str]:
        """What to translate: each text node's words, its whitespace collapsed."""
        return [collapse_space(node) for node in self.nodes]

    def render(self, translations: Sequence[str]) -> str:
        """The fragment with each text node replaced by its translation (one per `texts()`),
        the whitespace it had before and after kept."""
        if len(translations) != len(self.nodes):
            raise ValueError(f"{len(self.nodes)} text nodes, {len(translations)} translations")
        for node, translation in zip(self.nodes, translations):
            text = str(node)
            core = text.strip(HTML_SPACE)
            start = text.index(core)
            node.replace_with(
                NavigableString(text[:start] + translation + text[start + len(core) :])
            )
        self.nodes = []
        return self.soup.decode(formatter=FORMATTER)
