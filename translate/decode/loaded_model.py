"""A loaded model ready to translate: the model, its vocabularies, and what the run it came from
says (its data as a `RunData`: languages, directions, tags, length limits; its tuned search
settings), read from the checkpoint once when it loads, so that a request flows one way:
checkpoint -> loaded model -> pipeline -> search -> text."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from translate.decode.settings import SearchDefaults, SentinelIds
from translate.model.checkpoint import (
    ARTIFACT_KEY,
    DEFAULT_BEAM,
    DEFAULT_LENGTH_PENALTY,
    SEARCH_KEY,
    CheckpointError,
    TrainingConfig,
    read_checkpoint,
)
from translate.model.packing import pack_linear_layers
from translate.model.quantize import quantize_int8
from translate.model.transformer import ModelConfig, Transformer
from translate.model.tying import TieChoice
from translate.text.protected import SENTINEL_PIECES, SENTINELS, SWAPPED_SENTINELS, holds_digit
from translate.text.run_data import RunData
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocabularies

if TYPE_CHECKING:
    from translate.decode.ctranslate2_search import CTranslate2Search


@dataclass(frozen=True)
class ModelShape:
    """A model's architecture and vocabulary sizes without its weights: what a process that
    reads a checkpoint but does not translate with it needs (translate-serve's server process,
    beside the model process that holds the weights)."""

    cfg: ModelConfig
    src_vocab_size: int
    tgt_vocab_size: int


@dataclass
class LoadedModel:
    """A loaded model with its vocabularies and the settings it was trained with (`model` a
    `ModelShape` where it was loaded without its weights)."""

    model: Transformer | ModelShape
    vocab: Vocabularies
    training_config: TrainingConfig
    run_config: str | None
    target_tokens: list[int] | None = None  # ids seen on the target side of the training data
    path: str | None = None
    target_tokens_by_language: dict[str, list[int]] | None = None  # the same, per target language
    search: dict | None = None  # the search settings tuned for this model (translate-tune)
    tie_choice: TieChoice | None = None  # the tie trained and what chose it (older: None)
    # The CTranslate2 engine where chosen (`engine.choose_engine`); None: the PyTorch search.
    ctranslate2: CTranslate2Search | None = field(default=None, compare=False)
    engine: str = "the PyTorch search"  # the engine searching, and why (`choose_engine`)
    _data: tuple[str | None, RunData] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _digit_ids: tuple[int, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _masks: dict[str | None, torch.Tensor] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def search_defaults(self) -> SearchDefaults:
        """Beam size and length penalty to translate with where no flag says otherwise: those
        tuned on the dev set and stored in the checkpoint, else beam 5 and GNMT alpha 1.0."""
        tuned = self.search or {}
        return SearchDefaults(
            beam=int(tuned.get("beam", DEFAULT_BEAM)),
            length_penalty=float(tuned.get("length_penalty", DEFAULT_LENGTH_PENALTY)),
        )

    @property
    def data(self) -> RunData:
        """What the run trained on (`RunData`), read from the checkpoint's saved config once and
        kept while `run_config` stays the same object."""
        # A server asks on every request: parsing the YAML each time was most of its own CPU time.
        if self._data is None or self._data[0] is not self.run_config:
            self._data = (self.run_config, RunData.from_run_config(self.run_config))
        return self._data[1]

    def sentinel_ids(self) -> SentinelIds | None:
        """The sentinels the search writes exactly once each (`steps.SentinelRule`), or None
        where the model does not protect spans (a vocabulary from before the swapped forms has
        only the plain ones)."""
        if not self.data.protect_spans:
            return None
        source = [self.vocab.source.piece_id(piece) for piece in SENTINELS]
        if None in source:
            return None
        target = [
            (index, k)
            for pieces in (SENTINELS, SWAPPED_SENTINELS)
            for k, piece in enumerate(pieces)
            if (index := self.vocab.target.piece_id(piece)) is not None
        ]
        return SentinelIds(tuple(source), tuple(i for i, _ in target), tuple(k for _, k in target))

    def digit_ids(self) -> tuple[int, ...]:
        """The target ids whose piece writes a digit (sentinels and language tags aside). A model
        that protects spans reads every digit of a line inside a sentinel (`protected.find_spans`
        leaves none outside a span), so its search never writes one of its own: no digit run
        can be lost to the model's own digits, nor loop (`pipeline.search_plan`). Made once."""
        if self._digit_ids is None:
            target = self.vocab.target
            kept = {
                *SENTINEL_PIECES,
                *(target.processor.id_to_piece(i) for i in target.tag_ids().values()),
            }
            self._digit_ids = tuple(
                i
                for i in range(len(target))
                if holds_digit(piece := target.processor.id_to_piece(i)) and piece not in kept
            )
        return self._digit_ids

    def multilingual(self) -> bool:
        """A many-to-many model: one that chooses its output language by a tag."""
        return bool(self.vocab.target.tag_ids()) and self.data.many_to_many

    def target_token_mask(self, lang: str | None = None) -> torch.Tensor:
        """Bool over the target vocabulary: the training targets' ids (of `lang`'s targets, for a
        many-to-many model) plus UNK and EOS (never PAD, BOS or a language tag, which the decoder
        does not produce), for `allowed_tokens` in search; made once a language and kept (treat
        it as read-only)."""
        if lang not in self._masks:
            self._masks[lang] = self._target_token_mask(lang)
        return self._masks[lang]

    def _target_token_mask(self, lang: str | None) -> torch.Tensor:
        name = self.path or "the checkpoint"
        tokens = self.target_tokens
        if lang is not None and self.target_tokens_by_language is not None:
            tokens = self.target_tokens_by_language.get(lang)
        if tokens is None:
            raise CheckpointError(
                f"{name}: the checkpoint does not record its target-side tokens (the ids seen on "
                f"the target side of its training data{f' in {lang}' if lang else ''}), so the output "
                "cannot be restricted to them; translate without restricting, or use a checkpoint saved with them"
            )
        size = self.model.tgt_vocab_size
        outside = [i for i in tokens if not 0 <= i < size]
        if outside:
            raise CheckpointError(
                f"{name}: its recorded target-side tokens include ids outside the target "
                f"vocabulary of {size} tokens (e.g. {outside[0]})"
            )
        mask = torch.zeros(size, dtype=torch.bool)
        mask[torch.tensor(tokens, dtype=torch.long)] = True
        mask[[UNK_ID, EOS_ID]] = True
        tags = self.vocab.target.tag_ids().values() if self.vocab is not None else ()
        mask[[PAD_ID, BOS_ID, *tags]] = False
        return mask


