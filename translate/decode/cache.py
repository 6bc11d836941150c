"""The decoder's key/value cache during search: per decoder layer, the cached self-attention steps
and the encoder's keys and values, each in blocks of consecutive decoder rows (the cohorts of
sentences that joined a search at one step). The model's attention reads a layer through
`attend_steps` and `attend_encoder` (`translate.model.transformer.CachedLayer`), block by block
(`attend_blocks`); the search reorders, selects and merges blocks here."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from translate.model.transformer import MultiHeadAttention, Transformer


def append_steps(cached: Tensor, new: Tensor, rows: Tensor | None) -> Tensor:
    """The cache's rows `rows` (all, in order, when None) with the new steps after them: a
    reordering deferred to the next append costs one copy with it instead of two."""
    if rows is None:
        return torch.cat([cached, new], dim=2)
    _, heads, length, dim = cached.shape
    out = cached.new_empty(rows.numel(), heads, length + new.shape[2], dim)
    torch.index_select(cached, 0, rows, out=out[:, :, :length])
    out[:, :, length:] = new
    return out


@dataclass(eq=False)
class KVBlock:
    """Keys and values, (rows, heads, positions, head dim), of `size` consecutive decoder rows in
    one attention layer; `mask` (broadcast to (size, heads, 1, positions)) hides some keys.
    Self-attention's steps are appended; the encoder's (cross-attention) are set once, one row
    per sentence, which that sentence's beams share."""

    size: int
    k: Tensor | None = None
    v: Tensor | None = None
    mask: Tensor | None = None
    pending_rows: Tensor | None = None  # a reordering of the rows, applied with the next append

    @property
    def width(self) -> int:
        """Positions cached (0 before the first step)."""
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """The new steps' keys and values after those cached (reordered as pending); stored
        contiguous, or every later step's attention would copy the cache first (measured faster
        than writing into a preallocated buffer)."""
        if self.k is not None:
            rows, self.pending_rows = self.pending_rows, None
            k, v = append_steps(self.k, k, rows), append_steps(self.v, v, rows)
        self.k, self.v = k.contiguous(), v.contiguous()
        return self.k, self.v

    def reorder(self, rows: Tensor) -> None:
        """Keep rows `rows` (indexes into the current rows, in their new order) from the next
        step on; applied with that step's append (before the first, there is nothing to move)."""
        if self.k is not None:
            self.pending_rows = (
                rows if self.pending_rows is None else self.pending_rows.index_select(0, rows)
            )
        self.size = rows.numel()

    def select(self, index: Tensor, size: int) -> None:
        """Keep key rows `index` now (the encoder's rows of the sentences still searched), which
        serve `size` decoder rows."""
        self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)
        if self.mask is not None:
            self.mask = self.mask.index_select(0, index)
        self.size = size

    def keep_last(self, positions: int) -> None:
        """Drop cached positions before the last `positions` (no row of the block sees them)."""
        if self.width > positions:
            self.k, self.v = self.k[:, :, -positions:], self.v[:, :, -positions:]

    def resolved(self) -> tuple[Tensor, Tensor]:
        """The keys and values with the pending reordering applied."""
        if self.pending_rows is None:
            return self.k, self.v
        return self.k.index_select(0, self.pending_rows), self.v.index_select(0, self.pending_rows)

    def absorb_steps(self, younger: KVBlock) -> None:
        """`younger`'s rows after these (which have cached steps) in one self-attention block,
        its cached steps aligned at the end (the positions before its own are masked by the search)."""
        if younger.k is None:  # joined at this step: no cached steps yet
            empty = self.k.new_zeros(younger.size, self.k.shape[1], 0, self.k.shape[3])
            theirs = (empty, empty)
        else:
            theirs = younger.resolved()
        shift = self.width - (0 if younger.k is None else younger.width)
        ours = self.resolved()
        self.k, self.v = (
            torch.cat([mine, F.pad(their, (0, 0, shift, 0))]) for mine, their in zip(ours, theirs)
        )
        self.pending_rows, self.size = None, self.size + younger.size

    def absorb_encoder(self, other: KVBlock) -> None:
        """`other`'s sentences after these in one cross-attention block: the encoder's keys and
        values padded to the longer source, the padding masked."""
        width = max(self.width, other.width)
        self.k, self.v = (
            torch.cat([F.pad(part, (0, 0, 0, width - part.shape[2])) for part in pair])
            for pair in ((self.k, other.k), (self.v, other.v))
        )
        self.mask = torch.cat(
            [
                F.pad(part.mask, (0, width - part.mask.shape[-1]), value=False)
                for part in (self, other)
            ]
        )
        self.size += other.size


