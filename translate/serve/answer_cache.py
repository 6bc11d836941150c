"""Translations already given, kept for the texts that come again: Nextcloud, Discourse and
Weblate send the same texts over and over, and a text answered from here costs no model time.

Keyed by the text and every search setting (`SearchSettings`: beam, length penalty, n-best,
languages, the server's own rules), so an answer is only ever reused for the very same
question; bounded by its entries, the least recently used going first."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from translate.decode.pipeline import Translation
from translate.decode.settings import SearchSettings


@dataclass(frozen=True)
class Answered:
    """A line's translations (its n-best list, best first) and the sentences it cost the model."""

    translations: tuple[Translation, ...]
    sentences: int


class AnswerCache:
    """At most `entries` answers (0: none kept, every lookup a miss)."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._kept: OrderedDict[tuple[str, SearchSettings], Answered] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, line: str, key: SearchSettings) -> Answered | None:
        found = self._kept.get((line, key))
        if found is not None:
            self._kept.move_to_end((line, key))
        return found

    def put(self, line: str, key: SearchSettings, answered: Answered) -> None:
        if self.entries <= 0:
            return
        self._kept[(line, key)] = answered
        self._kept.move_to_end((line, key))
        while len(self._kept) > self.entries:
            self._kept.popitem(last=False)
