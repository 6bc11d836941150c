"""Subtitles (SubRip, WebVTT) and Markdown read into texts and written back: the identity
translation gives the file back byte for byte, a fake one changes only the words, broken and
hostile files are one-line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import webvtt
from markdown_it import MarkdownIt

from translate.documents import markdown, subtitles
from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions, Translated, format_of
from translate.documents.safe import Limits

DATA = Path(__file__).parent / "fixtures" / "documents_text"
_TAG = re.compile(r"(</?[a-z]\d+/?>)")


def shout(text: str) -> str:
    """A fake translation: the words upper-cased, the tags as they were."""
    return "".join(part if _TAG.fullmatch(part) else part.upper() for part in _TAG.split(text))


def rendered(document, translate) -> bytes:
    return document.render(
        [Translated(translate(t), 1.0) for t in document.texts()], RenderOptions()
    )


def same(text: str) -> str:
    return text


# --- SubRip --------------------------------------------------------------------------------
def test_srt_texts_are_cues_with_tags_for_formatting():
    document = subtitles.read((DATA / "episode.srt").read_bytes(), "episode.srt")
    assert document.texts() == [
        "Previously on the show...",
        "We never found out who sent the letter to the station.",
        "<x1/>- Are you coming? - <g2>Yes</g2>, right now.",
        "<g1>Stop</g1> the <g2>train</g2>!",
        "♪ ♪",
    ]


def test_srt_identity_gives_the_file_back():
    data = (DATA / "episode.srt").read_bytes()
    assert rendered(subtitles.read(data, "episode.srt"), same) == data


def test_srt_crlf_and_bom_are_kept():
    data = b"\xef\xbb\xbf" + (DATA / "episode.srt").read_bytes().replace(b"\n", b"\r\n")
    document = subtitles.read(data, "episode.srt")
    assert rendered(document, same) == data
    out = rendered(document, shout)
    assert out.startswith(b"\xef\xbb\xbf1\r\n")
    assert b"\r\n<i>WE NEVER FOUND OUT WHO SENT\r\nTHE LETTER TO THE STATION.</i>\r\n" in out
    assert b"\n" not in out.replace(b"\r\n", b"")


def test_srt_fake_translation_changes_only_the_words():
    data = (DATA / "episode.srt").read_bytes()
    out = rendered(subtitles.read(data, "episode.srt"), shout).decode()
    assert out == (
        "1\n00:00:01,000 --> 00:00:03,500\nPREVIOUSLY ON THE SHOW...\n\n"
        "2\n00:00:04,000 --> 00:00:07,250\n"
        "<i>WE NEVER FOUND OUT WHO SENT\nTHE LETTER TO THE STATION.</i>\n\n"
        "3\n00:00:08,000 --> 00:00:10,000 X1:100 X2:600 Y1:50 Y2:80\n"
        '{\\an8}- ARE YOU COMING?\n- <font color="#ffcc00">YES</font>, RIGHT NOW.\n\n'
        "4\n00:00:11,000 --> 00:00:12,000\n<b>STOP</b> THE <u>TRAIN</u>!\n\n\n\n"
        "5\n00:00:13,000 --> 00:00:15,000\n♪ ♪\n"
    )


def test_srt_tags_reordered_move_their_formatting():
    data = b"1\n00:00:01,000 --> 00:00:02,000\n<b>Stop</b> the <u>train</u>!\n"
    document = subtitles.read(data, "a.srt")
    out = document.render([Translated("Den <g2>Zug</g2> <g1>anhalten</g1>!", 0.9)], RenderOptions())
    assert out == b"1\n00:00:01,000 --> 00:00:02,000\nDen <u>Zug</u> <b>anhalten</b>!\n"


def test_srt_translation_wrapped_as_the_cue_was():
    data = (
        b"1\n00:00:01,000 --> 00:00:02,000\nShort\nlines\n\n"
        b"2\n00:00:03,000 --> 00:00:04,000\nOne line\n\n"
        b"3\n00:00:05,000 --> 00:00:06,000\n- Who?\n- Me.\n\n"
        b"4\n00:00:07,000 --> 00:00:08,000\nA\nB\nC\n"
    )
    document = subtitles.read(data, "a.srt")
    assert document.texts() == ["Short lines", "One line", "- Who? - Me.", "A B C"]
    long = "Das ist eine sehr viel längere Übersetzung als das Original war, wirklich"
    out = document.render(
        [
            Translated(long, 1.0),
            Translated(long, 1.0),
            Translated("- Wer denn nur da? - Ich.", 1.0),
            Translated("  Eins   zwei\ndrei  ", 1.0),
        ],
        RenderOptions(),
    ).decode()
    assert out == (
        "1\n00:00:01,000 --> 00:00:02,000\n"
        "Das ist eine sehr viel längere\nÜbersetzung als das Original war, wirklich\n\n"
        "2\n00:00:03,000 --> 00:00:04,000\n" + long + "\n\n"
        "3\n00:00:05,000 --> 00:00:06,000\n- Wer denn nur da?\n- Ich.\n\n"
        "4\n00:00:07,000 --> 00:00:08,000\nEins\nzwei drei\n"
    )


def test_a_dialogue_break_gives_way_to_the_line_limit():
    data = b"1\n00:00:01,000 --> 00:00:02,000\n- Hi.\n- Yes.\n"
    document = subtitles.read(data, "a.srt")
    words = " ".join(["Wort"] * 14)  # after "- Ja." the second line would be 71 characters
    out = document.render([Translated(f"- Ja. - {words}", 1.0)], RenderOptions()).decode()
    assert out.split("\n")[2:4] == [
        "- Ja. - Wort Wort Wort Wort Wort Wort",
        "Wort Wort Wort Wort Wort Wort Wort Wort",
    ]
    out = document.render([Translated("- Ja. - Wort Wort Wort", 1.0)], RenderOptions()).decode()
    assert out.split("\n")[2:4] == ["- Ja.", "- Wort Wort Wort"]


def test_srt_garbled_tags_lose_no_word_and_no_mark():
    data = b"1\n00:00:01,000 --> 00:00:02,000\n{\\an8}<i>Go</i> now\n"
    document = subtitles.read(data, "a.srt")
    assert document.texts() == ["<x1/><g2>Go</g2> now"]
    out = document.render([Translated("</g2>Geh <g2>jetzt", 0.5)], RenderOptions())
    assert out == b"1\n00:00:01,000 --> 00:00:02,000\nGeh jetzt{\\an8}\n"


def test_srt_unclosed_and_stray_tags_come_back():
    data = b"1\n00:00:01,000 --> 00:00:02,000\n<i>Open and</b> never <Laughs> closed\n"
    document = subtitles.read(data, "a.srt")
    assert document.texts() == ["Open and<x1/> never <Laughs> closed"]
    out = document.render([Translated("OPEN AND<x1/> NEVER <Laughs> CLOSED", 1.0)], RenderOptions())
    assert out == b"1\n00:00:01,000 --> 00:00:02,000\n<i>OPEN AND</b> NEVER <Laughs> CLOSED\n"


def test_srt_text_that_looks_like_a_tag_stays_text():
    data = b"1\n00:00:01,000 --> 00:00:02,000\nType <g1> and <x2/> <i>here</i>\n"
    document = subtitles.read(data, "a.srt")
    assert document.texts() == ["Type <g1> and <x2/> <k1>here</k1>"]
    out = document.render([Translated("<k1>Hier</k1> <g1> und <x2/> tippen", 1.0)], RenderOptions())
    assert out == b"1\n00:00:01,000 --> 00:00:02,000\n<i>Hier</i> <g1> und <x2/> tippen\n"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"1\n00:00:01,000 --> 00:00:0x,000\nHello\n",
            "a.srt line 2: cue 1's end time '00:00:0x,000' is not hh:mm:ss,mmm",
        ),
        (
            b"1\n00:00:01,000 -> 00:00:02,000\nHello\n",
            "a.srt line 1: not a SubRip cue (an index, a line 'hh:mm:ss,mmm --> hh:mm:ss,mmm', "
            "its text): '1'",
        ),
        (
            b"1\n00:00:01,000 --> 00:00:02,000\nHi\n\n2\nxx:00:01,000 --> 00:00:02,000\nBye\n",
            "a.srt line 6: the timing line 'xx:00:01,000 --> 00:00:02,000' (after cue 1) is not "
            "'hh:mm:ss,mmm --> hh:mm:ss,mmm'",
        ),
        (
            b"\n\nJust some text\n\n1\n00:00:01,000 --> 00:00:02,000\nHi\n",
            "a.srt line 3: not a SubRip cue (an index, a line 'hh:mm:ss,mmm --> hh:mm:ss,mmm', "
            "its text): 'Just some text'",
        ),
        (
            b"1\n00:00:01,000 --> 00:00:02,000\nCaf\xe9\n",
            "a.srt line 3: not UTF-8 text",
        ),
    ],
)
def test_broken_srt_is_a_one_line_error(data, message):
    with pytest.raises(DocumentError) as error:
        subtitles.read(data, "a.srt")
    assert str(error.value) == message


def test_srt_edge_files():
    assert subtitles.read(b"", "a.srt").texts() == []
    empty_cue = b"1\n00:00:01,000 --> 00:00:02,000\n\n2\n00:00:03,000 --> 00:00:04,000\nB\n"
    document = subtitles.read(empty_cue, "a.srt")
    assert document.texts() == ["B"]
    assert rendered(document, str.lower) == empty_cue.replace(b"\nB\n", b"\nb\n")
    with pytest.raises(DocumentError, match=r"a\.srt: 2 cues, more than the 1 texts allowed"):
        subtitles.read(
            empty_cue + b"\n3\n00:00:05,000 --> 00:00:06,000\nC\n", "a.srt", Limits(max_texts=1)
        )
    with pytest.raises(DocumentError, match=r"a\.srt: 67 bytes, more than the 10 a file may hold"):
        subtitles.read(empty_cue, "a.srt", Limits(max_bytes=10))


# --- WebVTT ---------------------------------------------------------------------------------
def test_vtt_texts_and_identity():
    data = (DATA / "lecture.vtt").read_bytes()
    document = subtitles.read(data, "lecture.vtt")
    assert document.texts() == [
        "Welcome to the <g1>first</g1> lecture on translation & meaning.",
        "Let's start with <g1>words</g1>. <x2/><g3>Then sentences.</g3>",
        "Is 3 < 4? Yes\xa0it is.",
        "♪",
    ]
    assert rendered(document, same) == data


def test_vtt_reads_the_cues_webvtt_py_reads():
    data = (DATA / "lecture.vtt").read_bytes()
    document = subtitles.read(data, "lecture.vtt")
    text = data.decode()
    library = webvtt.from_string(text)
    assert [text[cue.start : cue.end].split("\n") for cue in document.cues] == [
        caption.lines for caption in library.captions
    ]


def test_vtt_fake_translation_changes_only_the_words():
    data = (DATA / "lecture.vtt").read_bytes()
    out = rendered(subtitles.read(data, "lecture.vtt"), shout).decode()
    head = data.decode().split("intro\n")[0]
    assert out == head + (
        "intro\n00:00.500 --> 00:04.000 align:start line:10% region:left\n"
        "<v Anna>WELCOME TO THE <c.loud>FIRST</c> LECTURE\nON TRANSLATION &amp; MEANING.\n\n"
        "00:00:05.000 --> 00:00:08.000\n"
        "<v.teacher Ben>LET'S START WITH\n<i>WORDS</i>. <00:00:06.500></v>THEN SENTENCES.\n\n\n"
        "NOTE one more comment\n\n"
        "q&a\n00:00:09.000 --> 00:00:11.000 position:20%\nIS 3 &lt; 4? YES\xa0IT IS.\n\n"
        "00:00:12.000 --> 00:00:13.000\n<c.music>♪</c>\n"
    )


def test_vtt_escapes_what_the_translation_writes():
    data = b"WEBVTT\n\n00:01.000 --> 00:02.000\n<i>Tom</i> & Jerry\n"
    document = subtitles.read(data, "a.vtt")
    assert document.texts() == ["<g1>Tom</g1> & Jerry"]
    out = document.render([Translated("<g1>Tom</g1> & Jerry --> <b>x</b>", 1.0)], RenderOptions())
    assert (
        out
        == b"WEBVTT\n\n00:01.000 --> 00:02.000\n<i>Tom</i> &amp; Jerry --&gt; &lt;b&gt;x&lt;/b&gt;\n"
    )


def test_vtt_crlf_bom_and_cr_only():
    lines = ["WEBVTT", "", "1", "00:01.000 --> 00:02.000", "Hello", "world", ""]
    for eol in ("\r\n", "\r"):
        data = b"\xef\xbb\xbf" + eol.join(lines).encode()
        document = subtitles.read(data, "a.VTT")
        assert document.texts() == ["Hello world"]
        assert rendered(document, same) == data
        assert rendered(document, shout) == data.replace(b"Hello", b"HELLO").replace(
            b"world", b"WORLD"
        )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "a.vtt line 1: not WebVTT (its first line must be WEBVTT)"),
        (
            b"WEBVTTX\n\n00:01.000 --> 00:02.000\nHi\n",
            "a.vtt line 1: not WebVTT (its first line must be WEBVTT)",
        ),
        (
            b"WEBVTT\n\n00:01.000 --> 00:02.000\nHi\n\nid\n00:03 --> 00:04.000\nBye\n",
            "a.vtt line 7: cue timings '00:03 --> 00:04.000' are not "
            "'hh:mm:ss.ttt --> hh:mm:ss.ttt [settings]'",
        ),
        (
            b"WEBVTT\n\n00:01.000 --> 00:02.0001\nHi\n",
            "a.vtt line 3: cue timings '00:01.000 --> 00:02.0001' are not "
            "'hh:mm:ss.ttt --> hh:mm:ss.ttt [settings]'",
        ),
        (b"WEBVTT\n\n00:01.000 --> 00:02.000\n\xff\n", "a.vtt line 4: not UTF-8 text"),
    ],
)
def test_broken_vtt_is_a_one_line_error(data, message):
    with pytest.raises(DocumentError) as error:
        subtitles.read(data, "a.vtt")
    assert str(error.value) == message


def test_vtt_cue_text_that_runs_into_a_timing_line_is_its_own_cue():
    data = b"WEBVTT\n\n00:01.000 --> 00:02.000\nOne\n00:03.000 --> 00:04.000\nTwo\n"
    document = subtitles.read(data, "a.vtt")
    assert document.texts() == ["One", "Two"]
    assert rendered(document, shout) == data.replace(b"One", b"ONE").replace(b"Two", b"TWO")


def test_formats_registry_reads_subtitles():
    data = (DATA / "episode.srt").read_bytes()
    assert (
        format_of("x/EPISODE.SRT").read(data, "EPISODE.SRT").texts()[0]
        == "Previously on the show..."
    )
    vtt = (DATA / "lecture.vtt").read_bytes()
    assert len(format_of("lecture.vtt").read(vtt, "lecture.vtt").texts()) == 4


# --- Markdown -------------------------------------------------------------------------------
README_TEXTS = [
    "Sample project <x1/>",
    "A <g1>small</g1> toolkit for <g2>fast</g2> translation of files. It keeps the <x3/> of each "
    "file and reads <g4>the documentation</g4> before anything else.",
    "Installation",
    "Install Python 3.11 or newer.",
    "Run <x1/> in a terminal. Then check the version:",
    "Read the <g1>FAQ</g1> and the <g2>changelog</g2>.",
    "Fast: <g1>very</g1> fast",
    "Nested item with <g1>old</g1> new text",
    "Safe: see <x1/>",
    "<g1>Note:</g1> the model is small. It can make mistakes<x2/>so check its output.",
    "Option",
    "Meaning",
    "Beam size, 1 for greedy search",
    "Use the <g1>quick</g1> path | skip checks",
    "Setext heading",
    "Inline <x1/>Ctrl<x2/>+<x3/>C<x4/> copies, and a line ends here<x5/>with a backslash break.",
]


def test_markdown_texts():
    document = markdown.read((DATA / "readme.md").read_bytes(), "readme.md")
    assert document.texts() == README_TEXTS


def test_markdown_identity_gives_the_file_back():
    data = (DATA / "readme.md").read_bytes()
    assert rendered(markdown.read(data, "readme.md"), same) == data
    crlf = b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    document = markdown.read(crlf, "readme.md")
    assert document.texts() == README_TEXTS
    assert rendered(document, same) == crlf


def test_markdown_fake_translation_changes_only_the_words():
    data = (DATA / "readme.md").read_bytes()
    out = rendered(markdown.read(data, "readme.md"), shout).decode()
    source = data.decode()
    kept = source.split("Setext heading\n")[1]  # after the last text but one: as written
    assert out == (
        source.split("# Sample project")[0]
        + "# SAMPLE PROJECT ![build](https://ci.example.org/badge.svg)\n\n"
        "[![Coverage](https://img.example.org/cov.svg)](https://cov.example.org/r/sample)\n\n"
        "A *SMALL* TOOLKIT FOR **FAST** TRANSLATION OF FILES. IT KEEPS THE `layout` OF EACH FILE "
        'AND READS [THE DOCUMENTATION](https://docs.example.org/guide "Guide") BEFORE ANYTHING '
        "ELSE.\n\n"
        "## INSTALLATION\n\n"
        "1. INSTALL PYTHON 3.11 OR NEWER.\n"
        "2. RUN `pip install sample` IN A TERMINAL. THEN CHECK THE VERSION:\n\n"
        "   ```sh\n   sample --version\n   ```\n\n"
        "3. READ THE [FAQ][faq] AND THE [CHANGELOG][changelog].\n\n"
        "- FAST: *VERY* FAST\n"
        "  - NESTED ITEM WITH ~~OLD~~ NEW TEXT\n"
        "- SAFE: SEE <https://example.org/security>\n\n"
        "> **NOTE:** THE MODEL IS SMALL. IT CAN MAKE MISTAKES  \n> SO CHECK ITS OUTPUT.\n\n"
        "| OPTION | MEANING |\n"
        "|--------|:--------|\n"
        "| `--beam` | BEAM SIZE, 1 FOR GREEDY SEARCH |\n"
        "| `--fast` | USE THE **QUICK** PATH \\| SKIP CHECKS |\n\n"
        "SETEXT HEADING\n"
        + kept.split("Inline <kbd>")[0]
        + "INLINE <kbd>CTRL</kbd>+<kbd>C</kbd> COPIES, AND A LINE ENDS HERE\\\n"
        "WITH A BACKSLASH BREAK.\n\n***\n\n"
        '[faq]: https://example.org/faq "Frequently asked"\n'
        "[changelog]: https://example.org/changes\n"
    )


def _flat(tokens) -> list[tuple]:
    """Tokens as comparable rows: children in line, soft breaks as spaces, text joined."""
    rows: list[tuple] = []
    for token in tokens:
        if token.type == "inline":
            rows += _flat(token.children)
            continue
        if token.type in ("text", "softbreak"):
            text = " " if token.type == "softbreak" else token.content
            if rows and rows[-1][0] == "text":
                rows[-1] = ("text", rows[-1][1] + text)
            else:
                rows.append(("text", text))
            continue
        children = _flat(token.children) if token.children else []
        rows.append(
            (token.type, token.tag, token.markup, dict(token.attrs), token.content, children)
        )
    return rows


def test_markdown_written_back_parses_to_the_same_structure():
    """A translation that is the text with a space after it is written by the writer (not kept
    as it was); it must parse into the same tokens as the source, and upper-cased words into
    the same tokens with their text upper-cased."""
    data = (DATA / "readme.md").read_bytes()
    document = markdown.read(data, "readme.md")
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])

    def parse(written: bytes) -> list[tuple]:
        front, body = written.decode().split("---\n\n", 1)  # front matter is no Markdown
        assert front == "---\ntitle: Sample *project*\ntags: [demo]\n"
        return _flat(md.parse(body))

    source = parse(data)
    assert parse(rendered(document, lambda t: t + " ")) == source
    shouted = parse(rendered(document, shout))
    assert len(shouted) == len(source)
    for mine, theirs in zip(shouted, source):
        if theirs[0] == "text" and not theirs[1].startswith("https://"):  # not an autolink's
            assert mine == ("text", theirs[1].upper())
        else:
            assert mine == theirs


def test_markdown_tags_reordered():
    data = b"Use **bold** and *em* here.\n"
    document = markdown.read(data, "a.md")
    assert document.texts() == ["Use <g1>bold</g1> and <g2>em</g2> here."]
    out = document.render([Translated("<g2>Em</g2> und <g1>fett</g1> hier.", 1.0)], RenderOptions())
    assert out == b"*Em* und **fett** hier.\n"


def test_markdown_translated_text_is_escaped():
    data = b"- item\n\n# Title\n\n| a |\n|---|\n| cell |\n\nPara *x*\n"
    document = markdown.read(data, "a.md")
    assert document.texts() == ["item", "Title", "a", "cell", "Para <g1>x</g1>"]
    words = ["1. *not* [a] <b>", "C# ##", "a|b", "`x` _y_", "- <g1>x</g1> &amp;"]
    out = document.render([Translated(w, 1.0) for w in words], RenderOptions())
    assert out == (
        b"- 1\\. \\*not\\* \\[a\\] \\<b>\n\n# C# \\##\n\n| a\\|b |\n|---|\n| \\`x\\` \\_y\\_ |\n\n"
        b"\\- *x* \\&amp;\n"
    )
    html = MarkdownIt("commonmark").enable("table").render(out.decode())
    assert html == (
        "<ul>\n<li>1. *not* [a] &lt;b&gt;</li>\n</ul>\n<h1>C# ##</h1>\n<table>\n<thead>\n<tr>\n"
        "<th>a|b</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td>`x` _y_</td>\n</tr>\n</tbody>\n"
        "</table>\n<p>- <em>x</em> &amp;amp;</p>\n"
    )


def test_markdown_block_quote_paragraph_joined_with_its_breaks():
    data = b"> one\n> two  \n>   three\nlazy\n\n  * item\n    more\\\n    last\n"
    document = markdown.read(data, "a.md")
    assert document.texts() == ["one two<x1/>three lazy", "item more<x1/>last"]
    out = rendered(document, shout)
    assert out == b"> ONE TWO  \n>   THREE LAZY\n\n  * ITEM MORE\\\n    LAST\n"


def test_markdown_links_keep_destinations_and_references():
    data = (
        b"See [the guide](<a b.md> 'T'), [Ref][], [ref] and [text][ref].\n\n"
        b"[ref]: https://example.org\n"
    )
    document = markdown.read(data, "a.md")
    assert document.texts() == [
        "See <g1>the guide</g1>, <g2>Ref</g2>, <g3>ref</g3> and <g4>text</g4>."
    ]
    out = document.render(
        [
            Translated(
                "Siehe <g1>Anleitung</g1>, <g2>Verweis</g2>, <g3>V</g3> und <g4>Text</g4>.", 1.0
            )
        ],
        RenderOptions(),
    )
    assert out == (
        b"Siehe [Anleitung](<a b.md> 'T'), [Verweis][Ref], [V][ref] und [Text][ref].\n\n"
        b"[ref]: https://example.org\n"
    )


def test_markdown_marks_keep_the_delimiters_they_were_in():
    data = b"See [`load` hook](#load) and press **`q`**.\n"
    document = markdown.read(data, "a.md")
    assert document.texts() == ["See <x1/><g2> hook</g2> and press <x3/>."]
    out = document.render(
        [Translated("Siehe <x1/><g2> Haken</g2> und <x3/> drücken.", 1.0)], RenderOptions()
    )
    assert out == b"Siehe [`load` Haken](#load) und **`q`** dr\xc3\xbccken.\n"
    moved = document.render([Translated("<g2>Haken</g2> <x1/>, <x3/>.", 1.0)], RenderOptions())
    assert moved == b"[Haken](#load) `load`, **`q`**.\n"


def test_markdown_garbled_tags_keep_every_mark():
    data = b"Press `q` to **quit** now.\n"
    document = markdown.read(data, "a.md")
    assert document.texts() == ["Press <x1/> to <g2>quit</g2> now."]
    out = document.render([Translated("<g2>Beenden</g2></g2> mit jetzt", 0.2)], RenderOptions())
    assert out == b"Beenden mit jetzt`q`\n"


def test_markdown_untranslated_parts():
    data = (
        b"---\ntitle: x\n---\n```\ncode\n```\n\n<p>html</p>\n\n    indented\n\n"
        b"![only an image](i.png)\n\n[ref]: /url\n"
    )
    document = markdown.read(data, "a.md")
    assert document.texts() == []
    assert rendered(document, shout) == data


def test_markdown_hostile_input():
    with pytest.raises(DocumentError, match=r"^a\.md line 2: not UTF-8 text$"):
        markdown.read(b"ok\n\xc3\x28\n", "a.md")
    nul = markdown.read(b"A\x00b *c*\n", "a.md")
    assert nul.texts() == ["A\ufffdb <g1>c</g1>"]
    assert rendered(nul, same) == b"A\x00b *c*\n"
    brackets = b"[" * 5000 + b"x" + b"]" * 5000 + b"\n"
    document = markdown.read(brackets, "a.md")
    assert rendered(document, same) == brackets
    escaped = brackets.replace(b"[", b"\\[").replace(b"]", b"\\]").replace(b"x", b"X")
    assert rendered(document, shout) == escaped
    nested = b"*" * 3000 + b"y" + b"*" * 3000 + b"\n"  # emphasis 1,500 deep: left as written
    document = markdown.read(nested, "a.md")
    assert document.texts() == [] and rendered(document, shout) == nested
    tags = b"1\n00:00:01,000 --> 00:00:02,000\n" + b"<i>" * 3000 + b"x\n"
    document = subtitles.read(tags, "a.srt")  # 16 tags open at once at most, the others marks
    assert document.texts()[0].startswith("<x1/><x2/>")
    assert rendered(document, same) == tags
    assert rendered(document, shout) == tags.replace(b"x", b"X")
    many = b"\n\n".join(b"p%d" % k for k in range(5))
    with pytest.raises(DocumentError, match=r"^a\.md: 5 texts, more than the 4 allowed$"):
        markdown.read(many, "a.md", Limits(max_texts=4))


def test_formats_registry_reads_markdown():
    data = (DATA / "readme.md").read_bytes()
    assert format_of("README.markdown").read(data, "README.markdown").texts() == README_TEXTS
