"""From parallel text to padded id batches: vocabulary (cached), encoding (cached), token-budget batches.

text --(corpus.py)--> pairs --(vocab.py)--> SentencePiece model
     --(encoded.py)--> memory-mapped ids --(TokenBatchSampler)--> padded batches
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Callable, Iterator
from functools import cached_property, partial
from itertools import chain, islice
from pathlib import Path
from typing import get_args

import lightning as L
import numpy as np
import torch
from filelock import FileLock
from torch.utils.data import DataLoader, Sampler

from translate.errors import UsageError
from translate.files import file_digest, write_atomic
from translate.model.padding import pad
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
from translate.text.vocab import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    EmptyTextError,
    ModelType,
    Vocabularies,
    language_tag,
)
from translate.text.vocab_overlap import PieceUse, ignored_pieces
from translate.train.directions import TaggedPairs, TemperatureBatchSampler
from translate.train.encoded import EncodedPairs, cached_encoding
from translate.train.resumable import ResumableBatchSampler
from translate.train.token_batches import (
    BatchShapeMode,
    BatchShapes,
    budget_batches,
    padding_share,
)

log = logging.getLogger(__name__)


class TokenBatchSampler(ResumableBatchSampler):
    """Batches of similar length whose padded size never exceeds `max_tokens` on either side.

    The batches are formed once (length-sorted, ties broken by the seed) and their order is
    reshuffled every epoch from `seed + epoch`, so a run is reproducible and `len()` is stable.
    Under DDP each rank takes every `world_size`-th batch.  For training every rank must get
    the same number (or one would wait on a collective the others never reach), so the largest
    batches are halved until the count divides evenly: the ranks' data stays disjoint and
    together covers every example, none dropped or repeated.  For evaluation the counts may
    differ, but batches are split until every rank has at least one where the data allows.

    The sampler is resumable (`resumable.ResumableBatchSampler`): a run stopped mid-epoch
    carries on with exactly the data it would have seen.

    `lengths` is an (N, 2) array-like of (source, target) lengths as they will be padded;
    `shapes`, fixed batch shapes that each batch must fit (`token_batches.BatchShapes`).
    """

    def __init__(
        self,
        lengths,
        max_tokens: int,
        shuffle: bool,
        seed: int = 1,
        rank: int = 0,
        world_size: int = 1,
        equal_per_rank: bool = True,
        shapes: BatchShapes | None = None,
    ) -> None:
        super().__init__()
        self.shuffle, self.seed = shuffle, seed
        self.rank, self.world_size, self.equal_per_rank = rank, world_size, equal_per_rank
        lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
        self.batches: list[np.ndarray] = budget_batches(lengths, max_tokens, seed, shapes)
        while equal_per_rank and len(self.batches) % world_size:
            if not self._split_largest():
                raise ValueError(
                    f"{len(lengths)} examples cannot give {world_size} ranks the same number of batches"
                )
        while not equal_per_rank and len(self.batches) < world_size and self._split_largest():
            pass

    def _split_largest(self) -> bool:
        """Halve the largest batch (both halves stay within the budget); False if none has two examples."""
        largest = max(range(len(self.batches)), key=lambda i: len(self.batches[i]), default=None)
        if largest is None or len(self.batches[largest]) < 2:
            return False
        half = len(self.batches[largest]) // 2
        self.batches[largest : largest + 1] = [
            self.batches[largest][:half],
            self.batches[largest][half:],
        ]
        return True

    def rank_batches(self) -> list[np.ndarray]:
        batches = list(self.batches)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(batches)
        return batches[self.rank :: self.world_size]

    def layout_size(self) -> int:
        return len(self.batches)

    def __len__(self) -> int:
        return len(self.rank_batches())


class ResumableLoader(DataLoader):
    """A DataLoader over a `TokenBatchSampler` that Lightning treats as stateful.

    Lightning keeps a loader's `state_dict()` in every checkpoint and hands it back through
    `load_state_dict` before iterating on resume; without it a run resumed mid-epoch would start
    that epoch again.  The position is the trainer's count of batches used (`consumed`), not what
    the loader has produced, which runs ahead by the prefetched batches.
    """

    consumed: Callable[[], int] | None = None

    def state_dict(self) -> dict:
        return self.batch_sampler.state_dict(self.consumed() if self.consumed is not None else 0)

    def load_state_dict(self, state: dict) -> None:
        self.batch_sampler.load_state_dict(state)


def _to_shape(ids: torch.Tensor, rows: int, length: int, first: int | None) -> torch.Tensor:
    """`ids` in a PAD-filled (rows, length) tensor; the rows added begin with `first`, if any."""
    out = torch.full((rows, length), PAD_ID, dtype=ids.dtype)
    out[: ids.shape[0], : ids.shape[1]] = ids
    if first is not None:
        out[ids.shape[0] :, 0] = first
    return out


def collate(
    examples: list[tuple], tag_position: TagPosition = "source", shapes: BatchShapes | None = None
) -> dict:
    """Pad a list of examples: source ends in EOS; the decoder reads BOS+y and predicts y+EOS.

    An example is (source ids, target ids, reference or None[, tag id]). A many-to-many
    example's target-language tag goes before the source (`tag_position` "source") or takes
    BOS's place as the decoder's first token ("decoder").
    `tgt_tokens` (the predicted tokens, EOS included) is counted here, on the host, so the loss
    normalisation never waits on the device for it. With `shapes`, each side is padded to its
    fixed length and the rows to the shape's (`BatchShapes.sides`): the rows added read EOS and
    predict nothing (their targets are PAD, which the loss leaves out), so the loss is the
    examples' own.
    """
    sources = [example[0] for example in examples]
    targets = [example[1] for example in examples]
    tags = [example[3] if len(example) > 3 else None for example in examples]
    if tag_position == "source" and any(tag is not None for tag in tags):
        sources = [
            np.concatenate([[tag], src]) if tag is not None else src
            for tag, src in zip(tags, sources)
        ]
    batch = {
        "src": pad(sources, after=EOS_ID),
        "tgt_in": pad(targets, before=BOS_ID),
        "tgt_out": pad(targets, after=EOS_ID),
        "tgt_tokens": sum(len(tgt) + 1 for tgt in targets),
    }
    if tag_position == "decoder":
        for row, tag in enumerate(tags):
            if tag is not None:
                batch["tgt_in"][row, 0] = tag
    if shapes is not None:
        rows, source, target = shapes.sides(batch["src"].shape[1], batch["tgt_in"].shape[1])
        batch["src"] = _to_shape(batch["src"], rows, source, EOS_ID)
        batch["tgt_in"] = _to_shape(batch["tgt_in"], rows, target, BOS_ID)
        batch["tgt_out"] = _to_shape(batch["tgt_out"], rows, target, None)
    if examples and examples[0][2] is not None:
        batch["references"] = [example[2] for example in examples]
    return batch


class PaddedRank(torch.utils.data.Dataset):
    """An evaluation split seen by a rank that has no sentence of its own (fewer dev sentences
    than ranks): position `len(dataset)` is a copy of sentence 0 marked not to be scored. The
    rank still runs validation, and so takes part in the metrics' collectives instead of leaving
    the others waiting for it."""

    def __init__(self, dataset: EncodedPairs) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset) + 1

    def __getitem__(self, position: int):
        return self.dataset[position % len(self.dataset)]


def collate_unscored(examples: list, tag_position: TagPosition = "source") -> dict:
    return {**collate(examples, tag_position), "scored": False}


class TranslationDataModule(L.LightningDataModule):
    """Parallel text in a directory: `{split}.{lang}` file pairs, `{split}.tsv` or `{split}.jsonl`
    (each optionally gzipped); or, with `corpus_format: hf`, a Hugging Face dataset named by
    `corpus_dir` (hub name with `hf_config`, or a `save_to_disk` directory).

    The vocabulary is trained (or loaded from the cache) at construction, because the model's
    shape depends on it.  The training split is encoded once into memory-mapped id arrays
    (`encoded.py`), keyed by the corpus and the SentencePiece model, so a corpus of millions of
    pairs never sits in Python lists; dev and test are small and are kept in memory with their
    reference text.  File locks let the processes of one node share the work.

    Args:
        corpus_dir: directory of the corpus (default: the bundled English-German LibreOffice
            help), or with corpus_format hf a dataset name or save_to_disk directory.
        corpus_format: text ({split}.{lang} file pairs), tsv, jsonl or hf.
        hf_config: the Hugging Face dataset's config, e.g. de-en.
        hf_streaming: stream a hub dataset instead of downloading it whole.
        src_lang: source language code (file suffix or translation key).
        tgt_lang: target language code.
        train_split: name of the training split.
        dev_split: name of the validation split.
        test_split: name of the test split.
        vocab_size: SentencePiece vocabulary size.
        vocab_type: SentencePiece model type.
        joint_vocab: one vocabulary over both languages (needed by tie_embeddings src_tgt and all).
        max_tokens: padded tokens per batch (the longer side x sentences), per device.
        max_length: longest training sentence in tokens; longer pairs are dropped (and counted).
        max_length_ratio: longest allowed length ratio of a training pair (pairs of up to 5 tokens
            exempt).
        dev_max_sentences: validate on the first N dev sentences only (all if unset).
        cache_dir: where the SentencePiece model and encoded ids are cached.
        encode_workers: processes that encode the training split (default: CPUs, at most 8).
        seed: seed of batch order and tie-breaking.
        languages: a many-to-many model of these languages: every direction between src_lang
            (the pivot) and each of them, unless `directions` lists others.
        directions: a many-to-many model of these (source, target) directions, e.g.
            [[en, de], [de, en], [en, ja]]; each target language gets a tag <2xx>. A third item
            names the direction's own corpus directory (read in corpus_format), so bilingual
            corpora combine: [[en, de, /data/wmt14], [en, ja, /data/kftt]].
        lang_tag: where the target-language tag goes: first decoder token in place of BOS
            (decoder; better in a measured comparison, docs/training.md) or first source token (source).
        temperature: directions are drawn with probability proportional to pairs ** (1/T).
        character_coverage: share of characters the SentencePiece model covers (CJK: 0.9995).
        loader_workers: processes that assemble training batches (0: the training process);
            batches go to a GPU through pinned memory.
    """

    def __init__(
        self,
        corpus_dir: str | None = None,
        corpus_format: CorpusFormat = "text",
        hf_config: str | None = None,
        hf_streaming: bool = False,
        src_lang: str = "en",
        tgt_lang: str = "de",
        train_split: str = "train",
        dev_split: str = "dev",
        test_split: str = "test",
        vocab_size: int = 8000,
        vocab_type: ModelType = "unigram",
        joint_vocab: bool = True,
        max_tokens: int = 4096,
        max_length: int = 256,
        max_length_ratio: float = 3.0,
        dev_max_sentences: int | None = None,
        cache_dir: str = ".cache/translate",
        encode_workers: int | None = None,
        seed: int = 1,
        languages: list[str] | None = None,
        directions: list[tuple[str, str] | tuple[str, str, str]] | None = None,
        lang_tag: TagPosition = "decoder",
        temperature: float = 5.0,
        character_coverage: float = 1.0,
        loader_workers: int = 0,
        protect_spans: float = 0.0,
        split_digits: bool = False,
        batch_shapes: BatchShapeMode = "exact",
    ) -> None:
        super().__init__()
        if lang_tag not in ("source", "decoder"):
            raise UsageError(f"data.lang_tag must be 'source' or 'decoder', got {lang_tag!r}")
        self.run_data = RunData.from_settings(
            {
                "corpus_dir": corpus_dir,
                "corpus_format": corpus_format,
                "hf_config": hf_config,
                "src_lang": src_lang,
                "tgt_lang": tgt_lang,
                "train_split": train_split,
                "dev_split": dev_split,
                "test_split": test_split,
                "languages": languages,
                "directions": directions,
                "lang_tag": lang_tag,
                "max_length": max_length,
                "protect_spans": protect_spans,
            }
        )
        self.hf_streaming = hf_streaming
        if self.run_data.many_to_many and not joint_vocab:
            raise UsageError(
                "a many-to-many model (data.languages or data.directions) needs one joint "
                "vocabulary: data.joint_vocab true"
            )
        self.temperature, self.character_coverage = temperature, character_coverage
        self.loader_workers = loader_workers
        if not 0.0 <= protect_spans <= 1.0:
            raise UsageError(
                f"data.protect_spans must be a share from 0 to 1 (of training pairs whose "
                f"protected spans become sentinels), got {protect_spans!r}"
            )
        self.protect_spans, self.split_digits = protect_spans, split_digits
        if batch_shapes not in get_args(BatchShapeMode):
            raise UsageError(
                f"data.batch_shapes must be one of {', '.join(get_args(BatchShapeMode))}, "
                f"got {batch_shapes!r}"
            )
        self.batch_shapes = batch_shapes
        self.vocab_size, self.vocab_type, self.joint_vocab = vocab_size, vocab_type, joint_vocab
        self.max_tokens, self.max_length, self.max_length_ratio = (
            max_tokens,
            max_length,
            max_length_ratio,
        )
        self.dev_max_sentences = dev_max_sentences
        self.cache_dir, self.encode_workers, self.seed = Path(cache_dir), encode_workers, seed
        self.datasets: dict[str, EncodedPairs] = {}
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
        or of all of them one after another."""
        return chain.from_iterable(
            iter_split(
                self.run_data.corpus_of(d),
                self.run_data.splits[split],
                *d,
                self.run_data.corpus_format,
                self.run_data.hf_config,
                self.hf_streaming,
            )
            for d in ([direction] if direction else self.run_data.directions)
        )

    def training_pairs(self, direction: Direction | None = None) -> Iterator[tuple[str, str]]:
        """The train split's pairs as the model learns them: with `protect_spans`, that share of
        them (chosen by a hash of the source) with the spans both sides keep as sentinels
        (`protected.mask_pair`), so that the model learns to copy sentinels and still sees
        numbers and names as they are written."""
        pairs = self.pairs("train", direction)
        if not self.protect_spans:
            return pairs
        return (
            mask_pair(src, tgt) if hash_share(src) < self.protect_spans else (src, tgt)
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
        if self.run_data.corpus_format != "hf":
            return file_digest(*self.files(split))
        if self.hf_streaming:
            return f"hf-stream:{self.run_data.corpus}:{self.run_data.hf_config}:{self.run_data.splits[split]}"
        dataset = load_hf_dataset(
            str(self.run_data.corpus), self.run_data.splits[split], self.run_data.hf_config
        )
        return f"hf:{dataset._fingerprint}"

    def _load_or_train_vocab(self) -> Vocabularies:
        sharing = "joint" if self.joint_vocab else "separate"
        data = self.run_data
        settings = (
            f"{data.languages}-{data.corpus_format}-{self.vocab_size}-{self.vocab_type}-{sharing}"
        )
        tags = (
            [language_tag(lang) for lang in dict.fromkeys(t for _, t in self.run_data.directions)]
            if self.run_data.many_to_many
            else []
        )
        if data.many_to_many or self.character_coverage != 1.0:
            corpora = sorted(data.own_corpora.items())
            settings += f"-{list(data.directions)}-{self.character_coverage}-{tags}-{corpora}"
        if self.protect_spans or self.split_digits:
            settings += f"-protect{self.protect_spans}-digits{self.split_digits}"
            settings += f"-masking{masking_rules()}" if self.protect_spans else ""
        key = hashlib.sha256(f"{self.fingerprint('train')}-{settings}".encode()).hexdigest()[:16]
        names = ["joint"] if self.joint_vocab else ["source", "target"]
        files = {name: self.cache_dir / f"spm-{key}-{name}.model" for name in names}
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.cache_dir / f"spm-{key}.lock"):
            if all(path.is_file() for path in files.values()):
                return Vocabularies.from_state({n: p.read_bytes() for n, p in files.items()})
            try:
                vocab = Vocabularies.train(
                    self.training_pairs,
                    self.vocab_size,
                    self.vocab_type,
                    self.joint_vocab,
                    name=self.describe("train"),
                    character_coverage=self.character_coverage,
                    tags=tags,
                    sentinels=SENTINEL_PIECES if self.protect_spans else (),
                    split_digits=self.split_digits,
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
        protect = f"-protect{self.protect_spans}-{masking_rules()}" if self.protect_spans else ""
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
            self.encode_workers,
            description=f"encoding {name}",
        )
        keep, report = filter_by_length(
            encoded.src_lengths(), encoded.tgt_lengths(), self.max_length, self.max_length_ratio
        )
        log.info(
            f"training data {self.run_data.corpus_of(direction)}"
            f"{' ' + direction_name(direction) if self.run_data.many_to_many else ''}: "
            f"{report}"
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
            islice(self.pairs(split, direction), self.dev_max_sentences if split == "dev" else None)
        )
        if not pairs:
            raise CorpusError(
                f"{self.describe(split, direction)}: the {self.run_data.splits[split]} split is empty; "
                f"there is nothing to {'validate' if split == 'dev' else 'test'} on"
            )
        src_ids = self.vocab.source.encode([src for src, _ in pairs])
        tgt_ids = self.vocab.target.encode([tgt for _, tgt in pairs])
        return EncodedPairs.from_lists(
            src_ids, tgt_ids, max_length=self.max_length, references=[tgt for _, tgt in pairs]
        )

    def setup(self, stage: str) -> None:
        wanted = {"fit": ["train", "dev"], "validate": ["dev"], "test": ["test"]}.get(stage, [])
        for split in wanted:
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
        if not self.joint_vocab:
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
            self.setup("fit")
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
        if self.batch_shapes == "exact" or (self.batch_shapes == "auto" and not on_gpu):
            return None
        return BatchShapes.for_lengths(self.max_tokens, int(self.padded_lengths("train").max()))

    def _sampler(self, split: str, shuffle: bool, shapes: BatchShapes | None = None) -> Sampler:
        """This rank's batches: training shards are equal in number, evaluation shards disjoint
        and complete (no padding samples, so every sentence is scored exactly once). A
        many-to-many model's training batches are drawn by direction (`TemperatureBatchSampler`).
        `shapes`: the fixed shapes each batch must fit."""
        rank, world = (
            (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)
        )
        lengths = self.padded_lengths(split)
        if shuffle and self.run_data.many_to_many:
            bounds = self.datasets[split].offsets
            return TemperatureBatchSampler(
                [lengths[a:b] for a, b in zip(bounds[:-1], bounds[1:])],
                self.max_tokens,
                self.temperature,
                seed=self.seed,
                rank=rank,
                world_size=world,
                shapes=shapes,
            )
        return TokenBatchSampler(
            lengths,
            self.max_tokens,
            shuffle=shuffle,
            seed=self.seed,
            rank=rank,
            world_size=world,
            equal_per_rank=shuffle,
            shapes=shapes,
        )

    def collate(self, examples: list) -> dict:
        return collate(examples, self.run_data.lang_tag)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        sampler = self._sampler(split, shuffle)
        if (
            len(sampler) == 0
            and len(self.datasets[split])
            and self.trainer is not None
            and self.trainer.world_size > 1
        ):
            # This rank has nothing to score, but must still take part in validation.
            return DataLoader(
                PaddedRank(self.datasets[split]),
                batch_sampler=[[len(self.datasets[split])]],
                collate_fn=partial(collate_unscored, tag_position=self.run_data.lang_tag),
            )
        return DataLoader(self.datasets[split], batch_sampler=sampler, collate_fn=self.collate)

    def _consumed_batches(self) -> int:
        """Batches of the current epoch the trainer has finished (or is finishing, when a
        checkpoint is written at the end of a batch): where a resumed epoch continues."""
        return self.trainer.fit_loop.epoch_loop.batch_progress.current.processed

    def train_dataloader(self) -> DataLoader:
        strategy = getattr(self.trainer, "strategy", None)
        on_gpu = strategy is not None and strategy.root_device.type == "cuda"
        shapes = self.training_shapes(on_gpu)
        sampler = self._sampler("train", True, shapes)
        if (self.trainer.global_rank if self.trainer else 0) == 0:
            log.info(self.describe_shapes(sampler, shapes))
        loader = ResumableLoader(
            self.datasets["train"],
            batch_sampler=sampler,
            collate_fn=partial(collate, tag_position=self.run_data.lang_tag, shapes=shapes),
            num_workers=self.loader_workers,
            persistent_workers=self.loader_workers > 0,
            pin_memory=on_gpu,
        )
        if self.trainer is not None:
            loader.consumed = self._consumed_batches
        return loader

    def describe_shapes(self, sampler: Sampler, shapes: BatchShapes | None) -> str:
        """One line: the training batches' shapes and the share of their positions padded."""
        lengths = self.padded_lengths("train")
        batches = sampler.batches  # a many-to-many model's: one list a direction
        if batches and isinstance(batches[0], list):
            batches = [batch for part in batches for batch in part]
        padded = padding_share(lengths, batches, shapes)
        if shapes is None:
            return (
                f"batch shapes exact (each batch as long as its longest pair; "
                f"{padded:.1%} of positions padding; data.batch_shapes fixed pads to a few shapes)"
            )
        return (
            f"batch shapes fixed ({len(shapes.lengths)} lengths from {shapes.lengths[0]} to "
            f"{shapes.lengths[-1]} tokens for each side, max_tokens // length rows; {padded:.1%} "
            f"of positions padding, {padding_share(lengths, batches):.1%} exact)"
        )

    def val_dataloader(self) -> DataLoader:
        return self._loader("dev", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
