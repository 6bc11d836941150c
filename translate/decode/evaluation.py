"""A checkpoint scored on text: which text (its own splits, a test set sacrebleu knows, or
given files), its translations under one search setting a direction, and their scores. What
translate-eval runs, and translate-tune for each candidate setting."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from translate.decode.loaded_model import LoadedModel
from translate.decode.settings import SearchSettings
from translate.errors import UsageError
from translate.score.scored_text import (
    UNKNOWN,
    DirectionScores,
    ScoredText,
    files_text,
    test_set_text,
)
from translate.text.corpus import CorpusError
from translate.text.languages import parse_direction

if TYPE_CHECKING:
    from translate.decode.pipeline import Translation


class UnrecordedDataError(UsageError):
    """A checkpoint that does not record the corpus and languages it was trained on."""

    def __init__(self, model_path: str | None) -> None:
        self.model_path = model_path
        super().__init__(f"{model_path} does not record the corpus and languages it was trained on")


class DirectionError(UsageError):
    """A direction asked for (`text`, SRC-TGT) that is not two of the model's languages."""

    def __init__(self, text: str, known: list[str]) -> None:
        self.text, self.known = text, known
        super().__init__(
            f"{text!r} is not SRC-TGT of two languages among {', '.join(sorted(known))}"
        )


class TestSetPairError(UsageError):
    """A test set asked of a model that does not say its one pair of languages."""

    def __init__(self, name: str, model_path: str | None) -> None:
        self.name, self.model_path = name, model_path
        super().__init__(f"test set {name}: {model_path} does not say its one pair of languages")


class OwnCorpusError(UsageError):
    """The corpus a checkpoint was trained on, not at hand (or without the split asked for):
    `error` says what was missing."""

    def __init__(self, error: CorpusError, model_path: str | None) -> None:
        self.error, self.model_path = error, model_path
        super().__init__(f"{error} ({model_path} was trained on this corpus)")


@dataclass(frozen=True)
class TextChoice:
    """Which text a checkpoint is scored on: a test set sacrebleu knows (`test_set`, in
    `language_pair` or the model's pair), files (`source` and `references`, in `source_lang` →
    `target_lang` where given), or else a split of the corpus the model was trained on (every
    direction, or those `directions` names as SRC-TGT)."""

    test_set: str | None = None
    language_pair: str | None = None
    source: str | None = None
    references: tuple[str, ...] = ()
    split: str | None = None
    directions: tuple[str, ...] = ()
    source_lang: str | None = None
    target_lang: str | None = None


def own_texts(
    loaded: LoadedModel,
    split: str | None = None,
    directions: tuple[str, ...] = (),
    sentences: int | None = None,
) -> list[ScoredText]:
    """A split of the checkpoint's own corpus (the test split where None), every direction it
    was trained on or those `directions` names (zero-shot ones too), each cut to its first
    `sentences` lines where given."""
    data = loaded.data
    if not data.directions:
        raise UnrecordedDataError(loaded.path)
    chosen = list(data.directions)
    if directions:
        chosen = [_direction(text, data.known_languages) for text in directions]
    texts = []
    for direction in chosen:
        try:
            split_text = data.read(split, direction)
        except CorpusError as error:
            raise OwnCorpusError(error, loaded.path) from None
        texts.append(
            ScoredText(
                split_text.sources[:sentences],
                [split_text.references[:sentences]],
                [split_text.description],
                split_text.direction,
                split_text.description,
            )
        )
    return texts


def _direction(text: str, known: list[str]) -> tuple[str, str]:
    try:
        return parse_direction(text, known)
    except ValueError:
        raise DirectionError(text, known) from None


def checkpoint_texts(loaded: LoadedModel, choice: TextChoice) -> list[ScoredText]:
    """What a checkpoint is scored on (`TextChoice`), its directions in the model's own codes."""
    from translate.score.test_sets import sacrebleu_pair

    languages = loaded.data.languages
    if choice.test_set:
        if choice.language_pair:
            pair = choice.language_pair
        elif languages:
            pair = sacrebleu_pair(*languages)
        else:
            raise TestSetPairError(choice.test_set, loaded.path)
        text = test_set_text(choice.test_set, pair)
        if loaded.multilingual():
            text.direction = tuple(model_code(loaded, code) for code in text.direction)
        return [text]
    if choice.source:
        from translate.decode.pipeline import target_tags_for

        # A language the model cannot write fails here, before any file is read.
        tags = target_tags_for(loaded, choice.target_lang, choice.source_lang)
        if loaded.multilingual():
            direction = (choice.source_lang or UNKNOWN, tags.target_lang)
        else:
            direction = languages or (choice.source_lang or UNKNOWN, choice.target_lang)
        return [files_text(choice.source, list(choice.references), direction)]
    return own_texts(loaded, choice.split, choice.directions)


def model_code(loaded: LoadedModel, code: str) -> str:
    """sacrebleu's language `code` as the model writes it (zh → zh-CN), else as it is."""
    from translate.text.language_id import base_language

    return next((lang for lang in loaded.data.known_languages if base_language(lang) == code), code)


def direction_settings(
    loaded: LoadedModel, text: ScoredText, settings: SearchSettings
) -> SearchSettings:
    """`settings` for the text's direction: a many-to-many model is told both languages."""
    if not loaded.multilingual():
        return replace(settings, target_lang=None, source_lang=None)
    return replace(settings, target_lang=text.target_lang, source_lang=text.source_lang)


def translate_text(
    loaded: LoadedModel,
    text: ScoredText,
    settings: SearchSettings,
    batch_tokens: int,
    progress: Callable[[int], object] | None = None,
    on_split: Callable | None = None,
) -> list[Translation]:
    """The checkpoint's best translation of each of the text's sources under `settings`, in its
    direction."""
    from translate.decode.pipeline import translate_nbest

    settings = direction_settings(loaded, text, settings)
    if settings.restrict_to_target:
        loaded.target_token_mask(settings.target_lang)  # a checkpoint without them fails first
    found = translate_nbest(
        loaded,
        text.sources,
        settings,
        batch_tokens=batch_tokens,
        progress=progress,
        on_split=on_split,
    )
    return [entries[0] for entries in found]


def checkpoint_scores(
    loaded: LoadedModel,
    text: ScoredText,
    hypotheses: list[str],
    metrics: tuple[str, ...],
    name: str = "the translations",
) -> DirectionScores:
    """The scores of a checkpoint's translations, with whether it was trained on the direction
    and, for a many-to-many model, the off-target rate."""
    trained = text.source_lang is None or tuple(text.direction) in loaded.data.directions
    multilingual = loaded.multilingual()
    return DirectionScores.of(
        text,
        hypotheses,
        metrics,
        name,
        trained=trained,
        target_languages=loaded.data.target_languages if multilingual else None,
    )
