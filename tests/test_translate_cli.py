"""translate-cli: n-best lists, scoring against a reference, restricted output, precision,
over-long lines, and output that survives a stopped run."""

import math
import os
import sys
from pathlib import Path

import pytest
import torch
from helpers import joint_vocab, random_checkpoint
from search_oracle import beam_search
from tolerances import score_terms, tolerance, within_rounding

import translate.decode.loaded_model
import translate.decode.pipeline
from translate.cli.common import split_line_warning
from translate.cli.translate import main
from translate.decode.loaded_model import load_model
from translate.decode.pipeline import (
    SplitLine,
    TargetLanguageError,
    split_long,
    target_tags_for,
    translate_lines,
    translate_nbest,
)
from translate.decode.settings import SearchSettings
from translate.model.checkpoint import CheckpointError
from translate.score.metrics import corpus_scores
from translate.text.corpus import split_lines
from translate.text.protected import describe, lost_spans
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

LINES = ["Click OK.", "", "Choose Tools - Macros - Organize Dialogs.", "Last line."]
TRANSLATE_NBEST = translate.decode.pipeline.translate_nbest


def recorded_translations(monkeypatch, stop_after: int | None = None) -> list[str]:
    """The lines translate-cli has translated from now on, as they are translated (the list
    returned); with `stop_after`, a Ctrl-C (KeyboardInterrupt) once that many are done."""
    translated: list[str] = []

    def recording(loaded, lines, *args, **kwargs):
        if stop_after is not None and len(translated) == stop_after:
            raise KeyboardInterrupt
        translated.extend(lines)
        return TRANSLATE_NBEST(loaded, lines, *args, **kwargs)

    monkeypatch.setattr(translate.decode.pipeline, "translate_nbest", recording)
    return translated


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli")
    vocab = joint_vocab()
    words = [vocab.target.processor.piece_to_id(piece) for piece in ("▁Sie", "▁auf")]
    assert UNK_ID not in words
    random_checkpoint(directory / "restricted.ckpt", vocab, words)
    random_checkpoint(directory / "plain.ckpt", vocab, None)
    source = directory / "input.en"
    source.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return {
        "dir": directory,
        "ckpt": directory / "restricted.ckpt",
        "plain": directory / "plain.ckpt",
        "input": source,
        "words": words,
    }


