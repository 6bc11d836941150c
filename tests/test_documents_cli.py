"""translate-cli on real documents (tests/fixtures/documents_real, built from Debian's packages
by scripts/build_document_set.py): each comes back in its format with all its structure, and
bad input is refused in one line before any work."""

import pytest
from helpers import protecting_model

from translate.cli.translate import main as translate_main
from translate.documents import office
from translate.documents.formats import format_of
from translate.documents.gettext import read as read_po

REAL = "tests/fixtures/documents_real"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return protecting_model(tmp_path_factory.mktemp("model"))


def run(checkpoint, source, output, *flags) -> int:
    return translate_main(
        ["--checkpoint", str(checkpoint), "--source", str(source), "--output", str(output)]
        + ["--quiet", "--beam", "1", *flags]
    )


@pytest.mark.parametrize(
    "name",
    ["create_dialog.docx", "func_sum.odt", "func_sum.ods", "func_sum.xlsx", "footer_nextpage.docx"],
)
def test_an_office_file_comes_back_with_every_paragraph_run_and_mark(checkpoint, tmp_path, name):
    source = f"{REAL}/{name}"
    out = tmp_path / name
    assert run(checkpoint, source, out) == 0
    data, written = open(source, "rb").read(), out.read_bytes()
    before, after = office.counts(data, name), office.counts(written, name)
    assert after.paragraphs == before.paragraphs and after.marks == before.marks
    assert after.texts == before.texts and written != data


@pytest.mark.parametrize("name", ["create_dialog.html", "func_sum.html"])
def test_an_html_page_keeps_its_markup_outside_the_texts(checkpoint, tmp_path, name):
    source = f"{REAL}/{name}"
    out = tmp_path / name
    assert run(checkpoint, source, out) == 0
    page = out.read_text(encoding="utf-8")
    original = open(source, encoding="utf-8").read()
    for tag in ("<p", "<h1", "<table", "<a ", "<span", "<script", "<div"):
        assert page.count(tag) == original.count(tag), tag
    assert len(format_of(name).read(out.read_bytes(), name).texts()) == len(
        format_of(name).read(original.encode(), name).texts()
    )


def test_a_template_gives_a_catalogue_with_every_message_and_review_marks(checkpoint, tmp_path):
    out = tmp_path / "sb.de.po"
    assert run(checkpoint, f"{REAL}/sb.pot", out, "--target-lang", "de", "--review-below", "1") == 0
    template = read_po(open(f"{REAL}/sb.pot", "rb").read(), "sb.pot")
    text = out.read_text(encoding="utf-8")
    # every message of the template, each marked for review (no confidence reaches 1)
    assert text.count("\nmsgid ") == open(f"{REAL}/sb.pot", encoding="utf-8").read().count(
        "\nmsgid "
    )
    assert text.count("#, fuzzy") == len(template.texts())
    assert run(checkpoint, f"{REAL}/sb.pot", out, "--review-below", "0") == 0
    assert "#, fuzzy" not in out.read_text(encoding="utf-8")


def test_flags_for_lines_and_bad_files_are_refused_in_one_line(checkpoint, tmp_path, capsys):
    out = tmp_path / "out.docx"
    assert run(checkpoint, f"{REAL}/func_sum.docx", out, "--n-best", "2", "--beam", "2") == 2
    assert "--n-best is for text translated line by line, not a docx document" in (
        capsys.readouterr().err
    )
    cut = tmp_path / "cut.docx"
    cut.write_bytes(open(f"{REAL}/func_sum.docx", "rb").read()[:-100])
    assert run(checkpoint, cut, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{cut}: not a readable zip package" in err[0]
    assert not out.exists() and not list(tmp_path.glob("out.docx*"))
    # an output that is the input is refused before any work
    same = tmp_path / "same.html"
    same.write_bytes(open(f"{REAL}/func_sum.html", "rb").read())
    assert run(checkpoint, same, same) == 2
    assert "its translation would replace it" in capsys.readouterr().err
    assert same.read_bytes() == open(f"{REAL}/func_sum.html", "rb").read()
    assert run(checkpoint, same, tmp_path / "x.html", "--format", "rtf") == 2
    assert "--format rtf: not a format" in capsys.readouterr().err
