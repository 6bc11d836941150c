"""`translate-export CHECKPOINT OUT_DIR [--format huggingface|ctranslate2] [--overwrite]`.

--format huggingface (the default) writes a transformers model directory that loads with
`AutoModelForSeq2SeqLM.from_pretrained(OUT_DIR)` and `AutoTokenizer.from_pretrained(OUT_DIR)`
and gives the same greedy translations: post-norm models as `MarianMTModel`, pre-norm models
(tie_embeddings all or src_tgt) as `PegasusForConditionalGeneration`.

--format ctranslate2 writes a CTranslate2 model directory (any norm placement, any tie mode),
with the SentencePiece models as source.spm and target.spm.
"""

from __future__ import annotations

import argparse
import json
import sys

from translate.checkpoint import CheckpointError
from translate.export import ExportError, export_ctranslate2, export_huggingface


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", help="a checkpoint from translate-train")
    parser.add_argument("out_dir", help="directory to write (must be absent or empty)")
    parser.add_argument("--format", choices=["huggingface", "ctranslate2"], default="huggingface")
    parser.add_argument("--quantization", default=None,
                        help="ctranslate2 only: weight type, e.g. int8, int8_float16, float16")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT_DIR")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quantization and args.format != "ctranslate2":
        print("translate-export: error: --quantization applies to --format ctranslate2 only", file=sys.stderr)
        return 2
    try:
        if args.format == "huggingface":
            out = export_huggingface(args.checkpoint, args.out_dir, overwrite=args.overwrite)
            kind = json.loads((out / "config.json").read_text())["architectures"][0]
        else:
            out = export_ctranslate2(args.checkpoint, args.out_dir, overwrite=args.overwrite,
                                     quantization=args.quantization)
            kind = "CTranslate2 model"
    except (CheckpointError, ExportError) as error:
        print(f"translate-export: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {kind} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
