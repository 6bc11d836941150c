#!/usr/bin/env python3
"""Build the English-German test set of protected tokens (`translate-eval --metrics copy`).

Three parts, each `{part}.en.gz` and `{part}.de.gz` (line i of one the translation of line i of
the other), written to translate/corpora/protected_en_de/:

- `numbers`: numbered templates, "Click button N." / "Klicken Sie auf die Schaltfläche N." and
  "Select cell N." / "Wählen Sie die Zelle N.", N = 0 .. 199: 400 lines where the only thing to
  get right besides the template is the number;
- `strings`: LibreOffice's user-interface strings with their German translations, from the
  catalogues (.mo) of Debian's `libreoffice-l10n-de`, those with a protected span (a
  placeholder, number, key, ...) that the German keeps: `%PRODUCTNAME`, `$(ARG1)`, `#lib#`, ...;
- `tokens`: sentences carrying URLs, email addresses, mentions, hashtags, file paths and key
  combinations, made from templates and values written here, the German reference alike.

Kept apart from training: a line whose English is in the bundled corpus's training or dev
split is left out. Standard library only; deterministic output.

    python scripts/build_protected_set.py                  # apt-get download, then build
    python scripts/build_protected_set.py --mo-root DIR    # an extracted .../resource/de/LC_MESSAGES
"""

from __future__ import annotations

import argparse
import gettext
import gzip
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from translate.files import write_atomic  # noqa: E402
from translate.text.protected import find_spans  # noqa: E402

OUTPUT = REPO / "translate" / "corpora" / "protected_en_de"
TRAINING = REPO / "translate" / "corpora" / "libreoffice_help_en_de"
PACKAGE = "libreoffice-l10n-de"
STRINGS_AT_MOST = 1000  # UI strings kept, chosen by a hash of their English
MAX_CHARS = 300  # longer strings are whole dialogs' texts, not sentences

NUMBER_TEMPLATES = [
    ("Click button {n}.", "Klicken Sie auf die Schaltfläche {n}."),
    ("Select cell {n}.", "Wählen Sie die Zelle {n}."),
]

TOKEN_TEMPLATES = {
    "url": [
        ("Visit {x} for more information.", "Weitere Informationen finden Sie unter {x}."),
        (
            "Download the installer from {x}.",
            "Laden Sie das Installationsprogramm von {x} herunter.",
        ),
    ],
    "email": [
        ("Send your questions to {x}.", "Senden Sie Ihre Fragen an {x}."),
        ("Write to {x} if the problem persists.", "Schreiben Sie an {x}, wenn das Problem bleibt."),
    ],
    "mention": [
        ("Thanks to {x} for the report!", "Danke an {x} für den Bericht!"),
        ("Ask {x} about the new release.", "Fragen Sie {x} nach der neuen Version."),
    ],
    "hashtag": [
        ("Share your templates with {x}.", "Teilen Sie Ihre Vorlagen mit {x}."),
        ("The new release is out {x}", "Die neue Version ist da {x}"),
    ],
    "path": [
        ("Open the file {x}.", "Öffnen Sie die Datei {x}."),
        ("The settings are stored in {x}.", "Die Einstellungen werden in {x} gespeichert."),
    ],
    "key": [
        ("Press {x} to save the document.", "Drücken Sie {x}, um das Dokument zu speichern."),
        ("Use {x} to open the dialog.", "Verwenden Sie {x}, um den Dialog zu öffnen."),
    ],
}
TOKEN_VALUES = {
    "url": [
        "https://www.libreoffice.org",
        "https://help.libreoffice.org/latest/en-US/text/shared/main0108.html",
        "https://wiki.documentfoundation.org/Main_Page",
        "https://ask.libreoffice.org/c/english/5",
        "http://example.com/download?version=7.4",
        "www.documentfoundation.org",
        "https://bugs.documentfoundation.org/show_bug.cgi?id=150000",
        "ftp://ftp.example.org/pub/libreoffice/",
        "https://extensions.libreoffice.org/en/extensions/show/27416",
        "https://git.libreoffice.org/core/+/refs/heads/master/README.md",
    ],
    "email": [
        "info@documentfoundation.org",
        "users@global.libreoffice.org",
        "support@example.com",
        "jane.doe@example.org",
        "help-desk+calc@example.net",
        "admin@mail.example.co.uk",
        "dev_team@example.io",
        "webmaster@libreoffice.org",
        "a.b.c@example.de",
        "press@documentfoundation.org",
    ],
    "mention": [
        "@libreoffice",
        "@alice",
        "@bob_smith",
        "@documentfoundation@fosstodon.org",
        "@jane@mastodon.social",
        "@calc_team",
        "@Gargron@mastodon.social",
        "@writer2023",
        "@tdf@floss.social",
        "@LibreOfficeDE",
    ],
    "hashtag": [
        "#LibreOffice",
        "#OpenSource",
        "#FOSS",
        "#Calc",
        "#ODF",
        "#TDF",
        "#FreeSoftware",
        "#Writer",
        "#LibreOffice74",
        "#Impress",
    ],
    "path": [
        "/usr/share/doc/libreoffice",
        "~/.config/libreoffice/4/user/registrymodifications.xcu",
        "/etc/libreoffice/sofficerc",
        "./templates/letter.ott",
        "../reports/2023/budget.ods",
        "C:\\Program\\LibreOffice\\program\\soffice.exe",
        "/opt/libreoffice7.4/program/soffice",
        "~/Documents/report.odt",
        "/tmp/lu12345.tmp",
        "/home/user/Templates/invoice.ott",
    ],
    "key": [
        "Ctrl+S",
        "Ctrl+Shift+F5",
        "Alt+F4",
        "Ctrl+Alt+Delete",
        "Shift+F10",
        "Cmd+Option+Esc",
        "Ctrl+Enter",
        "F11",
        "Ctrl+Shift+V",
        "Alt+Tab",
    ],
}


