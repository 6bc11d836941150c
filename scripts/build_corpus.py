#!/usr/bin/env python3
"""Build parallel corpora from LibreOffice's help pages in Debian's `libreoffice-help-*` packages.

Every language's package holds the same HTML files, and every paragraph carries the same `id`
(`par_id…`, `hd_id…`) in every language: paragraphs align exactly on (file, id), across all
languages at once, so the corpus is multi-way parallel.  The split is by document (a hash of
the file path), the same in every language, so no test document is seen in training and a test
page is a test page in every language.  Standard library only; deterministic output.

    python scripts/build_corpus.py                      # the bundled English-German corpus
    python scripts/build_corpus.py --langs de fr ja zh-CN ru ko --out data/libreoffice_help
    python scripts/build_corpus.py --html-root DIR ...  # an extracted .../libreoffice/help

Without --langs it rebuilds the English-German corpus that ships in translate/corpora (and the
tests' fixture).  With --langs it writes a multi-way corpus: `{split}.{lang}.gz` for English and
every language asked for, line i of every file the same paragraph, an empty line where a
language has no usable translation of it (corpus format `multiway` reads any pair of them).
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
import time
from collections import Counter
from pathlib import Path

PACKAGES = ["libreoffice-help-en-us", "libreoffice-help-de"]
OUTPUT = Path(__file__).resolve().parent.parent / "translate" / "corpora" / "libreoffice_help_en_de"
FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "libreoffice_small"
VOID_TAGS = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "param",
    "source",
    "track",
    "wbr",
}
Key = tuple[str, int]  # (par_id/hd_id, occurrence of that id in the file)
TEST_PER_MILLE, DEV_PER_MILLE = 42, 30  # documents hashed into [0, 1000)
LICENSE = b"""The text in this directory is taken from the LibreOffice help
(Debian packages PACKAGES, version 7.4.7).

Copyright The Document Foundation and contributors.

This Source Code Form is subject to the terms of the Mozilla Public License, v. 2.0.
If a copy of the MPL was not distributed with this file, You can obtain one at
https://mozilla.org/MPL/2.0/.
"""


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


def package(lang: str) -> str:
    """Debian's package of a LibreOffice help language (`zh-CN` → libreoffice-help-zh-cn)."""
    return f"libreoffice-help-{'en-us' if lang == 'en' else lang.lower()}"


def download_html(workdir: Path, packages: list[str] = PACKAGES) -> Path:
    """Fetch the .deb files with apt-get and unpack them without installing anything."""
    try:
        subprocess.run(["apt-get", "download", *packages], cwd=workdir, check=True)
        for deb in sorted(workdir.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / "root")], check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(
            f"build_corpus: could not fetch {', '.join(packages)} with apt-get/dpkg-deb: {error}\n"
            "Run 'apt-get update' first (`apt-cache search libreoffice-help-` lists the languages), "
            "or pass --html-root with an extracted help directory."
        )
    return workdir / "root" / "usr" / "share" / "libreoffice" / "help"


def aligned_pairs(html_root: Path) -> tuple[list[tuple[str, str, str]], Counter]:
    """(document, English, German) for every id present in both languages, with drop counts."""
    en_root, de_root = html_root / "en-US", html_root / "de"
    if not (en_root / "text").is_dir() or not (de_root / "text").is_dir():
        sys.exit(f"build_corpus: expected {en_root}/text and {de_root}/text")
    dropped: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    pairs = []
    documents = sorted(
        p.relative_to(en_root).as_posix() for p in (en_root / "text").rglob("*.html")
    )
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


def document_split(document: str) -> str:
    """train, dev or test for a help page, by a hash of its path: the same in every language."""
    bucket = int(hashlib.sha256(document.encode()).hexdigest(), 16) % 1000
    return (
        "test"
        if bucket < TEST_PER_MILLE
        else "dev"
        if bucket < TEST_PER_MILLE + DEV_PER_MILLE
        else "train"
    )


def split_by_document(
    pairs: list[tuple[str, str, str]],
) -> tuple[dict[str, list[tuple[str, str]]], Counter]:
    """Hash each document into test, dev or train, then drop English test/dev repeats (counted)."""
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    for document, en, de in pairs:
        splits[document_split(document)].append((en, de))
    # A sentence repeated in another document must not leak from test (or dev) into training.
    test_en = {en for en, _ in splits["test"]}
    dev_en = {en for en, _ in splits["dev"]}
    before = {split: len(split_pairs) for split, split_pairs in splits.items()}
    splits["dev"] = [(en, de) for en, de in splits["dev"] if en not in test_en]
    splits["train"] = [
        (en, de) for en, de in splits["train"] if en not in test_en and en not in dev_en
    ]
    removed = Counter(
        {
            f"{split} (English in a held-out split)": before[split] - len(splits[split])
            for split in ("dev", "train")
        }
    )
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
    write_atomic(
        OUTPUT / "README.md",
        f"""# LibreOffice help, English-German

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
""".encode(),
    )
    write_atomic(
        OUTPUT / "LICENSE",
        LICENSE.replace(b"PACKAGES", b"libreoffice-help-en-us and libreoffice-help-de"),
    )


