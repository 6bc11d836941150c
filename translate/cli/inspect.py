"""`translate-inspect CHECKPOINT`: what a checkpoint holds and which of its weights are one tensor.

Prints the parameters by component (each stored tensor counted once), the groups of modules and
tensors that share storage, the vocabulary and how many of its tokens each language uses, the
asymmetry of the direct path, the architecture and the saved run config. The checkpoint is
loaded safely (weights only) and the model rebuilt from its saved config, so the ties shown are
the ones the model really has when it translates.

    translate-inspect runs/default/checkpoints/last.ckpt
    translate-inspect last.ckpt --source-text train.en --json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

import yaml

from translate.analysis import asymmetry, direct_path, distinct_ids, parameter_counts, shared_modules, shared_tensors
from translate.checkpoint import CheckpointError, Translator, load_translator
from translate.corpus import CorpusError, read_lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-inspect", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", help="a checkpoint from translate-train")
    parser.add_argument("--source-text", help="count the tokens this source-language text uses")
    parser.add_argument("--target-text", help="count the tokens this target-language text uses "
                        "(default: the ids recorded from the training targets)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _languages(run_config: str | None) -> tuple[str, str]:
    try:
        data = (yaml.safe_load(run_config or "") or {}).get("data") or {}
    except yaml.YAMLError:
        data = {}
    return str(data.get("src_lang") or "source"), str(data.get("tgt_lang") or "target")


def report(translator: Translator, source_text: str | None = None, target_text: str | None = None) -> dict:
    """Everything `translate-inspect` shows, as plain types."""
    model, vocab = translator.model, translator.vocab
    src_lang, tgt_lang = _languages(translator.run_config)
    tokens: dict[str, dict] = {}
    if source_text:
        tokens[src_lang] = {"used": distinct_ids(vocab.source, read_lines(source_text)), "from": source_text}
    if target_text:
        tokens[tgt_lang] = {"used": distinct_ids(vocab.target, read_lines(target_text)), "from": target_text}
    elif translator.target_tokens is not None:
        tokens[tgt_lang] = {"used": len(set(translator.target_tokens)), "from": "recorded training targets"}
    return {
        "checkpoint": translator.path,
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
        "model_config": asdict(model.cfg),
        "training_config": translator.training_config,
        "run_config": translator.run_config,
    }


def format_report(info: dict) -> str:
    lines = [f"checkpoint: {info['checkpoint']}", "parameters (each stored tensor counted once):"]
    for component, count in info["parameters"].items():
        lines.append(f"  {component.replace('_', ' '):<14} {count:>14,}")
    lines.append("shared storage:")
    lines += [f"  {' = '.join(names)}" for names in info["shared_modules"]] or ["  none"]
    vocab = info["vocabulary"]
    src_lang, tgt_lang = vocab["languages"]
    if vocab["joint"]:
        lines.append(f"vocabulary: one joint SentencePiece model of {vocab['source_size']:,} pieces")
    else:
        lines.append(f"vocabulary: {src_lang} {vocab['source_size']:,} pieces, {tgt_lang} {vocab['target_size']:,} pieces")
    for lang in (src_lang, tgt_lang):
        used = vocab["tokens_used"].get(lang)
        size = vocab["source_size"] if lang == src_lang else vocab["target_size"]
        if used:
            lines.append(f"  tokens used by {lang}: {used['used']:,} of {size:,} ({used['from']})")
        else:
            option = "--source-text" if lang == src_lang else "--target-text"
            lines.append(f"  tokens used by {lang}: not recorded (give {option} to count them)")
    lines.append(f"direct path W_E A^T W_U^T: asymmetry ||M - M^T|| / ||M|| = {info['direct_path_asymmetry']:.4f}")
    lines.append("model config:")
    lines += [f"  {key}: {value}" for key, value in info["model_config"].items()]
    lines.append("run config:")
    run_config = info["run_config"]
    lines += [f"  {line}" for line in run_config.rstrip().splitlines()] if run_config else ["  (not saved)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        info = report(load_translator(args.checkpoint), args.source_text, args.target_text)
    except (CheckpointError, CorpusError) as error:
        print(f"translate-inspect: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2) if args.json else format_report(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
