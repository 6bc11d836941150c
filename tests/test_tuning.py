"""The length penalty chosen on the dev set: the choice, its place in the checkpoint, its use."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from helpers import FIXTURE, tiny_fit

from translate.cli.translate import main as translate_main
from translate.cli.tune import main as tune_main
from translate.decode import tuning
from translate.decode.loaded_model import load_model
from translate.score.scored_text import ScoredText


def fake_scores(table: dict):
    """`score` that reads (BLEU, brevity penalty) of each alpha from `table`; greedy gets (15, 1)."""

    def score(loaded, jobs, beam, alpha, batch_tokens):
        bleu, bp = table[alpha] if beam > 1 else (15.0, 1.0)
        return {
            "beam": beam,
            "length_penalty": alpha,
            "bleu": bleu,
            "chrf": bleu * 2,
            "brevity_penalty": bp,
        }

    return score


@pytest.mark.parametrize(
    "table, chosen",
    [
        (
            {0.0: (20.0, 0.80), 1.0: (19.0, 0.96), 2.0: (18.5, 0.99)},
            1.0,
        ),  # the best BLEU that is long enough
        (
            {0.0: (20.0, 0.80), 1.0: (19.0, 0.90), 2.0: (18.5, 0.93)},
            2.0,
        ),  # none long enough: the longest
    ],
)
def test_the_best_bleu_among_settings_that_do_not_cut_translations_short(
    monkeypatch, table, chosen
):
    monkeypatch.setattr(tuning, "score", fake_scores(table))
    settings = tuning.tune_length_penalty(
        None,
        [ScoredText(["a"], [["b"]], ["b"], ("en", "de"), "one line")],
        beam=4,
        candidates=list(table),
    )
    assert settings["length_penalty"] == chosen and settings["beam"] == 4
    assert [row["length_penalty"] for row in settings["candidates"]] == list(table)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """configs/tiny.yaml on the fixture corpus: fit ends by tuning the last checkpoint."""
    return tiny_fit(tmp_path_factory.mktemp("tune"), "--trainer.max_steps", "60")


def test_fit_ends_with_the_tuned_search_in_the_last_checkpoint(trained, capfd):
    search = torch.load(trained, weights_only=True)["translate"]["search"]
    assert search["beam"] == 5 and search["length_penalty"] in tuning.CANDIDATES
    assert search["sentences"] == 40 and len(search["candidates"]) == len(tuning.CANDIDATES)
    assert asdict(load_model(trained).search_defaults()) == {
        "beam": 5,
        "length_penalty": search["length_penalty"],
    }


def test_translate_tune_writes_the_choice_that_translate_cli_then_uses(trained, tmp_path, capsys):
    checkpoint = tmp_path / "model.ckpt"
    shutil.copy(trained, checkpoint)
    assert (
        tune_main(
            [
                "--checkpoint",
                str(checkpoint),
                "--candidates",
                "3.0",
                "--beam",
                "3",
                "--sentences",
                "10",
            ]
        )
        == 0
    )
    assert "| beam 3, alpha 3.0 (chosen) |" in capsys.readouterr().out
    assert asdict(load_model(checkpoint).search_defaults()) == {"beam": 3, "length_penalty": 3.0}
    source = tmp_path / "in.en"
    source.write_text(
        "".join(line + "\n" for line in (FIXTURE / "test.en").read_text().splitlines()[:12])
    )
    outputs = []
    for flags in ([], ["--beam", "3", "--length-penalty", "3.0"]):
        assert (
            translate_main(
                ["--checkpoint", str(checkpoint), "--source", str(source), "--quiet", *flags]
            )
            == 0
        )
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_translate_tune_refuses_what_it_cannot_do(trained, capsys):
    assert tune_main(["--checkpoint", str(trained), "--beam", "1"]) == 2
    assert "--beam must be at least 2 to tune a length penalty" in capsys.readouterr().err
    assert tune_main(["--checkpoint", str(trained), "--candidates", "1.0", "nan"]) == 2
    assert "--candidates nan: length penalties must be between 0 and 5" in capsys.readouterr().err
