"""What the training studies share: a translate-train run that is skipped where its checkpoint
is already there (so a stopped study continues), a checkpoint's translations of a corpus's
test split, kept in a file and reused, and the report written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from translate.text.corpus import read_lines  # noqa: E402

BIN = Path(sys.executable).parent


def train(run_dir: Path, argv: list[str]) -> Path:
    """`translate-train fit --run_dir RUN_DIR ARGV` unless RUN_DIR has its last checkpoint;
    the checkpoint."""
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    if checkpoint.is_file():
        return checkpoint
    command = [str(BIN / "translate-train"), "fit", "--run_dir", str(run_dir), *argv]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return checkpoint


def translated(checkpoint: Path, corpus: Path, output: Path) -> list[str]:
    """The checkpoint's translations of CORPUS/test.en.gz (its own search settings), written to
    `output` once and read from it after."""
    if not output.is_file():
        command = [
            str(BIN / "translate-eval"), "--checkpoint", str(checkpoint),
            "--source", str(corpus / "test.en.gz"), "--reference", str(corpus / "test.de.gz"),
            "--output", str(output),
        ]  # fmt: skip
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)
    return read_lines(output)


def write_report(out: Path, lines: list[str]) -> None:
    """OUT/report.md, and the same on standard output."""
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text, encoding="utf-8")
    print(text)
