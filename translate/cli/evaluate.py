"""`translate-eval`: sacrebleu scores (with signatures) of a checkpoint or a hypothesis file, and
paired significance tests between systems.

    translate-eval --checkpoint CKPT                      # the test split the checkpoint was trained with
    translate-eval --checkpoint CKPT --split dev          # its dev split
    translate-eval --checkpoint CKPT --test-set wmt14 [--language-pair en-de]   # a public test set
    translate-eval --checkpoint CKPT --source test.en --reference test.de [--reference test2.de]
    translate-eval --hypotheses hyp.de --reference test.de [--target-lang de]
    translate-eval --checkpoint MANY --directions en-de de-fr ja-zh-CN   # a many-to-many model
    translate-eval --compare BASE.ckpt NEW.ckpt hyp.de --test-set wmt14   # the first is the baseline
    ... --metrics bleu,chrf,chrf++,ter --sentence-scores scores.jsonl --plot by-length.png
    translate-eval --checkpoint CKPT --confidence          # how far the confidences follow chrF

Without --source, --reference or --test-set, the text comes from the corpus and languages
recorded in the checkpoint (its training run's data settings), so a Spanish-English model is
scored on its own test set, never on another pair's. A many-to-many model is scored on every
direction it was trained on (or those --directions names, zero-shot ones too), one row each,
with the off-target rate: the share of outputs a language identifier finds in another of its
languages. BLEU tokenizes as the target language needs (zh for Chinese, ja-mecab, ko-mecab,
else 13a). A checkpoint is translated with translate-cli's search options (--beam,
--length-penalty, --restrict-target, ...) and, where not given, each checkpoint's own defaults.

--test-set names any test set sacrebleu knows (`sacrebleu --list`); sacrebleu downloads it once
into its cache ($SACREBLEU, else ~/.sacrebleu). --compare takes checkpoints (translated first)
and hypothesis files alike, and tests each against the first with sacrebleu's paired bootstrap
resampling (1,000 resamples) and approximate randomization (10,000 trials), seed 12345.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from typing import TYPE_CHECKING

from translate.cli.common import (
    SEARCH_FLAGS,
    add_language_arguments,
    add_search_arguments,
    apply_search_defaults,
    given_flags,
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
from translate.errors import UsageError

if TYPE_CHECKING:
    from translate.decode.evaluation import TextChoice
    from translate.score.scored_text import ScoredText


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
        "--compare",
        nargs="+",
        metavar="SYSTEM",
        help="two or more checkpoints or hypothesis files, scored on the same references and "
        "tested against the first (the baseline)",
    )
    parser.add_argument(
        "--source", metavar="FILE", help="text the checkpoint translates (with --reference)"
    )
    parser.add_argument(
        "--reference",
        action="append",
        metavar="FILE",
        help="reference translations, one line per source line; repeat for several references",
    )
    parser.add_argument(
        "--test-set",
        metavar="NAME",
        help="a test set sacrebleu knows (wmt14, flores200, ...), instead of --source/--reference",
    )
    parser.add_argument(
        "--language-pair",
        metavar="SRC-TGT",
        help="with --test-set: its pair as sacrebleu writes it (default: the checkpoint's languages)",
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
    parser.add_argument(
        "--metrics",
        default="bleu,chrf",
        help="comma-separated, of bleu, chrf, chrf++, ter, copy (protected tokens kept: numbers, "
        "placeholders, URLs, ...; needs the source), digits (the source's digit runs kept; needs "
        "the source), terms (the --glossary's target terms used for the source's; needs the "
        "source) (default: bleu,chrf)",
    )
    parser.add_argument(
        "--sentence-scores",
        metavar="FILE",
        help="write each line's source, hypothesis, reference and sentence BLEU and chrF as JSONL",
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw BLEU by source length for each system"
    )
    parser.add_argument(
        "--confidence",
        action="store_true",
        help="with --checkpoint: how well each translation's confidence (translate-cli --scores) "
        "follows its sentence chrF: Pearson's and Spearman's correlations, and the translations "
        "under chrF 30 that a threshold flags",
    )
    add_search_arguments(parser)
    add_language_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def arguments_error(args: argparse.Namespace, argv: list[str] | None) -> str | None:
    """What the combination of flags leaves undefined or silently ignored, or None."""
    if sum(bool(x) for x in (args.checkpoint, args.hypotheses, args.compare)) != 1:
        return (
            "give exactly one of --checkpoint (translate, then score), --hypotheses (score a "
            "file) or --compare (test systems against the first)"
        )
    if args.compare and len(args.compare) < 2:
        return (
            "--compare needs two or more systems: the baseline first, then those tested against it"
        )
    if args.compare and len(set(args.compare)) != len(args.compare):
        return "--compare names a system twice: give each checkpoint or file once"
    if args.confidence and not args.checkpoint:
        return "--confidence reads the search's confidences: give it with --checkpoint"
    if args.compare and (args.output or args.sentence_scores):
        flag = "--output" if args.output else "--sentence-scores"
        return f"{flag} writes one system's lines: give it with --checkpoint or --hypotheses"
    if args.plot and args.reference and not args.source:
        return "--plot groups lines by source length: give --source (or --test-set)"
    if args.language_pair and not args.test_set:
        return "--language-pair chooses the pair of a --test-set; with files give --target-lang"
    if args.test_set:
        clashing = given_flags(argv, ("--source", "--reference", "--split", "--directions"))
        if clashing:
            return (
                f"--test-set brings its own source and references; leave out {', '.join(clashing)}"
            )
    if args.hypotheses:
        searched = tuple(flag for flag in SEARCH_FLAGS if flag != "--glossary")
        ignored = given_flags(
            argv, searched + ("--split", "--output", "--directions", "--source-lang")
        )
        if ignored:
            return f"{', '.join(ignored)} apply only with --checkpoint; --hypotheses is scored as it is"
        if args.glossary_file and "terms" not in args.metrics.split(","):
            return "--glossary with --hypotheses is for --metrics terms: add terms to --metrics"
        if not (args.reference or args.test_set):
            return "--hypotheses needs --reference (or --test-set), the translations to score it against"
        return None
    if args.checkpoint and bool(args.source) != bool(args.reference):
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
    if one_direction_flag(args) and args.directions and len(args.directions) > 1:
        return f"{one_direction_flag(args)} is for one direction: give one of --directions, or --source"
    return search_settings_error(args)


def one_direction_flag(args: argparse.Namespace) -> str | None:
    """The first given flag that writes one direction's lines."""
    given = {
        "--output": args.output,
        "--sentence-scores": args.sentence_scores,
        "--plot": args.plot,
    }
    return next((flag for flag, value in given.items() if value), None)


