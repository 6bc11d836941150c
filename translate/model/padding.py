"""Id sequences as one padded tensor: how training batches and translation batches are built."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from translate.text.vocab import PAD_ID


def pad(
    sequences: Sequence[Sequence[int]], before: int | None = None, after: int | None = None
) -> torch.Tensor:
    """A (batch, longest) tensor of ids, PAD-filled, with an optional id added before/after each."""
    extra = (before is not None) + (after is not None)
    out = np.full((len(sequences), max(map(len, sequences)) + extra), PAD_ID, dtype=np.int64)
    start = int(before is not None)
    for row, sequence in enumerate(sequences):
        if before is not None:
            out[row, 0] = before
        out[row, start : start + len(sequence)] = sequence
        if after is not None:
            out[row, start + len(sequence)] = after
    return torch.from_numpy(out)