def load_model(
    path: str | Path,
    device: str | torch.device = "cpu",
    pack: bool = True,
    quantize: str = "none",
    weights: bool = True,
) -> LoadedModel:
    """A checkpoint ready to decode on `device`: weights checked against the vocabulary, the
    model in eval mode and, on the CPU with `pack`, its linear layers packed for speed
    (`translate.model.packing`; the same results, 1e-5), or with `quantize="int8"` made int8
    (`translate.model.quantize`). With `weights` False, all but the weights (the file mapped,
    the weights never read): the vocabulary, the run's settings and a `ModelShape`."""
    checkpoint = read_checkpoint(path, mmap=not weights)
    artifact = checkpoint[ARTIFACT_KEY]
    vocab = Vocabularies.from_state(artifact["vocab"])
    if (len(vocab.source), len(vocab.target)) != (
        artifact["src_vocab_size"],
        artifact["tgt_vocab_size"],
    ):
        raise CheckpointError(
            f"{path}: its SentencePiece model has {len(vocab.source)}/{len(vocab.target)} tokens "
            f"but its embeddings were built for {artifact['src_vocab_size']}/"
            f"{artifact['tgt_vocab_size']}: the vocabulary does not belong to these weights"
        )
    sizes = (
        ModelConfig(**artifact["model_config"]),
        artifact["src_vocab_size"],
        artifact["tgt_vocab_size"],
    )
    if not weights:
        return _loaded_model(ModelShape(*sizes), vocab, artifact, path)
    state = {
        name.removeprefix("model."): value
        for name, value in checkpoint["state_dict"].items()
        if name.startswith("model.")
    }
    try:
        model = Transformer(
            *sizes, shared_vocab=vocab.joint, target_only_ids=Transformer.target_only_ids_of(state)
        )
        model.load_state_dict(state, strict=True)
    except (RuntimeError, ValueError) as error:
        raise CheckpointError(
            f"{path}: weights do not match the saved architecture: {error}"
        ) from None
    model.fold_target_rows()  # inference reads plain matrices, the same values
    model.to(device).eval()
    if quantize == "int8":
        model = quantize_int8(model)
    elif pack:
        pack_linear_layers(model)  # a no-op off the CPU or without oneDNN
    return _loaded_model(model, vocab, artifact, path)


def _loaded_model(
    model: Transformer | ModelShape, vocab: Vocabularies, artifact: dict, path: str | Path
) -> LoadedModel:
    """The checkpoint's `artifact` (its run, target-side tokens, tuned search) around `model`."""
    target_tokens = artifact.get("target_tokens")
    if isinstance(target_tokens, torch.Tensor):
        target_tokens = target_tokens.tolist()
    target_tokens = (
        [int(i) for i in target_tokens] if isinstance(target_tokens, (list, tuple)) else None
    )
    by_language = artifact.get("target_tokens_by_language")
    by_language = (
        {str(lang): [int(i) for i in ids] for lang, ids in by_language.items()}
        if isinstance(by_language, dict)
        else None
    )
    return LoadedModel(
        model,
        vocab,
        TrainingConfig.from_dict(artifact.get("training_config")),
        artifact.get("run_config"),
        target_tokens=target_tokens,
        path=str(path),
        target_tokens_by_language=by_language,
        search=artifact.get(SEARCH_KEY) if isinstance(artifact.get(SEARCH_KEY), dict) else None,
        tie_choice=TieChoice(**artifact["tie_choice"])
        if isinstance(artifact.get("tie_choice"), dict)
        else None,
    )
