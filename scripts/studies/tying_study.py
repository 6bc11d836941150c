#!/usr/bin/env python3
"""The tying study: what each kind of weight sharing costs or buys, measured on real data.

    python scripts/studies/tying_study.py                # 7 runs on 2 CPU cores, 1 to 1.5 hours
    python scripts/studies/tying_study.py --updates 1250 # make train's budget: ~85 min
    python scripts/studies/tying_study.py --scale gpu    # a bigger model and budget on one GPU
    python scripts/studies/tying_study.py --smoke        # two tiny updates per run: checks the path

Trains every `tie_embeddings` mode (none, decoder, src_tgt, all) and, on top of `all`, the three
sharing variants (attention shared across layers, encoder-decoder layer sharing, an adapter on
the tied input embedding), all from `configs/default.yaml` with the same data, vocabulary, seed,
step budget and every other setting equal. Each run is then scored on the test split (sacrebleu
BLEU and chrF, greedy) and its direct path W_E A^T W_U^T measured (`translate/model/analysis.py`):
asymmetry, and the mean reciprocal rank of each token's most frequent successor on the target
side of the training data. Results are written atomically under `--out` (runs/tying-study/):
one directory per run (config, logs, checkpoint, test hypotheses, result.json), and
`results.md`, `results.json` and `results.png` for the whole study.
"""

from __future__ import annotations

import argparse
import copy
import csv
import io
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import yaml

from translate.files import write_atomic
from translate.model.analysis import (
    asymmetry,
    bigram_mrr,
    direct_path,
    parameter_counts,
    target_bigrams,
    unigram_scores,
)

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Variant:
    name: str
    model: dict = field(default_factory=dict)  # overrides of model.model


VARIANTS = [
    Variant("none", {"tie_embeddings": "none"}),
    Variant("decoder", {"tie_embeddings": "decoder"}),
    Variant("src_tgt", {"tie_embeddings": "src_tgt"}),
    Variant("all", {"tie_embeddings": "all"}),
    Variant("all+shared-attention", {"tie_embeddings": "all", "share_layer_attention": True}),
    Variant("all+shared-enc-dec", {"tie_embeddings": "all", "share_encoder_decoder_layers": True}),
    Variant("all+adapter", {"tie_embeddings": "all", "embedding_adapter": True}),
]

# Changes to configs/default.yaml for each scale; everything not named here is the default run's.
SCALES: dict[str, dict] = {
    # `make train`'s model and batches for 800 updates (1,250 there) so that seven runs fit in
    # about an hour: ~7.5 min of training a run at ~3,300 target tokens/s (a busy day; ~5 min
    # at 5,000), plus one validation and the test decoding.  The time cap only guards against
    # a stalled run: every run is meant to make the same number of updates (the table says).
    "cpu": {"trainer": {"max_steps": 800, "val_check_interval": 800, "max_time": "00:00:30:00"}},
    # One GPU: Transformer-base width, a larger vocabulary and batches; dropout for 25+ epochs.
    "gpu": {
        "trainer": {
            "accelerator": "gpu",
            "devices": 1,
            "precision": "bf16-mixed",
            "max_steps": 3000,
            "val_check_interval": 3000,
            "max_time": "00:00:20:00",
            "log_every_n_steps": 100,
        },
        "model": {
            "model": {
                "d_model": 512,
                "heads": 8,
                "encoder_layers": 6,
                "decoder_layers": 6,
                "ffn_dim": 2048,
                "dropout": 0.1,
            },
            "lr": 0.001,
            "warmup_steps": 800,
        },
        "data": {"vocab_size": 8000, "max_tokens": 8000},
    },
    # Two updates of a very small model: exercises every step of the study in seconds.
    "smoke": {
        "trainer": {
            "precision": "32-true",
            "max_steps": 2,
            "val_check_interval": 2,
            "max_time": None,
            "limit_val_batches": 1,
            "log_every_n_steps": 1,
            "enable_progress_bar": False,
            "enable_model_summary": False,
        },
        "model": {
            "model": {
                "d_model": 32,
                "heads": 2,
                "encoder_layers": 2,
                "decoder_layers": 2,
                "ffn_dim": 64,
                "max_positions": 256,
            },
            "warmup_steps": 10,
        },
        "data": {"vocab_size": 1000, "max_tokens": 2048, "dev_max_sentences": 16},
    },
}


def merge(base: dict, changes: dict) -> dict:
    """`base` with `changes` applied recursively (a None value removes the key)."""
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def run_config(base: dict, variant: Variant, run_dir: Path) -> dict:
    """The full config of one run: the study's base, the variant's sharing, its own output dirs."""
    return in_run_dir(merge(base, {"model": {"model": variant.model}}), run_dir)


