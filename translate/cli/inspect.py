"""`translate-inspect --checkpoint CKPT`: what a checkpoint holds and which of its weights are one tensor.

Prints the parameters by component (each stored tensor counted once), the groups of modules and
tensors that share storage, the vocabulary and how many of its tokens each language uses, the
asymmetry of the direct path, the architecture and the saved run config. The checkpoint is
loaded safely (weights only) and the model rebuilt from its saved config, so the ties shown are
the ones the model really has when it translates.

    translate-inspect --checkpoint runs/default/checkpoints/last.ckpt
    translate-inspect --checkpoint last.ckpt --source train.en --json

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from translate.cli.common import add_checkpoint_argument, run_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-inspect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_checkpoint_argument(parser)
    parser.add_argument(
        "--source", metavar="FILE", help="count the tokens this source-language text uses"
    )
    parser.add_argument(
        "--reference",
        metavar="FILE",
        help="count the tokens this target-language text uses "
        "(default: the ids recorded from the training targets)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def report(loaded, source_text: str | None = None, target_text: str | None = None) -> dict:
    """Everything `translate-inspect` shows, as plain types, for a `LoadedModel`."""
    from translate.model.analysis import (
        asymmetry,
        direct_path,
        distinct_ids,
        parameter_counts,
        shared_modules,
        shared_tensors,
    )
    from translate.text.corpus import read_lines

    model, vocab = loaded.model, loaded.vocab
    src_lang, tgt_lang = loaded.data.languages or ("source", "target")
    tokens: dict[str, dict] = {}
    if source_text:
        tokens[src_lang] = {
            "used": distinct_ids(vocab.source, read_lines(source_text)),
            "from": source_text,
        }
    if target_text:
        tokens[tgt_lang] = {
            "used": distinct_ids(vocab.target, read_lines(target_text)),
            "from": target_text,
        }
    elif loaded.target_tokens is not None:
        tokens[tgt_lang] = {
            "used": len(set(loaded.target_tokens)),
            "from": "recorded training targets",
        }
    return {
        "checkpoint": loaded.path,
        "parameters": parameter_counts(model),
        "shared_modules": shared_modules(model),
        "shared_tensors": shared_tensors(model),
        "vocabulary": {
            "joint": vocab.joint,
            "source_size": len(vocab.source),
            "target_size": len(vocab.target),
            "languages": [src_lang, tgt_lang],
            "tokens_used": tokens,
        },
        "direct_path_asymmetry": asymmetry(direct_path(model)),
        "tie_choice": asdict(loaded.tie_choice) if loaded.tie_choice else None,
        "model_config": asdict(model.cfg),
        "training_config": loaded.training_config.to_dict(),
        "run_config": loaded.run_config,
    }


def format_report(info: dict) -> str:
    from translate.model.tying import TieChoice

    lines = [f"checkpoint: {info['checkpoint']}", "parameters (each stored tensor counted once):"]
    for component, count in info["parameters"].items():
        lines.append(f"  {component.replace('_', ' '):<14} {count:>14,}")
    lines.append("shared storage:")
    lines += [f"  {' = '.join(names)}" for names in info["shared_modules"]] or ["  none"]
    vocab = info["vocabulary"]
    src_lang, tgt_lang = vocab["languages"]
    if vocab["joint"]:
        lines.append(
            f"vocabulary: one joint SentencePiece model of {vocab['source_size']:,} pieces"
        )
    else:
        lines.append(
            f"vocabulary: {src_lang} {vocab['source_size']:,} pieces, {tgt_lang} {vocab['target_size']:,} pieces"
        )
    for lang in (src_lang, tgt_lang):
        used = vocab["tokens_used"].get(lang)
        size = vocab["source_size"] if lang == src_lang else vocab["target_size"]
        if used:
            lines.append(f"  tokens used by {lang}: {used['used']:,} of {size:,} ({used['from']})")
        else:
            option = "--source" if lang == src_lang else "--reference"
            lines.append(f"  tokens used by {lang}: not recorded (give {option} to count them)")
    lines.append(
        f"direct path W_E A^T W_U^T: asymmetry ||M - M^T|| / ||M|| = {info['direct_path_asymmetry']:.4f}"
    )
    choice = info["tie_choice"]
    lines.append(
        f"tie: {TieChoice(**choice).describe()}"
        if choice
        else f"tie: tie_embeddings {info['model_config']['tie_embeddings']} (how it was chosen: "
        "not saved)"
    )
    lines.append("model config:")
    lines += [f"  {key}: {value}" for key, value in info["model_config"].items()]
    lines.append("run config:")
    run_config = info["run_config"]
    lines += (
        [f"  {line}" for line in run_config.rstrip().splitlines()]
        if run_config
        else ["  (not saved)"]
    )
    return "\n".join(lines)


def inspect(args: argparse.Namespace) -> int:
    from translate.decode.loaded_model import load_model

    info = report(load_model(args.checkpoint), args.source, args.reference)
    print(json.dumps(info, indent=2) if args.json else format_report(info))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-inspect", lambda: inspect(args))


if __name__ == "__main__":
    sys.exit(main())
