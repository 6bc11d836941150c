"""BLEU by source length, one bar per system in each length bucket: where a system gains or
loses is easier seen than read."""

from __future__ import annotations

import io
from dataclasses import dataclass

from translate.errors import UsageError
from translate.score.metrics import make_metric

BUCKET_EDGES = (10, 20, 30, 40, 60)  # source words: 1-10, 11-20, ..., 41-60, 61+


@dataclass(frozen=True)
class Bucket:
    label: str
    lines: list[int]


def length_buckets(sources: list[str], edges: tuple[int, ...] = BUCKET_EDGES) -> list[Bucket]:
    """Line numbers grouped by the source's length in words; empty buckets are left out."""
    bounds = [(1 if i == 0 else edges[i - 1] + 1, edge) for i, edge in enumerate(edges)]
    bounds.append((edges[-1] + 1, None))
    words = [max(len(source.split()), 1) for source in sources]  # an empty line in the first
    buckets = []
    for low, high in bounds:
        lines = [i for i, n in enumerate(words) if low <= n and (high is None or n <= high)]
        if lines:
            buckets.append(Bucket(f"{low}-{high}" if high else f"{low}+", lines))
    return buckets


def bucket_bleu(hypotheses: list[str], references: list[list[str]], bucket: Bucket, bleu) -> float:
    """Corpus BLEU (`bleu`: sacrebleu's metric) of the bucket's lines alone."""
    return bleu.corpus_score(
        [hypotheses[i] for i in bucket.lines],
        [[reference[i] for i in bucket.lines] for reference in references],
    ).score


def length_plot(
    sources: list[str],
    systems: list[tuple[str, list[str]]],
    references: list[list[str]],
    target_lang: str | None = None,
) -> bytes:
    """A PNG: corpus BLEU of each system within each source-length bucket, the line count below."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError(
            "the plot is drawn with matplotlib, which is not installed: pip install -e '.[study]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = length_buckets(sources)
    bleu = make_metric("bleu", target_lang)  # one tokenizer for every bucket and system
    width = 0.8 / len(systems)
    figure, axis = plt.subplots(figsize=(max(6, 1.2 * len(buckets) * len(systems) ** 0.5), 4))
    for k, (name, hypotheses) in enumerate(systems):
        scores = [bucket_bleu(hypotheses, references, b, bleu) for b in buckets]
        positions = [i + k * width for i in range(len(buckets))]
        axis.bar(positions, scores, width, label=name)
    axis.set_xticks(
        [i + width * (len(systems) - 1) / 2 for i in range(len(buckets))],
        [f"{b.label}\n({len(b.lines):,} lines)" for b in buckets],
    )
    axis.set_xlabel("source length (words)")
    axis.set_ylabel("BLEU")
    axis.set_title("BLEU by source length", fontsize=10)
    axis.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()
