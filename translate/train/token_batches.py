"""Token-budget batches: pairs sorted by length, cut greedily so no batch's padded size exceeds
the budget (the longer side times the number of pairs)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def budget_bounds(longest_sorted: np.ndarray, max_tokens: int) -> Iterator[tuple[int, int]]:
    """Greedy cut of a length-sorted sequence: each batch as long as its padded size fits."""
    start, longest = 0, 0
    for position, length in enumerate(longest_sorted.tolist()):
        candidate = max(longest, length)
        if position > start and candidate * (position - start + 1) > max_tokens:
            yield start, position
            start, candidate = position, length
        longest = candidate
    if start < len(longest_sorted):
        yield start, len(longest_sorted)


def budget_batches(lengths: np.ndarray, max_tokens: int, seed: int) -> list[np.ndarray]:
    """Batches (arrays of example indices) of an (N, 2) array of (source, target) lengths as
    padded: sorted by target then source length, ties broken by a seeded shuffle."""
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
    return [order[a:b] for a, b in budget_bounds(longest[order], max_tokens)]
