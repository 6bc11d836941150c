"""The tying study's sharing beyond the embeddings (`make tying-study`): what the three
`ModelConfig` switches `share_layer_attention`, `share_encoder_decoder_layers` and
`embedding_adapter` do to a built model. The defaults leave a model untouched."""

from __future__ import annotations

from torch import nn

# The sharing options no other format has (CTranslate2, transformers): copies would lose the tie.
SHARING_VARIANTS = ("share_layer_attention", "share_encoder_decoder_layers", "embedding_adapter")


def sharing_variants_used(cfg) -> list[str]:
    """The `SHARING_VARIANTS` a model's `ModelConfig` turns on."""
    return [name for name in SHARING_VARIANTS if getattr(cfg, name, False)]


def share_layers(
    encoder: nn.ModuleList, decoder: nn.ModuleList, attention: bool, encoder_decoder: bool
) -> None:
    """One module object (so one Parameter each) in several layers: with `attention`
    (`share_layer_attention`) across the layers of each stack, with `encoder_decoder`
    (`share_encoder_decoder_layers`) between the stacks. Encoder-decoder sharing comes first so
    that, with both, every self-attention of both stacks ends up as the encoder's single one."""
    if encoder_decoder:
        # Encoder layer i and decoder layer i: one self-attention and one feed-forward block
        # (LayerNorms and cross-attention stay separate).
        for enc, dec in zip(encoder, decoder):
            dec.self_attn, dec.ffn = enc.self_attn, enc.ffn
    if attention:
        # ALBERT-style: one self-attention per stack and one cross-attention, used by every layer.
        for layer in encoder[1:]:
            layer.self_attn = encoder[0].self_attn
        for layer in decoder[1:]:
            layer.self_attn, layer.cross_attn = decoder[0].self_attn, decoder[0].cross_attn


def embedding_adapter(d_model: int, wanted: bool) -> nn.Linear | None:
    """Where `wanted` (`embedding_adapter`), a d_model x d_model map on the decoder's input
    embedding: with a tied output projection the direct path W_E W_E^T is symmetric, and this
    map lets the model learn an asymmetric W_E A^T W_E^T instead (`reset_adapter` starts it as
    the identity)."""
    return nn.Linear(d_model, d_model, bias=False) if wanted else None


def reset_adapter(adapter: nn.Linear | None) -> None:
    """The adapter as the identity: the model starts as the plain tied model."""
    if adapter is not None:
        nn.init.eye_(adapter.weight)
