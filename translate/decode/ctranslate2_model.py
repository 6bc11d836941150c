"""A checkpoint as a CTranslate2 model: the spec built from our weights (`ctranslate2_spec`,
which states pre- or post-norm, ties and the position table explicitly, for every norm placement
and tie), written (`write_ctranslate2`), and converted once for decoding
(`converted_ctranslate2`). translate-export's `export_ctranslate2` writes the same spec for
others to run.

Neither CTranslate2 nor transformers has weights shared between layers
(`model.sharing.SHARING_VARIANTS`).
"""

from __future__ import annotations

from pathlib import Path

from torch import Tensor, nn

from translate.decode.ctranslate2_search import CTranslate2Error, require_ctranslate2
from translate.decode.loaded_model import LoadedModel
from translate.files import directory_once, file_digest
from translate.model.sharing import sharing_variants_used
from translate.model.transformer import MultiHeadAttention, Transformer
from translate.text.vocab import BOS_ID, EOS_ID, SentencePieceVocab, Vocabularies

# CTranslate2's compute type for each precision, spelled as training spells it (trainer.precision).
COMPUTE_TYPES = {"32-true": "float32", "bf16-mixed": "bfloat16", "16-mixed": "float16"}


def unsupported(model: Transformer) -> str | None:
    """Why CTranslate2 cannot express `model` exactly, or None where it can."""
    used = sharing_variants_used(model.cfg)
    if used:
        return (
            f"this model uses {', '.join(f'{name}: true' for name in used)}, which CTranslate2 "
            "cannot express (no weights shared between layers, no map between the decoder's "
            "embedding and its layers)"
        )
    return None


def ctranslate2_spec(model: Transformer, vocab: Vocabularies, decoder_start: bool = True):
    """A CTranslate2 `TransformerSpec` holding our weights, built directly (no transformers).

    CTranslate2's own transformers converters cannot be used on the directory that
    `export_huggingface` writes: its Marian loader assumes the OPUS-MT layout (a decoder that
    starts from a zero embedding, a padding row at the end of the vocabulary) and its Pegasus
    loader starts the decoder from the padding token. The spec below states our architecture
    explicitly instead: pre- or post-norm, ReLU, sqrt(d_model) scaling, our own (interleaved)
    position table, LayerNorm epsilon 1e-5, and EOS appended to the source. The decoder starts
    from BOS, or, without `decoder_start`, from each call's first target-prefix token (BOS, or
    the target-language tag a many-to-many model starts from), unscored and not returned.
    """
    reason = unsupported(model)
    if reason:
        raise CTranslate2Error(reason)
    require_ctranslate2()
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec, transformer_spec

    cfg = model.cfg
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers),
        cfg.heads,
        pre_norm=cfg.norm_first,
        activation=common_spec.Activation.RELU,
    )

    def tensor(value: Tensor) -> Tensor:
        return value.detach().float().contiguous().clone()

    def linear(target, source: nn.Linear) -> None:
        target.weight = tensor(source.weight)
        if source.bias is not None:
            target.bias = tensor(source.bias)

    def norm(target, source: nn.LayerNorm) -> None:
        target.gamma, target.beta = tensor(source.weight), tensor(source.bias)

    def attention(target, source: MultiHeadAttention, self_attention: bool) -> None:
        parts = [common_spec.LinearSpec() for _ in range(3)]
        for part, name in zip(parts, ("q_proj", "k_proj", "v_proj")):
            linear(part, getattr(source, name))
        if self_attention:
            utils.fuse_linear(target.linear[0], parts)
        else:
            utils.fuse_linear(target.linear[0], parts[:1])
            utils.fuse_linear(target.linear[1], parts[1:])
        linear(target.linear[-1], source.out_proj)

    def feed_forward(target, source) -> None:
        linear(target.linear_0, source.linear1)
        linear(target.linear_1, source.linear2)

    positions = tensor(model.positions)
    spec.encoder.scale_embeddings = spec.decoder.scale_embeddings = True  # times sqrt(d_model)
    spec.encoder.embeddings[0].weight = tensor(model.src_embed.weight)
    spec.encoder.position_encodings.encodings = positions
    spec.decoder.embeddings.weight = tensor(model.tgt_embed.weight)
    spec.decoder.position_encodings.encodings = positions
    linear(spec.decoder.projection, model.output)
    if cfg.norm_first:
        norm(spec.encoder.layer_norm, model.encoder_norm)
        norm(spec.decoder.layer_norm, model.decoder_norm)
    for target, layer in zip(spec.encoder.layer, model.encoder_layers):
        attention(target.self_attention, layer.self_attn, self_attention=True)
        norm(target.self_attention.layer_norm, layer.attn_block.norm)
        feed_forward(target.ffn, layer.ffn)
        norm(target.ffn.layer_norm, layer.ffn_block.norm)
    for target, layer in zip(spec.decoder.layer, model.decoder_layers):
        attention(target.self_attention, layer.self_attn, self_attention=True)
        norm(target.self_attention.layer_norm, layer.self_block.norm)
        attention(target.attention, layer.cross_attn, self_attention=False)
        norm(target.attention.layer_norm, layer.cross_block.norm)
        feed_forward(target.ffn, layer.ffn)
        norm(target.ffn.layer_norm, layer.ffn_block.norm)

    def pieces(side: SentencePieceVocab) -> list[str]:
        return [side.processor.id_to_piece(i) for i in range(len(side))]

    spec.register_source_vocabulary(pieces(vocab.source))
    spec.register_target_vocabulary(pieces(vocab.target))
    target = vocab.target.processor
    spec.config.unk_token = target.id_to_piece(target.unk_id())
    spec.config.bos_token = target.id_to_piece(BOS_ID)
    spec.config.eos_token = target.id_to_piece(EOS_ID)
    spec.config.decoder_start_token = target.id_to_piece(BOS_ID) if decoder_start else None
    spec.config.add_source_eos = True  # translate_batch takes the source pieces without EOS
    spec.config.layer_norm_epsilon = 1e-5  # torch.nn.LayerNorm's default, used by our model
    return spec


