"""Protected spans: the tokens of a text that a translation must carry over unchanged (numbers
in all their forms, placeholders, URLs, email addresses, @mentions, #hashtags, file paths, key
combinations, words holding a digit, what a user types in the sentinels' brackets), and those a
translation lost (`lost_spans`), which translate-cli and translate-serve report.

`find_spans` finds them with one regular expression per class (`PATTERNS`), tried in the
order of `CLASSES`: a span overlapping one already found by an earlier class is not taken, so a
URL's digits are not numbers of their own and an email address is not a mention. The last
class, `code`, takes every word holding a digit that the others left, so every digit of a text
is in a span: a model that protects spans is never left a digit to write. To protect another
kind of token, add its class to `CLASSES` and its expression to `PATTERNS` (and a hand-made
line to tests/test_protected.py); the rule is documented in docs/translating.md.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

CLASSES = (
    "reserved",
    "url",
    "email",
    "path",
    "placeholder",
    "mention",
    "hashtag",
    "key",
    "number",
    "code",
)
TERM = "term"  # a glossary's term (`Terms`), masked beside the protected spans

_MODIFIERS = r"(?:Ctrl|Control|Shift|AltGr|Alt|Option|Opt|Cmd|Command|Meta|Super|Win|Fn)"
_KEYS = (
    r"(?:F(?:[1-9]|1[0-9]|2[0-4])|Enter|Return|Tab|Esc|Escape|Spacebar|Space|Backspace|"
    r"Delete|Del|Insert|Ins|Home|End|Page ?Up|Page ?Down|PgUp|PgDn|Up|Down|Left|Right|"
    r"[A-Za-z0-9]|[-+=,.;/\\`'\[\]])"
)
# A word character of a script written with spaces: a number or a code beside a Chinese,
# Japanese or Thai letter is still a token of its own ("第3章" holds the number 3).
WORD = r"[^\W\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]"
# What joins the digit groups of one number: 7.4.2, 1,000, 10:30, 2026-11-28, 1-31, 10–20,
# 11/28/2026, 16x16, 1920×1080 (a date, a time, a range, a phone number or a size is one span)
_JOIN = r"(?:[.,:/]|[-–—]|[x×])"
_ORDINAL = r"(?:st|nd|rd|th)"
_CURRENCY = r"[$€£¥₹₽¢]"

PATTERNS: dict[str, re.Pattern] = {
    # the sentinels' brackets, typed by the user: kept as typed, never read as a sentinel
    "reserved": re.compile(r"⦅[^⦅⦆\s]{0,12}⦆|[⦅⦆]"),
    # scheme:// or www., to the next space or quote; trailing punctuation is the sentence's
    # (a closing bracket the URL opened is its own: Foo_(bar))
    "url": re.compile(r"\b(?:https?|ftp)://[^\s<>\"'⦅⦆]+|\bwww\.[^\s<>\"'⦅⦆]+"),
    # not the user@host of a Mastodon mention
    "email": re.compile(r"(?<![\w.+@-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"),
    # /a/b, ~/a, ./a, ../a, C:\a\b: a slash not inside a word or a tag, a letter after it
    # ("and/or", "1/2", "2%/12" and "</b>" hold none)
    "path": re.compile(
        r"(?<![\w/.~<%])(?:~|\.{1,2})?/(?=[\w./-]*[A-Za-z])[\w.-]*[\w-](?:/[\w.-]*[\w-])*/?"
        r"|\b[A-Za-z]:\\(?:[\w.-]+\\)*[\w.-]*[\w-]"
    ),
    "placeholder": re.compile(
        "|".join(
            (
                r"%(?:\(\w+\)|\d+\$)?[-+0#]*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t)?"
                r"[diouxXeEfFgGcspn@](?![A-Za-z])",  # printf: %s %d %1$s %.2f %(name)s
                r"%\d+(?!\d|[.,]\d)",  # Qt's %1
                r"%[A-Z][A-Z0-9_]+%?",  # %PRODUCTNAME
                # $(ARG1) ${var} $[officename] $1, not a price ($5.99)
                r"\$(?:\(\w+\)|\{\w+\}|\[\w+\]|\d+\b(?![.,]\d))",
                r"#[A-Za-z]\w*#",  # LibreOffice's #servicename#
                r"\{\{?\w*(?:[:!][^{}\s]*)?\}\}?",  # {} {0} {name} {0:.2f} {{name}}
                r"</?[A-Za-z][\w:-]*(?:\s+[^<>]*)?/?>",  # <b> </b> <br/> <a href="...">
                r"\[X\d+X\]",  # Weblate's masks of the placeholders it knows: [X7X]
            )
        )
    ),
    # @user or @user@host.example (Mastodon's), not inside a word or an email address
    "mention": re.compile(r"(?<![\w@/.])@[A-Za-z_]\w*(?:@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)?"),
    # #tag with a letter in it ("#1" is a number's sign, "&#160;" an entity)
    "hashtag": re.compile(r"(?<![\w#&/])#\w*[^\W\d_]\w*"),
    # Ctrl+Shift+F5, Alt + F4, Cmd+Option+Esc; a function key alone
    "key": re.compile(
        rf"\b{_MODIFIERS}(?:\s*\+\s*(?:{_MODIFIERS}|{_KEYS}))+(?![\w])"
        r"|\bF(?:[1-9]|1[0-9]|2[0-4])\b"
    ),
    # 42, -3, 3.14, 1,000, 7.4.2, 50%, 0x1F, [::1]:8000, a phone number's groups (+49 30 1234567,
    # 0800 123 456, (030) 12345-678), a price's currency ($5.99, 5 €), and digit groups joined
    # (`_JOIN`), whole or not at all (10:30am is no number: a code); not inside a word, nor after a
    # word's : or / (localhost:5000 is a code); an ordinal's digits without its suffix (4th: 4),
    # which a translation writes its way
    "number": re.compile(
        rf"(?<!{WORD})(?<![.,\-–])(?<!{WORD}[:/])"
        r"(?:\[(?=[0-9A-Fa-f:.]*\d)[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\](?::\d+)?"
        r"|0[xX][0-9A-Fa-f]+"
        r"|(?:\+\d{1,3}|\(0\d{1,5}\)|0\d{1,5})(?:[ \-/]\(?\d{2,}\)?){1,5}"
        rf"|[-+−]?{_CURRENCY}?\d+(?:{_JOIN}\d+)*(?!{_JOIN}\d)(?:%| ?{_CURRENCY})?)"
        rf"(?={_ORDINAL}(?!{WORD})|(?!{WORD}))"
    ),
    # a word with a digit in it, with the words joined to it by . - / : +: X.509, v2, 12pt, 5mm,
    # MP3, x86, 3D, UTF-8, 1080p. Searched last, in what the other classes left, and only the
    # words holding a digit taken (`_DIGIT`): no digit is left to the model to write.
    "code": re.compile(rf"(?<!{WORD}){WORD}+(?:[.\-/:+]{WORD}+)*"),
}
_DIGIT = re.compile(r"\d")
_DIGIT_RUN = re.compile(r"\d+")
_CURRENCY_SIGN = re.compile(_CURRENCY)

_TRAILING = ".,;:!?)]}'\""  # what ends a sentence or a bracket after a URL or a path
_BRACKETS = {")": "(", "]": "[", "}": "{"}


def _trimmed(text: str) -> str:
    """A URL or path without the sentence's punctuation after it; a closing bracket it opened
    itself stays (`https://en.wikipedia.org/wiki/Foo_(bar)`)."""
    while text and text[-1] in _TRAILING:
        opening = _BRACKETS.get(text[-1])
        if opening and text.count(opening) >= text.count(text[-1]):
            break
        text = text[:-1]
    return text


@dataclass(frozen=True)
class Span:
    kind: str  # one of CLASSES, or TERM
    text: str
    start: int
    end: int


def find_spans(text: str) -> list[Span]:
    """The protected spans of `text`, in text order, none overlapping another; every digit of
    `text` is in one."""
    taken: list[Span] = []
    covered = bytearray(len(text))  # 1 where a span is taken
    for kind in CLASSES:
        searched = text
        if kind == "code":  # what is left: the spans taken so far blanked out
            searched = "".join(" " if covered[i] else char for i, char in enumerate(text))
        for match in PATTERNS[kind].finditer(searched):
            start, end = match.span()
            if kind in ("url", "path"):
                end = start + len(_trimmed(match.group()))
            if end <= start or any(covered[start:end]):
                continue
            if kind == "code" and not holds_digit(match.group()):
                continue
            covered[start:end] = b"\x01" * (end - start)
            taken.append(Span(kind, text[start:end], start, end))
    return sorted(taken, key=lambda span: span.start)


def digit_runs(text: str) -> list[str]:
    """The runs of digits of `text`, in order: what the plain rule (`--metrics digits`) counts."""
    return _DIGIT_RUN.findall(text)


def holds_digit(text: str) -> bool:
    """Whether `text` has a digit (what `find_spans` leaves in no line)."""
    return _DIGIT.search(text) is not None


def _compared(span: Span) -> tuple[str, str]:
    """What must match: a decimal number's sign, currency and digits (a translation may write 3.5
    as 3,5, 1,000 as 1.000, 50% as 50 % and $5 as 5 $), every other span's text as it is (a hex
    number's in either case)."""
    if span.kind != "number" or span.text[:2] in ("0x", "0X"):
        return span.kind, span.text.lower() if span.kind == "number" else span.text
    sign = span.text[0] if span.text[0] in "-+−" else ""
    currency = "".join(sorted(_CURRENCY_SIGN.findall(span.text)))
    return span.kind, sign + "".join(_DIGIT.findall(span.text)) + currency


