#!/usr/bin/env python3
"""The distant-pair study: does three-way tying cost more when the languages share less?

    python scripts/studies/distant_study.py                   # 2 CPU cores, a few hours; runs/distant-study/
    make distant-study                                # the same
    python scripts/studies/distant_study.py --smoke           # two tiny updates per run: checks the path

Three-way tying (Press & Wolf 2017) needs one joint vocabulary, whose softmax then covers both
languages. English is translated into a close language (de), a medium one (ru) and two distant
ones (ja, zh-CN) with the SAME English sentences and the same number of pairs for every
language (the rows of the multi-way LibreOffice corpus that all four have), so neither data
size nor content is the confound. Each language is trained in every cell, on every seed:

    none               joint vocabulary, no tie
    decoder            joint vocabulary, decoder input = pre-softmax
    all                joint vocabulary, three-way tie
    src_tgt            joint vocabulary, encoder input = decoder input, the pre-softmax its own
    shared_rows        joint vocabulary, three-way tie but for the pieces only the target uses,
                       whose decoder-input and output rows are their own
    all+adapter        joint vocabulary, three-way tie, a learned map between the decoder's input
                       embedding and its first layer (an asymmetric direct path)
    separate-decoder   one vocabulary per language, decoder tie (its softmax holds the target only)
    multilingual       one model en -> every language (target tags), joint vocabulary, three-way
                       tie, as many updates per language as a bilingual run

and measured on the test rows: BLEU (with the target's tokenizer) and chrF, dev perplexity, the
off-target rate (lingua), the probability mass the softmax puts on foreign pieces (those the
target language's training text never uses: English's, or another target's), the share of the
target vocabulary they are, and the direct-path asymmetry. Results: results.md (mean and spread over seeds), results.json, results.png.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from tying_study import (
    in_run_dir,
    interval,
    logged_metrics,
    merge,
    p_text,
    p_values,
    paired_tests,
    train,
    trained_parameter_counts,
)

from translate.decode.settings import SearchSettings
from translate.files import write_atomic
from translate.score.metrics import DISPLAY_NAMES
from translate.score.significance import (
    Contrast,
    GainDifference,
    gain_difference,
)

REPO = Path(__file__).resolve().parents[2]

CELLS = {
    "none": {"model": {"model": {"tie_embeddings": "none"}}},
    "decoder": {"model": {"model": {"tie_embeddings": "decoder"}}},
    "all": {"model": {"model": {"tie_embeddings": "all"}}},
    "src_tgt": {"model": {"model": {"tie_embeddings": "src_tgt"}}},
    "shared_rows": {"model": {"model": {"tie_embeddings": "shared_rows"}}},
    "all+adapter": {"model": {"model": {"tie_embeddings": "all", "embedding_adapter": True}}},
    "separate-decoder": {
        "model": {"model": {"tie_embeddings": "decoder"}},
        "data": {"joint_vocab": False},
    },
    "multilingual": {"model": {"model": {"tie_embeddings": "all"}}},
}
# The study's scale on 2 CPU cores: make train's model, a vocabulary large enough for CJK.
SCALE = {
    "trainer": {"max_steps": 800, "val_check_interval": 800, "max_time": "00:00:45:00"},
    "data": {
        "corpus_format": "text",
        "vocab_size": 8000,
        "character_coverage": 0.9995,
        "dev_max_sentences": 300,
    },
}
SMOKE = {
    "trainer": {
        "precision": "32-true",
        "max_steps": 2,
        "val_check_interval": 2,
        "max_time": None,
        "limit_val_batches": 1,
        "log_every_n_steps": 1,
    },
    "model": {
        "model": {
            "d_model": 32,
            "heads": 2,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "ffn_dim": 64,
            "max_positions": 256,
        },
        "warmup_steps": 10,
    },
    "data": {"vocab_size": 1200, "max_tokens": 2048, "dev_max_sentences": 16},
}


# --- data ------------------------------------------------------------------------------------------
def lacking(corpus: Path, langs: list[str], splits: tuple[str, ...] = ("train",)) -> list[str]:
    """The languages (English and `langs`) that `corpus` lacks one of `splits` of."""
    from translate.text.corpus import plain_or_gzipped

    return [
        lang
        for lang in ["en", *langs]
        if not all(plain_or_gzipped(corpus / f"{split}.{lang}").is_file() for split in splits)
    ]


def aligned_subset(
    corpus: Path, langs: list[str], out: Path, limit: int | None = None
) -> dict[str, int]:
    """The rows of a multi-way corpus that every language has, as plain `{split}.{lang}` files:
    the same English sentences, and as many pairs, for every language."""
    from translate.text.corpus import plain_or_gzipped, read_lines

    sizes = {}
    for split in ("train", "dev", "test"):
        columns = {
            lang: read_lines(plain_or_gzipped(corpus / f"{split}.{lang}"))
            for lang in ["en", *langs]
        }
        rows = [
            i for i in range(len(columns["en"])) if all(columns[lang][i].strip() for lang in langs)
        ][:limit]
        for lang, lines in columns.items():
            write_atomic(out / f"{split}.{lang}", "".join(lines[i] + "\n" for i in rows).encode())
        sizes[split] = len(rows)
    return sizes


# --- one run ------------------------------------------------------------------------------------
def run_config(
    base: dict,
    cell: str,
    lang: str | None,
    langs: list[str],
    seed: int,
    run_dir: Path,
    lang_tag: str = "decoder",
) -> dict:
    config = merge(base, CELLS[cell])
    config["seed_everything"] = seed
    config["data"]["seed"] = seed
    if cell == "multilingual":
        config["data"]["directions"] = [["en", other] for other in langs]
        config["data"]["lang_tag"] = lang_tag
        steps = config["trainer"]["max_steps"] * len(langs)
        config["trainer"].update(max_steps=steps, val_check_interval=steps)
    else:
        config["data"].update(src_lang="en", tgt_lang=lang)
    return in_run_dir(config, run_dir)


def piece_ids(vocab, lines: list[str]) -> set[int]:
    return {i for ids in vocab.encode(lines) for i in ids}


def foreign_pieces(loaded, target_text: list[str]) -> list[int]:
    """Pieces of the target softmax that the target language's training text never uses (the
    source language's, or another target's): ordinary pieces only, not specials or tags."""
    from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

    vocab = loaded.vocab.target
    never = {PAD_ID, UNK_ID, BOS_ID, EOS_ID, *vocab.tag_ids().values()}
    return sorted(set(range(len(vocab))) - piece_ids(vocab, target_text) - never)


def foreign_mass(
    loaded,
    sources: list[str],
    references: list[str],
    foreign: list[int],
    target_lang: str | None,
    batch: int = 64,
) -> float:
    """The mean probability the model gives, at each reference token (teacher-forced), to
    `foreign` pieces: softmax spent on another language's pieces."""
    import numpy as np
    import torch

    from translate.decode.pipeline import target_tags_for
    from translate.train.collate import collate

    if not foreign:
        return 0.0
    target = target_tags_for(loaded, target_lang)
    tag = target.prefix[0] if target.prefix else target.start
    mask = torch.zeros(loaded.model.tgt_vocab_size, dtype=torch.bool)
    mask[foreign] = True
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(sources), batch):
            src = loaded.vocab.source.encode(sources[start : start + batch])
            tgt = loaded.vocab.target.encode(references[start : start + batch])
            padded = collate(
                [(np.array(s[:250]), np.array(t[:250]), None, tag) for s, t in zip(src, tgt)],
                loaded.data.lang_tag,
            )
            probs = torch.softmax(loaded.model(padded["src"], padded["tgt_in"], 0).float(), dim=-1)
            real = padded["tgt_out"] != 0
            total += float(probs[..., mask].sum(-1)[real].sum())
            count += int(real.sum())
    return total / max(count, 1)


