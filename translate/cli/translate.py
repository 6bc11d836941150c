"""`translate-cli --checkpoint CKPT [--source FILE] [--output FILE]`: one line out per line in.

Standard input is translated as it arrives: a line typed at the prompt is answered at once, and
a pipe is read in chunks of up to --chunk-lines lines without waiting for its end. Every input
line gives one output line, in order; a blank line (spaces, tabs, NUL) gives an empty line.
An input line ends at LF, CR LF or CR (one file may mix them); every output line ends with LF.

With --scores every output line starts with the translation's CONFIDENCE and a tab: the
geometric mean of its tokens' probabilities, from 0 to 1 (1 for an empty line).

With --n-best N (N > 1) every input line gives N output lines, best first, each
`SENTENCE ||| TRANSLATION ||| SCORE ||| LOG_PROB ||| CONFIDENCE`: SENTENCE is the 0-based input
line number (as in Moses n-best lists), SCORE the length-normalized score the beam ranks by,
LOG_PROB the total log-probability (EOS included) and CONFIDENCE as above. An empty input line
gives N entries with empty text (the first scored 0, the rest -inf).

With --output FILE, each chunk is added to FILE.partial as soon as it is done, and FILE
appears, complete, at the end; after a crash or Ctrl-C, the same command with --resume
translates only the lines not done yet. A symlink is written through; a FIFO or a character
device (/dev/stdout, /dev/null) is written to as a stream; a directory is refused, and so is
an output that is a file the command reads (the input, through a symlink or a hard link too, the
references or the checkpoint), before any work.

A document (--source FILE with the extension of a format, or --format) is translated with its
structure: HTML, Markdown, SubRip and WebVTT subtitles, gettext .po/.pot, XLIFF 1.1, 1.2 and 2.0,
docx, pptx, xlsx, odt, odp, ods. Only its text is translated, a paragraph's inline formatting
carried through the search; everything else comes back as it was, written atomically to
--output. In .po and XLIFF output a translation under --review-below is marked fuzzy / needs
review. A .txt file is translated line by line, as above.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from translate.cli.common import (
    add_checkpoint_argument,
    add_language_arguments,
    add_search_arguments,
    apply_search_defaults,
    handed_back_note,
    load_for_search,
    resolve_device,
    run_command,
    search_settings_error,
    split_line_warning,
    zero_shot_warning,
)
from translate.decode.device import autocast, prepare_decoding
from translate.decode.settings import SearchSettings
from translate.documents.formats import NAMES, REVIEW_BELOW
from translate.errors import UsageError

CHUNK_LINES = 5000  # lines a chunk: a few minutes of CPU work at most, lost to a crash
DOCUMENT_FORMATS = tuple(name for name in NAMES if name != "txt")  # txt: line by line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-cli",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_checkpoint_argument(parser)
    parser.add_argument(
        "--source",
        default="-",
        metavar="FILE",
        help="text to translate, one sentence a line (default: standard input)",
    )
    parser.add_argument(
        "--output",
        default="-",
        metavar="FILE",
        help="file to write: FILE.partial while running, FILE when complete (default: standard output)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the FILE.partial of an earlier run of the same command",
    )
    parser.add_argument(
        "--chunk-lines",
        type=int,
        default=CHUNK_LINES,
        help=f"input lines translated, and written, at a time at most (default: {CHUNK_LINES})",
    )
    add_search_arguments(parser)
    add_language_arguments(parser)
    parser.add_argument(
        "--n-best",
        type=int,
        default=1,
        help="write the N best translations of every line, in the "
        "'SENTENCE ||| TRANSLATION ||| SCORE ||| LOG_PROB ||| CONFIDENCE' format (N <= --beam)",
    )
    parser.add_argument(
        "--scores",
        action="store_true",
        help="start every output line with the translation's confidence (0 to 1: the geometric "
        "mean of its tokens' probabilities) and a tab",
    )
    parser.add_argument(
        "--format",
        default=None,
        metavar="FORMAT",
        help="the --source's format, where its extension does not say: lines (one sentence a "
        f"line) or {', '.join(DOCUMENT_FORMATS)} (default: by extension; lines for .txt, "
        "others and standard input)",
    )
    parser.add_argument(
        "--review-below",
        type=float,
        default=REVIEW_BELOW,
        metavar="CONF",
        help="in .po and XLIFF output, mark translations whose confidence is under CONF fuzzy / "
        f"needs review (0 to 1; default: {REVIEW_BELOW})",
    )
    parser.add_argument(
        "--reference",
        default=None,
        metavar="FILE",
        help="reference translations, one line per input line: print BLEU and chrF of the "
        "1-best output with their signatures on stderr",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads for torch and CTranslate2"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no prompt")
    return parser


def settings_error(args: argparse.Namespace) -> str | None:
    if args.format is not None and args.format not in ("lines", "txt", *DOCUMENT_FORMATS):
        return f"--format {args.format}: not a format; one of lines, {', '.join(DOCUMENT_FORMATS)}"
    if not 0 <= args.review_below <= 1:
        return f"--review-below must be from 0 to 1, got {args.review_below}"
    if args.chunk_lines < 1:
        return f"--chunk-lines must be at least 1, got {args.chunk_lines}"
    if args.threads is not None and args.threads < 1:
        return f"--threads must be at least 1, got {args.threads}"
    return search_settings_error(args)


def nbest_lines(translations: list, first: int = 0) -> list[str]:
    """The n-best format; `first` is the 0-based input line number of `translations[0]`."""
    return [
        f"{number} ||| {entry.text} ||| {entry.score:.4f} ||| {entry.log_prob:.4f} ||| "
        f"{entry.confidence:.4f}"
        for number, entries in enumerate(translations, start=first)
        for entry in entries
    ]


def written_lines(translations: list, first: int, n_best: int, scores: bool) -> list[str]:
    """What translate-cli writes for `translations` (each line's n-best list), the first of them
    input line `first` (0-based): the n-best format, or a line each, after its confidence and a
    tab with `scores`."""
    if n_best > 1:
        return nbest_lines(translations, first)
    if scores:
        return [f"{entries[0].confidence:.4f}\t{entries[0].text}" for entries in translations]
    return [entries[0].text for entries in translations]


def one_best(output_lines: list[str], n_best: int, scores: bool = False) -> list[str]:
    """The best translation of every input line, from the lines translate-cli wrote."""
    if n_best > 1:
        return [line.split(" ||| ", 1)[1].rsplit(" ||| ", 3)[0] for line in output_lines[::n_best]]
    if scores:
        return [line.split("\t", 1)[1] for line in output_lines]
    return output_lines


def fingerprint(args: argparse.Namespace, checkpoint_digest: str) -> dict:
    """What an OUTPUT.partial must have been written with to be continued: the checkpoint and
    every setting that changes the output (not the device, threads or batch size, which change
    only rounding). The input is checked line by line as it is read again (`skip_done`)."""
    from translate.files import file_digest

    return {
        "checkpoint": checkpoint_digest,
        "--beam": args.beam,
        "--length-penalty": args.length_penalty,
        "--n-best": args.n_best,
        "--scores": args.scores,
        "--max-len-a": args.max_len_a,
        "--max-len-b": args.max_len_b,
        "--max-input-tokens": args.max_input_tokens,
        "--restrict-target": args.restrict_target,
        "--precision": args.precision,
        "--target-lang": args.target_lang,
        "--quantize": args.quantize,
        "--engine": args.engine,
        "--glossary": file_digest(args.glossary_file) if args.glossary_file else None,
    }


class StreamOutput:
    """Standard output, a FIFO or a character device: each chunk written and flushed at once;
    the lines are kept only where they will be scored."""

    def __init__(self, handle: TextIO, keep: bool, owned: bool) -> None:
        self.handle, self.keep, self.owned = handle, keep, owned
        self.lines_done, self.written = 0, []

    def append(self, lines: list[str], input_lines: list[str]) -> None:
        self.handle.write("".join(line + "\n" for line in lines))
        self.handle.flush()
        self.lines_done += len(input_lines)
        if self.keep:
            self.written += lines

    def finish(self) -> None:
        if self.owned:
            self.handle.close()

    def read(self) -> list[str]:
        return self.written


def warn_lost(
    sources: list[str], translations: list[str], first_line: int, unit: str = "line"
) -> int:
    """A warning on stderr for each translation that lacks a protected span of its source line
    (`protected.lost_spans`: a number, placeholder, URL, ...), named by `unit` and number; how
    many lack one."""
    from tqdm import tqdm

    from translate.text.protected import describe, lost_spans

    lacking = 0
    for number, (source, translation) in enumerate(zip(sources, translations), start=first_line):
        lost = lost_spans(source, translation)
        if lost:
            lacking += 1
            tqdm.write(
                f"warning: {unit} {number}: the translation lacks {describe(lost)}", sys.stderr
            )
    return lacking


def is_stream(path: str) -> bool:
    """A FIFO or a character device (after symlinks): written to as it is, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def read_source(path: str) -> tuple[Iterator[str], bool, int | None]:
    """The input's lines (ended by `\n`, `\r\n` or `\r`), whether it is live (a terminal or
    pipe: chunks of what has arrived), and its line count where it is a file (counted, and
    checked as UTF-8, before any work)."""
    from translate.text.corpus import iter_lines, text_lines

    if path == "-":
        live = not stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode)
        return text_lines(sys.stdin.buffer, "<stdin>", live), live, None
    if is_stream(path):
        return iter_lines(path, live=True), True, None
    count = sum(1 for _ in iter_lines(path))
    return iter_lines(path), False, count


