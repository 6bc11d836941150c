"""A run started from a trained model (`translate-train fit --init_from CKPT`): the checkpoint's
weights, tie layout, model settings and SentencePiece vocabulary, with a fresh optimizer and
learning-rate schedule, on a new corpus encoded with that vocabulary.

Settings are settled before anything is built (`settle`): the checkpoint's model settings and
vocabulary settings replace the config file's; one given on the command line that contradicts
the checkpoint is an error, except dropout, which a fine-tuning may change. The new
checkpoints record where they started (`StartingPoint.record`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path

import torch

from translate.errors import UsageError
from translate.files import file_digest
from translate.model.checkpoint import ARTIFACT_KEY, read_checkpoint
from translate.model.transformer import ModelConfig
from translate.text.protected import SENTINEL_PIECES
from translate.text.run_data import run_settings
from translate.text.vocab import Vocabularies

# Model settings a run started from a checkpoint may change: they shape no weight.
FREE_MODEL_SETTINGS = frozenset({"dropout", "attention_dropout", "activation_dropout"})
# The data settings that made the vocabulary (SentencePiece's training options).
VOCAB_SETTINGS = ("vocab_size", "vocab_type", "joint_vocab", "character_coverage", "split_digits")


@dataclass(frozen=True)
class StartingPoint:
    """What a run takes from the checkpoint it starts from (the weights are read when loaded)."""

    path: Path
    step: int
    model: dict
    vocab_state: dict[str, bytes]
    data: dict
    target_tokens_by_language: dict[str, list[int]] | None

    @classmethod
    def read(cls, path: str | Path) -> StartingPoint:
        path = Path(path)
        checkpoint = read_checkpoint(path, mmap=True)
        artifact = checkpoint[ARTIFACT_KEY]
        if not isinstance(artifact.get("model_config"), dict) or not artifact.get("vocab"):
            raise UsageError(
                f"--init_from {path}: the checkpoint records no model settings or vocabulary"
            )
        data = run_settings(artifact.get("run_config")).get("data")
        return cls(
            path=path.resolve(),
            step=int(checkpoint.get("global_step") or 0),
            model=dict(artifact["model_config"]),
            vocab_state=dict(artifact["vocab"]),
            data=data if isinstance(data, dict) else {},
            target_tokens_by_language=artifact.get("target_tokens_by_language"),
        )

    @cached_property
    def vocabularies(self) -> Vocabularies:
        """The SentencePiece models, loaded once for every use."""
        return Vocabularies.from_state(self.vocab_state)

    def weights(self) -> dict[str, torch.Tensor]:
        """The Transformer's weights (the state_dict entries under `model.`)."""
        state = read_checkpoint(self.path)["state_dict"]
        return {name[6:]: value for name, value in state.items() if name.startswith("model.")}

    def record(self) -> dict:
        """What a checkpoint of the new run stores of its start."""
        return {"path": str(self.path), "step": self.step, "sha256": file_digest(self.path)}

    def vocab_facts(self) -> dict:
        """The vocabulary settings as the vocabulary itself has them."""
        vocab = self.vocabularies
        facts = {key: self.data[key] for key in VOCAB_SETTINGS if key in self.data}
        facts["vocab_size"] = len(vocab.target)
        facts["joint_vocab"] = vocab.joint
        return facts

    def has_sentinels(self) -> bool:
        return self.vocabularies.source.piece_id(SENTINEL_PIECES[0]) is not None


def settle(config, start: StartingPoint, given_model: set[str], given_data: set[str]) -> list[str]:
    """The run's settings made those of `start` (config: the fit subcommand's namespace;
    given_model, given_data: the `model.model.*` and `data.*` settings on the command line):
    its model settings and vocabulary settings; `data.vocab_from` the checkpoint; with
    `data.mix_share`, the original corpus to mix in. Returns the settings taken, as
    `key=value`; raises UsageError where the command line contradicts the checkpoint."""
    where = f"--init_from {start.path}"
    model, taken = config.model.model, []
    for field in fields(ModelConfig):
        key = field.name
        if key not in start.model or key in FREE_MODEL_SETTINGS:
            continue
        theirs, ours = start.model[key], model.get(key)
        if ours == theirs:
            continue
        # tie_embeddings auto asks for a choice, which the checkpoint has made.
        if key in given_model and not (key == "tie_embeddings" and ours == "auto"):
            raise UsageError(
                f"--model.model.{key} {ours} contradicts {where}, whose model has {key} {theirs}: "
                "a run started from a checkpoint keeps its model; leave the flag out"
            )
        model[key] = theirs
        taken.append(f"model.model.{key}={theirs}")
    data = config.data
    for key, theirs in start.vocab_facts().items():
        ours = data.get(key)
        if ours == theirs:
            continue
        if key in given_data:
            raise UsageError(
                f"--data.{key} {ours} contradicts {where}, whose vocabulary has {key} {theirs}: "
                "a run started from a checkpoint keeps its vocabulary; leave the flag out"
            )
        data[key] = theirs
        taken.append(f"data.{key}={theirs}")
    if data.get("protect_spans") and not start.has_sentinels():
        if "protect_spans" in given_data:
            raise UsageError(
                f"--data.protect_spans {data.protect_spans} needs the sentinel pieces, which the "
                f"vocabulary of {where} lacks: leave the flag out"
            )
        data.protect_spans = 0.0
        taken.append("data.protect_spans=0.0")
    data.vocab_from = str(start.path)
    if data.get("mix_share") and not data.get("mix_corpus"):
        data.mix_corpus = original_corpus(config, start)
        taken.append(f"data.mix_corpus={data.mix_corpus}")
    return taken


def original_corpus(config, start: StartingPoint) -> str:
    """The corpus `start` was trained on, as `data.mix_corpus` (read in this run's format)."""
    from translate.text.corpus import BUNDLED_CORPUS

    theirs = start.data.get("corpus_format") or "text"
    if theirs != config.data.corpus_format:
        raise UsageError(
            f"--data.mix_share: the corpus of --init_from {start.path} is in format {theirs}, "
            f"this run's in {config.data.corpus_format}; give --data.mix_corpus a copy in "
            f"{config.data.corpus_format}"
        )
    return str(start.data.get("corpus_dir") or BUNDLED_CORPUS)
