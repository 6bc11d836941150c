"""Encoded corpora: SentencePiece ids in flat arrays, encoded once and memory-mapped from a cache.

A WMT-size corpus (4.5M pairs) never sits in Python lists.  Text streams in chunks to worker
processes that encode it; their ids are appended to two flat token files (one per side) with
an offsets array each, written into a temporary directory that is renamed into place only when
complete.  Training then reads them through `np.memmap`, so the resident memory of a run does
not grow with the corpus, and every later run (and every DDP rank) skips the encoding.

This module needs no torch: worker processes start fast and the arrays stay plain numpy.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import chain, islice
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import sentencepiece as spm
from filelock import FileLock
from tqdm import tqdm

from translate.parent_watch import exit_with_parent
from translate.text.vocab import Vocabularies

CACHE_FORMAT = 1  # bump when the files' layout changes, so old caches are not misread


class EncodedPairs:
    """Source and target ids of a corpus, as flat token arrays plus offsets.

    `index` selects (and orders) the pairs this view exposes, e.g. those kept by the length
    filter; `max_length` cuts every sequence on access (used for dev/test, where sentences are
    cut, never dropped); `references` holds the raw target text for BLEU where it is needed.
    """

    def __init__(
        self,
        src_tokens: np.ndarray,
        src_offsets: np.ndarray,
        tgt_tokens: np.ndarray,
        tgt_offsets: np.ndarray,
        index: np.ndarray | None = None,
        max_length: int | None = None,
        references: list[str] | None = None,
    ) -> None:
        self.src_tokens, self.src_offsets = src_tokens, src_offsets
        self.tgt_tokens, self.tgt_offsets = tgt_tokens, tgt_offsets
        self.index = np.arange(len(src_offsets) - 1) if index is None else np.asarray(index)
        self.max_length = max_length
        self.references = references

    @classmethod
    def from_lists(
        cls, src_ids: list[list[int]], tgt_ids: list[list[int]], **kwargs
    ) -> EncodedPairs:
        """An in-memory corpus (dev and test sets are small)."""
        src_tokens, src_offsets = _flatten(src_ids)
        tgt_tokens, tgt_offsets = _flatten(tgt_ids)
        return cls(src_tokens, src_offsets, tgt_tokens, tgt_offsets, **kwargs)

    @classmethod
    def open(cls, directory: str | Path) -> EncodedPairs:
        """Memory-map a cache directory written by `encode_to_directory`."""
        directory = Path(directory)
        meta = json.loads((directory / "meta.json").read_text())
        dtype = np.dtype(meta["dtype"])

        def tokens(name: str) -> np.ndarray:
            count = meta[f"{name}_tokens"]
            if count == 0:  # np.memmap cannot map an empty file
                return np.zeros(0, dtype=dtype)
            return np.memmap(directory / f"{name}.tokens", dtype=dtype, mode="r", shape=(count,))

        return cls(
            tokens("src"),
            np.load(directory / "src.offsets.npy", mmap_mode="r"),
            tokens("tgt"),
            np.load(directory / "tgt.offsets.npy", mmap_mode="r"),
        )

    def select(self, index: np.ndarray) -> EncodedPairs:
        """A view of some of these pairs (positions in this view), sharing the arrays."""
        return EncodedPairs(
            self.src_tokens,
            self.src_offsets,
            self.tgt_tokens,
            self.tgt_offsets,
            self.index[np.asarray(index)],
            self.max_length,
            self.references,
        )

    def truncated(self, max_length: int) -> EncodedPairs:
        return EncodedPairs(
            self.src_tokens,
            self.src_offsets,
            self.tgt_tokens,
            self.tgt_offsets,
            self.index,
            max_length,
            self.references,
        )

    def _lengths(self, offsets: np.ndarray) -> np.ndarray:
        lengths = (offsets[self.index + 1] - offsets[self.index]).astype(np.int64)
        return lengths if self.max_length is None else np.minimum(lengths, self.max_length)

    def src_lengths(self) -> np.ndarray:
        return self._lengths(self.src_offsets)

    def tgt_lengths(self) -> np.ndarray:
        return self._lengths(self.tgt_offsets)

    def target_token_counts(self, vocab_size: int) -> np.ndarray:
        """How often each id occurs on the target side of the pairs this view exposes (those
        the length filter kept, not every stored pair)."""
        return self._token_counts(self.tgt_tokens, self.tgt_offsets, vocab_size)

    def source_token_counts(self, vocab_size: int) -> np.ndarray:
        """The same for the source side."""
        return self._token_counts(self.src_tokens, self.src_offsets, vocab_size)

    def _token_counts(self, stored, offsets: np.ndarray, vocab_size: int) -> np.ndarray:
        tokens = np.asarray(stored)
        starts, ends = offsets[self.index], offsets[self.index + 1]
        # +1 where a kept pair's tokens start, -1 where they end: the running sum marks them.
        edges = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.add.at(edges, starts, 1)
        np.add.at(edges, ends, -1)
        return np.bincount(tokens[np.cumsum(edges[:-1]) > 0], minlength=vocab_size)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, position: int) -> tuple[np.ndarray, np.ndarray, str | None]:
        i = int(self.index[position])
        src = self.src_tokens[self.src_offsets[i] : self.src_offsets[i + 1]]
        tgt = self.tgt_tokens[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]
        if self.max_length is not None:
            src, tgt = src[: self.max_length], tgt[: self.max_length]
        reference = None if self.references is None else self.references[i]
        return src, tgt, reference


def _flatten(sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((t for s in sequences for t in s), dtype=np.int32, count=int(offsets[-1]))
    return flat, offsets


def token_dtype(vocab_size: int) -> np.dtype:
    """Two bytes an id where the vocabulary allows it: half the disk and page cache."""
    return np.dtype(np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32)


# --- encoding in worker processes ---------------------------------------------------------
_worker_models: dict[str, spm.SentencePieceProcessor] = {}


def _init_worker(model_bytes: dict[str, bytes]) -> None:
    for side, data in model_bytes.items():
        _worker_models[side] = spm.SentencePieceProcessor(model_proto=data)


def _start_worker(model_bytes: dict[str, bytes]) -> None:
    """A pool worker: it ends with the process encoding through it, even one killed outright."""
    exit_with_parent()
    _init_worker(model_bytes)


def _encode_chunk(chunk: tuple[list[str], list[str]], dtype: str) -> tuple[np.ndarray, ...]:
    """Ids and lengths of one chunk, as arrays: cheap to send back between processes."""
    result = []
    for side, texts in zip(("src", "tgt"), chunk):
        ids = _worker_models[side].encode(texts, out_type=int)
        result.append(np.fromiter((len(s) for s in ids), dtype=np.int64, count=len(ids)))
        result.append(
            np.fromiter((t for s in ids for t in s), dtype=dtype, count=int(result[-1].sum()))
        )
    return tuple(result)


def _chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[tuple[list[str], list[str]]]:
    iterator = iter(pairs)
    while chunk := list(islice(iterator, size)):
        yield [src for src, _ in chunk], [tgt for _, tgt in chunk]


def available_cpus() -> int:
    """CPUs this process may run on: its affinity where the platform has one (Linux), else all."""
    if hasattr(os, "sched_getaffinity"):  # not on macOS or Windows
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_workers() -> int:
    return max(1, min(available_cpus(), 8))


PARTIAL_MARK = ".partial-"  # a cache directory being written: NAME.partial-HOST-PID


def partial_name(directory: Path) -> Path:
    return directory.with_name(
        f"{directory.name}{PARTIAL_MARK}{socket.gethostname()}-{os.getpid()}"
    )


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except OSError:  # it exists, under another user
        return False
    return False


def remove_stale_partials(directory: Path) -> list[Path]:
    """Delete what encodings of `directory` killed before they could clean up left behind (a
    process killed with SIGKILL or by the out-of-memory killer runs no cleanup): those of this
    host whose process is gone. Another host's cannot be checked and are left alone, as is
    everything on platforms without a way to ask whether a process exists."""
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return []
    removed = []
    prefix = f"{directory.name}{PARTIAL_MARK}{socket.gethostname()}-"
    for path in directory.parent.glob(f"{glob.escape(prefix)}*"):
        pid = path.name[len(prefix) :]
        if pid.isdigit() and int(pid) != os.getpid() and _process_gone(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def encode_to_directory(
    pairs: Iterable[tuple[str, str]],
    vocab: Vocabularies,
    directory: str | Path,
    workers: int | None = None,
    chunk_size: int = 10_000,
    description: str = "encoding",
) -> EncodedPairs:
    """Encode a stream of pairs into `directory` (created atomically) and memory-map it.

    At most `2 * workers` chunks are in flight, so memory stays bounded however long the
    stream is; chunks are written in order, so pair i of the stream is pair i of the arrays.
    """
    directory = Path(directory)
    workers = default_workers() if workers is None else workers
    dtype = token_dtype(max(len(vocab.source), len(vocab.target)))
    partial = partial_name(directory)
    remove_stale_partials(directory)
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    models = {"src": vocab.source.model_bytes, "tgt": vocab.target.model_bytes}
    lengths: dict[str, list[np.ndarray]] = {"src": [], "tgt": []}
    bar = tqdm(unit=" pairs", unit_scale=True, desc=description, file=sys.stderr, mininterval=1.0)
    try:
        with (
            open(partial / "src.tokens", "wb") as src_out,
            open(partial / "tgt.tokens", "wb") as tgt_out,
        ):

            def write(result: tuple[np.ndarray, ...]) -> None:
                src_lengths, src_ids, tgt_lengths, tgt_ids = result
                src_out.write(src_ids.tobytes())
                tgt_out.write(tgt_ids.tobytes())
                lengths["src"].append(src_lengths)
                lengths["tgt"].append(tgt_lengths)
                bar.update(len(src_lengths))

            chunks = _chunks(pairs, chunk_size)
            first = list(islice(chunks, 2))
            if workers <= 1 or len(first) < 2:  # a corpus of one chunk is not worth a process pool
                _init_worker(models)
                for chunk in chain(first, chunks):
                    write(_encode_chunk(chunk, dtype.str))
            else:
                # An executor, not multiprocessing.Pool: a worker that dies (killed, out of memory,
                # a failed start) breaks it with an error, where Pool would wait forever.
                pool = ProcessPoolExecutor(workers, get_context("spawn"), _start_worker, (models,))
                try:
                    pending: deque = deque()
                    for chunk in chain(first, chunks):
                        pending.append(pool.submit(_encode_chunk, chunk, dtype.str))
                        if len(pending) >= 2 * workers:
                            write(pending.popleft().result())
                    while pending:
                        write(pending.popleft().result())
                except BrokenProcessPool as error:
                    raise RuntimeError(
                        f"{description}: a worker process encoding the corpus died ({error}). It was "
                        "killed or ran out of memory, or it could not start: workers are spawned and "
                        "import the main module, so a script that starts training at import needs "
                        '`if __name__ == "__main__":`. `data.encode_workers: 1` (`workers=1` here) encodes '
                        "without workers."
                    ) from error
                finally:
                    pool.shutdown(cancel_futures=True)
        meta = {"format": CACHE_FORMAT, "dtype": dtype.str, "pairs": 0}
        for side in ("src", "tgt"):
            side_lengths = np.concatenate(lengths[side]) if lengths[side] else np.zeros(0, np.int64)
            offsets = np.zeros(len(side_lengths) + 1, dtype=np.int64)
            np.cumsum(side_lengths, out=offsets[1:])
            np.save(partial / f"{side}.offsets.npy", offsets)
            meta[f"{side}_tokens"] = int(offsets[-1])
            meta["pairs"] = len(side_lengths)
        (partial / "meta.json").write_text(json.dumps(meta))
        shutil.rmtree(directory, ignore_errors=True)
        os.rename(partial, directory)
    except BaseException:  # an interrupted encoding leaves no cache that looks complete
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        bar.close()
    return EncodedPairs.open(directory)


def cached_encoding(
    key: str,
    pairs: Iterable[tuple[str, str]],
    vocab: Vocabularies,
    cache_dir: str | Path,
    workers: int | None = None,
    description: str = "encoding",
) -> EncodedPairs:
    """The encoded corpus for `key` (which must name both the corpus and the vocabulary):
    memory-mapped from the cache, or encoded now.  A file lock makes the processes of one node
    (DDP ranks) encode once and share the result.  `pairs` is consumed only on a miss."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    directory = cache_dir / f"ids-{key}"
    with FileLock(cache_dir / f"ids-{key}.lock"):
        meta = directory / "meta.json"
        if meta.is_file() and json.loads(meta.read_text()).get("format") == CACHE_FORMAT:
            return EncodedPairs.open(directory)
        return encode_to_directory(pairs, vocab, directory, workers, description=description)