def regular_file_descriptor(stream: TextIO) -> int | None:
    """The file descriptor of standard input or output where it is a regular file (`< FILE`,
    `> FILE`), else None."""
    try:
        fd = stream.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor
        return None


def descriptor_path(fd: int) -> str | None:
    """The path of the file an open descriptor reads or writes, where the system says."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def check_inputs_kept(args: argparse.Namespace) -> None:
    """Refuse an output that is a file the command reads (the input, the references or the
    checkpoint): its translation would replace it. The output is --output FILE and the
    FILE.partial and FILE.partial.json it writes while it runs, or standard output where it is
    a regular file. The same file is the same file through symlinks and hard links, however its
    path is spelled (`files.same_file`)."""
    from translate.files import OutputError, same_file
    from translate.partial_output import partial_paths

    inputs: list[tuple[str, str | int]] = [(f"the --checkpoint {args.checkpoint}", args.checkpoint)]
    if args.source != "-":
        inputs.append((f"the input --source {args.source}", args.source))
    elif (stdin := regular_file_descriptor(sys.stdin)) is not None:
        name = descriptor_path(stdin)
        inputs.append((f"the file standard input reads{f', {name}' if name else ''}", stdin))
    if args.reference is not None:
        inputs.append((f"the --reference {args.reference}", args.reference))
    stdout = regular_file_descriptor(sys.stdout) if args.output == "-" else None
    for what, path in inputs:
        if stdout is not None and same_file(stdout, path):
            name = descriptor_path(stdout)
            raise OutputError(
                f"standard output{f' ({name})' if name else ''} is {what} (the same file): the "
                "translation would be written over it; redirect it to another file or choose "
                "an --output"
            )
        if args.output == "-":
            continue
        if same_file(args.output, path):
            raise OutputError(
                f"--output {args.output} is {what} (the same file): its translation would "
                "replace it; choose another --output"
            )
        for written in partial_paths(Path(os.path.realpath(args.output))):
            if same_file(written, path):
                raise OutputError(
                    f"--output {args.output} is written as {written} while it runs, and that is "
                    f"{what} (the same file): choose another --output"
                )


def load_searching(args: argparse.Namespace, asked: SearchSettings):
    """The checkpoint loaded for the search, the target tags, the settings (with the
    checkpoint's beam and length penalty where the flags give none) and the device; refused
    before any work where the model lacks a language or cannot restrict its output."""
    from translate.decode import pipeline

    device = resolve_device(args)
    prepare_decoding(device)
    loaded = load_for_search("translate-cli", args, args.checkpoint, device)
    apply_search_defaults(args, loaded)
    tags = pipeline.target_tags_for(loaded, args.target_lang, args.source_lang)
    zero_shot_warning(args.checkpoint, args.source_lang, tags)
    if args.restrict_target:
        loaded.target_token_mask(tags.target_lang)
    settings = replace(asked, beam=args.beam, length_penalty=args.length_penalty)
    return loaded, tags, settings, device


def searched(args, loaded, settings, device, lines: list[str], progress, first_line: int) -> list:
    """Each line's n-best list, searched as the flags say; `first_line` numbers the first
    line in warnings."""
    from translate.decode import pipeline

    with autocast(device, args.precision):
        return pipeline.translate_nbest(
            loaded,
            lines,
            settings,
            batch_tokens=args.batch_tokens,
            progress=progress,
            first_line=first_line,
            on_split=split_line_warning,
        )


def document_format(args: argparse.Namespace):
    """The document format the --source is read as (`documents.formats.Format`), or None for
    line by line: --format, else the --source's extension (a .txt file, another extension and
    standard input are lines). Flags for lines only are refused with a document."""
    from pathlib import PurePath

    from translate.documents.formats import EXTENSIONS, format_named, format_of

    if args.format in ("lines", "txt"):
        return None
    if args.format is not None:
        fmt = format_named(args.format)
    elif args.source == "-" or PurePath(args.source).suffix.lower() in ("", ".txt"):
        return None
    elif PurePath(args.source).suffix.lower() not in EXTENSIONS:
        return None
    else:
        fmt = format_of(args.source)
    for flag, given in (
        ("--n-best", args.n_best > 1),
        ("--scores", args.scores),
        ("--reference", args.reference is not None),
        ("--resume", args.resume),
    ):
        if given:
            raise UsageError(
                f"{flag} is for text translated line by line, not a {fmt.name} document "
                "(--format lines reads it as lines)"
            )
    return fmt


def translate_document(args: argparse.Namespace, fmt) -> int:
    """The --source read as `fmt`'s format (`documents.formats.Format`), its texts translated,
    written to --output."""
    from tqdm import tqdm

    from translate.decode.device import set_threads
    from translate.documents.formats import RenderOptions
    from translate.documents.safe import read_bounded
    from translate.documents.translating import translate_texts, without_tags
    from translate.files import check_writable, write_atomic

    set_threads(args.threads)
    asked = SearchSettings.from_args(args)
    name = "<stdin>" if args.source == "-" else args.source
    try:
        if args.source == "-":
            data = read_bounded(sys.stdin.buffer, name)
        else:
            with open(args.source, "rb") as handle:
                data = read_bounded(handle, name)
    except OSError as error:
        raise UsageError(f"--source {args.source}: {error.strerror}") from None
    document = fmt.read(data, name)
    texts = document.texts()
    to_file = args.output != "-" and not is_stream(args.output)
    if to_file:
        check_writable(args.output)
    loaded, tags, settings, device = load_searching(args, asked)
    bar = tqdm(unit=" sentences", file=sys.stderr, disable=args.quiet, mininterval=1.0)

    def translate(lines: list[str]) -> list:
        bar.reset(total=len(lines))
        found = searched(args, loaded, settings, device, lines, bar.update, 1)
        return [entries[0] for entries in found]

    try:
        translated = translate_texts(texts, translate)
    finally:
        bar.close()
    options = RenderOptions(args.source_lang, tags.target_lang, args.review_below)
    out = document.render(translated, options)
    if to_file:
        write_atomic(args.output, out)
    else:
        with open(
            sys.stdout.fileno() if args.output == "-" else args.output,
            "wb",
            closefd=args.output != "-",
        ) as handle:
            handle.write(out)
    review = sum(t.confidence < args.review_below for t in translated if t.text.strip())
    plain = sum(t.formatting_lost for t in translated)
    lacking = warn_lost(
        [without_tags(text) for text in texts],
        [without_tags(t.text) for t in translated],
        1,
        "text",
    )
    print(
        f"translate-cli: {name} ({fmt.name}): {len(texts):,} texts translated, "
        f"{review:,} under confidence {args.review_below}"
        + (f", {plain:,} sentences lost a run's formatting" if plain else "")
        + (f", {lacking:,} lacking a protected token of their source" if lacking else "")
        + ("" if args.output == "-" else f"; written to {args.output}"),
        file=sys.stderr,
    )
    handed_back_note("translate-cli", loaded)
    return 0


def translate_command(args: argparse.Namespace) -> int:
    error = settings_error(args)
    if not error and args.resume and (args.output == "-" or is_stream(args.output)):
        error = "--resume continues an --output FILE; a stream (standard output, a FIFO, a device) cannot be resumed"
    if error:
        raise UsageError(error)
    to_file = args.output != "-" and not is_stream(args.output)
    if to_file or args.output == "-":
        check_inputs_kept(args)
    fmt = document_format(args)
    if fmt is not None:
        return translate_document(args, fmt)
    # Imported after parsing, so that --help and a mistyped flag answer without loading torch.
    from tqdm import tqdm

    from translate.decode.device import set_threads
    from translate.files import check_writable, file_digest
    from translate.partial_output import PartialOutput
    from translate.text.corpus import iter_lines
    from translate.text.line_feed import chunks

    set_threads(args.threads)
    asked = SearchSettings.from_args(args)  # a --glossary that cannot be read fails now
    sources, live, count = read_source(args.source)
    source_name = "<stdin>" if args.source == "-" else args.source
    references = None if args.reference is None else list(iter_lines(args.reference))
    if references is not None and count is not None and len(references) != count:
        raise UsageError(
            f"--reference {args.reference} has {len(references)} lines but the input "
            f"{source_name} has {count}: every input line needs one reference line"
        )
    target = check_writable(args.output) if to_file else None
    loaded, tags, settings, device = load_searching(args, asked)
    keep = references is not None
    if to_file:
        output = PartialOutput(target, fingerprint(args, file_digest(args.checkpoint)), args.resume)
    elif args.output == "-":
        output = StreamOutput(sys.stdout, keep, owned=False)
    else:
        output = StreamOutput(open(args.output, "w", encoding="utf-8"), keep, owned=True)
    interactive = args.source == "-" and sys.stdin.isatty()
    if isinstance(output, PartialOutput) and output.lines_done:
        output.skip_done(sources)
        print(
            f"translate-cli: resuming {output.partial}: {output.lines_done:,} lines were done",
            file=sys.stderr,
        )
    lacking = 0  # lines whose translation lacks a protected span of the source
    bar = tqdm(
        total=count,
        initial=output.lines_done,
        unit=" lines",
        file=sys.stderr,
        disable=args.quiet or interactive,
        mininterval=1.0,
    )
    try:
        if interactive and not args.quiet:
            languages = (
                f"{args.source_lang or 'any'} → {tags.target_lang}"
                if tags.target_lang
                else " → ".join(loaded.data.languages or ("source", "target"))
            )
            print(
                f"translate-cli: {languages} with {args.checkpoint}; type a line and press Enter "
                "(Ctrl-D ends)",
                file=sys.stderr,
            )
        for chunk in chunks(sources, args.chunk_lines, live):
            first = output.lines_done
            translations = searched(args, loaded, settings, device, chunk, bar.update, first + 1)
            output.append(written_lines(translations, first, args.n_best, args.scores), chunk)
            lacking += warn_lost(chunk, [e[0].text for e in translations], first + 1)
    except BaseException:
        if isinstance(output, PartialOutput):
            if output.lines_done:
                print(
                    f"translate-cli: stopped; the translations of the first {output.lines_done:,} input "
                    f"lines are in {output.partial}: the same command with --resume continues",
                    file=sys.stderr,
                )
            else:
                output.discard()  # nothing done: nothing to resume
        raise
    finally:
        bar.close()
    output.finish()
    handed_back_note("translate-cli", loaded)
    if lacking:
        print(
            f"translate-cli: {lacking:,} of {output.lines_done:,} translations lack a number, "
            "placeholder, URL or other protected token of their source line (warnings above)",
            file=sys.stderr,
        )
    if references is not None:
        if len(references) != output.lines_done:
            raise UsageError(
                f"--reference {args.reference} has {len(references)} lines but the input "
                f"{source_name} had {output.lines_done}: the translations are complete, "
                "but they are not scored"
            )
        # sacrebleu is imported only when there is something to score.
        from translate.score.metrics import corpus_scores

        print(
            corpus_scores(one_best(output.read(), args.n_best, args.scores), references).report(),
            file=sys.stderr,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-cli", lambda: translate_command(args))


if __name__ == "__main__":
    sys.exit(main())
