"""translate-batch: one file on several processes (2 gloo processes on the CPU) gives the bytes
translate-cli gives, and a stopped run resumes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURE, tiny_fit

from translate.cli.batch import main as batch_main
from translate.cli.translate import main as translate_main
from translate.train.batch_prediction import PartWriter, chunk_bounds, shard


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return tiny_fit(
        tmp_path_factory.mktemp("batch"), "--trainer.max_steps", "40", "--tune_search", "false"
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    lines = (FIXTURE / "train.en").read_text().splitlines()[:57] + ["", "\t"]
    path = tmp_path_factory.mktemp("input") / "in.en"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def cli_output(checkpoint: Path, source: Path, capsys) -> str:
    assert (
        translate_main(
            [
                "--checkpoint",
                str(checkpoint),
                "--source",
                str(source),
                "--quiet",
                "--chunk-lines",
                "8",
                "--beam",
                "2",
            ]
        )
        == 0
    )
    return capsys.readouterr().out


def test_every_chunk_goes_to_one_process_in_order():
    chunks = chunk_bounds(59, 8)
    assert chunks[0] == (0, 8) and chunks[-1] == (56, 59) and len(chunks) == 8
    for world in (1, 2, 3, 8, 11):
        assert [c for rank in range(world) for c in shard(chunks, rank, world)] == chunks


@pytest.mark.slow  # two processes, each loading Lightning
def test_two_processes_write_what_translate_cli_writes(checkpoint, source, tmp_path, capsys):
    output = tmp_path / "out.de"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.batch",
            "--checkpoint",
            str(checkpoint),
            "--source",
            str(source),
            "--output",
            str(output),
            "--devices",
            "2",
            "--accelerator",
            "cpu",
            "--chunk-lines",
            "8",
            "--beam",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "59 lines translated by 2 processes" in result.stderr
    assert output.read_text() == cli_output(checkpoint, source, capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.de"], "parts left behind"


def test_a_stopped_run_resumes_where_it_stopped(checkpoint, source, tmp_path, capsys, monkeypatch):
    output = tmp_path / "out.de"
    argv = [
        "--checkpoint",
        str(checkpoint),
        "--source",
        str(source),
        "--output",
        str(output),
        "--accelerator",
        "cpu",
        "--chunk-lines",
        "8",
        "--beam",
        "2",
    ]
    written = PartWriter.write_on_batch_end

    def stop_after_three(self, trainer, module, prediction, *args, **kwargs):
        written(self, trainer, module, prediction, *args, **kwargs)
        if module.part.lines_done >= 24:
            raise KeyboardInterrupt

    monkeypatch.setattr(PartWriter, "write_on_batch_end", stop_after_three)
    assert batch_main(argv) == 130
    assert (
        not output.exists()
        and (tmp_path / "out.de.part-0-of-1.partial").read_text().count("\n") == 24
    )
    monkeypatch.setattr(PartWriter, "write_on_batch_end", written)
    assert batch_main(argv) == 2
    assert "add --resume to continue it" in capsys.readouterr().err
    assert batch_main(argv + ["--beam", "3", "--resume"]) == 2
    assert "was written for another --beam than this run's" in " ".join(
        capsys.readouterr().err.split()
    )
    assert batch_main(argv + ["--resume"]) == 0
    assert output.read_text() == cli_output(checkpoint, source, capsys)
