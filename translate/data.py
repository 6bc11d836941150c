"""From parallel text to padded id batches: vocabulary (cached), encoding, token-budget batches.

text --(corpus.py)--> pairs --(vocab.py)--> ids --(TokenBatchSampler)--> padded batches
"""

from __future__ import annotations

import fcntl
import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, Sampler

from translate.corpus import (
    BUNDLED_CORPUS, CorpusError, CorpusFormat, filter_training_pairs, read_split, split_files,
)
from translate.files import write_atomic
from translate.vocab import BOS_ID, EOS_ID, PAD_ID, ModelType, Vocabularies

Example = dict  # {"src": list[int], "tgt": list[int], "reference": str}


class TokenBatchSampler(Sampler[list[int]]):
    """Batches of similar length whose padded size never exceeds `max_tokens` on either side.

    The batches are formed once (length-sorted, ties broken by the seed) and their order is
    reshuffled every epoch from `seed + epoch`, so a run is reproducible and `len()` is stable.
    Under DDP each rank takes every `world_size`-th batch.  For training every rank must get
    the same number (or one would wait on a collective the others never reach), so the largest
    batches are halved until the count divides evenly: the ranks' data stays disjoint and
    together covers every example, none dropped or repeated.
    """

    def __init__(
        self,
        lengths: list[tuple[int, int]],
        max_tokens: int,
        shuffle: bool,
        seed: int = 1,
        rank: int = 0,
        world_size: int = 1,
        equal_per_rank: bool = True,
    ) -> None:
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.rank, self.world_size, self.equal_per_rank = rank, world_size, equal_per_rank
        too_long = [i for i, (s, t) in enumerate(lengths) if max(s, t) > max_tokens]
        if too_long:
            raise ValueError(
                f"{len(too_long)} examples are longer than max_tokens={max_tokens} "
                f"(first: example {too_long[0]}, {max(lengths[too_long[0]])} tokens)"
            )
        tiebreak = random.Random(seed)
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i][1], lengths[i][0], tiebreak.random()))
        self.batches: list[list[int]] = []
        batch: list[int] = []
        longest = 0
        for index in order:
            candidate = max(longest, *lengths[index])
            if batch and candidate * (len(batch) + 1) > max_tokens:
                self.batches.append(batch)
                batch, candidate = [], max(lengths[index])
            batch.append(index)
            longest = candidate
        if batch:
            self.batches.append(batch)
        while equal_per_rank and len(self.batches) % world_size:
            largest = max(range(len(self.batches)), key=lambda i: len(self.batches[i]))
            if len(self.batches[largest]) < 2:
                raise ValueError(
                    f"{len(lengths)} examples cannot give {world_size} ranks the same number of batches"
                )
            half = len(self.batches[largest]) // 2
            self.batches[largest : largest + 1] = [self.batches[largest][:half], self.batches[largest][half:]]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _rank_batches(self) -> list[list[int]]:
        batches = list(self.batches)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(batches)
        return batches[self.rank :: self.world_size]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._rank_batches())

    def __len__(self) -> int:
        return len(self._rank_batches())


def collate(examples: list[Example]) -> dict:
    """Pad a list of examples: source ends in EOS; the decoder reads BOS+y and predicts y+EOS."""
    src = [ex["src"] + [EOS_ID] for ex in examples]
    tgt_in = [[BOS_ID] + ex["tgt"] for ex in examples]
    tgt_out = [ex["tgt"] + [EOS_ID] for ex in examples]
    return {
        "src": pad(src),
        "tgt_in": pad(tgt_in),
        "tgt_out": pad(tgt_out),
        "references": [ex["reference"] for ex in examples],
    }


def pad(sequences: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(sequences), max(map(len, sequences))), PAD_ID, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
    return out


def file_digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        if not path.is_file():
            raise CorpusError(f"{path}: no such file")
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


