"""The term test set (scripts/build_term_set.py): which UI names are terms, which the test split
uses, and what ships of it."""

import build_term_set
from build_protected_set import catalogue_pairs, training_lines
from helpers import write_mo

from translate.text.corpus import read_lines
from translate.text.glossary import Glossary

SHIPPED = build_term_set.OUTPUT


def test_terms_are_ui_names_with_one_translation_other_than_themselves(tmp_path):
    write_mo(
        tmp_path / "a.mo",
        {
            "": "Content-Type: text/plain; charset=UTF-8\n",
            "~Basic IDE...": "~Basic-IDE...",
            "Paragraph Style:": "Absatzvorlage:",
            "ctx\x04Shift": "Umschalt",
            "Navigator": "Navigator",  # its own German: nothing to measure
            "open file": "Datei öffnen",  # no capital: a phrase, not a name
            "Page 2": "Seite 2",  # a digit
            "Four or more words here": "Vier oder mehr Wörter hier",
        },
    )
    write_mo(tmp_path / "b.mo", {"Shift": "Verschiebung", "Array": "Matrix"})
    terms = build_term_set.candidate_terms(catalogue_pairs(tmp_path))
    # Shift has two translations across the catalogues: no glossary could choose
    assert terms == {
        "Array": "Matrix",
        "Basic IDE": "Basic-IDE",
        "Paragraph Style": "Absatzvorlage",
    }


def test_a_term_is_kept_where_every_reference_of_its_lines_uses_it():
    candidates = {"Array": "Matrix", "Basic IDE": "Basic-IDE", "Table": "Tabelle", "Arrow": "Pfeil"}
    sources = [
        "Open the Basic IDE.",
        "Enter an Array formula in the Basic IDE.",
        "An Array of 3 cells.",
        "Insert a Table.",
        "See Table 2.",  # "Table 2" holds the number 2, Table is still a term
        "The Arrows point down.",  # not a whole word
    ]
    references = [
        "Öffnen Sie die Basic-IDE.",
        "Geben Sie eine Matrixformel in der Basic-IDE ein.",  # Matrix within a word counts
        "Ein Bereich von 3 Zellen.",  # Array not written Matrix here: not a term
        "Fügen Sie eine Tabelle ein.",
        "Siehe Tabelle 2.",
        "Die Pfeile zeigen nach unten.",
    ]
    terms = build_term_set.terms_used(candidates, sources, references)
    assert terms == {"Basic IDE": "Basic-IDE", "Table": "Tabelle"}
    lines = build_term_set.term_lines(terms, sources, references)
    assert [source for source, _ in lines] == [sources[k] for k in (0, 1, 3, 4)]


def test_the_shipped_set_is_the_test_split_lines_using_the_shipped_glossary():
    glossary = Glossary.read(SHIPPED / "glossary.tsv")
    terms = dict(glossary.pairs)
    sources, references = (read_lines(SHIPPED / f"test.{lang}.gz") for lang in ("en", "de"))
    assert len(terms) >= 100 and len(sources) == len(references) >= 300
    assert build_term_set.terms_used(terms, sources, references) == terms
    assert build_term_set.term_lines(terms, sources, references) == list(zip(sources, references))
    split = set(zip(build_term_set.read_split("en"), build_term_set.read_split("de")))
    assert set(zip(sources, references)) <= split
    assert not set(sources) & training_lines()
    assert all(english != german for english, german in glossary.pairs)
