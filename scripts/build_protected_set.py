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

- `forms`: sentences carrying dimensions, identifiers, versions, ranges, ordinals, times, dates,
  units, phone numbers, addresses, hex numbers, prices, and what a user may type that looks
  like the masking's own (`⦅1⦆`, Weblate's `[X7X]`), from templates and values written here;
- `many`: printf tables of 20 to 200 placeholders a line, more than a line's sentinels.

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

from translate.files import write_atomic
from translate.text.protected import find_spans

REPO = Path(__file__).resolve().parent.parent

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


# Forms of numbers and what a user types near them, each written the same in both languages
# ({x}), except the ordinals, which German writes as the number and a full stop ({n}).
FORM_TEMPLATES = {
    "dimension": [
        ("Use an icon of {x} pixels.", "Verwenden Sie ein Symbol mit {x} Pixeln."),
        ("The screen resolution is {x}.", "Die Bildschirmauflösung beträgt {x}."),
    ],
    "identifier": [
        ("The certificate uses {x}.", "Das Zertifikat verwendet {x}."),
        ("Choose {x} in the list.", "Wählen Sie {x} in der Liste."),
    ],
    "version": [
        ("Update to version {x}.", "Aktualisieren Sie auf Version {x}."),
        ("This was fixed in {x}.", "Dies wurde in {x} behoben."),
    ],
    "range": [
        ("Enter a value ({x}).", "Geben Sie einen Wert ein ({x})."),
        ("Pages {x} are printed.", "Die Seiten {x} werden gedruckt."),
    ],
    "ordinal": [
        ("Select the {x} column.", "Wählen Sie die {n}. Spalte."),
        ("Delete the {x} row.", "Löschen Sie die {n}. Zeile."),
    ],
    "time": [
        ("The meeting starts at {x}.", "Die Besprechung beginnt um {x}."),
        ("The backup runs at {x} every day.", "Die Sicherung läuft jeden Tag um {x}."),
    ],
    "date": [
        ("The file was saved on {x}.", "Die Datei wurde am {x} gespeichert."),
        ("The offer ends on {x}.", "Das Angebot endet am {x}."),
    ],
    "unit": [
        ("Set the size to {x}.", "Stellen Sie die Größe auf {x} ein."),
        ("The margin is {x} wide.", "Der Rand ist {x} breit."),
    ],
    "phone": [
        ("Call {x} for help.", "Rufen Sie {x} an, um Hilfe zu erhalten."),
        ("Our number is {x}.", "Unsere Nummer lautet {x}."),
    ],
    "address": [
        ("Connect to {x}.", "Verbinden Sie sich mit {x}."),
        ("The server runs on {x}.", "Der Server läuft auf {x}."),
    ],
    "hex": [
        ("The error code is {x}.", "Der Fehlercode lautet {x}."),
        ("Write {x} into the register.", "Schreiben Sie {x} in das Register."),
    ],
    "price": [
        ("The licence costs {x}.", "Die Lizenz kostet {x}."),
        ("Pay {x} per month.", "Zahlen Sie {x} pro Monat."),
    ],
    "typed": [
        ("Press {x} to continue.", "Drücken Sie {x}, um fortzufahren."),
        ("Hello, {x}!", "Hallo, {x}!"),
    ],
}
FORM_VALUES = {
    "dimension": ["16x16", "1920×1080", "32x32", "800x600", "1024x768", "3x4", "64×64"],
    "identifier": ["X.509", "UTF-8", "ISO-8859-1", "IPv6", "H.264", "x86_64", "SHA-256"],
    "version": ["3.0.1", "v2", "7.4.7", "v1.2", "10.15.7", "6.4.7.2", "2.0-rc1"],
    "range": ["1-31", "10–20", "0-9", "1-12", "100-200", "2–5", "1900-2100"],
    "ordinal": ["1st", "2nd", "3rd", "4th", "21st", "12th", "103rd"],
    "time": ["10:30", "09:00", "23:59", "12:00:01", "7:45", "10:30am", "18:15"],
    "date": [
        "2026-11-28",
        "28.11.2026",
        "11/28/2026",
        "2024-01-01",
        "31.12.1999",
        "1/2/2003",
        "2025-06-30",
    ],
    "unit": ["12pt", "5mm", "100%", "2.5cm", "300dpi", "16px", "1.5em"],
    "phone": [
        "+49 30 1234567",
        "555-123-4567",
        "+1-800-555-0199",
        "(030) 12345-678",
        "0800 123 456",
        "+44 20 7946 0958",
        "030/123456",
    ],
    "address": [
        "192.168.0.1",
        "10.0.0.254",
        "127.0.0.1:8080",
        "172.16.5.4",
        "8.8.8.8",
        "localhost:5000",
        "[::1]:8000",
    ],
    "hex": ["0x1F", "0xFF00", "0x7FFFFFFF", "0x0", "0xDEADBEEF", "0x10", "0xA5"],
    "price": ["$5.99", "€10", "$1,299.00", "£3.50", "$100", "€2.49", "¥500"],
    "typed": ["⦅1⦆", "⦅21⦆", "⦅999⦆", "[X7X]", "[X12X]", "⦅a⦆", "⦅"],
}
MANY_COUNTS = range(20, 201, 10)  # lines of 20 to 200 placeholders


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


def forms() -> list[tuple[str, str]]:
    return [
        (english.format(x=value), german.format(x=value, n=value.rstrip("stndrh")))
        for kind, templates in FORM_TEMPLATES.items()
        for english, german in templates
        for value in FORM_VALUES[kind]
    ]


def many() -> list[tuple[str, str]]:
    """A printf table of 20 to 200 placeholders a line: more spans than sentinels."""
    return [
        (
            "Columns: " + ", ".join(f"%{n}" for n in range(1, count + 1)) + ".",
            "Spalten: " + ", ".join(f"%{n}" for n in range(1, count + 1)) + ".",
        )
        for count in MANY_COUNTS
    ]


def mo_pairs(path: Path) -> list[tuple[str, str]]:
    """(English, German) of every translated message of one .mo file, its context taken off."""
    with path.open("rb") as handle:
        catalogue = gettext.GNUTranslations(handle)._catalog
    pairs = []
    for key, german in catalogue.items():
        english = (key[0] if isinstance(key, tuple) else key).split("\x04")[-1]
        if english and german:
            pairs.append((english, german))
    return pairs


def catalogue_pairs(mo_root: Path) -> list[tuple[str, str]]:
    """(English, German) of every translated message of the .mo files under `mo_root`."""
    return [pair for path in sorted(mo_root.glob("*.mo")) for pair in mo_pairs(path)]


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
    parts = {
        "numbers": numbers(),
        "strings": ui,
        "tokens": tokens(),
        "forms": forms(),
        "many": many(),
    }
    for name, pairs in parts.items():
        write_part(args.out, name, pairs)
        print(f"build_protected_set: {name}: {len(pairs)} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
