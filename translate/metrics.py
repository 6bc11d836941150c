"""Corpus BLEU and chrF with sacrebleu, on detokenized text, with the signatures that make them comparable."""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from translate.errors import UsageError


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_detail: str

    def report(self) -> str:
        return (
            f"BLEU {self.bleu:.2f}  ({self.bleu_detail})\n"
            f"  signature: {self.bleu_signature}\n"
            f"chrF2 {self.chrf:.2f}\n"
            f"  signature: {self.chrf_signature}"
        )


def corpus_scores(
    hypotheses: list[str], references: list[str], names: tuple[str, str] = ("the hypotheses", "the references")
) -> Scores:
    """sacrebleu's corpus BLEU and chrF2; `names` (of the hypotheses and the references, e.g.
    their files) are what an error about them says."""
    hypotheses_name, references_name = names
    if len(hypotheses) != len(references):
        raise UsageError(
            f"{hypotheses_name} has {len(hypotheses)} lines but {references_name} has "
            f"{len(references)}: every line needs one reference"
        )
    if not any(reference.strip() for reference in references):
        what = "no lines" if not references else f"{len(references)} lines, all of them empty"
        raise UsageError(f"nothing to score: {references_name} has {what}")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return Scores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_detail=str(bleu_score),
    )
