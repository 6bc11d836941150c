"""Export a checkpoint to other inference stacks: Hugging Face `transformers` and CTranslate2.

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

`export_ctranslate2` builds a CTranslate2 model directly from the checkpoint (CTranslate2 states
pre- or post-norm, ties and the position table explicitly), for every norm placement and tie.

Neither format has weights shared between layers or a map between the decoder embedding and the
residual stream, so models with `share_layer_attention`, `share_encoder_decoder_layers` or
`embedding_adapter` are refused with an `ExportError` by both exports.
"""  # noqa: E501 - the table above is one row a line

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from translate.errors import UsageError
from translate.model.checkpoint import load_translator
from translate.model.transformer import TIE_MODES, MultiHeadAttention, Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, SentencePieceVocab, Vocabularies

INSTALL_HINT = "pip install transformers safetensors (or, in the project directory, pip install -e '.[export]')"


class ExportError(UsageError):
    """A checkpoint that cannot be exported exactly; the message says why."""


def _require_transformers():
    try:
        import transformers
    except ImportError:
        raise ExportError(
            f"exporting to Hugging Face needs the transformers package: {INSTALL_HINT}"
        ) from None
    return transformers


SHARING_VARIANTS = ("share_layer_attention", "share_encoder_decoder_layers", "embedding_adapter")


def refuse_sharing_variants(model: Transformer, target: str) -> None:
    """ExportError for the sharing options `target` cannot express (copies would lose the tie)."""
    used = [name for name in SHARING_VARIANTS if getattr(model.cfg, name, False)]
    if used:
        raise ExportError(
            f"this model uses {', '.join(f'{name}: true' for name in used)}, which {target} cannot "
            "express (it has no weights shared between layers and no map between the decoder's "
            "embedding and its layers); such models are used with translate-cli only"
        )


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
    if not TIE_MODES[cfg.tie_embeddings]["src_tgt"]:
        raise ExportError(
            f"a pre-norm model (norm_first: true) exports as PegasusForConditionalGeneration, "
            f"whose encoder and decoder always share one token embedding, but this model has "
            f"tie_embeddings={cfg.tie_embeddings!r} (separate encoder and decoder embeddings). "
            "Pre-norm models export with tie_embeddings 'all' or 'src_tgt' only; post-norm "
            "models (MarianMTModel) export with every tie mode."
        )
    return "PegasusForConditionalGeneration"


def huggingface_config(model: Transformer, architecture: str):
    """The transformers config of the matching architecture (special ids, sizes, ReLU, scaling)."""
    transformers = _require_transformers()
    cfg = model.cfg
    tie = TIE_MODES[cfg.tie_embeddings]
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
        tie_word_embeddings=tie["tgt_output"],
        architectures=[architecture],
    )
    if architecture == "MarianMTModel":
        return transformers.MarianConfig(
            vocab_size=model.src_vocab_size,
            decoder_vocab_size=model.tgt_vocab_size,
            share_encoder_decoder_embeddings=tie["src_tgt"],
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
    if TIE_MODES[model.cfg.tie_embeddings]["src_tgt"]:
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


def _prepare_output(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise ExportError(
            f"{out_dir} exists and is not empty; pass overwrite=True (--overwrite) to replace it"
        )


def _publish(tmp: Path, out_dir: Path) -> None:
    """Rename the finished directory into place; an old one is moved aside, then deleted.

    The temporary directory (and some files in it) were created private; the published one
    gets the permissions of an ordinary directory under the current umask.
    """
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    for path in tmp.iterdir():
        if path.is_file():
            path.chmod(0o666 & ~umask)
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old."))
        os.replace(out_dir, old / out_dir.name)
    os.replace(tmp, out_dir)
    if old is not None:
        shutil.rmtree(old)


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
    _prepare_output(out_dir, overwrite)
    translator = load_translator(checkpoint_path)
    model = translator.model
    hf_model = to_huggingface(model)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp."))
    try:
        save_huggingface(hf_model, tmp)
        _write_tokenizer(translator.vocab, tmp, model.cfg.max_positions)
        # What users will load, checked against ours before it is published.
        check_same_logits(
            model, transformers.AutoModelForSeq2SeqLM.from_pretrained(str(tmp)).eval()
        )
        _prepare_output(out_dir, overwrite)  # nobody filled it meanwhile
        _publish(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _require_ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise ExportError(
            "exporting to CTranslate2 needs the ctranslate2 package: pip install ctranslate2"
        ) from None
    return ctranslate2


def ctranslate2_spec(model: Transformer, vocab: Vocabularies):
    """A CTranslate2 `TransformerSpec` holding our weights, built directly (no transformers).

    CTranslate2's own transformers converters cannot be used on the directory that
    `export_huggingface` writes: its Marian loader assumes the OPUS-MT layout (a decoder that
    starts from a zero embedding, a padding row at the end of the vocabulary) and its Pegasus
    loader starts the decoder from the padding token. The spec below states our architecture
    explicitly instead: pre- or post-norm, ReLU, sqrt(d_model) scaling, our own (interleaved)
    position table, LayerNorm epsilon 1e-5, decoder start BOS, and EOS appended to the source.
    """
    refuse_sharing_variants(model, "a CTranslate2 model")
    _require_ctranslate2()
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
    spec.config.decoder_start_token = target.id_to_piece(BOS_ID)
    spec.config.add_source_eos = True  # translate_batch takes the source pieces without EOS
    spec.config.layer_norm_epsilon = 1e-5  # torch.nn.LayerNorm's default, used by our model
    return spec


def export_ctranslate2(
    checkpoint_path: str | Path,
    out_dir: str | Path,
    overwrite: bool = False,
    quantization: str | None = None,
) -> Path:
    """Write `checkpoint_path` as a CTranslate2 model directory at `out_dir`; returns `out_dir`.

    Every tie mode and both norm placements are supported. The directory holds CTranslate2's
    `model.bin`, `config.json` and vocabularies, plus `source.spm`/`target.spm` for
    tokenization. `ctranslate2.Translator(out_dir).translate_batch(pieces)` takes the source
    SentencePiece pieces without EOS (the model appends it) and returns target pieces.
    `quantization` is CTranslate2's (e.g. "int8", "float16"); None keeps float32 weights.
    Written into a temporary directory beside `out_dir`, then renamed into place.
    """
    ctranslate2 = _require_ctranslate2()
    from ctranslate2.converters.converter import Converter

    out_dir = Path(out_dir)
    _prepare_output(out_dir, overwrite)
    translator = load_translator(checkpoint_path)
    spec = ctranslate2_spec(translator.model, translator.vocab)

    class _SpecConverter(Converter):
        def _load(self):
            return spec

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp."))
    try:
        _SpecConverter().convert(str(tmp), quantization=quantization, force=True)
        (tmp / "source.spm").write_bytes(translator.vocab.source.model_bytes)
        (tmp / "target.spm").write_bytes(translator.vocab.target.model_bytes)
        ctranslate2.Translator(str(tmp), device="cpu")  # loads, or fails here and not for the user
        _prepare_output(out_dir, overwrite)
        _publish(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
