"""`bench.py startup`: how long the translating commands take to start: `--help`, and one sentence
end to end. Each run is a fresh process, as a user starts it, timed from launch to exit, the
cases interleaved; the table gives the median and the fastest of `--runs`. The floors beside
them: an empty interpreter, `import torch` (which translating one sentence cannot avoid) and
`import lightning` (which the inference commands do not load)."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import environment, interleaved, publish, table

SENTENCE = "Click the OK button to close the dialog.\n"
COMMANDS = {
    "translate-cli": "translate.cli.translate",
    "translate-eval": "translate.cli.evaluate",
    "translate-export": "translate.cli.export",
    "translate-inspect": "translate.cli.inspect",
}


def command(name: str) -> list[str]:
    """The console script beside this interpreter (what a user runs), else `python -m`."""
    script = shutil.which(name, path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", COMMANDS[name]]


def process(argv: list[str], stdin: str = ""):
    def start() -> None:
        done = subprocess.run(argv, input=stdin.encode(), capture_output=True)
        if done.returncode != 0:
            raise SystemExit(
                f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}"
            )

    return start


def run(args) -> int:
    if not Path(args.checkpoint).is_file():
        raise SystemExit(
            f"{args.checkpoint}: no such checkpoint (run `make train` first, or pass --checkpoint)"
        )
    cases = {
        "python -c pass (interpreter)": process([sys.executable, "-c", "pass"]),
        "python -c 'import torch'": process([sys.executable, "-c", "import torch"]),
        "python -c 'import lightning'": process([sys.executable, "-c", "import lightning"]),
        **{f"{name} --help": process([*command(name), "--help"]) for name in COMMANDS},
        "translate-cli, one sentence (stdin to stdout)": process(
            [*command("translate-cli"), "--checkpoint", args.checkpoint, "--quiet"], SENTENCE
        ),
    }
    timed = interleaved(cases, args.runs)
    cells = [
        (name, f"{statistics.median(seconds):.2f}", f"{min(seconds):.2f}")
        for name, seconds in timed.seconds.items()
    ]
    text = f"{args.runs} runs each, fresh processes, interleaved; checkpoint {args.checkpoint}\n\n"
    text += table(("command", "median s", "fastest s"), cells)
    publish(environment(), text, args.json, seconds=timed.seconds)
    return 0
