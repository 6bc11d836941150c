"""Translation directions, named and parsed: what a many-to-many model is trained on and asked for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

TagPosition = Literal["source", "decoder"]
Direction = tuple[str, str]


def direction_name(direction: Direction) -> str:
    return f"{direction[0]}-{direction[1]}"


def english_centric(pivot: str, languages: Sequence[str]) -> list[Direction]:
    """Both directions between `pivot` and every other language."""
    return [d for lang in languages if lang != pivot for d in ((pivot, lang), (lang, pivot))]


def parse_direction(text: str, languages: Sequence[str]) -> Direction:
    """`en-zh-CN` → ('en', 'zh-CN'): the one split into two of `languages` (codes may hold '-')."""
    splits = [(text[:i], text[i + 1 :]) for i, char in enumerate(text) if char == "-"]
    matches = [(a, b) for a, b in splits if a in languages and b in languages]
    if len(matches) != 1:
        raise ValueError(
            f"{text!r} is not SRC-TGT of two languages among {', '.join(sorted(languages))}"
        )
    return matches[0]
