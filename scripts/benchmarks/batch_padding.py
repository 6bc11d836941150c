"""What fixed batch shapes cost in padding: the training batches of a config's data at several
token budgets, exact (each batch as long as its longest pair) against fixed shapes
(`data.batch_shapes fixed`), with the number of shapes the fixed batches meet.

    .venv/bin/python scripts/benchmarks/batch_padding.py --config configs/default.yaml --budgets 2000 4096 8192
    .venv/bin/python scripts/benchmarks/batch_padding.py --config configs/base.yaml --budgets 8192 32768 65536
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/default.yaml"))
    parser.add_argument("--budgets", type=int, nargs="+", default=[2000, 4096, 8192])
    parser.add_argument("--seed", type=int, default=1, help="the batches' shuffle (default 1)")
    parser.add_argument(
        "--cache-dir", default=None, help="vocabularies and encoded corpora (default: the config's)"
    )
    args = parser.parse_args(argv)
    if not args.config.is_file():
        parser.error(f"--config {args.config}: no such file")
    if min(args.budgets) < 1:
        parser.error("--budgets must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from translate.train.data_module import TranslationDataModule
    from translate.train.token_batches import BatchShapes, budget_batches, padding_share

    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    settings = {**config.get("data", {})}
    if args.cache_dir:
        settings["cache_dir"] = args.cache_dir
    data = TranslationDataModule(**settings)
    data.setup("fit")
    lengths = data.padded_lengths("train")
    print(f"{args.config}: {len(lengths):,} training pairs")
    print(
        "| `data.max_tokens` | batches, exact → fixed | shapes met | positions padding, exact → fixed |"
    )
    print("|---:|---:|---:|---:|")
    for budget in args.budgets:
        exact = budget_batches(lengths, budget, args.seed)
        shapes = BatchShapes.for_lengths(budget, int(lengths.max()))
        fixed = budget_batches(lengths, budget, args.seed, shapes)
        met = {
            shapes.sides(int(lengths[b][:, 0].max()), int(lengths[b][:, 1].max())) for b in fixed
        }
        print(
            f"| {budget:,} | {len(exact)} → {len(fixed)} | {len(met)} "
            f"| {padding_share(lengths, exact):.1%} → {padding_share(lengths, fixed, shapes):.1%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
