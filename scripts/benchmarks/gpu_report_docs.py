"""Fill the docs' GPU sections from a `make gpu-report` run, so that one GPU session updates them
in one step:

    .venv/bin/python scripts/benchmarks/gpu_report_docs.py              # runs/gpu-report/report.json into docs/
    make gpu-docs REPORT=path/to/report.json

Each section lies between `<!-- gpu-report:NAME -->` and `<!-- /gpu-report:NAME -->` in a file
under docs/ (NAME: environment, training, converge, decoding, serving, ddp); everything between
is replaced by the report's section, headed by the date, device and command; the plots are
drawn again from report.json into docs/images/gpu-report/ (a report fetched from another machine
needs no plot files beside it) and report.json itself is kept in docs/gpu-report/, so that the
committed docs keep their source. Text outside the markers is never touched.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gpu_report_render import RENDERERS, TITLES, provenance, render_plots  # noqa: E402

from translate.files import write_atomic  # noqa: E402

MARKER = re.compile(r"<!-- (/?)gpu-report:([a-z]+) -->")
IMAGES = "images/gpu-report"
KEPT_REPORT = "gpu-report/report.json"


def block(report: dict, name: str, images: dict[str, str]) -> str:
    lines = [
        f"_From {provenance(report)}; written by `scripts/benchmarks/gpu_report_docs.py` from the report's "
        "report.json: edit the report, not this text._",
        "",
        RENDERERS[name](report),
    ]
    if name in images:
        lines += ["", f"![{TITLES[name]}]({images[name]})"]
    return "\n".join(lines)


def fill(text: str, path: Path, report: dict, images: dict[str, str]) -> tuple[str, list[str]]:
    """`text` with every marked section replaced; the names filled. A marker without its pair,
    or with an unknown name, is an error naming the file and line."""
    pieces, filled, position, open_marker = [], [], 0, None
    for match in MARKER.finditer(text):
        closing, name = match.group(1) == "/", match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        if name not in RENDERERS:
            raise SystemExit(
                f"error: {path}:{line}: unknown GPU report section {name!r} "
                f"(known: {', '.join(RENDERERS)})"
            )
        if not closing:
            if open_marker:
                raise SystemExit(
                    f"error: {path}:{line}: gpu-report:{name} opens inside gpu-report:{open_marker[0]}"
                )
            open_marker = (name, match.end())
            pieces.append(text[position : match.end()])
            continue
        if not open_marker or open_marker[0] != name:
            raise SystemExit(
                f"error: {path}:{line}: /gpu-report:{name} closes a section that was not opened"
            )
        pieces.append("\n" + block(report, name, images) + "\n")
        pieces.append(match.group(0))
        position, open_marker = match.end(), None
        filled.append(name)
    if open_marker:
        raise SystemExit(
            f"error: {path}: gpu-report:{open_marker[0]} is never closed (<!-- /gpu-report:"
            f"{open_marker[0]} -->)"
        )
    pieces.append(text[position:])
    return "".join(pieces), filled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, default=REPO / "runs" / "gpu-report" / "report.json")
    parser.add_argument(
        "--docs", type=Path, default=REPO / "docs", help="the docs folder to fill (default: docs/)"
    )
    parser.add_argument(
        "--allow-dry-run",
        action="store_true",
        help="fill from a dry run's report too (its toy figures do not belong in the real docs)",
    )
    args = parser.parse_args(argv)
    if not args.report.is_file():
        raise SystemExit(f"error: {args.report}: no report here (make one with: make gpu-report)")
    raw = args.report.read_bytes()  # parsed here, and kept as it is beside the docs
    try:
        report = json.loads(raw)
        report["command"], report["steps"]
    except (ValueError, KeyError) as error:
        raise SystemExit(f"error: {args.report}: not a gpu-report report.json ({error})") from None
    if report.get("dry_run") and not args.allow_dry_run:
        raise SystemExit(
            f"error: {args.report} is a dry run's (toy sizes on the CPU): its figures do not belong in "
            "the docs (--allow-dry-run fills them anyway, e.g. into a copy)"
        )
    images = {}
    with tempfile.TemporaryDirectory() as drawn:
        for name, plot in render_plots(report, Path(drawn)).items():
            (args.docs / IMAGES).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plot, args.docs / IMAGES / plot.name)
            images[name] = f"{IMAGES}/{plot.name}"
    kept = args.docs / KEPT_REPORT
    kept.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(kept, raw)
    every = []
    for path in sorted(args.docs.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        new, filled = fill(text, path, report, images)
        if new != text:
            write_atomic(path, new.encode("utf-8"))
        every += [f"{name} ({path.name})" for name in filled]
    missing = sorted(set(RENDERERS) - {entry.split(" ")[0] for entry in every})
    print(
        f"gpu-report-docs: filled {', '.join(every) or 'nothing'}"
        + (f"; no place in {args.docs} for {', '.join(missing)}" if missing else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
