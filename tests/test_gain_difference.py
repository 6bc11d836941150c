"""Whether a system's gain over its baseline differs between two line-aligned test sets: checked
against sacrebleu's public corpus scores on the same resamples, and on contrasts whose answer is
known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from translate.score.significance import Contrast, gain_difference
from translate.text.corpus import read_lines

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "libreoffice_small"
RESAMPLES = 50


def drop_words(lines: list[str], every: int) -> list[str]:
    return [" ".join(w for i, w in enumerate(line.split()) if i % every != 1) for line in lines]


@pytest.fixture(scope="module")
def references() -> list[str]:
    return read_lines(FIXTURE / "test.de")


def contrast(name: str, references: list[str], baseline: int, system: int) -> Contrast:
    """Words dropped every `baseline`-th and every `system`-th: the larger, the better."""
    return Contrast(
        name, drop_words(references, baseline), drop_words(references, system), references, "de"
    )


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_the_difference_equals_sacrebleu_scores_of_the_same_resamples(
    references, metric, monkeypatch
):
    monkeypatch.setenv("SACREBLEU_SEED", "7")
    first, second = contrast("a", references, 2, 5), contrast("b", references, 3, 4)
    result = gain_difference(first, second, metric, resamples=RESAMPLES)

    score = sacrebleu.corpus_bleu if metric == "bleu" else sacrebleu.corpus_chrf
    indices = np.random.default_rng(7).choice(
        len(references), size=(RESAMPLES, len(references)), replace=True
    )

    def gain(c: Contrast, rows) -> float:
        pick = [[lines[i] for i in rows] for lines in (c.baseline, c.system, c.references)]
        return score(pick[1], [pick[2]]).score - score(pick[0], [pick[2]]).score

    everything = range(len(references))
    assert result.gains == pytest.approx((gain(first, everything), gain(second, everything)))
    differences = np.array([gain(first, rows) - gain(second, rows) for rows in indices])
    observed = result.gains[0] - result.gains[1]
    assert result.absolute.observed == pytest.approx(observed)
    low, high = np.percentile(differences, [2.5, 97.5])
    assert (result.absolute.low, result.absolute.high) == pytest.approx((low, high))
    shifted = np.abs(differences - differences.mean())
    assert result.absolute.p == pytest.approx(
        (np.sum(shifted >= abs(observed)) + 1) / (RESAMPLES + 1)
    )


def test_a_contrast_against_itself_differs_by_nothing(references):
    same = contrast("a", references, 2, 4)
    result = gain_difference(same, same, "bleu", resamples=RESAMPLES)
    assert result.absolute.observed == result.absolute.low == result.absolute.high == 0
    assert result.absolute.p == 1.0 and result.relative.p == 1.0


def test_a_large_gain_against_none_is_shown_and_order_flips_the_sign(references):
    large, none = contrast("large", references, 2, 20), contrast("none", references, 3, 3)
    result = gain_difference(large, none, "bleu", resamples=200)
    assert result.gains[1] == 0 and result.gains[0] > 10
    assert result.absolute.low > 0 and result.absolute.p < 0.05
    flipped = gain_difference(none, large, "bleu", resamples=200)
    assert flipped.absolute.observed == pytest.approx(-result.absolute.observed)
    assert flipped.absolute.high == pytest.approx(-result.absolute.low)


def test_test_sets_of_different_lengths_are_refused_by_name(references):
    short = contrast("ja", references[:-1], 2, 4)
    n = len(references)
    with pytest.raises(ValueError, match=rf"de and ja: .* one line count .*\[{n - 1}, {n}\]"):
        gain_difference(contrast("de", references, 2, 4), short, "bleu", resamples=RESAMPLES)
