"""Raw lines in, translations out, one for one: checkpoint → ids → search → detokenized text."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from translate.decode.engine import search_sentences
from translate.decode.loaded_model import LoadedModel
from translate.decode.settings import SearchPlan, SearchSettings
from translate.decode.steps import Hypothesis
from translate.defaults import BATCH_TOKENS
from translate.errors import UsageError
from translate.text.glossary import Glossary
from translate.text.protected import Masked, mask, unmask
from translate.text.sentences import is_blank
from translate.text.vocab import EOS_ID, language_tag


@dataclass
class TargetTags:
    """How to ask a model for one output language: a tag before the source (`prefix`) or as the
    decoder's first token (`start`); the tags it must never produce; its allowed targets; and
    whether the asked direction is one the model was not trained on (`zero_shot`: allowed, and
    each front end says so its own way)."""

    prefix: list[int]
    start: int | None
    never: list[int]
    target_lang: str | None
    zero_shot: bool = False


class TargetLanguageError(UsageError):
    """A target language the model cannot write (`asked`), or none asked of a many-to-many model
    that must be told (`asked` None). The facts are fields; each front end names its own field
    for the language and its own name for the model (`reason`)."""

    def __init__(
        self,
        asked: str | None,
        known: list[str],
        model_path: str | None,
        trained: tuple[str, str] | None = None,
    ) -> None:
        self.asked, self.known, self.model_path, self.trained = asked, known, model_path, trained
        reason = self.reason(str(model_path))
        super().__init__(reason if asked is None else f"target language {asked}: {reason}")

    def reason(self, model: str) -> str:
        """Why, with the model called `model` (its path, or "this model")."""
        if self.trained is not None:
            return f"{model} translates {self.trained[0]}→{self.trained[1]} only"
        if self.asked is None:
            return f"{model} is a many-to-many model (target languages {', '.join(self.known)})"
        return (
            f"{model} knows the target languages {', '.join(self.known)} "
            f"(no tag {language_tag(self.asked)} in its vocabulary)"
        )


def target_tags_for(
    loaded: LoadedModel, target_lang: str | None, source_lang: str | None = None
) -> TargetTags:
    """The tag settings that make `loaded` write `target_lang`; a TargetLanguageError for a
    language it does not know. A direction it was not trained on (zero-shot) is allowed and
    marked."""
    tags = loaded.vocab.target.tag_ids()
    if not loaded.multilingual():
        trained = loaded.data.languages
        if target_lang is not None and trained and target_lang != trained[1]:
            raise TargetLanguageError(target_lang, [trained[1]], loaded.path, tuple(trained))
        return TargetTags([], None, [], None)
    known = loaded.data.target_languages
    if target_lang is None:
        if len(known) > 1:
            raise TargetLanguageError(None, known, loaded.path)
        target_lang = known[0]
    if target_lang not in tags:
        raise TargetLanguageError(target_lang, known, loaded.path)
    zero_shot = source_lang is not None and (source_lang, target_lang) not in loaded.data.directions
    tag = tags[target_lang]
    at_source = loaded.data.lang_tag == "source"
    return TargetTags(
        [tag] if at_source else [],
        None if at_source else tag,
        sorted(tags.values()),
        target_lang,
        zero_shot,
    )


@dataclass
class Translation:
    """One entry of an n-best list: detokenized text, length-normalized score, total log-prob,
    and the target tokens that sums over (each segment's EOS included).

    An empty input line is not decoded and gets an empty text with score 0 and no tokens.
    Entries that fill an n-best list the search could not fill (a search space smaller than
    n_best) have an empty text and -inf.
    """

    text: str
    score: float
    log_prob: float
    tokens: int = 0

    @property
    def confidence(self) -> float:
        """The model's confidence in it (`joint_confidence`)."""
        return joint_confidence([self])


def joint_confidence(translations: Sequence[Translation]) -> float:
    """The model's confidence in `translations` together (a text's lines), in [0, 1]: the
    geometric mean of their tokens' probabilities, exp(log-probability / tokens), whatever the
    search's length penalty (1 where nothing was searched, as an empty line; 0 for an entry the
    search could not fill)."""
    tokens = sum(found.tokens for found in translations)
    return math.exp(sum(found.log_prob for found in translations) / tokens) if tokens else 1.0


def length_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Indexes of the non-empty sentences, shortest first, cut into batches of at most
    `batch_tokens` padded source tokens (EOS counted); a longer sentence goes alone.

    Sorting by length keeps padding, and the steps spent on sentences that finished early,
    small.  The benchmark uses this too, so every system decodes the same batches.
    """
    order = sorted((i for i, length in enumerate(lengths) if length), key=lambda i: lengths[i])
    batches, start = [], 0
    while start < len(order):
        longest = lengths[order[start]] + 1
        end = start + 1
        while end < len(order) and (lengths[order[end]] + 1) * (end - start + 1) <= max(
            batch_tokens, longest
        ):
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


# What ends a sentence in a SentencePiece piece (closing quotes and brackets after it allowed):
# where an over-long line is cut.
SENTENCE_END = tuple(".!?;:…。！？")
CLOSING = "\"'»“”’)]"
WORD_START = "\u2581"  # SentencePiece's word-boundary mark


def split_long(ids: list[int], limit: int, pieces: Sequence[str]) -> list[list[int]]:
    """An over-long line's ids as consecutive segments, which joined give `ids` back.

    Why: a model trained on sentences translates a long line badly or not at all, so the line
    is cut after every sentence end (closing quotes or brackets after it kept) that a
    word-initial piece follows, so not inside "3.5".  A sentence still over `limit` tokens is
    cut before the last word-initial piece in the second half of the window that fits, else
    at the limit.
    """
    if limit < 1:
        raise ValueError(f"the segment limit must be at least 1 token, got {limit}")
    cuts = [
        i
        for i in range(1, len(ids))
        if pieces[ids[i]].startswith(WORD_START) and _ends_sentence(ids, i, pieces)
    ]
    segments = []
    for start, end in zip([0, *cuts], [*cuts, len(ids)]):
        while end - start > limit:
            window = range(start + limit, start + limit // 2, -1)  # cut positions, latest first
            cut = next((i for i in window if pieces[ids[i]].startswith(WORD_START)), start + limit)
            segments.append(ids[start:cut])
            start = cut
        segments.append(ids[start:end])
    return segments


def _ends_sentence(ids: list[int], end: int, pieces: Sequence[str]) -> bool:
    """Whether `ids[:end]` ends a sentence: its last piece that is more than closing quotes
    and brackets ends with a sentence-ending mark."""
    for k in range(end - 1, -1, -1):
        text = pieces[ids[k]].rstrip(CLOSING)
        if text:
            return text.endswith(SENTENCE_END)
    return False


# What an empty segment (a blank line) gets: it is not searched.
BLANK = Hypothesis([], 0.0, 0.0)


def _concatenated(parts: list[Hypothesis]) -> Hypothesis:
    """One line's hypothesis from its segments': tokens in order, scores summed."""
    return Hypothesis(
        [token for part in parts for token in part.tokens],
        sum(part.score for part in parts),
        sum(part.log_prob for part in parts),
    )


def translate_nbest(
    loaded: LoadedModel,
    lines: list[str],
    settings: SearchSettings = SearchSettings(),
    batch_tokens: int = BATCH_TOKENS,
    progress: Callable[[int], None] | None = None,
    first_line: int = 1,
    on_split: Callable[[SplitLine], None] | None = None,
) -> list[list[Translation]]:
    """Exactly `n_best` translations for every line, best first; nothing is ever dropped.
    A blank line (`is_blank`) gives empty translations and is not decoded.

    Lines are sorted by length so batches carry little padding, then put back in order; the
    batches, longest first, go through one running search (`search.search_joined`), each
    joining as the last sentences of the ones before finish, so that few steps decode few rows;
    each sentence gets what it gets searched alone. A line over `settings.max_input_tokens`
    (default: the longest training sentence, `data.max_length` of the saved run config; at most
    the model's positions less EOS) is translated in segments, sentence by sentence
    (`split_long`), joined again, and told to `on_split`; entry k of its n-best list joins every
    segment's k-th best, with the scores summed. `batch_tokens` budgets source tokens; beam
    search decodes `beam` rows per sentence, and beam 1 is greedy search. `progress` is called
    with the number of lines finished as they finish; `first_line` is the number warnings give
    `lines[0]` (a chunk's place in the whole input). A many-to-many model writes the settings'
    `target_lang` (`target_tags_for`).
    """
    target = target_tags_for(loaded, settings.target_lang, settings.source_lang)
    plan = search_plan(loaded, settings, target)
    segments = source_segments(
        loaded, lines, target, settings.max_input_tokens, first_line, on_split, settings.glossary
    )
    line_of = segments.line_of
    # An empty segment (a blank line) is not decoded.
    found: list[list[Hypothesis]] = [[BLANK] for _ in segments.ids]
    batches = length_batches([len(ids) for ids in segments.ids], batch_tokens)
    segments_left = [0] * len(lines)  # per line: its segments not decoded yet
    for batch in batches:
        for index in batch:
            segments_left[line_of[index]] += 1
    if progress:
        progress(segments_left.count(0))  # empty lines are done already

    def decoded(index: int) -> int:
        """Lines finished by segment `index`'s translation: 1 for its line's last segment, else 0."""
        segments_left[line_of[index]] -= 1
        return int(segments_left[line_of[index]] == 0)

    # The batches longest first: with PyTorch, one running search, each batch joining as the one
    # before ends.
    sources = (
        (batch, [target.prefix + segments.ids[i] + [EOS_ID] for i in batch])
        for batch in reversed(batches)
    )
    for index, result in search_sentences(loaded, plan, sources, target.start, batch_tokens):
        found[index] = result
        if progress:
            progress(decoded(index))
    return join_segments(loaded, segments, found, plan.n_best)


def search_plan(loaded: LoadedModel, settings: SearchSettings, target: TargetTags) -> SearchPlan:
    """The search `settings` ask of `loaded` for `target`, every default filled in: the
    output length rule, the target restriction, the tags never written, and, for a model that
    protects spans, no digit but the sentinels' spans (`LoadedModel.digit_ids`)."""
    max_len_a, max_len_b = output_length_rule(loaded, settings.max_len_a, settings.max_len_b)
    allowed = (
        loaded.target_token_mask(target.target_lang).to(next(loaded.model.parameters()).device)
        if settings.restrict_to_target
        else None
    )
    return SearchPlan(
        settings.beam,
        settings.length_penalty,
        settings.n_best,
        max_len_a,
        max_len_b,
        allowed,
        tuple(target.never) + (loaded.digit_ids() if loaded.data.protect_spans else ()),
        loaded.sentinel_ids(),
    )


def output_length_rule(
    loaded: LoadedModel, max_len_a: float | None = None, max_len_b: int | None = None
) -> tuple[float, int]:
    """(a, b) of the `a * source_length + b` output limit: the given ones, else the run config's."""
    config = loaded.training_config
    return (
        config.max_len_a if max_len_a is None else max_len_a,
        config.max_len_b if max_len_b is None else max_len_b,
    )


@dataclass(frozen=True)
class SplitLine:
    """A line longer than the model reads (`limit` tokens), translated in `parts` segments."""

    number: int  # as the caller numbers its lines (`first_line` for the first)
    tokens: int
    limit: int
    parts: int


@dataclass(frozen=True)
class Part:
    """A line, or a part of a line of more protected spans than sentinels (`protected.mask`): its
    line, the spans its sentinels stand for, and what joins its translation to the part before
    (`before`; "" for a line's first part)."""

    line: int
    spans: tuple[str, ...] = ()
    before: str = ""


@dataclass(frozen=True)
class Segments:
    """Lines as the search takes them, in segments: each segment's source ids (a whole line's, or
    a part of a long one; none for a blank line), the part each segment belongs to
    (`part_of`), and the parts (`Part`): a line each, or several for a line of more protected
    spans than sentinels."""

    ids: list[list[int]]
    part_of: list[int]
    parts: list[Part]

    @property
    def line_of(self) -> list[int]:
        """Per segment, the index of its line."""
        return [self.parts[part].line for part in self.part_of]

    @property
    def lines(self) -> int:
        return self.parts[-1].line + 1 if self.parts else 0

    @property
    def sentences(self) -> int:
        """The segments that hold something to search (a blank line's holds nothing)."""
        return sum(1 for ids in self.ids if ids)

    @property
    def tokens(self) -> int:
        """The source tokens searched, each segment's end of sentence counted."""
        return sum(len(ids) + 1 for ids in self.ids if ids)

    def sentences_of_lines(self) -> list[int]:
        """Per line, its segments that hold something to search."""
        counts = [0] * self.lines
        for line, ids in zip(self.line_of, self.ids):
            counts[line] += bool(ids)
        return counts

    def of_lines(self, start: int, stop: int) -> Segments:
        """The segments of lines `start` to `stop` (not included), numbered from the first."""
        first = next(
            (p for p, part in enumerate(self.parts) if part.line >= start), len(self.parts)
        )
        end = next((p for p, part in enumerate(self.parts) if part.line >= stop), len(self.parts))
        chosen = [s for s, part in enumerate(self.part_of) if first <= part < end]
        return Segments(
            [self.ids[s] for s in chosen],
            [self.part_of[s] - first for s in chosen],
            [replace(part, line=part.line - start) for part in self.parts[first:end]],
        )


def check_glossary(loaded: LoadedModel, glossary: Glossary) -> None:
    """A UsageError unless `loaded` can keep `glossary`'s terms: a model trained with protected
    spans (`data.protect_spans`), whose sentinels the terms take."""
    if not loaded.data.protect_spans:
        raise UsageError(
            f"{glossary.name}: the model was not trained to keep protected spans "
            "(data.protect_spans), so it cannot keep glossary terms"
        )


def source_segments(
    loaded: LoadedModel,
    lines: list[str],
    target: TargetTags,
    max_input_tokens: int | None = None,
    first_line: int = 1,
    on_split: Callable[[SplitLine], None] | None = None,
    glossary: Glossary | None = None,
) -> Segments:
    """The segments decoded: each line's ids (none for a blank line), or the parts of an over-long
    one (`split_long`, told to `on_split`); a model trained with `data.protect_spans` reads each
    line with its protected spans, and the terms of `glossary`, as sentinels, a line of more
    spans than sentinels in parts of at most that many (`protected.mask`). A glossary for a
    model that does not protect spans is a UsageError."""
    vocab = loaded.vocab
    limit = min(
        max_input_tokens or loaded.data.max_length or math.inf,
        loaded.model.cfg.max_positions - 1 - len(target.prefix),
    )
    protects = bool(loaded.data.protect_spans)
    if glossary is not None:
        check_glossary(loaded, glossary)
    masked: list[Masked] = []
    parts: list[Part] = []
    for index, line in enumerate(lines):
        text = "" if is_blank(line) else line
        for part in mask(text, glossary) if protects else [Masked(text, ())]:
            masked.append(part)
            parts.append(Part(index, part.spans, part.before))
    segment_ids, part_of, pieces = [], [], None
    for index, ids in enumerate(vocab.source.encode([m.text for m in masked])):
        cut = [ids]
        if len(ids) > limit:
            pieces = pieces or [
                vocab.source.processor.id_to_piece(i) for i in range(len(vocab.source))
            ]
            cut = split_long(ids, limit, pieces)
            if on_split is not None:
                number = first_line + parts[index].line
                on_split(SplitLine(number, len(ids), int(limit), len(cut)))
        segment_ids += cut
        part_of += [index] * len(cut)
    return Segments(segment_ids, part_of, parts)


def join_segments(
    loaded: LoadedModel, segments: Segments, found: list[list[Hypothesis]], n_best: int = 1
) -> list[list[Translation]]:
    """Each line's n-best list from its segments' hypotheses (`found`, in segment order): a
    part's segments joined (`_concatenated`), detokenized, its sentinels replaced by its spans, and a
    line's parts joined, each after its `before`; lists the search could not fill padded with
    empty entries."""
    unfilled = Hypothesis([], float("-inf"), float("-inf"))  # beyond what the search space held
    per_part: list[list[list[Hypothesis]]] = [[] for _ in segments.parts]
    for part, entries in zip(segments.part_of, found):
        per_part[part].append(entries + [unfilled] * (n_best - len(entries)))
    joined = [
        _concatenated([segment[k] for segment in parts])
        for parts in per_part
        for k in range(n_best)
    ]
    written = [  # each joined hypothesis's tokens, a searched segment's EOS included
        sum(len(segment[k].tokens) + 1 for segment in parts if segment[k] is not BLANK)
        for parts in per_part
        for k in range(n_best)
    ]
    texts = loaded.vocab.target.decode([hypothesis.tokens for hypothesis in joined])
    if loaded.data.protect_spans:
        texts = [unmask(text, segments.parts[i // n_best].spans) for i, text in enumerate(texts)]
    lines: list[list[list[Translation]]] = [[] for _ in range(segments.lines)]
    for p, part in enumerate(segments.parts):
        at = slice(p * n_best, (p + 1) * n_best)
        lines[part.line].append(
            [
                Translation(part.before + text, found.score, found.log_prob, tokens)
                for text, found, tokens in zip(texts[at], joined[at], written[at])
            ]
        )
    return [[_line_of_parts([part[k] for part in parts]) for k in range(n_best)] for parts in lines]


def _line_of_parts(parts: list[Translation]) -> Translation:
    """One line's translation from its parts' (each with its `before` already in front)."""
    if len(parts) == 1:
        return parts[0]
    return Translation(
        "".join(part.text for part in parts),
        sum(part.score for part in parts),
        sum(part.log_prob for part in parts),
        sum(part.tokens for part in parts),
    )


def translate_lines(
    loaded: LoadedModel,
    lines: list[str],
    settings: SearchSettings = SearchSettings(),
    batch_tokens: int = BATCH_TOKENS,
    progress: Callable[[int], None] | None = None,
    on_split: Callable[[SplitLine], None] | None = None,
) -> list[str]:
    """Translate every line; an empty line gives an empty line and nothing is ever dropped.

    Returns `n_best * len(lines)` texts: the n-best list of line 1 (best first), then that of
    line 2, and so on; with `n_best=1`, one translation per line in input order.  See
    `translate_nbest` for the settings, and for the scores.
    """
    nbest = translate_nbest(loaded, lines, settings, batch_tokens, progress, on_split=on_split)
    return [entry.text for entries in nbest for entry in entries]
