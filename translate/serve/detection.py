"""Which of a model's languages a text is in, for LibreTranslate's source "auto" and /detect:
lingua, restricted to the model's languages, with confidences from 0 to 100 (rounded to whole
numbers, written as JSON numbers such as 64.0). A text lingua cannot tell (no letters: emoji,
numbers) is said to be in the model's first source language, with confidence 0."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import HTTPException

from translate.errors import UsageError
from translate.text import language_id

MOST_CANDIDATES = 3  # /detect lists at most this many languages, as LibreTranslate does


@dataclass(frozen=True)
class Detected:
    language: str  # the model's code
    confidence: float  # 0 to 100


class Detector:
    """Detection among `languages` (the model's codes, its first source first; regions told apart
    by nothing but the code, so the first of a base language stands for it)."""

    def __init__(self, languages: Sequence[str]) -> None:
        self.languages = list(languages)
        self.by_base: dict[str, str] = {}
        for code in self.languages:
            self.by_base.setdefault(language_id.base_language(code), code)

    def ranked(self, text: str) -> list[Detected]:
        """The likely languages, most likely first; the first language alone, with confidence 0,
        where lingua cannot tell (no letters, emoji: lingua gives every language 0)."""
        try:
            values = language_id.confidences(text, self.by_base)
        except UsageError as fault:
            raise HTTPException(400, f"cannot detect the language: {fault}") from None
        found = [
            Detected(self.by_base[base], float(round(value * 100)))
            for base, value in values
            if base in self.by_base
        ]
        return [item for item in found if item.confidence > 0] or [Detected(self.languages[0], 0.0)]

    def detect_all(self, texts: Sequence[str]) -> list[Detected]:
        """Over several texts, each language's confidence averaged, as LibreTranslate's /detect
        answers a list: the likely ones, most likely first (one with confidence 0 if none is)."""
        totals: dict[str, float] = {}
        for text in texts:
            for found in self.ranked(text):
                totals[found.language] = totals.get(found.language, 0.0) + found.confidence
        ranked = sorted(totals.items(), key=lambda item: -item[1])
        likely = [
            Detected(language, float(round(total / len(texts))))
            for language, total in ranked
            if total > 0
        ]
        return likely[:MOST_CANDIDATES] or [Detected(self.languages[0], 0.0)]
