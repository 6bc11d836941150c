"""What systems are scored on (`ScoredText`: sources, references, direction), one direction's
scores as translate-eval reports them (`DirectionScores`), and their table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from translate.errors import UsageError
from translate.score.metrics import DISPLAY_NAMES, SOURCE_METRICS, score_corpus
from translate.text.glossary import Glossary

UNKNOWN = "?"  # a direction's language where it is not known


class LineCountError(UsageError):
    """A reference file whose line count differs from the source's."""

    def __init__(self, source: str, lines: int, reference: str, reference_lines: int) -> None:
        self.source, self.lines = source, lines
        self.reference, self.reference_lines = reference, reference_lines
        super().__init__(
            f"{source} has {lines} lines but {reference} has {reference_lines}: every line needs "
            "one reference"
        )


@dataclass
class ScoredText:
    """Sources (None where only hypotheses are scored), one list of lines per reference, the
    (source, target) direction ("?" where a language is not known; the target may be None),
    and how an error or a report names them."""

    sources: list[str] | None
    references: list[list[str]]
    reference_names: list[str]
    direction: tuple[str, str | None]
    description: str
    glossary: Glossary | None = None  # whose terms `--metrics terms` counts

    @property
    def target_lang(self) -> str | None:
        return self.direction[1]

    @property
    def source_lang(self) -> str | None:
        return None if self.direction[0] == UNKNOWN else self.direction[0]


def files_text(
    source: str | None,
    references: list[str],
    direction: tuple[str, str | None] = (UNKNOWN, None),
) -> ScoredText:
    """Text read from files: a source (or none) and its references, line for line."""
    from translate.text.corpus import read_lines

    sources = read_lines(source) if source else None
    lines = [read_lines(path) for path in references]
    if sources is not None:
        for path, reference in zip(references, lines, strict=True):
            if len(sources) != len(reference):
                raise LineCountError(source, len(sources), path, len(reference))
    against = " and ".join(references)
    description = f"{source} against {against}" if source else f"against {against}"
    return ScoredText(sources, lines, list(references), direction, description)


def test_set_text(name: str, pair: str) -> ScoredText:
    """A test set sacrebleu knows, in `pair` (as sacrebleu writes it: en-de, en-zh)."""
    from translate.score.test_sets import load_test_set

    test_set = load_test_set(name, pair)
    source, target = pair.split("-", 1)
    return ScoredText(
        test_set.sources,
        test_set.references,
        [f"{test_set.name} {pair} reference"] * len(test_set.references),
        (source, target),
        test_set.description(),
    )


@dataclass
class DirectionScores:
    """One direction's corpus scores: each metric's score, signature and detail; `trained`
    (whether the model was trained on the direction) and `off_target` (the share of outputs in
    another of its languages) where a model's translations are scored."""

    direction: str
    lines: int
    references: int
    scores: dict = field(default_factory=dict)  # metric -> MetricScore
    trained: bool | None = None
    off_target: float | None = None

    @classmethod
    def of(
        cls,
        text: ScoredText,
        hypotheses: list[str],
        metrics: tuple[str, ...],
        name: str,
        trained: bool | None = None,
        target_languages: list[str] | None = None,
    ) -> DirectionScores:
        """The scores of `hypotheses` (called `name` in errors) on `text`; with
        `target_languages`, a many-to-many model's, the off-target rate among them."""
        scores = score_corpus(
            hypotheses,
            text.references,
            metrics,
            text.target_lang,
            (name, text.reference_names),
            text.sources,
            text.glossary,
        )
        off_target = None
        if target_languages:
            from translate.text.language_id import off_target_rate

            off_target = off_target_rate(hypotheses, text.target_lang, target_languages)
        return cls(
            f"{text.direction[0]}-{text.direction[1] or UNKNOWN}",
            len(hypotheses),
            len(text.references),
            {score.metric: score for score in scores},
            trained,
            off_target,
        )

    def score(self, metric: str) -> float | None:
        value = self.scores[metric].score
        return None if math.isnan(value) else value

    def to_json(self) -> dict:
        """As `translate-eval --json` prints it."""
        row = {"direction": self.direction, "lines": self.lines, "references": self.references}
        if self.trained is not None:
            row["trained"] = self.trained
        for metric, score in self.scores.items():
            row[metric] = self.score(metric) if metric in SOURCE_METRICS else score.score
            row[f"{metric}_signature"] = score.signature
            if metric == "bleu":
                row["bleu_detail"], row["brevity_penalty"] = score.detail, score.brevity_penalty
            if metric in SOURCE_METRICS:
                row[f"{metric}_detail"] = score.detail
        if self.off_target is not None:
            row["off_target"] = self.off_target
        return row


def shown(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def scores_table(rows: list[DirectionScores], metrics: tuple[str, ...]) -> str:
    """One direction's scores as lines with their signatures; several as a markdown table with
    the off-target rate (a many-to-many model's) and the signatures below."""
    if len(rows) == 1 and rows[0].off_target is None:
        row, lines = rows[0], []
        for metric in metrics:
            score = row.scores[metric]
            detail = f"  ({score.detail})" if metric in ("bleu", *SOURCE_METRICS) else ""
            lines += [
                f"{DISPLAY_NAMES[metric]} {shown(row.score(metric))}{detail}",
                f"  signature: {score.signature}",
            ]
        return "\n".join(lines)
    names = " | ".join(DISPLAY_NAMES[metric] for metric in metrics)
    lines = [
        f"| direction | lines | {names} | off-target |",
        "|---|---:|" + "---:|" * len(metrics) + "---:|",
    ]
    for row in rows:
        note = " (zero-shot)" if row.trained is False else ""
        off = f"{100 * row.off_target:.1f}%" if row.off_target is not None else ""
        scores = " | ".join(shown(row.score(metric)) for metric in metrics)
        lines.append(f"| {row.direction}{note} | {row.lines:,} | {scores} | {off} |")
    signatures = dict.fromkeys(row.scores[metric].signature for row in rows for metric in metrics)
    return "\n".join(lines + ["", "Signatures: " + ", ".join(f"`{s}`" for s in signatures)])
