"""`translate-export --checkpoint CKPT --output DIR [--format huggingface|ctranslate2] [--overwrite]`.

--format huggingface (the default) writes a transformers model directory that loads with
`AutoModelForSeq2SeqLM.from_pretrained(DIR)` and `AutoTokenizer.from_pretrained(DIR)`
and gives the same greedy translations: post-norm models as `MarianMTModel`, pre-norm models
(tie_embeddings all or src_tgt) as `PegasusForConditionalGeneration`.

--format ctranslate2 writes a CTranslate2 model directory (any norm placement, any tie mode),
with the SentencePiece models as source.spm and target.spm.

--format argos writes into DIR one Argos Translate package (.argosmodel) a trained direction,
for argostranslate, argos-translate-lt and LibreTranslate (joint vocabulary; needs spacy).
Translate with ARGOS_CHUNK_TYPE=SPACY set: the package's sentence splitter works offline.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import json
import sys

from translate.cli.common import add_checkpoint_argument, run_command
from translate.errors import UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_checkpoint_argument(parser)
    parser.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="directory to write (must be absent or empty)",
    )
    parser.add_argument(
        "--format", choices=["huggingface", "ctranslate2", "argos"], default="huggingface"
    )
    parser.add_argument(
        "--quantization",
        default=None,
        help="ctranslate2 only: weight type, e.g. int8, int8_float16, float16",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty DIR")
    return parser


def export(args: argparse.Namespace) -> int:
    if args.quantization and args.format != "ctranslate2":
        raise UsageError("--quantization applies to --format ctranslate2 only")
    from translate.export.argos import export_argos
    from translate.export.ctranslate2 import export_ctranslate2
    from translate.export.huggingface import export_huggingface

    if args.format in ("argos", "ctranslate2"):
        from translate.decode.loaded_model import load_model

        if load_model(args.checkpoint, weights=False).data.protect_spans:
            print(
                f"translate-export: note: {args.checkpoint} learnt to copy sentinels for numbers, "
                f"placeholders and the like (data.protect_spans); {args.format} translates text as "
                "it is, without them, so that there these spans are not protected",
                file=sys.stderr,
            )
    if args.format == "argos":
        for package in export_argos(args.checkpoint, args.output, overwrite=args.overwrite):
            print(f"wrote {package.source}→{package.target} Argos package {package.path}")
        return 0
    if args.format == "huggingface":
        out = export_huggingface(args.checkpoint, args.output, overwrite=args.overwrite)
        kind = json.loads((out / "config.json").read_text())["architectures"][0]
    else:
        out = export_ctranslate2(
            args.checkpoint, args.output, overwrite=args.overwrite, quantization=args.quantization
        )
        kind = "CTranslate2 model"
    print(f"wrote {kind} to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-export", lambda: export(args))


if __name__ == "__main__":
    sys.exit(main())
