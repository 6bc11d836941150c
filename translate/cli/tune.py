"""`translate-tune --checkpoint CKPT`: choose the length penalty on the dev set and keep it in CKPT.

Beam search with too small a length penalty prefers translations that stop early. This tries
each candidate alpha at the beam size on up to --sentences dev sentences of the corpus the
checkpoint was trained on (every direction of a many-to-many model), keeps the one with the
best BLEU among those with a brevity penalty of at least 0.95, and writes it into the
checkpoint: translate-cli and translate-eval then use it where --length-penalty is not given.
translate-train runs this on a run's last checkpoint at the end of training.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import sys

from translate.cli.common import (
    add_checkpoint_argument,
    add_device_arguments,
    add_engine_arguments,
    resolve_device,
    run_command,
)
from translate.decode.device import autocast, prepare_decoding
from translate.defaults import LENGTH_PENALTY_CANDIDATES as CANDIDATES
from translate.defaults import LENGTH_PENALTY_RANGE
from translate.errors import UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-tune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_checkpoint_argument(parser)
    parser.add_argument("--beam", type=int, default=5, help="beam size to tune for (default: 5)")
    parser.add_argument(
        "--candidates",
        type=float,
        nargs="+",
        default=list(CANDIDATES),
        metavar="ALPHA",
        help=f"length penalties to try (default: {' '.join(map(str, CANDIDATES))})",
    )
    parser.add_argument(
        "--split", default="dev", help="the split of the checkpoint's corpus (default: dev)"
    )
    parser.add_argument(
        "--sentences", type=int, default=300, help="dev sentences per direction (default: 300)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the table, do not write the checkpoint"
    )
    add_device_arguments(parser)
    add_engine_arguments(parser)
    return parser


def tune(args: argparse.Namespace) -> int:
    if args.beam < 2:
        raise UsageError(f"--beam must be at least 2 to tune a length penalty, got {args.beam}")
    if args.sentences < 1:
        raise UsageError(f"--sentences must be at least 1, got {args.sentences}")
    low, high = LENGTH_PENALTY_RANGE
    outside = [alpha for alpha in args.candidates if not low <= alpha <= high]
    if outside:
        raise UsageError(
            f"--candidates {outside[0]}: length penalties must be between {low:g} and {high:g}"
        )
    from translate.decode.settings import EngineChoice
    from translate.decode.tuning import report, tune_checkpoint
    from translate.files import check_writable

    if not args.dry_run:
        check_writable(args.checkpoint)
    device = resolve_device(args)
    prepare_decoding(device)
    with autocast(device, args.precision):
        settings = tune_checkpoint(
            args.checkpoint,
            device,
            args.split,
            args.sentences,
            args.beam,
            args.candidates,
            progress=lambda line: print(f"translate-tune: {line}", file=sys.stderr),
            write=not args.dry_run,
            engine=EngineChoice.from_args(args),
        )
    print(report(settings))
    if not args.dry_run:
        print(
            f"translate-tune: {args.checkpoint} now translates with beam {settings['beam']} and length penalty "
            f"{settings['length_penalty']:.1f} unless --beam or --length-penalty says otherwise",
            file=sys.stderr,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-tune", lambda: tune(args))


if __name__ == "__main__":
    sys.exit(main())
