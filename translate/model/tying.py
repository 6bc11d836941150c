"""`tie_embeddings: auto`: the embedding tie chosen from the training data, before training.

The distant-pair study (docs/tying-study.md) trained English into German, Russian, Japanese and
Chinese with every tie on the same sentences: the three-way tie helps where the two sides of a
joint vocabulary spend much of their mass on the same pieces and hurts where they share little.
The rule measures that share on the training data (`PieceUse.shared_mass`, the sum over pieces
of the smaller of the two sides' shares) and ties three ways at or above `SHARED_MASS_THRESHOLD`;
below it, it takes `BELOW_THRESHOLD`, which keeps the source-target tie and leaves the output
projection, where the three-way tie's loss comes from, its own. Separate vocabularies have no
common id space to measure and cannot tie the encoder to the decoder: they get no tie.
"""

from __future__ import annotations

from dataclasses import dataclass

from translate.model.transformer import TIE_MODES, TieMode
from translate.text.vocab_overlap import PieceUse

# Halfway between the shared mass of Russian's training pairs, 0.185, where the tie helps
# (chrF), and Chinese's, 0.121, where it hurts (BLEU and chrF); docs/tying-study.md.
SHARED_MASS_THRESHOLD = 0.15
# The tie below the threshold: the encoder's input embedding tied to the decoder's, the output
# projection apart. Into Japanese and Chinese it was never below the better of no tie and the
# three-way tie, with one matrix fewer than no tie (docs/tying-study.md, "tie_embeddings: auto").
BELOW_THRESHOLD: TieMode = "src_tgt"


@dataclass(frozen=True)
class TieChoice:
    """The tie a model is built with, and what it was chosen from."""

    asked: str  # the configured tie_embeddings ("auto" or a mode)
    mode: TieMode  # the tie built
    shared_mass: float | None  # the training data's, where one joint vocabulary has it
    threshold: float | None  # the rule's, where the rule chose
    target_only_pieces: int | None = None  # pieces only the target side uses (joint vocabulary)

    def describe(self) -> str:
        if self.asked != "auto":
            return f"tie_embeddings {self.mode}{self._rows()}"
        if self.shared_mass is None:
            return f"tie_embeddings auto → {self.mode} (separate vocabularies)"
        side = "≥" if self.shared_mass >= (self.threshold or 0.0) else "<"
        return (
            f"tie_embeddings auto → {self.mode}{self._rows()} (shared mass of the joint "
            f"vocabulary {self.shared_mass:.3f} {side} {self.threshold})"
        )

    def _rows(self) -> str:
        if not TIE_MODES[self.mode].target_rows_apart or self.target_only_pieces is None:
            return ""
        return f", {self.target_only_pieces:,} target-only rows apart"


def auto_mode(shared_mass: float) -> TieMode:
    """The rule: the tie `auto` builds for a joint vocabulary of this shared mass."""
    return "all" if shared_mass >= SHARED_MASS_THRESHOLD else BELOW_THRESHOLD


def choose_tie(asked: str, use: PieceUse | None) -> TieChoice:
    """The tie for the configured `asked` (a mode, or "auto") and the training data's piece use
    (None with separate vocabularies)."""
    shared = None if use is None else use.shared_mass()
    apart = None if use is None else len(use.target_only_ids())
    if asked != "auto":  # a mode, checked where it was configured (ModelConfig)
        return TieChoice(asked, asked, shared, None, apart)  # type: ignore[arg-type]
    if shared is None:
        return TieChoice(asked, "none", None, None)
    return TieChoice(asked, auto_mode(shared), shared, SHARED_MASS_THRESHOLD, apart)
