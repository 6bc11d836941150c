"""Search settings as one object (`SearchSettings`), a model's own defaults (`SearchDefaults`),
and what a search needs besides the model (`SearchPlan`, `SentinelIds`). Light: importable
before torch (so `--help` stays fast)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from translate.text.glossary import Glossary

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """How lines are searched, in one object: built from the commands' flags (`from_args`), from
    a server request, or left at these defaults; hashable, so a server batches together the lines
    that share one. None lengths take the checkpoint's own (its training run's settings)."""

    beam: int = 1
    length_penalty: float = 1.0  # GNMT alpha
    n_best: int = 1
    max_len_a: float | None = None  # at most a * source length + b output tokens
    max_len_b: int | None = None
    max_input_tokens: int | None = None  # a longer line is translated sentence by sentence
    restrict_to_target: bool = False  # only the ids seen on the target side in training
    target_lang: str | None = None  # a many-to-many model's output language
    source_lang: str | None = None  # the input's language, where known
    glossary: Glossary | None = None  # terms written as the glossary's target terms

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SearchSettings:
        """The settings the parsed flags give (those a command does not have keep the default);
        `--glossary FILE` read (a GlossaryError names what is wrong in it)."""
        names = cls.__dataclass_fields__
        given = {
            name: getattr(args, name) for name in names if getattr(args, name, None) is not None
        }
        if "restrict_target" in vars(args):
            given["restrict_to_target"] = bool(args.restrict_target)
        if getattr(args, "glossary_file", None):
            given["glossary"] = Glossary.read(args.glossary_file)
        return cls(**given)


@dataclass(frozen=True)
class SearchDefaults:
    """The beam size and length penalty a model translates with where no flag or request says
    otherwise (`LoadedModel.search_defaults`)."""

    beam: int
    length_penalty: float  # GNMT alpha

    def fill(self, beam: int | None, length_penalty: float | None) -> tuple[int, float]:
        """The beam and length penalty asked for, these defaults where none is."""
        return (
            self.beam if beam is None else beam,
            self.length_penalty if length_penalty is None else length_penalty,
        )


ENGINES = ("auto", "pytorch", "ctranslate2")


@dataclass(frozen=True)
class EngineChoice:
    """The engine asked for (one of `ENGINES`; `engine.choose_engine` makes it concrete), its
    weights (`quantize` "int8": CTranslate2's int8 compute type, else float32) and where
    CTranslate2's conversions of checkpoints are kept (`cache_dir`; None: beside each)."""

    name: str = "pytorch"
    quantize: str = "none"
    cache_dir: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineChoice:
        """The engine the parsed flags ask for: `--engine`, `--engine-cache` and `--quantize` (a
        command without it keeps float32)."""
        return cls(args.engine, getattr(args, "quantize", "none"), args.engine_cache)

    def __post_init__(self) -> None:
        if self.name not in ENGINES:
            raise ValueError(f"the engine must be one of {', '.join(ENGINES)}, got {self.name}")


@dataclass(frozen=True)
class Budget:
    """What one running search holds at most (`Search.room`): the source tokens of its sentences
    not yet answered, and (where given) the bytes of attention cache they will take at their
    length limits. A sentence over either joins an empty search alone."""

    tokens: int
    cache_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.tokens < 1:
            raise ValueError(f"the token budget must be at least 1, got {self.tokens}")
        if self.cache_bytes is not None and self.cache_bytes < 1:
            raise ValueError(f"the cache budget must be at least 1 byte, got {self.cache_bytes}")


@dataclass(frozen=True)
class SentinelIds:
    """The sentinels of a model trained with `data.protect_spans`, as a search reads and writes
    them: sentinel k's id in the source vocabulary (`source[k]`), and the target ids that write
    it (`target`, each for sentinel `target_slot`: its plain and its swapped form)."""

    source: tuple[int, ...]
    target: tuple[int, ...]
    target_slot: tuple[int, ...]


@dataclass(frozen=True)
class SearchPlan:
    """What a search needs besides the model: the settings made concrete for one direction
    (`pipeline.search_plan`); beam 1 is greedy search."""

    beam: int
    length_penalty: float
    n_best: int
    max_len_a: float
    max_len_b: int
    allowed_tokens: Tensor | None = None  # bool over the target vocabulary (restriction)
    never: tuple[int, ...] = ()  # ids never produced (a many-to-many model's language tags)
    # Each sentinel of a source written exactly once, none other (`steps.SentinelRule`).
    sentinels: SentinelIds | None = None

    def lane(self) -> tuple:
        """What every sentence of one search shares (`Search.add`): the beam and n-best sizes, the
        ids never produced and the sentinels; the length penalty, length rule and allowed tokens
        may differ from one sentence to the next."""
        return (self.beam, self.n_best, self.never, self.sentinels)

    def joining(self, plans: Sequence[SearchPlan] | None, count: int) -> Sequence[SearchPlan]:
        """The plans of `count` sentences joining a search of this plan (`Search.add`,
        `engine.CTranslate2Lane.add`; None: this plan for each); a ValueError unless every one
        keeps this plan's lane."""
        plans = plans or [self] * count
        for plan in {id(plan): plan for plan in plans}.values():
            if plan.lane() != self.lane():
                raise ValueError(
                    f"a sentence's plan must keep the search's beam, n-best, blocked ids and "
                    f"sentinels {self.lane()}, got {plan.lane()}"
                )
        return plans

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise ValueError(f"beam must be at least 1, got {self.beam}")
        if not 1 <= self.n_best <= self.beam:
            raise ValueError(
                f"n_best must be between 1 and the beam size {self.beam}, got {self.n_best}"
            )