def evaluate(
    run_dir: Path,
    sources: list[str],
    references: dict[str, list[str]],
    langs: list[str],
    train_text: dict[str, list[str]],
) -> list[dict]:
    """One row per target language the run's model translates into."""
    from translate.decode.loaded_model import load_model
    from translate.decode.pipeline import translate_lines
    from translate.model.analysis import asymmetry, direct_path
    from translate.model.checkpoint import read_checkpoint
    from translate.score.metrics import corpus_scores
    from translate.text.language_id import off_target_rate

    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    loaded = load_model(checkpoint)
    counts = trained_parameter_counts(loaded)
    multilingual = loaded.multilingual()
    rows = []
    for lang in loaded.data.target_languages if multilingual else [loaded.data.languages[1]]:
        started = time.perf_counter()
        target = lang if multilingual else None
        hypotheses = translate_lines(
            loaded, sources, SearchSettings(beam=1, target_lang=target, source_lang="en")
        )
        write_atomic(run_dir / f"test.{lang}.hyp", "".join(h + "\n" for h in hypotheses).encode())
        scores = corpus_scores(hypotheses, references[lang], target_lang=lang)
        foreign = foreign_pieces(loaded, train_text[lang])
        rows.append(
            {
                "lang": lang,
                "updates": read_checkpoint(checkpoint, mmap=True).get("global_step"),
                "parameters": counts["total"],
                "embedding_parameters": counts.get("in_embeddings"),
                "joint_vocab": loaded.vocab.joint,
                "target_vocab": loaded.model.tgt_vocab_size,
                "bleu": scores.bleu,
                "chrf": scores.chrf,
                "bleu_signature": scores.bleu_signature,
                "chrf_signature": scores.chrf_signature,
                "off_target": off_target_rate(hypotheses, lang, ["en", *langs]),
                "foreign_share": len(foreign) / loaded.model.tgt_vocab_size,
                "foreign_mass": foreign_mass(loaded, sources, references[lang], foreign, target),
                "asymmetry": asymmetry(direct_path(loaded.model).cpu()),
                "shared_mass": loaded.tie_choice.shared_mass if loaded.tie_choice else None,
                "decode_seconds": time.perf_counter() - started,
                "test_sentences": len(sources),
            }
        )
    return rows


