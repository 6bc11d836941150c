"""gettext catalogues (.po, .pot): each message's msgid (and msgid_plural) translated into its
msgstr, everything else written back line for line as the file had it.

polib reads the catalogue from its decoded text (a text naming an existing file is refused:
`polib.pofile` would open that file). The file is written again by editing its own lines, not by
polib's writer, which rewraps every string and drops `#~|` lines and trailing comments: only a
translated message's msgstr lines and `#,` flags line, and the header entry's msgstr, change
(where a message is translated; entries line up with polib's by its line numbers). Comments,
references, flags, msgctxt, previous msgids (`#|`), obsolete entries, wrapping, line breaks and a
byte-order mark are kept byte for byte. The rules:

- Translated: every message but the header entry and obsolete ones whose msgstr is empty or
  fuzzy. A message already translated (msgstr filled, not fuzzy) is kept and is not a text.
- Plurals: msgstr[0] is msgid's translation, msgstr[1] to msgstr[n-1] msgid_plural's, n the
  header's `nplurals` (where the header gives none, the message's own count of forms, at least
  2, and `Plural-Forms: nplurals=2; plural=(n != 1);` is written: English's and German's rule);
  with nplurals=1 msgstr[0] is msgid_plural's. A form a non-fuzzy message already has is kept.
- Fuzzy: a message whose translation's confidence is under `RenderOptions.review_below` gets the
  `fuzzy` flag (first in its `#,` line, as gettext writes it); one at or above loses it.
- The header, where anything is translated: an empty or missing `Language` takes the target
  language (one it names is kept), a `charset` of `CHARSET` (a .pot's) or ASCII becomes UTF-8,
  and a catalogue without a header entry gets a minimal one (gettext's tools need its charset).
- A new msgstr is wrapped as gettext writes one (79 columns, after spaces and inner hyphens and
  slashes; always after `\\n`), or not wrapped where the file's strings are not.
- The file must be UTF-8 (or declare ASCII or `CHARSET`); another charset is an error.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import polib

from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions, Translated
from translate.documents.safe import DEFAULT_LIMITS, Limits, check_size, check_texts, text_of
from translate.text.sentences import is_blank

WIDTH = 79  # gettext's default page width: a wrapped line holds at most this many columns
_CHARSET = re.compile(rb'"Content-Type:[^"\n]*?charset=([^\s"\\;]+)', re.IGNORECASE)
_READ_CHARSETS = frozenset(("utf-8", "utf8", "charset", "ascii", "us-ascii", "ansi_x3.4-1968"))
_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
_GERMANIC_PLURALS = "nplurals=2; plural=(n != 1);"
_UNREAD = "an entry not where polib's parser puts it; the file cannot be edited in place"
_POLIB_LINE = re.compile(r"\(line (\d+)\)(?::\s*(.+))?")


class _Kind(Enum):
    """What a line of a catalogue is, as polib's parser tells them apart."""

    BLANK = "blank"
    IGNORED = "ignored"  # `#~|`, and `#:`, `#.`, `#,` with nothing after them
    TCOMMENT = "tcomment"  # `# ...`: a translator comment (the file's own, before any entry)
    COMMENT = "comment"  # `#.`, `#:`
    FLAGS = "flags"  # `#, ...`
    PREVIOUS = "previous"  # `#| ...`
    MSGCTXT = "msgctxt"
    MSGID = "msgid"
    MSGID_PLURAL = "msgid_plural"
    MSGSTR = "msgstr"  # msgstr and msgstr[n]
    CONTINUATION = "continuation"  # a `"..."` line


@dataclass(frozen=True)
class _Line:
    kind: _Kind
    obsolete: bool  # written after `#~`


@dataclass(frozen=True)
class _Edit:
    """Lines `start` to `end` (end excluded) replaced by `lines` (without their line breaks)."""

    start: int
    end: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class _Message:
    """A message to translate and where its lines are."""

    msgid: str
    plural: str | None
    kept: tuple[str, ...]  # the msgstr[n] a non-fuzzy plural message already has ("" if none)
    msgstr: tuple[int, int]  # its msgstr lines (an empty span where it has none)
    flag_lines: tuple[int, ...]  # its `#,` lines
    flags_at: int  # where a `#, fuzzy` line goes if it has none

    def texts(self) -> list[str]:
        return [self.msgid] if self.plural is None else [self.msgid, self.plural]


