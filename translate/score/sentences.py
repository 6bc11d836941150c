"""Sentence-level scores for error analysis: one JSON object per line, the worst easy to sort out."""

from __future__ import annotations

import json

from translate.score.metrics import SOURCE_METRICS, sentence_scores
from translate.text.glossary import Glossary


def sentence_records(
    sources: list[str] | None,
    hypotheses: list[str],
    references: list[list[str]],
    metrics: tuple[str, ...],
    target_lang: str | None = None,
    glossary: Glossary | None = None,
) -> list[str]:
    """JSONL lines: line (1-based), source, hypothesis, reference (a list with several), and
    each metric's sentence score (sentence BLEU with effective order, as sacrebleu's -sl); with
    copy, the share of the line's protected spans kept (null where none counts) and those lost
    (`copy_failures`: class, text, how many times); with digits, the share of its digit runs
    kept and those lost (`digits_failures`); with terms, the share of its glossary terms used and
    those missing (`terms_failures`)."""
    scores = sentence_scores(hypotheses, references, metrics, target_lang, sources, glossary)
    records = []
    for i, hypothesis in enumerate(hypotheses):
        refs = [reference[i] for reference in references]
        record = {
            "line": i + 1,
            "source": sources[i] if sources is not None else None,
            "hypothesis": hypothesis,
            "reference": refs[0] if len(refs) == 1 else refs,
        }
        for name, values in scores.items():
            if name in SOURCE_METRICS:
                line = values[i]
                record[name] = None if line.score is None else round(line.score, 4)
                record[f"{name}_failures"] = line.failures()
            else:
                record[name] = round(values[i], 4)
        records.append(json.dumps(record, ensure_ascii=False))
    return records