def lost_spans(source: str, translation: str) -> list[Span]:
    """The protected spans of `source` that `translation` lacks, in source order: each must be
    there as often as the source has it, as the same class (`_compared`), and its digit runs
    with it (the plain rule: each digit run of the source as often in the translation; `1,000`
    written `10,00` is lost). Every digit is in a span, so no lost digit goes unreported."""
    there = Counter(map(_compared, find_spans(translation)))
    runs = Counter(digit_runs(translation))
    lost = []
    for span in find_spans(source):
        key, needed = _compared(span), Counter(digit_runs(span.text))
        if there[key] and not needed - runs:
            there[key] -= 1
            runs -= needed
        else:
            lost.append(span)
    return lost


def describe(spans: list[Span]) -> str:
    """`36 (number), %PRODUCTNAME (placeholder)`."""
    return ", ".join(f"{span.text} ({span.kind})" for span in spans)


# Sentinels: pieces of their own in a vocabulary trained with data.protect_spans, which stand in
# for a line's protected spans (the k-th span masked is ⦅k⦆) in training pairs and in the lines
# translated, and are replaced by the spans again in the translation (`unmask`). A translation
# writes the k-th span as it is (⦅k⦆) or, a number, with its "." and "," swapped (⦅k,⦆: 3.5 as
# 3,5 and 1,000 as 1.000, as German writes them): the model learns which from its pairs.
MAX_SENTINELS = 20
SENTINELS = tuple(f"⦅{k}⦆" for k in range(1, MAX_SENTINELS + 1))
SWAPPED_SENTINELS = tuple(f"⦅{k},⦆" for k in range(1, MAX_SENTINELS + 1))
SENTINEL_PIECES = SENTINELS + SWAPPED_SENTINELS
_SENTINEL = re.compile(r"⦅(\d+)(,?)⦆")
_SWAP = str.maketrans(".,", ",.")


