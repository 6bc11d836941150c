"""How well the search's confidence (`pipeline.Translation.confidence`) tells good translations
from bad ones: its correlation with sentence chrF, and the bad ones a threshold flags.

A translation under `BAD_CHRF` sentence chrF counts as bad. Flagging every translation under a
confidence threshold catches some of the bad ones and raises some false alarms (good ones
flagged); each of `FALSE_ALARMS` sets a threshold: the confidence under which that share of
the good translations falls."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from translate.score.metrics import sentence_scores

BAD_CHRF = 30.0
FALSE_ALARMS = (0.1, 0.2)


@dataclass(frozen=True)
class Flagging:
    """Flagging the translations under `threshold` confidence: `false_alarms`, the share of the
    good ones flagged, and `caught`, the share of the bad ones."""

    false_alarms: float
    threshold: float
    caught: float


@dataclass(frozen=True)
class ConfidenceReport:
    """The confidence against sentence chrF over `lines` translations (blank sources left
    out): Pearson's and Spearman's correlations, the share of bad translations and how the
    thresholds flag them (none where every translation is good or every one bad)."""

    lines: int
    pearson: float
    spearman: float
    bad: float
    flagging: tuple[Flagging, ...]

    def summary(self) -> str:
        """One line for translate-eval's output."""
        said = (
            f"confidence against sentence chrF over {self.lines:,} lines: Pearson "
            f"{self.pearson:.3f}, Spearman {self.spearman:.3f}; under chrF {BAD_CHRF:g}: "
            f"{self.bad:.1%}"
        )
        for flag in self.flagging:
            said += (
                f"; flagged under {flag.threshold:.3f}: {flag.caught:.1%} of them, "
                f"{flag.false_alarms:.0%} of the others"
            )
        return said

    def to_json(self) -> dict:
        return {
            "lines": self.lines,
            "pearson": self.pearson,
            "spearman": self.spearman,
            "bad_chrf": BAD_CHRF,
            "bad": self.bad,
            "flagging": [vars(flag) for flag in self.flagging],
        }


def confidence_report(
    confidences: list[float],
    hypotheses: list[str],
    references: list[list[str]],
    sources: list[str],
    target_lang: str | None = None,
) -> ConfidenceReport:
    """The report for translations `hypotheses` of `sources` with their `confidences`, scored
    against `references` (one list of lines per reference); a ValueError where fewer than two
    non-blank lines are left, or all have one confidence or one chrF."""
    chrf = sentence_scores(hypotheses, references, ("chrf",), target_lang)["chrf"]
    kept = [i for i, source in enumerate(sources) if source.strip()]
    if len(kept) < 2:
        raise ValueError("the confidence needs two or more non-blank lines to correlate")
    sure, scores = [confidences[i] for i in kept], [chrf[i] for i in kept]
    for name, values in (("confidence", sure), ("sentence chrF", scores)):
        if len(set(values)) < 2:
            raise ValueError(f"every line has the same {name}: there is nothing to correlate")
    bad = [score < BAD_CHRF for score in scores]
    good_sure = sorted(c for c, is_bad in zip(sure, bad) if not is_bad)
    bad_sure = [c for c, is_bad in zip(sure, bad) if is_bad]
    flagging = ()
    if good_sure and bad_sure:
        flagging = tuple(_flagging(share, good_sure, bad_sure) for share in FALSE_ALARMS)
    return ConfidenceReport(
        len(kept),
        statistics.correlation(sure, scores),
        statistics.correlation(_ranks(sure), _ranks(scores)),
        sum(bad) / len(bad),
        flagging,
    )


def _flagging(share: float, good: list[float], bad: list[float]) -> Flagging:
    """The threshold under which `share` of the `good` confidences (sorted) fall, and the
    shares of both it flags."""
    threshold = good[min(len(good) - 1, math.ceil(share * len(good)))]
    return Flagging(
        sum(c < threshold for c in good) / len(good),
        threshold,
        sum(c < threshold for c in bad) / len(bad),
    )


def _ranks(values: list[float]) -> list[float]:
    """Each value's rank (0-based), ties given their mean rank: Spearman's correlation is
    Pearson's of the ranks."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2
        start = end + 1
    return ranks
