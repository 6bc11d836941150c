"""`translate-eval`: corpus BLEU and chrF (sacrebleu, with signatures) of a checkpoint or of a hypothesis file.

    translate-eval --checkpoint CKPT                      # the test split the checkpoint was trained with
    translate-eval --checkpoint CKPT --split dev          # its dev split
    translate-eval --checkpoint CKPT --source test.en --reference test.de --output hyp.de
    translate-eval --hypotheses hyp.de --reference test.de [--target-lang de]
    translate-eval --checkpoint MANY --directions en-de de-fr ja-zh-CN   # a many-to-many model

Without --source and --reference, the text comes from the corpus and languages recorded in the
checkpoint (its training run's data settings), so a Spanish-English model is scored on its own
test set, never on another pair's. A many-to-many model is scored on every direction it was
trained on (or those --directions names, zero-shot ones too), one row each, with the
off-target rate: the share of outputs a language identifier finds in another of its languages.
BLEU tokenizes as the target language needs (zh for Chinese, ja-mecab, ko-mecab, else 13a).
A checkpoint is translated with translate-cli's search options (--beam, --length-penalty,
--restrict-target, ...) and their defaults.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from translate.cli.common import (
    SEARCH_FLAGS,
    add_language_arguments,
    add_search_arguments,
    given_flags,
    resolve_device,
    run_command,
)
from translate.decode.device import autocast, prepare_decoding
from translate.decode.settings import SearchSettings, apply_search_defaults, search_settings_error
from translate.errors import UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint", metavar="CKPT", help="translate with this checkpoint, then score"
    )
    parser.add_argument(
        "--hypotheses", metavar="FILE", help="score this detokenized output instead"
    )
    parser.add_argument(
        "--source", metavar="FILE", help="text the checkpoint translates (with --reference)"
    )
    parser.add_argument(
        "--reference", metavar="FILE", help="reference translations, one line per source line"
    )
    parser.add_argument(
        "--split",
        default=None,
        help="with --checkpoint alone: which split of its corpus (default: its test split)",
    )
    parser.add_argument(
        "--directions",
        nargs="+",
        metavar="SRC-TGT",
        help="with --checkpoint alone, a many-to-many model: the directions to score "
        "(default: those it was trained on)",
    )
    parser.add_argument(
        "--output", metavar="FILE", help="write the checkpoint's translations here (atomically)"
    )
    add_search_arguments(parser)
    add_language_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def arguments_error(args: argparse.Namespace, argv: list[str] | None) -> str | None:
    """What the combination of flags leaves undefined or silently ignored, or None."""
    if bool(args.hypotheses) == bool(args.checkpoint):
        return "give exactly one of --checkpoint (translate, then score) or --hypotheses (score a file)"
    if args.hypotheses:
        ignored = given_flags(
            argv,
            SEARCH_FLAGS + ("--source", "--split", "--output", "--directions", "--source-lang"),
        )
        if ignored:
            return f"{', '.join(ignored)} apply only with --checkpoint; --hypotheses is scored as it is"
        if not args.reference:
            return "--hypotheses needs --reference, the reference translations to score it against"
        return None
    if bool(args.source) != bool(args.reference):
        given, missing = ("--source", "--reference") if args.source else ("--reference", "--source")
        return (
            f"{given} without {missing}: give both, or neither to use the test split the checkpoint "
            "was trained with"
        )
    if args.source and args.split:
        return "--split chooses a split of the checkpoint's own corpus; it does not apply with --source"
    if args.source and args.directions:
        return "--directions chooses directions of the checkpoint's own corpus; with --source give --target-lang"
    if args.directions and (args.target_lang or args.source_lang):
        return "--directions names the languages; --target-lang and --source-lang go with --source"
    if args.output and args.directions and len(args.directions) > 1:
        return "--output writes one direction's translations: give one of --directions, or --source"
    return search_settings_error(args)


def scored_directions(translator, args: argparse.Namespace) -> list[tuple[str, str]]:
    """The directions `--checkpoint` alone scores: the trained ones, or those --directions names."""
    from translate.text.languages import parse_direction

    trained = translator.directions()
    if not trained:
        raise UsageError(
            f"{translator.path} does not record the corpus and languages it was trained on: "
            "give --source and --reference"
        )
    if not args.directions:
        return trained
    known = sorted({lang for direction in trained for lang in direction})
    try:
        return [parse_direction(text, known) for text in args.directions]
    except ValueError as error:
        raise UsageError(f"--directions: {error}") from None


def translate(
    translator,
    sources: list[str],
    args,
    device: str,
    target_lang: str | None,
    source_lang: str | None,
) -> list[str]:
    from tqdm import tqdm

    from translate.decode import pipeline

    with tqdm(total=len(sources), unit=" lines", file=sys.stderr, mininterval=1.0) as bar:
        with autocast(device, args.precision):
            return pipeline.translate_lines(
                translator,
                sources,
                replace(
                    SearchSettings.from_args(args), target_lang=target_lang, source_lang=source_lang
                ),
                batch_tokens=args.batch_tokens,
                progress=bar.update,
            )


def score_row(translator, direction, hypotheses, references, description) -> dict:
    """One direction's scores, with the off-target rate for a many-to-many model."""
    from translate.text.metrics import corpus_scores

    scores = corpus_scores(
        hypotheses, references, ("the translations", description), target_lang=direction[1]
    )
    trained = (
        direction[0] == "?" or tuple(direction) in translator.directions()
    )  # "?": the source language not given
    row = {
        "direction": f"{direction[0]}-{direction[1]}",
        "trained": trained,
        "lines": len(references),
        **scores.__dict__,
    }
    if translator.multilingual():
        from translate.text.language_id import off_target_rate

        row["off_target"] = off_target_rate(hypotheses, direction[1], translator.target_languages())
    return row


