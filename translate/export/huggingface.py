"""A checkpoint as a Hugging Face `transformers` model directory.

`export_huggingface` writes the weights, config, generation config and SentencePiece model(s)
of a checkpoint as a directory that `AutoModelForSeq2SeqLM.from_pretrained` and
`AutoTokenizer.from_pretrained` load, and that computes the same logits, hence the same greedy
translations, as our model. No approximation is involved; every part maps exactly:

| ours | `MarianMTModel` (post-norm) / `PegasusForConditionalGeneration` (pre-norm) |
|---|---|
| embeddings times sqrt(d_model) | `scale_embedding=True` |
| sinusoidal positions from 0, no embedding LayerNorm | the same sinusoids, computed by transformers |
| post-norm layers | Marian layers (post-norm) |
| pre-norm layers + a final LayerNorm per stack | Pegasus layers (pre-norm) + `encoder/decoder.layer_norm` |
| ReLU feed-forward, biased q/k/v/out projections | `activation_function="relu"`, the same projections |
| output projection without bias | `lm_head` + `final_logits_bias` of zeros |
| ids PAD 0, UNK 1, BOS 2, EOS 3; source + EOS; decoder starts at BOS | `pad/eos/decoder_start_token_id` 0/3/2; `MarianTokenizer` appends EOS |

Our position table interleaves sin and cos (sin on even, cos on odd dimensions) while
transformers puts all sines first, then all cosines, with the same frequencies. Rather than
changing the table (which would silently break every checkpoint trained so far), the export
permutes the d_model dimensions of the whole residual stream: every matrix that reads from it
has its input columns permuted, every one that writes to it has its output rows permuted, and
LayerNorm weights and biases are permuted. LayerNorm, attention and the feed-forward layers are
equivariant under such a permutation, so the network computes exactly the same function.

Ties: Marian expresses all four modes (`share_encoder_decoder_embeddings`, `tie_word_embeddings`,
`decoder_vocab_size` for separate vocabularies). Pegasus always gives encoder and decoder one
token embedding, so pre-norm checkpoints export only with `tie_embeddings` `all` or `src_tgt`;
`none` and `decoder` are refused with an `ExportError` rather than exported approximately.

Neither format has weights shared between layers or a map between the decoder embedding and the
residual stream, so models with `share_layer_attention`, `share_encoder_decoder_layers` or
`embedding_adapter` are refused with an `ExportError` by both exports.
"""  # noqa: E501 - the table above is one row a line

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from translate.decode.loaded_model import load_model
from translate.export.output import ExportError, prepare_output, refuse_sharing_variants, staged
from translate.model.transformer import TIE_MODES, MultiHeadAttention, Ties, Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, SentencePieceVocab, Vocabularies

INSTALL_HINT = "pip install transformers safetensors (or, in the project directory, pip install -e '.[export]')"


def _require_transformers():
    try:
        import transformers
    except ImportError:
        raise ExportError(
            f"exporting to Hugging Face needs the transformers package: {INSTALL_HINT}"
        ) from None
    return transformers


def residual_permutation(d_model: int) -> Tensor:
    """New dimension j holds our dimension perm[j]: sines (our even dims) first, then cosines."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def huggingface_architecture(model: Transformer) -> str:
    """The transformers class that computes exactly what `model` computes, or an ExportError."""
    refuse_sharing_variants(model, "a Hugging Face transformers model")
    cfg = model.cfg
    if cfg.d_model % 2:
        raise ExportError(
            f"d_model={cfg.d_model} is odd; sinusoidal positions need an even d_model"
        )
    if not cfg.norm_first:
        return "MarianMTModel"
    if not exported_tie(cfg).src_tgt:
        raise ExportError(
            f"a pre-norm model (norm_first: true) exports as PegasusForConditionalGeneration, "
            f"whose encoder and decoder always share one token embedding, but this model has "
            f"tie_embeddings={cfg.tie_embeddings!r} (encoder and decoder embeddings that differ). "
            "Pre-norm models export with tie_embeddings 'all' or 'src_tgt' only; post-norm "
            "models (MarianMTModel) export with every tie mode."
        )
    return "PegasusForConditionalGeneration"


def exported_tie(cfg) -> Ties:
    """The ties the exported matrices keep: `shared_rows` leaves three matrices that differ in
    the target-only rows, which transformers holds as an untied model's."""
    tie = TIE_MODES[cfg.tie_embeddings]
    return TIE_MODES["none"] if tie.target_rows_apart else tie


