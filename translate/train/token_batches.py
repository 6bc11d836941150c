"""Token-budget batches: pairs sorted by length, cut greedily so no batch's padded size exceeds
the budget (the longer side times the number of pairs); with `BatchShapes`, each batch padded to
one of a few fixed shapes, so that a step compiled or captured for a shape is met again; and
`TokenBatchSampler`, a rank's share of them in an order reshuffled every epoch."""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from translate.train.resumable import ResumableBatchSampler

# data.batch_shapes: fixed shapes, each batch as long as its longest pair (the default), or
# fixed on a GPU only.
BatchShapeMode = Literal["auto", "fixed", "exact"]

# Fixed shapes' padded lengths: every multiple of LENGTH_QUANTUM up to LENGTH_LINEAR_UP_TO, then
# steps of about LENGTH_GROWTH (rounded up to the quantum), so that a sentence pads by at most
# a quantum or about a fifth of its length.
LENGTH_QUANTUM = 8
LENGTH_LINEAR_UP_TO = 64
LENGTH_GROWTH = 1.25


def length_steps(longest: int) -> tuple[int, ...]:
    """The padded lengths a batch may take, the last of them at least `longest`."""
    lengths = [LENGTH_QUANTUM]
    while lengths[-1] < longest:
        length = lengths[-1]
        grown = length + LENGTH_QUANTUM
        if length >= LENGTH_LINEAR_UP_TO:
            grown = -(-int(length * LENGTH_GROWTH) // LENGTH_QUANTUM) * LENGTH_QUANTUM
        lengths.append(grown)
    return tuple(lengths)


@dataclass(frozen=True)
class BatchShapes:
    """Fixed batch shapes under a token budget: a batch whose longest side (as padded) is n
    takes `max_tokens // length` rows (at least one), `length` the first of `lengths` at least
    n; each side is padded to the first of `lengths` at least its own longest (a German target
    need not make its English source as long). Rows it lacks are filled with pairs that the loss
    does not count (`train.collate.collate`)."""

    max_tokens: int
    lengths: tuple[int, ...]

    @classmethod
    def for_lengths(cls, max_tokens: int, longest: int) -> BatchShapes:
        return cls(max_tokens, length_steps(longest))

    def length(self, longest: int) -> int:
        index = bisect.bisect_left(self.lengths, longest)
        if index == len(self.lengths):
            raise ValueError(f"no batch shape holds {longest} tokens (at most {self.lengths[-1]})")
        return self.lengths[index]

    def rows(self, length: int) -> int:
        return max(1, self.max_tokens // length)

    def shape(self, longest: int) -> tuple[int, int]:
        """(rows, length) of a batch whose longest side is `longest`."""
        length = self.length(longest)
        return self.rows(length), length

    def sides(self, source: int, target: int) -> tuple[int, int, int]:
        """(rows, source length, target length) of a batch whose longest source and target
        are `source` and `target` long: the rows of the longer side's shape."""
        return self.shape(max(source, target))[0], self.length(source), self.length(target)


def budget_bounds(
    longest_sorted: np.ndarray, fits: Callable[[int, int], bool]
) -> Iterator[tuple[int, int]]:
    """Greedy cut of a length-sorted sequence: each batch as long as `fits(longest, count)`."""
    start, longest = 0, 0
    for position, length in enumerate(longest_sorted.tolist()):
        candidate = max(longest, length)
        if position > start and not fits(candidate, position - start + 1):
            yield start, position
            start, candidate = position, length
        longest = candidate
    if start < len(longest_sorted):
        yield start, len(longest_sorted)


def budget_batches(
    lengths: np.ndarray, max_tokens: int, seed: int, shapes: BatchShapes | None = None
) -> list[np.ndarray]:
    """Batches (arrays of example indices) of an (N, 2) array of (source, target) lengths as
    padded: sorted by target then source length, ties broken by a seeded shuffle; each holds at
    most `max_tokens` padded positions, or with `shapes` at most the rows of its shape."""
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    longest = lengths.max(axis=1) if len(lengths) else np.zeros(0, np.int64)
    too_long = np.flatnonzero(longest > max_tokens)
    if len(too_long):
        raise ValueError(
            f"{len(too_long)} examples are longer than max_tokens={max_tokens} "
            f"(first: example {too_long[0]}, {longest[too_long[0]]} tokens)"
        )
    tiebreak = np.random.default_rng(seed).random(len(lengths))
    order = np.lexsort((tiebreak, lengths[:, 0], lengths[:, 1]))

    def fits(longest: int, count: int) -> bool:
        if shapes is None:
            return longest * count <= max_tokens
        return count <= shapes.rows(shapes.length(longest))

    return [order[a:b] for a, b in budget_bounds(longest[order], fits)]


def padding_share(
    lengths: np.ndarray, batches: list[np.ndarray], shapes: BatchShapes | None = None
) -> float:
    """The share of the batches' positions (source and target, as padded: each side to the
    batch's longest of that side, or to that side's fixed length with the shape's rows filled)
    that hold padding."""
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    real, positions = 0, 0
    for batch in batches:
        longest = lengths[batch].max(axis=0)
        if shapes is None:
            positions += len(batch) * int(longest.sum())
        else:
            rows, source, target = shapes.sides(int(longest[0]), int(longest[1]))
            positions += rows * (source + target)
        real += int(lengths[batch].sum())
    return 1 - real / positions if positions else 0.0


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
