"""Model FLOPs of a training step, counted from the architecture: what MFU is measured against.

Every matrix product of the forward pass counts 2 FLOPs per multiply-add: the attention
projections, the attention scores (Q K^T) and their weighted sum (A V), the feed-forward
blocks and the output projection over the target vocabulary. The backward pass costs twice the
forward (gradients with respect to the inputs and to the weights), so a training step is 3x
the forward. Attention is counted over every padded position of the batch as computed (a
causal decoder's masked half included), and elementwise work (softmax, norms, activations,
the loss) is not counted, as in the usual MFU accounting (Chowdhery et al. 2022, appendix B).
"""

from __future__ import annotations

from translate.model.transformer import ModelConfig


def forward_flops(cfg: ModelConfig, tgt_vocab: int, batch: int, src_len: int, tgt_len: int) -> int:
    """FLOPs of one forward pass over a (batch, src_len) source and a (batch, tgt_len) target."""
    d, f = cfg.d_model, cfg.ffn_dim

    def attention(queries: int, keys: int) -> int:
        projections = 2 * queries * d * d * 2 + 2 * keys * d * d * 2  # Q and out; K and V
        return projections + 2 * 2 * queries * keys * d  # scores, weighted sum

    def feed_forward(length: int) -> int:
        return 2 * 2 * length * d * f

    encoder = cfg.encoder_layers * (attention(src_len, src_len) + feed_forward(src_len))
    decoder = cfg.decoder_layers * (
        attention(tgt_len, tgt_len) + attention(tgt_len, src_len) + feed_forward(tgt_len)
    )
    adapter = 2 * tgt_len * d * d if cfg.embedding_adapter else 0
    output = 2 * tgt_len * d * tgt_vocab
    return batch * (encoder + decoder + adapter + output)


def training_flops(cfg: ModelConfig, tgt_vocab: int, batch: int, src_len: int, tgt_len: int) -> int:
    """Forward and backward: three times the forward pass."""
    return 3 * forward_flops(cfg, tgt_vocab, batch, src_len, tgt_len)


# Dense peaks in TFLOP/s (no sparsity), from the vendors' data sheets: for the MFU of a run on
# these devices; any other device is named with --peak-tflops.
DEVICE_PEAKS = {
    "H100 SXM": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5, "fp32": 67.0},
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
    "H200": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5, "fp32": 67.0},
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "V100": {"fp16": 125.0, "fp32": 15.7},
    "L4": {"bf16": 121.0, "fp16": 121.0, "fp32": 30.3},
}


def device_peak(name: str, precision: str) -> float | None:
    """The peak TFLOP/s of a CUDA device by its name (`torch.cuda.get_device_name`), or None."""
    lowered = name.lower()
    if "h100" in lowered:  # the SXM part's name says HBM3, not SXM
        key = "H100 PCIe" if "pcie" in lowered else "H100 SXM"
    else:
        key = next((k for k in DEVICE_PEAKS if k.lower() in lowered), None)
    return DEVICE_PEAKS.get(key, {}).get(precision) if key else None