def report(rows: list[dict]) -> str:
    if len(rows) == 1 and "off_target" not in rows[0]:
        row = rows[0]
        return (
            f"BLEU {row['bleu']:.2f}  ({row['bleu_detail']})\n  signature: {row['bleu_signature']}\n"
            f"chrF2 {row['chrf']:.2f}\n  signature: {row['chrf_signature']}"
        )
    lines = ["| direction | lines | BLEU | chrF2 | off-target |", "|---|---:|---:|---:|---:|"]
    for row in rows:
        note = "" if row["trained"] else " (zero-shot)"
        off = f"{100 * row['off_target']:.1f}%" if "off_target" in row else ""
        lines.append(
            f"| {row['direction']}{note} | {row['lines']:,} | {row['bleu']:.2f} | {row['chrf']:.2f} | {off} |"
        )
    signatures = dict.fromkeys(
        s for row in rows for s in (row["bleu_signature"], row["chrf_signature"])
    )
    return "\n".join(lines + ["", "Signatures: " + ", ".join(f"`{s}`" for s in signatures)])


def evaluate(args: argparse.Namespace, argv: list[str] | None) -> int:
    error = arguments_error(args, argv)
    if error:
        raise UsageError(error)
    from translate.decode import pipeline
    from translate.decode.translator import load_translator
    from translate.files import check_writable, write_lines_atomic
    from translate.text.corpus import read_lines
    from translate.text.metrics import corpus_scores

    if args.hypotheses:
        names = (args.hypotheses, args.reference)
        scores = corpus_scores(
            read_lines(args.hypotheses),
            read_lines(args.reference),
            names,
            target_lang=args.target_lang,
        )
        print(json.dumps(scores.__dict__, indent=2) if args.json else scores.report())
        return 0

    if args.output:
        check_writable(args.output)  # before translating, not after
    device = resolve_device(args)
    prepare_decoding(device)
    translator = load_translator(args.checkpoint, device, quantize=args.quantize)
    apply_search_defaults(args, translator)
    if args.source:
        direction = pipeline.direction_for(
            translator, args.target_lang, args.source_lang
        )  # refuse before any work
        if args.restrict_target:
            translator.target_token_mask(direction.target_lang)
        sources, references = read_lines(args.source), read_lines(args.reference)
        if len(sources) != len(references):
            raise UsageError(
                f"--source {args.source} has {len(sources)} lines but --reference "
                f"{args.reference} has {len(references)}: every line needs one reference"
            )
        pair = (
            (args.source_lang or "?", direction.target_lang)
            if direction.target_lang
            else translator.languages()
        )
        jobs = [
            (pair or ("?", None), sources, references, f"{args.source} against {args.reference}")
        ]
    else:
        jobs = [
            (direction, *translator.corpus_split(args.split, direction))
            for direction in scored_directions(translator, args)
        ]
    if args.restrict_target:
        for direction, *_ in jobs:
            translator.target_token_mask(direction[1] if translator.multilingual() else None)
    rows = []
    for direction, sources, references, description in jobs:
        print(f"translate-eval: {description} ({len(sources):,} lines)", file=sys.stderr)
        multilingual = translator.multilingual()
        hypotheses = translate(
            translator,
            sources,
            args,
            device,
            direction[1] if multilingual else None,
            direction[0] if multilingual and direction[0] != "?" else None,
        )
        if args.output:
            write_lines_atomic(args.output, hypotheses)
        rows.append(score_row(translator, direction, hypotheses, references, description))
    print(json.dumps(rows if len(rows) > 1 else rows[0], indent=2) if args.json else report(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-eval", lambda: evaluate(args, argv))


if __name__ == "__main__":
    sys.exit(main())
