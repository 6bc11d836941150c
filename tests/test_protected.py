"""Protected spans (translate/text/protected.py) on hand-made lines, and the copy measure
(translate/score/copy_rate.py, `translate-eval --metrics copy`) counted by hand."""

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import REPO, fixture_lines, write_mo
from hypothesis import given, settings
from hypothesis import strategies as st

from translate.cli.evaluate import main as eval_main
from translate.decode import pipeline
from translate.decode.loaded_model import load_model
from translate.decode.settings import SearchSettings
from translate.decode.steps import Hypothesis
from translate.model.checkpoint import write_checkpoint
from translate.model.transformer import ModelConfig, Transformer
from translate.score.copy_rate import copy_score, line_copy
from translate.text.corpus import read_lines
from translate.text.protected import (
    CLASSES,
    MAX_SENTINELS,
    SENTINEL_PIECES,
    SENTINELS,
    Masked,
    describe,
    digit_runs,
    find_spans,
    hash_share,
    lost_spans,
    mask,
    mask_pair,
    swapped,
    unmask,
)
from translate.text.vocab import Vocabularies


def spans(text: str) -> list[tuple[str, str]]:
    return [(span.kind, span.text) for span in find_spans(text)]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("Click button 36.", [("number", "36")]),
        (
            "Version 7.4.2 costs 1,000 or 3.5 euros, 50% off at -3 degrees.",
            [
                ("number", "7.4.2"),
                ("number", "1,000"),
                ("number", "3.5"),
                ("number", "50%"),
                ("number", "-3"),
            ],
        ),
        (
            "MP3, x86, 3D and H2O are codes; and/or 1/2",
            [("code", "MP3"), ("code", "x86"), ("code", "3D"), ("code", "H2O"), ("number", "1/2")],
        ),
        (
            "PMT(2%/12;36) at @0.00",
            [("number", "2%"), ("number", "12"), ("number", "36"), ("number", "0.00")],
        ),
        (
            "Press Ctrl+Shift+F5, Alt + F4 or F1 in %PRODUCTNAME.",
            [
                ("key", "Ctrl+Shift+F5"),
                ("key", "Alt + F4"),
                ("key", "F1"),
                ("placeholder", "%PRODUCTNAME"),
            ],
        ),
        (
            "Use %s, %1$d, %.2f, %(name)s, %1, {name}, {0}, {{count}}, $(ARG1), ${HOME}, $1, "
            "#lib# and <b>x</b>.",
            [
                ("placeholder", text)
                for text in (
                    "%s",
                    "%1$d",
                    "%.2f",
                    "%(name)s",
                    "%1",
                    "{name}",
                    "{0}",
                    "{{count}}",
                    "$(ARG1)",
                    "${HOME}",
                    "$1",
                    "#lib#",
                    "<b>",
                    "</b>",
                )
            ],
        ),
        ("100 % sure, 20 %sure", [("number", "100"), ("number", "20")]),  # no placeholder
        (
            "See https://help.libreoffice.org/7.4/en-US/a.html, or mail info@example.org.",
            [
                ("url", "https://help.libreoffice.org/7.4/en-US/a.html"),
                ("email", "info@example.org"),
            ],
        ),
        (
            "Thanks @alice@mastodon.social and @bob! #LibreOffice &#160; #1",
            [
                ("mention", "@alice@mastodon.social"),
                ("mention", "@bob"),
                ("hashtag", "#LibreOffice"),
                ("number", "160"),
                ("number", "1"),
            ],
        ),
        (
            "Open /usr/share/doc, ~/Documents/a.odt, ./run.sh or C:\\Users\\me\\a.txt.",
            [
                ("path", "/usr/share/doc"),
                ("path", "~/Documents/a.odt"),
                ("path", "./run.sh"),
                ("path", "C:\\Users\\me\\a.txt"),
            ],
        ),
    ],
)
def test_protected_spans_of_hand_made_lines(line, expected):
    assert spans(line) == expected
    for span in find_spans(line):
        assert line[span.start : span.end] == span.text and span.kind in CLASSES