@dataclass(frozen=True)
class _Header:
    msgstr: tuple[int, int]  # the header entry's msgstr lines
    value: str  # its msgstr


@dataclass(frozen=True)
class Catalogue:
    lines: tuple[str, ...]  # with their line breaks
    newline: str
    bom: bool
    messages: tuple[_Message, ...]
    header: _Header | None
    header_at: int  # where a header entry goes if there is none
    nplurals: int | None  # the header's, where it gives one
    wrap: bool  # whether the file's strings are wrapped

    def texts(self) -> list[str]:
        return [text for message in self.messages for text in message.texts()]

    def render(self, translated: Sequence[Translated], options: RenderOptions) -> bytes:
        expected = sum(len(message.texts()) for message in self.messages)
        if len(translated) != expected:
            raise ValueError(f"{expected} texts, {len(translated)} translations")
        width = WIDTH if self.wrap else 0
        edits: list[_Edit] = []
        found = iter(translated)
        plurals = False
        for message in self.messages:
            if message.plural is None:
                used = [next(found)]
                edits.append(_Edit(*message.msgstr, _field("msgstr", used[0].text, width)))
            else:
                plurals = True
                one, many = next(found), next(found)
                forms, used = self._forms(message, one, many)
                lines = [
                    line
                    for k, form in enumerate(forms)
                    for line in _field(f"msgstr[{k}]", form, width)
                ]
                edits.append(_Edit(*message.msgstr, tuple(lines)))
            fuzzy = min(t.confidence for t in used) < options.review_below
            edits += _flag_edits(self.lines, message, fuzzy)
        if self.messages:
            needs_rule = plurals and self.nplurals is None
            edits += self._header_edits(options.target_lang, needs_rule, width)
        return self._written(edits)

    def _forms(self, message: _Message, one: Translated, many: Translated):
        """A plural message's msgstr[n], and the translations they took."""
        count = self.nplurals or max(2, len(message.kept))
        forms, used = [], []
        for k in range(count):
            kept = message.kept[k] if k < len(message.kept) else ""
            choice = one if k == 0 and count > 1 else many
            forms.append(kept or choice.text)
            if not kept:
                used.append(choice)
        return forms, used or [one, many]

    def _header_edits(self, language: str | None, plurals: bool, width: int) -> list[_Edit]:
        if self.header is None:
            value = _header_value("", language, plurals)
            lines = ('msgid ""', *_field("msgstr", value, width), "")
            return [_Edit(self.header_at, self.header_at, lines)]
        value = _header_value(self.header.value, language, plurals)
        if value == self.header.value:
            return []
        return [_Edit(*self.header.msgstr, _field("msgstr", value, width))]

    def _written(self, edits: list[_Edit]) -> bytes:
        lines = list(self.lines)
        unended = bool(lines) and not lines[-1].endswith(("\n", "\r"))
        if unended:
            lines[-1] += self.newline
        for edit in sorted(edits, key=lambda edit: (edit.start, edit.end), reverse=True):
            lines[edit.start : edit.end] = [line + self.newline for line in edit.lines]
        text = "".join(lines)
        if unended and text.endswith(self.newline):
            text = text[: -len(self.newline)]
        return ("\ufeff" if self.bom else "").encode() + text.encode("utf-8")


