"""A document's texts translated: each cut into sentences (`sentences.split_text`), a sentence
never cut inside a pair of inline tags, the sentences of every text searched together in one
call, and each text put together again with its confidence (its sentences' together,
`pipeline.joint_confidence`).

A sentence whose inline tags pair text (`<g1>New</g1>`) is searched twice: as it is, and without
its pairs' tags (its marks kept), and each pair's words alone. The tagged translation is kept
unless the plain one is the better bet: where the tagged one lost the words of a pair
(`<g1></g1>` for `<g1>New</g1>`), its tags do not pair up, or the model is less confident in it
than in the plain one. A model that has seen few tags around words writes worse sentences around
them; the plain translation keeps every word and mark, and each pair's tags are put back around
the translation of its words where the plain translation holds it (`project`); a pair whose
words it does not hold loses its run formatting (`formatting_lost` counts those sentences).

Tags at a sentence's edges are not searched at all: marks before and after its words (an
anchor, an image, a bookmark) and a pair around all of it (`<g1>...</g1>`) are set aside and
put back around its translation where they stood (`edges`), so a model is never asked to write
words after a sentinel it would end on."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from translate.decode.pipeline import Translation, joint_confidence
from translate.documents.formats import Translated
from translate.text.sentences import SplitText, split_text

# An inline tag of `inline.Tagged`: <g1>, </g1>, <x2/>
_TAG = re.compile(r"<(/?)([a-z])(\d+)(/?)>")
_WORD = re.compile(r"\w")


def _depth(text: str) -> int:
    """Tags opened and not closed in `text`."""
    depth = 0
    for match in _TAG.finditer(text):
        closing, _, _, empty = match.groups()
        if not empty:
            depth += -1 if closing else 1
    return depth


def sentences_of(text: str, max_chars: int | None = None) -> SplitText:
    """`text`'s sentences, those a pair of inline tags spans joined into one."""
    split = split_text(text, sentences=True, max_chars=max_chars)
    pieces, between = [], [split.between[0]]
    open_tags = 0
    for piece, after in zip(split.pieces, split.between[1:]):
        if open_tags > 0:
            pieces[-1] += between.pop() + piece
        else:
            pieces.append(piece)
        between.append(after)
        open_tags = max(0, open_tags + _depth(piece))
    return SplitText(tuple(pieces), tuple(between))


_LEADING_MARKS = re.compile(r"^(?:\s*<[a-z]\d+/>)+\s*")
_TRAILING_MARKS = re.compile(r"\s*(?:<[a-z]\d+/>\s*)+$")
_WRAPPING_PAIR = re.compile(r"^<([a-z]\d+)>(.*)</\1>$", re.DOTALL)


def edges(sentence: str) -> tuple[str, str, str]:
    """The sentence as (head, core, tail): its marks before and after its words, and the tags of
    pairs around all of it, set aside (head + core + tail is the sentence)."""
    head = tail = ""
    while True:
        before = head, tail
        lead = _LEADING_MARKS.match(sentence)
        if lead:
            head, sentence = head + lead.group(), sentence[lead.end() :]
        trail = _TRAILING_MARKS.search(sentence)
        if trail:
            tail, sentence = trail.group() + tail, sentence[: trail.start()]
        wrap = _WRAPPING_PAIR.match(sentence)
        if wrap and f"<{wrap.group(1)}>" not in wrap.group(2):
            tag = wrap.group(1)
            head, sentence, tail = head + f"<{tag}>", wrap.group(2), f"</{tag}>" + tail
        if (head, tail) == before:
            return head, sentence, tail


def _pair_spans(text: str) -> dict[str, tuple[int, int, int, int]] | None:
    """Where each pair of tags stands, by its tag (`g1`): its start tag's start and end, its end
    tag's start and end; None for a text whose pair tags do not pair up."""
    spans, stack, opened = {}, [], {}
    for match in _TAG.finditer(text):
        closing, letter, number, empty = match.groups()
        if empty:
            continue
        tag = letter + number
        if not closing:
            stack.append(tag)
            opened[tag] = match.span()
        elif stack and stack[-1] == tag:
            stack.pop()
            spans[tag] = (*opened[tag], *match.span())
        else:
            return None
    return None if stack else spans


def _pairs(text: str) -> dict[str, str] | None:
    """The text each pair of tags holds, by its tag, for pairs that pair up; None for a text
    whose pair tags do not."""
    spans = _pair_spans(text)
    if spans is None:
        return None
    return {tag: text[opened:closed] for tag, (_, opened, closed, _) in spans.items()}


def without_tags(text: str, gap: str = "") -> str:
    """The text without its inline tags, each replaced by `gap`: its words, as a reader sees
    them."""
    return _TAG.sub(gap, text)


def without_pairs(sentence: str) -> str:
    """The sentence without the tags of its pairs, its marks' kept."""
    return _TAG.sub(lambda m: m.group() if m.group(4) else "", sentence)


