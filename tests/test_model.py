"""The Transformer against independent references: parameter formula, tie storage, torch.nn.Transformer."""

import copy
import math

import pytest
import torch
from tolerances import assert_within_rounding, transformer_terms
from torch import nn

from translate.decode.cache import SearchCache, append_steps
from translate.model.cpu_attention import ValueRows, weighted_values
from translate.model.transformer import (
    TIE_MODES,
    ModelConfig,
    Transformer,
)

CONFIGS = {
    "post-norm": ModelConfig(
        d_model=32,
        heads=4,
        encoder_layers=2,
        decoder_layers=3,
        ffn_dim=48,
        dropout=0.0,
        norm_first=False,
        max_positions=64,
    ),
    "pre-norm": ModelConfig(
        d_model=32,
        heads=4,
        encoder_layers=2,
        decoder_layers=3,
        ffn_dim=48,
        dropout=0.0,
        norm_first=True,
        max_positions=64,
    ),
}


def expected_parameter_count(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> int:
    """Counted by hand from the architecture, not from the module tree."""
    d, f = cfg.d_model, cfg.ffn_dim
    attention = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    layer_norm = 2 * d
    encoder = cfg.encoder_layers * (attention + ffn + 2 * layer_norm)
    decoder = cfg.decoder_layers * (2 * attention + ffn + 3 * layer_norm)
    final_norms = 2 * layer_norm if cfg.norm_first else 0
    tie = cfg.tie_embeddings
    embeddings = src_vocab * d
    if tie not in ("src_tgt", "all", "shared_rows"):
        embeddings += tgt_vocab * d
    if tie not in ("decoder", "all", "shared_rows"):
        embeddings += tgt_vocab * d
    if tie == "shared_rows":  # an input row and an output row for each target-only piece
        embeddings += 2 * len(TARGET_ONLY) * d
    return encoder + decoder + final_norms + embeddings


# The pieces only the target side uses, for `shared_rows` models of the 50-piece vocabulary.
TARGET_ONLY = [7, 8, 20, 33, 49]


def build(tie: str, norm: str = "pre-norm", vocab: int = 50) -> Transformer:
    cfg = ModelConfig(**{**CONFIGS[norm].__dict__, "tie_embeddings": tie})
    rows = TARGET_ONLY if tie == "shared_rows" else None
    return Transformer(cfg, vocab, vocab, shared_vocab=True, target_only_ids=rows)


def tied_groups(model: Transformer) -> set[frozenset[str]]:
    """Which of the three embedding places share storage (a `shared_rows` place: the tied
    Parameter it is computed from)."""

    def stored(module) -> torch.Tensor:
        if torch.nn.utils.parametrize.is_parametrized(module, "weight"):
            return module.parametrizations["weight"].original
        return module.weight

    places = {
        name: stored(getattr(model, name)).data_ptr()
        for name in ("src_embed", "tgt_embed", "output")
    }
    return {frozenset(b for b in places if places[b] == places[a]) for a in places}


EXPECTED_GROUPS = {
    "none": {frozenset({"src_embed"}), frozenset({"tgt_embed"}), frozenset({"output"})},
    "decoder": {frozenset({"src_embed"}), frozenset({"tgt_embed", "output"})},
    "src_tgt": {frozenset({"src_embed", "tgt_embed"}), frozenset({"output"})},
    "all": {frozenset({"src_embed", "tgt_embed", "output"})},
    "shared_rows": {frozenset({"src_embed", "tgt_embed", "output"})},
}


@pytest.mark.parametrize("norm", sorted(CONFIGS))
@pytest.mark.parametrize("tie", sorted(TIE_MODES))
def test_parameter_count_matches_formula(tie, norm):
    model = build(tie, norm)
    assert sum(p.numel() for p in model.parameters()) == expected_parameter_count(model.cfg, 50, 50)


def test_parameter_count_with_separate_vocabularies():
    cfg = ModelConfig(**{**CONFIGS["post-norm"].__dict__, "tie_embeddings": "decoder"})
    model = Transformer(cfg, 40, 70, shared_vocab=False)
    assert sum(p.numel() for p in model.parameters()) == expected_parameter_count(cfg, 40, 70)


@pytest.mark.parametrize("tie", sorted(TIE_MODES))
def test_ties_share_storage_after_construction_load_and_step(tie):
    model = build(tie)
    assert tied_groups(model) == EXPECTED_GROUPS[tie]

    reloaded = build(tie)
    reloaded.load_state_dict(model.state_dict())
    assert tied_groups(reloaded) == EXPECTED_GROUPS[tie]
    for name, weight in model.embedding_weights().items():
        assert torch.equal(weight, reloaded.embedding_weights()[name])

    optimizer = torch.optim.Adam(reloaded.parameters(), lr=0.1)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    assert len({p.data_ptr() for p in params}) == len(params), "a tied matrix is listed twice"
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    reloaded(src, tgt, pad_id=0).sum().backward()
    optimizer.step()
    assert tied_groups(reloaded) == EXPECTED_GROUPS[tie]
    before = model.embedding_weights()["src_embed"]
    assert not torch.equal(reloaded.embedding_weights()["src_embed"], before), (
        "the step changed nothing"
    )


@pytest.mark.parametrize("tie", ["all", "src_tgt", "shared_rows"])
def test_sharing_ties_refuse_separate_vocabularies(tie):
    cfg = ModelConfig(**{**CONFIGS["post-norm"].__dict__, "tie_embeddings": tie})
    with pytest.raises(ValueError, match="needs one joint vocabulary"):
        Transformer(cfg, 50, 50, shared_vocab=False)


def test_unknown_tie_mode_is_an_error():
    with pytest.raises(ValueError, match="tie_embeddings must be one of"):
        ModelConfig(tie_embeddings="encoder")


def reference_positions(length: int, dim: int) -> torch.Tensor:
    table = torch.zeros(length, dim, dtype=torch.float64)
    for pos in range(length):
        for i in range(0, dim, 2):
            angle = pos / (10000 ** (i / dim))
            table[pos, i] = math.sin(angle)
            table[pos, i + 1] = math.cos(angle)
    return table


def copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.data = (
        torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]).detach().clone()
    )
    theirs.in_proj_bias.data = (
        torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]).detach().clone()
    )
    theirs.out_proj.weight.data = ours.out_proj.weight.detach().clone()
    theirs.out_proj.bias.data = ours.out_proj.bias.detach().clone()


