"""translate-eval's comparisons, metrics, named test sets, sentence scores and plot, checked
against sacrebleu's own command line on the same files; and the gain difference between two
line-aligned test sets, against sacrebleu's corpus scores of the same resamples."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from helpers import FIXTURE, random_tied_checkpoint
from sacrebleu_sets import eval_process, sacrebleu_cache

from translate.cli.evaluate import main as eval_main
from translate.score.plot import length_buckets
from translate.score.significance import Contrast, gain_difference
from translate.text.corpus import read_lines

RESAMPLES = 50  # the gain difference's bootstrap, small enough to recompute with sacrebleu


def one_line_error(err: str, *parts: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for part in parts:
        assert part in lines[0], lines[0]


def drop_words(lines: list[str], every: int) -> list[str]:
    """A deterministic imperfect system: drop every `every`-th word of each line."""
    return [" ".join(w for i, w in enumerate(line.split()) if i % every != 1) for line in lines]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def systems(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("systems")
    refs = read_lines(FIXTURE / "test.de")
    return {
        "ref": FIXTURE / "test.de",
        "ref2": write(directory / "ref2.de", drop_words(refs, 9)),  # a second, other reference
        "a": write(directory / "a.de", drop_words(refs, 3)),
        "b": write(directory / "b.de", drop_words(refs, 4)),
        "c": write(directory / "c.de", drop_words(refs, 3)[:20] + drop_words(refs, 5)[20:]),
    }


def sacrebleu_cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "sacrebleu", *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SACREBLEU_FORMAT": "text"},
    ).stdout


def cli_table(text: str) -> list[list[float]]:
    """The numbers of each system's rows of sacrebleu's paired-test table, in order."""
    systems, numbers = [], None
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        name = line.split("│")[1].strip()
        if name == "System":  # the header
            continue
        values = [float(x) for x in re.findall(r"-?\d+\.\d+", "│".join(line.split("│")[2:]))]
        if name:
            numbers = values
            systems.append(numbers)
        else:
            numbers.extend(values)  # the p-value line under a system's scores
    return systems


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_compare_equals_sacrebleu_paired_tests(systems, capsys, test):
    files = [str(systems[name]) for name in ("a", "b", "c")]
    code = eval_main(
        ["--compare", *files, "--reference", str(systems["ref"]), "--metrics", "bleu,chrf,ter"]
        + ["--json"]
    )
    assert code == 0
    ours = json.loads(capsys.readouterr().out)
    flag = "--paired-bs" if test == "bs" else "--paired-ar"
    cli = cli_table(
        sacrebleu_cli(
            str(systems["ref"]), "-i", *files, "-m", "bleu", "chrf", "ter", flag, "-w", "4", "-nc"
        )
    )
    assert len(cli) == 3
    for index, system in enumerate(files):
        expected = []
        for metric in ("bleu", "chrf", "ter"):
            r = next(x for x in ours["results"] if x["system"] == system and x["metric"] == metric)
            expected += [r["score"], r["mean"], r["ci"]] if test == "bs" else [r["score"]]
        if index:  # the CLI prints the p-values under the scores
            for metric in ("bleu", "chrf", "ter"):
                r = next(
                    x for x in ours["results"] if x["system"] == system and x["metric"] == metric
                )
                expected.append(r["p_bootstrap"] if test == "bs" else r["p_randomization"])
        assert cli[index] == [round(x, 4) for x in expected], system
    # the three systems differ, and the tests see it where the difference is large
    b = next(x for x in ours["results"] if x["system"] == files[1] and x["metric"] == "bleu")
    assert b["p_bootstrap"] < 0.05 and b["p_randomization"] < 0.05
    assert ours["bootstrap_resamples"] == 1000 and ours["randomization_trials"] == 10000


def test_compare_table_marks_the_baseline_and_significance(systems, capsys):
    files = [str(systems["a"]), str(systems["a"]), str(systems["b"])]
    assert eval_main(["--compare", *files, "--reference", str(systems["ref"])]) == 2
    one_line_error(capsys.readouterr().err, "names a system twice")
    assert eval_main(["--compare", str(systems["a"]), "--reference", str(systems["ref"])]) == 2
    one_line_error(capsys.readouterr().err, "two or more systems")
    assert eval_main(["--compare", str(systems["a"]), str(systems["b"])]) == 2
    one_line_error(capsys.readouterr().err, "needs --reference (or --test-set)")
    short = write(systems["a"].parent / "short.de", read_lines(systems["a"])[:-1])
    code = eval_main(
        ["--compare", str(systems["a"]), str(short), "--reference", str(systems["ref"])]
    )
    assert code == 2
    one_line_error(capsys.readouterr().err, "short.de has 39 lines", "test.de has 40")

    assert eval_main(["--compare", files[0], files[2], "--reference", str(systems["ref"])]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| system | BLEU | p (bs) | p (ar) | chrF2 |")
    assert rows[1].startswith(f"| baseline: {files[0]} |")
    assert rows[2].startswith(f"| {files[2]} |") and rows[2].count(" *") == 4
    # the same output under another name: no significance claimed, whatever sacrebleu's p
    same = write(systems["a"].parent / "same.de", read_lines(systems["a"]))
    assert eval_main(["--compare", files[0], str(same), "--reference", str(systems["ref"])]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {same}")]
    assert row.count("the baseline's output") == 2 and " *" not in row
    assert "bs:1000|seed:12345" in table


def test_metrics_and_several_references_equal_sacrebleu(systems, capsys):
    args = ["--hypotheses", str(systems["b"]), "--reference", str(systems["ref"])]
    args += ["--reference", str(systems["ref2"]), "--metrics", "bleu,chrf,chrf++,ter", "--json"]
    assert eval_main(args) == 0
    ours = json.loads(capsys.readouterr().out)
    both = [str(systems["ref"]), str(systems["ref2"]), "-i", str(systems["b"])]
    cli = sacrebleu_cli(*both, "-m", "bleu", "chrf", "ter")
    cli += sacrebleu_cli(*both, "-m", "chrf", "--chrf-word-order", "2")
    scores = dict(re.findall(r"^\s*(BLEU|chrF2\+\+|chrF2|TER)\|\S+ = (\d+\.\d)", cli, re.M))
    assert ours["references"] == 2 and ours["bleu_signature"].startswith("nrefs:2|")
    assert f"{ours['bleu']:.1f}" == scores["BLEU"]
    assert f"{ours['chrf']:.1f}" == scores["chrF2"]
    assert f"{ours['chrf++']:.1f}" == scores["chrF2++"]
    assert f"{ours['ter']:.1f}" == scores["TER"]
    assert ours["chrf++"] != ours["chrf"]

    assert eval_main([*args[:6], "--metrics", "bleu,meteor"]) == 2
    one_line_error(capsys.readouterr().err, "--metrics 'bleu,meteor': unknown meteor")


def test_sentence_scores_equal_sacrebleu_sentence_level(systems, capsys, tmp_path):
    out = tmp_path / "sentences.jsonl"
    args = ["--hypotheses", str(systems["c"]), "--reference", str(systems["ref"])]
    args += ["--source", str(FIXTURE / "test.en"), "--sentence-scores", str(out)]
    assert eval_main(args) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    hypotheses = read_lines(systems["c"])
    assert [r["line"] for r in records] == list(range(1, 41))
    assert [r["hypothesis"] for r in records] == hypotheses
    assert [r["source"] for r in records] == read_lines(FIXTURE / "test.en")
    assert [r["reference"] for r in records] == read_lines(systems["ref"])
    for metric in ("bleu", "chrf"):
        cli = sacrebleu_cli(str(systems["ref"]), "-i", str(systems["c"]), "-sl", "-m", metric, "-b")
        assert [f"{r[metric]:.1f}" for r in records] == [f"{float(x):.1f}" for x in cli.split()]
    assert len({r["bleu"] for r in records}) > 5  # the lines differ


def test_length_buckets_group_lines_by_source_words():
    sources = ["one", "", " ".join(["w"] * 10), " ".join(["w"] * 11), " ".join(["w"] * 75)]
    buckets = length_buckets(sources)
    assert [(b.label, b.lines) for b in buckets] == [
        ("1-10", [0, 1, 2]),
        ("11-20", [3]),
        ("61+", [4]),
    ]


def test_plot_and_its_refusals(systems, capsys, tmp_path):
    png = tmp_path / "by-length.png"
    args = ["--compare", str(systems["a"]), str(systems["b"]), "--reference", str(systems["ref"])]
    assert eval_main([*args, "--plot", str(png)]) == 2
    one_line_error(capsys.readouterr().err, "--plot groups lines by source length: give --source")
    assert not png.exists()
    assert eval_main([*args, "--source", str(FIXTURE / "test.en"), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "BLEU by source length in" in capsys.readouterr().err


# --- named test sets ---------------------------------------------------------------------------
def test_a_cached_test_set_is_scored_as_its_files_are(systems, tmp_path):
    root = sacrebleu_cache(tmp_path / "sacrebleu")
    named = eval_process(
        root,
        "--hypotheses",
        str(systems["b"]),
        "--test-set",
        "wmt14",
        "--language-pair",
        "en-de",
        "--json",
    )
    assert named.returncode == 0, named.stderr
    files = eval_process(
        root, "--hypotheses", str(systems["b"]), "--reference", str(systems["ref"]), "--json"
    )
    assert json.loads(named.stdout)["bleu"] == json.loads(files.stdout)["bleu"] > 5
    cli = subprocess.run(
        [sys.executable, "-m", "sacrebleu", "-t", "wmt14", "-l", "en-de", "-i", str(systems["b"])]
        + ["-b", "-w", "4"],
        capture_output=True,
        text=True,
        env={**os.environ, "SACREBLEU": str(root)},
        check=True,
    )
    assert float(cli.stdout) == round(json.loads(named.stdout)["bleu"], 4)


def test_a_checkpoint_is_scored_on_a_test_set_and_compared_as_translate_cli_translates(
    systems, tmp_path, capsys
):
    from translate.cli.translate import main as cli_main

    first = random_tied_checkpoint(tmp_path / "first.ckpt", d_model=32, layers=1)
    second = random_tied_checkpoint(tmp_path / "second.ckpt", d_model=48, layers=1)
    root = sacrebleu_cache(tmp_path / "sacrebleu")
    named = eval_process(
        root,
        "--checkpoint",
        str(first),
        "--test-set",
        "wmt14",
        "--language-pair",
        "en-de",
        "--beam",
        "2",
        "--json",
        "--output",
        str(tmp_path / "named.de"),
    )
    assert named.returncode == 0, named.stderr
    assert "sacrebleu's wmt14 en-de" in named.stderr
    outputs = {}
    for checkpoint in (first, second):
        out = tmp_path / f"{checkpoint.stem}.cli.de"
        argv = ["--checkpoint", str(checkpoint), "--source", str(FIXTURE / "test.en")]
        assert cli_main([*argv, "--beam", "2", "--output", str(out), "--quiet"]) == 0
        outputs[checkpoint] = out
    assert read_lines(tmp_path / "named.de") == read_lines(outputs[first])
    capsys.readouterr()
    common = ["--reference", str(systems["ref"]), "--json"]
    assert eval_main(["--compare", str(outputs[first]), str(outputs[second]), *common]) == 0
    from_files = json.loads(capsys.readouterr().out)
    argv = ["--compare", str(first), str(second), "--source", str(FIXTURE / "test.en")]
    assert eval_main([*argv, *common, "--beam", "2"]) == 0
    from_checkpoints = json.loads(capsys.readouterr().out)
    assert [r["score"] for r in from_checkpoints["results"]] == [
        r["score"] for r in from_files["results"]
    ]
    assert [r["p_randomization"] for r in from_checkpoints["results"]] == [
        r["p_randomization"] for r in from_files["results"]
    ]
    assert from_checkpoints["baseline"] == str(first)
    assert eval_main(["--compare", str(first), str(second), *common]) == 2
    one_line_error(capsys.readouterr().err, "give --source with --reference")


def test_a_missing_test_set_names_the_cache_and_the_fetch(systems, tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    result = eval_process(
        root, "--hypotheses", str(systems["b"]), "--test-set", "wmt14", "--language-pair", "en-de"
    )
    assert result.returncode == 2
    one_line_error(
        result.stderr,
        "--test-set wmt14 en-de is not in sacrebleu's cache",
        str(root),
        "sacrebleu -t wmt14 -l en-de --echo src > /dev/null",
    )
    unknown = eval_process(
        root, "--hypotheses", str(systems["b"]), "--test-set", "wmt41", "--language-pair", "en-de"
    )
    one_line_error(
        unknown.stderr, "--test-set wmt41: sacrebleu knows no test set", "did you mean wmt"
    )
    pair = eval_process(
        root, "--hypotheses", str(systems["b"]), "--test-set", "wmt14", "--language-pair", "en-xx"
    )
    one_line_error(pair.stderr, "--language-pair en-xx: wmt14 has", "en-de")
    alone = eval_process(root, "--hypotheses", str(systems["b"]), "--test-set", "wmt14")
    one_line_error(alone.stderr, "give --language-pair")


# --- the gain difference between two line-aligned test sets --------------------------------------
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