def _keeps_pairs(source: str, translation: str) -> bool:
    """Whether `translation` pairs its tags and holds words in every pair whose source does."""
    held = _pairs(translation)
    if held is None:
        return False
    return all(
        _WORD.search(held.get(tag, ""))
        for tag, words in _pairs(source).items()
        if _WORD.search(words)
    )


def project(translation: str, runs: Sequence[tuple[str, str]]) -> tuple[str, int]:
    """A plain translation with each run's own translation (`runs`: tag, text) wrapped in its
    tag pair where the translation holds that text (as written, else in another case) outside
    the tags and runs placed before it, longest first; and how many were placed."""
    placed = 0
    for tag, text in sorted(runs, key=lambda run: -len(run[1])):
        text = text.strip()
        if not _WORD.search(text):
            continue
        taken = [m.span() for m in _TAG.finditer(translation)]
        taken += [(start, end) for start, _, _, end in (_pair_spans(translation) or {}).values()]
        for haystack in (translation, translation.lower()):
            needle = text if haystack is translation else text.lower()
            if len(haystack) != len(translation):
                continue
            at = _free(haystack, needle, taken)
            if at is not None:
                end = at + len(text)
                translation = (
                    f"{translation[:at]}<{tag}>{translation[at:end]}</{tag}>{translation[end:]}"
                )
                placed += 1
                break
    return translation, placed


def _free(haystack: str, needle: str, taken: list[tuple[int, int]]) -> int | None:
    """The first place of `needle` in `haystack` that overlaps no span of `taken`."""
    at = haystack.find(needle)
    while at >= 0:
        if all(at + len(needle) <= a or at >= b for a, b in taken):
            return at
        at = haystack.find(needle, at + 1)
    return None


@dataclass(frozen=True)
class Plan:
    """What a document's texts are searched as: `lines`, every sentence of every text in order
    without its edges (`edges`); then the plain form (`without_pairs`) of each of those with a
    pair of tags holding words (`plain`: the sentence's index among the sentences, by plain
    form); then the words of each such pair holding no other tag (`runs`: the sentence's index
    and the pair's tag), which a plain translation gets back around its own translation
    (`project`)."""

    splits: tuple[SplitText, ...]
    edges: tuple[tuple[str, str], ...]  # each sentence's head and tail
    lines: tuple[str, ...]
    plain: tuple[int, ...]
    runs: tuple[tuple[int, str], ...]

    @classmethod
    def of(cls, texts: Sequence[str], max_chars: int | None = None) -> Plan:
        splits = tuple(sentences_of(text, max_chars) for text in texts)
        cut = [edges(piece) for split in splits for piece in split.pieces]
        cores = [core for _, core, _ in cut]
        plain = tuple(
            k
            for k, core in enumerate(cores)
            if any(_WORD.search(words) for words in (_pairs(core) or {}).values())
        )
        runs = [
            (k, tag, words)
            for k in plain
            for tag, words in _pairs(cores[k]).items()
            if _WORD.search(words) and not _TAG.search(words)
        ]
        lines = (
            *cores,
            *(without_pairs(cores[k]) for k in plain),
            *(words.strip() for _, _, words in runs),
        )
        return cls(
            splits,
            tuple((head, tail) for head, _, tail in cut),
            lines,
            plain,
            tuple((k, tag) for k, tag, _ in runs),
        )

    def translated(self, found: Sequence[Translation]) -> list[Translated]:
        """Each text's translation from `found`, one Translation a line of `lines`."""
        if len(found) != len(self.lines):
            raise ValueError(f"{len(self.lines)} sentences, {len(found)} translations")
        sentences = len(self.lines) - len(self.plain) - len(self.runs)
        chosen = list(found[:sentences])
        plains = found[sentences : sentences + len(self.plain)]
        runs: dict[int, list[tuple[str, str]]] = {}
        for (k, tag), run in zip(self.runs, found[sentences + len(self.plain) :]):
            runs.setdefault(k, []).append((tag, run.text))
        used_plain = set()
        for k, plain in zip(self.plain, plains):
            tagged = chosen[k]
            if not _keeps_pairs(self.lines[k], tagged.text) or (
                joint_confidence([plain]) > joint_confidence([tagged])
            ):
                text, placed = project(plain.text, runs.get(k, []))
                chosen[k] = replace(plain, text=text)
                if placed < len(_pairs(self.lines[k])):
                    used_plain.add(k)
        out, at = [], 0
        for split in self.splits:
            mine = chosen[at : at + len(split.pieces)]
            ends = self.edges[at : at + len(split.pieces)]
            out.append(
                Translated(
                    split.join([head + t.text + tail for t, (head, tail) in zip(mine, ends)]),
                    joint_confidence(mine),
                    sum(k in used_plain for k in range(at, at + len(split.pieces))),
                )
            )
            at += len(split.pieces)
        return out


def translate_texts(
    texts: Sequence[str],
    translate: Callable[[list[str]], list[Translation]],
    max_chars: int | None = None,
) -> list[Translated]:
    """Each text's translation (`Plan`): its lines searched by `translate` in one call (one
    Translation a line, in order)."""
    plan = Plan.of(texts, max_chars)
    return plan.translated(translate(list(plan.lines)) if plan.lines else [])