def write_fixture(splits: dict[str, list[tuple[str, str]]]) -> None:
    """A small slice of short pairs for the tests."""
    sizes = {"train": 400, "dev": 40, "test": 40}
    for split, size in sizes.items():
        pairs = [pair for pair in splits[split] if len(pair[0].split()) <= 20][:size]
        for index, lang in enumerate(("en", "de")):
            write_atomic(FIXTURE / f"{split}.{lang}", text([pair[index] for pair in pairs]))


# --- the multi-way corpus ------------------------------------------------------------------------
# Scripts written without spaces between words: their length is counted in characters.
UNSPACED = {"ja", "zh", "th", "km", "lo", "my", "bo"}
MIN_WORDS, MIN_CHARACTERS = 2, 4  # shorter is a label, not a sentence (4 characters ~ 2 words)


def too_short(text: str, lang: str) -> bool:
    """Under 2 words, or for a script without spaces under 4 characters (spaces not counted):
    splitting Chinese or Japanese on spaces would call almost every sentence one word."""
    if lang.split("-")[0].lower() in UNSPACED:
        return len("".join(text.split())) < MIN_CHARACTERS
    return len(text.split()) < MIN_WORDS


def help_directory(html_root: Path, lang: str) -> Path:
    directory = html_root / ("en-US" if lang == "en" else lang)
    if not (directory / "text").is_dir():
        have = (
            sorted(p.name for p in html_root.iterdir() if (p / "text").is_dir())
            if html_root.is_dir()
            else []
        )
        sys.exit(
            f"build_corpus: {directory}/text is missing; {html_root} holds the languages {', '.join(have) or 'none'}"
        )
    return directory


Row = tuple[str, dict[str, str]]  # (document, {language: text}), English always present


def multiway_rows(html_root: Path, langs: list[str]) -> tuple[list[Row], dict[str, Counter]]:
    """One row per English paragraph (in document order) with every language's usable
    translation of it, and per language the count of each reason a translation was left out."""
    roots = {lang: help_directory(html_root, lang) for lang in ["en", *langs]}
    dropped = {lang: Counter() for lang in langs}
    rows: list[Row] = []
    documents = sorted(
        p.relative_to(roots["en"]).as_posix() for p in (roots["en"] / "text").rglob("*.html")
    )
    for document in documents:
        english = paragraphs(roots["en"] / document)
        others = {
            lang: paragraphs(roots[lang] / document) if (roots[lang] / document).is_file() else {}
            for lang in langs
        }
        for key, en in english.items():
            if not en or too_short(en, "en"):
                continue
            texts = {"en": en}
            for lang in langs:
                text = others[lang].get(key)
                reason = (
                    "id missing"
                    if text is None
                    else "empty"
                    if not text
                    else "equal to English (untranslated)"
                    if text == en
                    else "too short"
                    if too_short(text, lang)
                    else None
                )
                if reason:
                    dropped[lang][reason] += 1
                else:
                    texts[lang] = text
            rows.append((document, texts))  # English alone too: held-out English is all of it
    return rows, dropped


def split_rows(
    rows: list[Row], langs: list[str], dropped: dict[str, Counter]
) -> dict[str, list[dict[str, str]]]:
    """Rows by document split. A row whose English also stands in test (or, for training, in
    dev) leaves the later splits, so no test sentence is trained on; and a pair (English, X)
    seen before in the split is left out for X, so no pair is repeated. Each language's pairs
    depend only on English and that language, not on which other languages are built."""
    splits: dict[str, list[dict[str, str]]] = {"train": [], "dev": [], "test": []}
    for document, texts in rows:
        splits[document_split(document)].append(texts)
    held_out = {split: {texts["en"] for texts in splits[split]} for split in ("dev", "test")}
    splits["dev"] = [t for t in splits["dev"] if t["en"] not in held_out["test"]]
    splits["train"] = [
        t for t in splits["train"] if t["en"] not in held_out["test"] | held_out["dev"]
    ]
    for split in splits:
        seen: set[tuple[str, str, str]] = set()
        kept = []
        for texts in splits[split]:
            for lang in langs:
                if lang in texts and (lang, texts["en"], texts[lang]) in seen:
                    del texts[lang]
                    dropped[lang][f"duplicate pair ({split})"] += 1
                elif lang in texts:
                    seen.add((lang, texts["en"], texts[lang]))
            if len(texts) > 1:
                kept.append(texts)
        splits[split] = kept
    return splits


