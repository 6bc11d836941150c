"""A document's texts translated: each cut into sentences (`sentences.split_text`), a sentence
never cut inside a pair of inline tags, the sentences of every text searched together in one
call, and each text put together again with its confidence (its sentences' together,
`pipeline.joint_confidence`).

A sentence whose inline tags pair text (`<g1>New</g1>`) is searched twice: as it is, and without
its pairs' tags (its marks kept). The tagged translation is kept unless the plain one is the
better bet: where the tagged one lost the words of a pair (`<g1></g1>` for `<g1>New</g1>`), its
tags do not pair up, or the model is less confident in it than in the plain one. A model
that has seen few tags around words writes worse sentences around them; the plain translation
keeps every word and mark, and only that sentence's run formatting is lost (`plain_sentences`
counts where).

Tags at a sentence's edges are not searched at all: marks before and after its words (an
anchor, an image, a bookmark) and a pair around all of it (`<g1>...</g1>`) are set aside and
put back around its translation where they stood (`edges`), so a model is never asked to write
words after a sentinel it would end on."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


def _pairs(text: str) -> dict[str, str] | None:
    """The text each pair of tags holds, by its tag (`g1`), for pairs that pair up; None for
    a text whose pair tags do not."""
    held, stack, starts = {}, [], {}
    for match in _TAG.finditer(text):
        closing, letter, number, empty = match.groups()
        if empty:
            continue
        tag = letter + number
        if not closing:
            stack.append(tag)
            starts[tag] = match.end()
        elif stack and stack[-1] == tag:
            stack.pop()
            held[tag] = text[starts[tag] : match.start()]
        else:
            return None
    return None if stack else held


def without_tags(text: str) -> str:
    """The text without its inline tags: its words, as a reader sees them."""
    return _TAG.sub("", text)


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


@dataclass(frozen=True)
class Plan:
    """What a document's texts are searched as: `lines`, every sentence of every text in order
    without its edges (`edges`), then the plain form (`without_pairs`) of each of those with a
    pair of tags holding words (`plain`: the sentence's index among the sentences, by plain
    form)."""

    splits: tuple[SplitText, ...]
    edges: tuple[tuple[str, str], ...]  # each sentence's head and tail
    lines: tuple[str, ...]
    plain: tuple[int, ...]

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
        lines = (*cores, *(without_pairs(cores[k]) for k in plain))
        return cls(splits, tuple((head, tail) for head, _, tail in cut), lines, plain)

    def translated(self, found: Sequence[Translation]) -> list[Translated]:
        """Each text's translation from `found`, one Translation a line of `lines`."""
        if len(found) != len(self.lines):
            raise ValueError(f"{len(self.lines)} sentences, {len(found)} translations")
        chosen = list(found[: len(self.lines) - len(self.plain)])
        used_plain = set()
        for k, plain in zip(self.plain, found[len(chosen) :]):
            tagged = chosen[k]
            if not _keeps_pairs(self.lines[k], tagged.text) or (
                joint_confidence([plain]) > joint_confidence([tagged])
            ):
                chosen[k] = plain
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
