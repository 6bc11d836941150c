"""Stop and resume through `translate-train fit --ckpt_path`: the run carries on as if never stopped.

Both runs go through the real CLI with `configs/tiny.yaml` on the fixture corpus, small batches
(about 20 per epoch), gradient accumulation and dropout; the checkpoint falls in the middle of
the second epoch, so the resumed loader must find both the right epoch order and its position.
`Recorder` (also used by test_ddp.py) writes what every training batch really was.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from translate.cli.train import main as train_main
from translate.train.data_module import collate

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).parent / "fixtures" / "libreoffice_small"


class Recorder(L.Callback):
    """One JSON line per training batch and rank: step, epoch, batch index, learning rate, loss,
    target tokens, a digest of the tensors, and the example indices of the sampler's plan for
    that position together with whether the batch really is those examples."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.row: dict = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        loader = trainer.train_dataloader
        planned = loader.batch_sampler._rank_batches()[batch_idx].tolist()
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
                    "class_path": "test_resume.Recorder",
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


RESUME_TRAINER = {
    "max_steps": 30,
    "accumulate_grad_batches": 2,
    "val_check_interval": 20,
    "every_n_train_steps": 15,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """An uninterrupted 30-step run that also saves step 15, and a run resumed from step 15."""
    root = tmp_path_factory.mktemp("resume")
    whole, resumed = root / "whole", root / "resumed"
    train_here(overlay(whole, root / "cache", dict(RESUME_TRAINER)), "fit")
    checkpoint = whole / "checkpoints" / "step15.ckpt"
    assert checkpoint.is_file(), sorted(p.name for p in (whole / "checkpoints").iterdir())
    train_here(
        overlay(resumed, root / "cache", dict(RESUME_TRAINER)),
        "fit",
        "--ckpt_path",
        str(checkpoint),
    )
    return whole, resumed


@pytest.mark.numerical
def test_resume_continues_step_schedule_data_order_and_loss(runs):
    whole, resumed = runs
    before = read_records(whole)
    after = read_records(resumed)
    assert all(r["plan_matches"] for r in before + after), "a batch was not the sampler's batch"
    # the checkpoint lies in the middle of the second epoch, so this checks a mid-epoch resume
    first = after[0]
    assert first["step"] == 15 and first["epoch"] == 1 and first["batch_idx"] > 0, first
    tail = [
        r
        for r in before
        if r["step"] >= 15 and (r["epoch"], r["batch_idx"]) >= (first["epoch"], first["batch_idx"])
    ]
    assert len(tail) == len(after) and len(after) > 20
    for expected, got in zip(tail, after):
        assert (got["step"], got["epoch"], got["batch_idx"]) == (
            expected["step"],
            expected["epoch"],
            expected["batch_idx"],
        )
        assert got["indices"] == expected["indices"] and got["digest"] == expected["digest"], (
            "data order differs"
        )
        assert got["lr"] == expected["lr"], f"learning rate differs at step {got['step']}"
    # Same float operations in the same order on the same CPU (and threads): the curves agree bitwise.
    # A lost Adam state, a restarted schedule, other dropout masks or another batch all move the loss
    # by 1e-3 or more (checked: without the loader state or the reseeding this test fails).
    assert [r["loss"] for r in after] == [r["loss"] for r in tail]
    # the final weights (after the resumed Adam state and schedule) agree too
    final = [
        torch.load(run / "checkpoints" / "last.ckpt", weights_only=True) for run in (whole, resumed)
    ]
    assert final[0]["global_step"] == final[1]["global_step"] == 30
    for name, value in final[0]["state_dict"].items():
        assert torch.equal(final[1]["state_dict"][name], value), name


def test_every_checkpoint_kind_holds_the_resolved_config(runs):
    whole, resumed = runs
    # translate-train saves through the crash-safe writer unless a config names another
    assert {r["checkpoint_io"] for r in read_records(whole)} == {"AtomicCheckpointIO"}
    for run in (whole, resumed):
        names = sorted(p.name for p in (run / "checkpoints").glob("*.ckpt"))
        assert (
            "last.ckpt" in names
            and "step30.ckpt" in names
            and any(n.startswith("best-") for n in names)
        ), names
        for name in names:
            artifact = torch.load(run / "checkpoints" / name, weights_only=True)["translate"]
            assert artifact["run_config"] and "max_tokens: 600" in artifact["run_config"], name
            assert "accumulate_grad_batches: 2" in artifact["run_config"], name


def test_effective_batch_is_the_tokens_of_all_accumulated_batches(runs):
    whole, _ = runs
    records = read_records(whole)
    logged_tokens = logged(whole, "train_batch_tgt_tokens")
    by_step: dict[int, int] = {}
    for record in records:
        by_step[record["step"]] = by_step.get(record["step"], 0) + record["tokens"]
    assert set(logged_tokens) == set(by_step) and len(by_step) == 30
    assert logged_tokens == {step: float(tokens) for step, tokens in by_step.items()}
    assert max(by_step.values()) > max(r["tokens"] for r in records), "no step summed two batches"