FORMS = [
    ("The date 2026-11-28 at 10:30", [("number", "2026-11-28"), ("number", "10:30")]),
    (
        "X.509, 16x16, 1920×1080 and (1-31)",
        [("code", "X.509"), ("number", "16x16"), ("number", "1920×1080"), ("number", "1-31")],
    ),
    ("the 4th, 1st and 103rd", [("number", "4"), ("number", "1"), ("number", "103")]),
    (
        "v2, 3.0.1, 10–20, 12pt, 5mm, 100%",
        [
            ("code", "v2"),
            ("number", "3.0.1"),
            ("number", "10–20"),
            ("code", "12pt"),
            ("code", "5mm"),
            ("number", "100%"),
        ],
    ),
    # a price with its currency, whole or not at all; a phone number's groups; an address
    (
        "$5.99, 5 €, 0x1F, +1-800-555-0199, +49 30 1234567, (030) 12345-678, 192.168.0.1:8080",
        [
            ("number", "$5.99"),
            ("number", "5 €"),
            ("number", "0x1F"),
            ("number", "+1-800-555-0199"),
            ("number", "+49 30 1234567"),
            ("number", "(030) 12345-678"),
            ("number", "192.168.0.1:8080"),
        ],
    ),
    # a number is taken whole or left to the codes: never 10 of 10:30am, 5000 of localhost:5000
    (
        "10:30am, localhost:5000, [::1]:8000, UTF-8, 第3章",
        [
            ("code", "10:30am"),
            ("code", "localhost:5000"),
            ("number", "[::1]:8000"),
            ("code", "UTF-8"),
            ("number", "3"),
        ],
    ),
    (
        "See https://en.wikipedia.org/wiki/Foo_(bar).",
        [("url", "https://en.wikipedia.org/wiki/Foo_(bar)")],
    ),
    ("(see https://example.org/a)", [("url", "https://example.org/a")]),
    (
        "Hello, [X7X]! Press ⦅1⦆, ⦅ or $1.",
        [("placeholder", "[X7X]"), ("reserved", "⦅1⦆"), ("reserved", "⦅"), ("placeholder", "$1")],
    ),
]


