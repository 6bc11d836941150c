"""Safe loading of self-contained checkpoints: weights + architecture + SentencePiece in one file.

Checkpoints are read with `torch.load(weights_only=True)`, which unpickles only tensors and
plain containers, so a checkpoint from an untrusted source cannot run code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from translate.model import ModelConfig, Transformer
from translate.module import ARTIFACT_KEY
from translate.vocab import Vocabularies


class CheckpointError(ValueError):
    """A checkpoint that cannot be used for translation; the message says why."""


@dataclass
class Translator:
    """A loaded model with its vocabularies and the settings it was trained with."""

    model: Transformer
    vocab: Vocabularies
    training_config: dict
    run_config: str | None


def read_checkpoint(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # corrupt file, or a pickle with code in it
        raise CheckpointError(f"{path}: not a loadable checkpoint ({error})") from None
    if ARTIFACT_KEY not in checkpoint or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"{path}: not a translation checkpoint (no '{ARTIFACT_KEY}' entry with the "
            "model config and vocabulary)"
        )
    return checkpoint


def load_translator(path: str | Path, device: str | torch.device = "cpu") -> Translator:
    checkpoint = read_checkpoint(path)
    artifact = checkpoint[ARTIFACT_KEY]
    vocab = Vocabularies.from_state(artifact["vocab"])
    if (len(vocab.source), len(vocab.target)) != (artifact["src_vocab_size"], artifact["tgt_vocab_size"]):
        raise CheckpointError(
            f"{path}: its SentencePiece model has {len(vocab.source)}/{len(vocab.target)} tokens "
            f"but its embeddings were built for {artifact['src_vocab_size']}/"
            f"{artifact['tgt_vocab_size']}: the vocabulary does not belong to these weights"
        )
    model = Transformer(
        ModelConfig(**artifact["model_config"]),
        artifact["src_vocab_size"], artifact["tgt_vocab_size"], shared_vocab=vocab.joint,
    )
    weights = {
        name.removeprefix("model."): value
        for name, value in checkpoint["state_dict"].items()
        if name.startswith("model.")
    }
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as error:
        raise CheckpointError(f"{path}: weights do not match the saved architecture: {error}") from None
    model.to(device).eval()
    return Translator(model, vocab, artifact.get("training_config", {}), artifact.get("run_config"))
