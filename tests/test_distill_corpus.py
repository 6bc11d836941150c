"""scripts/distill_corpus.py: the training sources translated by a teacher, one target line
per source line, the dev and test splits copied with their human references, resumable."""

from __future__ import annotations

import gzip
import shutil

import distill_corpus
import pytest
from helpers import FIXTURE, fixture_lines

from translate.text.corpus import read_lines


def test_a_corpus_is_distilled_line_for_line(checkpoint_path, tmp_path, capsys):
    out = tmp_path / "distilled"
    argv = ["--teacher", str(checkpoint_path), "--corpus", str(FIXTURE), "--out", str(out)]
    assert distill_corpus.main([*argv, "--", "--beam", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "distilled 400 training sources in " in printed and " sentences/s" in printed
    targets = read_lines(out / "train.de.gz")
    assert len(targets) == len(fixture_lines("train.en")) == 400
    assert targets != fixture_lines("train.de")  # the teacher's, not the references
    assert read_lines(out / "train.en") == fixture_lines("train.en")
    for name in ("dev.en", "dev.de", "test.en", "test.de"):
        assert (out / name).read_bytes() == (FIXTURE / name).read_bytes()
    readme = (out / "README.md").read_text()
    assert str(checkpoint_path) in readme and "sentences/s" in readme
    # The same output, byte for byte, when run again on the same teacher.
    first = gzip.decompress((out / "train.de.gz").read_bytes())
    shutil.rmtree(out)
    assert distill_corpus.main([*argv, "--", "--beam", "1", "--quiet"]) == 0
    assert gzip.decompress((out / "train.de.gz").read_bytes()) == first


def test_bad_arguments_are_one_line_errors(checkpoint_path, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        distill_corpus.main(
            [
                "--teacher",
                str(checkpoint_path),
                "--corpus",
                str(tmp_path),
                "--out",
                str(tmp_path / "o"),
            ]
        )
    assert stopped.value.code == 2
    assert f"--corpus {tmp_path}: no train.en or train.en.gz" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        distill_corpus.main(
            ["--teacher", str(checkpoint_path), "--corpus", str(FIXTURE), "--out", str(FIXTURE)]
        )
    assert "--out must be another directory than --corpus" in capsys.readouterr().err
