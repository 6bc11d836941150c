"""A run's data prepared for training, before any Lightning: the corpus's pairs, the vocabulary
(trained once and cached), each split encoded into ids (the training split memory-mapped from a
cache, `encoded.py`), what the training targets use, and the lengths that batches are cut by.

text --(corpus.py)--> pairs --(vocab.py)--> SentencePiece model
     --(encoded.py)--> memory-mapped ids --(token_batches.py)--> batches
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import cached_property, partial
from itertools import chain, islice
from pathlib import Path
from typing import get_args

import numpy as np
from filelock import FileLock

from translate.errors import UsageError
from translate.files import file_digest, write_atomic
from translate.text.corpus import (
    CorpusError,
    CorpusFormat,
    filter_by_length,
    iter_split,
    load_hf_dataset,
    split_files,
)
from translate.text.languages import Direction, TagPosition, direction_name
from translate.text.protected import SENTINEL_PIECES, hash_share, mask_pair, masking_rules
from translate.text.run_data import RunData
from translate.text.vocab import EmptyTextError, ModelType, Vocabularies, language_tag
from translate.text.vocab_coverage import describe as describe_coverage
from translate.text.vocab_coverage import pairs_coverage
from translate.text.vocab_overlap import PieceUse, ignored_pieces
from translate.train.directions import TaggedPairs
from translate.train.encoded import EncodedPairs, cached_encoding
from translate.train.starting import StartingPoint
from translate.train.token_batches import BatchShapeMode, BatchShapes

log = logging.getLogger(__name__)

# Pairs the vocabulary's coverage of a run started from a checkpoint is measured on.
COVERAGE_SAMPLE = 10_000
# Salt of the hash that chooses the pairs mixed in.
MIX_SALT = "mix\0"

# The splits each stage reads.
STAGE_SPLITS = {"fit": ("train", "dev"), "validate": ("dev",), "test": ("test",)}


@dataclass(frozen=True, kw_only=True)
class DataSettings:
    """The `data:` settings of a run, as `TranslationDataModule` takes them (its arguments say
    what each one means)."""

    corpus_dir: str | None
    corpus_format: CorpusFormat
    hf_config: str | None
    hf_streaming: bool
    src_lang: str
    tgt_lang: str
    train_split: str
    dev_split: str
    test_split: str
    vocab_size: int
    vocab_type: ModelType
    joint_vocab: bool
    max_tokens: int
    max_length: int
    max_length_ratio: float
    dev_max_sentences: int | None
    cache_dir: str
    encode_workers: int | None
    seed: int
    languages: list[str] | None
    directions: list[tuple[str, str] | tuple[str, str, str]] | None
    lang_tag: TagPosition
    temperature: float
    character_coverage: float
    loader_workers: int
    protect_spans: float
    split_digits: bool
    batch_shapes: BatchShapeMode
    vocab_from: str | None = None
    mix_corpus: str | None = None
    mix_share: float = 0.0


class PreparedData:
    """The data of one run: the vocabulary, trained (or loaded from the cache) at construction,
    because the model's shape depends on it; the splits encoded when a stage first needs them
    (`prepare`). The training split is encoded once into memory-mapped id arrays, keyed by the
    corpus and the SentencePiece model, so a corpus of millions of pairs never sits in Python
    lists; dev and test are small and are kept in memory with their reference text. File locks
    let the processes of one node share the work."""

    def __init__(self, settings: DataSettings) -> None:
        if settings.lang_tag not in ("source", "decoder"):
            raise UsageError(
                f"data.lang_tag must be 'source' or 'decoder', got {settings.lang_tag!r}"
            )
        self.settings = settings
        self.run_data = RunData.from_settings(asdict(settings))
        if self.run_data.many_to_many and not settings.joint_vocab:
            raise UsageError(
                "a many-to-many model (data.languages or data.directions) needs one joint "
                "vocabulary: data.joint_vocab true"
            )
        if not 0.0 <= settings.protect_spans <= 1.0:
            raise UsageError(
                f"data.protect_spans must be a share from 0 to 1 (of training pairs whose "
                f"protected spans become sentinels), got {settings.protect_spans!r}"
            )
        if settings.batch_shapes not in get_args(BatchShapeMode):
            raise UsageError(
                f"data.batch_shapes must be one of {', '.join(get_args(BatchShapeMode))}, "
                f"got {settings.batch_shapes!r}"
            )
        if not 0.0 <= settings.mix_share <= 1.0:
            raise UsageError(
                f"data.mix_share must be a share from 0 to 1 (of data.mix_corpus's training "
                f"pairs mixed in), got {settings.mix_share!r}"
            )
        if settings.mix_share and not settings.mix_corpus:
            raise UsageError(
                "data.mix_share needs the corpus to mix in: --data.mix_corpus DIR, or --init_from "
                "CKPT, whose own corpus it then is"
            )
        if settings.mix_share and self.run_data.many_to_many:
            raise UsageError(
                "data.mix_share mixes one direction's corpus; a many-to-many model names each "
                "direction's corpus in data.directions"
            )
        self.cache_dir = Path(settings.cache_dir)
        self.datasets: dict[str, EncodedPairs | TaggedPairs] = {}
        self.vocab = self._load_or_train_vocab()

    def files(self, split: str, direction: Direction | None = None) -> list[Path]:
        """The files of a split (of every direction, or of one)."""
        directions = [direction] if direction else self.run_data.directions
        files = [
            f
            for d in directions
            for f in split_files(
                self.run_data.corpus_of(d),
                self.run_data.splits[split],
                *d,
                self.run_data.corpus_format,
            )
        ]
        return list(dict.fromkeys(files))

    def describe(self, split: str, direction: Direction | None = None) -> str:
        """The split's files, or its dataset, as an error names them."""
        data = self.run_data
        if data.corpus_format == "hf":
            return f"dataset {str(data.corpus)!r} (config {data.hf_config!r}, split {data.splits[split]!r})"
        return " and ".join(map(str, self.files(split, direction)))

    def pairs(self, split: str, direction: Direction | None = None) -> Iterator[tuple[str, str]]:
        """A fresh stream of the split's pairs (read lazily: nothing is held): of one direction,
        or of all of them one after another; the training split followed by the pairs mixed
        in (`mixed_pairs`)."""
        own = self.own_pairs(split, direction)
        return (
            chain(own, self.mixed_pairs()) if split == "train" and self.settings.mix_share else own
        )

    def own_pairs(
        self, split: str, direction: Direction | None = None
    ) -> Iterator[tuple[str, str]]:
        """The split's pairs of the run's own corpus."""
        return chain.from_iterable(
            iter_split(
                self.run_data.corpus_of(d),
                self.run_data.splits[split],
                *d,
                self.run_data.corpus_format,
                self.run_data.hf_config,
                self.settings.hf_streaming,
            )
            for d in ([direction] if direction else self.run_data.directions)
        )

    def mixed_pairs(self) -> Iterator[tuple[str, str]]:
        """The share `mix_share` of `mix_corpus`'s training pairs, chosen by a hash of the
        source (salted, so the choice does not follow protect_spans' choice)."""
        share = self.settings.mix_share
        pairs = iter_split(
            self.settings.mix_corpus,
            self.run_data.splits["train"],
            *self.run_data.directions[0],
            self.run_data.corpus_format,
            self.run_data.hf_config,
            self.settings.hf_streaming,
        )
        return (pair for pair in pairs if hash_share(MIX_SALT + pair[0]) < share)

    def training_pairs(self, direction: Direction | None = None) -> Iterator[tuple[str, str]]:
        """The train split's pairs as the model learns them: with `protect_spans`, that share of
        them (chosen by a hash of the source) with the spans both sides keep as sentinels
        (`protected.mask_pair`), so that the model learns to copy sentinels and still sees
        numbers and names as they are written."""
        pairs = self.pairs("train", direction)
        if not self.settings.protect_spans:
            return pairs
        return (
            mask_pair(src, tgt) if hash_share(src) < self.settings.protect_spans else (src, tgt)
            for src, tgt in pairs
        )

    def tags(self) -> dict[str, int]:
        """A many-to-many model's target languages and their tag ids ({} for one direction)."""
        if not self.run_data.many_to_many:
            return {}
        return {
            lang: self.vocab.target.tag_id(lang)
            for lang in dict.fromkeys(t for _, t in self.run_data.directions)
        }

    def fingerprint(self, split: str) -> str:
        """What caches of a split are keyed on: its files' bytes, or the dataset's identity.

        A local dataset's `_fingerprint` changes with its content; a streamed hub dataset
        cannot be hashed without reading it, so its name, config and split stand for it.
        """
        mixed = self._mixed_fingerprint() if split == "train" else ""
        if self.run_data.corpus_format != "hf":
            return file_digest(*self.files(split)) + mixed
        if self.settings.hf_streaming:
            return f"hf-stream:{self.run_data.corpus}:{self.run_data.hf_config}:{self.run_data.splits[split]}{mixed}"
        dataset = load_hf_dataset(
            str(self.run_data.corpus), self.run_data.splits[split], self.run_data.hf_config
        )
        return f"hf:{dataset._fingerprint}{mixed}"

    def _mixed_fingerprint(self) -> str:
        """What the pairs mixed in add to the training split's fingerprint ('' for none)."""
        if not self.settings.mix_share:
            return ""
        corpus = self.settings.mix_corpus
        if self.run_data.corpus_format != "hf":
            train = self.run_data.splits["train"]
            direction = self.run_data.directions[0]
            corpus = file_digest(
                *split_files(corpus, train, *direction, self.run_data.corpus_format)
            )
        return f"-mix{self.settings.mix_share}-{corpus}"

    def _vocab_of_checkpoint(self) -> Vocabularies:
        """`vocab_from`'s vocabulary, with a line on how well it covers this run's training text
        (and pieces a word on the text it was trained on, where that corpus is at hand)."""
        start = StartingPoint.read(self.settings.vocab_from)
        vocab = start.vocabularies
        new = pairs_coverage(vocab, list(islice(self.own_pairs("train"), COVERAGE_SAMPLE)))
        theirs = RunData.from_settings(start.data)
        try:
            pairs = islice(
                iter_split(
                    theirs.corpus,
                    theirs.splits["train"],
                    *theirs.directions[0],
                    theirs.corpus_format,
                    theirs.hf_config,
                ),
                COVERAGE_SAMPLE,
            )
            original = pairs_coverage(vocab, list(pairs))
        except (CorpusError, IndexError, OSError):
            original = None
        log.info(
            f"vocabulary of {start.path} on {self.describe('train')} "
            f"(the first {COVERAGE_SAMPLE:,} pairs): {describe_coverage(new, original)}"
        )
        return vocab

    def _load_or_train_vocab(self) -> Vocabularies:
        settings = self.settings
        if settings.vocab_from:
            return self._vocab_of_checkpoint()
        sharing = "joint" if settings.joint_vocab else "separate"
        data = self.run_data
        keyed_on = (
            f"{data.languages}-{data.corpus_format}-{settings.vocab_size}-"
            f"{settings.vocab_type}-{sharing}"
        )
        tags = (
            [language_tag(lang) for lang in dict.fromkeys(t for _, t in self.run_data.directions)]
            if self.run_data.many_to_many
            else []
        )
        if data.many_to_many or settings.character_coverage != 1.0:
            corpora = sorted(data.own_corpora.items())
            keyed_on += f"-{list(data.directions)}-{settings.character_coverage}-{tags}-{corpora}"
        if settings.protect_spans or settings.split_digits:
            keyed_on += f"-protect{settings.protect_spans}-digits{settings.split_digits}"
            keyed_on += f"-masking{masking_rules()}" if settings.protect_spans else ""
        key = hashlib.sha256(f"{self.fingerprint('train')}-{keyed_on}".encode()).hexdigest()[:16]
        names = ["joint"] if settings.joint_vocab else ["source", "target"]
        files = {name: self.cache_dir / f"spm-{key}-{name}.model" for name in names}
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.cache_dir / f"spm-{key}.lock"):
            if all(path.is_file() for path in files.values()):
                return Vocabularies.from_state({n: p.read_bytes() for n, p in files.items()})
            try:
                vocab = Vocabularies.train(
                    self.training_pairs,
                    settings.vocab_size,
                    settings.vocab_type,
                    settings.joint_vocab,
                    name=self.describe("train"),
                    character_coverage=settings.character_coverage,
                    tags=tags,
                    sentinels=SENTINEL_PIECES if settings.protect_spans else (),
                    split_digits=settings.split_digits,
                )
            except EmptyTextError as error:
                raise CorpusError(
                    f"{error}: the {self.run_data.splits['train']} split is empty"
                ) from None
            for name, model_bytes in vocab.state().items():
                write_atomic(files[name], model_bytes)
            return vocab

    def _encode_train(self, direction: Direction) -> EncodedPairs:
        vocab_digest = hashlib.sha256(b"".join(self.vocab.state().values())).hexdigest()
        files = (
            self.fingerprint("train")
            if not self.run_data.many_to_many
            else file_digest(*self.files("train", direction))
        )
        protect = (
            f"-protect{self.settings.protect_spans}-{masking_rules()}"
            if self.settings.protect_spans
            else ""
        )
        key = hashlib.sha256(f"{files}-{direction}-{vocab_digest}{protect}".encode()).hexdigest()[
            :16
        ]
        name = self.run_data.splits["train"] + (
            f" {direction_name(direction)}" if self.run_data.many_to_many else ""
        )
        encoded = cached_encoding(
            key,
            self.training_pairs(direction),
            self.vocab,
            self.cache_dir,
            self.settings.encode_workers,
            description=f"encoding {name}",
        )
        keep, report = filter_by_length(
            encoded.src_lengths(),
            encoded.tgt_lengths(),
            self.settings.max_length,
            self.settings.max_length_ratio,
        )
        log.info(
            f"training data {self.run_data.corpus_of(direction)}"
            f"{' ' + direction_name(direction) if self.run_data.many_to_many else ''}: "
            f"{report}"
        )
        if self.settings.mix_share:
            mixed = sum(1 for _ in self.mixed_pairs())
            log.info(
                f"mixed in: {mixed:,} training pairs of {self.settings.mix_corpus} (data.mix_share "
                f"{self.settings.mix_share}), {100 * mixed / max(len(encoded), 1):.1f}% of the "
                "training pairs"
            )
        if not len(keep):
            raise CorpusError(
                f"{self.describe('train', direction)}: no training pair is left ({report}); "
                "check the files, or raise data.max_length or data.max_length_ratio"
            )
        return encoded.select(keep)

    def _encode_evaluation(self, split: str, direction: Direction) -> EncodedPairs:
        """Dev/test in memory with their references; sentences longer than the model can read
        are cut, never dropped, so every reference is scored."""
        pairs = list(
            islice(
                self.pairs(split, direction),
                self.settings.dev_max_sentences if split == "dev" else None,
            )
        )
        if not pairs:
            raise CorpusError(
                f"{self.describe(split, direction)}: the {self.run_data.splits[split]} split is empty; "
                f"there is nothing to {'validate' if split == 'dev' else 'test'} on"
            )
        src_ids = self.vocab.source.encode([src for src, _ in pairs])
        tgt_ids = self.vocab.target.encode([tgt for _, tgt in pairs])
        return EncodedPairs.from_lists(
            src_ids,
            tgt_ids,
            max_length=self.settings.max_length,
            references=[tgt for _, tgt in pairs],
        )

    def prepare(self, stage: str) -> None:
        """The splits `stage` reads (`STAGE_SPLITS`), encoded unless they already are."""
        for split in STAGE_SPLITS.get(stage, ()):
            if split in self.datasets:
                continue
            encode = (
                self._encode_train if split == "train" else partial(self._encode_evaluation, split)
            )
            parts = [encode(direction) for direction in self.run_data.directions]
            tags = self.tags()
            if self.run_data.many_to_many and None in tags.values():
                missing = [lang for lang, tag in tags.items() if tag is None]
                raise UsageError(
                    f"the vocabulary has no tag for {', '.join(missing)}: it was not trained "
                    "for these directions"
                )
            self.datasets[split] = (
                TaggedPairs(parts, [tags[t] for _, t in self.run_data.directions])
                if self.run_data.many_to_many
                else parts[0]
            )

    def target_tokens(self) -> list[int]:
        """Ids that occur on the target side of the training data (saved for restricted decoding)."""
        return sorted({i for ids in self.target_tokens_by_language().values() for i in ids})

    @cached_property
    def piece_use(self) -> PieceUse | None:
        """How often each piece occurs on each side of the training pairs (those the length
        filter kept), special pieces, tags and sentinels left out: what `tie_embeddings: auto`
        and `shared_rows` decide from (`translate.model.tying`). None with separate
        vocabularies, whose ids are no common space."""
        if not self.settings.joint_vocab:
            return None
        size = len(self.vocab.target)
        return PieceUse.from_counts(
            sum(part.source_token_counts(size) for part in self._train_parts()),
            sum(self._target_counts.values()),
            ignored_pieces(self.vocab.target, SENTINEL_PIECES),
        )

    def target_tokens_by_language(self) -> dict[str, list[int]]:
        """Per target language, the ids its training targets use."""
        return {lang: np.flatnonzero(count).tolist() for lang, count in self._target_counts.items()}

    @cached_property
    def _target_counts(self) -> dict[str, np.ndarray]:
        """Per target language, how often each id occurs on its training targets (counted once
        for both `piece_use` and `target_tokens_by_language`)."""
        counts: dict[str, np.ndarray] = {}
        for (_, tgt), part in zip(self.run_data.directions, self._train_parts()):
            counts[tgt] = counts.get(tgt, 0) + part.target_token_counts(len(self.vocab.target))
        return counts

    def _train_parts(self) -> list:
        """The training data, one part per direction (set up for fitting if it is not yet)."""
        if "train" not in self.datasets:
            self.prepare("fit")
        train = self.datasets["train"]
        return train.parts if self.run_data.many_to_many else [train]

    def padded_lengths(self, split: str) -> np.ndarray:
        """(examples, 2) lengths as padded: the source with EOS (and a source tag), the target
        with BOS or EOS."""
        data = self.datasets[split]
        parts = data.parts if self.run_data.many_to_many else [data]
        lengths = np.concatenate(
            [np.stack([p.src_lengths(), p.tgt_lengths()], axis=1) for p in parts]
        )
        return lengths + [
            1 + (self.run_data.many_to_many and self.run_data.lang_tag == "source"),
            1,
        ]

    def training_shapes(self, on_gpu: bool) -> BatchShapes | None:
        """The training batches' fixed shapes (`data.batch_shapes`: `fixed`, or `auto` on a
        GPU), or None (`exact`, the default: measured on a GPU, fixed shapes were no faster
        once every batch had been met, docs/benchmarks.md): each batch as long as its longest
        pair."""
        mode = self.settings.batch_shapes
        if mode == "exact" or (mode == "auto" and not on_gpu):
            return None
        return BatchShapes.for_lengths(
            self.settings.max_tokens, int(self.padded_lengths("train").max())
        )
