"""How many of a glossary's terms a translation uses (`--metrics terms` with `--glossary FILE`).

A term of a source line counts where the glossary finds it there outside the protected spans
(`protected.masked_spans`, what `--glossary` masks); it is used where the translation holds its
target term, as many times as the line has it, up to that. The same measure with and without
`--glossary` (translate-eval --hypotheses on the two outputs, each with --glossary) tells what
the glossary changes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from translate.score.copy_rate import LineCounts
from translate.text.glossary import Glossary
from translate.text.protected import TERM, masked_spans

SIGNATURE = "terms|the glossary's target terms for the source's|version:1"


class LineTerms(LineCounts):
    """One line's target terms that count (`counted`, by term) and those its translation lacks."""

    def failures(self) -> list[dict]:
        return [{"term": term, "missing": count} for term, count in sorted(self.missing.items())]


def line_terms(glossary: Glossary, source: str, hypothesis: str) -> LineTerms:
    counted = Counter(
        glossary.target(span.text) for span in masked_spans(source, glossary) if span.kind == TERM
    )
    used = Counter({term: hypothesis.count(term) for term in counted})
    return LineTerms(counted, counted - used)


@dataclass(frozen=True)
class TermUse:
    """The corpus's terms counted and used."""

    counted: int
    used: int
    lines: int  # lines with a term

    @property
    def score(self) -> float:
        """Used of counted, in percent; NaN where no source holds a term."""
        return 100 * self.used / self.counted if self.counted else float("nan")

    def detail(self) -> str:
        if not self.counted:
            return "no glossary term in the source"
        return f"{self.used}/{self.counted} terms used, in {self.lines} lines"


def term_use(glossary: Glossary, sources: list[str], hypotheses: list[str]) -> TermUse:
    lines = [line_terms(glossary, s, h) for s, h in zip(sources, hypotheses, strict=True)]
    counted = sum(sum(line.counted.values()) for line in lines)
    missing = sum(sum(line.missing.values()) for line in lines)
    return TermUse(counted, counted - missing, sum(bool(line.counted) for line in lines))
