"""How much of one joint vocabulary the two sides of a corpus share.

A joint SentencePiece vocabulary gives both languages one id space, but how much of it both
use depends on the pair: English and German share Latin letters, subwords, names and numbers;
English and Chinese share little beyond digits, punctuation and the Latin names in Chinese
text. `PieceUse` counts each piece on each side of the training data and measures the share
both sides spend on the same pieces, the number `tie_embeddings: auto` decides from
(`translate.model.tying`), and the pieces only the target side uses, whose rows
`tie_embeddings: shared_rows` unties.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SentencePieceVocab


class PieceClass(IntEnum):
    """Which sides of the training data use a piece."""

    UNUSED = 0
    SOURCE_ONLY = 1
    TARGET_ONLY = 2
    BOTH = 3


def ignored_pieces(vocab: SentencePieceVocab, sentinels: Iterable[str] = ()) -> frozenset[int]:
    """Pieces that say nothing about the languages: pad, unk, bos, eos, the language tags and
    the sentinels of protected spans (written on both sides by construction)."""
    ids = {PAD_ID, UNK_ID, BOS_ID, EOS_ID, *vocab.tag_ids().values()}
    ids.update(i for i in map(vocab.piece_id, sentinels) if i is not None)
    return frozenset(ids)


@dataclass(frozen=True)
class PieceUse:
    """Occurrences of each piece id on the source and on the target side (ignored pieces at 0)."""

    source: np.ndarray
    target: np.ndarray

    @classmethod
    def from_counts(
        cls, source: np.ndarray, target: np.ndarray, ignored: Iterable[int] = ()
    ) -> PieceUse:
        """From per-id occurrence counts of each side; `ignored` ids are set to 0."""
        source = np.array(source, dtype=np.int64)
        target = np.array(target, dtype=np.int64)
        skip = np.fromiter(ignored, dtype=np.int64)
        source[skip] = 0
        target[skip] = 0
        return cls(source, target)

    @classmethod
    def count(
        cls,
        pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
        vocab_size: int,
        ignored: Iterable[int] = (),
    ) -> PieceUse:
        """From (source ids, target ids) pairs."""
        source = np.zeros(vocab_size, dtype=np.int64)
        target = np.zeros(vocab_size, dtype=np.int64)
        for src, tgt in pairs:
            np.add.at(source, np.asarray(src, dtype=np.int64), 1)
            np.add.at(target, np.asarray(tgt, dtype=np.int64), 1)
        return cls.from_counts(source, target, ignored)

    def shares(self) -> tuple[np.ndarray, np.ndarray]:
        """Each side's piece distribution (zeros for a side with no token)."""
        return (
            self.source / max(int(self.source.sum()), 1),
            self.target / max(int(self.target.sum()), 1),
        )

    def shared_mass(self) -> float:
        """The sum over pieces of min(source share, target share): the piece mass both sides
        spend on the same pieces, 1 for identical distributions and 0 for disjoint ones (one
        minus their total-variation distance). A piece the other side uses once weighs as little
        as that one use."""
        source, target = self.shares()
        return float(np.minimum(source, target).sum())

    def classes(self) -> np.ndarray:
        """The `PieceClass` of every id."""
        return (self.source > 0).astype(np.int64) * PieceClass.SOURCE_ONLY + (
            self.target > 0
        ).astype(np.int64) * PieceClass.TARGET_ONLY

    def target_only_ids(self) -> np.ndarray:
        """The ids only the target side uses (`tie_embeddings: shared_rows` unties their rows)."""
        return np.flatnonzero(self.classes() == PieceClass.TARGET_ONLY)

    def mass_on(self, piece_class: PieceClass) -> tuple[float, float]:
        """The share of the source's and of the target's tokens on pieces of `piece_class`."""
        source, target = self.shares()
        chosen = self.classes() == piece_class
        return float(source[chosen].sum()), float(target[chosen].sum())
