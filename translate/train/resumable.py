"""Where a batch sampler stands in its epoch, saved in a checkpoint and continued from it.

Both training samplers (`token_batches.TokenBatchSampler`, `directions.TemperatureBatchSampler`)
order an epoch's batches from their seed and the epoch alone, so their position is two
numbers: the epoch and how many of this rank's batches the trainer has used. This base class
keeps that position, writes it into the checkpoint and starts the next iteration after it;
`ResumableLoader` is the loader through which Lightning saves and restores it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np
from torch.utils.data import DataLoader, Sampler


class ResumableBatchSampler(Sampler[list[int]]):
    """A batch sampler whose epoch order follows from (seed, epoch), resumable mid-epoch.

    Subclasses set `seed` and `world_size`, call `__init__` here for the position, and
    give `rank_batches()` (this rank's batches of `self.epoch`, in order), `layout_size()`
    (how many batches all ranks share an epoch: with the seed and the rank count, what must
    match for the saved order to continue exactly) and `__len__`.
    """

    seed: int
    world_size: int

    def __init__(self) -> None:
        self.epoch, self._skip = 0, 0

    def rank_batches(self) -> list[np.ndarray]:
        raise NotImplementedError

    def layout_size(self) -> int:
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.rank_batches()[self._skip :]
        self._skip = 0  # only the first iteration after a resume starts inside the epoch
        return (batch.tolist() for batch in batches)

    def state_dict(self, consumed: int) -> dict:
        """The position after `consumed` of this epoch's batches: what a checkpoint must hold."""
        epoch = self.epoch
        if consumed >= len(self):
            epoch, consumed = epoch + 1, 0
        return {
            "epoch": epoch,
            "consumed": consumed,
            "world_size": self.world_size,
            "batches": self.layout_size(),
            "seed": self.seed,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue where `state` left off.  With another rank count or batch layout the exact
        order cannot be kept; the same share of the epoch is skipped instead, with a warning."""
        consumed = int(state["consumed"])
        saved = (state.get("world_size"), state.get("batches"), state.get("seed"))
        now = (self.world_size, self.layout_size(), self.seed)
        if saved != now:
            warnings.warn(
                f"resuming with a different data layout (ranks, batches, seed: {saved} in the "
                f"checkpoint, {now} now): the data order of the interrupted epoch cannot "
                "continue exactly; its consumed share is skipped",
                stacklevel=2,
            )
            consumed = consumed * int(state.get("world_size") or 1) // self.world_size
        self.epoch, self._skip = int(state["epoch"]), min(consumed, len(self))


class ResumableLoader(DataLoader):
    """A DataLoader over a `ResumableBatchSampler` that Lightning treats as stateful.

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