def in_run_dir(config: dict, run_dir: Path) -> dict:
    """`config` with the run's directory, its CSV log and its last checkpoint all inside it."""
    config["run_dir"] = str(run_dir)
    config["trainer"]["logger"] = {
        "class_path": "lightning.pytorch.loggers.CSVLogger",
        "init_args": {"save_dir": str(run_dir), "name": "logs", "version": "run"},
    }
    config["trainer"]["callbacks"] = [
        {
            "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {
                "dirpath": str(run_dir / "checkpoints"),
                "save_last": True,
                "save_top_k": 0,
                "enable_version_counter": False,
            },
        }
    ]
    return config


def train(config_path: Path) -> float:
    """`translate-train fit --config config_path` in this process; returns its wall time."""
    from translate.train.lightning_cli import run_cli

    started = time.perf_counter()
    # the studies score with their own fixed search, so tuning the beam would only cost time
    run_cli(["fit", "--config", str(config_path), "--tune_search", "false"])
    return time.perf_counter() - started


def logged_metrics(metrics_csv: Path) -> dict:
    """The last validation perplexity and the mean logged throughput."""
    if not metrics_csv.is_file():
        raise FileNotFoundError(f"{metrics_csv}: the run wrote no metrics")
    with open(metrics_csv, newline="") as handle:
        rows = list(csv.DictReader(handle))

    def values(column: str) -> list[float]:
        return [float(row[column]) for row in rows if row.get(column) not in (None, "")]

    ppl, rates = values("val_ppl"), values("train_tgt_tokens_per_sec")
    return {
        "val_ppl": ppl[-1] if ppl else None,
        "tokens_per_sec": sum(rates) / len(rates) if rates else None,
    }


def trained_parameter_counts(loaded) -> dict:
    """`parameter_counts` of the model as trained: a `shared_rows` model is loaded with its
    decoder input and output folded into full matrices, but trained one tied matrix and, per
    target-only piece, an input row and an output row."""
    from translate.model.transformer import TIE_MODES

    counts = parameter_counts(loaded.model)
    choice = loaded.tie_choice
    if choice is not None and TIE_MODES[choice.mode].target_rows_apart:
        model = loaded.model
        folded = 2 * (model.tgt_vocab_size - choice.target_only_pieces) * model.cfg.d_model
        counts["total"] -= folded
        counts["in_embeddings"] -= folded
    return counts


def evaluate_run(
    run_dir: Path,
    sources: list[str],
    references: list[str],
    bigrams,
    batch_tokens: int,
    device: str = "cpu",
) -> dict:
    """Test-split scores (decoded on `device`) and direct-path measures of the run's last checkpoint."""
    from translate.decode.loaded_model import load_model
    from translate.decode.pipeline import translate_lines
    from translate.files import write_lines_atomic
    from translate.model.checkpoint import read_checkpoint
    from translate.score.metrics import corpus_scores

    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    updates = read_checkpoint(checkpoint).get("global_step")  # fewer than max_steps if max_time hit
    loaded = load_model(checkpoint, device)
    started = time.perf_counter()
    hypotheses = translate_lines(loaded, sources, batch_tokens=batch_tokens)
    decode_seconds = time.perf_counter() - started
    write_lines_atomic(run_dir / "test.hyp", hypotheses)
    scores = corpus_scores(hypotheses, references)
    path = direct_path(loaded.model).cpu()
    counts = trained_parameter_counts(loaded)
    return {
        "updates": updates,
        "parameters": counts["total"],
        "embedding_parameters": counts["in_embeddings"],
        "parameters_by_component": counts,
        "bleu": scores.bleu,
        "chrf": scores.chrf,
        "bleu_signature": scores.bleu_signature,
        "chrf_signature": scores.chrf_signature,
        "test_sentences": len(sources),
        "test_decode_seconds": decode_seconds,
        "asymmetry": asymmetry(path),
        "bigram_mrr": bigram_mrr(path, bigrams),
    }


