"""Which language a text is in: the off-target rate of many-to-many models, and translate-serve's
source "auto" and /detect.

lingua (`lingua-language-detector`, which ships its models in the package: nothing is
downloaded) chooses among the languages the model knows, which is where an off-target output
lands in practice, and is accurate on sentence-length text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from translate.errors import UsageError

INSTALL_HINT = "pip install lingua-language-detector (or, in the project directory, pip install -e '.[multilingual]')"


def base_language(code: str) -> str:
    """`zh-CN` → zh, `pt-BR` → pt: the ISO 639-1 part of a language code."""
    return code.split("-")[0].split("_")[0].lower()


@lru_cache(maxsize=8)
def _detector(codes: tuple[str, ...]):
    try:
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder
    except ImportError:
        raise UsageError(
            f"identifying languages needs the lingua language identifier: {INSTALL_HINT}"
        ) from None
    languages = []
    for code in codes:
        try:
            languages.append(Language.from_iso_code_639_1(IsoCode639_1.from_str(code)))
        except (ValueError, AttributeError):
            raise UsageError(
                f"language {code!r} is not one the language identifier knows"
            ) from None
    if len(languages) < 2:
        raise UsageError("identifying a language needs at least two candidate languages")
    return LanguageDetectorBuilder.from_languages(*languages).build()


def detect(texts: Sequence[str], candidates: Iterable[str]) -> list[str | None]:
    """Each text's language among `candidates` (ISO codes, regions ignored); None where the
    text is empty or the identifier cannot tell."""
    codes = tuple(sorted({base_language(code) for code in candidates}))
    detector = _detector(codes)
    found = []
    for text in texts:
        language = detector.detect_language_of(text) if text.strip() else None
        found.append(None if language is None else language.iso_code_639_1.name.lower())
    return found


def confidences(text: str, candidates: Iterable[str]) -> list[tuple[str, float]]:
    """Each candidate (ISO codes, regions ignored) with lingua's confidence (0 to 1) that `text`
    is in it, most likely first; all 0 where it cannot tell (empty text, emoji)."""
    codes = tuple(sorted({base_language(code) for code in candidates}))
    values = _detector(codes).compute_language_confidence_values(text)
    return [(value.language.iso_code_639_1.name.lower(), value.value) for value in values]


def off_target_rate(texts: Sequence[str], target: str, candidates: Iterable[str]) -> float:
    """The share of non-empty `texts` identified as a language other than `target`."""
    found = [
        language
        for text, language in zip(texts, detect(texts, [target, *candidates]))
        if text.strip()
    ]
    return sum(
        language is not None and language != base_language(target) for language in found
    ) / max(len(found), 1)
