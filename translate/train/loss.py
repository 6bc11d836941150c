"""The training loss: label-smoothed cross-entropy summed over the non-pad target tokens.

`label_smoothed_nll` takes the logits of every position, padding included. `projected_nll`
takes the decoder's states before the output projection instead: it drops the padded
positions first (the projection onto the vocabulary is the largest product of a small model,
and a token-budget batch holds some padding), then projects and scores `chunk` rows at a
time under activation checkpointing, so the full (tokens x vocabulary) logits never exist at
once: one chunk's are kept, the others recomputed in the backward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from translate.text.vocab import PAD_ID


def at_least_float32(tensor: torch.Tensor) -> torch.Tensor:
    """Half-precision logits scored in float32 (a softmax over the vocabulary loses too much in
    bf16); float64 kept as it is, so a float64 run is exact to float64."""
    return tensor.to(torch.promote_types(tensor.dtype, torch.float32))


def label_smoothed_nll(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float
) -> torch.Tensor:
    """Sum over non-pad target tokens of cross-entropy against (1 - e) one-hot + e uniform."""
    return F.cross_entropy(
        at_least_float32(logits.reshape(-1, logits.shape[-1])),
        target.reshape(-1),
        ignore_index=PAD_ID,
        label_smoothing=smoothing,
        reduction="sum",
    )


def _chunk_nll(
    states: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, smoothing: float
) -> torch.Tensor:
    return F.cross_entropy(
        at_least_float32(F.linear(states, weight)),
        target,
        label_smoothing=smoothing,
        reduction="sum",
    )


def projected_nll(
    states: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    smoothing: float,
    chunk: int | None = None,
) -> torch.Tensor:
    """`label_smoothed_nll(states @ weight.T, target, smoothing)` without the padded rows'
    logits, and with at most `chunk` rows' logits alive at once (None: all rows in one)."""
    keep = (target != PAD_ID).reshape(-1)
    states = states.reshape(-1, states.shape[-1])[keep]
    target = target.reshape(-1)[keep]
    if chunk is None or chunk >= len(target):
        return _chunk_nll(states, weight, target, smoothing)
    total = states.new_zeros((), dtype=torch.promote_types(states.dtype, torch.float32))
    for start in range(0, len(target), chunk):
        rows = slice(start, start + chunk)
        total = total + checkpoint(
            _chunk_nll, states[rows], weight, target[rows], smoothing, use_reentrant=False
        )
    return total


def batch_nll(
    model: torch.nn.Module, batch: dict, smoothing: float, chunk: int | None = None
) -> torch.Tensor:
    """A batch's summed loss under `model` (a `Transformer`): from the logits of every position
    (`chunk` None), or through `projected_nll` (`chunk` rows at a time; 0: all at once)."""
    if chunk is None:
        return label_smoothed_nll(
            model(batch["src"], batch["tgt_in"], PAD_ID), batch["tgt_out"], smoothing
        )
    states = model(batch["src"], batch["tgt_in"], PAD_ID, project=False)
    return projected_nll(states, model.output.weight, batch["tgt_out"], smoothing, chunk or None)