def write_multiway(
    out: Path,
    splits: dict[str, list[dict[str, str]]],
    langs: list[str],
    dropped: dict[str, Counter],
) -> None:
    """`{split}.{lang}.gz` for English and every language, line-aligned, blank where missing."""
    for split, rows in splits.items():
        for lang in ["en", *langs]:
            data = gzip.compress(
                text([row.get(lang, "") for row in rows]), compresslevel=9, mtime=0
            )
            write_atomic(out / f"{split}.{lang}.gz", data)
    counts = "\n".join(
        f"| {lang} | "
        + " | ".join(f"{sum(lang in row for row in splits[s]):,}" for s in splits)
        + " | "
        + ", ".join(f"{reason} {n:,}" for reason, n in sorted(dropped[lang].items()))
        + " |"
        for lang in langs
    )
    write_atomic(
        out / "README.md",
        f"""# LibreOffice help, multi-way: en {" ".join(langs)}

Paragraphs of the LibreOffice 7.4 help pages in Debian's `libreoffice-help-*` packages, aligned
across all languages on (file, paragraph id). Line i of every `{{split}}.{{lang}}.gz` is the same
English paragraph; a blank line means that language has no usable translation of it (corpus
format `multiway` reads any pair, skipping those lines). A translation is left out when its id
is missing, it is empty, equal to the English (untranslated), or too short (under {MIN_WORDS}
words, or {MIN_CHARACTERS} characters for {", ".join(sorted(UNSPACED))}), and a training pair is
kept once. Split by document exactly as the bundled English-German corpus: a SHA-256 hash of
the file path ({TEST_PER_MILLE}/1000 test, {DEV_PER_MILLE}/1000 dev), the same pages in every
language; rows whose English is in test are removed from dev and train.

Built by `python scripts/build_corpus.py --langs {" ".join(langs)}`.

| language | train | dev | test | left out |
|---|---|---|---|---|
{counts}
""".encode(),
    )
    write_atomic(
        out / "LICENSE",
        LICENSE.replace(b"PACKAGES", ", ".join(map(package, ["en", *langs])).encode()),
    )


MULTIWAY_FIXTURE_SIZES = {"train": 600, "dev": 40, "test": 40}


def write_multiway_fixture(
    directory: Path, splits: dict[str, list[dict[str, str]]], langs: list[str]
) -> None:
    """The tests' multi-way fixture: the first rows of each split that every language has, with
    at most 20 English words, as plain `{split}.{lang}` files."""
    for split, size in MULTIWAY_FIXTURE_SIZES.items():
        rows = [
            row
            for row in splits[split]
            if all(lang in row for lang in langs) and len(row["en"].split()) <= 20
        ]
        for lang in ["en", *langs]:
            write_atomic(directory / f"{split}.{lang}", text([row[lang] for row in rows[:size]]))


def build_multiway(
    html_root: Path | None, langs: list[str], out: Path
) -> dict[str, list[dict[str, str]]]:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        root = html_root or download_html(Path(workdir), [package(lang) for lang in ["en", *langs]])
        rows, dropped = multiway_rows(root, langs)
    splits = split_rows(rows, langs, dropped)
    write_multiway(out, splits, langs, dropped)
    for lang in langs:
        sizes = {split: sum(lang in row for row in rows) for split, rows in splits.items()}
        print(f"en-{lang}: {sizes}; left out: {dict(sorted(dropped[lang].items()))}")
    print(f"{out}: {len(langs) + 1} languages in {time.perf_counter() - started:.1f} s")
    return splits


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--html-root", type=Path, help="an extracted .../share/libreoffice/help directory"
    )
    parser.add_argument(
        "--langs",
        nargs="+",
        metavar="LANG",
        help="build a multi-way corpus of English and these languages (LibreOffice's codes: de fr ja zh-CN ...)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("data/libreoffice_help"),
        help="with --langs: the directory to write (default: data/libreoffice_help)",
    )
    parser.add_argument(
        "--fixture",
        type=Path,
        help="with --langs: also write the tests' small multi-way fixture here",
    )
    args = parser.parse_args()
    if args.langs:
        langs = list(dict.fromkeys(lang for lang in args.langs if lang != "en"))
        splits = build_multiway(args.html_root, langs, args.out)
        if args.fixture:
            write_multiway_fixture(args.fixture, splits, langs)
        return
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
