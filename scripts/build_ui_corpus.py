#!/usr/bin/env python3
"""Build the in-domain English-German corpus of LibreOffice's user interface, for fine-tuning a
model trained on the bundled help corpus (translate/corpora/libreoffice_ui_en_de/).

Every translated message of the catalogues (.mo) of Debian's `libreoffice-l10n-de`, one line
each (a message of several lines, or one over `MAX_CHARS`, is left out), the mnemonic marks `~`
taken off both sides. Split by catalogue, so that a dialog's strings never straddle two splits:
`TEST` and `DEV` name the catalogues of the test and dev splits, every other catalogue is
training. A pair is kept once a split, and a pair whose English is in the training split is
left out of dev and test (and one in dev, out of test): no English string is in two splits.

    python scripts/build_ui_corpus.py                  # apt-get download, then build
    python scripts/build_ui_corpus.py --mo-root DIR    # an extracted .../resource/de/LC_MESSAGES
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from build_protected_set import download_catalogues, mo_pairs, write_part

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "translate" / "corpora" / "libreoffice_ui_en_de"
TEST = ("basctl", "chart", "sb", "sm")  # Basic's IDE and messages, charts, Math
DEV = ("dba", "uui")  # Base, the UI's common dialogs
MAX_CHARS = 300


def catalogue(mo: Path) -> list[tuple[str, str]]:
    """(English, German) of the catalogue's translated one-line messages, `~` taken off."""
    pairs = []
    for english, german in mo_pairs(mo):
        english, german = english.replace("~", "").strip(), german.replace("~", "").strip()
        if not english or not german or "\n" in english + german:
            continue
        if max(len(english), len(german)) > MAX_CHARS:
            continue
        pairs.append((english, german))
    return sorted(pairs)


def split_of(name: str) -> str:
    return "test" if name in TEST else "dev" if name in DEV else "train"


def splits(catalogues: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple[str, str]]]:
    """The pairs of each split, in catalogue order, each once, no English in an earlier split
    (train, then dev, then test)."""
    out: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    seen_english: set[str] = set()
    for split in out:
        kept: dict[tuple[str, str], None] = {}
        for name in sorted(catalogues):
            if split_of(name) == split:
                kept.update(
                    (pair, None) for pair in catalogues[name] if pair[0] not in seen_english
                )
        out[split] = list(kept)
        seen_english.update(english for english, _ in kept)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mo-root", type=Path, help="the extracted LC_MESSAGES folder")
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        mo_root = args.mo_root or download_catalogues(Path(tmp))
        found = {mo.stem: catalogue(mo) for mo in sorted(mo_root.glob("*.mo"))}
    missing = [name for name in (*TEST, *DEV) if name not in found]
    if missing:
        raise SystemExit(f"build_ui_corpus: {mo_root} lacks the catalogues {', '.join(missing)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits(found).items():
        write_part(args.out, split, pairs)
        print(f"build_ui_corpus: {split}: {len(pairs):,} pairs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
