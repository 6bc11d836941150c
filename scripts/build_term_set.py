#!/usr/bin/env python3
"""Build the English-German term test set (`translate-eval --metrics terms --glossary ...`).

The glossary is LibreOffice's own terminology: the user-interface names of its English
catalogues and their German translations, from the catalogues (.mo) of Debian's
`libreoffice-l10n-de`. The sentences are the bundled corpus's test split (its help pages, which
name those menus, dialogs, functions and objects), those whose reference uses the UI term.

- A term is a UI string of one to four words, starting with a capital letter, letters, spaces
  and hyphens only, at least 4 characters (its mnemonic `~` and a trailing `...` or `:` taken
  off), with one German translation in every catalogue, written otherwise than the English
  (`Navigator` is its own German: nothing to measure).
- It is kept where the test split holds it (found as `--glossary` finds terms: as written,
  whole words, outside protected spans) and the German reference of every such line holds its
  German term: the help's translators used it there.
- The sentences are the test split's lines holding a kept term.

Written to translate/corpora/terms_en_de/: `glossary.tsv` (source<TAB>target, the format of
`--glossary`) and `test.en.gz` / `test.de.gz`. Not shown to training: the UI catalogues are no
part of the training corpus and the lines are the test split's. Standard library and this
package only; deterministic output.

    python scripts/build_term_set.py                  # apt-get download, then build
    python scripts/build_term_set.py --mo-root DIR    # an extracted .../resource/de/LC_MESSAGES
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import tempfile
from pathlib import Path

from build_protected_set import catalogue_pairs, download_catalogues, write_part

from translate.files import write_atomic
from translate.text.glossary import Glossary
from translate.text.protected import TERM, masked_spans

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "translate" / "corpora" / "terms_en_de"
TEST = REPO / "translate" / "corpora" / "libreoffice_help_en_de" / "test"

_TERM = re.compile(r"[A-Z][A-Za-z]*(?:[ -][A-Za-z]+){0,3}")
_ENDING = re.compile(r"\s*(?:\.\.\.|…|:)$")


def ui_name(text: str) -> str:
    """A UI string without its mnemonic and a trailing `...` or `:`."""
    return _ENDING.sub("", text.replace("~", "").strip()).strip()


def candidate_terms(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The UI names that look like terms (`_TERM`) with one German translation, not the same."""
    translations: dict[str, set[str]] = {}
    for english, german in pairs:
        english, german = ui_name(english), ui_name(german)
        if _TERM.fullmatch(english) and len(english) >= 4 and german and "\n" not in german:
            translations.setdefault(english, set()).add(german)
    return {
        english: next(iter(germans))
        for english, germans in sorted(translations.items())
        if len(germans) == 1 and next(iter(germans)) != english
    }


def terms_used(
    candidates: dict[str, str], sources: list[str], references: list[str]
) -> dict[str, str]:
    """The candidates the sources hold, each of whose lines' reference holds its German."""
    glossary = Glossary(tuple(candidates.items()))
    found: dict[str, list[int]] = {}
    for number, source in enumerate(sources):
        for span in masked_spans(source, glossary):
            if span.kind == TERM:
                found.setdefault(span.text, []).append(number)
    return {
        english: candidates[english]
        for english in sorted(found)
        if all(candidates[english] in references[number] for number in found[english])
    }


def term_lines(
    terms: dict[str, str], sources: list[str], references: list[str]
) -> list[tuple[str, str]]:
    """The (source, reference) lines holding a term of `terms`, in the split's order."""
    glossary = Glossary(tuple(terms.items()))
    return [
        (source, reference)
        for source, reference in zip(sources, references, strict=True)
        if any(span.kind == TERM for span in masked_spans(source, glossary))
    ]


def read_split(lang: str) -> list[str]:
    with gzip.open(f"{TEST}.{lang}.gz", "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mo-root", type=Path, help="the extracted LC_MESSAGES folder")
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        mo_root = args.mo_root or download_catalogues(Path(tmp))
        if not sorted(mo_root.glob("*.mo")):
            raise SystemExit(f"build_term_set: {mo_root} holds no .mo catalogue")
        candidates = candidate_terms(catalogue_pairs(mo_root))
    sources, references = read_split("en"), read_split("de")
    terms = terms_used(candidates, sources, references)
    lines = term_lines(terms, sources, references)
    args.out.mkdir(parents=True, exist_ok=True)
    glossary = "".join(f"{english}\t{german}\n" for english, german in terms.items())
    write_atomic(args.out / "glossary.tsv", glossary.encode("utf-8"))
    write_part(args.out, "test", lines)
    print(
        f"build_term_set: {len(candidates)} UI terms, {len(terms)} in the test split, "
        f"{len(lines)} lines",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
