"""The confidence of a translation against its sentence chrF (`score.confidence`), and
translate-eval --confidence, which reads it from the search as translate-cli --scores writes it."""

import json
import math
import statistics

import pytest
from helpers import FIXTURE, joint_vocab, small_config, trained_copy_checkpoint

from translate.cli.evaluate import main as eval_main
from translate.cli.translate import main as translate_main
from translate.score.confidence import BAD_CHRF, _ranks, confidence_report
from translate.score.metrics import sentence_scores
from translate.text.corpus import read_lines


def test_ranks_give_ties_their_mean_rank():
    assert _ranks([0.3, 0.1, 0.3, 0.2]) == [2.5, 0.0, 2.5, 1.0]
    assert _ranks([5.0, 5.0, 5.0]) == [1.0, 1.0, 1.0]


def test_a_confidence_that_orders_the_lines_as_chrf_does_correlates_fully():
    references = [["das ist ein Haus", "ein kleiner Hund", "die Katze", "Guten Morgen"]]
    hypotheses = ["das ist ein Haus", "ein Hund", "Katze", "Abend"]
    sources = ["this is a house", "a small dog", "the cat", "good morning"]
    chrf = sentence_scores(hypotheses, references, ("chrf",))["chrf"]
    assert len(set(chrf)) == 4
    rising = [score / 100 for score in chrf]  # in chrF's order, not in proportion
    squared = [c * c for c in rising]
    report = confidence_report(squared, hypotheses, references, sources)
    assert report.spearman == pytest.approx(1.0)
    assert report.pearson == pytest.approx(statistics.correlation(squared, chrf))
    assert report.pearson < 1.0
    falling = confidence_report([1 - c for c in rising], hypotheses, references, sources)
    assert falling.spearman == pytest.approx(-1.0)


def test_flagging_catches_the_bad_lines_under_the_threshold_of_its_false_alarms():
    # ten good lines (identical to their references) and five bad ones (nothing in common)
    references = [[f"Zeile Nummer {i} ist hier" for i in range(15)]]
    hypotheses = references[0][:10] + ["xq"] * 5
    sources = [f"line {i}" for i in range(15)]
    good = [0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95]
    bad = [0.10, 0.20, 0.52, 0.58, 0.70]
    report = confidence_report(good + bad, hypotheses, references, sources)
    assert report.lines == 15 and report.bad == pytest.approx(5 / 15)
    ten, twenty = report.flagging
    # 10% of the ten good ones: flagged under the second lowest good confidence, 0.55
    assert (ten.false_alarms, ten.threshold, ten.caught) == (0.1, 0.55, 3 / 5)
    # 20%: under the third, 0.60, which flags the fourth bad one too
    assert (twenty.false_alarms, twenty.threshold, twenty.caught) == (0.2, 0.60, 4 / 5)
    assert "0.550: 60.0% of them, 10% of the others" in report.summary()


def test_blank_sources_are_left_out_and_too_few_lines_refused():
    references = [["ein Haus", "", "ein Hund"]]
    report = confidence_report(
        [0.9, 1.0, 0.2], ["ein Haus", "", "eine Katze"], references, ["a house", " ", "a dog"]
    )
    assert report.lines == 2 and report.spearman == pytest.approx(1.0)
    # one good line and one bad: no threshold flags a share of one good line but none
    assert [(f.false_alarms, f.threshold, f.caught) for f in report.flagging] == [(0, 0.9, 1)] * 2
    good = ["ein Haus", "ein Hund"]
    alike = confidence_report([0.9, 0.8], good, [["ein Haus", "ein Hunde"]], ["a", "b"])
    assert alike.bad == 0 and alike.flagging == ()  # no bad line to flag
    with pytest.raises(ValueError, match="same sentence chrF"):
        confidence_report([0.9, 0.8], good, [good], ["a", "b"])
    with pytest.raises(ValueError, match="two or more"):
        confidence_report([0.9, 1.0], ["ein Haus", ""], [["ein Haus", ""]], ["a house", ""])


@pytest.fixture(scope="module")
def copy_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("copy") / "model.ckpt"
    trained_copy_checkpoint(path, small_config(True, "all"), joint_vocab(), train_steps=60)
    return path


def test_translate_eval_reports_the_confidences_translate_cli_writes(copy_model, tmp_path, capsys):
    source, reference = FIXTURE / "test.en", FIXTURE / "test.de"
    scored = tmp_path / "scored.de"
    common = ["--checkpoint", str(copy_model), "--beam", "2"]
    written = ["--source", str(source), "--output", str(scored), "--scores", "--quiet"]
    assert translate_main([*common, *written]) == 0
    lines = read_lines(scored)
    confidences = [float(line.split("\t", 1)[0]) for line in lines]
    hypotheses = [line.split("\t", 1)[1] for line in lines]
    capsys.readouterr()
    code = eval_main(
        [*common, "--source", str(source), "--reference", str(reference), "--confidence", "--json"]
    )
    out = capsys.readouterr().out
    assert code == 0
    shown = json.loads(out)["confidence"]
    expected = confidence_report(
        confidences, hypotheses, [read_lines(reference)], read_lines(source)
    )
    assert shown["lines"] == expected.lines and shown["bad_chrf"] == BAD_CHRF
    # translate-cli rounds the confidences it writes to 4 decimals
    assert shown["pearson"] == pytest.approx(expected.pearson, abs=1e-3)
    assert shown["spearman"] == pytest.approx(expected.spearman, abs=2e-2)
    assert -1 <= shown["pearson"] <= 1 and not math.isnan(shown["spearman"])


def test_confidence_needs_a_checkpoint(tmp_path, capsys):
    hypotheses = tmp_path / "hyp.de"
    hypotheses.write_text("Hallo\n", encoding="utf-8")
    code = eval_main(
        ["--hypotheses", str(hypotheses), "--reference", str(hypotheses), "--confidence"]
    )
    assert code == 2
    assert "--confidence reads the search's confidences: give it with --checkpoint" in (
        capsys.readouterr().err
    )
