"""Scoring detokenized text with sacrebleu: corpus and sentence metrics (BLEU, chrF2, chrF2++,
TER; several references), public test sets by name, paired significance tests between systems,
and BLEU by source length. Imports only text/ and the ground; no torch."""
