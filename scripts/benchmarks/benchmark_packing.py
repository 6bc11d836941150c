"""Per call, `F.linear` against the packed oneDNN product (`translate/model/packing.py`) for layers of
the shapes a model has, at the row counts decoding meets: where packing pays.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_packing.py
    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_packing.py --shapes 512x512,512x2048,2048x512 --rows 1,4,16

Each row cycles through 24 copies of the layer, so that, as in a decoding step, the weight is not
already in the core's cache; microseconds a call, best of --repeats.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import torch
import torch.nn.functional as F


def per_call_us(function, calls: int) -> float:
    for _ in range(calls // 10):
        function()
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--shapes",
        default="256x256,256x1024,1024x256,256x4000",
        help="in x out features (default: make train's model)",
    )
    parser.add_argument("--rows", default="1,2,4,8,12,16,64")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{torch.get_num_threads()} thread(s), torch {torch.__version__}\n")
    print(
        "| layer (in x out) | rows | F.linear us | packed us | packed speed-up |\n|---|---:|---:|---:|---:|"
    )
    for shape in args.shapes.split(","):
        inputs, outputs = map(int, shape.split("x"))
        weights = [torch.randn(outputs, inputs) for _ in range(24)]
        packed = [torch.ops.mkldnn._reorder_linear_weight(w, None) for w in weights]
        bias = torch.randn(outputs)
        for rows in map(int, args.rows.split(",")):
            x = torch.randn(rows, inputs)
            plain_weights, packed_weights = itertools.cycle(weights), itertools.cycle(packed)
            plain = min(
                per_call_us(lambda: F.linear(x, next(plain_weights), bias), args.calls)
                for _ in range(args.repeats)
            )
            fast = min(
                per_call_us(
                    lambda: torch.ops.mkldnn._linear_pointwise(
                        x, next(packed_weights), bias, "none", [], ""
                    ),
                    args.calls,
                )
                for _ in range(args.repeats)
            )
            print(
                f"| {inputs} x {outputs} | {rows} | {plain:.1f} | {fast:.1f} | {plain / fast:.2f}x |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
