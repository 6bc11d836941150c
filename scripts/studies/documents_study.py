#!/usr/bin/env python3
"""Real documents translated by translate-cli and by LibreTranslate 1.9.6's /translate_file (its
argos-translate-files) with the same model: what each keeps, translates and loses.

For every file of tests/fixtures/documents_real (scripts/build_document_set.py) and each system:
- structure in and out: an office file's paragraphs, runs and inline objects
  (`documents.office.counts`); an HTML page's elements and attributes (html5lib); a
  catalogue's messages and those translated and marked fuzzy (polib);
- protected tokens (numbers, placeholders, URLs, paths, ...) of the texts, in and kept;
- texts with words that come back unchanged, and the share of the output's texts a language
  identifier finds German;
- whether LibreOffice opens the output (headless, converted to PDF) or, for a catalogue,
  `msgfmt --check` accepts it.

    .venv/bin/python scripts/studies/documents_study.py --checkpoint CKPT [--no-libretranslate]

LibreTranslate runs offline from its own virtual environment (tests/libretranslate_env.py),
serving the checkpoint's Argos export.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import html5lib  # noqa: E402
import polib  # noqa: E402
from libretranslate_env import (  # noqa: E402
    DEFAULT_VENV,
    install_checkpoint,
    libretranslate_venv,
    start_libretranslate,
)
from lxml import etree  # noqa: E402

from translate.documents import office  # noqa: E402
from translate.documents.formats import format_of  # noqa: E402
from translate.documents.translating import without_tags  # noqa: E402
from translate.process_group import end_group  # noqa: E402
from translate.text.language_id import detect  # noqa: E402
from translate.text.protected import find_spans  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
REAL = FIXTURES / "documents_real"
# the formats documents_real has no file of: LibreOffice's own pptx and odp (from a flat file
# written for the tests), and subtitles, Markdown and XLIFF 1.2 and 2.0 written for the tests
MORE = (
    FIXTURES / "documents_office" / "slides.pptx",
    FIXTURES / "documents_office" / "slides.odp",
    FIXTURES / "documents_text" / "episode.srt",
    FIXTURES / "documents_text" / "lecture.vtt",
    FIXTURES / "documents_text" / "readme.md",
    FIXTURES / "documents_catalogues" / "sample-1.2.xlf",
    FIXTURES / "documents_catalogues" / "sample-2.0.xlf",
)
WORDS = re.compile(r"[^\W\d_]{2,}.*\s.*[^\W\d_]{2,}")  # two words or more


@dataclass
class Row:
    file: str
    system: str
    structure: str = ""
    tokens: str = ""
    unchanged: str = ""
    german: str = ""
    opens: str = ""
    note: str = ""


def xliff_texts(data: bytes, element: str) -> list[str]:
    """The text of each `source` or `target` of an XLIFF file, its inline codes left out."""
    tree = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    return [
        "".join(node.itertext())
        for node in tree.iter(etree.Element)
        if etree.QName(node).localname == element
    ]


def texts_of(path: Path, translated: bool = False) -> list[str]:
    """The texts of a file as its reader gives them, without tags; a catalogue's translations
    (a template's messages), an XLIFF file's targets (its sources)."""
    data = path.read_bytes()
    if path.suffix in (".po", ".pot"):
        entries = [e for e in polib.pofile(data.decode("utf-8")) if not e.obsolete]
        return [e.msgstr if path.suffix == ".po" else e.msgid for e in entries]
    if path.suffix == ".xlf":
        return xliff_texts(data, "target" if translated else "source")
    return [without_tags(text) for text in format_of(path.name).read(data, path.name).texts()]


def structure(path: Path) -> str:
    suffix = path.suffix.lower()
    data = path.read_bytes()
    if suffix in (".docx", ".odt", ".ods", ".xlsx", ".pptx", ".odp"):
        found = office.counts(data, path.name)
        return f"{found.paragraphs} paragraphs, {found.runs} runs, {found.marks} objects"
    if suffix in (".html", ".htm"):
        tree = html5lib.parse(data, namespaceHTMLElements=False)
        elements = list(tree.iter())
        attributes = sum(len(element.attrib) for element in elements)
        return f"{len(elements)} elements, {attributes} attributes"
    if suffix in (".srt", ".vtt"):
        cues = data.decode("utf-8").count("-->")
        tags = sum(text.count("<") for text in format_of(path.name).read(data, path.name).texts())
        return f"{cues} cues, {tags} tags in their texts"
    if suffix == ".md":
        lines = data.decode("utf-8").splitlines()
        headings = sum(line.startswith("#") for line in lines)
        fences = sum(line.lstrip().startswith("```") for line in lines)
        return f"{len(lines)} lines, {headings} headings, {fences} fence lines"
    if suffix == ".xlf":
        tree = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
        names = Counter(etree.QName(node).localname for node in tree.iter(etree.Element))
        review = data.count(b"needs-review")
        return (
            f"{len(list(tree.iter(etree.Element)))} elements, {names['source']} sources, "
            f"{names['target']} targets, {review} needing review"
        )
    catalogue = polib.pofile(data.decode("utf-8"))
    real = [entry for entry in catalogue if not entry.obsolete]
    done = sum(bool(entry.msgstr) for entry in real)
    fuzzy = sum("fuzzy" in entry.flags for entry in real)
    return f"{len(real)} messages, {done} translated, {fuzzy} fuzzy"


def tokens_kept(source: list[str], output: list[str]) -> str:
    before = Counter(span.text for text in source for span in find_spans(text))
    after = Counter(span.text for text in output for span in find_spans(text))
    kept = sum((before & after).values())
    return f"{kept}/{sum(before.values())}"


def opens(path: Path, work: Path) -> str:
    if path.suffix in (".srt", ".vtt", ".md", ".xlf"):
        try:
            format_of(path.name).read(path.read_bytes(), path.name)
        except Exception as error:  # noqa: BLE001 (reported)
            return f"no: {error}"
        return "reads again"
    if path.suffix in (".po", ".pot"):
        done = subprocess.run(
            ["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True
        )
        return "msgfmt ok" if done.returncode == 0 else "msgfmt: " + done.stderr.decode()[:80]
    out = work / f"pdf-{uuid.uuid4().hex}"
    profile = (work / "profile").as_uri()
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation={profile}",
            "--headless",
            "--convert-to",
            "pdf",
            "--outdir",
            str(out),
            str(path),
        ],  # fmt: skip
        capture_output=True,
        timeout=300,
    )
    pdfs = list(out.glob("*.pdf"))
    return "yes" if pdfs and pdfs[0].stat().st_size > 0 else "no"


def measure(source: Path, output: Path | None, system: str, work: Path, note: str = "") -> Row:
    row = Row(source.name, system, note=note)
    if output is None:
        return row
    src, out = texts_of(source), texts_of(output, output is not source)
    row.structure = structure(output)
    row.tokens = tokens_kept(src, out)
    worded = [text for text in out if WORDS.search(text)]
    same = set(text.strip() for text in src if WORDS.search(text))
    row.unchanged = f"{sum(text.strip() in same for text in worded)}/{len(worded)}"
    found = detect([text for text in worded], ["en", "de"])
    row.german = f"{100 * sum(lang == 'de' for lang in found) / max(len(found), 1):.0f}%"
    row.opens = opens(output, work)
    return row


def ours(checkpoint: str, source: Path, work: Path) -> tuple[Path, str]:
    suffix = ".po" if source.suffix == ".pot" else source.suffix
    output = work / f"ours-{source.stem}{suffix}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.translate",
            "--checkpoint",
            checkpoint,
            "--source",
            str(source),
            "--output",
            str(output),
            "--target-lang",
            "de",
            "--quiet",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if done.returncode:
        raise SystemExit(f"translate-cli failed on {source}: {done.stderr.strip()}")
    return output, done.stderr.strip().splitlines()[-1].split(": ", 2)[-1]


def theirs(base: str, source: Path, work: Path) -> tuple[Path | None, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in (("source", "en"), ("target", "de")):
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{source.name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + source.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        base + "/translate_file",
        data=b"".join(parts),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with direct.open(request, timeout=600) as response:
            url = json.loads(response.read())["translatedFileUrl"]
    except urllib.error.HTTPError as error:
        return None, f"{error.code}: {json.loads(error.read()).get('error', '')[:80]}"
    output = work / f"theirs-{source.name}"
    with direct.open(url.replace("http://localhost", base.rsplit(":", 1)[0]), timeout=60) as got:
        output.write_bytes(got.read())
    return output, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--files", type=Path, default=REAL)
    parser.add_argument("--no-libretranslate", action="store_true")
    parser.add_argument("--no-more", action="store_true", help="the real files only")
    parser.add_argument("--keep", type=Path, help="keep the outputs here")
    args = parser.parse_args(argv)
    sources = sorted(
        p
        for p in args.files.iterdir()
        if p.suffix in (".html", ".docx", ".odt", ".ods", ".xlsx", ".pot", ".md", ".xlf")
        and p.name != "README.md"
    ) + ([] if args.no_more else list(MORE))
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for source in sources:
            rows.append(measure(source, source, "input", work))
            output, note = ours(args.checkpoint, source, work)
            rows.append(measure(source, output, "translate-cli", work, note))
        if not args.no_libretranslate:
            venv = libretranslate_venv(DEFAULT_VENV)
            env = install_checkpoint(args.checkpoint, venv, work)
            server, base = start_libretranslate(venv, env, work)
            try:
                for source in sources:
                    output, note = theirs(base, source, work)
                    rows.append(measure(source, output, "LibreTranslate 1.9.6", work, note))
            finally:
                end_group(server)
    rows.sort(key=lambda row: (row.file, row.system != "input", row.system))
    print(
        "| file | system | structure | protected tokens kept | unchanged texts | German | opens | note |"
    )
    print("|---|---|---|---:|---:|---:|---|---|")
    for row in rows:
        print(
            f"| {row.file} | {row.system} | {row.structure} | {row.tokens} | {row.unchanged} | "
            f"{row.german} | {row.opens} | {row.note} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
