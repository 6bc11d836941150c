#!/usr/bin/env python3
"""Build the real documents the document tests translate (tests/fixtures/documents_real/).

- three LibreOffice help pages of the bundled corpus's test split (never trained on), as
  Debian's `libreoffice-help-en-us` ships them (`PAGES`), in HTML;
- the same pages converted by LibreOffice itself (headless, from Debian's
  `libreoffice-writer-nogui`) to odt and docx, and the page with a table to ods and xlsx (Calc);
- a gettext catalogue: LibreOffice's Basic messages (`sb`) from Debian's `libreoffice-l10n-de`,
  as a template (`sb.pot`: the English, no translation) and as the German catalogue
  (`sb.de.po`, the reference);
- the first page as Markdown, converted by Debian's `pandoc` (GitHub's Markdown, no raw HTML),
  and the template as XLIFF, converted by Debian's `translate-toolkit` (`po2xliff`, which
  writes XLIFF 1.1).

Needs apt-get (or --help-root and --mo-root with the packages extracted), soffice, pandoc and
po2xliff.

    python scripts/build_document_set.py
    python scripts/build_document_set.py --help-root DIR/usr/share/libreoffice/help --mo-root DIR
"""

from __future__ import annotations

import argparse
import gettext
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import polib
from build_corpus import document_split
from build_protected_set import download_catalogues

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "tests" / "fixtures" / "documents_real"
HELP_PACKAGE = "libreoffice-help-en-us"
PAGES = (
    "text/sbasic/guide/create_dialog.html",
    "text/scalc/01/func_sum.html",
    "text/swriter/guide/footer_nextpage.html",
)
TABLE_PAGE = "text/scalc/01/func_sum.html"
CATALOGUE = "sb"


def download_help(workdir: Path) -> Path:
    try:
        subprocess.run(["apt-get", "download", HELP_PACKAGE], cwd=workdir, check=True)
        [deb] = workdir.glob(f"{HELP_PACKAGE}_*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / "help")], check=True)
    except (OSError, subprocess.CalledProcessError, ValueError) as error:
        raise SystemExit(
            f"build_document_set: could not fetch {HELP_PACKAGE}: {error}; run 'apt-get update' "
            "first, or pass --help-root"
        ) from None
    return workdir / "help" / "usr" / "share" / "libreoffice" / "help"


def convert(sources: list[Path], to: str, infilter: str, out: Path, profile: Path) -> None:
    """LibreOffice's own conversion, headless, with a profile of its own."""
    soffice = shutil.which("soffice")
    if soffice is None:
        raise SystemExit(
            "build_document_set: soffice not found: apt-get install libreoffice-writer-nogui "
            "libreoffice-calc-nogui"
        )
    command = [
        soffice,
        f"-env:UserInstallation={profile.as_uri()}",
        "--headless",
        f"--infilter={infilter}",
        "--convert-to",
        to,
        "--outdir",
        str(out),
        *map(str, sources),
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=300)


def run_tool(command: list[str], package: str) -> None:
    if shutil.which(command[0]) is None:
        raise SystemExit(f"build_document_set: {command[0]} not found: apt-get install {package}")
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=300)


def catalogues(mo: Path) -> tuple[polib.POFile, polib.POFile]:
    """The catalogue as a template (no translations) and as its German translation."""
    with mo.open("rb") as handle:
        messages = gettext.GNUTranslations(handle)._catalog
    template, german = polib.POFile(), polib.POFile()
    for catalogue, language in ((template, ""), (german, "de")):
        catalogue.metadata = {
            "Project-Id-Version": f"LibreOffice {CATALOGUE}",
            "Language": language,
            "MIME-Version": "1.0",
            "Content-Type": "text/plain; charset=UTF-8",
            "Content-Transfer-Encoding": "8bit",
        }
    for key in sorted(messages, key=str):
        if not key:
            continue
        english = key[0] if isinstance(key, tuple) else key
        context, _, msgid = english.rpartition("\x04")
        template.append(polib.POEntry(msgctxt=context or None, msgid=msgid, msgstr=""))
        german.append(polib.POEntry(msgctxt=context or None, msgid=msgid, msgstr=messages[key]))
    return template, german


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--help-root", type=Path, help="an extracted .../libreoffice/help")
    parser.add_argument("--mo-root", type=Path, help="an extracted .../resource/de/LC_MESSAGES")
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        help_root = args.help_root or download_help(work)
        pages = []
        for page in PAGES:
            assert document_split(page) == "test", page
            copy = args.out / Path(page).name
            shutil.copyfile(help_root / "en-US" / page, copy)
            pages.append(copy)
        profile = work / "profile"
        for to in ("odt", "docx:MS Word 2007 XML"):
            convert(pages, to, "HTML (StarWriter)", args.out, profile)
        table = args.out / Path(TABLE_PAGE).name
        for to in ("ods", "xlsx"):
            convert([table], to, "calc_HTML_WebQuery", args.out, profile)
        mo_root = args.mo_root or download_catalogues(work)
        template, german = catalogues(mo_root / f"{CATALOGUE}.mo")
        template.save(str(args.out / f"{CATALOGUE}.pot"))
        german.save(str(args.out / f"{CATALOGUE}.de.po"))
        first = args.out / Path(PAGES[0]).name
        markdown = first.with_suffix(".md")
        run_tool(
            ["pandoc", "-f", "html", "-t", "gfm-raw_html", str(first), "-o", str(markdown)],
            "pandoc",
        )
        as_po = work / f"{CATALOGUE}.po"  # po2xliff reads .po files, a template as one
        shutil.copyfile(args.out / f"{CATALOGUE}.pot", as_po)
        xlf = args.out / f"{CATALOGUE}.xlf"
        run_tool(["po2xliff", "--progress=none", str(as_po), str(xlf)], "translate-toolkit")
    for path in sorted(args.out.iterdir()):
        print(f"build_document_set: {path.name}: {path.stat().st_size:,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