@pytest.mark.parametrize("line, expected", FORMS)
def test_every_form_of_a_number_is_one_span(line, expected):
    assert spans(line) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("0123456789٣３aXx.,:-–/ ×%$#@⦅⦆()[]{}<>+_第章"), max_size=60)
)
def test_every_digit_of_any_text_is_in_a_span_and_its_loss_is_reported(text):
    found = find_spans(text)
    covered = {i for span in found for i in range(span.start, span.end)}
    assert all(i in covered for i, char in enumerate(text) if char.isdecimal())
    assert all(text[span.start : span.end] == span.text for span in found)
    # lost_spans never says nothing was lost where a digit run was (the plain rule)
    for translation in (text[::-1], text.replace("1", "11"), text[: len(text) // 2], ""):
        plain = Counter(digit_runs(text)) - Counter(digit_runs(translation))
        assert not plain or lost_spans(text, translation)


def test_a_translation_lacks_what_it_does_not_carry_over_as_often_as_the_source_has_it():
    def lost(source: str, translation: str) -> list[tuple[str, str]]:
        return [(span.kind, span.text) for span in lost_spans(source, translation)]

    # a number's sign and digits are compared: 3,5 for 3.5 and 1.000 for 1,000 are kept
    assert lost("Set 3.5 cm and 1,000 rows, 50% off.", "3,5 cm, 1.000 Zeilen, 50 % Rabatt.") == []
    assert lost("-3 degrees", "3 Grad") == [("number", "-3")]
    assert lost("Rows 2 and 2, cell 7.", "Zeile 2, Zelle 7.") == [("number", "2")]
    assert lost("Press Ctrl+S in %PRODUCTNAME.", "Drücken Sie Strg+S in LibreOffice.") == [
        ("key", "Ctrl+S"),
        ("placeholder", "%PRODUCTNAME"),
    ]
    assert describe(lost_spans("Click 36.", "Klicken.")) == "36 (number)"
    # the probes' silent losses: each reported
    assert lost("The date 2026-11-28 at 10:30", "2026-12-812-12: 10 ist 30") == [
        ("number", "2026-11-28"),
        ("number", "10:30"),
    ]
    assert lost("Costs $5.99 or 0x1F.", "Kostet $5. oder 0x1.") == [
        ("number", "$5.99"),
        ("number", "0x1F"),
    ]
    # a price's currency counts, wherever the translation writes it
    assert lost("Costs $5.99 or €10.", "Kostet 5,99 $ oder 10.") == [("number", "€10")]
    assert lost("Costs 1,000.", "Kostet 10,00.") == [("number", "1,000")]  # same digits, other runs
    assert lost(
        "Foo_(bar): https://en.wikipedia.org/wiki/Foo_(bar)",
        "https://en.wikipedia.org/wiki/Foo_(bar",
    ) == [("url", "https://en.wikipedia.org/wiki/Foo_(bar)")]
    assert lost("Press ⦅1⦆ now.", "Drücken Sie jetzt.") == [("reserved", "⦅1⦆")]


def test_a_span_counts_when_the_reference_keeps_it_and_is_kept_when_the_hypothesis_has_it():
    source = "Set 3.5 cm, then click button 36 and button 36 again."
    reference = "Stellen Sie 3,5 cm ein, klicken Sie auf Schaltfläche 36 und wieder auf 36."
    line = line_copy(source, "Klicken Sie auf 136 und 36.", [reference])
    # "3.5" is "3,5" in the reference: it does not count; "36" counts twice, "136" is not it
    assert line.counted == Counter({("number", "36"): 2})
    assert line.missing == Counter({("number", "36"): 1}) and line.score == 50.0
    assert line.failures() == [{"class": "number", "text": "36", "missing": 1}]
    assert line_copy("Click OK.", "Klicken Sie auf OK.", ["Klicken Sie auf OK."]).score is None
    # with two references, the one that keeps a span most often
    two = line_copy("Rows 2 and 2.", "Zeilen 2.", ["Zeilen 2.", "Zeilen 2 und 2."])
    assert two.counted == Counter({("number", "2"): 2}) and two.score == 50.0


def test_the_corpus_score_adds_up_each_class():
    sources = ["Press Ctrl+S to save 3 files.", "Visit https://example.org now.", "Nothing."]
    references = [
        ["Drücken Sie Ctrl+S, um 3 Dateien zu speichern.", "Besuchen Sie example.org.", "Nichts."]
    ]
    hypotheses = ["Drücken Sie Ctrl+S für 4 Dateien.", "Besuchen Sie https://example.org.", "-"]
    score = copy_score(sources, hypotheses, references)
    assert score.counted == {**dict.fromkeys(CLASSES, 0), "key": 1, "number": 1}
    assert score.kept == {**dict.fromkeys(CLASSES, 0), "key": 1}
    assert score.score == 50.0 and score.detail() == "key 1/1 (100.0%), number 0/1 (0.0%)"


def eval_arguments(
    tmp_path: Path, source: str, reference: str, hypotheses: str, metrics: str
) -> list[str]:
    """translate-eval's arguments for the three texts, written to files: hypotheses and
    reference first (so that the first four are those), then the source and the metrics."""
    files = {}
    for name, text in (("hyp.de", hypotheses), ("ref.de", reference), ("src.en", source)):
        files[name] = tmp_path / name
        files[name].write_text(text, encoding="utf-8")
    args = ["--hypotheses", str(files["hyp.de"]), "--reference", str(files["ref.de"])]
    return [*args, "--source", str(files["src.en"]), "--metrics", metrics, "--target-lang", "de"]


def scored_json(args: list[str], tmp_path: Path, capsys) -> tuple[dict, list[dict]]:
    """translate-eval's --json row for `args`, and its --sentence-scores records."""
    scores = tmp_path / "scores.jsonl"
    assert eval_main([*args, "--json", "--sentence-scores", str(scores)]) == 0
    row = json.loads(capsys.readouterr().out)
    return row, [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines()]


def test_translate_eval_reports_copy_and_lists_the_failures(tmp_path, capsys):
    args = eval_arguments(
        tmp_path,
        "Click button 36.\nPress F1.\nSee {name}.\n",
        "Klicken Sie auf Schaltfläche 36.\nDrücken Sie F1.\nSiehe {name}.\n",
        "Klicken Sie auf 3.\nDrücken Sie F1.\nSiehe {name}.\n",
        "bleu,copy",
    )
    row, records = scored_json(args, tmp_path, capsys)
    assert row["copy"] == pytest.approx(200 / 3)
    assert row["copy_detail"] == "placeholder 1/1 (100.0%), key 1/1 (100.0%), number 0/1 (0.0%)"
    assert row["copy_signature"].startswith("copy|classes:reserved,url,")
    assert [r["copy"] for r in records] == [0.0, 100.0, 100.0]
    assert records[0]["copy_failures"] == [{"class": "number", "text": "36", "missing": 1}]
    assert records[1]["copy_failures"] == []

    assert eval_main(args[:4] + ["--metrics", "copy"]) == 2  # no source
    assert "give the source lines" in capsys.readouterr().err
    hypotheses, reference = args[1], args[3]
    compare = ["--compare", hypotheses, reference, "--reference", reference]
    assert eval_main([*compare, "--metrics", "bleu,copy"]) == 2
    assert "not one of the paired tests' metrics" in capsys.readouterr().err


def test_translate_eval_counts_the_digit_runs_of_the_source_by_the_plain_rule(tmp_path, capsys):
    # what the copy metric cannot see: spans no reference keeps, forms it has no class for
    args = eval_arguments(
        tmp_path,
        "Use 16x16 icons.\nSet 3.5 cm, row 7.\nClick OK.\n",
        "Symbole.\n3,5 cm, Zeile 7.\nOK.\n",
        "1611661161116 Symbole.\n3,5 cm, Zeile.\nOK.\n",
        "digits,copy",
    )
    row, records = scored_json(args, tmp_path, capsys)
    assert row["digits"] == pytest.approx(200 / 5)  # 3 and 5 of 16, 16, 3, 5, 7
    assert row["digits_detail"] == "2/5 digit runs, 2 lines lose one"
    assert row["digits_signature"].startswith("digits|")
    assert [r["digits"] for r in records] == [0.0, pytest.approx(200 / 3), None]
    assert records[0]["digits_failures"] == [{"digits": "16", "missing": 2}]
    assert eval_main(args[:4] + ["--metrics", "digits"]) == 2  # no source
    assert "give the source lines" in capsys.readouterr().err


def test_nothing_to_count_is_shown_as_such(tmp_path, capsys):
    lines = tmp_path / "a.txt"
    lines.write_text("Click OK.\n", encoding="utf-8")
    args = ["--hypotheses", str(lines), "--reference", str(lines), "--source", str(lines)]
    assert eval_main([*args, "--metrics", "copy"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("copy n/a  (no protected span in both a source line and its reference)")


# The test set of protected tokens (scripts/build_protected_set.py) and what ships of it.
spec = importlib.util.spec_from_file_location(
    "build_protected_set", REPO / "scripts" / "build_protected_set.py"
)
build_set = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_set)
SHIPPED = REPO / "translate" / "corpora" / "protected_en_de"


def test_ui_strings_are_those_that_keep_a_span_and_were_not_trained_on(tmp_path):
    messages = {
        "": "Content-Type: text/plain; charset=UTF-8\n",
        "The path $(ARG1) does not exist.": "Der Pfad $(ARG1) existiert nicht.",
        "ctx\x04Row %ROWNUMBER": "Zeile %ROWNUMBER",
        "Open the file.": "Öffnen Sie die Datei.",  # nothing protected
        "Version 3.5": "Version 3,5",  # the German changes it: nothing kept
        "Seen in training 7.": "Im Training gesehen 7.",
        "Two\nlines %s": "Zwei\nZeilen %s",
    }
    write_mo(tmp_path / "a.mo", messages)
    pairs = build_set.catalogue_pairs(tmp_path)
    assert ("Row %ROWNUMBER", "Zeile %ROWNUMBER") in pairs and len(pairs) == 6
    chosen = build_set.strings(pairs, seen={"Seen in training 7."})
    assert sorted(chosen) == [
        ("Row %ROWNUMBER", "Zeile %ROWNUMBER"),
        ("The path $(ARG1) does not exist.", "Der Pfad $(ARG1) existiert nicht."),
    ]


def test_the_shipped_set_is_what_the_script_builds():
    def part(name: str) -> list[tuple[str, str]]:
        en, de = (read_lines(SHIPPED / f"{name}.{lang}.gz") for lang in ("en", "de"))
        assert len(en) == len(de)
        return list(zip(en, de))

    assert part("numbers") == build_set.numbers() and len(part("numbers")) == 400
    assert part("tokens") == build_set.tokens()
    assert part("forms") == build_set.forms() and part("many") == build_set.many()
    # every template keeps its value as the class it was written for, in both languages
    for kind, values in build_set.TOKEN_VALUES.items():
        for value in values:
            assert spans(f"See {value} here") == [(kind, value)], value
    strings = part("strings")
    assert len(strings) == build_set.STRINGS_AT_MOST
    seen = build_set.training_lines()
    for english, german in strings:
        assert build_set.keeps_a_span(english, german) and english not in seen


def test_a_line_is_masked_and_its_translation_unmasked_by_sentinel_number():
    [masked] = mask("Press Ctrl+S to save 3 files of 1,003.5 cm in %PRODUCTNAME, then 3.")
    assert masked.text == "Press ⦅1⦆ to save ⦅2⦆ files of ⦅3⦆ cm in ⦅4⦆, then ⦅5⦆."
    assert masked.spans == ("Ctrl+S", "3", "1,003.5", "%PRODUCTNAME", "3")
    # ⦅k,⦆ writes a number with "." and "," swapped (a span of another class as it is)
    translation = (
        "Drücken Sie ⦅1,⦆, um ⦅2⦆ Dateien zu ⦅3,⦆ cm in ⦅4⦆ ⦅9⦆zu speichern, dann ⦅5⦆ und ⦅1⦆."
    )
    assert unmask(translation, masked.spans) == (
        "Drücken Sie Ctrl+S, um 3 Dateien zu 1.003,5 cm in %PRODUCTNAME zu speichern, dann 3 "
        "und Ctrl+S."
    )
    assert unmask("⦅3⦆ cm", masked.spans) == "1,003.5 cm" and swapped("7.4,2") == "7,4.2"
    # a span reads as itself: a space where the translation glued it to a word so that it no
    # longer does (not in a script without spaces; a tag may touch a word, %PRODUCTNAME a hyphen)
    spans = ("36", "37", "%PRODUCTNAME", "<b>", "Ctrl+S", "$1")
    assert unmask("Zeile⦅1⦆s, ⦅1⦆⦅2⦆, ⦅1⦆-mal, ⦅5⦆drücken, ⦅6⦆_Alle", spans) == (
        "Zeile 36 s, 36 37, 36-mal, Ctrl+S drücken, $1 _Alle"
    )
    assert (
        unmask("⦅3⦆-Hilfe, ⦅4⦆fett, Datei⦅3⦆", spans)
        == "%PRODUCTNAME-Hilfe, <b>fett, Datei%PRODUCTNAME"
    )
    assert unmask("第⦅1⦆章", spans) == "第36章"
    # an address glued to a German compound's hyphen would read as another address
    assert unmask("an ⦅1⦆-Eintrag", ("info@example.org",)) == "an info@example.org -Eintrag"
    assert find_spans(unmask("Zeile⦅1⦆", spans)) == find_spans("Zeile 36")
    # what the user typed in the sentinels' brackets is a span of its own, written back as typed
    assert mask("A ⦅1⦆ already.") == [Masked("A ⦅1⦆ already.", ("⦅1⦆",))]
    [typed] = mask("Use ⦅21⦆ and ⦅999⦆ here, then press 7.")
    assert typed == Masked("Use ⦅1⦆ and ⦅2⦆ here, then press ⦅3⦆.", ("⦅21⦆", "⦅999⦆", "7"))
    assert unmask(typed.text, typed.spans) == "Use ⦅21⦆ and ⦅999⦆ here, then press 7."


@pytest.mark.parametrize("count", [20, 21, 40, 57, 200])
def test_a_line_of_more_spans_than_sentinels_is_masked_in_parts_that_each_fit(count):
    line = "Values: " + ", ".join(f"%{n}" for n in range(1, count + 1)) + ". Done."
    parts = mask(line)
    assert len(parts) == -(-count // MAX_SENTINELS)  # as few as fit
    assert all(len(part.spans) <= MAX_SENTINELS for part in parts)
    assert [span for part in parts for span in part.spans] == [f"%{n}" for n in range(1, count + 1)]
    # each part unmasked, joined after its `before`, is the line again
    assert "".join(part.before + unmask(part.text, part.spans) for part in parts) == line
    assert parts[0].before == "" and all(part.before == " " for part in parts[1:])
    # a sentence's end is preferred to a later space: 18 spans, not 20, in the first part
    sentences = [f"Add {3 * k + 1}, {3 * k + 2} and {3 * k + 3}." for k in range(8)]
    first, rest = mask(" ".join(sentences))
    assert unmask(first.text, first.spans) == " ".join(sentences[:6]) and len(first.spans) == 18
    assert (rest.before, unmask(rest.text, rest.spans)) == (" ", " ".join(sentences[6:]))
    # no space between the spans at all: cut right after the last that fits
    glued = mask("".join(f"%{n}" for n in range(1, 31)))
    assert [part.text for part in glued] == ["".join(SENTINELS[:20]), "".join(SENTINELS[:10])]


def test_a_training_pair_masks_the_spans_both_sides_have_with_the_same_sentinel():
    source, target = mask_pair(
        "Click button 36 and 36, then 7 of 3.5 cm in 7.4 and 0.5%; see %PRODUCTNAME.",
        "Klicken Sie auf 36 und 36, dann 3,5 cm in 7.4 und 0,5 %; siehe %PRODUCTNAME.",
    )
    # a number the target writes with "." and "," swapped: ⦅k,⦆ there; one the target writes
    # otherwise (0.5% as 0,5 %), or lacks (7), stays as it is
    assert source == "Click button ⦅1⦆ and ⦅2⦆, then 7 of ⦅3⦆ cm in ⦅4⦆ and 0.5%; see ⦅5⦆."
    assert target == "Klicken Sie auf ⦅1⦆ und ⦅2⦆, dann ⦅3,⦆ cm in ⦅4⦆ und 0,5 %; siehe ⦅5⦆."
    # the target's order may differ: each sentinel goes where its span is
    assert mask_pair("Press F1 or Ctrl+S.", "Ctrl+S oder F1 drücken.") == (
        "Press ⦅1⦆ or ⦅2⦆.",
        "⦅2⦆ oder ⦅1⦆ drücken.",
    )
    assert 0 <= hash_share("a") < 1 and hash_share("a") == hash_share("a") != hash_share("b")


def test_a_model_trained_with_protected_spans_reads_sentinels_and_writes_the_spans_back(tmp_path):
    english = fixture_lines("train.en")
    german = fixture_lines("train.de")
    vocab = Vocabularies.train(
        list(zip(english, german)), 200, sentinels=SENTINEL_PIECES, split_digits=True
    )
    pieces = vocab.source.processor.encode_as_pieces("Row 1234 ⦅12⦆")
    assert pieces[-5:] == ["1", "2", "3", "4", "▁⦅12⦆"] or pieces[-6:-1] == [
        "1",
        "2",
        "3",
        "4",
        "▁",
    ]
    cfg = ModelConfig(
        d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=16, max_positions=64
    )
    model = Transformer(cfg, len(vocab.source), len(vocab.target), shared_vocab=True)
    many = " ".join(f"%{n}" for n in range(1, 26))  # more spans than sentinels: two parts
    lines = ["Click button 36.", "", "Open it.", many]
    for protects in (True, False):
        path = tmp_path / f"{protects}.ckpt"
        run = "data:\n  protect_spans: 0.5\n" if protects else "data:\n  src_lang: en\n"
        write_checkpoint(path, model, vocab, run_config=run)
        loaded = load_model(path)
        target = pipeline.target_tags_for(loaded, None)
        segments = pipeline.source_segments(loaded, lines, target)
        sentinel = vocab.source.processor.piece_to_id("⦅1⦆")
        # the search writes each sentinel of a line once: ⦅k⦆ or ⦅k,⦆ for sentinel k
        plan = pipeline.search_plan(loaded, SearchSettings(), target)
        ids = plan.sentinels
        assert (ids is not None) is protects
        # a model that protects spans writes no digit but its sentinels' spans
        pieces = [vocab.target.processor.id_to_piece(i) for i in range(len(vocab.target))]
        digits = {i for i, piece in enumerate(pieces) if any(c.isdigit() for c in piece)}
        assert set(plan.never) == (digits - set(ids.target) if protects else set())
        if protects:
            assert ids.source[0] == sentinel and len(ids.target) == 2 * MAX_SENTINELS
            assert {
                vocab.target.processor.id_to_piece(t): k
                for t, k in zip(ids.target, ids.target_slot)
            } == {piece: k % MAX_SENTINELS for k, piece in enumerate(SENTINEL_PIECES)}
        assert (sentinel in segments.ids[0]) is protects
        spans = [part.spans for part in segments.parts]
        percents = tuple(f"%{n}" for n in range(1, 26))
        wanted = [("36",), (), (), percents[:20], percents[20:]] if protects else [()] * 4
        lines_of_parts = [part.line for part in segments.parts]
        assert spans == wanted and lines_of_parts == [0, 1, 2, 3, 3][: len(spans)]
        copied = [" ".join(SENTINELS[:20]), " ".join(SENTINELS[:5])] if protects else [many]
        written = vocab.target.encode(["Klicken Sie auf ⦅1⦆.", "", "Öffnen.", *copied])
        found = [[Hypothesis(ids, 0.0, 0.0)] for ids in written]
        texts = [entry.text for [entry] in pipeline.join_segments(loaded, segments, found)]
        first = "Klicken Sie auf 36." if protects else "Klicken Sie auf ⦅1⦆."
        assert texts == [first, "", "Öffnen.", many]