def read(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> Catalogue:
    check_size(data, name, limits)
    declared = _CHARSET.search(data)
    if declared and declared.group(1).decode("ascii", "replace").lower() not in _READ_CHARSETS:
        charset = declared.group(1).decode("ascii", "replace")
        raise DocumentError(
            f"{name}: declares charset {charset}; only UTF-8 catalogues are read "
            "(convert it with msgconv --to-code=UTF-8)"
        )
    text, bom = text_of(data, name)
    entries = _parsed(text, name)
    lines = text.splitlines(keepends=True)  # as polib splits them: its line numbers are these
    kinds = [_kind(line) for line in lines]
    blocks = _blocks(kinds)
    starts = {start: index for index, (start, _) in enumerate(blocks)}
    claimed: dict[int, polib.POEntry] = {}
    for entry in entries:
        index = 0 if entry.linenum == 0 else starts.get(entry.linenum - 1)
        if index is None or index in claimed:
            raise DocumentError(f"{name} line {entry.linenum}: {_UNREAD}")
        claimed[index] = entry
    rest = [index for index in range(len(blocks)) if index not in claimed]
    if len(rest) > 1 or rest and _msgid(lines, kinds, *blocks[rest[0]]) != "":
        raise DocumentError(f"{name} line {blocks[rest[-1]][0] + 1}: {_UNREAD}")
    header = None
    if rest:
        span = _msgstr_span(kinds, *blocks[rest[0]])
        header = _Header(span, _value(lines, span))
    messages = []
    for index, entry in sorted(claimed.items()):
        if entry.obsolete or entry.translated() or is_blank(entry.msgid):
            continue
        messages.append(_message(entry, kinds, *blocks[index]))
    texts = sum(len(message.texts()) for message in messages)
    check_texts(texts, name, limits, "texts to translate")
    nplurals = _nplurals(header.value) if header else None
    return Catalogue(
        lines=tuple(lines),
        newline=_newline(lines),
        bom=bom,
        messages=tuple(messages),
        header=header,
        header_at=_header_at(kinds, blocks),
        nplurals=nplurals,
        wrap=not _unwrapped(lines, kinds, header.msgstr if header else (0, 0)),
    )


def _parsed(text: str, name: str) -> polib.POFile:
    try:
        names_file = os.path.isfile(text)
    except (OSError, ValueError):
        names_file = False
    if names_file:  # polib would read that file instead
        raise DocumentError(f"{name}: not a gettext catalogue (it is one line, a file's path)")
    try:
        return polib.pofile(text, encoding="utf-8")
    except Exception as error:  # polib raises OSError for syntax, anything for what it trips on
        found = _POLIB_LINE.search(str(error))
        if found:
            reason = found.group(2) or "syntax error"
            raise DocumentError(
                f"{name} line {found.group(1)}: not a gettext catalogue ({reason})"
            ) from None
        raise DocumentError(f"{name}: not a gettext catalogue ({error})") from None


def _kind(raw: str) -> _Line:
    """A line's kind, as polib's parser (`_POFileParser.parse`) takes it."""
    line = raw.strip()
    if not line:
        return _Line(_Kind.BLANK, False)
    tokens = line.split(None, 2)
    if tokens[0] == "#~|":
        return _Line(_Kind.IGNORED, True)
    obsolete = tokens[0] == "#~" and len(tokens) > 1
    if obsolete:
        line = line[3:].strip()
        tokens = tokens[1:]
    keywords = {
        "msgctxt": _Kind.MSGCTXT,
        "msgid": _Kind.MSGID,
        "msgid_plural": _Kind.MSGID_PLURAL,
        "msgstr": _Kind.MSGSTR,
    }
    if tokens[0] in keywords and len(tokens) > 1:
        kind = keywords[tokens[0]]
    elif tokens[0] in ("#:", "#,", "#.") and len(tokens) == 1:
        kind = _Kind.IGNORED
    elif tokens[0] in ("#:", "#."):
        kind = _Kind.COMMENT
    elif line.startswith('"'):
        kind = _Kind.CONTINUATION
    elif line.startswith("msgstr["):
        kind = _Kind.MSGSTR
    elif tokens[0] == "#,":
        kind = _Kind.FLAGS
    elif tokens[0] == "#|":
        kind = _Kind.PREVIOUS
    else:
        kind = _Kind.TCOMMENT
    return _Line(kind, obsolete)


def _blocks(kinds: list[_Line]) -> list[tuple[int, int]]:
    """Each entry's lines (start, end): an entry begins where a comment, msgctxt or msgid follows
    a msgstr, as polib begins one; spans without a msgid (trailing comments) left out."""
    starts, after_msgstr = [0], False
    for number, line in enumerate(kinds):
        if line.kind is _Kind.MSGSTR:
            after_msgstr = True
        elif line.kind not in (_Kind.BLANK, _Kind.IGNORED, _Kind.CONTINUATION):
            if after_msgstr:
                starts.append(number)
            after_msgstr = False
    spans = zip(starts, [*starts[1:], len(kinds)])
    return [
        (start, end)
        for start, end in spans
        if any(line.kind is _Kind.MSGID for line in kinds[start:end])
    ]


def _msgstr_span(kinds: list[_Line], start: int, end: int) -> tuple[int, int]:
    """An entry's msgstr lines; where it has none, the empty span after its last string."""
    strings = (_Kind.MSGSTR, _Kind.CONTINUATION)
    first = next((n for n in range(start, end) if kinds[n].kind is _Kind.MSGSTR), None)
    if first is None:
        last = max(
            n for n in range(start, end) if kinds[n].kind not in (_Kind.BLANK, _Kind.IGNORED)
        )
        return last + 1, last + 1
    last = max(n for n in range(first, end) if kinds[n].kind in strings)
    return first, last + 1


def _value(lines: Sequence[str], span: tuple[int, int]) -> str:
    """The string a msgstr's lines spell."""
    pieces = []
    for line in lines[span[0] : span[1]]:
        line = line.strip()
        if line.startswith("#~"):
            line = line[2:].strip()
        if '"' in line:
            pieces.append(polib.unescape(line[line.index('"') + 1 : -1]))
    return "".join(pieces)


def _msgid(lines: Sequence[str], kinds: list[_Line], start: int, end: int) -> str | None:
    """The msgid of an entry that is not obsolete (None for an obsolete one)."""
    first = next(n for n in range(start, end) if kinds[n].kind is _Kind.MSGID)
    if kinds[first].obsolete:
        return None
    last = first + 1
    while last < end and kinds[last].kind in (_Kind.CONTINUATION, _Kind.BLANK, _Kind.IGNORED):
        last += 1
    return _value(lines, (first, last))


def _message(entry: polib.POEntry, kinds: list[_Line], start: int, end: int) -> _Message:
    kept: tuple[str, ...] = ()
    if entry.msgid_plural and not entry.fuzzy and entry.msgstr_plural:
        forms = entry.msgstr_plural
        kept = tuple(forms.get(k, "") for k in range(max(forms) + 1))
    entry_lines = (_Kind.PREVIOUS, _Kind.MSGCTXT, _Kind.MSGID)
    return _Message(
        msgid=entry.msgid,
        plural=entry.msgid_plural or None,
        kept=kept,
        msgstr=_msgstr_span(kinds, start, end),
        flag_lines=tuple(n for n in range(start, end) if kinds[n].kind is _Kind.FLAGS),
        flags_at=next(n for n in range(start, end) if kinds[n].kind in entry_lines),
    )


def _header_at(kinds: list[_Line], blocks: list[tuple[int, int]]) -> int:
    """Where a header entry goes: after the file's own comments, before the first entry."""
    if not blocks:
        return len(kinds)
    start, end = blocks[0]
    leading = (_Kind.BLANK, _Kind.IGNORED, _Kind.TCOMMENT)
    return next(n for n in range(start, end) if kinds[n].kind not in leading)


def _newline(lines: Sequence[str]) -> str:
    for line in lines:
        for ending in ("\r\n", "\n", "\r"):
            if line.endswith(ending):
                return ending
    return "\n"


def _nplurals(header: str) -> int | None:
    for line in header.split("\n"):
        if line.lower().startswith("plural-forms:"):
            found = _NPLURALS.search(line)
            if found and 1 <= int(found.group(1)) <= 100:
                return int(found.group(1))
    return None


def _unwrapped(lines: Sequence[str], kinds: list[_Line], header: tuple[int, int]) -> bool:
    """Whether the file's strings were written without wrapping: a message's line (the header's
    are not telling: tools write them unwrapped in wrapped files) is wider than gettext wraps
    and has a space it would have wrapped at."""
    strings = (_Kind.MSGID, _Kind.MSGID_PLURAL, _Kind.MSGSTR, _Kind.MSGCTXT, _Kind.CONTINUATION)
    for number, (line, kind) in enumerate(zip(lines, kinds)):
        if kind.kind in strings and not kind.obsolete and not header[0] <= number < header[1]:
            line = line.strip()
            if _columns(line) > WIDTH and " " in line[line.find('"') + 1 : WIDTH]:
                return True
    return False


def _flag_edits(lines: Sequence[str], message: _Message, fuzzy: bool) -> list[_Edit]:
    """The `#,` lines of `message` with `fuzzy` added (in front, or a line of its own) or taken
    off (a line left without flags removed)."""
    flagged = {n: _flags(lines[n]) for n in message.flag_lines}
    has_fuzzy = [n for n, flags in flagged.items() if "fuzzy" in flags]
    if fuzzy and not has_fuzzy:
        if not flagged:
            return [_Edit(message.flags_at, message.flags_at, ("#, fuzzy",))]
        first = message.flag_lines[0]
        return [_Edit(first, first + 1, (_flags_line(lines[first], ["fuzzy", *flagged[first]]),))]
    if fuzzy:
        return []
    edits = []
    for n in has_fuzzy:
        rest = [flag for flag in flagged[n] if flag != "fuzzy"]
        edits.append(_Edit(n, n + 1, (_flags_line(lines[n], rest),) if rest else ()))
    return edits


def _flags(line: str) -> list[str]:
    return [flag.strip() for flag in line.strip()[3:].split(",") if flag.strip()]


def _flags_line(line: str, flags: list[str]) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return f"{indent}#, {', '.join(flags)}"


def _header_value(value: str, language: str | None, plurals: bool) -> str:
    """The header's msgstr with a target language, a UTF-8 charset and (`plurals`) the two-form
    plural rule where it lacks them."""
    if value and not value.endswith("\n"):
        value += "\n"
    fields = value.split("\n")[:-1] if value else []

    def at(name: str) -> int | None:
        return next(
            (n for n, field in enumerate(fields) if field.lower().startswith(name.lower() + ":")),
            None,
        )

    if language:
        found = at("Language")
        if found is None:
            after = at("Language-Team")
            before = next(
                (n for n in (at("MIME-Version"), at("Content-Type")) if n is not None), None
            )
            place = (
                after + 1 if after is not None else before if before is not None else len(fields)
            )
            fields.insert(place, f"Language: {language}")
        elif not fields[found].split(":", 1)[1].strip():
            fields[found] = f"Language: {language}"
    found = at("Content-Type")
    if found is None:
        if at("MIME-Version") is None:
            fields.append("MIME-Version: 1.0")
        fields.append("Content-Type: text/plain; charset=UTF-8")
        if at("Content-Transfer-Encoding") is None:
            fields.append("Content-Transfer-Encoding: 8bit")
    else:
        fields[found] = re.sub(
            r"charset=(CHARSET|ascii|us-ascii|ANSI_X3\.4-1968)(?=$|[\s;])",
            "charset=UTF-8",
            fields[found],
            flags=re.IGNORECASE,
        )
    if plurals:
        found = at("Plural-Forms")
        if found is None:
            fields.append(f"Plural-Forms: {_GERMANIC_PLURALS}")
        else:
            fields[found] = f"Plural-Forms: {_GERMANIC_PLURALS}"
    return "".join(field + "\n" for field in fields)


def _columns(text: str) -> int:
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
    )


