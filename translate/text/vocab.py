"""SentencePiece vocabularies: one joint model over both languages, or one per side.

The serialized SentencePiece model travels as bytes inside every checkpoint, so a
checkpoint alone is enough to translate.  The special ids are fixed here and nowhere else.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import sentencepiece as spm

from translate.errors import UsageError

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

# SentencePiece's list calls start a thread per core, which costs more than encoding a few lines
# one call each: fewer lines than this (a server's request) go one call a line (docs/serving.md).
BATCH_CALL_LINES = 64


def language_tag(lang: str) -> str:
    """The piece that asks a many-to-many model for output in `lang`: `<2de>` (Johnson et al. 2017)."""
    return f"<2{lang}>"


ModelType = Literal["unigram", "bpe"]


class SentencePieceVocab:
    """One SentencePiece model, loaded from its serialized bytes."""

    def __init__(self, model_bytes: bytes) -> None:
        self.model_bytes = model_bytes
        self.processor = spm.SentencePieceProcessor(model_proto=model_bytes)
        specials = (
            self.processor.pad_id(),
            self.processor.unk_id(),
            self.processor.bos_id(),
            self.processor.eos_id(),
        )
        if specials != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ValueError(
                f"SentencePiece model reserves pad/unk/bos/eos as {specials}, "
                f"expected {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}"
            )

    def __len__(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, texts: list[str]) -> list[list[int]]:
        if len(texts) < BATCH_CALL_LINES:
            return [self.processor.encode(text, out_type=int) for text in texts]
        return self.processor.encode(texts, out_type=int)

    def decode(self, ids: list[list[int]]) -> list[str]:
        texts = (
            [self.processor.decode(line) for line in ids]
            if len(ids) < BATCH_CALL_LINES
            else self.processor.decode(ids)
        )
        # Trailing or leading "▁" pieces would leave spaces around a translation.
        return [text.strip() for text in texts]

    def pieces(self, text: str) -> list[str]:
        return self.processor.encode(text, out_type=str)

    def tag_ids(self) -> dict[str, int]:
        """Every language tag piece (`<2xx>`) of the vocabulary, by language."""
        if not hasattr(self, "_tags"):
            pieces = (self.processor.id_to_piece(i) for i in range(len(self)))
            self._tags = {
                piece[2:-1]: index
                for index, piece in enumerate(pieces)
                if piece.startswith("<2") and piece.endswith(">") and len(piece) > 3
            }
        return self._tags

    def tag_id(self, lang: str) -> int | None:
        """The id of `lang`'s tag, or None where the vocabulary has no such piece."""
        return self.piece_id(language_tag(lang))

    def piece_id(self, piece: str) -> int | None:
        """The id of `piece`, or None where the vocabulary has no such piece."""
        index = self.processor.piece_to_id(piece)
        return None if index == UNK_ID or self.processor.id_to_piece(index) != piece else index


def train_sentencepiece(
    sentences: Iterable[str],
    vocab_size: int,
    model_type: ModelType = "unigram",
    character_coverage: float = 1.0,
    max_sentences: int = 2_000_000,
    seed_sentencepiece_size: int = 1_000_000,
    threads: int = 2,
    seed: int = 1,
    normalization: str = "identity",
    name: str = "the training text",
    user_defined_symbols: Iterable[str] = (),
    split_digits: bool = False,
) -> SentencePieceVocab:
    """Train one SentencePiece model in memory and return it (seeded: same text, same model).

    `normalization` defaults to "identity" so that the model can write every character of its
    references back exactly (NFKC would turn "…" into "..." and cost BLEU against raw text).
    `name` says where the text comes from, for the error an empty text gives.
    `user_defined_symbols` are pieces kept whole (language tags, sentinels), each with its own
    id; `split_digits` makes every digit a piece of its own, so that a number is written digit by
    digit (SentencePiece's option).
    """
    extra = {"user_defined_symbols": list(user_defined_symbols)} if user_defined_symbols else {}
    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    text = _Watched(sentences)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            normalization_rule_name=normalization,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=True,
            seed_sentencepiece_size=seed_sentencepiece_size,
            num_threads=threads,
            hard_vocab_limit=False,
            split_digits=split_digits,
            minloglevel=2,
            **extra,
        )
    except RuntimeError as error:
        # SentencePiece wraps an error raised while reading the text (a corpus error naming its
        # file and line) in its own "INTERNAL: ..."; the original says what to fix.
        if text.error is not None:
            raise text.error from None
        if text.count == 0:
            raise EmptyTextError(
                f"{name}: no text to train the SentencePiece vocabulary on"
            ) from None
        needed = re.search(
            r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", str(error)
        )
        if needed:
            raise UsageError(
                f"{name}: data.vocab_size {needed[1]} is smaller than the {needed[2]} characters (and special "
                f"pieces) the text needs at character_coverage {character_coverage}: raise data.vocab_size or "
                "lower data.character_coverage"
            ) from None
        raise
    if text.count == 0:  # only blank lines: SentencePiece builds a model of nothing
        raise EmptyTextError(f"{name}: no text to train the SentencePiece vocabulary on")
    return SentencePieceVocab(model.getvalue())