def numbers() -> list[tuple[str, str]]:
    return [
        (english.format(n=n), german.format(n=n))
        for english, german in NUMBER_TEMPLATES
        for n in range(200)
    ]


def tokens() -> list[tuple[str, str]]:
    return [
        (english.format(x=value), german.format(x=value))
        for kind, templates in TOKEN_TEMPLATES.items()
        for english, german in templates
        for value in TOKEN_VALUES[kind]
    ]


def catalogue_pairs(mo_root: Path) -> list[tuple[str, str]]:
    """(English, German) of every translated message of the .mo files under `mo_root`."""
    pairs = []
    for path in sorted(mo_root.glob("*.mo")):
        with path.open("rb") as handle:
            catalogue = gettext.GNUTranslations(handle)._catalog
        for key, german in catalogue.items():
            english = (key[0] if isinstance(key, tuple) else key).split("\x04")[-1]
            if english and german:
                pairs.append((english, german))
    return pairs


def keeps_a_span(english: str, german: str) -> bool:
    """Whether a protected span of the English is in the German as the same text and class."""
    kept = {(span.kind, span.text) for span in find_spans(german)}
    return any((span.kind, span.text) in kept for span in find_spans(english))


def strings(pairs: list[tuple[str, str]], seen: set[str]) -> list[tuple[str, str]]:
    """The one-line UI strings keeping a protected span, not in `seen`, at most
    `STRINGS_AT_MOST` of them chosen by a hash of the English, in that order."""
    chosen = {}
    for english, german in pairs:
        english, german = english.strip(), german.strip()
        if (
            "\n" in english + german
            or len(english) > MAX_CHARS
            or english in seen
            or english in chosen
            or not keeps_a_span(english, german)
        ):
            continue
        chosen[english] = german
    ranked = sorted(chosen, key=lambda text: hashlib.sha256(text.encode()).hexdigest())
    return [(english, chosen[english]) for english in ranked[:STRINGS_AT_MOST]]


def training_lines() -> set[str]:
    seen = set()
    for split in ("train", "dev"):
        with gzip.open(TRAINING / f"{split}.en.gz", "rt", encoding="utf-8") as handle:
            seen.update(line.rstrip("\n").strip() for line in handle)
    return seen


def download_catalogues(workdir: Path) -> Path:
    """Fetch the package with apt-get and unpack it without installing anything."""
    try:
        subprocess.run(["apt-get", "download", PACKAGE], cwd=workdir, check=True)
        [deb] = workdir.glob("*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / "root")], check=True)
    except (OSError, subprocess.CalledProcessError, ValueError) as error:
        raise SystemExit(
            f"build_protected_set: could not fetch {PACKAGE} with apt-get/dpkg-deb: {error}; run "
            "'apt-get update' first, or pass --mo-root with the catalogues extracted elsewhere"
        ) from None
    return (
        workdir
        / "root"
        / "usr"
        / "lib"
        / "libreoffice"
        / "program"
        / "resource"
        / "de"
        / ("LC_MESSAGES")
    )


def write_part(out: Path, name: str, pairs: list[tuple[str, str]]) -> None:
    """`{name}.en.gz` and `{name}.de.gz`, atomically, the same bytes for the same lines."""
    for index, lang in enumerate(("en", "de")):
        data = "".join(pair[index] + "\n" for pair in pairs).encode("utf-8")
        write_atomic(out / f"{name}.{lang}.gz", gzip.compress(data, mtime=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mo-root", type=Path, help="the extracted LC_MESSAGES folder")
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        mo_root = args.mo_root or download_catalogues(Path(tmp))
        if not sorted(mo_root.glob("*.mo")):
            raise SystemExit(f"build_protected_set: {mo_root} holds no .mo catalogue")
        ui = strings(catalogue_pairs(mo_root), training_lines())
    args.out.mkdir(parents=True, exist_ok=True)
    parts = {"numbers": numbers(), "strings": ui, "tokens": tokens()}
    for name, pairs in parts.items():
        write_part(args.out, name, pairs)
        print(f"build_protected_set: {name}: {len(pairs)} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