def _field(keyword: str, value: str, width: int) -> tuple[str, ...]:
    """`keyword "value"` as gettext writes it: on one line where it fits in `width` columns
    (0: any width) and has no line break but at its end; else after an empty first string, a
    line after every `\\n`, each wrapped (`_wrapped`)."""
    whole = f'{keyword} "{polib.escape(value)}"'
    if "\n" not in value[:-1] and (width <= 0 or _columns(whole) <= width):
        return (whole,)
    lines = [f'{keyword} ""']
    for part in re.findall(r"[^\n]*\n|[^\n]+", value):
        lines += [f'"{chunk}"' for chunk in _wrapped(polib.escape(part), width - 2)]
    return tuple(lines)


def _wrapped(escaped: str, width: int) -> list[str]:
    """An escaped string cut into lines of at most `width` columns (a word wider stays whole),
    after a run of spaces or after a hyphen or slash inside a word."""
    if width <= 0:
        return [escaped]
    breaks = [
        n
        for n in range(1, len(escaped))
        if escaped[n - 1] == " "
        and escaped[n] != " "
        or escaped[n - 1] in "-/"
        and escaped[n].isalpha()
        and n > 1
        and escaped[n - 2].isalnum()
    ]
    words = [escaped[a:b] for a, b in zip([0, *breaks], [*breaks, len(escaped)])]
    lines = [""]
    for word in words:
        if lines[-1] and _columns(lines[-1] + word) > width:
            lines.append(word)
        else:
            lines[-1] += word
    return lines
