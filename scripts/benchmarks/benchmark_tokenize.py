"""SentencePiece's list calls against one call a line, for as many lines as a server's request or a
file's batch holds: where `translate.text.vocab.BATCH_CALL_LINES` should lie.

    .venv/bin/python scripts/benchmarks/benchmark_tokenize.py --checkpoint runs/default/checkpoints/last.ckpt

SentencePiece's `encode`/`decode` of a list start threads for the work (one per core); for a single
string they do not. Microseconds a call for the first N test sentences of the bundled split, best
of --repeats.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from translate.model.checkpoint import ARTIFACT_KEY, read_checkpoint  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402
from translate.text.vocab import Vocabularies  # noqa: E402


def best_us(function, repeats: int, calls: int = 20) -> float:
    function()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        best = min(best, (time.perf_counter() - started) / calls * 1e6)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument(
        "--lines", default="1,8,32,64,128,512", help="lines a call (default: 1,8,32,64,128,512)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    processor = Vocabularies.from_state(
        read_checkpoint(args.checkpoint)[ARTIFACT_KEY]["vocab"]
    ).source.processor
    sentences = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0])
    print(
        "| lines | encode, one list call µs | encode, a call a line µs | decode, one list call µs "
        "| decode, a call a line µs |"
    )
    print("|---:|---:|---:|---:|---:|")
    for count in map(int, args.lines.split(",")):
        lines = sentences[:count]
        ids = processor.encode(lines, out_type=int)
        figures = (
            best_us(lambda: processor.encode(lines, out_type=int), args.repeats),
            best_us(lambda: [processor.encode(line, out_type=int) for line in lines], args.repeats),
            best_us(lambda: processor.decode(ids), args.repeats),
            best_us(lambda: [processor.decode(line) for line in ids], args.repeats),
        )
        print(
            f"| {count} | " + " | ".join(f"{figure:,.0f}" for figure in figures) + " |", flush=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
