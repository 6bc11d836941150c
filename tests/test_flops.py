"""FLOP accounting against an independent count: torch's own FlopCounterMode on a real step."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from translate.model.flops import device_peak, forward_flops, training_flops
from translate.model.transformer import ModelConfig, Transformer


@pytest.mark.parametrize(
    "changes", [{}, {"embedding_adapter": True}, {"encoder_layers": 1, "decoder_layers": 3}]
)
def test_counted_flops_equal_torchs_count_of_a_training_step(changes):
    settings = dict(
        d_model=32,
        heads=4,
        encoder_layers=2,
        decoder_layers=2,
        ffn_dim=48,
        dropout=0.0,
        tie_embeddings="all",
        max_positions=64,
    )
    cfg = ModelConfig(**{**settings, **changes})
    model = Transformer(cfg, 50, 50, shared_vocab=True)
    src = torch.randint(4, 50, (3, 7))
    tgt = torch.randint(4, 50, (3, 5))
    # The math kernel spells attention out as matrix products, which the counter sees (the fused
    # CPU kernel it does not count).
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as forward_count:
            logits = model(src, tgt, 0)
        with FlopCounterMode(display=False) as backward_count:
            logits.float().sum().backward()
    assert forward_count.get_total_flops() == forward_flops(cfg, 50, 3, 7, 5)
    total = forward_count.get_total_flops() + backward_count.get_total_flops()
    assert total == training_flops(cfg, 50, 3, 7, 5)


def test_device_peaks_by_name():
    assert device_peak("NVIDIA H100 80GB HBM3", "bf16") == 989.0
    assert device_peak("NVIDIA H100 PCIe", "bf16") == 756.0
    assert device_peak("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
    assert device_peak("Some Future GPU", "bf16") is None
