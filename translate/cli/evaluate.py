"""`translate-eval`: corpus BLEU and chrF (sacrebleu, with signatures) of a hypothesis file or a checkpoint.

    translate-eval --hypotheses hyp.de --references test.de
    translate-eval --checkpoint last.ckpt                 # the bundled corpus's test split
    translate-eval --checkpoint last.ckpt --source test.en --references test.de --output hyp.de
    translate-eval --checkpoint last.ckpt --beam 1 --restrict-target

A checkpoint is translated with translate-cli's search options (--beam, --length-penalty,
--restrict-target, --batch-tokens), with the same defaults.
"""

from __future__ import annotations

import argparse
import json
import sys

from translate.checkpoint import CheckpointError, load_translator
from translate.corpus import BUNDLED_CORPUS, CorpusError, read_lines, split_paths
from translate.files import write_lines_atomic
from translate.metrics import corpus_scores
from translate.cli.translate import add_search_arguments, autocast, search_settings_error
from translate.pipeline import translate_lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hypotheses", help="detokenized system output, one line per reference")
    parser.add_argument("--checkpoint", help="translate --source with this checkpoint first")
    parser.add_argument("--source", help="source text (default: the bundled test split)")
    parser.add_argument("--references", help="raw reference text (default: the bundled test split)")
    parser.add_argument("--split", default="test", help="bundled split used by default")
    parser.add_argument("--output", help="write the checkpoint's translations here (atomically)")
    add_search_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if bool(args.hypotheses) == bool(args.checkpoint):
        print("translate-eval: error: give exactly one of --hypotheses or --checkpoint", file=sys.stderr)
        return 2
    error = search_settings_error(args)
    if error:
        print(f"translate-eval: error: {error}", file=sys.stderr)
        return 2
    bundled_src, bundled_ref = split_paths(BUNDLED_CORPUS, args.split, "en", "de")
    try:
        references = read_lines(args.references or bundled_ref)
        if args.hypotheses:
            hypotheses = read_lines(args.hypotheses)
        else:
            sources = read_lines(args.source or bundled_src)
            translator = load_translator(args.checkpoint, args.device)
            if args.restrict_target:
                translator.target_token_mask()  # refuse before any work if the checkpoint lacks them
            with autocast(args):
                hypotheses = translate_lines(
                    translator, sources, args.batch_tokens, max_input_tokens=args.max_input_tokens,
                    progress=True, beam=args.beam,
                    length_penalty=args.length_penalty, restrict_to_target=args.restrict_target,
                )
            if args.output:
                write_lines_atomic(args.output, hypotheses)
        scores = corpus_scores(hypotheses, references)
    except (CorpusError, CheckpointError, ValueError) as error:
        print(f"translate-eval: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(scores.__dict__, indent=2) if args.json else scores.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