def huggingface_config(model: Transformer, architecture: str):
    """The transformers config of the matching architecture (special ids, sizes, ReLU, scaling)."""
    transformers = _require_transformers()
    cfg = model.cfg
    tie = exported_tie(cfg)
    common = dict(
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.heads,
        decoder_attention_heads=cfg.heads,
        encoder_ffn_dim=cfg.ffn_dim,
        decoder_ffn_dim=cfg.ffn_dim,
        activation_function="relu",
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        max_position_embeddings=cfg.max_positions,
        scale_embedding=True,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        # Generation settings belong to generation_config.json; None overrides Marian's default 0.
        forced_eos_token_id=None,
        tie_word_embeddings=tie.tgt_output,
        architectures=[architecture],
    )
    if architecture == "MarianMTModel":
        return transformers.MarianConfig(
            vocab_size=model.src_vocab_size,
            decoder_vocab_size=model.tgt_vocab_size,
            share_encoder_decoder_embeddings=tie.src_tgt,
            **common,
        )
    return transformers.PegasusConfig(vocab_size=model.src_vocab_size, **common)


def huggingface_state_dict(model: Transformer) -> dict[str, Tensor]:
    """Our weights under transformers' names, residual-stream dimensions permuted.

    Position tables are not included: transformers computes them itself.
    """
    perm = residual_permutation(model.cfg.d_model)
    state: dict[str, Tensor] = {}

    def reads(weight: Tensor) -> Tensor:  # a matrix whose input is the residual stream
        return weight[:, perm]

    def norm(prefix: str, layer_norm: nn.LayerNorm) -> None:
        state[f"{prefix}.weight"] = layer_norm.weight[perm]
        state[f"{prefix}.bias"] = layer_norm.bias[perm]

    def attention(prefix: str, attn: MultiHeadAttention) -> None:
        for name in ("q_proj", "k_proj", "v_proj"):
            linear = getattr(attn, name)
            state[f"{prefix}.{name}.weight"] = reads(linear.weight)
            state[f"{prefix}.{name}.bias"] = linear.bias
        state[f"{prefix}.out_proj.weight"] = attn.out_proj.weight[perm]
        state[f"{prefix}.out_proj.bias"] = attn.out_proj.bias[perm]

    def feed_forward(prefix: str, ffn) -> None:
        state[f"{prefix}.fc1.weight"] = reads(ffn.linear1.weight)
        state[f"{prefix}.fc1.bias"] = ffn.linear1.bias
        state[f"{prefix}.fc2.weight"] = ffn.linear2.weight[perm]
        state[f"{prefix}.fc2.bias"] = ffn.linear2.bias[perm]

    for index, layer in enumerate(model.encoder_layers):
        prefix = f"model.encoder.layers.{index}"
        attention(f"{prefix}.self_attn", layer.self_attn)
        norm(f"{prefix}.self_attn_layer_norm", layer.attn_block.norm)
        feed_forward(prefix, layer.ffn)
        norm(f"{prefix}.final_layer_norm", layer.ffn_block.norm)
    for index, layer in enumerate(model.decoder_layers):
        prefix = f"model.decoder.layers.{index}"
        attention(f"{prefix}.self_attn", layer.self_attn)
        norm(f"{prefix}.self_attn_layer_norm", layer.self_block.norm)
        attention(f"{prefix}.encoder_attn", layer.cross_attn)
        norm(f"{prefix}.encoder_attn_layer_norm", layer.cross_block.norm)
        feed_forward(prefix, layer.ffn)
        norm(f"{prefix}.final_layer_norm", layer.ffn_block.norm)
    if model.cfg.norm_first:
        norm("model.encoder.layer_norm", model.encoder_norm)
        norm("model.decoder.layer_norm", model.decoder_norm)

    state["model.encoder.embed_tokens.weight"] = reads(model.src_embed.weight)
    state["model.decoder.embed_tokens.weight"] = reads(model.tgt_embed.weight)
    if exported_tie(model.cfg).src_tgt:
        state["model.shared.weight"] = reads(model.src_embed.weight)
    state["lm_head.weight"] = reads(model.output.weight)
    return {name: value.detach().clone().contiguous() for name, value in state.items()}


