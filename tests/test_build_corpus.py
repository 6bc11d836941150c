"""The multi-way corpus builder on a small help tree: alignment across languages, the document
split shared by every language, the length filter for scripts without spaces, and the reader."""

from __future__ import annotations

import gzip
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from translate.text.corpus import CorpusError, read_split

spec = importlib.util.spec_from_file_location("build_corpus", REPO / "scripts" / "build_corpus.py")
build_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_corpus)


def documents_in_every_split() -> dict[str, str]:
    """A help page name for each split (the split is a hash of the path)."""
    found: dict[str, str] = {}
    for i in range(10_000):
        name = f"text/page{i}.html"
        found.setdefault(build_corpus.document_split(name), name)
        if len(found) == 3:
            return found
    raise AssertionError("no page name hashes into every split")


# Per page: paragraph id -> text in English, German ("de") and Japanese ("ja"); None: no such id.
PARAGRAPHS = {
    "par_id1": ("Click the OK button.", "Klicken Sie auf OK.", "OKボタンをクリックします。"),
    "par_id2": ("Select the cells.", "Select the cells.", "セルを選択"),  # de untranslated
    "par_id3": ("Open a file.", "Öffnen Sie eine Datei.", "開く"),  # ja under 4 characters
    "hd_id4": ("Insert a chart.", None, "グラフを挿入します。"),  # de lacks the id
    "par_id5": ("Notes", "Hinweise", "注記です"),  # English under 2 words: no row at all
}


def marker(split: str, lang: str, pid: str) -> str:
    """Where a paragraph came from, in the spaced languages (Japanese, and the one-word English
    paragraph, are left as they are, so the length filter sees the text alone)."""
    return "" if lang == "ja" or pid == "par_id5" else f" <b>{split}</b>"


def write_tree(root: Path, pages: dict[str, str]) -> None:
    for split, page in pages.items():
        for index, lang in enumerate(("en-US", "de", "ja")):
            body = "".join(
                f'<p id="{pid}">{texts[index]}{marker(split, lang, pid)}</p>'
                if texts[index] is not None
                else ""
                for pid, texts in PARAGRAPHS.items()
            )
            path = root / lang / page
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"<html><body><h1>t</h1>{body}</body></html>", encoding="utf-8")


def lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("help")
    pages = documents_in_every_split()
    write_tree(root / "help", pages)
    build_corpus.build_multiway(root / "help", ["de", "ja"], root / "out")
    return root, pages


def test_rows_align_across_languages_and_leave_out_what_is_unusable(built):
    root, _ = built
    for split in ("train", "dev", "test"):
        en, de, ja = (lines(root / "out" / f"{split}.{lang}.gz") for lang in ("en", "de", "ja"))
        assert en == [
            f"Click the OK button. {split}",
            f"Select the cells. {split}",
            f"Open a file. {split}",
            f"Insert a chart. {split}",
        ]
        assert de == [f"Klicken Sie auf OK. {split}", "", f"Öffnen Sie eine Datei. {split}", ""]
        assert ja == ["OKボタンをクリックします。", "セルを選択", "", "グラフを挿入します。"]


def test_the_split_is_by_document_and_the_same_in_every_language(built):
    root, pages = built
    for split, page in pages.items():
        assert build_corpus.document_split(page) == split
        for lang in ("en", "de"):
            assert all(
                line.endswith(split) or not line
                for line in lines(root / "out" / f"{split}.{lang}.gz")
            )


def test_the_length_filter_counts_characters_where_words_have_no_spaces():
    assert build_corpus.too_short("開く", "ja") and not build_corpus.too_short("セルを選択", "ja")
    assert build_corpus.too_short("打开", "zh-CN") and not build_corpus.too_short(
        "打开文件", "zh-CN"
    )
    assert build_corpus.too_short("Hinweise", "de") and not build_corpus.too_short(
        "Zwei Wörter", "de"
    )


def test_the_multiway_reader_gives_any_pair_without_the_blank_lines(built):
    root, _ = built
    corpus = root / "out"
    assert read_split(corpus, "test", "de", "ja", "multiway") == [
        ("Klicken Sie auf OK. test", "OKボタンをクリックします。")
    ]
    assert len(read_split(corpus, "test", "en", "ja", "multiway")) == 3
    assert len(read_split(corpus, "test", "en", "de", "text")) == 4, "format text keeps blank lines"
    with pytest.raises(CorpusError, match="languages among de, en, ja"):
        read_split(corpus, "test", "en", "fr", "multiway")


def test_the_build_is_deterministic(built, tmp_path):
    root, _ = built
    build_corpus.build_multiway(root / "help", ["de", "ja"], tmp_path / "again")
    for path in sorted((root / "out").iterdir()):
        assert path.read_bytes() == (tmp_path / "again" / path.name).read_bytes(), path.name


def test_a_language_missing_from_the_help_tree_is_named(built):
    root, _ = built
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_corpus.py"),
            "--html-root",
            str(root / "help"),
            "--langs",
            "fr",
            "--out",
            str(root / "fr"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith("holds the languages de, en-US, ja")


def test_a_languages_pairs_do_not_depend_on_the_other_languages_built(built, tmp_path):
    root, _ = built
    build_corpus.build_multiway(root / "help", ["ja"], tmp_path / "ja")
    for split in ("train", "dev", "test"):
        alone = [
            (e, j)
            for e, j in zip(
                lines(tmp_path / "ja" / f"{split}.en.gz"), lines(tmp_path / "ja" / f"{split}.ja.gz")
            )
            if j
        ]
        both = [
            (e, j)
            for e, j in zip(
                lines(root / "out" / f"{split}.en.gz"), lines(root / "out" / f"{split}.ja.gz")
            )
            if j
        ]
        assert alone == both
