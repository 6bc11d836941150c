"""Packed linear layers (translate/model/packing.py): the same numbers as the plain model, the same
parameters and ties, and a fallback wherever the packed path does not apply."""

import pytest
import torch
from helpers import all_variants, build_variant, variant_id
from search_oracle import beam_search, greedy_search
from tolerances import assert_within_rounding, search_terms, transformer_terms, within_rounding
from torch import nn

from translate.model.packing import (
    PACK_ALWAYS_WEIGHTS,
    PACK_MIN_ROWS,
    PackedLinear,
    pack_linear_layers,
    packing_available,
)
from translate.model.transformer import FeedForward
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID

pytestmark = pytest.mark.skipif(not packing_available(), reason="this PyTorch build has no oneDNN")


def reference_linear(x: torch.Tensor, linear: nn.Linear, relu: bool) -> torch.Tensor:
    """x W^T + b written out in float64, one output feature at a time."""
    w = linear.weight.detach().double()
    b = None if linear.bias is None else linear.bias.detach()
    columns = [
        (x.double() * w[j]).sum(-1) + (0.0 if b is None else float(b[j])) for j in range(w.shape[0])
    ]
    out = torch.stack(columns, dim=-1)
    return out.clamp(min=0) if relu else out


@pytest.mark.numerical
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("shape", [(1, 24), (7, 24), (300, 24), (3, 5, 24)])
def test_packed_linear_equals_the_written_out_product(shape, activation, bias):
    torch.manual_seed(0)
    linear = nn.Linear(24, 40, bias=bias).eval()
    packed = PackedLinear(linear, activation=activation)
    x = torch.randn(shape)
    with torch.inference_mode():
        out = packed(x)
    assert out.shape == (*shape[:-1], 40)
    # 24 products and the bias summed
    assert_within_rounding(
        out, reference_linear(x, linear, activation == "relu"), torch.float32, 24 + 1
    )


@pytest.mark.numerical
def test_packed_linear_follows_a_weight_changed_after_packing_and_falls_back_under_autocast():
    torch.manual_seed(0)
    linear = nn.Linear(16, 8)
    packed = PackedLinear(linear)
    x = torch.randn(4, 16)
    with torch.no_grad():
        linear.weight.mul_(-2.0)  # the same Parameter the packed layer holds
        assert_within_rounding(packed(x), reference_linear(x, linear, False), torch.float32, 16 + 1)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = packed(x)
        assert out.dtype == torch.bfloat16  # autocast's own bf16 kernel, not the float32 packed one
        assert torch.equal(out, nn.functional.linear(x, linear.weight, linear.bias))


def test_packed_linear_keeps_gradients_working():
    torch.manual_seed(0)
    linear = nn.Linear(6, 3)
    packed = PackedLinear(linear, activation="relu")
    packed(torch.randn(5, 6)).sum().backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0