def _number(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


# --- significance (shared with the distant-pair study) ------------------------------------------
def paired_tests(
    systems: list[tuple[str, list[str]]], references: list[str], target_lang: str | None = None
):
    """sacrebleu's paired bootstrap and approximate randomization of every system against the
    first, on BLEU and chrF (translate.score.significance, as translate-eval --compare)."""
    from translate.score.significance import compare

    return compare(systems, [references], ("bleu", "chrf"), target_lang)


def interval(comparison, system: str, metric: str) -> str:
    """The bootstrap's 95% interval: score [low, high]."""
    if comparison is None or system not in comparison.systems:
        return "–"
    r = comparison.result(system, metric)
    return f"{r.score:.2f} [{r.mean - r.ci:.2f}, {r.mean + r.ci:.2f}]"


def p_text(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"  # 1/10,001 is the least 10,000 trials can give


def p_values(comparison, system: str, metric: str) -> str:
    """Both tests' p against the baseline, `bold` where both are below 0.05."""
    if comparison is None or system not in comparison.systems[1:]:
        return "–"
    r = comparison.result(system, metric)
    delta = r.score - comparison.result(comparison.systems[0], metric).score
    text = f"{delta:+.2f} (p {p_text(r.p_bootstrap)} / {p_text(r.p_randomization)})"
    return f"**{text}**" if comparison.significant(system, metric) else text


def markdown_table(
    results: list[dict], baseline_mrr: float, description: str, comparison=None
) -> str:
    header = (
        "| run | parameters | in embeddings | updates | val ppl | BLEU [95% CI] | vs none | "
        "chrF [95% CI] | vs none | tgt tokens/s | wall time | asymmetry | bigram MRR |"
    )
    lines = [description, "", header, "|" + "---|" * 13]
    for r in results:
        minutes, seconds = divmod(round(r["train_seconds"]), 60)
        name = r["name"]
        lines.append(
            f"| {name} | {r['parameters']:,} | {r['embedding_parameters']:,} | "
            f"{_number(r['updates'], ',')} | {_number(r['val_ppl'], '.2f')} | "
            f"{interval(comparison, name, 'bleu') if comparison else format(r['bleu'], '.2f')} | "
            f"{p_values(comparison, name, 'bleu')} | "
            f"{interval(comparison, name, 'chrf') if comparison else format(r['chrf'], '.2f')} | "
            f"{p_values(comparison, name, 'chrf')} | "
            f"{_number(r['tokens_per_sec'], ',.0f')} | {minutes} min {seconds:02d} s | "
            f"{r['asymmetry']:.3f} | {r['bigram_mrr']:.3f} |"
        )
    signatures = sorted({(r["bleu_signature"], r["chrf_signature"]) for r in results})
    lines += [
        "",
        "parameters: each stored tensor counted once; in embeddings: the distinct embedding and "
        "pre-softmax matrices. val ppl: dev perplexity at the last validation. BLEU/chrF: test "
        f"split ({results[0]['test_sentences']:,} sentences, greedy), with the 95% interval of "
        "sacrebleu's paired bootstrap (1,000 resamples); vs none: the difference from the untied "
        "run and its p-values, paired bootstrap / approximate randomization (10,000 trials), in "
        "bold where both are below 0.05. tgt tokens/s: mean of the "
        "logged training windows; wall time: the whole fit, validation included. asymmetry: "
        "||M - M^T||_F / ||M||_F of the direct path M = W_E A^T W_U^T; bigram MRR: mean "
        "reciprocal rank under M of each token's most frequent successor in the training "
        f"targets (a unigram-frequency ranking scores {baseline_mrr:.3f}).",
        "",
    ]
    lines += [f"Signatures: `{bleu}`, `{chrf}`." for bleu, chrf in signatures]
    return "\n".join(lines) + "\n"


def plot(results: list[dict], baseline_mrr: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in results]
    panels = [
        (
            "parameters (millions)",
            [r["parameters"] / 1e6 for r in results],
            [r["embedding_parameters"] / 1e6 for r in results],
        ),
        ("validation perplexity", [r["val_ppl"] or 0.0 for r in results], None),
        ("test BLEU", [r["bleu"] for r in results], None),
        ("test chrF", [r["chrf"] for r in results], None),
        ("training target tokens/s", [r["tokens_per_sec"] or 0.0 for r in results], None),
        ("direct path asymmetry", [r["asymmetry"] for r in results], None),
        ("bigram MRR of the direct path", [r["bigram_mrr"] for r in results], None),
    ]
    figure, axes = plt.subplots(2, 4, figsize=(18, 8))
    for axis, (title, values, inner) in zip(axes.flat, panels):
        axis.bar(names, values, color="tab:blue", label="total" if inner else None)
        if inner:
            axis.bar(names, inner, color="tab:orange", label="in embeddings")
            axis.legend(fontsize=8)
        if title.startswith("bigram"):
            axis.axhline(baseline_mrr, color="gray", linestyle="--", label="unigram ranking")
            axis.legend(fontsize=8)
        axis.set_title(title, fontsize=10)
        axis.tick_params(axis="x", labelrotation=60, labelsize=8)
    axes.flat[-1].axis("off")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    write_atomic(path, buffer.getvalue())


def decode_device(config: dict) -> str:
    """Where to decode the test split: the GPU the runs trained on, else the CPU."""
    import torch

    on_gpu = config["trainer"].get("accelerator") in ("gpu", "cuda")
    return "cuda" if on_gpu and torch.cuda.is_available() else "cpu"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument(
        "--smoke", action="store_true", help="two tiny updates per run (a test of the path)"
    )
    parser.add_argument(
        "--config", default=str(REPO / "configs" / "default.yaml"), help="the base config"
    )
    parser.add_argument("--out", default="runs/tying-study", help="output directory")
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="where the vocabulary and encoded ids are cached (default: the config's data.cache_dir)",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=[v.name for v in VARIANTS],
        default=[v.name for v in VARIANTS],
    )
    parser.add_argument(
        "--test-sentences", type=int, default=None, help="score only the first N test pairs"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the result of a run whose directory holds one for the same config",
    )
    parser.add_argument("--batch-tokens", type=int, default=4096, help="test decoding batch size")
    parser.add_argument(
        "--updates",
        type=int,
        default=None,
        help="updates per run instead of the scale's (e.g. 1250, make train's budget)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from translate.train.data_module import TranslationDataModule

    with open(args.config) as handle:
        base = merge(yaml.safe_load(handle), SCALES["smoke" if args.smoke else args.scale])
    if args.updates:
        base = merge(
            base, {"trainer": {"max_steps": args.updates, "val_check_interval": args.updates}}
        )
    if args.cache_dir:
        base = merge(base, {"data": {"cache_dir": args.cache_dir}})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # Vocabulary and encoded training data once, before any run is timed; the runs reuse them.
    data = TranslationDataModule(**base.get("data", {}))
    data.setup("fit")
    vocab = data.vocab
    bigrams = target_bigrams(
        vocab.target.encode([tgt for _, tgt in data.prepared.pairs("train")]), len(vocab.target)
    )
    baseline_mrr = bigram_mrr(unigram_scores(bigrams), bigrams)
    test = list(islice(data.prepared.pairs("test"), args.test_sentences))
    sources, references = [s for s, _ in test], [t for _, t in test]

    results = []
    for variant in (v for v in VARIANTS if v.name in args.variants):
        run_dir = out / variant.name
        config = run_config(base, variant, run_dir)
        result_path = run_dir / "result.json"
        if args.resume and result_path.is_file():
            saved = json.loads(result_path.read_text())
            if saved.get("config") == config:
                print(f"tying study: {variant.name}: kept the earlier result", file=sys.stderr)
                results.append(saved)
                continue
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        config_path = run_dir / "config.yaml"
        write_atomic(config_path, yaml.safe_dump(config, sort_keys=False).encode())
        print(f"tying study: training {variant.name}", file=sys.stderr)
        train_seconds = train(config_path)
        result = {
            "name": variant.name,
            "model": variant.model,
            "config": config,
            "train_seconds": train_seconds,
            **logged_metrics(run_dir / "logs" / "run" / "metrics.csv"),
            **evaluate_run(
                run_dir, sources, references, bigrams, args.batch_tokens, decode_device(base)
            ),
        }
        write_atomic(result_path, json.dumps(result, indent=2).encode())
        results.append(result)

    scale = "smoke" if args.smoke else args.scale
    description = (
        f"Tying study ({scale} scale, base config {Path(args.config).name}, "
        f"{base['trainer'].get('max_steps')} updates per run, seed {base.get('seed_everything')}, "
        f"vocabulary {len(vocab.target):,}; host: {os.cpu_count()} CPU cores)."
    )
    from translate.text.corpus import read_lines

    hypotheses = {
        r["name"]: read_lines(out / r["name"] / "test.hyp")
        for r in results
        if (out / r["name"] / "test.hyp").is_file()
    }
    comparison = None
    if "none" in hypotheses and len(hypotheses) > 1:
        systems = [("none", hypotheses.pop("none")), *hypotheses.items()]
        comparison = paired_tests(systems, references)
    table = markdown_table(results, baseline_mrr, description, comparison)
    write_atomic(out / "results.md", table.encode())
    summary = {
        "scale": scale,
        "baseline_bigram_mrr": baseline_mrr,
        "runs": [{k: v for k, v in r.items() if k != "config"} for r in results],
    }
    write_atomic(out / "results.json", json.dumps(summary, indent=2).encode())
    plot(results, baseline_mrr, out / "results.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
