"""`translate-batch --checkpoint CKPT --source FILE --output FILE --devices N [--num-nodes M]`:
one large file translated on several GPUs (or CPU processes) and nodes.

Lightning starts and connects the processes, as for training (`Trainer.predict` with DDP; on a
cluster torchrun or SLURM's srun start one process per device, see the training guide). The
input is cut into chunks of --chunk-lines lines, the same chunks translate-cli makes, and each
process takes a contiguous run of whole chunks. A process appends every finished chunk to its
own part, `OUTPUT.part-R-of-W.partial` (fsynced, with its state beside it, as translate-cli's
`OUTPUT.partial`), so a crash or a lost node keeps what was done: the same command with
--resume continues every part where it stopped. When all parts are complete, process 0 joins
them in input order into OUTPUT (written atomically) and removes them: one output line for every
input line, the same bytes translate-cli writes with the same flags.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import sys

from translate.cli.common import (
    add_checkpoint_argument,
    add_language_arguments,
    add_search_arguments,
    apply_search_defaults,
    run_command,
    search_settings_error,
    split_line_warning,
)
from translate.errors import UsageError

CHUNK_LINES = 5000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-batch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_checkpoint_argument(parser)
    parser.add_argument(
        "--source", required=True, metavar="FILE", help="text to translate, one sentence a line"
    )
    parser.add_argument("--output", required=True, metavar="FILE", help="where the translations go")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the parts of an earlier run of the same command",
    )
    parser.add_argument(
        "--chunk-lines",
        type=int,
        default=CHUNK_LINES,
        help=f"input lines translated, and written, at a time (default: {CHUNK_LINES})",
    )
    parser.add_argument(
        "--devices",
        default="1",
        help="devices (or CPU processes) per node (default: 1; -1: all GPUs)",
    )
    parser.add_argument("--num-nodes", type=int, default=1, help="nodes (default: 1)")
    parser.add_argument(
        "--accelerator",
        default="auto",
        choices=["auto", "cpu", "gpu"],
        help="where to translate (default: auto, the GPUs where there are any)",
    )
    add_search_arguments(parser)
    add_language_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    error = search_settings_error(args)
    if error:
        raise UsageError(error)
    if args.chunk_lines < 1:
        raise UsageError(f"--chunk-lines must be at least 1, got {args.chunk_lines}")
    import lightning as L

    from translate.train.batch_prediction import BatchTranslation, PartWriter, chunk_bounds
    from translate.train.quiet import quiet_third_party_noise

    quiet_third_party_noise()
    from translate.decode.loaded_model import load_model
    from translate.files import check_writable
    from translate.text.corpus import iter_lines

    output = check_writable(args.output)
    # The checkpoint's tuned beam and length penalty where not given (all but its weights read).
    apply_search_defaults(args, load_model(args.checkpoint, weights=False))
    lines = sum(1 for _ in iter_lines(args.source))  # counts and checks the UTF-8 before any work
    module = BatchTranslation(
        args, chunk_bounds(lines, args.chunk_lines), output, on_split=split_line_warning
    )
    devices = int(args.devices) if args.devices.lstrip("-").isdigit() else args.devices
    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=devices,
        num_nodes=args.num_nodes,
        strategy="ddp" if devices not in (1, "1") or args.num_nodes > 1 else "auto",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=sys.stderr.isatty(),
        use_distributed_sampler=False,
        callbacks=[PartWriter()],
    )
    try:
        trainer.predict(module, return_predictions=False)
    except SystemExit:  # Lightning ends a run stopped by Ctrl-C (or SIGTERM) this way
        if not trainer.interrupted:
            raise
        done = module.part.lines_done if module.part else 0
        print(
            f"translate-batch: stopped; this process's part holds {done:,} translated lines: the same "
            "command with --resume continues",
            file=sys.stderr,
        )
        return 130
    if trainer.is_global_zero:
        print(
            f"translate-batch: {lines:,} lines translated by {trainer.world_size} processes into {output}",
            file=sys.stderr,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-batch", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
