"""Attention's kernels for decoding on the CPU, where a few new queries meet the cache: plain
matmul-softmax-matmul (`attend_step`), and the values summed row by row (`weighted_values`),
each with its measurement in docs/benchmarks.md and the plain product as its fallback."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


class ValueRows:
    """0, 1, 2, ... grown on demand and kept: `weighted_values`' row indexes, one table per
    attention module (no state shared across modules or left at module level)."""

    def __init__(self) -> None:
        self.table = torch.arange(0)

    def first(self, count: int) -> Tensor:
        table = self.table  # this call's own reference: another thread may grow the shared one
        if table.numel() < count:
            with torch.inference_mode(False):  # a plain tensor, usable outside inference mode too
                table = self.table = torch.arange(max(count, 2 * table.numel()))
        return table[:count]


def attend_step(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, value_rows: ValueRows | None = None
) -> Tensor:
    """Attention written out for incremental decoding, where a few queries meet the cache:
    on the CPU plain matmul-softmax-matmul beats `scaled_dot_product_attention` there.  Used
    in float32 only; in bf16/fp16 the fused kernel's float accumulation is kept."""
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(q.shape[-1] ** -0.5)
    if mask is not None:
        scores = scores.masked_fill_(~mask, float("-inf"))
    return weighted_values(scores.softmax(dim=-1), v, value_rows)


def weighted_values(weights: Tensor, v: Tensor, value_rows: ValueRows | None = None) -> Tensor:
    """`weights @ v` for (B, H, L, T) attention weights over (B, H, T, D) cached values.

    On the CPU each query's output is a weighted sum of T value rows, which `F.embedding_bag`
    computes reading each row once; the batched product's matrix-vector kernel reads the cache
    at a third of a plain read's speed (docs/benchmarks.md, "Attention over the decoding cache").
    `value_rows` keeps the row indexes between calls (else they are made for this call)."""
    batch, heads, length, steps = weights.shape
    if not v.is_cpu or not v.is_contiguous() or weights.dtype != v.dtype:
        return torch.matmul(weights, v)
    cached_rows = batch * heads * steps
    positions = (value_rows or ValueRows()).first(cached_rows)
    rows = positions.view(batch * heads, 1, steps)  # bag (b, h, l): v[b, h]'s rows
    rows = (
        rows.view(-1, steps) if length == 1 else rows.expand(-1, length, steps).reshape(-1, steps)
    )
    out = F.embedding_bag(
        rows, v.view(-1, v.shape[-1]), mode="sum", per_sample_weights=weights.reshape(-1, steps)
    )
    return out.view(batch, heads, length, v.shape[-1])
