"""Protected spans: the tokens of a text that a translation must carry over unchanged (numbers,
placeholders, URLs, email addresses, @mentions, #hashtags, file paths, key combinations), and
those a translation lost (`lost_spans`), which translate-cli and translate-serve report.

`find_spans` finds them with one regular expression per class (`PATTERNS`), tried in the
order of `CLASSES`: a span overlapping one already found by an earlier class is not taken, so a
URL's digits are not numbers of their own and an email address is not a mention. To protect
another kind of token, add its class to `CLASSES` and its expression to `PATTERNS` (and a
hand-made line to tests/test_protected.py); the rule is documented in docs/translating.md.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

CLASSES = ("url", "email", "path", "placeholder", "mention", "hashtag", "key", "number")

_MODIFIERS = r"(?:Ctrl|Control|Shift|AltGr|Alt|Option|Opt|Cmd|Command|Meta|Super|Win|Fn)"
_KEYS = (
    r"(?:F(?:[1-9]|1[0-9]|2[0-4])|Enter|Return|Tab|Esc|Escape|Spacebar|Space|Backspace|"
    r"Delete|Del|Insert|Ins|Home|End|Page ?Up|Page ?Down|PgUp|PgDn|Up|Down|Left|Right|"
    r"[A-Za-z0-9]|[-+=,.;/\\`'\[\]])"
)

PATTERNS: dict[str, re.Pattern] = {
    # scheme:// or www., to the next space or quote; trailing punctuation is the sentence's
    "url": re.compile(r"\b(?:https?|ftp)://[^\s<>\"']+|\bwww\.[^\s<>\"']+"),
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
                r"\$(?:\(\w+\)|\{\w+\}|\[\w+\]|\d+\b)",  # $(ARG1) ${var} $[officename] $1
                r"#[A-Za-z]\w*#",  # LibreOffice's #servicename#
                r"\{\{?\w*(?:[:!][^{}\s]*)?\}\}?",  # {} {0} {name} {0:.2f} {{name}}
                r"</?[A-Za-z][\w:-]*(?:\s+[^<>]*)?/?>",  # <b> </b> <br/> <a href="...">
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
    # 42, -3, 3.14, 1,000, 7.4.2, 50%: not inside a word ("MP3", "x86", "3D" are not numbers)
    "number": re.compile(r"(?<![\w.,-])[-+−]?\d+(?:[.,]\d+)*%?(?![\w]|[.,]\d)"),
}

_TRAILING = ".,;:!?)]}'\""  # what ends a sentence or a bracket after a URL or a path


@dataclass(frozen=True)
class Span:
    kind: str  # one of CLASSES
    text: str
    start: int
    end: int


def find_spans(text: str) -> list[Span]:
    """The protected spans of `text`, in text order, none overlapping another."""
    taken: list[Span] = []
    for kind in CLASSES:
        for match in PATTERNS[kind].finditer(text):
            start, end = match.span()
            if kind in ("url", "path"):
                end = start + len(match.group().rstrip(_TRAILING))
            if end <= start or any(start < span.end and span.start < end for span in taken):
                continue
            taken.append(Span(kind, text[start:end], start, end))
    return sorted(taken, key=lambda span: span.start)


def _compared(span: Span) -> tuple[str, str]:
    """What must match: a number's sign and digits (a translation may write 3.5 as 3,5, 1,000
    as 1.000 and 50% as 50 %), every other span's text as it is."""
    if span.kind != "number":
        return span.kind, span.text
    sign = span.text[0] if span.text[0] in "-+−" else ""
    return span.kind, sign + re.sub(r"\D", "", span.text)


def lost_spans(source: str, translation: str) -> list[Span]:
    """The protected spans of `source` that `translation` lacks, in source order: each must be
    there as often as the source has it, as the same class (`_compared`)."""
    there = Counter(map(_compared, find_spans(translation)))
    lost = []
    for span in find_spans(source):
        key = _compared(span)
        if there[key]:
            there[key] -= 1
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
    """A line with its protected spans replaced by sentinels, and the spans, in sentinel order."""

    text: str
    spans: tuple[str, ...]


def _replaced(text: str, spans: list[tuple[Span, str]]) -> str:
    """`text` with each span of `spans` (in text order) replaced by the text paired with it."""
    parts, end = [], 0
    for span, sentinel in spans:
        parts += [text[end : span.start], sentinel]
        end = span.end
    return "".join(parts) + text[end:]


def mask(line: str) -> Masked:
    """The line's protected spans (the first `MAX_SENTINELS`) replaced by ⦅1⦆, ⦅2⦆, ...; a line
    that already holds a sentinel's bracket is left as it is."""
    if "⦅" in line:
        return Masked(line, ())
    spans = find_spans(line)[:MAX_SENTINELS]
    return Masked(
        _replaced(line, [(span, SENTINELS[k]) for k, span in enumerate(spans)]),
        tuple(span.text for span in spans),
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
    if "⦅" in source + target:
        return source, target
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


def hash_share(text: str) -> float:
    """Where `text` falls in [0, 1), the same on every machine and run: which training pairs a
    share of them takes."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2**64
