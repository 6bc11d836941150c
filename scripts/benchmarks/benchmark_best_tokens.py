"""Greedy search's choice of each row's best token: `argmax` against `search.best_tokens` (the
same index, found through group maxima), on scores of the model's vocabulary size.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_best_tokens.py
    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_best_tokens.py --vocab 32000 --rows 1,8,64

Microseconds a call, best of --repeats; each row count is checked to give argmax's indexes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
from benchmark_tokenize import best_us  # noqa: E402

from translate.decode.search import best_tokens  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--vocab", type=int, default=4000, help="scores a row (default: make train's 4,000)"
    )
    parser.add_argument(
        "--rows", default="1,8,40,200", help="comma-separated rows (default: 1,8,40,200)"
    )
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(
        f"{torch.get_num_threads()} thread(s), torch {torch.__version__}, {args.vocab} scores a row\n"
    )
    print("| rows | argmax us | best_tokens us | speed-up |\n|---:|---:|---:|---:|")
    for rows in map(int, args.rows.split(",")):
        scores = torch.randn(rows, args.vocab)
        if not torch.equal(best_tokens(scores), scores.argmax(dim=1)):
            raise SystemExit(f"best_tokens differs from argmax at {rows} rows")
        plain = best_us(lambda: scores.argmax(dim=1), args.repeats, args.calls)
        grouped = best_us(lambda: best_tokens(scores), args.repeats, args.calls)
        print(f"| {rows} | {plain:.1f} | {grouped:.1f} | {plain / grouped:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
