"""`translate-eval`: corpus BLEU and chrF (sacrebleu, with signatures) of a checkpoint or of a hypothesis file.

    translate-eval --checkpoint CKPT                      # the test split the checkpoint was trained with
    translate-eval --checkpoint CKPT --split dev          # its dev split
    translate-eval --checkpoint CKPT --source test.en --reference test.de --output hyp.de
    translate-eval --hypotheses hyp.de --reference test.de

Without --source and --reference, the text comes from the corpus and languages recorded in the
checkpoint (its training run's data settings), so a Spanish-English model is scored on its own
test set, never on another pair's. A checkpoint is translated with translate-cli's search
options (--beam, --length-penalty, --restrict-target, ...) and their defaults.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import json
import sys

from translate.cli.common import (
    SEARCH_FLAGS, add_search_arguments, autocast, given_flags, resolve_device, run_command, search_settings_error,
)
from translate.errors import UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", metavar="CKPT", help="translate with this checkpoint, then score")
    parser.add_argument("--hypotheses", metavar="FILE", help="score this detokenized output instead")
    parser.add_argument("--source", metavar="FILE", help="text the checkpoint translates (with --reference)")
    parser.add_argument("--reference", metavar="FILE", help="reference translations, one line per source line")
    parser.add_argument("--split", default=None,
                        help="with --checkpoint alone: which split of its corpus (default: its test split)")
    parser.add_argument("--output", metavar="FILE", help="write the checkpoint's translations here (atomically)")
    add_search_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def arguments_error(args: argparse.Namespace, argv: list[str] | None) -> str | None:
    """What the combination of flags leaves undefined or silently ignored, or None."""
    if bool(args.hypotheses) == bool(args.checkpoint):
        return "give exactly one of --checkpoint (translate, then score) or --hypotheses (score a file)"
    if args.hypotheses:
        ignored = given_flags(argv, SEARCH_FLAGS + ("--source", "--split", "--output"))
        if ignored:
            return f"{', '.join(ignored)} apply only with --checkpoint; --hypotheses is scored as it is"
        if not args.reference:
            return "--hypotheses needs --reference, the reference translations to score it against"
        return None
    if bool(args.source) != bool(args.reference):
        given, missing = ("--source", "--reference") if args.source else ("--reference", "--source")
        return (f"{given} without {missing}: give both, or neither to use the test split the checkpoint "
                "was trained with")
    if args.source and args.split:
        return "--split chooses a split of the checkpoint's own corpus; it does not apply with --source"
    return search_settings_error(args)


def checkpoint_split(translator, split: str | None) -> tuple[list[str], list[str], str]:
    """Source and reference lines of a split of the corpus the checkpoint was trained on, and
    its description; an error naming the checkpoint where that corpus is not at hand."""
    from translate.corpus import BUNDLED_CORPUS, read_split

    data = translator.data_settings()
    languages = translator.languages()
    if languages is None:
        raise UsageError(f"{translator.path} does not record the corpus and languages it was trained on: "
                         "give --source and --reference")
    split_key = f"{split or 'test'}_split"
    name = data.get(split_key) or split or "test"
    corpus = data.get("corpus_dir") or BUNDLED_CORPUS
    try:
        pairs = read_split(corpus, name, *languages, data.get("corpus_format") or "text", data.get("hf_config"))
    except UsageError as error:
        raise UsageError(f"{error} ({translator.path} was trained on this corpus; give --source and "
                         "--reference to score other text)") from None
    description = f"{languages[0]}→{languages[1]}, split '{name}' of {corpus}"
    return [src for src, _ in pairs], [tgt for _, tgt in pairs], description


def evaluate(args: argparse.Namespace, argv: list[str] | None) -> int:
    error = arguments_error(args, argv)
    if error:
        raise UsageError(error)
    from translate import checkpoint, pipeline
    from translate.corpus import read_lines
    from translate.files import check_writable, write_lines_atomic
    from translate.metrics import corpus_scores

    if args.hypotheses:
        names = (args.hypotheses, args.reference)
        scores = corpus_scores(read_lines(args.hypotheses), read_lines(args.reference), names)
        print(json.dumps(scores.__dict__, indent=2) if args.json else scores.report())
        return 0

    if args.output:
        check_writable(args.output)  # before translating, not after
    device = resolve_device(args)
    translator = checkpoint.load_translator(args.checkpoint, device)
    if args.restrict_target:
        translator.target_token_mask()  # refuse before any work if the checkpoint lacks them
    if args.source:
        sources, references = read_lines(args.source), read_lines(args.reference)
        if len(sources) != len(references):
            raise UsageError(f"--source {args.source} has {len(sources)} lines but --reference "
                             f"{args.reference} has {len(references)}: every line needs one reference")
        description = f"{args.source} against {args.reference}"
    else:
        sources, references, description = checkpoint_split(translator, args.split)
    from tqdm import tqdm

    print(f"translate-eval: {description} ({len(sources):,} lines)", file=sys.stderr)
    with tqdm(total=len(sources), unit=" lines", file=sys.stderr, mininterval=1.0) as bar:
        with autocast(device, args.precision):
            hypotheses = pipeline.translate_lines(
                translator, sources, args.batch_tokens, max_input_tokens=args.max_input_tokens,
                progress=bar.update, beam=args.beam, length_penalty=args.length_penalty,
                restrict_to_target=args.restrict_target,
            )
    if args.output:
        write_lines_atomic(args.output, hypotheses)
    scores = corpus_scores(hypotheses, references, ("the translations", args.reference or description))
    print(json.dumps(scores.__dict__, indent=2) if args.json else scores.report())
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-eval", lambda: evaluate(args, argv))


if __name__ == "__main__":
    sys.exit(main())
