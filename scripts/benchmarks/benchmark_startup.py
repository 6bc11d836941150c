"""How long the translating commands take to start: `--help`, and one sentence end to end.

Each measurement is a fresh process, as a user starts it, timed from launch to exit; the table
gives the median and the fastest of `--runs` runs. The floors are printed beside them: an empty
interpreter, `import torch` (which translating one sentence cannot avoid) and `import lightning`
(which the inference commands do not load).

    .venv/bin/python scripts/benchmarks/benchmark_startup.py --checkpoint runs/default/checkpoints/last.ckpt
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SENTENCE = "Click the OK button to close the dialog.\n"


def command(name: str) -> list[str]:
    """The console script beside this interpreter (what a user runs), else `python -m`."""
    script = shutil.which(name, path=str(Path(sys.executable).parent))
    module = {
        "translate-cli": "translate.cli.translate",
        "translate-eval": "translate.cli.evaluate",
        "translate-export": "translate.cli.export",
        "translate-inspect": "translate.cli.inspect",
    }[name]
    return [script] if script else [sys.executable, "-m", module]


def timed(argv: list[str], stdin: str = "") -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, input=stdin.encode(), capture_output=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.decode()[-500:]}"
        )
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if not Path(args.checkpoint).is_file():
        raise SystemExit(
            f"{args.checkpoint}: no such checkpoint (run `make train` first, or pass --checkpoint)"
        )

    cases = {
        "python -c pass (interpreter)": ([sys.executable, "-c", "pass"], ""),
        "python -c 'import torch'": ([sys.executable, "-c", "import torch"], ""),
        "python -c 'import lightning'": ([sys.executable, "-c", "import lightning"], ""),
        **{
            f"{name} --help": ([*command(name), "--help"], "")
            for name in ("translate-cli", "translate-eval", "translate-export", "translate-inspect")
        },
        "translate-cli, one sentence (stdin to stdout)": (
            [*command("translate-cli"), "--checkpoint", args.checkpoint, "--quiet"],
            SENTENCE,
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(
        args.runs
    ):  # interleaved, so that a busy moment of the machine hits every case alike
        for name, (argv, stdin) in cases.items():
            times[name].append(timed(argv, stdin))
    print(f"{args.runs} runs each, fresh processes, interleaved; checkpoint {args.checkpoint}\n")
    print("| command | median s | fastest s |\n|---|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(times, indent=1))


if __name__ == "__main__":
    main()
