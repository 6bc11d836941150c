"""How well a trained SentencePiece vocabulary covers new text: the characters it has no piece
for (each becomes the unknown piece, which the model can neither read nor write), and how many
pieces a word takes (more pieces a word than on the text the vocabulary was trained on means
the new text is cut into smaller, rarer pieces)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from translate.text.vocab import UNK_ID, SentencePieceVocab, Vocabularies


@dataclass(frozen=True)
class Coverage:
    """Counts over some lines: characters (spaces left out), those without a piece (by
    character), words (split on white space) and the pieces they were cut into."""

    characters: int
    missing: Counter[str]
    words: int
    pieces: int

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(
            self.characters + other.characters,
            self.missing + other.missing,
            self.words + other.words,
            self.pieces + other.pieces,
        )

    @property
    def pieces_per_word(self) -> float:
        return self.pieces / max(self.words, 1)


def coverage(vocab: SentencePieceVocab, lines: Iterable[str]) -> Coverage:
    """How `vocab` covers `lines`."""
    characters: Counter[str] = Counter()
    words = pieces = 0
    for line in lines:
        characters.update(ch for ch in line if not ch.isspace())
        words += len(line.split())
        pieces += len(vocab.encode([line])[0])
    missing = Counter({ch: n for ch, n in characters.items() if UNK_ID in vocab.encode([ch])[0]})
    return Coverage(sum(characters.values()), missing, words, pieces)


def pairs_coverage(vocab: Vocabularies, pairs: list[tuple[str, str]]) -> Coverage:
    """How the source and target vocabularies cover both sides of `pairs`."""
    return coverage(vocab.source, (src for src, _ in pairs)) + coverage(
        vocab.target, (tgt for _, tgt in pairs)
    )


def describe(new: Coverage, original: Coverage | None, shown: int = 8) -> str:
    """One line for a person: the characters without a piece, the most frequent first, and
    pieces a word against the original text's where that was at hand."""
    lost = sum(new.missing.values())
    if not lost:
        line = f"every character has a piece ({new.characters:,})"
    else:
        common = ", ".join(repr(ch) for ch, _ in new.missing.most_common(shown))
        more = len(new.missing) - min(len(new.missing), shown)
        line = (
            f"{lost:,} of {new.characters:,} characters ({100 * lost / new.characters:.3g}%) have "
            f"no piece and are read and written as unknown: {common}"
            f"{f' and {more} more' if more else ''}"
        )
    line += f"; {new.pieces_per_word:.2f} pieces a word"
    if original is not None:
        line += f" (the text it was trained on: {original.pieces_per_word:.2f})"
    return line
