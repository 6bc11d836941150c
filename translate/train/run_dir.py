"""Where a training run lives, and which of its checkpoints to resume from.

A run directory is derived from the config file and the data, so that training the same config
on other data (`--data.corpus_dir`, other languages) never overwrites the checkpoint of an
earlier run: `runs/default` for `configs/default.yaml` as written, `runs/default-bible-es-en`
when the command line points it at `bible/` in Spanish-English.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from translate.model.checkpoint import (
    ARTIFACT_KEY,
    AVERAGED_KEY,
    CheckpointError,
    checkpoint_step,
    read_checkpoint,
)
from translate.text.corpus import BUNDLED_CORPUS
from translate.text.run_data import run_settings

RUNS = Path("runs")
# The data settings that say which corpus and direction a model learns.
DATA_IDENTITY = {"corpus_dir", "corpus_format", "hf_config", "src_lang", "tgt_lang", "train_split"}


def bundled_corpus_name() -> str:
    return BUNDLED_CORPUS.name


def _setting(data, key: str, default=None):
    value = data.get(key, default) if isinstance(data, Mapping) or hasattr(data, "get") else default
    return default if value is None else value


def data_identity(data) -> tuple:
    """(corpus, format, hf config, source, target, train split) of a `data` section, with the
    class defaults filled in and a local corpus made absolute, so that equal data compares equal."""
    corpus = _setting(data, "corpus_dir")
    if corpus and Path(corpus).exists():
        corpus = str(Path(corpus).resolve())
    if corpus and Path(corpus) == BUNDLED_CORPUS.resolve():
        corpus = None
    return (
        corpus,
        _setting(data, "corpus_format", "text"),
        _setting(data, "hf_config"),
        _setting(data, "src_lang", "en"),
        _setting(data, "tgt_lang", "de"),
        _setting(data, "train_split", "train"),
    )


def corpus_name(corpus: str | None) -> str:
    """A short, path-safe name of a corpus directory or dataset."""
    if not corpus:
        return bundled_corpus_name()
    return Path(str(corpus).rstrip("/\\")).name.replace(":", "_") or "corpus"


def default_run_dir(configs: Iterable[Path], data, data_given: bool) -> Path:
    """runs/CONFIG (the config files' names, joined by '+'), with -CORPUS-SRC-TGT added when the
    command line changed which data is trained on."""
    name = "+".join(Path(config).stem for config in configs) or "translate"
    if data_given:
        corpus, _, hf_config, src, tgt, _ = data_identity(data)
        name += f"-{corpus_name(corpus)}" + (f"-{hf_config}" if hf_config else "") + f"-{src}-{tgt}"
    return RUNS / name


def checkpoint_settings(path: str | Path) -> dict:
    """The resolved config a checkpoint's run was trained with ({} where it does not record one)."""
    checkpoint = read_checkpoint(path, mmap=True)
    return run_settings(checkpoint.get(ARTIFACT_KEY, {}).get("run_config"))


def checkpoint_data(path: str | Path) -> dict:
    """The `data` settings a checkpoint was trained with ({} where it does not record them)."""
    data = checkpoint_settings(path).get("data")
    return data if isinstance(data, dict) else {}


def newest_checkpoint(directories: Iterable[Path]) -> tuple[Path, int] | None:
    """The complete checkpoint with the highest training step in `directories`, and its step.

    `last.ckpt` is not always the newest: a run killed between saving `step=150.ckpt` and
    `last.ckpt` leaves last.ckpt at an earlier step. A file that cannot be read whole is skipped;
    averaged checkpoints (no optimizer state) cannot be resumed and are skipped too.
    """
    best: tuple[Path, int] | None = None
    for directory in directories:
        for path in sorted(Path(directory).glob("*.ckpt")):
            try:
                checkpoint = read_checkpoint(path, mmap=True)
                step = checkpoint_step(checkpoint, path)
            except CheckpointError:
                continue
            if AVERAGED_KEY in checkpoint or "optimizer_states" not in checkpoint:
                continue
            if best is None or step > best[1] or (step == best[1] and path.name == "last.ckpt"):
                best = (path, step)
    return best
