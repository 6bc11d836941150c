#!/usr/bin/env python3
"""Parameter counts of every tying mode for the architectures in configs/*.yaml.

    python scripts/count_parameters.py configs/default.yaml configs/base.yaml

The vocabulary size is read from each config's `data.vocab_size` (a joint vocabulary), so
the figures are those of a model built from that config.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
import yaml

from translate.model import TIE_MODES, ModelConfig, Transformer


def count(cfg: ModelConfig, vocab_size: int) -> tuple[int, int]:
    """(total, embedding) parameters, each shared matrix counted once."""
    with torch.device("meta"):
        model = Transformer(cfg, vocab_size, vocab_size, shared_vocab=True)
    total = sum(p.numel() for p in model.parameters())
    embeddings = sum(p.numel() for p in {id(p): p for p in model.embedding_weights().values()}.values())
    return total, embeddings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+")
    args = parser.parse_args()
    print("| config | vocab | tie_embeddings | parameters | in embeddings |")
    print("|---|---|---|---|---|")
    for path in args.configs:
        with open(path) as handle:
            config = yaml.safe_load(handle)
        architecture = config["model"]["model"]
        vocab_size = config["data"]["vocab_size"]
        for tie in TIE_MODES:
            cfg = dataclasses.replace(ModelConfig(**architecture), tie_embeddings=tie)
            total, embeddings = count(cfg, vocab_size)
            print(f"| {path} | {vocab_size} | {tie} | {total:,} | {embeddings:,} |")


if __name__ == "__main__":
    main()
