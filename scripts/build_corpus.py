#!/usr/bin/env python3
"""Rebuild the bundled English-German corpus from LibreOffice's help pages.

Debian's `libreoffice-help-en-us` and `libreoffice-help-de` hold the same HTML files in both
languages, and every paragraph carries the same `id` (`par_id…`, `hd_id…`) in both: pairs
align exactly on (file, id).  The split is by document (a hash of the file path), so no test
document is seen in training.  Standard library only; deterministic output.

    python scripts/build_corpus.py                      # apt-get download + dpkg-deb -x
    python scripts/build_corpus.py --html-root DIR      # an extracted .../libreoffice/help
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html.parser
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

PACKAGES = ["libreoffice-help-en-us", "libreoffice-help-de"]
OUTPUT = Path(__file__).resolve().parent.parent / "translate" / "corpora" / "libreoffice_help_en_de"
FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "libreoffice_small"
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
             "source", "track", "wbr"}
Key = tuple[str, int]  # (par_id/hd_id, occurrence of that id in the file)
TEST_PER_MILLE, DEV_PER_MILLE = 42, 30  # documents hashed into [0, 1000)


class ParagraphParser(html.parser.HTMLParser):
    """Collects the text of every element whose id starts with par_id or hd_id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        # Some pages embed the same snippet twice, so an id can repeat within a file: the key is
        # (id, occurrence), which matches between languages because the pages share one layout.
        self.stack: list[tuple[str, Key | None]] = []  # (tag, paragraph key or None)
        self.texts: dict[Key, list[str]] = {}
        self.containers: set[Key] = set()  # keys holding other keys: not a paragraph
        self.occurrences: Counter = Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID_TAGS:
            if tag == "br":  # a line break separates words
                self.handle_data(" ")
            return
        pid = dict(attrs).get("id") or ""
        key = None
        if pid.startswith(("par_id", "hd_id")):
            key = (pid, self.occurrences[pid])
            self.occurrences[pid] += 1
            self.containers.update(open_key for _, open_key in self.stack if open_key)
            self.texts[key] = []
        self.stack.append((tag, key))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth][0] == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        for _, key in self.stack:
            if key:
                self.texts[key].append(data)

    def paragraphs(self) -> dict[Key, str]:
        """Whitespace-collapsed text per key, in document order."""
        return {
            key: " ".join("".join(parts).split())
            for key, parts in self.texts.items()
            if key not in self.containers
        }


def paragraphs(path: Path) -> dict[Key, str]:
    """The paragraphs of one HTML file."""
    parser = ParagraphParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.paragraphs()


def download_html(workdir: Path) -> Path:
    """Fetch the two .deb files with apt-get and unpack them without installing anything."""
    try:
        subprocess.run(["apt-get", "download", *PACKAGES], cwd=workdir, check=True)
        for deb in sorted(workdir.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / "root")], check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"build_corpus: could not fetch {', '.join(PACKAGES)} with apt-get/dpkg-deb: {error}\n"
                 "Run 'apt-get update' first, or pass --html-root with an extracted help directory.")
    return workdir / "root" / "usr" / "share" / "libreoffice" / "help"


def aligned_pairs(html_root: Path) -> tuple[list[tuple[str, str, str]], Counter]:
    """(document, English, German) for every id present in both languages, with drop counts."""
    en_root, de_root = html_root / "en-US", html_root / "de"
    if not (en_root / "text").is_dir() or not (de_root / "text").is_dir():
        sys.exit(f"build_corpus: expected {en_root}/text and {de_root}/text")
    dropped: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    pairs = []
    documents = sorted(p.relative_to(en_root).as_posix() for p in (en_root / "text").rglob("*.html"))
    for document in documents:
        if not (de_root / document).is_file():
            dropped["document missing in German"] += 1
            continue
        english, german = paragraphs(en_root / document), paragraphs(de_root / document)
        for key, en in english.items():
            de = german.get(key)
            if de is None:
                dropped["id missing in German"] += 1
            elif not en or not de:
                dropped["empty side"] += 1
            elif en == de:
                dropped["both sides equal"] += 1
            elif len(en.split()) < 2 or len(de.split()) < 2:
                dropped["under 2 words"] += 1
            elif (en, de) in seen:
                dropped["duplicate pair"] += 1
            else:
                seen.add((en, de))
                pairs.append((document, en, de))
    return pairs, dropped


