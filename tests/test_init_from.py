"""`translate-train fit --init_from CKPT`: a run that starts from a trained model's weights,
model settings and vocabulary, with a fresh optimizer, on a new corpus (fine-tuning), optionally
mixed with a share of the original corpus; and how the vocabulary covers the new text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from helpers import FIXTURE, REPO, fixture_lines, joint_vocab, tiny_fit

from translate.cli.train import main
from translate.model.checkpoint import ARTIFACT_KEY, STARTED_FROM_KEY
from translate.text.protected import hash_share
from translate.text.vocab_coverage import coverage, describe
from translate.train.prepared import MIX_SALT

TINY = str(REPO / "configs" / "tiny.yaml")
SNOWMAN = "☃"  # a character the fixture's vocabulary has no piece for


@pytest.fixture(scope="module")
def start(tmp_path_factory) -> Path:
    """A tiny model trained on the fixture corpus, with an ffn_dim of its own (48, where
    configs/tiny.yaml says 64)."""
    root = tmp_path_factory.mktemp("start")
    return tiny_fit(root, "--model.model.ffn_dim", "48", "--tune_search", "false")


@pytest.fixture(scope="module")
def new_corpus(tmp_path_factory) -> Path:
    """A 'new domain': the fixture's test and dev lines as training data, a snowman in each
    source line."""
    directory = tmp_path_factory.mktemp("new_corpus")
    for lang in ("en", "de"):
        lines = fixture_lines(f"test.{lang}") + fixture_lines(f"dev.{lang}")
        if lang == "en":
            lines = [f"{line} {SNOWMAN}" for line in lines]
        (directory / f"train.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        shutil.copy(FIXTURE / f"dev.{lang}", directory / f"dev.{lang}")
    return directory


def fine_tune(root: Path, start: Path, corpus: Path, *flags: str) -> tuple[int, str]:
    argv = [
        "fit", "--config", TINY, "--init_from", str(start),
        "--data.corpus_dir", str(corpus), "--data.cache_dir", str(root / "cache"),
        "--run_dir", str(root / "run"), "--tune_search", "false", "--data.max_tokens", "600",
        "--trainer.max_steps", "2", "--trainer.val_check_interval", "2", *flags,
    ]  # fmt: skip
    return main(argv)


def read(path: Path) -> dict:
    return torch.load(path, weights_only=True, map_location="cpu")


def test_a_run_starts_from_the_checkpoints_weights_settings_and_vocabulary(
    start, new_corpus, tmp_path, capfd
):
    # A learning rate of 0: Adam moves nothing, so the weights after two updates are the
    # checkpoint's exactly if they were loaded; a resumed optimizer would report step 32.
    code = fine_tune(tmp_path, start, new_corpus, "--model.lr", "0")
    err = capfd.readouterr().err
    assert code == 0, err[-2000:]
    assert f"starting from {start.resolve()} (step 30)" in err
    assert "settings from it: model.model.ffn_dim=48" in err
    [coverage_line] = [line for line in err.splitlines() if "vocabulary of " in line]
    # 80 snowmen, and a few characters of the test and dev lines that training never saw.
    assert f"have no piece and are read and written as unknown: '{SNOWMAN}', " in coverage_line
    assert "pieces a word (the text it was trained on: " in coverage_line
    original, tuned = read(start), read(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert tuned["global_step"] == 2
    assert tuned[ARTIFACT_KEY]["vocab"] == original[ARTIFACT_KEY]["vocab"]
    assert tuned[ARTIFACT_KEY]["model_config"] == original[ARTIFACT_KEY]["model_config"]
    for name, value in original["state_dict"].items():
        assert torch.equal(tuned["state_dict"][name], value), name
    record = tuned[ARTIFACT_KEY][STARTED_FROM_KEY]
    assert record["path"] == str(start.resolve()) and record["step"] == 30
    assert len(record["sha256"]) == 64
    # Decoding may still write every piece the original training targets used.
    assert set(original[ARTIFACT_KEY]["target_tokens"]) <= set(tuned[ARTIFACT_KEY]["target_tokens"])
    assert "init_from: " in tuned[ARTIFACT_KEY]["run_config"]


def test_the_weights_move_and_a_stopped_run_resumes(start, new_corpus, tmp_path, capfd):
    assert fine_tune(tmp_path, start, new_corpus) == 0
    checkpoint = tmp_path / "run" / "checkpoints" / "last.ckpt"
    first = read(checkpoint)
    original = read(start)["state_dict"]
    moved = [n for n, value in first["state_dict"].items() if not torch.equal(value, original[n])]
    assert len(moved) > len(original) // 2
    capfd.readouterr()
    code = fine_tune(tmp_path, start, new_corpus, "--trainer.max_steps", "4", "--ckpt_path", "last")
    err = capfd.readouterr().err
    assert code == 0, err[-2000:]
    resumed = read(checkpoint)
    assert resumed["global_step"] == 4
    assert resumed[ARTIFACT_KEY][STARTED_FROM_KEY]["path"] == str(start.resolve())


def test_mixing_adds_the_chosen_share_of_the_original_corpus(start, new_corpus, tmp_path, capfd):
    code = fine_tune(tmp_path, start, new_corpus, "--data.mix_share", "0.5")
    err = capfd.readouterr().err
    assert code == 0, err[-2000:]
    chosen = sum(hash_share(MIX_SALT + line) < 0.5 for line in fixture_lines("train.en"))
    assert 120 < chosen < 280
    assert f"mixed in: {chosen:,} training pairs of {FIXTURE.resolve()} (data.mix_share 0.5)" in err
    assert "data.mix_corpus=" in err


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--model.model.d_model", "64"],
            "--model.model.d_model 64 contradicts --init_from {start}, whose model has d_model 32: "
            "a run started from a checkpoint keeps its model; leave the flag out",
        ),
        (
            ["--data.vocab_size", "2000"],
            "--data.vocab_size 2000 contradicts --init_from {start}, whose vocabulary has "
            "vocab_size 1000",
        ),
        (["--data.mix_share", "1.5"], "data.mix_share must be a share from 0 to 1"),
    ],
)
def test_contradicting_settings_are_one_line_errors(
    start, new_corpus, tmp_path, capfd, flags, message
):
    code = fine_tune(tmp_path, start, new_corpus, *flags)
    err = capfd.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert message.format(start=start.resolve()) in err.strip().splitlines()[-1]


def test_dropout_may_change_and_init_from_belongs_to_fit(start, new_corpus, tmp_path, capfd):
    assert fine_tune(tmp_path, start, new_corpus, "--model.model.dropout", "0.3") == 0
    capfd.readouterr()
    code = main(["test", "--config", TINY, "--init_from", str(start)])
    err = capfd.readouterr().err
    assert code == 2
    assert "--init_from starts a training run (fit), not test" in err.strip().splitlines()[-1]


def test_mixing_needs_a_corpus(tmp_path, capfd):
    code = main(
        ["fit", "--config", TINY, "--data.corpus_dir", str(FIXTURE), "--data.mix_share", "0.2",
         "--data.cache_dir", str(tmp_path / "cache"), "--run_dir", str(tmp_path / "run")]
    )  # fmt: skip
    err = capfd.readouterr().err
    assert code == 2
    assert "data.mix_share needs the corpus to mix in: --data.mix_corpus DIR, or --init_from" in err


def test_coverage_counts_characters_without_a_piece_and_pieces_a_word():
    vocab = joint_vocab().source
    lines = fixture_lines("train.en")[:20]
    plain = coverage(vocab, lines)
    assert not plain.missing
    assert plain.words == sum(len(line.split()) for line in lines)
    assert plain.pieces == sum(len(vocab.encode([line])[0]) for line in lines)
    assert plain.pieces_per_word > 1.0
    odd = coverage(vocab, [f"{line} {SNOWMAN}{SNOWMAN}" for line in lines])
    assert odd.missing == {SNOWMAN: 40}
    assert odd.characters == plain.characters + 40
    line = describe(odd, plain)
    assert line.startswith(f"40 of {odd.characters:,} characters (")
    assert f"(the text it was trained on: {plain.pieces_per_word:.2f})" in line
    assert describe(plain, None).startswith(f"every character has a piece ({plain.characters:,})")
