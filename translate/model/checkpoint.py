"""Safe loading of self-contained checkpoints: weights + architecture + SentencePiece in one file.

Checkpoints are read with `torch.load(weights_only=True)`, which unpickles only tensors and
plain containers, so a checkpoint from an untrusted source cannot run code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from translate.errors import UsageError
from translate.model.packing import pack_linear_layers
from translate.model.quantize import quantize_int8
from translate.model.transformer import ModelConfig, Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocabularies

ARTIFACT_KEY = "translate"  # checkpoint entry holding everything needed to translate
SEARCH_KEY = "search"  # its entry of search settings tuned on the dev set (translate-tune)
DEFAULT_BEAM, DEFAULT_LENGTH_PENALTY = 5, 1.0  # where a checkpoint holds no tuned settings


class CheckpointError(UsageError):
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
    target_tokens_by_language: dict[str, list[int]] | None = None  # the same, per target language
    search: dict | None = None  # the search settings tuned for this model (translate-tune)
    _data: tuple[str | None, dict] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def search_defaults(self) -> dict:
        """Beam size and length penalty to translate with where no flag says otherwise: those
        tuned on the dev set and stored in the checkpoint, else beam 5 and GNMT alpha 1.0."""
        tuned = self.search or {}
        return {
            "beam": int(tuned.get("beam", DEFAULT_BEAM)),
            "length_penalty": float(tuned.get("length_penalty", DEFAULT_LENGTH_PENALTY)),
        }

    def corpus_split(
        self, split: str | None, direction: tuple[str, str]
    ) -> tuple[list[str], list[str], str]:
        """Source and reference lines of one direction of a split of the corpus the model was
        trained on, and their description; an error naming the checkpoint where that corpus is
        not at hand."""
        from translate.text.corpus import BUNDLED_CORPUS, read_split

        data = self.data_settings()
        name = data.get(f"{split or 'test'}_split") or split or "test"
        own = {
            tuple(d[:2]): d[2] for d in data.get("directions") or [] if len(d) > 2
        }  # a direction's own corpus
        corpus = own.get(tuple(direction)) or data.get("corpus_dir") or BUNDLED_CORPUS
        try:
            pairs = read_split(
                corpus, name, *direction, data.get("corpus_format") or "text", data.get("hf_config")
            )
        except UsageError as error:
            raise UsageError(
                f"{error} ({self.path} was trained on this corpus; give --source and "
                "--reference to score other text)"
            ) from None
        if not pairs:
            raise UsageError(
                f"split '{name}' of {corpus} has no {direction[0]}→{direction[1]} pairs"
            )
        description = f"{direction[0]}→{direction[1]}, split '{name}' of {corpus}"
        return [src for src, _ in pairs], [tgt for _, tgt in pairs], description

    def data_settings(self) -> dict:
        """The `data` section of the run's saved config (corpus, languages, splits, lengths),
        or {} where the checkpoint does not hold one; parsed once and shared, so only read it."""
        # A server asks on every request: parsing the YAML each time was most of its own CPU time.
        if self._data is None or self._data[0] is not self.run_config:
            self._data = (self.run_config, data_settings(self.run_config))
        return self._data[1]

    def trained_max_length(self) -> int | None:
        """The longest sentence, in tokens, the run trained on (`data.max_length` of its saved
        config), or None where the checkpoint does not say."""
        length = self.data_settings().get("max_length")
        return length if type(length) is int and length > 0 else None

    def languages(self) -> tuple[str, str] | None:
        """(source, target) language codes the run trained on, or None where not recorded."""
        data = self.data_settings()
        src, tgt = data.get("src_lang"), data.get("tgt_lang")
        return (src, tgt) if isinstance(src, str) and isinstance(tgt, str) else None

    def directions(self) -> list[tuple[str, str]]:
        """The (source, target) directions the model was trained on: one for a bilingual model,
        several for a many-to-many one (which chooses its output language by a tag)."""
        from translate.text.languages import english_centric

        data = self.data_settings()
        if data.get("directions"):
            return [tuple(direction) for direction in data["directions"]]
        if data.get("languages"):
            return english_centric(data.get("src_lang") or "en", data["languages"])
        return [self.languages()] if self.languages() else []

    def multilingual(self) -> bool:
        return bool(self.vocab.target.tag_ids()) and bool(
            self.data_settings().get("directions") or self.data_settings().get("languages")
        )

    def tag_position(self) -> str:
        """Where a many-to-many model reads its target-language tag: "source" or "decoder"."""
        return self.data_settings().get("lang_tag") or "decoder"

    def target_languages(self) -> list[str]:
        return list(dict.fromkeys(tgt for _, tgt in self.directions()))

    def target_token_mask(self, lang: str | None = None) -> torch.Tensor:
        """Bool over the target vocabulary: the training targets' ids (of `lang`'s targets, for a
        many-to-many model) plus UNK and EOS (never PAD, BOS or a language tag, which the decoder
        does not produce), for `allowed_tokens` in search."""
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


def run_settings(run_config: str | None) -> dict:
    """A run's saved config (the YAML translate-train resolved), or {} where there is none."""
    try:
        settings = yaml.safe_load(run_config or "")
    except yaml.YAMLError:
        return {}
    return settings if isinstance(settings, dict) else {}


def data_settings(run_config: str | None) -> dict:
    """The `data` section of a run's saved config, or {} where there is none."""
    data = run_settings(run_config).get("data")
    return data if isinstance(data, dict) else {}


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


def load_translator(
    path: str | Path, device: str | torch.device = "cpu", pack: bool = True, quantize: str = "none"
) -> Translator:
    """A checkpoint ready to decode on `device`: weights checked against the vocabulary, the
    model in eval mode and, on the CPU with `pack`, its linear layers packed for speed
    (`translate.model.packing`; the same results, 1e-5), or with `quantize="int8"` made int8
    (`translate.model.quantize`)."""
    checkpoint = read_checkpoint(path)
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
    model = Transformer(
        ModelConfig(**artifact["model_config"]),
        artifact["src_vocab_size"],
        artifact["tgt_vocab_size"],
        shared_vocab=vocab.joint,
    )
    weights = {
        name.removeprefix("model."): value
        for name, value in checkpoint["state_dict"].items()
        if name.startswith("model.")
    }
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as error:
        raise CheckpointError(
            f"{path}: weights do not match the saved architecture: {error}"
        ) from None
    model.to(device).eval()
    if quantize == "int8":
        model = quantize_int8(model)
    elif pack:
        pack_linear_layers(model)  # a no-op off the CPU or without oneDNN
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
    return Translator(
        model,
        vocab,
        artifact.get("training_config", {}),
        artifact.get("run_config"),
        target_tokens=target_tokens,
        path=str(path),
        target_tokens_by_language=by_language,
        search=artifact.get(SEARCH_KEY) if isinstance(artifact.get(SEARCH_KEY), dict) else None,
    )


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
