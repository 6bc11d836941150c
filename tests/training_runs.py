"""Training runs of the tests: translate-train on configs/tiny.yaml and the fixture corpus, in
this process or another, with a config overlay that records every training batch (`Recorder`)
and logs every step, and the readers of what a run recorded and logged."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import torch
from helpers import FIXTURE, REPO

from translate.cli.train import main as train_main
from translate.train.collate import collate


class Recorder(L.Callback):
    """One JSON line per training batch and rank: step, epoch, batch index, learning rate, loss,
    target tokens, a digest of the tensors, and the example indices of the sampler's plan for
    that position together with whether the batch really is those examples."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.row: dict = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        loader = trainer.train_dataloader
        planned = loader.batch_sampler.rank_batches()[batch_idx].tolist()
        expected = collate([loader.dataset[i] for i in planned])
        digest = hashlib.sha256()
        for key in ("src", "tgt_in", "tgt_out"):
            digest.update(batch[key].numpy().tobytes())
        self.row = {
            "step": trainer.global_step,
            "epoch": trainer.current_epoch,
            "batch_idx": batch_idx,
            "rank": trainer.global_rank,
            "lr": trainer.optimizers[0].param_groups[0]["lr"],
            "tokens": int((batch["tgt_out"] != 0).sum()),
            "digest": digest.hexdigest(),
            "indices": planned,
            "checkpoint_io": type(trainer.strategy.checkpoint_io).__name__,
            "plan_matches": all(
                torch.equal(expected[k], batch[k]) for k in ("src", "tgt_in", "tgt_out")
            ),
        }

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.row["loss"] = float(outputs["loss"])
        with open(f"{self.path}.rank{trainer.global_rank}.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(self.row) + "\n")

    def on_train_end(self, trainer, pl_module) -> None:
        flat = torch.cat([p.detach().reshape(-1) for p in pl_module.parameters()])
        torch.save(flat, f"{self.path}.rank{trainer.global_rank}.params.pt")


def read_records(run_dir: Path, rank: int = 0) -> list[dict]:
    return [
        json.loads(line)
        for line in Path(f"{run_dir}/record.rank{rank}.jsonl").read_text().splitlines()
    ]


def logged(run_dir: Path, name: str) -> dict[int, float]:
    """A metric from the CSV log, by step."""
    [metrics] = run_dir.glob("logs/*/metrics.csv")
    with open(metrics, newline="") as handle:
        return {
            int(row["step"]): float(row[name]) for row in csv.DictReader(handle) if row.get(name)
        }


def overlay(run_dir: Path, cache: Path, trainer: dict, data: dict | None = None) -> Path:
    """A config layered over configs/tiny.yaml (JSON is YAML): logs, checkpoints and the recorder in run_dir."""
    config = {
        "run_dir": str(run_dir),
        "tune_search": False,  # tested on its own (test_tuning.py)
        "trainer": {
            "log_every_n_steps": 1,
            "logger": {
                "class_path": "lightning.pytorch.loggers.CSVLogger",
                "init_args": {"save_dir": str(run_dir), "name": "logs"},
            },
            "callbacks": [
                {
                    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                    "init_args": {
                        "dirpath": str(run_dir / "checkpoints"),
                        "filename": "step{step}",
                        "every_n_train_steps": trainer.pop("every_n_train_steps", 0) or None,
                        "save_top_k": -1,
                        "save_last": True,
                        "auto_insert_metric_name": False,
                        "enable_version_counter": False,
                    },
                },
                {
                    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                    "init_args": {
                        "dirpath": str(run_dir / "checkpoints"),
                        "filename": "best-step{step}",
                        "monitor": "val_bleu",
                        "mode": "max",
                        "save_top_k": 1,
                        "auto_insert_metric_name": False,
                        "enable_version_counter": False,
                    },
                },
                {
                    "class_path": "training_runs.Recorder",
                    "init_args": {"path": str(run_dir / "record")},
                },
            ],
            **trainer,
        },
        "data": {
            "corpus_dir": str(FIXTURE),
            "cache_dir": str(cache),
            "max_tokens": 600,
            **(data or {}),
        },
    }
    path = run_dir / "overlay.yaml"
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=1))
    return path


def train_here(config: Path, subcommand: str, *extra: str) -> None:
    """`train` in this process, where Lightning is loaded already (seconds saved a run); not for
    DDP, whose launcher starts the other ranks by running this process's command line again."""
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        assert (
            train_main(
                [subcommand, "--config", "configs/tiny.yaml", "--config", str(config), *extra]
            )
            == 0
        )
    finally:
        os.chdir(cwd)


def train(
    config: Path, subcommand: str, *extra: str, timeout: int = 300
) -> subprocess.CompletedProcess:
    """`translate-train SUBCOMMAND --config configs/tiny.yaml --config CONFIG EXTRA...`, with tests/ importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(REPO)])}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.train",
            subcommand,
            "--config",
            "configs/tiny.yaml",
            "--config",
            str(config),
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result
