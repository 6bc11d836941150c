"""Greedy search over the model's incremental-decoding interface (encode once, cache keys/values)."""

from __future__ import annotations

import torch
from torch import Tensor

from translate.model import Transformer
from translate.vocab import BOS_ID, EOS_ID, PAD_ID


def max_output_lengths(src_ids: Tensor, max_len_a: float, max_len_b: int, limit: int) -> Tensor:
    """Per sentence: at most `a * source_length + b` output tokens (EOS included)."""
    src_lengths = (src_ids != PAD_ID).sum(dim=1)
    return (src_lengths * max_len_a + max_len_b).long().clamp(min=1, max=limit)


@torch.no_grad()
def greedy_search(
    model: Transformer, src_ids: Tensor, max_len_a: float = 1.5, max_len_b: int = 10
) -> list[list[int]]:
    """Most probable next token at each step, for a batch; returns ids without BOS/EOS."""
    src_mask = model.source_mask(src_ids, PAD_ID)
    memory = model.encode(src_ids, src_mask)
    max_lengths = max_output_lengths(src_ids, max_len_a, max_len_b, model.cfg.max_positions)
    batch = src_ids.shape[0]
    cache = model.new_cache()
    last = torch.full((batch, 1), BOS_ID, dtype=torch.long, device=src_ids.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src_ids.device)
    steps = []
    for step in range(int(max_lengths.max())):
        logits = model.decode(last, memory, src_mask, cache, offset=step)
        token = logits[:, -1].argmax(dim=-1)
        token = torch.where(step + 1 >= max_lengths, torch.full_like(token, EOS_ID), token)
        token = torch.where(finished, torch.full_like(token, PAD_ID), token)
        steps.append(token)
        finished |= token == EOS_ID
        if finished.all():
            break
        last = token[:, None]
    return [strip_special(row) for row in torch.stack(steps, dim=1).tolist()]


def strip_special(ids: list[int]) -> list[int]:
    """Tokens before the first EOS."""
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids
