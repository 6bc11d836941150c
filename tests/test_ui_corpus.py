"""The in-domain corpus of LibreOffice's user interface (scripts/build_ui_corpus.py): split by
catalogue with no English string in two splits, and what ships of it."""

import build_ui_corpus
from helpers import write_mo

from translate.text.corpus import read_lines


def test_pairs_are_split_by_catalogue_and_no_english_string_leaks(tmp_path):
    header = {"": "Content-Type: text/plain; charset=UTF-8\n"}
    write_mo(tmp_path / "sw.mo", header | {"~Open": "Ö~ffnen", "Close": "Schließen"})
    write_mo(tmp_path / "chart.mo", header | {"Open": "Öffnen", "Axis": "Achse"})
    write_mo(tmp_path / "dba.mo", header | {"Close": "Schließen", "Two\nlines": "Zwei\nZeilen"})
    found = {mo.stem: build_ui_corpus.catalogue(mo) for mo in sorted(tmp_path.glob("*.mo"))}
    assert found["sw"] == [("Close", "Schließen"), ("Open", "Öffnen")]
    assert build_ui_corpus.splits(found) == {
        "train": [("Close", "Schließen"), ("Open", "Öffnen")],
        "dev": [],  # dba's Close is training's; its two lines are no line
        "test": [("Axis", "Achse")],  # chart's Open is training's
    }


def test_the_shipped_corpus_has_no_english_string_in_two_splits():
    english = {}
    for split in ("train", "dev", "test"):
        en, de = (
            read_lines(build_ui_corpus.OUTPUT / f"{split}.{lang}.gz") for lang in ("en", "de")
        )
        assert len(en) == len(de) > 500 and all(line and "~" not in line for line in en + de)
        english[split] = set(en)
    assert not english["train"] & english["dev"] and not english["train"] & english["test"]
    assert not english["dev"] & english["test"]