def to_huggingface(model: Transformer):
    """A transformers model (in eval mode) computing exactly what `model` computes."""
    transformers = _require_transformers()
    architecture = huggingface_architecture(model)
    config = huggingface_config(model, architecture)
    hf_model = getattr(transformers, architecture)(config)
    decoder_rows = hf_model.get_decoder().embed_tokens.num_embeddings
    if decoder_rows != model.tgt_vocab_size:
        raise ExportError(
            f"transformers {transformers.__version__} builds {architecture}'s decoder embedding with "
            f"{decoder_rows} rows, the source vocabulary's size, but the target vocabulary has "
            f"{model.tgt_vocab_size} tokens: separate vocabularies of different sizes need "
            "transformers>=5 (pip install -U transformers)"
        )
    state = huggingface_state_dict(model)
    missing, unexpected = hf_model.load_state_dict(state, strict=False)
    ignorable = ("embed_positions.weight", "final_logits_bias")
    missing = [name for name in missing if not name.endswith(ignorable)]
    if missing or unexpected:
        raise ExportError(
            f"the installed transformers {transformers.__version__} names {architecture}'s weights "
            f"differently than expected (missing {missing}, unexpected {unexpected})"
        )
    loaded = hf_model.state_dict()
    for name, value in state.items():  # a tie we did not ask for would have overwritten a matrix
        if not torch.equal(loaded[name], value):
            raise ExportError(f"{name} did not survive loading into {architecture}: a tie differs")
    with torch.no_grad():
        hf_model.final_logits_bias.zero_()
    hf_model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=BOS_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        forced_eos_token_id=EOS_ID,
        num_beams=1,
        do_sample=False,
        # BOS + at most max_positions predicted tokens, the last one EOS: our search's limit.
        max_length=model.cfg.max_positions + 1,
    )
    return hf_model.eval()


def save_huggingface(hf_model, directory: Path) -> None:
    """config.json, generation_config.json and model.safetensors, loadable by transformers 4 and 5.

    `save_pretrained` keeps one name per tied matrix, and which names transformers re-ties on
    loading changed in version 5: it no longer ties the encoder and decoder embeddings when
    `tie_word_embeddings` is false (our `src_tgt`), so such a file saved by version 4 would load
    in version 5 with random embeddings. The weights are therefore written here, under every
    name except those that each version ties to another one on loading.
    """
    from safetensors.torch import save_file

    hf_model.config.save_pretrained(str(directory))
    hf_model.generation_config.save_pretrained(str(directory))
    skip = set(getattr(hf_model, "_keys_to_ignore_on_save", None) or ())  # Marian's positions
    if hf_model.config.tie_word_embeddings:  # lm_head is tied to the decoder embedding
        skip.add("lm_head.weight")
        if "model.shared.weight" in hf_model.state_dict():  # and both embeddings to `shared`
            skip |= {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    tensors = {
        name: value.detach().clone().contiguous()
        for name, value in hf_model.state_dict().items()
        if name not in skip
    }
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})


