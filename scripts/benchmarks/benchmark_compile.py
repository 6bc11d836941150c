"""What compiling the training step costs over fixed batch shapes: the loss compiled once over
symbolic sizes (`model.step compiled`, translate/train/compiled_step.py) against compiled once
for each shape (`torch.compile(dynamic=False)`), on the same batches.

    .venv/bin/python scripts/benchmarks/benchmark_compile.py                  # toy model, CPU
    .venv/bin/python scripts/benchmarks/benchmark_compile.py --device cuda --d-model 512 --layers 6

Each way runs in a process of its own with inductor's caches off (a warm cache would hide the
compile), meets `--shapes` distinct shapes of a `--max-tokens` budget, then each again: the
seconds of every step (forward and backward) are printed, the first meeting of a shape apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    parser.add_argument("--vocab", type=int, default=400)
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--shapes", type=int, default=6, help="distinct batch shapes met")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--way", choices=["symbolic", "per-shape"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("d_model", "layers", "vocab", "max_tokens", "shapes", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def measure(args: argparse.Namespace) -> dict:
    """In this process: the seconds of each step of one way of compiling."""
    import numpy as np
    import torch

    from translate.model.transformer import ModelConfig, Transformer
    from translate.train.compiled_step import CompiledLoss
    from translate.train.data_module import collate
    from translate.train.loss import batch_nll
    from translate.train.token_batches import BatchShapes

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfg = ModelConfig(
        d_model=args.d_model,
        heads=8 if args.d_model >= 512 else 4,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        ffn_dim=4 * args.d_model,
        dropout=0.0,
    )
    torch.manual_seed(0)
    model = Transformer(cfg, args.vocab, args.vocab, shared_vocab=True).to(device).train()
    shapes = BatchShapes.for_lengths(args.max_tokens, 8 * 2 ** (args.shapes + 1))
    # one batch for each of the first `shapes` lengths from 8 up, every other step (8, 24, ...)
    longest = [shapes.lengths[min(2 * i, len(shapes.lengths) - 1)] for i in range(args.shapes)]
    rng = np.random.default_rng(1)
    batches = []
    for length in longest:
        rows = shapes.shape(length)[0]
        examples = [
            (
                rng.integers(4, args.vocab, rng.integers(1, length)),
                rng.integers(4, args.vocab, length - 1),
                None,
            )
            for _ in range(rows)
        ]
        batch = collate(examples, shapes=shapes)
        batches.append(
            {k: v.to(device) for k, v in batch.items() if k in ("src", "tgt_in", "tgt_out")}
        )
    if args.way == "symbolic":
        loss = CompiledLoss(model, 0.1, None, device.type, len(shapes.lengths))
    else:
        limit = len(shapes.lengths) + 1
        torch._dynamo.config.recompile_limit = torch._dynamo.config.cache_size_limit = limit
        compiled = torch.compile(
            lambda s, i, o: batch_nll(model, {"src": s, "tgt_in": i, "tgt_out": o}, 0.1),
            dynamic=False,
            mode="reduce-overhead" if device.type == "cuda" else None,
        )

        def loss(batch: dict) -> torch.Tensor:
            return compiled(batch["src"], batch["tgt_in"], batch["tgt_out"]).clone()

    seconds = []
    for batch in batches + batches:
        start = time.perf_counter()
        loss(batch).backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return {
        "way": args.way,
        "shapes": [list(b["src"].shape) for b in batches],
        "first_meeting_s": seconds[: len(batches)],
        "again_s": seconds[len(batches) :],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.way:
        print(json.dumps(measure(args)))
        return 0
    env = {
        **os.environ,
        "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    results = []
    for way in ("per-shape", "symbolic"):
        done = subprocess.run(
            [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--way", way],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode:
            raise SystemExit(f"error: compiling {way} failed:\n{done.stderr[-2000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"shapes (rows, length): {', '.join(f'{r}x{n}' for r, n in results[0]['shapes'])}")
    print("| compiled | first meeting of each shape, s | total | each shape again, s |")
    print("|---|---|---:|---|")
    for result in results:
        first, again = result["first_meeting_s"], result["again_s"]
        print(
            f"| {'once over symbolic sizes' if result['way'] == 'symbolic' else 'once for each shape'} "
            f"| {', '.join(f'{s:.1f}' for s in first)} | {sum(first):.1f} "
            f"| {', '.join(f'{s:.2f}' for s in again)} |"
        )
    if args.json:
        from translate.files import write_atomic

        write_atomic(args.json, json.dumps(results, indent=2).encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
