"""translate-train's `LightningDataModule`: a run's prepared data (`prepared.py`) handed to
Lightning as loaders: this rank's token-budget batches of each split (`token_batches.py`, or by
direction and temperature, `directions.py`), padded (`collate.py`), the training loader
resumable mid-epoch (`resumable.py`).
"""

from __future__ import annotations

import logging
from functools import partial

import lightning as L
import numpy as np
from torch.utils.data import DataLoader, Sampler

from translate.text.corpus import CorpusFormat
from translate.text.languages import TagPosition
from translate.text.run_data import RunData
from translate.text.vocab import ModelType, Vocabularies
from translate.text.vocab_overlap import PieceUse
from translate.train.collate import PaddedRank, collate, collate_unscored
from translate.train.directions import TemperatureBatchSampler
from translate.train.prepared import DataSettings, PreparedData
from translate.train.resumable import ResumableLoader
from translate.train.token_batches import (
    BatchShapeMode,
    BatchShapes,
    TokenBatchSampler,
    padding_share,
)

log = logging.getLogger(__name__)


class TranslationDataModule(L.LightningDataModule):
    """Parallel text in a directory: `{split}.{lang}` file pairs, `{split}.tsv` or `{split}.jsonl`
    (each optionally gzipped); or, with `corpus_format: hf`, a Hugging Face dataset named by
    `corpus_dir` (hub name with `hf_config`, or a `save_to_disk` directory).

    The data itself (the vocabulary, trained or loaded at construction; the encoded splits) is
    `prepared.PreparedData`; this module hands it to Lightning: this rank's batches of each
    split, padded (`collate.py`), the training loader resumable mid-epoch (`resumable.py`).

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
        vocab_from: take the SentencePiece vocabulary of this checkpoint instead of training
            one (set by `--init_from`).
        mix_corpus: a corpus (read in corpus_format) whose training pairs are mixed into the
            training split (with `--init_from` and mix_share, the checkpoint's own corpus).
        mix_share: the share of mix_corpus's training pairs mixed in (0: none), chosen by a
            hash of the source, the same on every run.
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
        vocab_from: str | None = None,
        mix_corpus: str | None = None,
        mix_share: float = 0.0,
    ) -> None:
        super().__init__()
        self.prepared = PreparedData(
            DataSettings(
                corpus_dir=corpus_dir,
                corpus_format=corpus_format,
                hf_config=hf_config,
                hf_streaming=hf_streaming,
                src_lang=src_lang,
                tgt_lang=tgt_lang,
                train_split=train_split,
                dev_split=dev_split,
                test_split=test_split,
                vocab_size=vocab_size,
                vocab_type=vocab_type,
                joint_vocab=joint_vocab,
                max_tokens=max_tokens,
                max_length=max_length,
                max_length_ratio=max_length_ratio,
                dev_max_sentences=dev_max_sentences,
                cache_dir=cache_dir,
                encode_workers=encode_workers,
                seed=seed,
                languages=languages,
                directions=directions,
                lang_tag=lang_tag,
                temperature=temperature,
                character_coverage=character_coverage,
                loader_workers=loader_workers,
                protect_spans=protect_spans,
                split_digits=split_digits,
                batch_shapes=batch_shapes,
                vocab_from=vocab_from,
                mix_corpus=mix_corpus,
                mix_share=mix_share,
            )
        )

    # --- the prepared data, as the model and the command read it ---------------------------
    @property
    def vocab(self) -> Vocabularies:
        return self.prepared.vocab

    @property
    def run_data(self) -> RunData:
        return self.prepared.run_data

    @property
    def datasets(self) -> dict:
        return self.prepared.datasets

    @property
    def piece_use(self) -> PieceUse | None:
        return self.prepared.piece_use

    def target_tokens(self) -> list[int]:
        return self.prepared.target_tokens()

    def target_tokens_by_language(self) -> dict[str, list[int]]:
        return self.prepared.target_tokens_by_language()

    def padded_lengths(self, split: str) -> np.ndarray:
        return self.prepared.padded_lengths(split)

    def training_shapes(self, on_gpu: bool) -> BatchShapes | None:
        return self.prepared.training_shapes(on_gpu)

    # --- Lightning's hooks ---------------------------------------------------------------
    def setup(self, stage: str) -> None:
        self.prepared.prepare(stage)

    def _sampler(self, split: str, shuffle: bool, shapes: BatchShapes | None = None) -> Sampler:
        """This rank's batches: training shards are equal in number, evaluation shards disjoint
        and complete (no padding samples, so every sentence is scored exactly once). A
        many-to-many model's training batches are drawn by direction (`TemperatureBatchSampler`).
        `shapes`: the fixed shapes each batch must fit."""
        rank, world = (
            (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)
        )
        lengths, settings = self.padded_lengths(split), self.prepared.settings
        if shuffle and self.run_data.many_to_many:
            bounds = self.datasets[split].offsets
            return TemperatureBatchSampler(
                [lengths[a:b] for a, b in zip(bounds[:-1], bounds[1:])],
                settings.max_tokens,
                settings.temperature,
                seed=settings.seed,
                rank=rank,
                world_size=world,
                shapes=shapes,
            )
        return TokenBatchSampler(
            lengths,
            settings.max_tokens,
            shuffle=shuffle,
            seed=settings.seed,
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
            num_workers=self.prepared.settings.loader_workers,
            persistent_workers=self.prepared.settings.loader_workers > 0,
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
