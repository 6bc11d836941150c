"""A run's data as one type: the corpus, its format and splits, the languages and directions,
and the settings that change how lines are read (length limit, protected spans, tag position).

The `data:` section of a config is interpreted here only: translate-train builds its data
module from it, and every command that loads a checkpoint reads the section saved in it
(`RunData.from_run_config`). A checkpoint's copy is read leniently, as a record: a field of the
wrong type counts as not recorded, since it cannot be fixed by the user who loads the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from translate.text.corpus import BUNDLED_CORPUS, CorpusError, CorpusFormat, read_split
from translate.text.languages import Direction, TagPosition, english_centric

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class SplitText:
    """One direction of one split: its source and reference lines, and how to name them."""

    direction: Direction
    sources: list[str]
    references: list[str]
    description: str


class EmptySplitError(CorpusError):
    """A split that holds no pair of the direction asked for."""

    def __init__(self, corpus: Path, split: str, direction: Direction) -> None:
        self.corpus, self.split, self.direction = corpus, split, direction
        super().__init__(f"split '{split}' of {corpus} has no {direction[0]}→{direction[1]} pairs")


@dataclass(frozen=True)
class RunData:
    """What a run trains on. `languages` is (source, target) as the config names them (None
    where not recorded); `directions` every direction trained, one for a bilingual model;
    `many_to_many` whether the config asked for several (data.languages or data.directions)."""

    corpus: Path = BUNDLED_CORPUS
    corpus_format: CorpusFormat = "text"
    hf_config: str | None = None
    languages: Direction | None = None
    directions: tuple[Direction, ...] = ()
    many_to_many: bool = False
    own_corpora: Mapping[Direction, Path] = field(default_factory=dict)
    splits: Mapping[str, str] = field(default_factory=lambda: {s: s for s in SPLITS})
    lang_tag: TagPosition = "decoder"
    max_length: int | None = None
    protect_spans: float = 0.0

    @classmethod
    def from_settings(cls, data: Mapping) -> RunData:
        """The `data:` section of a config (as given, or as a checkpoint saved it)."""

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) and value else None

        src, tgt = text("src_lang"), text("tgt_lang")
        languages = (src, tgt) if src and tgt else None
        listed = [d for d in _list(data.get("directions")) if _is_direction(d)]
        others = [lang for lang in _list(data.get("languages")) if isinstance(lang, str)]
        if listed:
            directions = [(d[0], d[1]) for d in listed]
        elif others:
            directions = english_centric(src or "en", others)
        else:
            directions = [languages] if languages else []
        max_length = data.get("max_length")
        protect = data.get("protect_spans")
        tag = data.get("lang_tag")
        return cls(
            corpus=Path(text("corpus_dir") or BUNDLED_CORPUS),
            corpus_format=text("corpus_format") or "text",
            hf_config=text("hf_config"),
            languages=languages,
            directions=tuple(directions),
            many_to_many=bool(listed or others),
            own_corpora={(d[0], d[1]): Path(d[2]) for d in listed if len(d) > 2},
            splits={s: text(f"{s}_split") or s for s in SPLITS},
            lang_tag=tag if tag in ("source", "decoder") else "decoder",
            max_length=max_length if type(max_length) is int and max_length > 0 else None,
            protect_spans=float(protect) if type(protect) in (int, float) else 0.0,
        )

    @classmethod
    def from_run_config(cls, run_config: str | None) -> RunData:
        """The `data:` section of a run's saved config; nothing recorded where there is none."""
        data = run_settings(run_config).get("data")
        return cls.from_settings(data if isinstance(data, dict) else {})

    @property
    def target_languages(self) -> list[str]:
        return list(dict.fromkeys(tgt for _, tgt in self.directions))

    @property
    def known_languages(self) -> list[str]:
        """Every language of the directions, sorted."""
        return sorted({lang for direction in self.directions for lang in direction})

    def corpus_of(self, direction: Direction) -> Path:
        """The directory (or dataset) a direction is read from: its own, else the run's corpus."""
        return self.own_corpora.get(tuple(direction), self.corpus)

    def split_name(self, split: str | None) -> str:
        """The name the corpus gives a split (`data.test_split`, ...); None is the test split, and
        a name that is not one of the three is taken as it is."""
        split = split or "test"
        return self.splits.get(split, split)

    def read(self, split: str | None, direction: Direction) -> SplitText:
        """One direction of one split, read whole (dev and test sets are small); CorpusError
        where the corpus is not at hand or the split holds no pair of the direction."""
        name, corpus = self.split_name(split), self.corpus_of(direction)
        pairs = read_split(corpus, name, *direction, self.corpus_format, self.hf_config)
        if not pairs:
            raise EmptySplitError(corpus, name, direction)
        return SplitText(
            tuple(direction),
            [src for src, _ in pairs],
            [tgt for _, tgt in pairs],
            f"{direction[0]}→{direction[1]}, split '{name}' of {corpus}",
        )


def run_settings(run_config: str | None) -> dict:
    """A run's saved config (the YAML translate-train resolved), or {} where there is none."""
    try:
        settings = yaml.safe_load(run_config or "")
    except yaml.YAMLError:
        return {}
    return settings if isinstance(settings, dict) else {}


def _list(value) -> list:
    return list(value) if isinstance(value, list | tuple) else []


def _is_direction(value) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) >= 2
        and all(isinstance(part, str) for part in value[:3])
    )