def train_hours(results: list[dict]) -> str:
    seconds = sum({r["run"]: r["train_seconds"] for r in results}.values())
    return f"{int(seconds // 3600)} h {round(seconds % 3600 / 60):02d} min"


def planned_runs(
    langs: list[str], cells: list[str], seeds: list[int]
) -> list[tuple[int, str, str | None]]:
    """(seed, cell, language) in the order that completes one language's contrast, on every
    seed, before the next language starts; the many-to-many model (language None) last."""
    bilingual = [
        (seed, cell, lang)
        for lang in langs
        for seed in seeds
        for cell in cells
        if cell != "multilingual"
    ]
    return bilingual + [(seed, "multilingual", None) for seed in seeds if "multilingual" in cells]


# --- the report --------------------------------------------------------------------------------
def spread(values: list[float], spec: str = ".2f") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(values) == 1:
        return format(values[0], spec)
    return (
        f"{format(statistics.mean(values), spec)} ± {format((max(values) - min(values)) / 2, spec)}"
    )


def pooled_outputs(
    results: list[dict], out: Path, lang: str, cells: list[str], seeds: list[int] | None = None
) -> tuple[list[int], dict[str, list[str]]]:
    """The seeds every given cell has finished on (of `seeds`, or all), and each cell's test
    outputs on them, seed after seed: line i of seed s is the same sentence in every cell."""
    from translate.text.corpus import read_lines

    def outputs(cell: str) -> dict[int, Path]:
        paths = {
            r["seed"]: out / r["run"] / f"test.{lang}.hyp"
            for r in results
            if r["lang"] == lang and r["cell"] == cell and (seeds is None or r["seed"] in seeds)
        }
        return {seed: path for seed, path in paths.items() if path.is_file()}

    runs = {cell: outputs(cell) for cell in cells}
    present = [set(found) for found in runs.values() if found]
    common = sorted(set.intersection(*present)) if present else []
    return common, {
        cell: [line for seed in common for line in read_lines(runs[cell][seed])]
        for cell in cells
        if runs[cell]
    }