def attend_blocks(
    attention: MultiHeadAttention, q: Tensor, query: Tensor, blocks: list[KVBlock], static_kv: bool
) -> Tensor:
    """New steps of rows that come in consecutive blocks with caches of their own: block i holds
    `size` query rows and their keys and values (with `static_kv` the encoder's, one row per
    sentence; else its cached steps, which the new steps join) and a `mask` where some keys are
    hidden (source padding; cached steps of other rows' sentences). Several new steps after
    cached ones see them causally, aligned at the end."""
    if not static_kv:
        new_k, new_v = attention.keys_values(query)
    outputs, start, length = [], 0, q.shape[2]
    for block in blocks:
        end = start + block.size
        mask = block.mask
        if static_kv:
            k, v = block.k, block.v
        else:
            k, v = block.append(new_k[start:end], new_v[start:end])
            if length > 1:
                causal = torch.ones(length, k.shape[2], dtype=torch.bool, device=q.device)
                causal = causal.tril(k.shape[2] - length)
                mask = causal if mask is None else mask & causal
        outputs.append(attention.attend(q[start:end], k, v, mask, is_causal=False, cached=True))
        start = end
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs)


@dataclass(eq=False)
class LayerCache:
    """One decoder layer's blocks: `steps` (self-attention) and `encoder` (cross-attention),
    one of each per cohort, oldest first."""

    steps: list[KVBlock] = field(default_factory=list)
    encoder: list[KVBlock] = field(default_factory=list)

    def attend_steps(self, attention: MultiHeadAttention, q: Tensor, query: Tensor) -> Tensor:
        return attend_blocks(attention, q, query, self.steps, static_kv=False)

    def attend_encoder(self, attention: MultiHeadAttention, q: Tensor, query: Tensor) -> Tensor:
        return attend_blocks(attention, q, query, self.encoder, static_kv=True)


@dataclass(eq=False)
class SearchCache:
    """Every decoder layer's `LayerCache`."""

    layers: list[LayerCache]

    @classmethod
    def empty(cls, model: Transformer) -> SearchCache:
        return cls([LayerCache() for _ in model.decoder_layers])

    @classmethod
    def for_batch(
        cls, model: Transformer, memory: Tensor, src_mask: Tensor, rows: int
    ) -> SearchCache:
        """One cohort: `rows` decoder rows over the encoder's `memory` (one row per sentence, which
        its rows share) with its `src_mask`."""
        cache = cls.empty(model)
        cache.add_cohort(model.cross_keys_values(memory), src_mask, rows)
        return cache

    def add_cohort(self, encoder: list[tuple[Tensor, Tensor]], src_mask: Tensor, rows: int) -> None:
        """A new cohort of `rows` decoder rows, with each layer's encoder keys and values."""
        for layer, (k, v) in zip(self.layers, encoder):
            layer.steps.append(KVBlock(rows))
            layer.encoder.append(KVBlock(rows, k, v, src_mask))

    def join_last_cohort(
        self, encoder: list[tuple[Tensor, Tensor]], src_mask: Tensor, rows: int
    ) -> None:
        """`rows` more decoder rows in the newest cohort, which has no cached steps yet."""
        for layer, (k, v) in zip(self.layers, encoder):
            layer.steps[-1].size += rows
            layer.encoder[-1].absorb_encoder(KVBlock(rows, k, v, src_mask))

    def cohort_steps(self, index: int) -> list[KVBlock]:
        """Cohort `index`'s self-attention block in every layer."""
        return [layer.steps[index] for layer in self.layers]

    def cohort_encoder(self, index: int) -> list[KVBlock]:
        """Cohort `index`'s cross-attention block in every layer."""
        return [layer.encoder[index] for layer in self.layers]

    def keep_cohorts(self, kept: list[int]) -> None:
        for layer in self.layers:
            layer.steps = [layer.steps[c] for c in kept]
            layer.encoder = [layer.encoder[c] for c in kept]

    def merge(self, index: int) -> None:
        """Cohorts `index` and `index + 1` as one."""
        for layer in self.layers:
            layer.steps[index].absorb_steps(layer.steps.pop(index + 1))
            layer.encoder[index].absorb_encoder(layer.encoder.pop(index + 1))

    def reorder(self, rows: Tensor, sentences: Tensor | None) -> None:
        """A one-cohort cache's decoder rows `rows` kept (reordered) from the next step on, and
        where `sentences` is given, the encoder's rows of those sentences."""
        for layer in self.layers:
            (steps,), (encoder,) = layer.steps, layer.encoder
            steps.reorder(rows)
            if sentences is not None:
                encoder.select(sentences, rows.numel())
            else:
                encoder.size = rows.numel()