def check_same_logits(model: Transformer, hf_model, tolerance: float = 1e-4) -> float:
    """Teacher-forced logits of both models on a fixed input; ExportError if they differ."""
    generator = torch.Generator().manual_seed(0)
    length = min(12, model.cfg.max_positions)
    src = torch.randint(4, model.src_vocab_size, (2, length), generator=generator)
    src[:, -1] = EOS_ID
    src[1, length // 2 :] = PAD_ID  # one padded sentence, so the masks are checked too
    src[1, length // 2 - 1] = EOS_ID
    tgt = torch.randint(4, model.tgt_vocab_size, (2, length), generator=generator)
    tgt[:, 0] = BOS_ID
    with torch.no_grad():
        ours = model(src, tgt, pad_id=PAD_ID)
        theirs = hf_model(
            input_ids=src, attention_mask=(src != PAD_ID).long(), decoder_input_ids=tgt
        ).logits
    error = (ours - theirs).abs().max().item()
    scale = max(1.0, ours.abs().max().item())
    if not error <= tolerance * scale:
        raise ExportError(
            f"the exported model's logits differ from ours by {error:.3g} (logits up to {scale:.3g}); "
            "this transformers version computes something else"
        )
    return error


def _write_tokenizer(vocab: Vocabularies, directory: Path, max_positions: int) -> None:
    """SentencePiece model(s) as `source.spm`/`target.spm`, with MarianTokenizer's files."""
    from transformers import MarianTokenizer

    def pieces(side: SentencePieceVocab) -> dict[str, int]:
        return {side.processor.id_to_piece(i): i for i in range(len(side))}

    (directory / "source.spm").write_bytes(vocab.source.model_bytes)
    (directory / "target.spm").write_bytes(vocab.target.model_bytes)
    (directory / "vocab.json").write_text(
        json.dumps(pieces(vocab.source), ensure_ascii=False, indent=0)
    )
    extra = {}
    if not vocab.joint:
        (directory / "target_vocab.json").write_text(
            json.dumps(pieces(vocab.target), ensure_ascii=False, indent=0)
        )
        extra = {"target_vocab_file": str(directory / "target_vocab.json"), "separate_vocabs": True}
    with warnings.catch_warnings():  # it recommends sacremoses, which it never uses to encode
        warnings.simplefilter("ignore")
        tokenizer = MarianTokenizer(
            source_spm=str(directory / "source.spm"),
            target_spm=str(directory / "target.spm"),
            vocab=str(directory / "vocab.json"),
            unk_token=vocab.source.processor.id_to_piece(vocab.source.processor.unk_id()),
            eos_token=vocab.source.processor.id_to_piece(EOS_ID),
            pad_token=vocab.source.processor.id_to_piece(PAD_ID),
            model_max_length=max_positions,
            **extra,
        )
    tokenizer.save_pretrained(str(directory))


def export_huggingface(
    checkpoint_path: str | Path, out_dir: str | Path, overwrite: bool = False
) -> Path:
    """Write `checkpoint_path` as a transformers model directory at `out_dir`; returns `out_dir`.

    The directory holds `model.safetensors`, `config.json`, `generation_config.json` (greedy,
    decoder start BOS=2, EOS=3, PAD=0) and the tokenizer: `source.spm`, `target.spm` and
    MarianTokenizer's `vocab.json`/`tokenizer_config.json`. It is written into a temporary
    directory beside `out_dir`, loaded back with `AutoModelForSeq2SeqLM`, checked to give our
    logits, and only then renamed into place, so a failed export leaves nothing behind.
    """
    transformers = _require_transformers()
    out_dir = Path(out_dir)
    prepare_output(out_dir, overwrite)
    loaded = load_model(checkpoint_path)
    model = loaded.model
    hf_model = to_huggingface(model)
    with staged(out_dir, overwrite) as tmp:
        save_huggingface(hf_model, tmp)
        _write_tokenizer(loaded.vocab, tmp, model.cfg.max_positions)
        # What users will load, checked against ours before it is published.
        check_same_logits(
            model, transformers.AutoModelForSeq2SeqLM.from_pretrained(str(tmp)).eval()
        )
    return out_dir
