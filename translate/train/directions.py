"""Many-to-many training data: translation directions, their language tags, and batches drawn
from the directions by temperature.

A many-to-many model learns every direction at once; a tag `<2xx>` (a piece of the joint
vocabulary) tells it which language to write, either as the first source token (Johnson et
al. 2017) or as the decoder's first token in place of BOS (fairseq's `--decoder-langtok`).
Directions with more data would dominate a plain mixture, so each batch's direction is drawn
with probability proportional to (pairs of that direction) ** (1 / T): T = 1 follows the data,
larger T flattens it towards uniform (T = 5 is the multilingual literature's usual choice).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from translate.train.resumable import ResumableBatchSampler
from translate.train.token_batches import BatchShapes, budget_batches


def sampling_probabilities(sizes: Sequence[int], temperature: float) -> np.ndarray:
    """Per direction, (size / total) ** (1 / T), normalised."""
    if temperature <= 0:
        raise ValueError(f"the sampling temperature must be positive, got {temperature}")
    sizes = np.asarray(sizes, dtype=np.float64)
    weights = np.where(sizes > 0, (sizes / sizes.sum()) ** (1.0 / temperature), 0.0)
    return weights / weights.sum()


class TaggedPairs(torch.utils.data.Dataset):
    """Several directions' encoded pairs as one dataset: item i is (source ids, target ids,
    reference, tag id of the target language), the parts one after another."""

    def __init__(self, parts: Sequence, tags: Sequence[int]) -> None:
        self.parts, self.tags = list(parts), list(tags)
        self.offsets = np.cumsum([0] + [len(part) for part in self.parts])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, index: int):
        part = int(np.searchsorted(self.offsets, index, side="right")) - 1
        src, tgt, reference = self.parts[part][index - int(self.offsets[part])]
        return src, tgt, reference, self.tags[part]

    def part_lengths(self, part: int) -> np.ndarray:
        """(pairs, 2) source and target lengths of one direction."""
        return np.stack([self.parts[part].src_lengths(), self.parts[part].tgt_lengths()], axis=1)


class TemperatureBatchSampler(ResumableBatchSampler):
    """Batches of one direction each, the direction of every batch drawn by temperature.

    Each direction's batches are formed once (length-sorted, within the token budget); each
    direction is a stream of its batches, reshuffled on every pass through them. An epoch is
    as many draws as there are batches in all (rounded down to a multiple of the ranks): each
    draw picks a direction by `sampling_probabilities` and takes the next batch of its
    stream. The draws of epoch e come from (seed, e) alone, so where every stream stands at
    the start of an epoch is recomputed, never stored: the order is reproducible, and a run
    resumed mid-epoch continues it exactly. Under DDP rank r takes draws r, r + W, ...: equal
    counts, disjoint batches within a pass.
    """

    def __init__(
        self,
        part_lengths: Sequence[np.ndarray],
        max_tokens: int,
        temperature: float,
        seed: int = 1,
        rank: int = 0,
        world_size: int = 1,
        shapes: BatchShapes | None = None,
    ) -> None:
        super().__init__()
        self.seed, self.rank, self.world_size = seed, rank, world_size
        offsets = np.cumsum([0] + [len(lengths) for lengths in part_lengths])
        self.batches = [
            [batch + offsets[part] for batch in budget_batches(lengths, max_tokens, seed, shapes)]
            for part, lengths in enumerate(part_lengths)
        ]
        self.probabilities = sampling_probabilities(
            [len(lengths) for lengths in part_lengths], temperature
        )
        total = sum(len(batches) for batches in self.batches)
        self.draws = total - total % world_size
        if self.draws == 0:
            raise ValueError(f"{total} batches cannot give {world_size} ranks one each")

    def _epoch_draws(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, epoch])
        return rng.choice(len(self.batches), size=self.draws, p=self.probabilities)

    def _stream(self, part: int, start: int, count: int) -> list[np.ndarray]:
        """Batches start .. start + count of a direction's stream (one shuffle per pass)."""
        batches, out = self.batches[part], []
        for position in range(start, start + count):
            cycle, index = divmod(position, len(batches))
            if index == 0 or not out:
                order = np.random.default_rng([self.seed, part, cycle]).permutation(len(batches))
            out.append(batches[order[index]])
        return out

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """Every rank's batches of `epoch`, in draw order."""
        used = np.zeros(len(self.batches), dtype=np.int64)
        for earlier in range(epoch):
            used += np.bincount(self._epoch_draws(earlier), minlength=len(self.batches))
        draws = self._epoch_draws(epoch)
        streams = {
            part: iter(self._stream(part, int(used[part]), int((draws == part).sum())))
            for part in range(len(self.batches))
        }
        return [next(streams[int(part)]) for part in draws]

    def rank_batches(self) -> list[np.ndarray]:
        return self.epoch_batches(self.epoch)[self.rank :: self.world_size]

    def layout_size(self) -> int:
        return self.draws

    def __len__(self) -> int:
        return self.draws // self.world_size