def copy_module(source: nn.Module, target: nn.Module) -> None:
    target.load_state_dict(source.state_dict())


def reference_logits(
    model: Transformer, src: torch.Tensor, tgt: torch.Tensor, pad_id: int
) -> torch.Tensor:
    """The same network rebuilt from torch.nn.TransformerEncoderLayer/DecoderLayer, in the model's dtype."""
    cfg = model.cfg
    d = cfg.d_model
    dtype = model.output.weight.dtype
    enc_layers, dec_layers = [], []
    for ours in model.encoder_layers:
        ref = nn.TransformerEncoderLayer(
            d,
            cfg.heads,
            cfg.ffn_dim,
            dropout=0.0,
            batch_first=True,
            norm_first=cfg.norm_first,
            dtype=dtype,
        )
        copy_attention(ours.self_attn, ref.self_attn)
        copy_module(ours.ffn.linear1, ref.linear1)
        copy_module(ours.ffn.linear2, ref.linear2)
        copy_module(ours.attn_block.norm, ref.norm1)
        copy_module(ours.ffn_block.norm, ref.norm2)
        enc_layers.append(ref.eval())
    for ours in model.decoder_layers:
        ref = nn.TransformerDecoderLayer(
            d,
            cfg.heads,
            cfg.ffn_dim,
            dropout=0.0,
            batch_first=True,
            norm_first=cfg.norm_first,
            dtype=dtype,
        )
        copy_attention(ours.self_attn, ref.self_attn)
        copy_attention(ours.cross_attn, ref.multihead_attn)
        copy_module(ours.ffn.linear1, ref.linear1)
        copy_module(ours.ffn.linear2, ref.linear2)
        copy_module(ours.self_block.norm, ref.norm1)
        copy_module(ours.cross_block.norm, ref.norm2)
        copy_module(ours.ffn_block.norm, ref.norm3)
        dec_layers.append(ref.eval())

    src_pad = src == pad_id
    x = model.src_embed.weight[src] * math.sqrt(d) + reference_positions(src.shape[1], d).to(dtype)
    for layer in enc_layers:
        x = layer(x, src_key_padding_mask=src_pad)
    if cfg.norm_first:
        x = nn.functional.layer_norm(x, (d,), model.encoder_norm.weight, model.encoder_norm.bias)
    memory = x
    causal = torch.triu(
        torch.full((tgt.shape[1], tgt.shape[1]), float("-inf"), dtype=dtype), diagonal=1
    )
    y = model.tgt_embed.weight[tgt] * math.sqrt(d) + reference_positions(tgt.shape[1], d).to(dtype)
    for layer in dec_layers:
        y = layer(y, memory, tgt_mask=causal, memory_key_padding_mask=src_pad)
    if cfg.norm_first:
        y = nn.functional.layer_norm(y, (d,), model.decoder_norm.weight, model.decoder_norm.bias)
    return y @ model.output.weight.T


@pytest.mark.numerical
@pytest.mark.parametrize("norm", sorted(CONFIGS))
@pytest.mark.parametrize("tie", ["none", "all"])
def test_forward_equals_torch_nn_transformer(tie, norm):
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)
    model = build(tie, norm).eval()
    with torch.no_grad():  # random LayerNorm affine so the copies are really checked
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.normal_(1.0, 0.1)
                module.bias.normal_(0.0, 0.1)
    src = torch.randint(4, 50, (3, 9))
    src[0, 6:] = 0  # padding
    src[2, 4:] = 0
    tgt = torch.randint(4, 50, (3, 7))
    with torch.no_grad():
        ours = model(src, tgt, pad_id=0)
        theirs = reference_logits(model.double(), src, tgt, pad_id=0)
    assert_within_rounding(ours, theirs, torch.float32, transformer_terms(model.cfg, src.shape[1]))


