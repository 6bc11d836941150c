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
from translate.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocabularies


class CheckpointError(ValueError):
    """A checkpoint that cannot be used for translation; the message says why."""


@dataclass
class Translator:
    """A loaded model with its vocabularies and the settings it was trained with."""

    model: Transformer
    vocab: Vocabularies
    training_config: dict
    run_config: str | None
    target_tokens: list[int] | None = None  # ids seen on the target side of the training data
    path: str | None = None

    def target_token_mask(self) -> torch.Tensor:
        """Bool over the target vocabulary: the training targets' ids plus UNK, BOS and EOS
        (never PAD), for `allowed_tokens` in search."""
        name = self.path or "the checkpoint"
        if self.target_tokens is None:
            raise CheckpointError(
                f"{name}: the checkpoint does not record its target-side tokens (the ids seen on "
                "the target side of its training data), so the output cannot be restricted to "
                "them; translate without restricting, or use a checkpoint saved with them"
            )
        size = self.model.tgt_vocab_size
        outside = [i for i in self.target_tokens if not 0 <= i < size]
        if outside:
            raise CheckpointError(
                f"{name}: its recorded target-side tokens include ids outside the target "
                f"vocabulary of {size} tokens (e.g. {outside[0]})"
            )
        mask = torch.zeros(size, dtype=torch.bool)
        mask[torch.tensor(self.target_tokens, dtype=torch.long)] = True
        mask[[UNK_ID, BOS_ID, EOS_ID]] = True
        mask[PAD_ID] = False
        return mask


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
    target_tokens = artifact.get("target_tokens")
    if isinstance(target_tokens, torch.Tensor):
        target_tokens = target_tokens.tolist()
    target_tokens = [int(i) for i in target_tokens] if isinstance(target_tokens, (list, tuple)) else None
    return Translator(
        model, vocab, artifact.get("training_config", {}), artifact.get("run_config"),
        target_tokens=target_tokens, path=str(path),
    )
