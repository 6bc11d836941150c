#!/usr/bin/env python3
"""Parameter counts of every tying mode for the architectures in configs/*.yaml.

    python scripts/studies/count_parameters.py configs/default.yaml configs/base.yaml

The vocabulary size is read from each config's `data.vocab_size` (a joint vocabulary), so
the figures are those of a model built from that config. With `--sharing`, the sharing variants
of the tying study (each on top of `tie_embeddings: all`) are listed too.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
import yaml

from translate.model.transformer import TIE_MODES, ModelConfig, Transformer

# Options beyond the embedding ties, each shown on top of three-way tying.
SHARING_VARIANTS = {
    "all+shared-attention": {"share_layer_attention": True},
    "all+shared-enc-dec": {"share_encoder_decoder_layers": True},
    "all+adapter": {"embedding_adapter": True},
}


def count(cfg: ModelConfig, vocab_size: int) -> tuple[int, int]:
    """(total, embedding) parameters, each shared matrix counted once."""
    with torch.device("meta"):
        model = Transformer(cfg, vocab_size, vocab_size, shared_vocab=True)
    total = sum(p.numel() for p in model.parameters())
    embeddings = sum(
        p.numel() for p in {id(p): p for p in model.embedding_weights().values()}.values()
    )
    return total, embeddings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--sharing", action="store_true", help="also list the sharing variants")
    args = parser.parse_args()
    print("| config | vocab | tie_embeddings | parameters | in embeddings |")
    print("|---|---|---|---|---|")
    for path in args.configs:
        with open(path) as handle:
            config = yaml.safe_load(handle)
        architecture = config["model"]["model"]
        vocab_size = config["data"]["vocab_size"]
        # shared_rows' size depends on the data (two rows per target-only piece): not listed
        rows = {
            tie: {"tie_embeddings": tie}
            for tie, places in TIE_MODES.items()
            if not places.target_rows_apart
        }
        if args.sharing:
            rows.update(
                {
                    name: {"tie_embeddings": "all", **options}
                    for name, options in SHARING_VARIANTS.items()
                }
            )
        for label, options in rows.items():
            cfg = dataclasses.replace(ModelConfig(**architecture), **options)
            total, embeddings = count(cfg, vocab_size)
            print(f"| {path} | {vocab_size} | {label} | {total:,} | {embeddings:,} |")


if __name__ == "__main__":
    main()