class TranslationDataModule(L.LightningDataModule):
    """Parallel text in a directory: `{split}.{lang}` file pairs, `{split}.tsv` or `{split}.jsonl`
    (each optionally gzipped); or, with `corpus_format: hf`, a Hugging Face dataset named by
    `corpus_dir` (hub name with `hf_config`, or a `save_to_disk` directory).

    The vocabulary is trained (or loaded from the cache) at construction, because the model's
    shape depends on it; the cache key is the training text and the SentencePiece settings,
    and a file lock lets several processes of one node share the work.
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
        seed: int = 1,
    ) -> None:
        super().__init__()
        self.corpus_dir = Path(corpus_dir) if corpus_dir else BUNDLED_CORPUS
        self.corpus_format = corpus_format
        self.hf_config, self.hf_streaming = hf_config, hf_streaming
        self.langs = (src_lang, tgt_lang)
        self.splits = {"train": train_split, "dev": dev_split, "test": test_split}
        self.vocab_size, self.vocab_type, self.joint_vocab = vocab_size, vocab_type, joint_vocab
        self.max_tokens, self.max_length, self.max_length_ratio = max_tokens, max_length, max_length_ratio
        self.dev_max_sentences = dev_max_sentences
        self.cache_dir, self.seed = Path(cache_dir), seed
        self.datasets: dict[str, list[Example]] = {}
        self._read_once: dict[str, list[tuple[str, str]]] = {}  # pairs read for the vocabulary, reused by setup
        self.vocab = self._load_or_train_vocab()

    def files(self, split: str) -> list[Path]:
        return split_files(self.corpus_dir, self.splits[split], *self.langs, self.corpus_format)

    def read(self, split: str) -> list[tuple[str, str]]:
        """The split's pairs; a split already read while building the vocabulary is not read again."""
        if split in self._read_once:
            return self._read_once.pop(split)
        return read_split(self.corpus_dir, self.splits[split], *self.langs, self.corpus_format,
                          self.hf_config, self.hf_streaming)

    def _train_fingerprint(self) -> str:
        """What the vocabulary cache is keyed on: the training files, or a dataset's text."""
        if self.corpus_format == "hf":
            self._read_once["train"] = self.read("train")
            digest = hashlib.sha256()
            for src, tgt in self._read_once["train"]:
                digest.update(f"{src}\t{tgt}\n".encode())
            return digest.hexdigest()
        return file_digest(*self.files("train"))

    def _load_or_train_vocab(self) -> Vocabularies:
        settings = f"{self.langs}-{self.corpus_format}-{self.vocab_size}-{self.vocab_type}-{'joint' if self.joint_vocab else 'separate'}"
        digest = self._train_fingerprint()
        key = hashlib.sha256(f"{digest}-{settings}".encode()).hexdigest()[:16]
        names = ["joint"] if self.joint_vocab else ["source", "target"]
        files = {name: self.cache_dir / f"spm-{key}-{name}.model" for name in names}
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with open(self.cache_dir / f"spm-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if all(path.is_file() for path in files.values()):
                return Vocabularies.from_state({n: p.read_bytes() for n, p in files.items()})
            pairs = self.read("train")
            self._read_once["train"] = pairs
            vocab = Vocabularies.train(pairs, self.vocab_size, self.vocab_type, self.joint_vocab)
            for name, model_bytes in vocab.state().items():
                write_atomic(files[name], model_bytes)
            return vocab

    def _encode_split(self, split: str) -> list[Example]:
        pairs = self.read(split)
        if split == "dev" and self.dev_max_sentences:
            pairs = pairs[: self.dev_max_sentences]
        src_ids = self.vocab.source.encode([src for src, _ in pairs])
        tgt_ids = self.vocab.target.encode([tgt for _, tgt in pairs])
        examples = [
            {"src": s, "tgt": t, "reference": ref} for s, t, (_, ref) in zip(src_ids, tgt_ids, pairs)
        ]
        if split == "train":
            keep, report = filter_training_pairs(
                list(zip(src_ids, tgt_ids)), self.max_length, self.max_length_ratio
            )
            print(f"training data {self.corpus_dir}: {report}")
            examples = [examples[i] for i in keep]
        else:  # sentences longer than the model can read are cut, never dropped
            for ex in examples:
                ex["src"], ex["tgt"] = ex["src"][: self.max_length], ex["tgt"][: self.max_length]
        return examples

    def setup(self, stage: str) -> None:
        wanted = {"fit": ["train", "dev"], "validate": ["dev"], "test": ["test"]}.get(stage, [])
        for split in wanted:
            if split not in self.datasets:
                self.datasets[split] = self._encode_split(split)
        self._read_once.clear()  # text read for the vocabulary but not needed by this stage

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        examples = self.datasets[split]
        rank, world = (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)
        sampler = TokenBatchSampler(
            [(len(ex["src"]) + 1, len(ex["tgt"]) + 1) for ex in examples],
            self.max_tokens, shuffle=shuffle, seed=self.seed, rank=rank, world_size=world,
            equal_per_rank=shuffle,
        )
        return DataLoader(examples, batch_sampler=sampler, collate_fn=collate)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("dev", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
