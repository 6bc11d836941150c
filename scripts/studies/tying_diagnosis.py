#!/usr/bin/env python3
"""Why the three-way tie hurts into some languages: the distant study's runs taken apart.

    python scripts/studies/tying_diagnosis.py --study runs/distant-study-1250 [--langs ja zh-CN]

For each language of a finished distant study (`scripts/studies/distant_study.py`):

- the joint vocabulary's split: pieces used only by the English side, only by the target side,
  by both, and each side's token mass on the pieces both use; the shared mass (the sum over
  pieces of the smaller of the two sides' shares, `translate.text.vocab_overlap`);
- fertility: pieces per 100 characters of each side's training text under the joint vocabulary
  and under one of the same size trained on that side alone;
- where the test loss is (teacher-forced on the references, no smoothing): the mean loss of the
  reference tokens of each piece class and of each frequency band, untied (`none`) against
  three-way tied (`all`), seed by seed;
- what greedy search makes of it: the output's length against the reference's, and how often
  an output repeats the piece before it or a piece 4-gram it already wrote.

Writes OUT/diagnosis.md and OUT/diagnosis.json (OUT: the study directory) atomically.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import yaml

from translate.files import write_atomic

# Target-piece frequency bands, by occurrences in the target side of the training data.
BANDS = ((0, 10), (10, 100), (100, 1000), (1000, None))


def characters(lines: list[str]) -> int:
    return sum(len(line) - line.count(" ") for line in lines)


def fertility(vocab, lines: list[str]) -> float:
    """Pieces per 100 characters (spaces not counted)."""
    return 100 * sum(len(ids) for ids in vocab.encode(lines)) / max(characters(lines), 1)


def vocabulary_split(data_config: dict, data_dir: Path, lang: str) -> dict:
    from translate.text.corpus import read_lines
    from translate.text.protected import SENTINEL_PIECES
    from translate.text.vocab import train_sentencepiece
    from translate.text.vocab_overlap import PieceClass, PieceUse, ignored_pieces
    from translate.train.data_module import TranslationDataModule

    data = TranslationDataModule(**data_config)
    vocab = data.vocab.target
    source, target = read_lines(data_dir / "train.en"), read_lines(data_dir / f"train.{lang}")
    use = PieceUse.count(
        zip(vocab.encode(source), vocab.encode(target)),
        len(vocab),
        ignored_pieces(vocab, SENTINEL_PIECES),
    )
    classes = use.classes()
    alone = {
        side: train_sentencepiece(
            text,
            data_config["vocab_size"],
            character_coverage=data_config.get("character_coverage", 1.0),
            split_digits=data_config.get("split_digits", False),
        )
        for side, text in (("source", source), ("target", target))
    }
    return {
        "lang": lang,
        "pieces": {c.name.lower(): int((classes == c).sum()) for c in PieceClass},
        "source_mass_on_both": use.mass_on(PieceClass.BOTH)[0],
        "target_mass_on_both": use.mass_on(PieceClass.BOTH)[1],
        "shared_mass": use.shared_mass(),
        # what tie_embeddings auto sees: the training pairs as encoded for training (length
        # filter applied, protected spans masked in the pairs protection draws)
        "training_shared_mass": data.piece_use.shared_mass(),
        "fertility": {
            "source_joint": fertility(vocab, source),
            "source_alone": fertility(alone["source"], source),
            "target_joint": fertility(vocab, target),
            "target_alone": fertility(alone["target"], target),
        },
        "classes": classes,
        "target_counts": use.target,
    }


def reference_losses(loaded, sources: list[str], references: list[str], batch: int = 64):
    """(piece id, loss) of every reference token, EOS included, teacher-forced."""
    import torch

    from translate.train.collate import collate

    ids, losses = [], []
    with torch.inference_mode():
        for start in range(0, len(sources), batch):
            src = loaded.vocab.source.encode(sources[start : start + batch])
            tgt = loaded.vocab.target.encode(references[start : start + batch])
            padded = collate(
                [(np.array(s[:250]), np.array(t[:250]), None) for s, t in zip(src, tgt)]
            )
            logits = loaded.model(padded["src"], padded["tgt_in"], 0).float()
            nll = torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), padded["tgt_out"], reduction="none"
            )
            real = padded["tgt_out"] != 0
            ids.append(padded["tgt_out"][real].numpy())
            losses.append(nll[real].numpy())
    return np.concatenate(ids), np.concatenate(losses)


def repetition(vocab, hypotheses: list[str]) -> dict:
    """The share of output pieces equal to the piece before, and of outputs that write a piece
    4-gram twice."""
    repeats = pieces = looping = 0
    for ids in vocab.encode(hypotheses):
        pieces += len(ids)
        repeats += sum(a == b for a, b in zip(ids, ids[1:]))
        grams = [tuple(ids[i : i + 4]) for i in range(len(ids) - 3)]
        looping += len(grams) != len(set(grams))
    return {
        "repeated_piece": repeats / max(pieces, 1),
        "repeated_4gram_outputs": looping / max(len(hypotheses), 1),
    }


def run_measures(run_dir: Path, lang: str, split: dict, sources, references) -> dict:
    import torch

    from translate.decode.loaded_model import load_model
    from translate.model.analysis import direct_path, self_preference
    from translate.text.corpus import read_lines
    from translate.text.vocab_overlap import PieceClass

    loaded = load_model(run_dir / "checkpoints" / "last.ckpt")
    used = torch.from_numpy(np.flatnonzero(split["target_counts"]))
    ids, losses = reference_losses(loaded, sources, references)
    classes, counts = split["classes"][ids], split["target_counts"][ids]
    by_class = {
        c.name.lower(): (float(losses[classes == c].sum()), int((classes == c).sum()))
        for c in (PieceClass.TARGET_ONLY, PieceClass.BOTH, PieceClass.UNUSED)
    }
    by_band = {}
    for low, high in BANDS:
        chosen = (counts >= low) & (counts < high if high else True)
        chosen &= ids > 3  # EOS apart
        by_band[f"{low}-{high or ''}"] = (float(losses[chosen].sum()), int(chosen.sum()))
    eos = ids == 3
    by_class["eos"] = (float(losses[eos].sum()), int(eos.sum()))
    hypotheses = read_lines(run_dir / f"test.{lang}.hyp")
    return {
        "loss": float(losses.mean()),
        "tokens": len(losses),
        "by_class": by_class,
        "by_band": by_band,
        "length_ratio": characters(hypotheses) / max(characters(references), 1),
        "self_preference": self_preference(direct_path(loaded.model), used),
        **repetition(loaded.vocab.target, hypotheses),
        "reference": repetition(loaded.vocab.target, references),
    }


def tie_change(runs: dict, lang: str, seeds: list[int], piece_class: str | None) -> float:
    """The mean over seeds of the tied run's summed test loss minus the untied run's, over the
    tokens of one class (None: all)."""

    def total(measures: dict) -> float:
        by_class = measures["by_class"]
        return (
            sum(v[0] for v in by_class.values())
            if piece_class is None
            else by_class[piece_class][0]
        )

    return statistics.mean(
        total(runs[(lang, s, "all")]) - total(runs[(lang, s, "none")]) for s in seeds
    )


def markdown(splits: list[dict], runs: dict) -> str:
    lines = [
        "| language | pieces: English only | target only | both | unused | English mass on shared | "
        "target mass on shared | shared mass | shared mass as trained | English fertility joint / alone | target fertility joint / alone |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in splits:
        p, f = s["pieces"], s["fertility"]
        lines.append(
            f"| {s['lang']} | {p['source_only']:,} | {p['target_only']:,} | {p['both']:,} | "
            f"{p['unused']:,} | {s['source_mass_on_both']:.1%} | {s['target_mass_on_both']:.1%} | "
            f"{s['shared_mass']:.3f} | {s['training_shared_mass']:.3f} | {f['source_joint']:.1f} / {f['source_alone']:.1f} | "
            f"{f['target_joint']:.1f} / {f['target_alone']:.1f} |"
        )
    lines += [
        "",
        "Fertility: pieces per 100 characters (spaces not counted) of the training text, under "
        "the joint vocabulary and under a vocabulary of the same size trained on that side alone.",
        "",
        "| language | seed | cell | test loss | target-only pieces | shared pieces | EOS | "
        "rare (<10) | 10-99 | 100-999 | frequent | output/reference length | repeated piece | "
        "outputs repeating a 4-gram | direct path prefers the token itself |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def mean(pair):
        total, count = pair
        return f"{total / count:.3f} ({count:,})" if count else "–"

    for (lang, seed, cell), m in sorted(runs.items()):
        c, b = m["by_class"], m["by_band"]
        lines.append(
            f"| {lang} | {seed} | {cell} | {m['loss']:.3f} | {mean(c['target_only'])} | "
            f"{mean(c['both'])} | {mean(c['eos'])} | "
            + " | ".join(mean(v) for v in b.values())
            + f" | {m['length_ratio']:.3f} | {m['repeated_piece']:.2%} | "
            f"{m['repeated_4gram_outputs']:.1%} | {m['self_preference']:.1%} |"
        )
    for lang in sorted({k[0] for k in runs}):
        reference = next(m["reference"] for k, m in runs.items() if k[0] == lang)
        lines.append(
            f"| {lang} | | references | | | | | | | | | 1.000 | "
            f"{reference['repeated_piece']:.2%} | {reference['repeated_4gram_outputs']:.1%} | |"
        )
    lines += [
        "",
        "Test loss: mean cross-entropy (nats) of the reference tokens, teacher-forced; in "
        "brackets the tokens of each class. Frequency bands count a piece's occurrences on the "
        "target side of the training data. Repeated piece: the share of output pieces equal to "
        "the piece before; direct path: the share of the target's pieces whose row of "
        "W_E W_U^T is largest on the piece itself (`translate.model.analysis.self_preference`).",
    ]
    lines += [
        "",
        "The tie's change of the summed test loss (all - none), by class, mean over seeds:",
        "",
    ]
    lines += [
        "| language | total | target-only pieces | shared pieces | EOS |",
        "|---|---|---|---|---|",
    ]
    for lang in sorted({k[0] for k in runs}):
        seeds = sorted(
            {
                k[1]
                for k in runs
                if k[0] == lang and (k[0], k[1], "none") in runs and (k[0], k[1], "all") in runs
            }
        )
        if not seeds:
            continue

        lines.append(
            f"| {lang} | {tie_change(runs, lang, seeds, None):+,.0f} | "
            f"{tie_change(runs, lang, seeds, 'target_only'):+,.0f} | "
            f"{tie_change(runs, lang, seeds, 'both'):+,.0f} | "
            f"{tie_change(runs, lang, seeds, 'eos'):+,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--study", type=Path, required=True, help="a distant study's --out")
    parser.add_argument("--langs", nargs="+", default=["de", "ru", "ja", "zh-CN"])
    parser.add_argument("--cells", nargs="+", default=["none", "all"])
    parser.add_argument("--cache-dir", default=None, help="the study's vocabulary cache")
    args = parser.parse_args(argv)

    from translate.text.corpus import read_lines

    data_dir = args.study / "data"
    sources = read_lines(data_dir / "test.en")
    splits, runs = [], {}
    configs = sorted(args.study.glob("*-seed*/config.yaml"))
    if not configs:
        parser.error(f"--study {args.study}: no run has started there")
    for lang in args.langs:
        # the study's data settings, the same for every language but the target
        data_config = {**yaml.safe_load(configs[0].read_text())["data"], "tgt_lang": lang}
        if args.cache_dir:
            data_config["cache_dir"] = args.cache_dir
        split = vocabulary_split(data_config, data_dir, lang)
        splits.append(split)
        references = read_lines(data_dir / f"test.{lang}")
        for cell in args.cells:
            for run_dir in sorted(args.study.glob(f"{cell}-{lang}-seed*")):
                if not (run_dir / "result.json").is_file():
                    continue
                seed = int(run_dir.name.rsplit("seed", 1)[1])
                print(f"tying diagnosis: {run_dir.name}", file=sys.stderr)
                runs[(lang, seed, cell)] = run_measures(run_dir, lang, split, sources, references)
    table = markdown(splits, runs)
    write_atomic(args.study / "diagnosis.md", table.encode())
    public = [{k: v for k, v in s.items() if k not in ("classes", "target_counts")} for s in splits]
    write_atomic(
        args.study / "diagnosis.json",
        json.dumps(
            {
                "vocabulary": public,
                "runs": [{"lang": k[0], "seed": k[1], "cell": k[2], **v} for k, v in runs.items()],
            },
            indent=2,
        ).encode(),
    )
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
