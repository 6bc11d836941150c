"""How many protected tokens a translation carries over unchanged (`--metrics copy`), and how
many of the source's digit runs it has (`--metrics digits`).

The rule: a protected span of a source line (`translate.text.protected.find_spans`: a number,
placeholder, URL, email address, @mention, #hashtag, file path or key combination) counts when
the line's reference keeps it, the same text found as the same class (with several
references, the one that keeps it most often); it is kept when the hypothesis has it too. Each
span counts as often as the source and the reference both have it, and is kept as often as the
hypothesis has it, up to that. So "3.5" that a German reference writes "3,5" does not count,
and "36" in "Click button 36." is kept only if the translation writes "36" as a number of its
own ("136" is not it).

The plain rule (`digits`) needs no reference and knows no class: each run of digits of a source
line counts, as often as the line has it, and is kept as often as the translation has that run
(`3.5` written `3,5` keeps both; `16x16` written `1611661161116` keeps none; a number that the
reference writes otherwise counts all the same).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from translate.text.protected import CLASSES, digit_runs, find_spans

SIGNATURE = f"copy|classes:{','.join(CLASSES)}|version:2"
DIGITS_SIGNATURE = "digits|runs of the source|version:1"


@dataclass(frozen=True)
class LineCounts:
    """What one line counts and what its hypothesis lacks of it (each with its multiplicity)."""

    counted: Counter
    missing: Counter

    @property
    def score(self) -> float | None:
        """The share kept, in percent; None where nothing counts."""
        total = sum(self.counted.values())
        return None if not total else 100 * (1 - sum(self.missing.values()) / total)


class LineCopy(LineCounts):
    """One line's protected spans that count, by (class, text), and those the hypothesis lost."""

    def failures(self) -> list[dict]:
        return [
            {"class": kind, "text": text, "missing": count}
            for (kind, text), count in sorted(self.missing.items())
        ]


def _spans(text: str) -> Counter:
    return Counter((span.kind, span.text) for span in find_spans(text))


def line_copy(source: str, hypothesis: str, references: list[str]) -> LineCopy:
    found = _spans(source)
    kept_by_references = Counter()
    for reference in references:
        kept_by_references |= _spans(reference)  # the most any one reference keeps
    counted = found & kept_by_references
    return LineCopy(counted, counted - _spans(hypothesis))


@dataclass(frozen=True)
class CopyScore:
    """Protected spans counted and kept, by class and overall."""

    counted: dict[str, int]
    kept: dict[str, int]

    @property
    def score(self) -> float:
        """Kept of counted, in percent; NaN where nothing counts."""
        total = sum(self.counted.values())
        return 100 * sum(self.kept.values()) / total if total else float("nan")

    def detail(self) -> str:
        """Each class that counts: kept/counted (share)."""
        parts = [
            f"{kind} {self.kept[kind]}/{self.counted[kind]} "
            f"({100 * self.kept[kind] / self.counted[kind]:.1f}%)"
            for kind in CLASSES
            if self.counted[kind]
        ]
        return ", ".join(parts) or "no protected span in both a source line and its reference"


def copy_score(sources: list[str], hypotheses: list[str], references: list[list[str]]) -> CopyScore:
    """The corpus's `CopyScore` (`references`: one list of lines per reference)."""
    counted, kept = Counter(), Counter()
    for i, (source, hypothesis) in enumerate(zip(sources, hypotheses, strict=True)):
        line = line_copy(source, hypothesis, [reference[i] for reference in references])
        for (kind, _), count in line.counted.items():
            counted[kind] += count
        for (kind, _), count in (line.counted - line.missing).items():
            kept[kind] += count
    return CopyScore({k: counted[k] for k in CLASSES}, {k: kept[k] for k in CLASSES})


class LineDigits(LineCounts):
    """One line's digit runs (`counted`, by run) and those its translation lacks (`missing`)."""

    def failures(self) -> list[dict]:
        return [{"digits": run, "missing": count} for run, count in sorted(self.missing.items())]


def line_digits(source: str, hypothesis: str) -> LineDigits:
    counted = Counter(digit_runs(source))
    return LineDigits(counted, counted - Counter(digit_runs(hypothesis)))


@dataclass(frozen=True)
class DigitScore:
    """The corpus's digit runs counted and kept (the plain rule)."""

    counted: int
    kept: int
    lines_with_loss: int

    @property
    def score(self) -> float:
        """Kept of counted, in percent; NaN where no source has a digit."""
        return 100 * self.kept / self.counted if self.counted else float("nan")

    def detail(self) -> str:
        if not self.counted:
            return "no digit in the source"
        return f"{self.kept}/{self.counted} digit runs, {self.lines_with_loss} lines lose one"


def digit_score(sources: list[str], hypotheses: list[str]) -> DigitScore:
    lines = [line_digits(s, h) for s, h in zip(sources, hypotheses, strict=True)]
    counted = sum(sum(line.counted.values()) for line in lines)
    missing = sum(sum(line.missing.values()) for line in lines)
    return DigitScore(counted, counted - missing, sum(bool(line.missing) for line in lines))
