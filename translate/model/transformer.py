"""The encoder-decoder Transformer, with every embedding tie decided in one place.

Reading order: `ModelConfig` (the architecture), `TIE_MODES` (which matrices are one
Parameter), the attention and layer blocks, then `Transformer` with its two entry points
used by training (`forward`) and by search (`encode` + `decode` with a key/value cache).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import parametrize

from translate.model.cpu_attention import ValueRows, attend_step
from translate.model.sharing import embedding_adapter, reset_adapter, share_layers

TieMode = Literal["none", "decoder", "src_tgt", "all", "shared_rows"]


@dataclass(frozen=True)
class Ties:
    """Which places share one matrix under one `TieMode`."""

    src_tgt: bool  # encoder input = decoder input
    tgt_output: bool  # decoder input = pre-softmax projection
    # the pieces only the target side uses keep decoder-input and output rows of their own
    target_rows_apart: bool


# "all" is the three-way tie of Vaswani et al.; "shared_rows" the same, with target-only rows apart.
TIE_MODES: dict[str, Ties] = {
    "none": Ties(src_tgt=False, tgt_output=False, target_rows_apart=False),
    "decoder": Ties(src_tgt=False, tgt_output=True, target_rows_apart=False),
    "src_tgt": Ties(src_tgt=True, tgt_output=False, target_rows_apart=False),
    "all": Ties(src_tgt=True, tgt_output=True, target_rows_apart=False),
    "shared_rows": Ties(src_tgt=True, tgt_output=True, target_rows_apart=True),
}


@dataclass
class ModelConfig:
    """Architecture hyper-parameters; the single source of their defaults.

    Args:
        d_model: width of the model: embeddings, attention and residual stream.
        heads: attention heads (d_model must divide by it).
        encoder_layers: layers of the encoder.
        decoder_layers: layers of the decoder.
        ffn_dim: inner width of each feed-forward block.
        dropout: dropout on embeddings and residual branches.
        attention_dropout: dropout on attention weights.
        activation_dropout: dropout after the feed-forward activation.
        norm_first: pre-norm layers (stable at high learning rates) instead of post-norm.
        tie_embeddings: which embedding matrices are one parameter: none, decoder (decoder input =
            pre-softmax), src_tgt (encoder input = decoder input), all (three-way; needs one
            joint vocabulary), shared_rows (three-way, but the pieces only the target side of the
            training data uses get decoder-input and output rows of their own), or, in
            training, auto (chosen from the training data: `translate.model.tying`).
        max_positions: longest sequence the sinusoidal positions cover (data.max_length + 1 at least).
        share_layer_attention, share_encoder_decoder_layers, embedding_adapter: the tying
            study's sharing beyond the embeddings (`translate.model.sharing`).
    """

    d_model: int = 512
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    ffn_dim: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    norm_first: bool = False
    tie_embeddings: TieMode | Literal["auto"] = "all"
    max_positions: int = 1024
    share_layer_attention: bool = False
    share_encoder_decoder_layers: bool = False
    embedding_adapter: bool = False

    def __post_init__(self) -> None:
        if self.tie_embeddings not in TIE_MODES and self.tie_embeddings != "auto":
            raise ValueError(
                f"tie_embeddings must be one of {sorted([*TIE_MODES, 'auto'])}, "
                f"got {self.tie_embeddings!r}"
            )
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")


def sinusoidal_positions(length: int, dim: int, offset: int = 0) -> Tensor:
    """The fixed sin/cos position table of Vaswani et al. (sin on even, cos on odd dims)."""
    position = torch.arange(offset, offset + length, dtype=torch.float32).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class CachedLayer(Protocol):
    """What a search keeps for one decoder layer (`translate.decode.cache`), as attention reads
    it: the attention of the new steps' queries (`q`, split into heads; `query`, the states they
    come from) over the cached steps, which the new steps join, and over the encoder."""

    def attend_steps(self, attention: MultiHeadAttention, q: Tensor, query: Tensor) -> Tensor: ...

    def attend_encoder(self, attention: MultiHeadAttention, q: Tensor, query: Tensor) -> Tensor: ...


class DecoderCache(Protocol):
    layers: Sequence[CachedLayer]


class MultiHeadAttention(nn.Module):
    """Multi-head attention on `scaled_dot_product_attention`; in search, over cached rows
    (`blocks`: self-attention's steps, grown by each call, or the encoder's keys and values)."""

    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.value_rows = ValueRows()

    def _split(self, x: Tensor) -> Tensor:
        batch, length, dim = x.shape
        return x.view(batch, length, self.heads, dim // self.heads).transpose(1, 2)

    def _merge(self, x: Tensor) -> Tensor:
        """`_split` undone: (B, H, L, D) to (B, L, H * D)."""
        batch, heads, length, dim = x.shape
        return x.transpose(1, 2).reshape(batch, length, heads * dim)

    def keys_values(self, source: Tensor) -> tuple[Tensor, Tensor]:
        """The keys and values of `source`, split into heads."""
        return self._split(self.k_proj(source)), self._split(self.v_proj(source))

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None,
        mask: Tensor | None = None,
        causal: bool = False,
    ) -> Tensor:
        """`mask` is boolean, True where attention is allowed, broadcast to (B, H, Lq, Lk)."""
        q = self._split(self.q_proj(query))
        k, v = self.keys_values(query if key_value is None else key_value)
        # a branch, not `causal and length > 1`: where the length is symbolic (a step compiled
        # for every batch shape) the comparison is no bool, the branch guards it into one
        is_causal = False
        if causal and q.shape[2] > 1:
            is_causal = True
        return self.out_proj(self._merge(self.attend(q, k, v, mask, is_causal, cached=False)))

    def over_cache(self, query: Tensor, attend: Callable[..., Tensor]) -> Tensor:
        """New steps' attention through a search's cache: `attend(self, q, query)` (one of a
        `CachedLayer`'s) reads the cached keys and values and calls `attend` below on them."""
        q = self._split(self.q_proj(query))
        return self.out_proj(self._merge(attend(self, q, query)))

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, cached: bool
    ) -> Tensor:
        """Attention of (B, H, L, D) queries over keys and values with B or B / group rows."""
        batch, heads, length, dim = q.shape
        # `//` and `%`, not divmod: dynamo traces them on symbolic sizes (a step compiled once
        # for every batch shape)
        group, rest = batch // k.shape[0], batch % k.shape[0]
        if rest:
            raise ValueError(
                f"{batch} query rows cannot share {k.shape[0]} key rows: each key row "
                "serves the same whole number of consecutive query rows (a sentence's beams)"
            )
        if group > 1:  # `group` consecutive query rows share one key row (the beams of a sentence)
            q = (
                q.view(-1, group, heads, length, dim)
                .transpose(1, 2)
                .reshape(-1, heads, group * length, dim)
            )
        if cached and not is_causal and not self.training and q.dtype == torch.float32:
            out = attend_step(q, k, v, mask, self.value_rows)
        else:
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=mask,
                is_causal=is_causal,
                dropout_p=self.dropout if self.training else 0.0,
            )
        if group > 1:
            out = (
                out.view(-1, heads, group, length, dim)
                .transpose(1, 2)
                .reshape(batch, heads, length, dim)
            )
        return out


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, ffn_dim)
        self.linear2 = nn.Linear(ffn_dim, d_model)
        # A module, so that decoding can fuse it into linear1 (translate/model/packing.py).
        self.activation = nn.ReLU()
        self.activation_dropout = nn.Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.activation(self.linear1(x))
        # Dropout modules are skipped outside training: each call costs every decoding step.
        return self.linear2(self.activation_dropout(hidden) if self.training else hidden)