def full_decoding_in_float64(
    model: Transformer, src: torch.Tensor, tgt: torch.Tensor
) -> torch.Tensor:
    """The reference for cached float32 decoding: every position at once, in float64."""
    reference = copy.deepcopy(model).double()
    with torch.no_grad():
        mask = reference.source_mask(src, 0)
        return reference.decode(tgt, reference.encode(src, mask), mask)


@pytest.mark.numerical
def test_cached_decoding_equals_full_decoding():
    torch.manual_seed(1)
    model = build("all").eval()
    src = torch.randint(4, 50, (2, 6))
    tgt = torch.randint(4, 50, (2, 5))
    with torch.no_grad():
        mask = model.source_mask(src, 0)
        memory = model.encode(src, mask)
        cache = SearchCache.for_batch(model, memory, mask, src.shape[0])
        steps = [
            model.decode(tgt[:, i : i + 1], memory, mask, cache, offset=i)
            for i in range(tgt.shape[1])
        ]
    full = full_decoding_in_float64(model, src, tgt)
    length = max(src.shape[1], tgt.shape[1])
    assert_within_rounding(
        torch.cat(steps, dim=1), full, torch.float32, transformer_terms(model.cfg, length)
    )


@pytest.mark.numerical
def test_cached_decoding_in_uneven_chunks_equals_full_decoding():
    torch.manual_seed(2)
    model = build("none", "post-norm").eval()
    src = torch.randint(4, 50, (3, 7))
    tgt = torch.randint(4, 50, (3, 45))
    chunks = [
        1,
        1,
        3,
        11,
        1,
        2,
        20,
        6,
    ]  # several new positions after cached ones need a causal mask
    with torch.no_grad():
        mask = model.source_mask(src, 0)
        memory = model.encode(src, mask)
        cache, outputs, offset = SearchCache.for_batch(model, memory, mask, src.shape[0]), [], 0
        for size in chunks:
            outputs.append(
                model.decode(tgt[:, offset : offset + size], memory, mask, cache, offset=offset)
            )
            offset += size
    assert offset == tgt.shape[1] and cache.layers[0].steps[0].width == offset
    full = full_decoding_in_float64(model, src, tgt)
    length = max(src.shape[1], tgt.shape[1])
    assert_within_rounding(
        torch.cat(outputs, dim=1), full, torch.float32, transformer_terms(model.cfg, length)
    )


def test_append_steps_reorders_and_appends_in_one_copy_as_cat_of_the_selected_rows_would():
    cached, new = torch.randn(6, 2, 5, 3), torch.randn(4, 2, 1, 3)
    rows = torch.tensor([3, 3, 0, 5])  # beams that survive, repeated and reordered
    grown = append_steps(cached, new, rows)
    assert torch.equal(grown, torch.cat([cached[rows], new], dim=2)) and grown.is_contiguous()
    assert torch.equal(append_steps(cached[:4], new, None), torch.cat([cached[:4], new], dim=2))


@pytest.mark.numerical
@pytest.mark.parametrize("shape", [(3, 2, 1, 5), (4, 2, 3, 7), (1, 1, 1, 1), (6, 4, 5, 40)])
def test_weighted_values_equals_the_batched_product(shape):
    """Each query's weighted sum of the value rows, as embedding bags: one query a row (greedy),
    several queries sharing a row's values (a sentence's beams), zero weights (masked keys)."""
    batch, heads, length, steps = shape
    generator = torch.Generator().manual_seed(sum(shape))
    scores = torch.randn(shape, generator=generator)
    scores[torch.rand(shape, generator=generator) < 0.3] = float("-inf")
    scores[..., 0] = 0.0  # every query sees at least one key
    weights = scores.softmax(dim=-1)
    values = torch.randn(batch, heads, steps, 8, generator=generator)
    # each output sums `steps` weighted value rows
    assert_within_rounding(
        weighted_values(weights, values), weights.double() @ values.double(), torch.float32, steps
    )
    transposed = (
        values.transpose(-1, -2).contiguous().transpose(-1, -2)
    )  # not contiguous: the product
    assert torch.equal(weighted_values(weights, transposed), torch.matmul(weights, transposed))


@pytest.mark.numerical
def test_weighted_values_grows_its_row_indexes_for_a_larger_cache(monkeypatch):
    """Grown inside inference mode (as decoding runs), the indexes still serve a call that
    records gradients."""
    rows = ValueRows()
    rows.table = torch.arange(4)
    weights, values = torch.rand(5, 2, 1, 9).softmax(dim=-1), torch.randn(5, 2, 9, 4)
    with torch.inference_mode():
        assert_within_rounding(
            weighted_values(weights, values, rows),
            weights.double() @ values.double(),
            torch.float32,
            9,
        )
    assert rows.table.numel() >= 5 * 2 * 9
    values.requires_grad_(True)
    weighted_values(weights, values, rows).sum().backward()
    # a value row's gradient sums its weight over the one query
    assert_within_rounding(
        values.grad, weights.double().sum(dim=2)[..., None].expand_as(values), torch.float32, 1
    )