def pooled_tests(
    results: list[dict],
    out: Path,
    lang: str,
    cells: list[str],
    references: list[str],
    baseline: str = "none",
):
    """Each cell against `baseline` on one language, its seeds' test outputs pooled (seed s's
    line i paired with the baseline's seed s line i), so an interval and a p-value cover seeds
    and sentences alike; only the seeds every cell has, and None without the baseline's
    outputs."""
    seeds, outputs = pooled_outputs(results, out, lang, cells)
    if baseline not in outputs or not seeds:
        return None
    systems = [(baseline, outputs[baseline])] + [
        (cell, outputs[cell]) for cell in cells if cell != baseline and cell in outputs
    ]
    return paired_tests(systems, references * len(seeds), lang)


BASELINES = ("none", "all")  # what each remedy must beat: no tie and the three-way tie


def remedy_markdown(
    results: list[dict], out: Path, langs: list[str], cells: list[str], references: dict
) -> str:
    """Each remedy (a cell other than the baselines) against no tie and the three-way tie, on
    the seeds all three have finished, pooled."""
    remedies = [cell for cell in cells if cell not in BASELINES and cell != "multilingual"]
    rows = []
    for lang in langs:
        for remedy in remedies:
            trio = [*BASELINES, remedy]
            seeds, outputs = pooled_outputs(results, out, lang, trio)
            if len(outputs) < len(trio) or not seeds:
                continue
            tests = {
                base: pooled_tests(results, out, lang, trio, references[lang], base)
                for base in BASELINES
            }
            rows.append(
                f"| {lang} | {remedy} | {', '.join(map(str, seeds))} | "
                + " | ".join(
                    p_values(tests[base], remedy, metric)
                    for metric in ("bleu", "chrf")
                    for base in BASELINES
                )
                + " |"
            )
    if not rows:
        return ""
    return (
        "\n".join(
            [
                "Each remedy against no tie and the three-way tie: the difference of the pooled score "
                "(the seeds all three cells have finished) and its p-values, paired bootstrap / "
                "approximate randomization, in bold where both are below 0.05.",
                "",
                "| language | remedy | seeds | BLEU vs none | BLEU vs all | chrF vs none | chrF vs all |",
                "|---|---|---|---|---|---|---|",
                *rows,
            ]
        )
        + "\n"
    )


def shared_masses(results: list[dict], out: Path) -> dict[str, float]:
    """Each language's shared mass as trained (the same data in every cell and seed), from a run
    that recorded it, else from a finished run's checkpoint."""
    from translate.model.checkpoint import ARTIFACT_KEY, read_checkpoint

    masses = {}
    for r in results:
        if r["lang"] in masses or r.get("joint_vocab") is False or r["cell"] == "multilingual":
            continue  # another vocabulary, or every direction's data
        if r.get("shared_mass") is not None:
            masses[r["lang"]] = r["shared_mass"]
            continue
        checkpoint = out / r["run"] / "checkpoints" / "last.ckpt"
        if checkpoint.is_file():
            choice = read_checkpoint(checkpoint, mmap=True)[ARTIFACT_KEY].get("tie_choice")
            if isinstance(choice, dict) and choice.get("shared_mass") is not None:
                masses[r["lang"]] = choice["shared_mass"]
    return masses