@pytest.mark.numerical
@pytest.mark.parametrize("changes", all_variants(), ids=variant_id)
def test_packing_keeps_parameters_ties_and_translations(changes):
    plain = build_variant(seed=3, **changes).eval()
    packed = build_variant(seed=3, **changes).eval()
    names_before = {
        name: p.data_ptr() for name, p in packed.named_parameters(remove_duplicate=False)
    }
    count = pack_linear_layers(packed, min_weights=0)

    distinct_linears = {id(m) for m in plain.modules() if isinstance(m, nn.Linear)}
    assert count == len(distinct_linears)
    assert not any(isinstance(m, nn.Linear) for m in packed.modules())
    # Every parameter keeps its name and storage: the state dict, ties and export are unchanged.
    assert {
        name: p.data_ptr() for name, p in packed.named_parameters(remove_duplicate=False)
    } == names_before
    assert packed.state_dict().keys() == plain.state_dict().keys()
    assert sum(p.numel() for p in packed.parameters()) == sum(p.numel() for p in plain.parameters())
    if changes["tie_embeddings"] == "all":
        assert packed.output.weight is packed.tgt_embed.weight is packed.src_embed.weight
    if changes["share_layer_attention"]:
        assert (
            packed.decoder_layers[1].self_attn.q_proj is packed.decoder_layers[0].self_attn.q_proj
        )
    if changes["share_encoder_decoder_layers"]:
        assert packed.decoder_layers[0].ffn is packed.encoder_layers[0].ffn
        assert isinstance(packed.decoder_layers[0].ffn.linear1, PackedLinear)
    ffn = next(m for m in packed.modules() if isinstance(m, FeedForward))
    assert ffn.linear1.activation == "relu" and isinstance(ffn.activation, nn.Identity)

    torch.manual_seed(1)
    src = torch.randint(EOS_ID + 1, 50, (4, 9))
    src[1, 6:] = PAD_ID
    src[:, -1] = EOS_ID
    src[1, 5] = EOS_ID
    tgt = torch.cat([torch.full((4, 1), BOS_ID), torch.randint(EOS_ID + 1, 50, (4, 6))], dim=1)
    reference = build_variant(seed=3, **changes).eval().double()
    with torch.inference_mode():
        assert_within_rounding(
            packed(src, tgt, PAD_ID),
            reference(src, tgt, PAD_ID),
            torch.float32,
            transformer_terms(plain.cfg, src.shape[1]),
        )
        assert greedy_search(packed, src) == greedy_search(plain, src)
        terms = 2 * search_terms(plain, src)  # both searches run in float32
        for ours, theirs in zip(
            beam_search(packed, src, beam=3, n_best=3), beam_search(plain, src, beam=3, n_best=3)
        ):
            assert [h.tokens for h in ours] == [h.tokens for h in theirs]
            assert [h.score for h in ours] == within_rounding(
                [h.score for h in theirs], torch.float32, terms
            )


def test_packing_leaves_a_training_model_alone():
    model = build_variant(seed=0).train()
    assert pack_linear_layers(model, min_weights=0) == 0
    assert isinstance(model.output, nn.Linear)


def test_only_layers_worth_packing_are_packed():
    # d_model 16, ffn 24, vocabulary 50, 2 + 3 layers: attention 256 weights, ffn 384, output 800
    model = build_variant(seed=0).eval()
    assert pack_linear_layers(model, min_weights=384) == 2 * 5 + 1
    assert isinstance(model.decoder_layers[0].self_attn.q_proj, nn.Linear)
    assert model.decoder_layers[0].ffn.linear1.activation == "relu"
    model = build_variant(seed=0).eval()
    assert pack_linear_layers(model, min_weights=800) == 1
    assert isinstance(model.output, PackedLinear)
    assert isinstance(model.decoder_layers[0].ffn.linear1, nn.Linear)
    assert isinstance(model.decoder_layers[0].ffn.activation, nn.ReLU)


def test_a_model_loaded_under_inference_mode_is_packed():
    """Trainer.predict (translate-batch) builds the decoding model inside inference mode."""
    plain = build_variant(seed=6, tie_embeddings="all").eval()
    with torch.inference_mode():
        model = build_variant(seed=6, tie_embeddings="all").eval()
        assert pack_linear_layers(model, min_weights=0) > 0
        src = torch.randint(EOS_ID + 1, 50, (2, 7))
        src[:, -1] = EOS_ID
        assert greedy_search(model, src) == greedy_search(plain, src)


@pytest.mark.numerical
def test_a_few_rows_take_the_packed_product_only_on_a_large_layer(monkeypatch):
    """F.linear reorders the weight at every call: on a layer of PACK_ALWAYS_WEIGHTS or more,
    that costs more than the packed call even for one row (translate/model/packing.py)."""
    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(
        torch.ops.mkldnn, "_linear_pointwise", lambda *args: calls.append(args) or real(*args)
    )
    torch.manual_seed(0)
    small, large = nn.Linear(64, 64).eval(), nn.Linear(256, PACK_ALWAYS_WEIGHTS // 256).eval()
    for linear, rows, packed_path in [
        (small, 1, False),
        (small, PACK_MIN_ROWS, True),
        (large, 1, True),
    ]:
        calls.clear()
        x = torch.randn(rows, linear.in_features)
        with torch.inference_mode():
            out = PackedLinear(linear)(x)
        assert bool(calls) == packed_path
        assert_within_rounding(
            out, reference_linear(x, linear, False), torch.float32, linear.in_features + 1
        )
