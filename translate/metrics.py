"""Corpus BLEU and chrF with sacrebleu, on detokenized text, with the signatures that make them comparable."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from sacrebleu.metrics import BLEU, CHRF
from torchmetrics import Metric


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


def corpus_scores(hypotheses: list[str], references: list[str]) -> Scores:
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: every line needs one"
        )
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


class CorpusBLEU(Metric):
    """sacrebleu's corpus BLEU as a torchmetrics Metric, for validation under DDP.

    The state is sacrebleu's own sufficient statistics (n-gram matches and totals, hypothesis
    and reference lengths), summed over batches and over ranks; the score is computed from the
    sums by sacrebleu, so it equals `corpus_scores` on all the sentences at once, smoothing
    included.
    """

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self._bleu = BLEU()
        order = self._bleu.max_ngram_order
        self.add_state("counts", default=torch.zeros(order, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("totals", default=torch.zeros(order, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("lengths", default=torch.zeros(2, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, hypotheses: list[str], references: list[str]) -> None:
        score = self._bleu.corpus_score(hypotheses, [references])
        self.counts += torch.tensor(score.counts, dtype=torch.float64, device=self.counts.device)
        self.totals += torch.tensor(score.totals, dtype=torch.float64, device=self.totals.device)
        self.lengths += torch.tensor([score.sys_len, score.ref_len], dtype=torch.float64, device=self.lengths.device)

    def compute(self) -> torch.Tensor:
        score = BLEU.compute_bleu(
            [int(c) for c in self.counts], [int(t) for t in self.totals],
            int(self.lengths[0]), int(self.lengths[1]), smooth_method="exp",
        )
        return torch.tensor(score.score, dtype=torch.float64)
