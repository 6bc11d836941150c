"""`translate-cli --checkpoint C [--input F] [--output F]`: batch translation, one line out per line in.

With --n-best N (N > 1) every input line gives N output lines, best first, each
`SENTENCE ||| TRANSLATION ||| SCORE ||| LOG_PROB`: SENTENCE is the 0-based input line number
(as in Moses n-best lists), SCORE the length-normalized score the beam ranks by and LOG_PROB
the total log-probability (EOS included). An empty input line gives N entries with empty
text (the first scored 0, the rest -inf).

The input is translated in chunks of --chunk-lines lines. With --output, each chunk is added
to OUTPUT.partial as soon as it is done, and OUTPUT appears, complete, at the end; after a
crash or Ctrl-C, the same command with --resume translates only the lines not done yet.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

from translate.checkpoint import CheckpointError, Translator, load_translator
from translate.corpus import CorpusError, decode_lines, read_lines
from translate.files import file_digest
from translate.metrics import corpus_scores
from translate.partial_output import PartialOutput, PartialOutputError, lines_digest
from translate.pipeline import BATCH_TOKENS, Translation, translate_nbest

CHUNK_LINES = 5000  # lines a chunk: a few minutes of CPU work at most, lost to a crash

PRECISIONS = {"32": None, "bf16": torch.bfloat16, "16": torch.float16}


def add_search_arguments(parser: argparse.ArgumentParser, beam: int = 5) -> None:
    """The search settings, shared by translate-cli and translate-eval so both read alike."""
    parser.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS,
                        help=f"source tokens per batch (default: {BATCH_TOKENS})")
    parser.add_argument("--beam", type=int, default=beam,
                        help=f"beam size (default: {beam}); 1 is greedy search")
    parser.add_argument("--length-penalty", type=float, default=1.0,
                        help="GNMT length penalty alpha: hypotheses are ranked by "
                             "log-prob / ((5 + length) / 6) ** alpha (default: 1.0; 0 = raw log-prob)")
    parser.add_argument("--max-input-tokens", type=int, default=None,
                        help="translate a line over this many source tokens sentence by sentence "
                             "(default: the longest training sentence, data.max_length)")
    parser.add_argument("--restrict-target", action="store_true",
                        help="produce only tokens seen on the target side of the training data")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="32", choices=list(PRECISIONS),
                        help="autocast precision (default: 32; 16 needs --device cuda)")


def search_settings_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the parsed search settings, or None."""
    if args.beam < 1:
        return f"--beam must be at least 1, got {args.beam}"
    if args.batch_tokens < 1:
        return f"--batch-tokens must be at least 1, got {args.batch_tokens}"
    if args.max_input_tokens is not None and args.max_input_tokens < 1:
        return f"--max-input-tokens must be at least 1, got {args.max_input_tokens}"
    n_best = getattr(args, "n_best", 1)
    if not 1 <= n_best <= args.beam:
        return f"--n-best {n_best} must be between 1 and the beam size (--beam {args.beam})"
    if args.device == "cuda" and not torch.cuda.is_available():
        return "--device cuda asked for, but torch sees no CUDA device"
    if args.precision == "16" and args.device != "cuda":
        return "--precision 16 (float16 autocast) needs --device cuda; on the CPU use bf16 or 32"
    return None


