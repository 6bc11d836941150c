"""Safe loading of self-contained checkpoints: weights + architecture + SentencePiece in one file.

Checkpoints are read with `torch.load(weights_only=True)`, which unpickles only tensors and
plain containers, so a checkpoint from an untrusted source cannot run code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from translate.errors import UsageError

if TYPE_CHECKING:
    from translate.model.transformer import Transformer
    from translate.model.tying import TieChoice
    from translate.text.vocab import Vocabularies

ARTIFACT_KEY = "translate"  # checkpoint entry holding everything needed to translate
STARTED_FROM_KEY = "started_from"  # the model a run started from: {"path", "step", "sha256"}
SEARCH_KEY = "search"  # its entry of search settings tuned on the dev set (translate-tune)
DEFAULT_BEAM, DEFAULT_LENGTH_PENALTY = 5, 1.0  # where a checkpoint holds no tuned settings


class CheckpointError(UsageError):
    """A checkpoint that cannot be used for translation; the message says why."""


@dataclass(frozen=True)
class TrainingConfig:
    """How a model was trained (the optimisation settings of translate-train's `model:`), kept in
    its checkpoint in plain types (`to_dict`) and read back once when it loads (`from_dict`);
    `max_len_a` and `max_len_b` are also the output limit translation takes by default (at most
    a * source length + b tokens). A setting an older checkpoint lacks takes the default here,
    which is translate-train's."""

    lr: float = 7e-4
    warmup_steps: int = 4000
    lr_schedule: str = "inverse_sqrt"
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    max_len_a: float = 1.5
    max_len_b: int = 10
    optimizer: str = "adam"
    fused_optimizer: bool | None = None

    def to_dict(self) -> dict:
        """The settings as the checkpoint stores them (`torch.load(weights_only=True)` reads
        plain types only)."""
        return {**asdict(self), "betas": list(self.betas)}

    @classmethod
    def from_dict(cls, stored: object) -> TrainingConfig:
        """The settings a checkpoint stored (keys it lacks take the defaults, keys this version
        does not know are left out)."""
        known = {field.name for field in fields(cls)}
        given = {k: v for k, v in stored.items() if k in known} if isinstance(stored, dict) else {}
        if "betas" in given:
            given["betas"] = tuple(given["betas"])
        return cls(**given)


def read_checkpoint(path: str | Path, mmap: bool = False) -> dict:
    """The checkpoint's contents (tensors only, never code); `mmap` maps tensors from the file
    lazily instead of reading them, for scanning many large checkpoints."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as error:  # corrupt file, or a pickle with code in it
        if mmap:  # a legacy (non-zip) file cannot be mapped; it may still load normally
            return read_checkpoint(path)
        raise CheckpointError(f"{path}: not a loadable checkpoint ({error})") from None
    if ARTIFACT_KEY not in checkpoint or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"{path}: not a translation checkpoint (no '{ARTIFACT_KEY}' entry with the "
            "model config and vocabulary)"
        )
    return checkpoint


def translation_artifact(
    model: Transformer,
    vocab: Vocabularies,
    *,
    tie_choice: TieChoice | None = None,
    training_config: TrainingConfig | None = None,
    run_config: str | None = None,
    target_tokens: list[int] | None = None,
    target_tokens_by_language: dict[str, list[int]] | None = None,
    started_from: dict | None = None,
) -> dict:
    """The checkpoint's `ARTIFACT_KEY` entry: what translation needs beside the weights, in
    plain types, so the checkpoint stands alone (what `load_model` reads)."""
    artifact = {
        "model_config": asdict(model.cfg),
        "src_vocab_size": model.src_vocab_size,
        "tgt_vocab_size": model.tgt_vocab_size,
        "vocab": vocab.state(),
        "training_config": training_config.to_dict() if training_config is not None else {},
        "run_config": run_config,
        "target_tokens": target_tokens,
        "target_tokens_by_language": target_tokens_by_language,
    }
    if tie_choice is not None:
        artifact["tie_choice"] = asdict(tie_choice)
    if started_from is not None:  # the checkpoint a fine-tuning started from (path, step, sha256)
        artifact[STARTED_FROM_KEY] = started_from
    return artifact


def write_checkpoint(path: str | Path, model: Transformer, vocab: Vocabularies, **artifact) -> None:
    """`model` and `vocab` written atomically as translate-train saves them (weights under
    `model.`, `translation_artifact(model, vocab, **artifact)` beside): a checkpoint that
    translate-cli, translate-eval and the exporters load like a trained one."""
    from translate.files import atomic_output

    checkpoint = {
        "state_dict": {f"model.{name}": value for name, value in model.state_dict().items()},
        ARTIFACT_KEY: translation_artifact(model, vocab, **artifact),
    }
    with atomic_output(path) as handle:
        torch.save(checkpoint, handle)


# --- checkpoint averaging ---------------------------------------------------------------
AVERAGED_KEY = "averaged_from"  # marks an averaged checkpoint: [{"path", "global_step"}, ...]


def checkpoint_step(checkpoint: dict, path: str | Path) -> int:
    """The optimizer step a Lightning checkpoint was saved at (what 'the last N' is ordered by)."""
    step = checkpoint.get("global_step")
    if not isinstance(step, int):
        raise CheckpointError(
            f"{path}: no global_step recorded, so it cannot be ordered by training step"
        )
    return step


def last_checkpoints(directory: str | Path, count: int) -> list[Path]:
    """The `count` checkpoints (`*.ckpt`) of `directory` with the highest global steps, oldest first.

    Ordered by the step saved inside each file, not by file time (a copy or a restore changes
    times). Files of one step (`last.ckpt` beside `step5000.ckpt`, a best-BLEU copy) count once,
    and averaged checkpoints are skipped, so the result is `count` distinct points of training.
    """
    directory = Path(directory)
    if count < 1:
        raise CheckpointError(
            f"the number of checkpoints to average must be at least 1, got {count}"
        )
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such directory")
    by_step: dict[int, Path] = {}
    for path in sorted(directory.glob("*.ckpt")):
        checkpoint = read_checkpoint(path, mmap=True)
        if AVERAGED_KEY in checkpoint:
            continue
        step = checkpoint_step(checkpoint, path)
        # Of several files of one step, prefer a step-named one over last.ckpt (stable names).
        if step not in by_step or by_step[step].name == "last.ckpt":
            by_step[step] = path
    if len(by_step) < count:
        raise CheckpointError(
            f"{directory}: asked for the last {count} checkpoints but it holds checkpoints of only "
            f"{len(by_step)} distinct training steps ({sorted(by_step)})"
        )
    return [by_step[step] for step in sorted(by_step)[-count:]]


def _tie_groups(state_dict: dict[str, torch.Tensor]) -> dict[str, str]:
    """Each key mapped to the first key holding the same tensor (tied weights share storage)."""
    first: dict[tuple, str] = {}
    groups = {}
    for name, value in state_dict.items():
        identity = (
            value.untyped_storage().data_ptr(),
            value.storage_offset(),
            tuple(value.shape),
            value.stride(),
        )
        groups[name] = first.setdefault(identity, name)
    return groups


def _check_compatible(reference: dict, checkpoint: dict, reference_path: Path, path: Path) -> None:
    """CheckpointError unless both checkpoints have one vocabulary and one architecture."""
    ours, theirs = reference[ARTIFACT_KEY], checkpoint[ARTIFACT_KEY]
    if ours.get("vocab") != theirs.get("vocab"):
        raise CheckpointError(
            f"{path} and {reference_path} were trained with different SentencePiece vocabularies; "
            "averaging them would mix unrelated embedding rows"
        )
    for key in ("model_config", "src_vocab_size", "tgt_vocab_size"):
        if ours.get(key) != theirs.get(key):
            raise CheckpointError(
                f"{path} and {reference_path} have different architectures: {key} is "
                f"{theirs.get(key)} and {ours.get(key)}"
            )
    a, b = reference["state_dict"], checkpoint["state_dict"]
    if a.keys() != b.keys():
        differing = sorted(set(a) ^ set(b))
        raise CheckpointError(
            f"{path} and {reference_path} have different weights ({len(differing)} names in only "
            f"one of them, e.g. {differing[0]})"
        )
    for name, value in a.items():
        if value.shape != b[name].shape or value.dtype != b[name].dtype:
            raise CheckpointError(
                f"{path} and {reference_path} differ in {name}: {tuple(b[name].shape)} {b[name].dtype} "
                f"against {tuple(value.shape)} {value.dtype}"
            )
    if _tie_groups(a) != _tie_groups(b):
        raise CheckpointError(f"{path} and {reference_path} tie different weights together")


def average_checkpoints(paths: list[str | Path]) -> dict:
    """The element-wise mean of the checkpoints' weights, as a checkpoint translate-cli loads.

    Sums are kept in float64 and cast back to each tensor's dtype, so averaging many
    checkpoints does not accumulate rounding. Tied weights (one tensor under several names) are
    averaged once and stored as one tensor under all their names, so they stay identical and
    load as one Parameter. Integer tensors are taken from the newest checkpoint. The result
    holds no optimizer state: it is for translation, evaluation and export, not for resuming.
    The vocabulary, config and target tokens are those of the newest checkpoint (by step).
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    # Memory-mapped: the tensors are read from the files when summed, not held N times over.
    loaded = []
    for path in map(Path, paths):
        checkpoint = read_checkpoint(path, mmap=True)
        loaded.append((checkpoint_step(checkpoint, path), path, checkpoint))
    newest_step, newest_path, reference = max(loaded, key=lambda item: item[0])
    groups = _tie_groups(reference["state_dict"])
    sums: dict[str, torch.Tensor] = {}
    for _, path, checkpoint in loaded:
        _check_compatible(reference, checkpoint, newest_path, path)
        for name, value in checkpoint["state_dict"].items():
            if groups[name] != name or not value.is_floating_point():
                continue
            if name in sums:
                sums[name] += value.to(torch.float64)
            else:
                sums[name] = value.to(torch.float64, copy=True)
    averaged: dict[str, torch.Tensor] = {}
    for name, value in reference["state_dict"].items():
        owner = groups[name]
        if owner != name:
            averaged[name] = averaged[owner]  # the same tensor object: saved once, still tied
        elif name in sums:
            averaged[name] = (sums.pop(name) / len(loaded)).to(value.dtype)
        else:
            averaged[name] = value.clone()
    return {
        "state_dict": averaged,
        ARTIFACT_KEY: reference[ARTIFACT_KEY],
        "global_step": newest_step,
        "epoch": reference.get("epoch", 0),
        "pytorch-lightning_version": reference.get("pytorch-lightning_version"),
        AVERAGED_KEY: [{"path": str(path), "global_step": step} for step, path, _ in loaded],
    }
