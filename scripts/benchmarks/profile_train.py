"""Where a training step spends its time: torch.profiler over a few steps of our model on the
bundled corpus (the batches and step of `benchmark_train.py`), device kernels grouped into
matrix products, attention, the loss, the optimizer and the rest, and the share of the wall
time the device was idle (waiting for the host to launch work).

    python scripts/benchmarks/profile_train.py --device cuda --config configs/base.yaml --max-tokens 32768
    .venv/bin/python scripts/benchmarks/profile_train.py --config configs/tiny.yaml --steps 2   # CPU
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import torch  # noqa: E402
from benchmark_train import Trainee, load_batches, read_config, synchronize, to_device  # noqa: E402
from torch.autograd import DeviceType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

# Kernel or operator name patterns, first match wins.
GROUPS = (
    ("attention", re.compile(r"flash|fmha|attention|efficient", re.I)),
    (
        "matrix products",
        re.compile(r"gemm|cutlass|nvjet|xmma|matmul|addmm|\bmm\b|bmm|linear", re.I),
    ),
    ("loss (softmax, cross-entropy)", re.compile(r"softmax|cross_entropy|nll|logsumexp", re.I)),
    ("optimizer", re.compile(r"adam|foreach|multi_tensor", re.I)),
    ("normalisation", re.compile(r"layer_norm|layernorm|norm", re.I)),
    ("dropout, masks, random", re.compile(r"dropout|bernoulli|philox|masked|fused_dropout", re.I)),
    ("copies and casts", re.compile(r"copy|memcpy|memset|cast|to_copy|cat", re.I)),
)


def group_of(name: str) -> str:
    return next((group for group, pattern in GROUPS if pattern.search(name)), "other elementwise")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "default.yaml")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="padded tokens per batch (default: the config's)",
    )
    parser.add_argument("--model", default="ours", choices=["ours", "ours-compiled", "marian"])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=8, help="untimed steps first (default 8)")
    parser.add_argument("--steps", type=int, default=8, help="profiled steps (default 8)")
    parser.add_argument("--rows", type=int, default=20, help="kernels listed (default 20)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    config = read_config(args.config)
    if args.max_tokens:
        config["data"]["max_tokens"] = args.max_tokens
    vocab, batches, _ = load_batches(config, args.batches)
    batches = to_device(batches, device)
    trainee = Trainee(args.model, config, vocab, device)
    for index in range(args.warmup):
        trainee.step(batches[index % len(batches)], args.precision)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for index in range(args.steps):
            trainee.step(batches[index % len(batches)], args.precision)
        synchronize(device)
        wall = time.perf_counter() - start
    events = prof.key_averages()
    if device.type == "cuda":
        kernels = [
            e for e in events if e.device_type == DeviceType.CUDA
        ]  # the kernels and copies themselves
        timed = [(e.key, e.self_device_time_total / 1e6, e.count) for e in kernels]
    else:
        timed = [
            (e.key, e.self_cpu_time_total / 1e6, e.count)
            for e in events
            if e.self_cpu_time_total > 0
        ]
    busy = sum(seconds for _, seconds, _ in timed)
    tokens = sum(batches[index % len(batches)]["tokens"] for index in range(args.steps))
    print(
        f"{args.config} on {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}, {args.model}, "
        f"{args.precision}, {args.steps} steps, {tokens:,} target tokens: wall {wall:.3f} s "
        f"({tokens / wall:,.0f} tokens/s, profiler on); "
        + (
            f"device busy {busy:.3f} s = {100 * busy / wall:.1f}% of the wall time"
            if device.type == "cuda"
            else f"operators {busy:.3f} s"
        )
    )
    groups: dict[str, float] = {}
    for name, seconds, _ in timed:
        group = group_of(name)
        groups[group] = groups.get(group, 0.0) + seconds
    print("\n| group | seconds | share of busy time |\n|---|---:|---:|")
    for group, seconds in sorted(groups.items(), key=lambda item: -item[1]):
        print(f"| {group} | {seconds:.3f} | {100 * seconds / busy:.1f}% |")
    print("\n| kernel | calls | seconds | share |\n|---|---:|---:|---:|")
    for name, seconds, count in sorted(timed, key=lambda item: -item[1])[: args.rows]:
        print(f"| {name[:90]} | {count} | {seconds:.4f} | {100 * seconds / busy:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
