#!/usr/bin/env python3
"""Sequence-level distillation (Kim & Rush 2016): a corpus whose training targets are a teacher
checkpoint's own translations of the training sources, for training a smaller, faster student.

    python scripts/distill_corpus.py --teacher runs/default/checkpoints/last.ckpt --out data/distilled
    translate-train fit --config configs/student.yaml --data.corpus_dir data/distilled

The training sources are translated by translate-cli with the teacher's own search settings
(beam and tuned length penalty; any other translate-cli flag after `--`), chunk by chunk into
OUT/train.TGT.partial, so a stopped run continues with the same command (--resume is passed
whenever a partial output is there). The dev and test splits are copied as they are: a student
is validated and scored on human references. The throughput is printed at the end, and OUT/README.md
records the teacher, the command and the figures.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from translate.files import file_digest, write_atomic  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, plain_or_gzipped, read_lines  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--teacher", required=True, help="the teacher checkpoint")
    parser.add_argument("--corpus", type=Path, default=BUNDLED_CORPUS, help="text-format corpus")
    parser.add_argument("--src-lang", default="en")
    parser.add_argument("--tgt-lang", default="de")
    parser.add_argument("--out", type=Path, required=True, help="the distilled corpus's directory")
    parser.add_argument("cli_flags", nargs="*", help="after --: more translate-cli flags")
    args = parser.parse_args(argv)
    source = plain_or_gzipped(args.corpus / f"train.{args.src_lang}")
    if not source.is_file():
        parser.error(
            f"--corpus {args.corpus}: no train.{args.src_lang} or train.{args.src_lang}.gz"
        )
    if args.out.resolve() == args.corpus.resolve():
        parser.error("--out must be another directory than --corpus")
    args.out.mkdir(parents=True, exist_ok=True)
    for split in ("dev", "test"):
        for lang in (args.src_lang, args.tgt_lang):
            path = plain_or_gzipped(args.corpus / f"{split}.{lang}")
            if path.is_file():
                shutil.copyfile(path, args.out / path.name)
    shutil.copyfile(source, args.out / source.name)
    output = args.out / f"train.{args.tgt_lang}"
    lines = len(read_lines(source))
    command = [
        str(Path(sys.executable).parent / "translate-cli"),
        "--checkpoint", str(args.teacher), "--source", str(source), "--output", str(output),
        *args.cli_flags,
    ]  # fmt: skip
    if Path(f"{output}.partial").is_file():
        command.append("--resume")
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - started
    rate = (
        f"{lines:,} training sources in {seconds / 60:.1f} min: {lines / seconds:.1f} sentences/s"
    )
    print(f"distilled {rate} (this run; a resumed run counts only its own time)", flush=True)
    # Compressed as the bundled corpora are (no time stamp: the same bytes on every run).
    write_atomic(Path(f"{output}.gz"), gzip.compress(output.read_bytes(), mtime=0))
    output.unlink()
    readme = (
        f"# Distilled from {args.corpus.name}\n\n"
        f"train.{args.tgt_lang}.gz: the teacher's translations of train.{args.src_lang}; dev and "
        f"test as in {args.corpus}.\n\n"
        f"- teacher: `{args.teacher}` (sha256 {file_digest(args.teacher)[:16]})\n"
        f"- command: `python scripts/distill_corpus.py --teacher {args.teacher} --corpus "
        f"{args.corpus} --out {args.out}{' -- ' + ' '.join(args.cli_flags) if args.cli_flags else ''}`\n"
        f"- {rate}\n"
    )
    write_atomic(args.out / "README.md", readme.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
