"""Search settings as the commands take them, checked before any work, with a checkpoint's tuned
defaults filled in. Light: importable before torch (so `--help` stays fast)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from translate.defaults import LENGTH_PENALTY_RANGE

if TYPE_CHECKING:
    from torch import Tensor

Engine = Literal["auto", "cohorts", "slots"]  # translate/decode/engine.py
ENGINES: tuple[str, ...] = get_args(Engine)


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
    engine: Engine = "auto"  # which search engine (translate/decode/engine.py)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SearchSettings:
        """The settings the parsed flags give (those a command does not have keep the default)."""
        names = cls.__dataclass_fields__
        given = {
            name: getattr(args, name) for name in names if getattr(args, name, None) is not None
        }
        if "restrict_target" in vars(args):
            given["restrict_to_target"] = bool(args.restrict_target)
        return cls(**given)


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
    engine: Engine = "auto"
    # Each sentinel of a source written exactly once, none other (`search.SentinelRule`).
    sentinels: SentinelIds | None = None


def search_settings_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the parsed search settings, or None (checked before any work)."""
    if args.beam is not None and args.beam < 1:
        return f"--beam must be at least 1, got {args.beam}"
    if (
        args.length_penalty is not None
        and not LENGTH_PENALTY_RANGE[0] <= args.length_penalty <= LENGTH_PENALTY_RANGE[1]
    ):
        return (
            f"--length-penalty must be between {LENGTH_PENALTY_RANGE[0]:g} and {LENGTH_PENALTY_RANGE[1]:g}, "
            f"got {args.length_penalty}"
        )
    if args.batch_tokens < 1:
        return f"--batch-tokens must be at least 1, got {args.batch_tokens}"
    if args.max_input_tokens is not None and args.max_input_tokens < 1:
        return f"--max-input-tokens must be at least 1, got {args.max_input_tokens}"
    n_best = getattr(args, "n_best", 1)
    if n_best < 1 or (args.beam is not None and n_best > args.beam):
        return f"--n-best {n_best} must be between 1 and the beam size (--beam {args.beam})"
    if args.precision == "16-mixed" and args.device == "cpu":
        return "--precision 16-mixed (float16 autocast) needs a CUDA device; on the CPU use bf16-mixed or 32-true"
    if args.quantize == "int8" and (args.device == "cuda" or args.precision != "32-true"):
        return "--quantize int8 runs on the CPU in 32-true: add --device cpu and leave --precision at 32-true"
    return None


def apply_search_defaults(args: argparse.Namespace, translator) -> None:
    """Fill --beam and --length-penalty where not given from the checkpoint's tuned settings."""
    from translate.errors import UsageError

    defaults = translator.search_defaults()
    if args.beam is None:
        args.beam = defaults["beam"]
    if args.length_penalty is None:
        args.length_penalty = defaults["length_penalty"]
    error = search_settings_error(args)
    if error:
        raise UsageError(error)