def write_ctranslate2(
    loaded: LoadedModel,
    directory: Path,
    quantization: str | None = None,
    decoder_start: bool = True,
    tokenizers: bool = True,
) -> None:
    """CTranslate2's files for `loaded`'s model (model.bin, config.json, vocabularies), and with
    `tokenizers` its SentencePiece models as `source.spm`/`target.spm`, written into
    `directory`, which may exist."""
    require_ctranslate2()
    from ctranslate2.converters.converter import Converter

    spec = ctranslate2_spec(loaded.model, loaded.vocab, decoder_start)

    class _SpecConverter(Converter):
        def _load(self):
            return spec

    _SpecConverter().convert(str(directory), quantization=quantization, force=True)
    if tokenizers:
        (directory / "source.spm").write_bytes(loaded.vocab.source.model_bytes)
        (directory / "target.spm").write_bytes(loaded.vocab.target.model_bytes)


def converted_ctranslate2(loaded: LoadedModel, cache_dir: str | Path | None = None) -> Path:
    """`loaded` as the CTranslate2 model directory the engine decodes with (float32 weights; the
    decoder starts from the target prefix, see `ctranslate2_spec`), converted once and kept in
    `cache_dir` (default: beside the checkpoint) under a name keyed by the checkpoint's SHA-256
    and CTranslate2's version: a changed checkpoint or a new CTranslate2 converts again, the same
    ones find it. A conversion is published whole (`files.directory_once`), so a directory under
    that name is complete; two processes converting at once both end with the one published."""
    ctranslate2 = require_ctranslate2()
    checkpoint = Path(loaded.path)
    digest = file_digest(checkpoint)[:16]
    directory = Path(cache_dir) if cache_dir is not None else checkpoint.parent
    out_dir = directory / f"{checkpoint.name}.ctranslate2-{digest}-v{ctranslate2.__version__}"
    if not (out_dir / "model.bin").is_file():
        with directory_once(out_dir) as tmp:
            write_ctranslate2(loaded, tmp, decoder_start=False)
    return out_dir