def run(files, capsys, *args: str):
    code = main(
        ["--checkpoint", str(files["ckpt"]), "--source", str(files["input"]), "--quiet", *args]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def read(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return text[:-1].split("\n")


def test_n_best_gives_n_scored_lines_per_input_line(files, capsys, tmp_path):
    code, _, err = run(
        files, capsys, "--beam", "3", "--n-best", "3", "--output", str(tmp_path / "nbest")
    )
    assert code == 0, err
    rows = [line.split(" ||| ") for line in read(tmp_path / "nbest")]
    assert len(rows) == 3 * len(LINES) and all(len(row) == 5 for row in rows)
    assert [int(row[0]) for row in rows] == [i for i in range(len(LINES)) for _ in range(3)]
    for number in range(len(LINES)):
        entries = rows[3 * number : 3 * number + 3]
        scores = [float(row[2]) for row in entries]
        assert scores == sorted(scores, reverse=True)
        if LINES[number]:
            assert all(-math.inf < s < 0 for s in scores) and all(float(r[3]) < 0 for r in entries)
            # the confidence: the geometric mean of the tokens' probabilities, EOS included
            for _, text, _, log_prob, confidence in entries:
                tokens = len(vocab_of(files).target.encode([text])[0]) + 1
                assert 0 < float(confidence) < 1
                assert float(confidence) == pytest.approx(
                    math.exp(float(log_prob) / tokens), abs=1e-4
                )
            assert len({row[1] for row in entries}) == 3, "an n-best list repeats a translation"
        else:
            # not searched: the first entry sure, the ones the search could not fill not
            assert [float(row[4]) for row in entries] == [1.0, 0.0, 0.0]
            assert [row[1] for row in entries] == ["", "", ""] and scores == [
                0.0,
                -math.inf,
                -math.inf,
            ]

    code, out, err = run(files, capsys, "--beam", "3")
    assert code == 0, err
    assert out.split("\n")[:-1] == [rows[3 * i][1] for i in range(len(LINES))]


def test_pipeline_keeps_order_and_n_best_per_line(files):
    loaded = load_model(files["ckpt"])
    flat = translate_lines(loaded, LINES, SearchSettings(beam=3, n_best=2))
    assert len(flat) == 2 * len(LINES) and flat[2:4] == ["", ""]
    alone = [translate_lines(loaded, [line], SearchSettings(beam=3, n_best=2)) for line in LINES]
    assert flat == [text for texts in alone for text in texts]
    assert translate_lines(loaded, LINES) == [
        entries[0].text for entries in translate_nbest(loaded, LINES, SearchSettings(beam=1))
    ]


PIECES = [
    "<pad>",
    "<unk>",
    "<s>",
    "</s>",
    "▁Click",
    "▁OK",
    ".",
    "▁Save",
    "▁it",
    "!",
    "▁e",
    "g",
    "▁3",
    "5",
    '"',
    "▁word",
    "s",
]
P = {piece: i for i, piece in enumerate(PIECES)}


def ids_of(*pieces: str) -> list[int]:
    return [P[piece] for piece in pieces]


def test_split_long_cuts_at_sentence_ends_then_word_starts():
    # 'Click OK. Save it!" Click 3.5 e.g" it.': four sentence-like ends, but the one inside a
    # number and the one a word start does not follow are no cuts; a closing quote stays.
    line = ids_of(
        "▁Click",
        "▁OK",
        ".",
        "▁Save",
        "▁it",
        "!",
        '"',
        "▁Click",
        "▁3",
        ".",
        "5",
        "▁e",
        ".",
        "g",
        '"',
        "▁it",
        ".",
    )
    assert split_long(line, 100, PIECES) == [
        ids_of("▁Click", "▁OK", "."),
        ids_of("▁Save", "▁it", "!", '"'),
        ids_of("▁Click", "▁3", ".", "5", "▁e", ".", "g", '"', "▁it", "."),
    ]
    # A sentence over the limit: cut before the last word start in the window's second half ...
    words = ids_of("▁word", "s", "s", "▁word", "s", "▁word", "s", "s", "s")
    assert split_long(words, 4, PIECES) == [
        ids_of("▁word", "s", "s"),
        ids_of("▁word", "s", "▁word", "s"),
        ids_of("s", "s"),
    ]
    # ... else at the limit.
    assert split_long(ids_of("▁word", *["s"] * 6), 3, PIECES) == [
        ids_of("▁word", "s", "s"),
        ids_of("s", "s", "s"),
        ids_of("s"),
    ]
    generator = torch.Generator().manual_seed(0)
    for limit in (1, 2, 5, 9):
        ids = torch.randint(4, len(PIECES), (200,), generator=generator).tolist()
        segments = split_long(ids, limit, PIECES)
        assert [t for segment in segments for t in segment] == ids
        assert all(1 <= len(segment) <= limit for segment in segments)


def two_searches_terms(loaded) -> int:
    """The terms behind the difference of two float32 searches' scores, each up to the model's last position."""
    cfg = loaded.model.cfg
    return 2 * score_terms(cfg, cfg.max_positions, len(loaded.vocab.target), cfg.max_positions)


def one_at_a_time(
    loaded, segments: list[list[int]], beam: int, n_best: int
) -> list[tuple[list[int], float]]:
    """The reference: each segment searched alone (a batch of one), hypotheses joined by rank."""
    found = []
    for ids in segments:
        src = torch.tensor([ids + [EOS_ID]])
        with torch.inference_mode():
            found.append(beam_search(loaded.model, src, beam, 1.0, n_best, 1.0, 5)[0])
    return [
        ([t for hyps in found for t in hyps[k].tokens], sum(hyps[k].score for hyps in found))
        for k in range(n_best)
    ]


@pytest.mark.numerical
def test_an_over_long_line_is_translated_sentence_by_sentence(files, capsys):
    loaded = load_model(files["plain"])
    sentences = [
        "Click OK.",
        "Choose Tools - Macros - Organize Dialogs.",
        "Last line!",
        "Click Save.",
    ]
    encoded = loaded.vocab.source.encode(sentences)
    line = " ".join(sentences)
    assert loaded.vocab.source.encode([line])[0] == [t for ids in encoded for t in ids]
    limit = max(map(len, encoded))
    splits = []
    nbest = translate_nbest(
        loaded,
        ["Click OK.", line, ""],
        SearchSettings(beam=3, n_best=2, max_input_tokens=limit),
        on_split=splits.append,
    )
    assert splits == [SplitLine(2, sum(map(len, encoded)), limit, 4)]
    split_line_warning(splits[0])
    err = capsys.readouterr().err
    assert f"line 2 has {sum(map(len, encoded))} tokens" in err and "in 4 segments" in err
    expected = one_at_a_time(loaded, encoded, beam=3, n_best=2)
    assert [entry.text for entry in nbest[1]] == loaded.vocab.target.decode(
        [t for t, _ in expected]
    )
    terms = two_searches_terms(loaded)
    # the 4 segments' scores summed: all of one sign, so their errors stay relative to the sum
    assert [entry.score for entry in nbest[1]] == within_rounding(
        [score for _, score in expected], torch.float32, terms + 4
    )
    alone = translate_nbest(loaded, ["Click OK."], SearchSettings(beam=3, n_best=2))[0]
    assert [e.text for e in nbest[0]] == [e.text for e in alone]
    assert [e.score for e in nbest[0]] == within_rounding(
        [e.score for e in alone], torch.float32, terms
    )
    assert [entry.text for entry in nbest[2]] == ["", ""]


def test_the_default_limit_is_the_longest_training_sentence(files, capsys, tmp_path):
    plain = load_model(files["plain"])
    assert plain.data.max_length is None  # no run config: the model's positions (63)
    line = " ".join(["Click OK."] * 5)  # 35 tokens
    translate_nbest(plain, [line], on_split=split_line_warning)
    assert "warning" not in capsys.readouterr().err
    source = torch.load(files["plain"], weights_only=True)
    source["translate"]["run_config"] = "data:\n  max_length: 12\n"
    torch.save(source, tmp_path / "trained12.ckpt")
    trained = load_model(tmp_path / "trained12.ckpt")
    assert trained.data.max_length == 12
    translate_nbest(trained, [line], on_split=split_line_warning)
    assert "more than the 12 the model was trained on" in capsys.readouterr().err


def test_max_input_tokens_flag_and_its_cap(files, capsys, tmp_path):
    code, out, err = run(
        files, capsys, "--beam", "2", "--max-input-tokens", "3", "--chunk-lines", "2"
    )
    assert code == 0, err
    # Line 3 is the first of the second chunk: warnings number the lines of the whole input.
    assert len(out.split("\n")) == len(LINES) + 1 and "warning: line 3 has" in err
    assert "more than the 3 the model was trained on" in err
    code, _, err = run(files, capsys, "--max-input-tokens", "0")
    assert code == 2 and "--max-input-tokens must be at least 1" in err
    # Never more than the model's positions can read (63 here), whatever is asked.
    (tmp_path / "long.en").write_text(" ".join(["Click OK."] * 12) + "\n", encoding="utf-8")
    code, out, err = run(
        files, capsys, "--max-input-tokens", "1000", "--source", str(tmp_path / "long.en")
    )
    assert code == 0, err
    assert "more than the 63" in err and out.count("\n") == 1


def test_reference_scores_the_one_best_output(files, capsys, tmp_path):
    code, out, err = run(files, capsys, "--beam", "3")
    assert code == 0, err
    one_best = out.split("\n")[:-1]
    assert any(one_best)
    (tmp_path / "same.de").write_text(out, encoding="utf-8")
    code, _, err = run(
        files,
        capsys,
        "--beam",
        "3",
        "--n-best",
        "2",
        "--reference",
        str(tmp_path / "same.de"),
        "--output",
        str(tmp_path / "nbest"),
    )
    assert code == 0, err
    assert corpus_scores(one_best, one_best).report() in err  # the 1-best, not the 2nd-best
    assert (
        "chrF2 100.00" in err and "signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in err
    )
    assert len(read(tmp_path / "nbest")) == 2 * len(LINES)

    references = ["Klicken Sie auf OK.", "", "Wählen Sie Extras - Makros.", "Letzte Zeile."]
    (tmp_path / "ref.de").write_text("".join(r + "\n" for r in references), encoding="utf-8")
    code, _, err = run(files, capsys, "--beam", "3", "--reference", str(tmp_path / "ref.de"))
    assert code == 0, err
    assert corpus_scores(one_best, references).report() in err


def test_reference_with_another_line_count_is_refused_before_translating(
    files, capsys, tmp_path, monkeypatch
):
    def no_work(*args, **kwargs):
        raise AssertionError("work was done before the reference was checked")

    monkeypatch.setattr(translate.decode.loaded_model, "load_model", no_work)
    monkeypatch.setattr(translate.decode.pipeline, "translate_nbest", no_work)
    reference = tmp_path / "short.de"
    reference.write_text("eins\nzwei\n", encoding="utf-8")
    code, out, err = run(
        files, capsys, "--reference", str(reference), "--output", str(tmp_path / "out")
    )
    assert code == 2 and out == ""
    assert f"--reference {reference} has 2 lines but the input {files['input']} has 4" in err
    assert not (tmp_path / "out").exists()


def test_n_best_larger_than_beam_is_refused(files, capsys, tmp_path):
    code, _, err = run(
        files, capsys, "--beam", "2", "--n-best", "3", "--output", str(tmp_path / "out")
    )
    assert code == 2
    assert "--n-best 3 must be between 1 and the beam size (--beam 2)" in err
    assert not (tmp_path / "out").exists()
    code, _, err = run(files, capsys, "--beam", "0")
    assert code == 2 and "--beam must be at least 1" in err
    for penalty in ("nan", "inf", "-0.5", "5.5"):
        code, _, err = run(files, capsys, "--length-penalty", penalty)
        assert (
            code == 2 and f"--length-penalty must be between 0 and 5, got {float(penalty)}" in err
        )


def test_restrict_target_produces_only_training_target_tokens(files, capsys):
    loaded = load_model(files["ckpt"])
    mask = loaded.target_token_mask()
    expected = torch.zeros(len(loaded.vocab.target), dtype=torch.bool)
    expected[files["words"] + [UNK_ID, EOS_ID]] = True
    assert torch.equal(mask, expected) and not mask[PAD_ID] and not mask[BOS_ID]

    code, free, err = run(files, capsys, "--beam", "2")
    assert code == 0, err
    assert set(free.split()) - {"Sie", "auf", "⁇"}, "unrestricted output already within the set"
    code, out, err = run(files, capsys, "--beam", "2", "--restrict-target")
    assert code == 0, err
    words = out.split()
    assert words and set(words) <= {"Sie", "auf", "⁇"}
    code, out, err = run(files, capsys, "--beam", "1", "--restrict-target")
    assert code == 0 and set(out.split()) <= {"Sie", "auf", "⁇"}


def test_restrict_target_without_recorded_tokens_is_a_clear_error(files, capsys, tmp_path):
    assert load_model(files["plain"]).target_tokens is None
    with pytest.raises(CheckpointError, match="does not record its target-side tokens"):
        load_model(files["plain"]).target_token_mask()
    code = main(
        [
            "--checkpoint",
            str(files["plain"]),
            "--source",
            str(files["input"]),
            "--quiet",
            "--restrict-target",
            "--output",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "plain.ckpt: the checkpoint does not record its target-side tokens" in err
    assert not (tmp_path / "out").exists()


def test_precision_flag(files, capsys, tmp_path):
    code, _, err = run(files, capsys, "--precision", "16-mixed", "--device", "cpu")
    assert code == 2 and "--precision 16-mixed (float16 autocast) needs a CUDA device" in err
    code, out, err = run(files, capsys, "--precision", "bf16-mixed", "--beam", "2", "--n-best", "2")
    assert code == 0, err
    assert len(out.split("\n")[:-1]) == 2 * len(LINES)


def test_translate_eval_searches_as_translate_cli_does(files, capsys, tmp_path):
    from translate.cli.evaluate import build_parser as eval_parser
    from translate.cli.evaluate import main as eval_main
    from translate.cli.translate import build_parser as cli_parser

    def options(parser):
        return {
            tuple(a.option_strings): (a.default, a.type, a.help)
            for a in parser._actions
            if a.dest in ("beam", "length_penalty", "restrict_target", "batch_tokens")
        }

    assert len(options(eval_parser())) == 4 and options(eval_parser()) == options(cli_parser())

    references = tmp_path / "ref.de"
    references.write_text("".join(f"Referenz {i}\n" for i in range(len(LINES))), encoding="utf-8")
    for settings in (
        ["--beam", "1"],
        ["--beam", "3", "--length-penalty", "0", "--restrict-target"],
    ):
        code, expected, err = run(files, capsys, *settings, "--batch-tokens", "8")
        assert code == 0, err
        code = eval_main(
            [
                "--checkpoint",
                str(files["ckpt"]),
                "--source",
                str(files["input"]),
                "--reference",
                str(references),
                "--output",
                str(tmp_path / "hyp"),
                "--batch-tokens",
                "8",
                *settings,
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "BLEU 0.00" in out and "chrF2" in out
        assert (tmp_path / "hyp").read_text(encoding="utf-8") == expected
    assert (
        eval_main(
            [
                "--checkpoint",
                str(files["ckpt"]),
                "--source",
                str(files["input"]),
                "--reference",
                str(references),
                "--beam",
                "0",
            ]
        )
        == 2
    )
    assert "--beam must be at least 1" in capsys.readouterr().err
    assert (
        eval_main(
            [
                "--checkpoint",
                str(files["plain"]),
                "--source",
                str(files["input"]),
                "--reference",
                str(references),
                "--restrict-target",
            ]
        )
        == 2
    )
    assert "does not record its target-side tokens" in capsys.readouterr().err


def nbest_rows(path: Path) -> list[tuple[str, str, float]]:
    return [
        (number, text, float(score))
        for number, text, score, _, _ in (line.split(" ||| ") for line in read(path))
    ]


def vocab_of(files):
    return load_model(files["ckpt"]).vocab


def test_scores_put_each_line_s_confidence_before_it(files, capsys, tmp_path):
    code, _, err = run(files, capsys, "--output", str(tmp_path / "plain"))
    assert code == 0, err
    code, _, err = run(files, capsys, "--scores", "--output", str(tmp_path / "scored"))
    assert code == 0, err
    code, _, err = run(files, capsys, "--n-best", "2", "--output", str(tmp_path / "nbest"))
    assert code == 0, err
    plain, scored = read(tmp_path / "plain"), read(tmp_path / "scored")
    confidences = [float(line.split("\t", 1)[0]) for line in scored]
    assert [line.split("\t", 1)[1] for line in scored] == plain
    # the same confidence as the n-best list's first entry; an empty line's is 1
    firsts = [line.split(" ||| ") for line in read(tmp_path / "nbest")][::2]
    assert confidences == [float(row[4]) for row in firsts]
    assert [c for c, line in zip(confidences, LINES) if not line] == [1.0]
    assert all(0 < c < 1 for c, line in zip(confidences, LINES) if line)
    # scored against a reference: the translations, not their confidences
    reference = tmp_path / "reference"
    reference.write_text("".join(line + "\n" for line in plain), encoding="utf-8")
    code, _, err = run(files, capsys, "--scores", "--reference", str(reference))
    assert code == 0, err
    assert "BLEU = 100.00" in err


@pytest.mark.numerical
def test_a_stopped_run_resumes_where_it_stopped_and_gives_one_run_s_output(
    files, capsys, tmp_path, monkeypatch
):
    source = tmp_path / "input.en"
    source.write_text("".join(line + "\n" for line in LINES * 3), encoding="utf-8")  # 12 lines
    references = tmp_path / "ref.de"
    references.write_text("".join(f"Zeile {i}.\n" for i in range(12)), encoding="utf-8")
    settings = [
        "--source",
        str(source),
        "--beam",
        "3",
        "--n-best",
        "2",
        "--reference",
        str(references),
    ]
    code, _, err = run(files, capsys, *settings, "--output", str(tmp_path / "whole"))
    assert code == 0, err
    whole = nbest_rows(tmp_path / "whole")
    whole_report = err.strip().splitlines()[0]
    assert len(whole) == 24

    out = tmp_path / "out"
    recorded_translations(monkeypatch, stop_after=5)  # on the second chunk
    code, _, err = run(files, capsys, *settings, "--chunk-lines", "5", "--output", str(out))
    assert code == 130 and "the translations of the first 5 input lines are in" in err
    assert not out.exists()
    partial = tmp_path / "out.partial"
    assert [row[:2] for row in nbest_rows(partial)] == [row[:2] for row in whole[:10]]
    with open(partial, "ab") as handle:  # a chunk written but not recorded when the run stopped
        handle.write(b"5 ||| half a li")

    code, _, err = run(files, capsys, *settings, "--chunk-lines", "5", "--output", str(out))
    assert code == 2 and "holds the translations of 5 input lines" in err and "--resume" in err
    code, _, err = run(
        files,
        capsys,
        *settings,
        "--beam",
        "4",
        "--chunk-lines",
        "5",
        "--output",
        str(out),
        "--resume",
    )
    assert code == 2 and "another --beam than" in err

    translated = recorded_translations(monkeypatch)
    code, _, err = run(
        files, capsys, *settings, "--chunk-lines", "5", "--output", str(out), "--resume"
    )
    assert code == 0, err
    assert len(translated) == 7, "only the lines not done were translated"
    resumed = nbest_rows(out)
    assert [row[:2] for row in resumed] == [row[:2] for row in whole]
    # printed with 4 decimals: searched again in other batches, a score may print one unit apart
    scores = [row[2] for row in whole]
    rounding = tolerance(torch.float32, two_searches_terms(load_model(files["ckpt"]))) * max(
        map(abs, scores)
    )
    assert [row[2] for row in resumed] == pytest.approx(scores, abs=1e-4 + rounding)
    assert whole_report in err, "the scores must cover every line, those of the first run too"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out")) == ["out"]


def test_resume_and_chunk_lines_are_checked(files, capsys):
    code, _, err = run(files, capsys, "--resume")
    assert code == 2 and "--resume continues an --output FILE" in err
    code, _, err = run(files, capsys, "--chunk-lines", "0")
    assert code == 2 and "--chunk-lines must be at least 1" in err


def test_a_run_stopped_before_its_first_chunk_leaves_nothing(files, capsys, tmp_path, monkeypatch):
    def stops(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(translate.decode.pipeline, "translate_nbest", stops)
    code, _, _ = run(files, capsys, "--output", str(tmp_path / "out"))
    assert code == 130 and list(tmp_path.iterdir()) == []


def test_each_translation_lacking_a_protected_token_of_its_source_is_named_on_stderr(
    files, capsys, tmp_path
):
    """A number, key or placeholder the translation lacks is never lost silently: a warning a
    line, and a count at the end; lines that keep theirs (or have none) give no warning."""
    source = tmp_path / "protected.en"
    lines = ["Click button 36.", "Press Ctrl+S to save %PRODUCTNAME files.", "Open the file."]
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.de"
    code, _, err = run(files, capsys, "--source", str(source), "--output", str(out))
    assert code == 0
    lacking = {
        number: lost_spans(line, translation)
        for number, (line, translation) in enumerate(zip(lines, read(out)), start=1)
        if lost_spans(line, translation)
    }
    assert lacking  # a random model keeps none of them
    warnings = [line for line in err.splitlines() if line.startswith("warning: line ")]
    assert warnings == [
        f"warning: line {number}: the translation lacks {describe(lost)}"
        for number, lost in lacking.items()
    ]
    assert f"translate-cli: {len(lacking)} of 3 translations lack a number" in err


def test_a_target_language_the_model_lacks_is_a_typed_error_each_front_end_words(
    checkpoint_path, capsys, tmp_path
):
    """The library carries the facts; translate-cli names its flag and the checkpoint."""
    loaded = load_model(checkpoint_path)
    with pytest.raises(TargetLanguageError) as caught:
        target_tags_for(loaded, "fr")
    error = caught.value
    assert (error.asked, error.known, error.trained) == ("fr", ["de"], ("en", "de"))
    assert error.reason("this model") == "this model translates en→de only"
    assert target_tags_for(loaded, "de", "en").zero_shot is False
    source = tmp_path / "in.en"
    source.write_text("Click OK.\n")
    arguments = ["--checkpoint", str(checkpoint_path), "--source", str(source), "--quiet"]
    assert main([*arguments, "--target-lang", "fr"]) == 2
    assert f"error: --target-lang fr: {checkpoint_path} translates en→de only" in (
        capsys.readouterr().err
    )


# --- an output that is an input -------------------------------------------------------------------
def no_work(*args, **kwargs):
    raise AssertionError("work was done before the output was checked")


@pytest.fixture
def readable(files, tmp_path, monkeypatch):
    """tmp_path (the working directory) with a.txt, the input, reachable as link.txt (a
    symlink), hard.txt (a hard link) and dangling.txt (a symlink through a missing directory);
    b.txt, another copy; model.ckpt, a checkpoint. Loading a model or translating fails."""
    monkeypatch.setattr(translate.decode.loaded_model, "load_model", no_work)
    monkeypatch.setattr(translate.decode.pipeline, "translate_nbest", no_work)
    (tmp_path / "a.txt").write_bytes(files["input"].read_bytes())
    (tmp_path / "b.txt").write_bytes(files["input"].read_bytes())
    (tmp_path / "link.txt").symlink_to("a.txt")
    (tmp_path / "hard.txt").hardlink_to(tmp_path / "a.txt")
    (tmp_path / "dangling.txt").symlink_to("nowhere/../a.txt")
    (tmp_path / "model.ckpt").write_bytes(files["ckpt"].read_bytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(capsys, directory: Path, *args: str) -> str:
    """The one-line error of a run that must stop before any work, every file of `directory`
    kept byte for byte and none added."""
    before = {path: path.read_bytes() for path in directory.iterdir() if path.is_file()}
    listing = sorted(directory.iterdir())
    code = main(["--quiet", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith("translate-cli: error: "), err
    assert sorted(directory.iterdir()) == listing
    assert {path: path.read_bytes() for path in directory.iterdir() if path.is_file()} == before
    return err.removeprefix("translate-cli: error: ").rstrip("\n")


REPLACE = "(the same file): its translation would replace it; choose another --output"


def test_an_output_that_is_the_input_is_refused_however_it_is_spelled(files, capsys, readable):
    ckpt = ["--checkpoint", "model.ckpt"]
    absolute = str(readable / "a.txt")
    for source, output in [
        ("a.txt", "a.txt"),
        ("a.txt", "link.txt"),
        ("a.txt", "hard.txt"),
        ("a.txt", absolute),
        (absolute, "a.txt"),
        ("link.txt", "hard.txt"),
        ("a.txt", "nowhere/../a.txt"),
        ("a.txt", "dangling.txt"),
    ]:
        for resume in ([], ["--resume"]):
            message = refused(
                capsys, readable, *ckpt, "--source", source, "--output", output, *resume
            )
            assert message == f"--output {output} is the input --source {source} {REPLACE}"


def test_an_output_that_is_the_references_or_the_checkpoint_is_refused(files, capsys, readable):
    source = ["--checkpoint", "model.ckpt", "--source", "b.txt"]
    assert refused(capsys, readable, *source, "--reference", "a.txt", "--output", "link.txt") == (
        f"--output link.txt is the --reference a.txt {REPLACE}"
    )
    assert refused(capsys, readable, *source, "--output", "model.ckpt") == (
        f"--output model.ckpt is the --checkpoint model.ckpt {REPLACE}"
    )


def test_an_output_whose_partial_files_are_the_input_is_refused(files, capsys, readable):
    for name in ("out.txt.partial", "out.txt.partial.json"):
        (readable / name).write_bytes(files["input"].read_bytes())
        message = refused(
            capsys, readable, "--checkpoint", "model.ckpt", "--source", name, "--output", "out.txt"
        )
        assert message == (
            f"--output out.txt is written as {readable / name} while it runs, and that is the "
            f"input --source {name} (the same file): choose another --output"
        )
        (readable / name).unlink()


def test_standard_input_or_output_that_is_the_input_is_refused(
    files, capsys, readable, monkeypatch
):
    with open(readable / "a.txt", encoding="utf-8") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        message = refused(capsys, readable, "--checkpoint", "model.ckpt", "--output", "hard.txt")
    assert message == (
        f"--output hard.txt is the file standard input reads, {readable / 'a.txt'} {REPLACE}"
    )
    # `--source a.txt >> a.txt`: the translation would be appended to the input being read.
    with open(readable / "a.txt", "a", encoding="utf-8") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        code = main(["--quiet", "--checkpoint", "model.ckpt", "--source", "link.txt"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"translate-cli: error: standard output ({readable / 'a.txt'}) is the input --source "
        "link.txt (the same file): the translation would be written over it; redirect it to "
        "another file or choose an --output\n"
    )
    assert (readable / "a.txt").read_bytes() == files["input"].read_bytes()


def test_an_output_beside_the_input_is_written(files, capsys, tmp_path, monkeypatch):
    source = tmp_path / "a.txt"
    source.write_bytes(files["input"].read_bytes())
    code, expected, err = run(files, capsys)
    assert code == 0, err
    monkeypatch.chdir(tmp_path)
    code, _, err = run(files, capsys, "--source", "a.txt", "--output", "a.txt.de")
    assert code == 0, err
    assert (tmp_path / "a.txt.de").read_text(encoding="utf-8") == expected
    assert source.read_bytes() == files["input"].read_bytes()


# --- line ends ----------------------------------------------------------------------------------------
def test_line_ends_are_cr_lf_crlf_or_a_mix_even_across_reads():
    text = b"a\r\nb\rc\n\r\rd\r\n\n\xc3\xa9"
    expected = [b"a\r\n", b"b\r", b"c\n", b"\r", b"\r", b"d\r\n", b"\n", b"\xc3\xa9"]
    assert list(split_lines([text])) == expected

    def lines(blocks: list[bytes]) -> list[bytes]:
        return [line.rstrip(b"\r\n") for line in split_lines(blocks)]

    bare = [b"a", b"b", b"c", b"", b"", b"d", b"", b"\xc3\xa9"]
    for cut in range(len(text) + 1):  # a read may end anywhere, between \r and \n too
        assert lines([text[:cut], b"", text[cut:]]) == bare, cut
    assert lines([bytes([byte]) for byte in text]) == bare
    assert lines([b"a\r", b"\n", b"\n"]) == [b"a", b""]
    assert lines([]) == [] and lines([b"\r"]) == [b""]


def test_cr_only_and_mixed_line_ends_give_a_line_out_for_every_line_in(files, capsys, tmp_path):
    """Each line is translated as it is when its file ends lines with \\n; the output ends
    every line with \\n whatever the input's line ends."""
    code, expected, err = run(files, capsys, "--beam", "2")
    assert code == 0, err
    assert expected.count("\n") == len(LINES)
    references = tmp_path / "ref.de"
    references.write_bytes("\r".join(expected.split("\n")[:-1]).encode("utf-8"))
    ends = {
        "cr": ["\r"] * len(LINES),
        "cr, none at the end": ["\r"] * (len(LINES) - 1) + [""],
        "mixed": ["\r\n", "\r", "\n", "\r"],
        "mixed, lf last": ["\r", "\r\n", "\r", "\n"],
    }
    for name, line_ends in ends.items():
        source = tmp_path / "in.en"
        source.write_bytes("".join(map(str.__add__, LINES, line_ends)).encode("utf-8"))
        code, out, err = run(files, capsys, "--beam", "2", "--source", str(source))
        assert code == 0, err
        assert out == expected, name
        output = tmp_path / "out.de"
        code, _, err = run(
            files,
            capsys,
            "--beam",
            "2",
            "--source",
            str(source),
            "--output",
            str(output),
            "--reference",
            str(references),
        )
        assert code == 0, err
        assert output.read_bytes() == expected.encode("utf-8"), name
        assert "chrF2 100.00" in err, "the CR-only references are a line each"


def test_standard_input_with_cr_line_ends(files, capsys, tmp_path, monkeypatch):
    code, expected, err = run(files, capsys, "--beam", "2")
    assert code == 0, err
    data = "".join(map(str.__add__, LINES, ["\r", "\r\n", "\r", "\r"])).encode("utf-8")
    source = tmp_path / "in.en"
    source.write_bytes(data)
    arguments = ["--checkpoint", str(files["ckpt"]), "--quiet", "--beam", "2"]
    with open(source, encoding="utf-8") as stdin:  # `< in.en`
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(arguments) == 0
    assert capsys.readouterr().out == expected
    read_end, write_end = os.pipe()  # `cat in.en |`: read as it arrives
    os.write(write_end, data)
    os.close(write_end)
    with open(read_end, encoding="utf-8") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main([*arguments, "--chunk-lines", "2"]) == 0
    assert capsys.readouterr().out == expected


def test_a_run_over_cr_line_ends_resumes_at_the_line_it_stopped(
    files, capsys, tmp_path, monkeypatch
):
    """The lines done are counted as they are read, whatever their ends: the same lines with
    other line ends continue the same run."""
    source = tmp_path / "in.en"
    source.write_bytes("\r".join(LINES * 2).encode("utf-8"))  # 8 lines
    code, expected, err = run(files, capsys, "--beam", "2", "--source", str(source))
    assert code == 0, err
    assert expected.count("\n") == 2 * len(LINES)
    translated = recorded_translations(monkeypatch, stop_after=6)  # on the third chunk
    out = tmp_path / "out.de"
    settings = ["--beam", "2", "--output", str(out), "--chunk-lines", "3"]
    for resumed_from in ("\r", "\r\n"):
        translated.clear()
        code, _, err = run(files, capsys, *settings, "--source", str(source))
        assert code == 130 and "the translations of the first 6 input lines are in" in err
        source.write_bytes(resumed_from.join(LINES * 2).encode("utf-8"))
        translated.clear()
        code, _, err = run(files, capsys, *settings, "--source", str(source), "--resume")
        assert code == 0, err
        assert "6 lines were done" in err and translated == LINES[2:]
        assert out.read_text(encoding="utf-8") == expected
        out.unlink()
        source.write_bytes("\r".join(LINES * 2).encode("utf-8"))
