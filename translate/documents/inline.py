"""Inline formatting written into a text as tags, and read back from its translation.

A text of a document is a sequence of runs, each with the formatting a format gives it (a key of
its own: a docx run's properties, an XLIFF `<g>`), and marks: inline objects with no text to
translate (a tab, a line break, an image, a field, XLIFF's `<ph/>`). The runs of the text's most
used formatting are written bare, every other run as `<g1>text</g1>` and every mark as `<x2/>`,
numbered in order: a tag is a protected span (`protected.PATTERNS["placeholder"]`), so the
search writes each one exactly once and the sentence is translated whole, whatever runs it
crosses. The letter (`g` and `x` above) is one the text itself never writes after `<`, so a
`<g1>` typed in a document stays text.

Read back (`Tagged.read`), each text of the translation takes the formatting of the tag around
it (the innermost, where tags nest), and a mark stands where its tag does. A translation whose
tags do not pair up (a model that does not protect spans can garble them) is read as text in the
main formatting with every mark after it: its words and inline objects are kept, its run
formatting is not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

_LETTERS = "gxkqzjvwy"  # tried in turn for the two tag letters: the first two a text leaves free


@dataclass(frozen=True)
class Run:
    """Text in a formatting (`key`: what the format compares runs by)."""

    text: str
    key: Hashable


@dataclass(frozen=True)
class Mark:
    """An inline object without text to translate (`key`: the format's handle for it)."""

    key: Hashable


Inline = Run | Mark


def merged(items: Sequence[Inline]) -> list[Inline]:
    """Consecutive runs of one formatting joined (in one pass), empty runs left out."""
    out: list[Inline] = []
    texts: list[str] = []  # the run being joined, in parts

    def flush() -> None:
        if texts:
            out.append(Run("".join(texts), key))
            texts.clear()

    key: Hashable = None
    for item in items:
        if isinstance(item, Mark):
            flush()
            out.append(item)
        elif item.text:
            if texts and item.key != key:
                flush()
            key = item.key
            texts.append(item.text)
    flush()
    return out


@dataclass(frozen=True)
class Tagged:
    """A text with its inline formatting as tags (`text`), and what each tag stands for."""

    text: str
    base: Hashable  # the formatting of the bare text
    tags: tuple[Inline, ...]  # tag k (1-based) is tags[k - 1]: a run's formatting, or a mark
    pair: str  # the letter of the runs' tags
    single: str  # the letter of the marks' tags

    @classmethod
    def write(cls, items: Sequence[Inline], base: Hashable | None = None) -> Tagged:
        """`items` as one text; `base` the formatting written bare (default: the one holding
        the most characters; the first run's where none does)."""
        items = merged(items)
        runs = [item for item in items if isinstance(item, Run)]
        if base is None:
            weights = Counter()
            for run in runs:
                weights[run.key] += len(run.text)
            base = max(weights, key=lambda key: weights[key]) if weights else None
        plain = "".join(run.text for run in runs)
        free = [letter for letter in _LETTERS if f"<{letter}" not in plain.lower()]
        free += [letter for letter in _LETTERS if letter not in free]
        pair, single = free[0], free[1]
        parts, tags = [], []
        for item in items:
            if isinstance(item, Mark):
                tags.append(item)
                parts.append(f"<{single}{len(tags)}/>")
            elif item.key == base:
                parts.append(item.text)
            else:
                tags.append(Run("", item.key))
                parts.append(f"<{pair}{len(tags)}>{item.text}</{pair}{len(tags)}>")
        return cls("".join(parts), base, tuple(tags), pair, single)

    def plain(self) -> str:
        """The text without its tags (what a format keeps where it cannot keep runs)."""
        return "".join(item.text for item in self.read(self.text) if isinstance(item, Run))

    def read(self, translation: str) -> list[Inline]:
        """The runs and marks of `translation`, in its order (`merged`)."""
        if not self.tags:
            return merged([Run(translation, self.base)])
        pattern = re.compile(rf"<(/?)({self.pair}|{self.single})(\d+)(/?)>")
        items: list[Inline] = []
        open_tags: list[int] = []
        seen: set[int] = set()
        end = 0
        intact = True
        for match in pattern.finditer(translation):
            closing, letter, number, empty = match.groups()
            k = int(number)
            if not 1 <= k <= len(self.tags) or k in seen and not closing:
                continue  # not one of this text's tags: text
            tag = self.tags[k - 1]
            is_mark = isinstance(tag, Mark)
            if is_mark != (letter == self.single) or is_mark != bool(empty) or (closing and empty):
                continue
            items.append(Run(translation[end : match.start()], self._key(open_tags)))
            end = match.end()
            if is_mark:
                seen.add(k)
                items.append(tag)
            elif not closing:
                seen.add(k)
                open_tags.append(k)
            elif open_tags and open_tags[-1] == k:
                open_tags.pop()
            else:
                intact = False
        items.append(Run(translation[end:], self._key(open_tags)))
        if open_tags or not intact:
            return self._flattened(translation, pattern)
        missing = [
            tag for k, tag in enumerate(self.tags, 1) if isinstance(tag, Mark) and k not in seen
        ]
        return merged(items + missing)

    def _key(self, open_tags: list[int]) -> Hashable:
        return self.tags[open_tags[-1] - 1].key if open_tags else self.base

    def _flattened(self, translation: str, pattern: re.Pattern) -> list[Inline]:
        """The translation as text in the base formatting, every mark after it."""
        marks = [tag for tag in self.tags if isinstance(tag, Mark)]
        return merged([Run(pattern.sub("", translation), self.base), *marks])
