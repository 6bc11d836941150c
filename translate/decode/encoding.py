"""A batch of sources encoded in groups of like lengths (`encode_by_length`), so that the encoder
does not work on the padding of an unsorted batch (a server's, or sentences joining a search)."""

from __future__ import annotations

import torch
from torch import Tensor

from translate.model.transformer import Transformer

# What one more encoder call costs, in padded source tokens of work (its fixed cost on the CPU):
# a split into length groups must save more padding than its calls cost.
ENCODE_CALL_TOKENS = 16


def length_groups(lengths: list[int], call_tokens: int = ENCODE_CALL_TOKENS) -> list[list[int]]:
    """Row indexes grouped by length so that encoding group by group pads least: of the splits
    of the length-sorted rows, the one with the least `call_tokens` + rows x longest summed over
    its groups (dynamic programming over the distinct lengths); one group where no split
    costs less."""
    whole = call_tokens + len(lengths) * max(lengths, default=0)
    if call_tokens + sum(lengths) >= whole:  # no padding: no split could cost less
        return [list(range(len(lengths)))]
    distinct = sorted(set(lengths))
    below = [sum(length < value for length in lengths) for value in distinct] + [len(lengths)]
    # best[j]: least cost of the rows shorter than distinct[j]; their last group starts at distinct[cut[j]].
    best, cut = [0] * (len(distinct) + 1), [0] * (len(distinct) + 1)
    for j in range(1, len(distinct) + 1):
        best[j], cut[j] = min(
            (best[i] + call_tokens + (below[j] - below[i]) * distinct[j - 1], i) for i in range(j)
        )
    if best[-1] >= whole:
        return [list(range(len(lengths)))]
    groups, j = [], len(distinct)
    while j:
        low, high = distinct[cut[j]], distinct[j - 1]
        groups.append([row for row, length in enumerate(lengths) if low <= length <= high])
        j = cut[j]
    return groups[::-1]


def encode_by_length(model: Transformer, src_ids: Tensor, src_mask: Tensor) -> Tensor:
    """`model.encode` of a (right-padded) batch, in length groups (`length_groups`) where its
    sources differ much in length (a server's unsorted batch), so that the encoder does not
    work on padding; what a padding position holds differs (the source mask hides it)."""
    # A GPU pads for almost nothing; one call launches fewest kernels.
    if src_ids.device.type != "cpu":
        return model.encode(src_ids, src_mask)
    lengths = src_mask[:, 0, 0].sum(dim=1).tolist()
    groups = length_groups(lengths)
    if len(groups) == 1:
        return model.encode(src_ids, src_mask)
    memory = None
    for group in groups:
        rows = torch.tensor(group, device=src_ids.device)
        width = max(lengths[row] for row in group)
        encoded = model.encode(src_ids[rows, :width], src_mask[rows, ..., :width])
        if memory is None:
            memory = encoded.new_zeros(*src_ids.shape, encoded.shape[-1])
        memory[rows, :width] = encoded
    return memory