def parse_metrics(text: str) -> tuple[str, ...]:
    """`--metrics bleu,chrf++` → ("bleu", "chrf++"); a UsageError names an unknown one."""
    from translate.score.metrics import METRICS

    names = tuple(dict.fromkeys(name.strip().lower() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in METRICS]
    if unknown or not names:
        raise UsageError(
            f"--metrics {text!r}: {'unknown ' + ', '.join(unknown) if unknown else 'no metric'}; "
            f"choose from {','.join(METRICS)}"
        )
    return names


def text_choice(args: argparse.Namespace) -> TextChoice:
    from translate.decode.evaluation import TextChoice

    return TextChoice(
        test_set=args.test_set,
        language_pair=args.language_pair,
        source=args.source,
        references=tuple(args.reference or ()),
        split=args.split,
        directions=tuple(args.directions or ()),
        source_lang=args.source_lang,
        target_lang=args.target_lang,
    )


def hypotheses_text(args: argparse.Namespace) -> ScoredText:
    """What a hypothesis file is scored on: a test set in --language-pair, or given files."""
    from translate.score.scored_text import UNKNOWN, files_text, test_set_text

    if args.test_set:
        if not args.language_pair:
            raise UsageError(
                f"--test-set {args.test_set}: give --language-pair, the pair of the hypotheses"
            )
        return test_set_text(args.test_set, args.language_pair)
    direction = (args.source_lang or UNKNOWN, args.target_lang)
    return files_text(args.source, args.reference, direction)


def translate(loaded, text: ScoredText, args, device: str) -> list:
    """The checkpoint's translations of the text (`pipeline.Translation`s) under the search flags
    and its own defaults, with a progress bar."""
    from tqdm import tqdm

    from translate.decode.evaluation import direction_settings, translate_text
    from translate.decode.pipeline import target_tags_for

    settings = direction_settings(loaded, text, SearchSettings.from_args(args))
    tags = target_tags_for(loaded, settings.target_lang, settings.source_lang)
    zero_shot_warning(args.checkpoint, settings.source_lang, tags)
    with tqdm(total=len(text.sources), unit=" lines", file=sys.stderr, mininterval=1.0) as bar:
        with autocast(device, args.precision):
            return translate_text(
                loaded,
                text,
                settings,
                args.batch_tokens,
                progress=bar.update,
                on_split=split_line_warning,
            )


def write_extras(
    args: argparse.Namespace, text: ScoredText, systems: list[tuple[str, list[str]]], metrics
) -> None:
    """--sentence-scores (one system) and --plot (every system), atomically."""
    from translate.files import write_atomic, write_lines_atomic

    if args.sentence_scores:
        from translate.score.sentences import sentence_records

        records = sentence_records(
            text.sources,
            systems[0][1],
            text.references,
            tuple(dict.fromkeys(("bleu", "chrf", *metrics))),
            text.target_lang,
            text.glossary,
        )
        write_lines_atomic(args.sentence_scores, records)
        print(f"translate-eval: sentence scores in {args.sentence_scores}", file=sys.stderr)
    if args.plot:
        from translate.score.plot import length_plot

        if text.sources is None:
            raise UsageError("--plot groups lines by source length: give --source (or --test-set)")
        write_atomic(
            args.plot, length_plot(text.sources, systems, text.references, text.target_lang)
        )
        print(f"translate-eval: BLEU by source length in {args.plot}", file=sys.stderr)


def check_outputs(args: argparse.Namespace) -> None:
    """Every file asked for can be written, before any translating."""
    from translate.files import check_writable

    for path in (args.output, args.sentence_scores, args.plot):
        if path:
            check_writable(path)


def with_glossary(text: ScoredText, args: argparse.Namespace) -> ScoredText:
    """`text` with `--glossary`, whose terms `--metrics terms` counts."""
    from dataclasses import replace

    from translate.text.glossary import Glossary

    glossary = Glossary.read(args.glossary_file) if args.glossary_file else None
    return replace(text, glossary=glossary)


def score_hypotheses(args: argparse.Namespace, metrics: tuple[str, ...]) -> int:
    from translate.score.scored_text import DirectionScores, scores_table
    from translate.text.corpus import read_lines

    check_outputs(args)
    text = with_glossary(hypotheses_text(args), args)
    hypotheses = read_lines(args.hypotheses)
    row = DirectionScores.of(text, hypotheses, metrics, args.hypotheses)
    write_extras(args, text, [(args.hypotheses, hypotheses)], metrics)
    print(json.dumps(row.to_json(), indent=2) if args.json else scores_table([row], metrics))
    return 0


def score_checkpoint(args: argparse.Namespace, metrics: tuple[str, ...]) -> int:
    from translate.decode.evaluation import checkpoint_scores, checkpoint_texts
    from translate.files import write_lines_atomic
    from translate.score.scored_text import scores_table

    check_outputs(args)
    device = resolve_device(args)
    prepare_decoding(device)
    loaded = load_for_search("translate-eval", args, args.checkpoint, device)
    apply_search_defaults(args, loaded)
    texts = [with_glossary(text, args) for text in checkpoint_texts(loaded, text_choice(args))]
    if len(texts) > 1 and one_direction_flag(args):
        raise UsageError(
            f"{one_direction_flag(args)} is for one direction and {args.checkpoint} was trained on "
            f"{len(texts)}: give one of --directions"
        )
    rows, reports = [], []
    for text in texts:
        print(f"translate-eval: {text.description} ({len(text.sources):,} lines)", file=sys.stderr)
        translations = translate(loaded, text, args, device)
        hypotheses = [found.text for found in translations]
        if args.output:
            write_lines_atomic(args.output, hypotheses)
        rows.append(checkpoint_scores(loaded, text, hypotheses, metrics))
        write_extras(args, text, [(args.checkpoint, hypotheses)], metrics)
        if args.confidence:
            reports.append(confidence_of(text, translations))
    handed_back_note("translate-eval", loaded)
    shown = [row.to_json() for row in rows]
    for row, report in zip(shown, reports):
        row["confidence"] = report.to_json()
    if args.json:
        print(json.dumps(shown if len(rows) > 1 else shown[0], indent=2))
    else:
        print(scores_table(rows, metrics))
        for row, report in zip(rows, reports):
            print(f"{row.direction}: {report.summary()}" if len(rows) > 1 else report.summary())
    return 0


def confidence_of(text: ScoredText, translations: list):
    """The confidence report (`score.confidence`) of a checkpoint's `translations` of `text`."""
    from translate.score.confidence import confidence_report

    try:
        return confidence_report(
            [found.confidence for found in translations],
            [found.text for found in translations],
            text.references,
            text.sources,
            text.target_lang,
        )
    except ValueError as error:
        raise UsageError(f"--confidence on {text.description}: {error}") from None


def is_checkpoint(path: str) -> bool:
    """translate-train's checkpoints are zip archives (torch.save); hypotheses are text."""
    import zipfile
    from pathlib import Path

    if not Path(path).is_file():
        raise UsageError(f"--compare {path}: no such file")
    return zipfile.is_zipfile(path)


def compare_systems(args: argparse.Namespace, metrics: tuple[str, ...]) -> int:
    """Each system's hypotheses (checkpoints translated in turn, each with its own search
    defaults), then sacrebleu's paired tests against the first."""
    from translate.decode.evaluation import checkpoint_texts
    from translate.score.metrics import SOURCE_METRICS, check_references
    from translate.score.significance import compare
    from translate.text.corpus import read_lines

    check_outputs(args)
    for metric in SOURCE_METRICS:
        if metric in metrics:
            raise UsageError(
                f"--metrics {metric} is not one of the paired tests' metrics: score each system "
                f"with --metrics {metric} on its own, and compare with bleu,chrf,chrf++,ter"
            )
    kinds = {path: is_checkpoint(path) for path in args.compare}
    checkpoints = [path for path in args.compare if kinds[path]]
    text = None
    if not checkpoints and (args.test_set or args.reference):
        text = hypotheses_text(args)
    elif checkpoints and args.reference and not args.source:
        raise UsageError(
            f"--compare translates {checkpoints[0]}: give --source with --reference (or --test-set)"
        )
    if not checkpoints and text is None:
        raise UsageError("--compare of hypothesis files needs --reference (or --test-set)")
    device = resolve_device(args) if checkpoints else "cpu"
    if checkpoints:
        prepare_decoding(device)
    systems = []
    for path in args.compare:
        if not kinds[path]:
            systems.append((path, read_lines(path)))
            continue
        loaded = load_for_search("translate-eval", args, path, device)
        system_args = copy.copy(args)  # each checkpoint's own tuned beam and length penalty
        apply_search_defaults(system_args, loaded)
        if text is None:
            texts = checkpoint_texts(loaded, text_choice(system_args))
            if len(texts) > 1:
                raise UsageError(
                    f"--compare scores one direction; {path} has {len(texts)}: give one of --directions"
                )
            text = texts[0]
        print(
            f"translate-eval: {path} on {text.description} ({len(text.sources):,} lines)",
            file=sys.stderr,
        )
        translations = translate(loaded, text, system_args, device)
        systems.append((path, [found.text for found in translations]))
    for name, hypotheses in systems:
        check_references(hypotheses, text.references, (name, text.reference_names))
    print(
        f"translate-eval: paired tests of {len(systems) - 1} system(s) against {systems[0][0]}",
        file=sys.stderr,
    )
    comparison = compare(systems, text.references, metrics, text.target_lang, text.reference_names)
    write_extras(args, text, systems, metrics)
    print(comparison.to_json() if args.json else comparison.table())
    return 0


def evaluate(args: argparse.Namespace, argv: list[str] | None) -> int:
    error = arguments_error(args, argv)
    if error:
        raise UsageError(error)
    metrics = parse_metrics(args.metrics)
    if args.compare:
        return compare_systems(args, metrics)
    if args.hypotheses:
        return score_hypotheses(args, metrics)
    return score_checkpoint(args, metrics)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-eval", lambda: evaluate(args, argv))


if __name__ == "__main__":
    sys.exit(main())