class Residual(nn.Module):
    """One sublayer with its residual connection, pre-norm or post-norm."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer) -> Tensor:
        if self.norm_first:
            out = sublayer(self.norm(x))
            return x + (self.dropout(out) if self.training else out)
        out = sublayer(x)
        return self.norm(x + (self.dropout(out) if self.training else out))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.attn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        x = self.attn_block(x, lambda h: self.self_attn(h, None, mask=src_mask))
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.self_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.cross_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        src_mask: Tensor | None,
        cache: CachedLayer | None = None,
    ) -> Tensor:
        if cache is None:
            x = self.self_block(x, lambda h: self.self_attn(h, None, causal=True))
            x = self.cross_block(x, lambda h: self.cross_attn(h, memory, mask=src_mask))
        else:
            x = self.self_block(x, lambda h: self.self_attn.over_cache(h, cache.attend_steps))
            x = self.cross_block(x, lambda h: self.cross_attn.over_cache(h, cache.attend_encoder))
        return self.ffn_block(x, self.ffn)


class TargetRows(nn.Module):
    """A parametrization of a tied matrix (`torch.nn.utils.parametrize`): the rows `ids` replaced
    by rows of their own. Under `shared_rows` tying the decoder's input embedding and the output
    projection are each the three-way tied matrix with the rows of the pieces only the target
    side uses replaced, so those pieces have an input row and an output row apart while every
    other piece keeps the one shared row. `ids` is a buffer: the checkpoint carries it."""

    def __init__(self, ids: Tensor, d_model: int) -> None:
        super().__init__()
        self.register_buffer("ids", ids.long())
        self.rows = nn.Parameter(torch.empty(len(ids), d_model))

    def forward(self, weight: Tensor) -> Tensor:
        return weight.index_copy(0, self.ids, self.rows)


# Where `shared_rows`' target-only ids sit in a state dict (the decoder input's parametrization).
TARGET_ROWS_KEY = "tgt_embed.parametrizations.weight.0.ids"


class Transformer(nn.Module):
    """Encoder-decoder Transformer over token ids.

    `shared_vocab` says whether source and target ids come from one vocabulary; the
    `src_tgt` and `all` ties are refused without it, because sharing a matrix between
    two different id spaces would train silently and mean nothing.
    """

    def __init__(
        self,
        cfg: ModelConfig,
        src_vocab_size: int,
        tgt_vocab_size: int,
        shared_vocab: bool,
        target_only_ids: Sequence[int] | Tensor | None = None,
    ) -> None:
        super().__init__()
        if cfg.tie_embeddings not in TIE_MODES:
            raise ValueError(
                f"tie_embeddings {cfg.tie_embeddings!r} must be resolved to one of "
                f"{sorted(TIE_MODES)} before the model is built (translate.model.tying)"
            )
        tie = TIE_MODES[cfg.tie_embeddings]
        if tie.src_tgt and not shared_vocab:
            raise ValueError(
                f"tie_embeddings={cfg.tie_embeddings!r} makes the encoder and decoder share one "
                f"embedding matrix, which needs one joint vocabulary, but this model has separate "
                f"source ({src_vocab_size} tokens) and target ({tgt_vocab_size} tokens) vocabularies. "
                "Train a joint vocabulary or choose tie_embeddings 'decoder' or 'none'."
            )
        if tie.target_rows_apart and target_only_ids is None:
            raise ValueError(
                "tie_embeddings 'shared_rows' needs the ids of the pieces only the target side "
                "uses (target_only_ids)"
            )
        self.cfg = cfg
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.shared_vocab = shared_vocab
        self.embed_scale = math.sqrt(cfg.d_model)

        self.src_embed = nn.Embedding(src_vocab_size, cfg.d_model)
        self.tgt_embed = (
            self.src_embed if tie.src_tgt else nn.Embedding(tgt_vocab_size, cfg.d_model)
        )
        self.output = nn.Linear(cfg.d_model, tgt_vocab_size, bias=False)
        if tie.tgt_output:
            self.output.weight = self.tgt_embed.weight
        if tie.target_rows_apart:
            # modules of their own around the one tied Parameter, each parametrized apart
            self.tgt_embed = nn.Embedding(tgt_vocab_size, cfg.d_model)
            self.tgt_embed.weight = self.src_embed.weight
            ids = torch.as_tensor(target_only_ids, dtype=torch.long)
            for module in (self.tgt_embed, self.output):
                parametrize.register_parametrization(module, "weight", TargetRows(ids, cfg.d_model))
        self.tgt_embed_adapter = embedding_adapter(cfg.d_model, cfg.embedding_adapter)

        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        share_layers(
            self.encoder_layers,
            self.decoder_layers,
            attention=cfg.share_layer_attention,
            encoder_decoder=cfg.share_encoder_decoder_layers,
        )
        # Pre-norm stacks end un-normalised, so they get a final LayerNorm each.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.embed_dropout = nn.Dropout(cfg.dropout)
        self.register_buffer(
            "positions", sinusoidal_positions(cfg.max_positions, cfg.d_model), persistent=False
        )
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        # Embeddings (and a tied output projection) N(0, d^-0.5): with the sqrt(d) scale the
        # input has unit variance and tied logits stay O(1).
        # One draw per place, a tied matrix drawn again at each of its places (the last draw
        # stays), so that every tie mode starts from the weights it always started from.
        for module in (self.src_embed, self.tgt_embed, self.output):
            nn.init.normal_(self._stored_weight(module), mean=0.0, std=self.cfg.d_model**-0.5)
        for module in (self.tgt_embed, self.output):
            if parametrize.is_parametrized(module, "weight"):
                rows = module.parametrizations["weight"][0].rows
                nn.init.normal_(rows, mean=0.0, std=self.cfg.d_model**-0.5)
        reset_adapter(self.tgt_embed_adapter)

    def embedding_weights(self) -> dict[str, Tensor]:
        """The three embedding places; tied places map to the same Parameter (under
        `shared_rows` the decoder input and output are computed from it: `TargetRows`)."""
        return {
            "src_embed": self.src_embed.weight,
            "tgt_embed": self.tgt_embed.weight,
            "output": self.output.weight,
        }

    @staticmethod
    def _stored_weight(module: nn.Module) -> nn.Parameter:
        """The Parameter a place's weight is stored in (a parametrized place: its original)."""
        if parametrize.is_parametrized(module, "weight"):
            return module.parametrizations["weight"].original
        return module.weight

    def embedding_parameters(self) -> list[nn.Parameter]:
        """The Parameters the embedding places are made of, each once."""
        found: dict[int, nn.Parameter] = {}
        for module in (self.src_embed, self.tgt_embed, self.output):
            weights = [self._stored_weight(module)]
            if parametrize.is_parametrized(module, "weight"):
                weights.append(module.parametrizations["weight"][0].rows)
            for weight in weights:
                found.setdefault(id(weight), weight)
        return list(found.values())

    @staticmethod
    def target_only_ids_of(state_dict: dict[str, Tensor]) -> Tensor | None:
        """`shared_rows`' target-only piece ids as a state dict (a checkpoint) holds them."""
        return state_dict.get(TARGET_ROWS_KEY)

    def fold_target_rows(self) -> None:
        """Make `shared_rows`' computed decoder-input and output matrices plain Parameters of
        the same values, so search reads them as it reads an untied model's (no copy per
        step). For inference: after it, training would no longer keep the tie."""
        for module in (self.tgt_embed, self.output):
            if parametrize.is_parametrized(module, "weight"):
                with torch.no_grad():
                    weight = module.weight.clone()
                # leave_parametrized=True would write the values into the one tied Parameter,
                # the encoder's embedding included: put the original back, then replace it
                parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)
                module.weight = nn.Parameter(weight)

    def _embed(
        self,
        embedding: nn.Embedding,
        ids: Tensor,
        offset: int | Tensor = 0,
        adapter: nn.Module | None = None,
        longest: int | None = None,
    ) -> Tensor:
        """`offset`: the position of `ids[:, 0]`, one for the batch or (a tensor) one per row;
        `longest`, where the caller knows it, a bound on `offset + length` that spares reading
        the offsets back from the device."""
        length = ids.shape[1]
        if longest is not None:
            last = longest
        else:
            last = offset + length if isinstance(offset, int) else int(offset.max()) + length
        if last > self.cfg.max_positions:
            raise ValueError(
                f"sequence of {last} tokens exceeds max_positions={self.cfg.max_positions}"
            )
        tokens = embedding(ids) if adapter is None else adapter(embedding(ids))
        if isinstance(offset, int):
            positions = self.positions[offset : offset + length]
        else:  # rows at different steps (sentences that joined a running search at different times)
            positions = self.positions[offset[:, None] + torch.arange(length, device=ids.device)]
        x = tokens * self.embed_scale + positions
        return self.embed_dropout(x) if self.training else x

    @staticmethod
    def source_mask(src_ids: Tensor, pad_id: int) -> Tensor:
        """Boolean (B, 1, 1, S) mask, True on real source tokens."""
        return (src_ids != pad_id)[:, None, None, :]

    def encode(self, src_ids: Tensor, src_mask: Tensor) -> Tensor:
        x = self._embed(self.src_embed, src_ids)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: DecoderCache | None = None,
        offset: int | Tensor = 0,
        project: bool = True,
        longest: int | None = None,
    ) -> Tensor:
        """Logits for each target position (with `project` False, the states they are projected
        from). With a search's `cache` (`translate.decode.cache`), `tgt_ids` are the new steps
        only and the encoder's keys and values come from the cache (`memory` and `src_mask` may
        be None): one row per sentence, which its consecutive rows (its beams) share. `offset` may
        give each row its own position (rows at different steps), and `longest` bound them
        (`_embed`)."""
        x = self._embed(self.tgt_embed, tgt_ids, offset, self.tgt_embed_adapter, longest)
        for index, layer in enumerate(self.decoder_layers):
            x = layer(x, memory, src_mask, None if cache is None else cache.layers[index])
        x = self.decoder_norm(x)
        return self.output(x) if project else x

    def cross_keys_values(self, memory: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Each decoder layer's cross-attention keys and values of `memory`, as a search caches
        them (`translate.decode.cache`)."""
        return [
            (k.contiguous(), v.contiguous())
            for k, v in (layer.cross_attn.keys_values(memory) for layer in self.decoder_layers)
        ]

    def forward(
        self, src_ids: Tensor, tgt_in_ids: Tensor, pad_id: int, project: bool = True
    ) -> Tensor:
        """Logits of every target position; with `project` False the decoder's final states
        instead, for a loss that projects only the positions it scores (`translate.train.loss`)."""
        src_mask = self.source_mask(src_ids, pad_id)
        return self.decode(tgt_in_ids, self.encode(src_ids, src_mask), src_mask, project=project)
