"""Glossaries: source terms and the target terms their translations must use (`--glossary FILE`).

A glossary file is UTF-8 text, one term a line: the source term, a tab, the target term
(`Basic IDE<TAB>Basic-IDE`); blank lines and lines starting with `#` are skipped. A term is
found where its text stands as written (case counts: `Styles` is not `styles`) and as whole
words: no letter, digit or underscore of a script written with spaces touches it on either
side. Terms are found left to right, at each place the longest one there. A found term is masked as a protected span
(`protected.mask`): the model writes its sentinel, which the target term replaces, so the
target term stands exactly once where the source term stood, at no cost to the search."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from translate.errors import UsageError
from translate.text.protected import TERM, WORD, Span


class GlossaryError(UsageError):
    """A glossary file that cannot be read as one; the message names the file and the line."""


@dataclass(frozen=True)
class Glossary:
    """Source terms and their target terms (`pairs`, in the file's order); `name` says where
    they come from in messages (`--glossary FILE`). Hashable: a server keys its answers by it."""

    pairs: tuple[tuple[str, str], ...]
    name: str = field(default="the glossary", compare=False)

    @classmethod
    def read(cls, path: str | Path) -> Glossary:
        """The glossary in `path`; a GlossaryError names the file and line of what is wrong."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            why = error.strerror if isinstance(error, OSError) else "it is not UTF-8 text"
            raise GlossaryError(f"--glossary {path}: {why}") from None
        pairs: dict[str, tuple[str, int]] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.startswith("#"):
                continue
            where = f"--glossary {path} line {number}"
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                raise GlossaryError(
                    f"{where}: expected a source term, a tab and a target term, got {line!r}"
                )
            source, target = (value.strip() for value in fields)
            if source in pairs and pairs[source][0] != target:
                raise GlossaryError(
                    f"{where}: {source!r} has the target term {target!r} here and "
                    f"{pairs[source][0]!r} on line {pairs[source][1]}: keep one"
                )
            pairs.setdefault(source, (target, number))
        if not pairs:
            raise GlossaryError(f"--glossary {path}: no terms (one 'source<TAB>target' a line)")
        return cls(
            tuple((source, target) for source, (target, _) in pairs.items()), f"--glossary {path}"
        )

    @cached_property
    def _targets(self) -> dict[str, str]:
        return dict(self.pairs)

    def target(self, term: str) -> str:
        """The target term of source term `term`."""
        return self._targets[term]

    @cached_property
    def _pattern(self) -> re.Pattern:
        longest_first = sorted(self._targets, key=len, reverse=True)
        terms = "|".join(re.escape(term) for term in longest_first)
        return re.compile(rf"(?<!{WORD})(?:{terms})(?!{WORD})")

    def find(self, text: str) -> list[Span]:
        """The terms of `text`, in text order, none overlapping another: left to right, at each
        place the longest one there."""
        return [
            Span(TERM, match.group(), match.start(), match.end())
            for match in self._pattern.finditer(text)
        ]
