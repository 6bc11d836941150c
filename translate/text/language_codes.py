"""A model's language codes as LibreTranslate and Argos Translate write them, and their names.

LibreTranslate writes ISO 639-1 codes, with three exceptions: zh-Hans and zh-Hant for Chinese in
simplified and traditional script, and pt-BR. Argos packages write those three as zh, zt and pb.
Both read either spelling, in any case. A model's own codes (zh-CN, zh-TW, pt-BR, de, ...) map
to them here, once, for every route and export that needs them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from translate.text.language_id import base_language

TRADITIONAL = ("tw", "hk", "mo", "hant")  # regions and scripts written in traditional Chinese
# LibreTranslate's codes that differ from Argos's (LibreTranslate's language.py aliases).
ARGOS_ALIASES = {"zh-Hans": "zh", "zh-Hant": "zt", "pt-BR": "pb"}
_ALIASES_READ = {libre.lower(): argos for libre, argos in ARGOS_ALIASES.items()}
SPECIAL_NAMES = {
    "zh-Hans": "Chinese (Simplified)",
    "zh-Hant": "Chinese (Traditional)",
    "pt-BR": "Portuguese (Brazil)",
}


def libretranslate_code(code: str) -> str:
    """`zh-CN` → zh-Hans, `zh-TW` → zh-Hant, `pt-BR` → pt-BR, `de-AT` → de."""
    base = base_language(code)
    rest = code.replace("_", "-").lower().split("-")[1:]
    if base == "zh":
        return "zh-Hant" if any(part in TRADITIONAL for part in rest) else "zh-Hans"
    if base == "pt" and "br" in rest:
        return "pt-BR"
    return base


def argos_code(code: str) -> str:
    """An Argos package's code for one of a model's languages: zh, zt, pb or ISO 639-1."""
    libre = libretranslate_code(code)
    return ARGOS_ALIASES.get(libre, libre)


def as_libretranslate_reads(code: str) -> str:
    """A code a client sent as LibreTranslate reads it, and names it in its errors: lower-cased,
    zh-Hans, zh-Hant and pt-BR as Argos's zh, zt and pb."""
    lower = code.strip().lower()
    return _ALIASES_READ.get(lower, lower)


def language_name(code: str) -> str:
    """An English name: lingua's, where it knows the language, else the code itself."""
    libre = libretranslate_code(code)
    if libre in SPECIAL_NAMES:
        return SPECIAL_NAMES[libre]
    try:
        from lingua import IsoCode639_1, Language

        return Language.from_iso_code_639_1(IsoCode639_1.from_str(libre)).name.title()
    except (ImportError, ValueError, AttributeError):
        return code


@dataclass(frozen=True)
class LanguageCodes:
    """A model's languages under their LibreTranslate codes, and back: one code a language (a
    second language that would share one, e.g. pt beside pt-PT, keeps its own code)."""

    libre: dict[str, str]  # the model's code -> LibreTranslate's
    model: dict[str, str]  # any accepted spelling, lower-cased -> the model's code

    @classmethod
    def of(cls, codes: Iterable[str]) -> LanguageCodes:
        libre, model = {}, {}
        for code in dict.fromkeys(codes):
            written = libretranslate_code(code)
            if written.lower() in model:
                written = code
            libre[code] = written
            for spelling in (written, ARGOS_ALIASES.get(written, written), code):
                model.setdefault(spelling.lower(), code)
        return cls(libre, model)

    def to_model(self, code: str) -> str | None:
        """The model's code for a code a client sent (either spelling, any case), or None."""
        return self.model.get(code.strip().lower())