def split_by_document(pairs: list[tuple[str, str, str]]) -> tuple[dict[str, list[tuple[str, str]]], Counter]:
    """Hash each document into test, dev or train, then drop English test/dev repeats (counted)."""
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    for document, en, de in pairs:
        bucket = int(hashlib.sha256(document.encode()).hexdigest(), 16) % 1000
        split = "test" if bucket < TEST_PER_MILLE else "dev" if bucket < TEST_PER_MILLE + DEV_PER_MILLE else "train"
        splits[split].append((en, de))
    # A sentence repeated in another document must not leak from test (or dev) into training.
    test_en = {en for en, _ in splits["test"]}
    dev_en = {en for en, _ in splits["dev"]}
    before = {split: len(split_pairs) for split, split_pairs in splits.items()}
    splits["dev"] = [(en, de) for en, de in splits["dev"] if en not in test_en]
    splits["train"] = [(en, de) for en, de in splits["train"] if en not in test_en and en not in dev_en]
    removed = Counter({f"{split} (English in a held-out split)": before[split] - len(splits[split])
                       for split in ("dev", "train")})
    return splits, removed


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same directory, so readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def text(lines: list[str]) -> bytes:
    """UTF-8, one line each."""
    return "".join(line + "\n" for line in lines).encode("utf-8")


def write_corpus(splits: dict[str, list[tuple[str, str]]], dropped: Counter) -> None:
    """The gzipped splits (mtime 0: byte-identical rebuilds), README.md and LICENSE."""
    for split, pairs in splits.items():
        for index, lang in enumerate(("en", "de")):
            data = gzip.compress(text([pair[index] for pair in pairs]), compresslevel=9, mtime=0)
            write_atomic(OUTPUT / f"{split}.{lang}.gz", data)
    counts = "\n".join(f"| {split} | {len(pairs)} |" for split, pairs in splits.items())
    drops = "\n".join(f"| {reason} | {n} |" for reason, n in sorted(dropped.items()))
    write_atomic(OUTPUT / "README.md", f"""# LibreOffice help, English-German

Paragraph-aligned pairs from the LibreOffice 7.4 help pages in Debian's packages
`libreoffice-help-en-us` and `libreoffice-help-de` (7.4.7). Each HTML element with a
`par_id…`/`hd_id…` id in a file is paired with the element of the same id in the same file
of the other language (an id repeated within a file is matched by its occurrence). Inline
markup is removed, entities are decoded and whitespace is collapsed. Pairs with an empty
side, equal sides, fewer than 2 words on a side, and repeated pairs are dropped.

The split is by document: a SHA-256 hash of the file path puts each whole help page in
test ({TEST_PER_MILLE}/1000), dev ({DEV_PER_MILLE}/1000) or train. A dev or train pair whose
English side also occurs in test (and a train pair whose English side occurs in dev) is
removed, so no English test sentence appears in training.

Rebuild with `python scripts/build_corpus.py`.

| split | pairs |
|---|---|
{counts}

| dropped | pairs |
|---|---|
{drops}
""".encode())
    write_atomic(OUTPUT / "LICENSE", b"""The text in this directory is taken from the LibreOffice help
(Debian packages libreoffice-help-en-us and libreoffice-help-de, version 7.4.7).

Copyright The Document Foundation and contributors.

This Source Code Form is subject to the terms of the Mozilla Public License, v. 2.0.
If a copy of the MPL was not distributed with this file, You can obtain one at
https://mozilla.org/MPL/2.0/.
""")


def write_fixture(splits: dict[str, list[tuple[str, str]]]) -> None:
    """A small slice of short pairs for the tests."""
    sizes = {"train": 400, "dev": 40, "test": 40}
    for split, size in sizes.items():
        pairs = [pair for pair in splits[split] if len(pair[0].split()) <= 20][:size]
        for index, lang in enumerate(("en", "de")):
            write_atomic(FIXTURE / f"{split}.{lang}", text([pair[index] for pair in pairs]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html-root", type=Path, help="an extracted .../share/libreoffice/help directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        html_root = args.html_root or download_html(Path(workdir))
        pairs, dropped = aligned_pairs(html_root)
    splits, removed = split_by_document(pairs)
    dropped.update(removed)
    write_corpus(splits, dropped)
    write_fixture(splits)
    print(f"{len(pairs)} aligned pairs; dropped: {dict(sorted(dropped.items()))}")
    print("split sizes:", {split: len(p) for split, p in splits.items()}, "->", OUTPUT)


if __name__ == "__main__":
    main()