def auto_markdown(results: list[dict], out: Path, langs: list[str], references: dict) -> str:
    """What `tie_embeddings: auto` builds for each language, against the better of no tie and
    the three-way tie on each metric (the higher pooled score): the goal is never to be
    significantly worse."""
    from translate.model.tying import SHARED_MASS_THRESHOLD, auto_mode

    masses = shared_masses(results, out)
    rows = []
    for lang in langs:
        if lang not in masses:
            continue
        mode = auto_mode(masses[lang])
        cells = sorted({*BASELINES, mode})
        seeds, outputs = pooled_outputs(results, out, lang, cells)
        if len(outputs) < len(cells) or not seeds:
            rows.append(f"| {lang} | {masses[lang]:.3f} | {mode} | – | – | – | – | – |")
            continue
        tests = {"none": pooled_tests(results, out, lang, cells, references[lang])}
        verdicts = []
        for metric in ("bleu", "chrf"):
            best = max(BASELINES, key=lambda base: tests["none"].result(base, metric).score)
            if mode == best:
                verdicts += [best, "="]
                continue
            if best not in tests:  # against the better one only where auto did not build it
                tests[best] = pooled_tests(results, out, lang, cells, references[lang], best)
            verdicts += [best, p_values(tests[best], mode, metric)]
        rows.append(
            f"| {lang} | {masses[lang]:.3f} | {mode} | {', '.join(map(str, seeds))} | "
            + " | ".join(verdicts)
            + " |"
        )
    if not rows:
        return ""
    return (
        "\n".join(
            [
                f"`tie_embeddings: auto` (three-way tie at a shared mass ≥ {SHARED_MASS_THRESHOLD}, "
                "else its choice below): the tie it builds for each language's training pairs, "
                "against the better of none and all on each metric (pooled; `=` where it builds that "
                "one).",
                "",
                "| language | shared mass as trained | auto builds | seeds | better on BLEU | auto vs it | better on chrF | auto vs it |",
                "|---|---|---|---|---|---|---|---|",
                *rows,
            ]
        )
        + "\n"
    )


@dataclass(frozen=True)
class PooledGain:
    """A language's gain difference from the first language's, on these seeds pooled."""

    seeds: list[int]
    difference: GainDifference


def gain_differences(
    results: list[dict], out: Path, langs: list[str], references: dict[str, list[str]]
) -> list[PooledGain]:
    """Whether the three-way tie gains less over no tie into each language than into the first
    (the closest): a paired bootstrap over the shared English test lines, on the seeds both
    languages have finished in both cells."""

    def finished(lang: str) -> set[int]:
        seeds, outputs = pooled_outputs(results, out, lang, ["none", "all"])
        return set(seeds) if len(outputs) == 2 else set()

    def contrast(lang: str, seeds: list[int]) -> Contrast:
        _, outputs = pooled_outputs(results, out, lang, ["none", "all"], seeds)
        return Contrast(
            lang, outputs["none"], outputs["all"], references[lang] * len(seeds), target_lang=lang
        )

    first, *others = langs
    ready = {lang: finished(lang) for lang in langs}
    differences = []
    for lang in others:
        seeds = sorted(ready[lang] & ready[first])
        if seeds:
            pair = (contrast(lang, seeds), contrast(first, seeds))
            differences += [
                PooledGain(seeds, gain_difference(*pair, metric)) for metric in ("bleu", "chrf")
            ]
    return differences