def swapped(number: str) -> str:
    """A number with its "." and "," swapped: 3.5 → 3,5, 1,000.5 → 1.000,5."""
    return number.translate(_SWAP)


@dataclass(frozen=True)
class Masked:
    """A part of a line with its protected spans replaced by sentinels, the spans in sentinel
    order, and what joins it to the part before (`before`: the whitespace the line was cut at;
    "" for a line's first part)."""

    text: str
    spans: tuple[str, ...]
    before: str = ""


def _replaced(text: str, spans: list[tuple[Span, str]]) -> str:
    """`text` with each span of `spans` (in text order) replaced by the text paired with it."""
    parts, end = [], 0
    for span, sentinel in spans:
        parts += [text[end : span.start], sentinel]
        end = span.end
    return "".join(parts) + text[end:]


# Where a line of more spans than sentinels is cut: after a sentence's end, else at a space.
_SENTENCE_GAP = re.compile(r"[.!?;:…。！？][\"'»”’)\]]*(\s+)")
_SPACE_GAP = re.compile(r"\s+")


def _cut(line: str, spans: list[Span]) -> tuple[int, int]:
    """Where to cut `line`, whose `spans` are more than `MAX_SENTINELS`, so that its first part
    holds at most that many: (end of the first part, start of the rest), the whitespace between
    them joining the two translations. The latest sentence end between two spans in the second
    half, else the latest whitespace between two spans, else right after the last span that fits."""
    gaps = [(spans[j - 1].end, spans[j].start) for j in range(MAX_SENTINELS, 0, -1)]
    for pattern, where in ((_SENTENCE_GAP, gaps[: MAX_SENTINELS // 2]), (_SPACE_GAP, gaps)):
        for start, end in where:
            found = list(pattern.finditer(line, start, end))
            if found:
                return found[-1].span(found[-1].lastindex or 0)
    return spans[MAX_SENTINELS - 1].end, spans[MAX_SENTINELS - 1].end


class Terms(Protocol):
    """What `mask` reads of a glossary (`glossary.Glossary`)."""

    def find(self, text: str) -> list[Span]:
        """The terms of `text` (kind TERM), in text order, none overlapping another."""

    def target(self, term: str) -> str:
        """The target term a found term's sentinel stands for."""


def masked_spans(line: str, glossary: Terms | None = None) -> list[Span]:
    """What `mask` masks in `line`, in text order: its protected spans, and the terms of
    `glossary` that no protected span overlaps."""
    spans = find_spans(line)
    if glossary is None:
        return spans
    covered = bytearray(len(line))
    for span in spans:
        covered[span.start : span.end] = b"\x01" * (span.end - span.start)
    terms = [term for term in glossary.find(line) if not any(covered[term.start : term.end])]
    return sorted(spans + terms, key=lambda span: span.start)


def mask(line: str, glossary: Terms | None = None) -> list[Masked]:
    """The line with its protected spans, and the terms of `glossary` outside them, replaced by
    ⦅1⦆, ⦅2⦆, ...: one part, or, where it has more spans than sentinels (`MAX_SENTINELS`),
    consecutive parts of at most that many each, cut between two spans (`_cut`), which joined
    (each part's `before` first) give the line. A term's sentinel stands for its target term."""
    parts, before = [], ""
    spans = masked_spans(line, glossary)
    while len(spans) > MAX_SENTINELS:
        end, start = _cut(line, spans)
        head = [span for span in spans if span.end <= end]
        parts.append(_masked(line[:end], head, before, glossary))
        before, line = line[end:start], line[start:]
        spans = [
            Span(span.kind, span.text, span.start - start, span.end - start)
            for span in spans[len(head) :]
        ]
    return [*parts, _masked(line, spans, before, glossary)]


def _masked(text: str, spans: list[Span], before: str, glossary: Terms | None) -> Masked:
    return Masked(
        _replaced(text, [(span, SENTINELS[k]) for k, span in enumerate(spans)]),
        tuple(
            glossary.target(span.text) if span.kind == TERM and glossary else span.text
            for span in spans
        ),
        before,
    )


# Scripts written without spaces between words: a span there may touch a word.
_SPACELESS = (
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
)
_CONTEXT = 40  # characters either side that decide whether a span reads as itself


def _may_space(char: str) -> bool:
    """Whether a space may go beside `char`: not a space, not a script without spaces."""
    return not char.isspace() and not unicodedata.name(char, "").startswith(_SPACELESS)


def _reads_as_itself(before: str, text: str, after: str) -> bool:
    """Whether `text` between `before` and `after` is found as one protected span, whole."""
    return any(
        span.start == len(before) and span.end == len(before) + len(text)
        for span in find_spans(before + text + after)
    )


def _set_apart(before: str, text: str, after: str) -> str:
    """`text` with the fewest spaces beside it that let it read as itself between `before` and
    `after` (`Zeile36` → `Zeile 36`, `info@x.org-Eintrag` → `info@x.org -Eintrag`); as it is
    where it does already, or where no space helps."""
    if _reads_as_itself(before, text, after):
        return text
    lead = " " if before and _may_space(before[-1]) else ""
    trail = " " if after and _may_space(after[0]) else ""
    for left, right in ((lead, ""), ("", trail), (lead, trail)):
        if (left or right) and _reads_as_itself(before + left, text, right + after):
            return left + text + right
    return text


def unmask(translation: str, spans: tuple[str, ...]) -> str:
    """Each sentinel of `translation` replaced by its span (⦅k,⦆: a number's with "." and ","
    swapped; a sentinel the line did not have, by nothing). Each span read as itself in the
    source; one the translation glued to a word so that it no longer does gets a space there
    (`_set_apart`): `Zeile⦅1⦆` is `Zeile 36`, not `Zeile36`; `<b>fett` stays."""
    if "⦅" not in translation:
        return translation
    parts: list[tuple[str, bool]] = []  # text, and whether it is a span
    end = 0
    for match in _SENTINEL.finditer(translation):
        parts.append((translation[end : match.start()], False))
        k = int(match.group(1))
        span = spans[k - 1] if 1 <= k <= len(spans) else ""
        is_number = PATTERNS["number"].fullmatch(span) is not None
        parts.append((swapped(span) if match.group(2) and is_number else span, True))
        end = match.end()
    parts.append((translation[end:], False))
    parts = [(text, is_span) for text, is_span in parts if text]
    written = ""
    for index, (text, is_span) in enumerate(parts):
        if is_span:
            after = parts[index + 1][0][:_CONTEXT] if index + 1 < len(parts) else ""
            text = _set_apart(written[-_CONTEXT:], text, after)
        written += text
    return written


def mask_pair(source: str, target: str) -> tuple[str, str]:
    """A training pair with each protected span of the source that the target has too (the same
    text, as the same class; the k-th occurrence with the k-th) replaced by the same sentinel ⦅k⦆
    on both sides, or a number the target writes with "." and "," swapped by ⦅k⦆ in the source
    and ⦅k,⦆ in the target, so that a model learns to copy sentinels; the rest as it is."""
    in_target: dict[tuple[str, str], list[Span]] = {}
    for span in find_spans(target):
        in_target.setdefault((span.kind, span.text), []).append(span)
    source_spans, target_spans = [], []
    for span in find_spans(source):
        if len(source_spans) == MAX_SENTINELS:
            break
        k = len(source_spans)
        matches, written = in_target.get((span.kind, span.text)), SENTINELS[k]
        if not matches and span.kind == "number" and swapped(span.text) != span.text:
            matches, written = in_target.get((span.kind, swapped(span.text))), SWAPPED_SENTINELS[k]
        if not matches:
            continue
        source_spans.append((span, SENTINELS[k]))
        target_spans.append((matches.pop(0), written))
    target_spans.sort(key=lambda pair: pair[0].start)
    return _replaced(source, source_spans), _replaced(target, target_spans)


def masking_rules() -> str:
    """A digest of what masking takes (the classes, their expressions, the sentinels): part of
    the key of a cached vocabulary or encoded corpus made with it, so that a change of the rules
    makes them again."""
    rules = [*CLASSES, *(PATTERNS[kind].pattern for kind in CLASSES), *SENTINEL_PIECES]
    return hashlib.blake2b("\n".join(rules).encode(), digest_size=8).hexdigest()


def hash_share(text: str) -> float:
    """Where `text` falls in [0, 1), the same on every machine and run: which training pairs a
    share of them takes."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2**64
