"""Glossaries (`--glossary FILE`): read with errors that name the line, terms found as written and
as whole words, masked beside the protected spans, and written back as their target terms."""

import json

import pytest
from helpers import joint_vocab, protecting_model, random_checkpoint

from translate.cli.evaluate import main as eval_main
from translate.cli.translate import main as translate_main
from translate.text.glossary import Glossary, GlossaryError
from translate.text.protected import MAX_SENTINELS, SENTINELS, mask, unmask


def glossary_file(tmp_path, text: str, name: str = "terms.tsv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_a_glossary_file_is_read_with_its_comments_and_blank_lines_skipped(tmp_path):
    path = glossary_file(
        tmp_path, "# UI terms\nBasic IDE\tBasic-IDE\n\n dialog \tDialogfeld\ndialog\tDialogfeld\n"
    )
    glossary = Glossary.read(path)
    assert glossary.pairs == (("Basic IDE", "Basic-IDE"), ("dialog", "Dialogfeld"))
    assert glossary.name == f"--glossary {path}"
    assert hash(glossary) == hash(Glossary(glossary.pairs))  # a server's answers key on it


@pytest.mark.parametrize(
    "text, error",
    [
        ("Basic IDE Basic-IDE\n", "line 1: expected a source term, a tab and a target term"),
        ("a\tb\n\t Dialogfeld\n", "line 2: expected a source term, a tab and a target term"),
        ("a\tb\tc\n", "line 1: expected a source term, a tab and a target term"),
        (
            "dialog\tDialog\nx\ty\ndialog\tDialogfeld\n",
            "line 3: 'dialog' has the target term "
            "'Dialogfeld' here and 'Dialog' on line 1: keep one",
        ),
        ("# nothing\n\n", "no terms"),
        (b"caf\xe9\tCaf\xe9\n", "it is not UTF-8 text"),
    ],
)
def test_a_bad_glossary_gets_an_error_naming_its_line(tmp_path, text, error):
    path = glossary_file(tmp_path, text)
    with pytest.raises(GlossaryError) as raised:
        Glossary.read(path)
    message = str(raised.value)
    assert message.startswith(f"--glossary {path}") and error in message and "\n" not in message
    with pytest.raises(GlossaryError, match="No such file"):
        Glossary.read(tmp_path / "missing.tsv")


def test_terms_are_found_as_written_as_whole_words_the_longest_at_each_place():
    glossary = Glossary((("Basic", "BASIC"), ("Basic IDE", "Basic-IDE"), ("IDE", "Umgebung")))
    found = glossary.find("Basic IDE, Basically basic IDE_x IDE. (Basic)")
    assert [(span.text, span.start) for span in found] == [
        ("Basic IDE", 0),
        ("IDE", 33),
        ("Basic", 39),
    ]
    assert all(span.kind == "term" for span in found)


def test_terms_are_masked_beside_the_protected_spans_and_written_back_as_target_terms():
    glossary = Glossary((("Basic IDE", "Basic-IDE"), ("example", "Beispiel")))
    line = "Open the Basic IDE at https://example.org/Basic IDE and press F5 on example 2."
    [part] = mask(line, glossary)
    # the URL is a protected span: the term inside it stays as it is
    assert part.spans == ("Basic-IDE", "https://example.org/Basic", "F5", "Beispiel", "2")
    assert part.text == "Open the ⦅1⦆ at ⦅2⦆ IDE and press ⦅3⦆ on ⦅4⦆ ⦅5⦆."
    translated = "Öffnen Sie die ⦅1⦆ unter ⦅2⦆ IDE und drücken Sie ⦅3⦆ bei ⦅4⦆ ⦅5⦆."
    assert unmask(translated, part.spans) == (
        "Öffnen Sie die Basic-IDE unter https://example.org/Basic IDE und drücken Sie F5 bei "
        "Beispiel 2."
    )
    assert mask(line)[0].spans[0] == "https://example.org/Basic"  # without it, no term


def test_a_line_of_more_terms_than_sentinels_is_cut_into_parts():
    glossary = Glossary((("menu", "Menü"),))
    line = " ".join(f"menu {k}." for k in range(MAX_SENTINELS))  # 40 spans
    parts = mask(line, glossary)
    assert len(parts) == 2 and all(len(part.spans) <= MAX_SENTINELS for part in parts)
    assert sum(part.spans.count("Menü") for part in parts) == MAX_SENTINELS
    assert "".join(part.before + part.text for part in parts).count(SENTINELS[0]) == 2


def test_translate_cli_writes_each_term_s_target_term_once_where_it_stood(tmp_path, capsys):
    checkpoint = protecting_model(tmp_path)
    glossary = glossary_file(tmp_path, "dialog\tDialogfeld\nBasic IDE\tBasic-IDE\n")
    source = tmp_path / "input.en"
    lines = ["Open the dialog.", "Close the Basic IDE and the dialog.", "", "No term here."]
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.de"
    flags = ["--checkpoint", str(checkpoint), "--source", str(source), "--quiet", "--beam", "2"]
    assert translate_main([*flags, "--glossary", str(glossary), "--output", str(out)]) == 0
    written = out.read_text(encoding="utf-8").splitlines()
    assert [line.count("Dialogfeld") for line in written] == [1, 1, 0, 0]
    assert [line.count("Basic-IDE") for line in written] == [0, 1, 0, 0]
    assert written[2] == ""
    # a bad glossary fails before any work, in one line naming it
    bad = glossary_file(tmp_path, "dialog Dialogfeld\n", "bad.tsv")
    assert translate_main([*flags, "--glossary", str(bad), "--output", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert f"--glossary {bad} line 1: expected a source term" in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


def test_a_model_without_protected_spans_refuses_a_glossary(tmp_path, capsys):
    checkpoint = tmp_path / "plain.ckpt"
    random_checkpoint(checkpoint, joint_vocab(), None)
    glossary = glossary_file(tmp_path, "dialog\tDialogfeld\n")
    source = tmp_path / "input.en"
    source.write_text("Open the dialog.\n", encoding="utf-8")
    code = translate_main(
        ["--checkpoint", str(checkpoint), "--source", str(source), "--glossary", str(glossary)]
    )
    assert code == 2
    assert f"--glossary {glossary}: the model was not trained to keep protected spans" in (
        capsys.readouterr().err
    )
    code = eval_main(
        ["--hypotheses", str(source), "--reference", str(source), "--glossary", str(glossary)]
    )
    assert code == 2 and "--glossary with --hypotheses is for --metrics terms" in (
        capsys.readouterr().err
    )


def test_translate_serve_keeps_its_own_glossary_and_a_request_s(tmp_path):
    from fastapi.testclient import TestClient

    from translate.decode.loaded_model import load_model
    from translate.decode.settings import SearchSettings
    from translate.serve.app import ServeSettings, create_app
    from translate.serve.schema import MAX_TERM_CHARS

    loaded = load_model(protecting_model(tmp_path, languages=True))
    server = Glossary((("dialog", "Dialogfeld"), ("menu", "Menü")), "--glossary terms.tsv")
    settings = ServeSettings(search=SearchSettings(glossary=server))
    texts = ["Open the dialog and the menu.", "Close the Basic IDE."]
    with TestClient(create_app(loaded, settings)) as client:
        plain = client.post("/v1/translate", json={"text": texts}).json()["translations"]
        assert [text.count("Dialogfeld") for text in plain] == [1, 0]
        assert [text.count("Menü") for text in plain] == [1, 0]
        # a request's terms are added, and win over the server's
        asked = {"text": texts, "glossary": {"menu": "Menüleiste", "Basic IDE": "Basic-IDE"}}
        own = client.post("/v1/translate", json=asked).json()["translations"]
        assert [text.count("Dialogfeld") for text in own] == [1, 0]
        assert [text.count("Menüleiste") for text in own] == [1, 0]
        assert [text.count("Basic-IDE") for text in own] == [0, 1]
        # LibreTranslate's API: the server's glossary
        libre = client.post("/translate", json={"q": texts[0], "source": "en", "target": "de"})
        assert libre.json()["translatedText"].count("Dialogfeld") == 1
        for terms in ({"": "x"}, {"a\tb": "c"}, {"menu": "x" * (MAX_TERM_CHARS + 1)}):
            refused = client.post("/v1/translate", json={"text": texts, "glossary": terms})
            assert refused.status_code == 422 and "glossary: the term" in refused.json()["error"]
        many = {f"term{k}": "x" for k in range(1001)}
        refused = client.post("/v1/translate", json={"text": texts, "glossary": many})
        assert refused.status_code == 422 and "over the limit of 1,000" in refused.json()["error"]


def test_translate_serve_refuses_a_glossary_where_the_model_cannot_keep_terms(tmp_path, capsys):
    from fastapi.testclient import TestClient

    from translate.cli.serve import main as serve_main
    from translate.decode.loaded_model import load_model
    from translate.serve.app import ServeSettings, create_app

    checkpoint = tmp_path / "plain.ckpt"
    random_checkpoint(checkpoint, joint_vocab(), None)
    with TestClient(create_app(load_model(checkpoint), ServeSettings())) as client:
        asked = {"text": ["Open the dialog."], "glossary": {"dialog": "Dialogfeld"}}
        refused = client.post("/v1/translate", json=asked)
    assert refused.status_code == 422 and "cannot keep glossary terms" in refused.json()["error"]
    glossary = glossary_file(tmp_path, "dialog\tDialogfeld\n")
    code = serve_main(["--checkpoint", str(checkpoint), "--glossary", str(glossary)])
    assert code == 2
    assert f"--glossary {glossary}: the model was not trained" in capsys.readouterr().err


def test_term_use_counts_each_source_term_s_target_term_in_the_translation(tmp_path, capsys):
    from translate.score.term_use import line_terms, term_use

    glossary = Glossary((("dialog", "Dialogfeld"), ("menu", "Menü")))
    sources = [
        "Open the dialog, then the dialog again.",  # the term twice
        "Open the menu at https://example.org/menu.",  # the one in the URL does not count
        "No term here.",
    ]
    hypotheses = ["Öffnen Sie das Dialogfeld, dann den Dialog.", "Öffnen Sie das Menü.", "Nichts."]
    first = line_terms(glossary, sources[0], hypotheses[0])
    assert first.counted == {"Dialogfeld": 2} and first.missing == {"Dialogfeld": 1}
    assert first.score == 50 and first.failures() == [{"term": "Dialogfeld", "missing": 1}]
    assert line_terms(glossary, sources[2], hypotheses[2]).score is None
    used = term_use(glossary, sources, hypotheses)
    assert (used.counted, used.used, used.lines) == (3, 2, 2)
    assert used.detail() == "2/3 terms used, in 2 lines"
    # translate-eval --hypotheses --metrics terms --glossary, with sentence scores
    files = {}
    for name, lines in (("src", sources), ("hyp", hypotheses), ("ref", hypotheses)):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    terms = glossary_file(tmp_path, "dialog\tDialogfeld\nmenu\tMenü\n")
    flags = ["--hypotheses", str(files["hyp"]), "--reference", str(files["ref"])]
    flags += ["--source", str(files["src"]), "--metrics", "terms", "--glossary", str(terms)]
    sentences = tmp_path / "sentences.jsonl"
    assert eval_main([*flags, "--json", "--sentence-scores", str(sentences)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["terms"] == pytest.approx(200 / 3)
    records = [json.loads(line) for line in sentences.read_text(encoding="utf-8").splitlines()]
    assert [record["terms"] for record in records] == [50.0, 100.0, None]
    assert eval_main(flags[:-2]) == 2
    assert "--metrics terms counts a glossary's terms: give --glossary FILE" in (
        capsys.readouterr().err
    )
