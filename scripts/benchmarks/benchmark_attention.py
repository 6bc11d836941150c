"""How fast a decoding step's attention reads its cache, against a plain read of the same bytes.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_attention.py

One query a row meets `steps` cached keys and values (4 heads of 64, the default model's) for
`rows` rows, through `sum()` over the keys and values, which only streams them; through two
batched products around a softmax (`torch.matmul`, what decoding ran before 2026-11-25); and
through the attention a decoding step runs now (`translate.model.transformer._attend_step`: the values
summed row by row, `weighted_values`). Each is timed with the CPU's caches warm (the cache read
just before) and cold (a 96 MiB buffer written in between, as a step's other layers and weights
do); GB/s counts the cache's bytes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from translate.model.transformer import _attend_step  # noqa: E402

HEADS, HEAD_DIM = 4, 64


def median_seconds(function, repeats: int, flush: torch.Tensor | None) -> float:
    function()
    times = []
    for _ in range(repeats):
        if flush is not None:
            flush.add_(1.0)  # evicts the cache from the CPU's caches
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def batched_products(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(query, keys.transpose(-1, -2)).mul_(HEAD_DIM**-0.5)
    return torch.matmul(scores.softmax(dim=-1), values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--shapes",
        default="40x30,136x30,136x60",
        help="rows x cached steps (default: 40x30,136x30,136x60)",
    )
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    flush = torch.zeros(96 * 2**20 // 4)
    print(
        f"{torch.get_num_threads()} thread(s), torch {torch.__version__}, {HEADS} heads of {HEAD_DIM}, "
        f"median of {args.repeats}"
    )
    print(
        "| rows | cached steps | cache MiB | caches | plain read µs | batched products µs | decoding's attention µs "
        "| plain read GB/s | batched products GB/s | decoding's attention GB/s |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for shape in args.shapes.split(","):
        rows, steps = map(int, shape.split("x"))
        query = torch.randn(rows, HEADS, 1, HEAD_DIM)
        keys, values = torch.randn(2, rows, HEADS, steps, HEAD_DIM).unbind(0)
        size = (keys.numel() + values.numel()) * 4
        for caches, cold in (("warm", None), ("cold", flush)):
            times = [
                median_seconds(run, args.repeats, cold)
                for run in (
                    lambda: (keys.sum(), values.sum()),
                    lambda: batched_products(query, keys, values),
                    lambda: _attend_step(query, keys, values, None),
                )
            ]
            print(
                f"| {rows} | {steps} | {size / 2**20:.1f} | {caches} | "
                + " | ".join(f"{seconds * 1e6:.0f}" for seconds in times)
                + " | "
                + " | ".join(f"{size / seconds / 1e9:.1f}" for seconds in times)
                + " |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