class EmptyTextError(ValueError):
    """No sentence to train a vocabulary on."""


class _Watched:
    """The sentences, counted, with the error that reading them raised kept."""

    def __init__(self, sentences: Iterable[str]) -> None:
        self.sentences, self.count, self.error = iter(sentences), 0, None

    def __iter__(self) -> Iterator[str]:
        try:
            for sentence in self.sentences:
                self.count += bool(sentence.strip())
                yield sentence
        except Exception as error:
            self.error = error
            raise


@dataclass
class Vocabularies:
    """Source and target vocabularies; with a joint model both are the same object."""

    source: SentencePieceVocab
    target: SentencePieceVocab

    @property
    def joint(self) -> bool:
        return self.source is self.target

    def state(self) -> dict[str, bytes]:
        """Checkpoint form: plain bytes, loadable with `torch.load(weights_only=True)`."""
        if self.joint:
            return {"joint": self.source.model_bytes}
        return {"source": self.source.model_bytes, "target": self.target.model_bytes}

    @classmethod
    def from_state(cls, state: dict[str, bytes]) -> Vocabularies:
        if "joint" in state:
            joint = SentencePieceVocab(state["joint"])
            return cls(joint, joint)
        return cls(SentencePieceVocab(state["source"]), SentencePieceVocab(state["target"]))

    @classmethod
    def train(
        cls,
        pairs: Iterable[tuple[str, str]] | Callable[[], Iterable[tuple[str, str]]],
        vocab_size: int,
        model_type: ModelType = "unigram",
        joint: bool = True,
        name: str = "the training text",
        character_coverage: float = 1.0,
        tags: Iterable[str] = (),
        sentinels: Iterable[str] = (),
        split_digits: bool = False,
    ) -> Vocabularies:
        """A joint model sees source and target text together: one id space for both.

        `pairs` may be a function returning a fresh stream, so a corpus larger than memory
        is read once per model trained (SentencePiece samples at most `max_sentences`).
        `tags` (language tags of a many-to-many model) become pieces of their own; they need
        one joint model. `character_coverage` below 1 maps the rarest characters to UNK (CJK
        text wants about 0.9995). `sentinels` (`translate.text.protected.SENTINEL_PIECES`) become
        pieces of their own on both sides; `split_digits` as `train_sentencepiece`.
        """
        read = pairs if callable(pairs) else lambda: pairs
        settings = {
            "name": name,
            "character_coverage": character_coverage,
            "split_digits": split_digits,
        }
        if joint:
            vocab = train_sentencepiece(
                _both_sides(read()),
                vocab_size,
                model_type,
                user_defined_symbols=[*tags, *sentinels],
                **settings,
            )
            return cls(vocab, vocab)
        if tags:
            raise ValueError("language tags need one joint vocabulary (joint_vocab: true)")
        settings["user_defined_symbols"] = list(sentinels)
        return cls(
            train_sentencepiece((src for src, _ in read()), vocab_size, model_type, **settings),
            train_sentencepiece((tgt for _, tgt in read()), vocab_size, model_type, **settings),
        )


def _both_sides(pairs: Iterable[tuple[str, str]]) -> Iterator[str]:
    for src, tgt in pairs:
        yield src
        yield tgt