def gain_markdown(differences: list[PooledGain]) -> str:
    """The gain differences as a table, in the study's p notation (the shift test's p)."""
    if not differences:
        return ""
    base = differences[0].difference.names[1]

    def estimate(e, scale: float, unit: str) -> str:
        text = f"{scale * e.observed:+.2f}{unit} [{scale * e.low:+.2f}, {scale * e.high:+.2f}], p {p_text(e.p)}"
        return f"**{text}**" if e.p < 0.05 else text

    lines = [
        f"Does the three-way tie gain less into a language than into {base}? Its gain over no tie "
        f"into each, minus its gain into {base}, in points and relative to the untied score "
        "(paired bootstrap over the shared English test lines, seeds pooled, 1,000 resamples; "
        "the 95% interval and the two-sided p of the shift test; bold where p < 0.05).",
        "",
        f"| language | seeds | metric | gain | {base}'s gain | difference [95% CI] | "
        f"relative gain | {base}'s | difference [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for pooled in differences:
        d = pooled.difference
        lines.append(
            f"| {d.names[0]} | {', '.join(map(str, pooled.seeds))} | {DISPLAY_NAMES[d.metric]} | "
            f"{d.gains[0]:+.2f} | {d.gains[1]:+.2f} | "
            f"{estimate(d.absolute, 1, '')} | {100 * d.relative_gains[0]:+.1f}% | "
            f"{100 * d.relative_gains[1]:+.1f}% | {estimate(d.relative, 100, ' pt')} |"
        )
    return "\n".join(lines) + "\n"


def markdown(
    results: list[dict],
    langs: list[str],
    cells: list[str],
    description: str,
    comparisons: dict | None = None,
) -> str:
    """A table per measure would be long; one row per (language, cell), mean ± half-range over
    seeds, and the seeds pooled for the 95% interval and the paired tests against `none`."""
    comparisons = comparisons or {}
    lines = [
        description,
        "",
        "| language | cell | seeds | val ppl | BLEU | BLEU pooled [95% CI] | vs none | chrF | "
        "chrF pooled [95% CI] | vs none | off-target | softmax on foreign pieces "
        "| foreign share of the target vocabulary | asymmetry |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for lang in langs:
        comparison = comparisons.get(lang)
        for cell in cells:
            rows = [r for r in results if r["lang"] == lang and r["cell"] == cell]
            if not rows:
                continue
            lines.append(
                f"| {lang} | {cell} | {len(rows)} | {spread([r['val_ppl'] for r in rows])} | "
                f"{spread([r['bleu'] for r in rows])} | {interval(comparison, cell, 'bleu')} | "
                f"{p_values(comparison, cell, 'bleu')} | {spread([r['chrf'] for r in rows])} | "
                f"{interval(comparison, cell, 'chrf')} | {p_values(comparison, cell, 'chrf')} | "
                f"{spread([100 * r['off_target'] for r in rows], '.1f')}% | "
                f"{spread([100 * r['foreign_mass'] for r in rows], '.2f')}% | "
                f"{spread([100 * r['foreign_share'] for r in rows], '.1f')}% | {spread([r['asymmetry'] for r in rows], '.3f')} |"
            )
    signatures = sorted(
        {r["bleu_signature"] for r in results} | {r["chrf_signature"] for r in results}
    )
    lines += [
        "",
        "BLEU, chrF: mean ± half the range over seeds. Pooled: the seeds' outputs scored as one "
        "corpus, with the 95% interval of sacrebleu's paired bootstrap (1,000 resamples); vs none: "
        "the pooled difference from the untied cell and its p-values, paired bootstrap / "
        "approximate randomization (10,000 trials), in bold where both are below 0.05.",
        "",
        "Signatures: " + ", ".join(f"`{s}`" for s in signatures),
    ]
    return "\n".join(lines) + "\n"


def plot(results: list[dict], langs: list[str], cells: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    # only what has runs: a study still training leaves no empty places
    langs = [lang for lang in langs if any(r["lang"] == lang for r in results)] or langs
    cells = [cell for cell in cells if any(r["cell"] == cell for r in results)] or cells
    measures = [
        ("test BLEU", "bleu", 1),
        ("test chrF", "chrf", 1),
        ("dev perplexity", "val_ppl", 1),
        ("softmax mass on foreign pieces (%)", "foreign_mass", 100),
    ]
    figure, axes = plt.subplots(1, len(measures), figsize=(5 * len(measures), 4))
    width = 0.8 / len(cells)
    for axis, (title, key, scale) in zip(axes, measures):
        for k, cell in enumerate(cells):
            means, errors = [], []
            for lang in langs:
                values = [
                    r[key] * scale
                    for r in results
                    if r["lang"] == lang and r["cell"] == cell and r[key] is not None
                ]
                means.append(np.mean(values) if values else 0.0)
                errors.append((max(values) - min(values)) / 2 if len(values) > 1 else 0.0)
            axis.bar(
                np.arange(len(langs)) + k * width, means, width, yerr=errors, label=cell, capsize=2
            )
        axis.set_xticks(
            np.arange(len(langs)) + width * (len(cells) - 1) / 2, [f"en→{lang}" for lang in langs]
        )
        axis.set_title(title, fontsize=10)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    write_atomic(path, buffer.getvalue())


def portable(config: dict) -> str:
    """A run's config with the study's directory (its run directory's parent) replaced by one
    name and without the cache's place, so that runs copied elsewhere (their result.json and
    outputs) are recognised there, whatever cache they used."""
    out = str(Path(config["run_dir"]).parent)
    data = {key: value for key, value in config["data"].items() if key != "cache_dir"}
    text = json.dumps({**config, "data": data}, sort_keys=True)
    return text.replace(json.dumps(out)[1:-1], "<out>")


def finished_rows(result_path: Path, config: dict) -> list[dict] | None:
    """The result rows of a run that finished with `config` (in this study's directory or
    another), or None: one that stopped before its updates (at its time cap, trainer.max_time)
    is not counted, and trains again."""
    if not result_path.is_file():
        return None
    result = json.loads(result_path.read_text())
    if "config" not in result or portable(result["config"]) != portable(config):
        return None
    wanted = config["trainer"]["max_steps"]
    updates = [row.get("updates") for row in result["rows"]]
    short = [done for done in updates if done is not None and done < wanted]
    if short:
        print(
            f"distant study: {result_path.parent.name} stopped at {short[0]:,} of {wanted:,} "
            "updates (trainer.max_time): not counted",
            file=sys.stderr,
        )
        return None
    return result["rows"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=REPO / "data" / "libreoffice_help",
        help="a multi-way corpus (make corpus LANGS=...); built into OUT/corpus where it lacks a language",
    )
    parser.add_argument("--langs", nargs="+", default=["de", "ru", "ja", "zh-CN"])
    parser.add_argument(
        "--train-langs",
        nargs="+",
        default=None,
        help="train only these of --langs now (the data stays the rows all of --langs have); "
        "the others' finished runs are reported with --resume",
    )
    parser.add_argument("--cells", nargs="+", choices=list(CELLS), default=list(CELLS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    parser.add_argument(
        "--updates", type=int, default=None, help="updates per bilingual run (default 800)"
    )
    parser.add_argument(
        "--lang-tag",
        choices=["source", "decoder"],
        default="decoder",
        help="the multilingual model's tag position",
    )
    parser.add_argument(
        "--config", default=str(REPO / "configs" / "default.yaml"), help="the base config"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/distant-study"))
    parser.add_argument(
        "--cache-dir", default=None, help="vocabulary and id cache (default: the config's)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="two tiny updates per run (a test of the path)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep finished runs with the same config"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="with --resume: the table of the runs finished so far, training none",
    )
    args = parser.parse_args(argv)
    args.out = args.out.resolve()  # runs record absolute paths: resume from any directory
    if args.train_langs and not set(args.train_langs) <= set(args.langs):
        parser.error(
            f"--train-langs {' '.join(args.train_langs)}: each must be one of --langs "
            f"({' '.join(args.langs)})"
        )

    from translate.text.corpus import read_lines

    missing = lacking(args.corpus, args.langs)
    if missing:  # each language's pairs do not depend on the others built, so building just these is the same
        built = args.out / "corpus"
        if lacking(built, args.langs, ("train", "dev", "test")):
            print(
                f"distant study: {args.corpus} lacks {', '.join(missing)}; building the study's "
                f"languages into {built} from Debian's packages",
                file=sys.stderr,
            )
            build = [sys.executable, str(REPO / "scripts" / "build_corpus.py"), "--langs"]
            subprocess.run([*build, *args.langs, "--out", str(built)], check=True)
        else:  # a resumed study or its report: the corpus an earlier run built
            print(
                f"distant study: {args.corpus} lacks {', '.join(missing)}; reading {built}",
                file=sys.stderr,
            )
        args.corpus = built
    data_dir = args.out / "data"
    sizes = aligned_subset(args.corpus, args.langs, data_dir, limit=400 if args.smoke else None)
    print(
        f"distant study: the same {sizes['train']:,} / {sizes['dev']:,} / {sizes['test']:,} English sentences "
        f"for {', '.join(args.langs)}",
        file=sys.stderr,
    )
    with open(args.config) as handle:
        base = merge(yaml.safe_load(handle), SCALE)
    base = merge(
        base,
        {
            "data": {
                "corpus_dir": str(data_dir.resolve()),
                **({"cache_dir": args.cache_dir} if args.cache_dir else {}),
            }
        },
    )
    if args.smoke:
        base = merge(base, SMOKE)
    if args.updates:
        base = merge(
            base, {"trainer": {"max_steps": args.updates, "val_check_interval": args.updates}}
        )
    sources = read_lines(data_dir / "test.en")[: 40 if args.smoke else None]
    references = {
        lang: read_lines(data_dir / f"test.{lang}")[: len(sources)] for lang in args.langs
    }
    train_text = {lang: read_lines(data_dir / f"train.{lang}") for lang in ["en", *args.langs]}

    results = []
    for seed, cell, lang in planned_runs(args.langs, args.cells, args.seeds):
        name = f"{cell}-{lang or 'all'}-seed{seed}"
        run_dir = args.out / name
        config = run_config(base, cell, lang, args.langs, seed, run_dir, args.lang_tag)
        result_path = run_dir / "result.json"
        finished = finished_rows(result_path, config) if args.resume else None
        if finished is not None:
            results += finished
            continue
        if args.report_only or (args.train_langs and lang not in args.train_langs):
            continue
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        write_atomic(run_dir / "config.yaml", yaml.safe_dump(config, sort_keys=False).encode())
        print(f"distant study: training {name}", file=sys.stderr)
        seconds = train(run_dir / "config.yaml")
        logged = logged_metrics(run_dir / "logs" / "run" / "metrics.csv")
        rows = [
            {
                "cell": cell,
                "seed": seed,
                "run": name,
                "train_seconds": seconds,
                **logged,
                **row,
            }
            for row in evaluate(run_dir, sources, references, args.langs, train_text)
        ]
        write_atomic(result_path, json.dumps({"config": config, "rows": rows}, indent=2).encode())
        results += rows
    if not results:
        print("distant study: no run has finished yet", file=sys.stderr)
        return 0
    description = (
        f"Distant-pair study: en→{', '.join(args.langs)}, the same {sizes['train']:,} training "
        f"sentences for each, {base['trainer']['max_steps']} updates a bilingual run "
        f"(the multilingual model {len(args.langs)}x), seeds {', '.join(map(str, args.seeds))}; "
        f"test: {len(sources):,} rows, greedy. Mean ± half the range over seeds. "
        f"{len({r['run'] for r in results})} runs, {train_hours(results)} of training."
    )
    comparisons = {
        lang: pooled_tests(results, args.out, lang, args.cells, references[lang])
        for lang in args.langs
    }
    table = markdown(results, args.langs, args.cells, description, comparisons)
    if {"none", "all"} <= set(args.cells):
        gains = gain_markdown(gain_differences(results, args.out, args.langs, references))
        remedies = remedy_markdown(results, args.out, args.langs, args.cells, references)
        auto = auto_markdown(results, args.out, args.langs, references)
        table += "".join("\n" + part for part in (gains, remedies, auto) if part)
    write_atomic(args.out / "results.md", table.encode())
    write_atomic(args.out / "results.json", json.dumps(results, indent=2).encode())
    plot(results, args.langs, args.cells, args.out / "results.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