def autocast(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """The autocast context `--precision` asks for on `--device` (none for 32)."""
    dtype = PRECISIONS[args.precision]
    return contextlib.nullcontext() if dtype is None else torch.autocast(device_type=args.device, dtype=dtype)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-cli", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="a checkpoint from translate-train")
    parser.add_argument("--input", default="-", help="text file, one sentence a line (default: stdin)")
    parser.add_argument("--output", default="-",
                        help="file to write: OUTPUT.partial while running, OUTPUT when complete (default: stdout)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the OUTPUT.partial of an earlier run of the same command")
    parser.add_argument("--chunk-lines", type=int, default=CHUNK_LINES,
                        help=f"input lines translated, and written, at a time (default: {CHUNK_LINES})")
    add_search_arguments(parser)
    parser.add_argument("--max-len-a", type=float, default=None, help="output length limit a*src+b")
    parser.add_argument("--max-len-b", type=int, default=None)
    parser.add_argument("--n-best", type=int, default=1,
                        help="write the N best translations of every line, in the "
                             "'SENTENCE ||| TRANSLATION ||| SCORE ||| LOG_PROB' format (N <= --beam)")
    parser.add_argument("--reference", default=None,
                        help="reference file, one line per input line: print BLEU and chrF of the "
                             "1-best output with their signatures on stderr")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def nbest_lines(translations: list[list[Translation]], first: int = 0) -> list[str]:
    """The n-best format; `first` is the 0-based input line number of `translations[0]`."""
    return [
        f"{number} ||| {entry.text} ||| {entry.score:.4f} ||| {entry.log_prob:.4f}"
        for number, entries in enumerate(translations, start=first)
        for entry in entries
    ]


def one_best(output_lines: list[str], n_best: int) -> list[str]:
    """The best translation of every input line, from the lines translate-cli wrote."""
    if n_best == 1:
        return output_lines
    return [line.split(" ||| ", 1)[1].rsplit(" ||| ", 2)[0] for line in output_lines[::n_best]]


def fingerprint(args: argparse.Namespace, lines: list[str]) -> dict:
    """What an OUTPUT.partial must have been written with to be continued: the input, the
    checkpoint and every setting that changes the output (not the device, threads or batch
    size, which change only rounding)."""
    return {
        "input": lines_digest(lines), "checkpoint": file_digest(Path(args.checkpoint)),
        "--beam": args.beam, "--length-penalty": args.length_penalty, "--n-best": args.n_best,
        "--max-len-a": args.max_len_a, "--max-len-b": args.max_len_b,
        "--max-input-tokens": args.max_input_tokens, "--restrict-target": args.restrict_target,
        "--precision": args.precision,
    }


def translate_in_chunks(translator: Translator, lines: list[str], args: argparse.Namespace,
                        output: PartialOutput | None) -> list[str]:
    """Translate the lines not done yet, chunk by chunk, each chunk written as soon as it is
    done (to `output`, else stdout); returns what this call wrote to stdout."""
    written: list[str] = []
    start = output.lines_done if output else 0
    try:
        for first in range(start, len(lines), args.chunk_lines):
            chunk = lines[first : first + args.chunk_lines]
            with autocast(args):
                translations = translate_nbest(
                    translator, chunk, args.batch_tokens, args.max_len_a, args.max_len_b,
                    args.max_input_tokens, progress=not args.quiet, beam=args.beam,
                    length_penalty=args.length_penalty, n_best=args.n_best,
                    restrict_to_target=args.restrict_target,
                    description=f"lines {first + 1:,}-{first + len(chunk):,} of {len(lines):,}",
                    first_line=first + 1,
                )
            text = [e[0].text for e in translations] if args.n_best == 1 else nbest_lines(translations, first)
            if output:
                output.append(text, len(chunk))
            else:
                sys.stdout.write("".join(line + "\n" for line in text))
                sys.stdout.flush()
                written += text
    except BaseException:
        if output and output.lines_done:
            print(f"translate-cli: stopped; the translations of {output.lines_done:,} of {len(lines):,} "
                  f"lines are in {output.partial}: the same command with --resume continues", file=sys.stderr)
        elif output:
            output.discard()  # nothing done: nothing to resume
        raise
    return written


def fail(message: str) -> int:
    print(f"translate-cli: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    error = search_settings_error(args)
    if args.chunk_lines < 1:
        error = f"--chunk-lines must be at least 1, got {args.chunk_lines}"
    if args.resume and args.output == "-":
        error = "--resume continues an --output FILE; standard output cannot be resumed"
    if error:
        return fail(error)
    try:
        lines = decode_lines(sys.stdin.buffer, "<stdin>") if args.input == "-" else read_lines(args.input)
        references = None if args.reference is None else read_lines(args.reference)
        if references is not None and len(references) != len(lines):
            return fail(
                f"--reference {args.reference} has {len(references)} lines but the input "
                f"{'<stdin>' if args.input == '-' else args.input} has {len(lines)}: "
                "every input line needs one reference line"
            )
        translator = load_translator(args.checkpoint, args.device)
        if args.restrict_target:
            translator.target_token_mask()  # refuse before any work if the checkpoint lacks them
        output = None
        if args.output != "-":
            output = PartialOutput(args.output, fingerprint(args, lines), args.resume)
            if output.lines_done:
                print(f"translate-cli: resuming {output.partial}: {output.lines_done:,} of {len(lines):,} "
                      "lines were done", file=sys.stderr)
    except (CorpusError, CheckpointError, PartialOutputError) as error:
        return fail(str(error))
    try:
        written = translate_in_chunks(translator, lines, args, output)
    except KeyboardInterrupt:
        return 130  # what was done is kept, and translate_in_chunks said where
    if output:
        output.finish()
    if references is not None:
        scores = corpus_scores(one_best(output.read() if output else written, args.n_best), references)
        print(scores.report(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
