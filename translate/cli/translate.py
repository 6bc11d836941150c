"""`translate-cli --checkpoint C [--input F] [--output F]`: batch translation, one line out per line in."""

from __future__ import annotations

import argparse
import sys

import torch

from translate.checkpoint import CheckpointError, load_translator
from translate.corpus import CorpusError, decode_lines, read_lines
from translate.files import write_lines_atomic
from translate.pipeline import translate_lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="translate-cli", description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="a checkpoint from translate-train")
    parser.add_argument("--input", default="-", help="text file, one sentence a line (default: stdin)")
    parser.add_argument("--output", default="-", help="file to write, atomically (default: stdout)")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="source tokens per batch")
    parser.add_argument("--max-len-a", type=float, default=None, help="output length limit a*src+b")
    parser.add_argument("--max-len-b", type=int, default=None)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("translate-cli: error: --device cuda asked for, but torch sees no CUDA device", file=sys.stderr)
        return 2
    try:
        lines = decode_lines(sys.stdin.buffer, "<stdin>") if args.input == "-" else read_lines(args.input)
        translator = load_translator(args.checkpoint, args.device)
    except (CorpusError, CheckpointError) as error:
        print(f"translate-cli: error: {error}", file=sys.stderr)
        return 2
    outputs = translate_lines(
        translator, lines, args.batch_tokens, args.max_len_a, args.max_len_b,
        progress=not args.quiet,
    )
    if args.output == "-":
        sys.stdout.write("".join(line + "\n" for line in outputs))
        sys.stdout.flush()
    else:
        write_lines_atomic(args.output, outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
