"""HTML pages translated with their structure (translate/documents/html.py): a paragraph with its
inline elements is one text with tags, written back with exactly that markup around the new
text; attributes, the title and the description meta are texts of their own; what markup.py
leaves untranslated stays as written. Real LibreOffice help pages (tests/fixtures/documents_html)
come back byte for byte when each text is "translated" as itself, and with a fake translation
html5lib (a parser that follows the HTML standard) reads the same elements and attributes, only
their text changed."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from translate.documents import html
from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions, format_of
from translate.documents.safe import Limits
from translate.documents.translating import Translated, translate_texts
from translate.text.markup import MAX_DEPTH, MAX_NODES, HtmlFragment, HtmlTokens

html5lib = pytest.importorskip("html5lib")

PAGES = sorted((Path(__file__).parent / "fixtures" / "documents_html").glob("*.html"))
assert len(PAGES) == 3, PAGES
TAG = re.compile(r"</?[a-z]\d+/?>")


def rendered(data: bytes | str, translations: list[str] | None = None) -> tuple[list[str], str]:
    """The texts of a page, and the page written with `translations` (default: the texts)."""
    if isinstance(data, str):
        data = data.encode()
    document = html.read(data, "page.html")
    texts = document.texts()
    out = document.render([Translated(t, 1.0) for t in translations or texts], RenderOptions())
    return texts, out.decode()


def upper(text: str) -> str:
    """Each run of text upper-cased, the tags as they are."""
    pieces, at = [], 0
    for tag in TAG.finditer(text):
        pieces += [text[at : tag.start()].upper(), tag[0]]
        at = tag.end()
    return "".join(pieces) + text[at:].upper()


def top_level(text: str) -> list[str]:
    """The text cut into its top-level pieces: a tag pair with what it holds, a mark, the text
    between."""
    pieces, depth, start = [], 0, 0
    for tag in TAG.finditer(text):
        if depth == 0 and tag.start() > start:
            pieces.append(text[start : tag.start()])
            start = tag.start()
        if tag[0].endswith("/>"):
            if depth == 0:
                pieces.append(tag[0])
                start = tag.end()
        elif tag[0].startswith("</"):
            depth -= 1
            if depth == 0:
                pieces.append(text[start : tag.end()])
                start = tag.end()
        else:
            depth += 1
    return pieces + ([text[start:]] if start < len(text) else [])


def elements(markup: str) -> list:
    return list(html5lib.parse(markup, treebuilder="etree", namespaceHTMLElements=False).iter())


def flat(text: str | None) -> str:
    return re.sub(r"[ \t\n\r\f]+", " ", text or "")


def assert_only_text_changed(before: str, after: str) -> int:
    """html5lib reads the same elements, in the same order and nesting, with the same
    attributes, but for translated ones upper-cased, and each text as it was or upper-cased
    (whitespace aside); how many texts changed."""
    changed = 0
    old, new = elements(before), elements(after)
    assert [str(e.tag) for e in old] == [str(e.tag) for e in new]
    for one, other in zip(old, new):
        assert [len(one)] == [len(other)]  # as many children
        assert one.attrib.keys() == other.attrib.keys()
        for name, value in one.attrib.items():
            if other.attrib[name] != value:
                assert name in (*html.TRANSLATED_ATTRIBUTES, "content")
                assert flat(other.attrib[name]) == flat(value).upper()
        for text, translated in ((one.text, other.text), (one.tail, other.tail)):
            assert flat(translated) in (flat(text), flat(text).upper())
            changed += flat(translated) != flat(text)
    return changed


# --- a paragraph as one text -------------------------------------------------------------


def test_a_paragraph_with_inline_elements_is_one_text_written_back_with_their_markup():
    page = '<p>Click <b>here</b> to <a href="x">open</a> it.</p>'
    texts, out = rendered(page, ["Klicken Sie <g1>hier</g1>, um es zu <g2>öffnen</g2>."])
    assert texts == ["Click <g1>here</g1> to <g2>open</g2> it."]
    assert out == '<p>Klicken Sie <b>hier</b>, um es zu <a href="x">öffnen</a>.</p>'
    _, out = rendered(page, ["<g2>Öffnen</g2> Sie es mit einem Klick <g1>hier</g1>."])
    assert out == '<p><a href="x">Öffnen</a> Sie es mit einem Klick <b>hier</b>.</p>'


NESTED = '<p>Press <a href="k"><b>Enter</b></a> or <b>use <i>the</i> menu</b>.</p>'


@pytest.mark.parametrize(
    "translation, expected",
    [
        (
            "Drücken Sie <g1>Eingabe</g1> oder <g2>das <g3>Menü</g3> verwenden</g2>.",
            '<p>Drücken Sie <a href="k"><b>Eingabe</b></a> oder <b>das <i>Menü</i> verwenden'
            "</b>.</p>",
        ),
        (  # reordered
            "<g2>Menü <g3>benutzen</g3></g2> oder <g1>Eingabe</g1>",
            '<p><b>Menü <i>benutzen</i></b> oder <a href="k"><b>Eingabe</b></a></p>',
        ),
        (  # the outer tag lost: the inner one's text keeps both elements
            "<g3>Menü</g3> <g1>Eingabe</g1>",
            '<p><b><i>Menü</i></b> <a href="k"><b>Eingabe</b></a></p>',
        ),
        (  # a tag written twice, one closed that is not open: text, the elements empty after it
            "<g1>a</g1> b <g1>c</g1>",
            '<p>a b c<a href="k"><b></b></a><b><i></i></b></p>',
        ),
        ("<g1>a</g2> b", '<p>a b<a href="k"><b></b></a><b><i></i></b></p>'),
        (  # tags lost: their elements written empty at the end
            "Nur Text",
            '<p>Nur Text<a href="k"><b></b></a><b><i></i></b></p>',
        ),
    ],
    ids=["nested", "reordered", "outer-lost", "repeated", "crossed", "lost"],
)
def test_nested_inline_elements_are_nested_tags_and_each_comes_back_once(translation, expected):
    texts, out = rendered(NESTED, [translation])
    assert texts == ["Press <g1>Enter</g1> or <g2>use <g3>the</g3> menu</g2>."]
    assert out == expected


def test_a_translation_that_splits_an_element_writes_its_later_text_outside_it():
    texts, out = rendered("<p><b>bold <i>it</i></b> plain</p>", ["<g2>x</g2> y <g1>z</g1>"])
    assert texts == ["<g1>bold <g2>it</g2></g1> plain"]
    assert out == "<p><b><i>x</i></b> y z</p>"


MARKS = (
    '<p>Line one<br>line two <img src="a.png" alt="A cat"> call <code>f(x)</code><!-- c --> '
    '<a name="n"></a>now.</p>'
)


@pytest.mark.parametrize(
    "translations, expected",
    [
        (
            ["Zeile eins<x1/>Zeile zwei <x2/> ruf <x3/><x4/> <x5/>jetzt.", "Eine Katze"],
            '<p>Zeile eins<br>Zeile zwei <img src="a.png" alt="Eine Katze"> ruf <code>f(x)</code>'
            '<!-- c --> <a name="n"></a>jetzt.</p>',
        ),
        (
            ["<x5/><x4/><x3/><x2/><x1/>", "Katze"],
            '<p><a name="n"></a><!-- c --><code>f(x)</code><img src="a.png" alt="Katze"><br></p>',
        ),
        (  # marks the translation lost come after its text
            ["ohne Marken", "K"],
            '<p>ohne Marken<br><img src="a.png" alt="K"><code>f(x)</code><!-- c --><a name="n">'
            "</a></p>",
        ),
    ],
)
def test_br_img_code_comments_and_empty_elements_are_marks_holding_their_markup(
    translations, expected
):
    texts, out = rendered(MARKS, translations)
    assert texts == ["Line one<x1/>line two <x2/> call <x3/><x4/> <x5/>now.", "A cat"]
    assert out == expected


def test_a_mark_stays_in_the_elements_around_it_in_the_translation():
    page = '<p><a name="r"></a><span class="e">Related <b>topics</b><br></span> after</p>'
    texts, out = rendered(page)
    assert texts == ["<x1/><g2>Related <g3>topics</g3><x4/></g2> after"]
    _, out = rendered(page, ["<x1/><g2>Verwandte <g3>Themen</g3><x4/></g2> danach"])
    assert out == '<p><a name="r"></a><span class="e">Verwandte <b>Themen</b><br></span> danach</p>'
    _, out = rendered(page, ["<g2><x1/>Verwandte</g2> <x4/><g3>Themen</g3>"])
    assert out == '<p><span class="e"><a name="r"></a>Verwandte</span> <br><b>Themen</b></p>'


def test_a_mark_outside_the_elements_around_the_whole_text_stays_outside_them():
    page = '<p><a name="r"></a><span class="e">Related</span><br></p>'
    texts, out = rendered(page, ["<x1/>Verwandte<x2/>"])
    assert texts == ["<x1/>Related<x2/>"]
    assert out == '<p><a name="r"></a><span class="e">Verwandte</span><br></p>'
    _, out = rendered(page, ["<x2/>Verwandte<x1/>"])
    assert out == '<p><br><span class="e">Verwandte</span><a name="r"></a></p>'


def test_an_unfinished_tag_or_comment_at_the_end_stays_at_the_end():
    """Moved before text, it would take that text in (as attributes, or a comment)."""
    for page in ("<p>Hello <b", "<p>Hello <!-- x", "<p>Hello <b><i title='x"):
        texts, out = rendered(page, ["Hallo x=1 onclick=alert(1)>"])
        assert texts == ["Hello"]
        assert out.startswith("<p>Hallo x=1 onclick=alert(1)&gt; <")
        assert "onclick" not in str([e.attrib for e in elements(out)])


def test_elements_around_the_whole_text_are_its_bare_formatting():
    texts, out = rendered(
        '<p><span class="avis">Shows the <span class="emph">time</span>.</span></p>',
        ["Zeigt die <g1>Zeit</g1>."],
    )
    assert texts == ["Shows the <g1>time</g1>."]
    assert out == '<p><span class="avis">Zeigt die <span class="emph">Zeit</span>.</span></p>'


def test_an_element_holding_only_another_is_one_tag_with_it():
    texts, out = rendered('<p>See <a href="u"><em>this</em></a>.</p>', ["Siehe <g1>dies</g1>."])
    assert texts == ["See <g1>this</g1>."]
    assert out == '<p>Siehe <a href="u"><em>dies</em></a>.</p>'


def test_a_line_break_within_a_text_is_given_as_a_space_and_kept_where_unchanged():
    page = "<p>\n  one\n  two <b>three\nfour</b>\n</p>"
    texts, out = rendered(page)
    assert texts == ["one two <g1>three four</g1>"]
    assert out == page
    _, out = rendered(page, ["eins zwei <g1>drei vier</g1>"])
    assert out == "<p>\n  eins zwei <b>drei vier</b>\n</p>"


# --- where the tags do not pair up: a text node at a time, as markup.py ----------------------


@pytest.mark.parametrize(
    "page, texts",
    [
        ("<p>open <b>bold</p><p>next <i>one</i></p>", ["open", "bold", "next <g1>one</g1>"]),
        ("<p><b>a<i>b</b>c</i></p>", ["a", "b", "c"]),
        (
            "<div>Hello <b>world<div>block</div> more</b> end</div>",
            ["Hello", "world", "block", "more", "end"],
        ),
        (  # text a table moves before it
            "<table><tr><td>in <b>cell</b></td>stray <b>text</b></tr></table>",
            ["in <g1>cell</g1>", "stray ", "text"],
        ),
        (  # an a opened in an a: the browser closes the first
            '<p>x <a href="1">one <a href="2">two</a> three</a></p>',
            ["x ", "one ", "two", " three"],
        ),
        ("<p>x<script>var a = '<b>';</script>y</p>", ["x", "y"]),
    ],
    ids=["unclosed", "misnested", "block-in-inline", "fostered", "a-in-a", "script"],
)
def test_inline_markup_a_browser_reads_otherwise_falls_back_to_text_nodes(page, texts):
    found, out = rendered(page, [upper(text) for text in rendered(page)[0]])
    assert found == texts
    assert out == HtmlFragment.parse(page).render(
        [t.upper() for t in HtmlFragment.parse(page).texts()]
    )


HOSTILE = [
    "<p>a<b>b<p>c</b>d",
    "<b><p>x</b>y</p>",
    "<table><b>x<tr><td>y</td></tr></b></table>z",
    "<p><a href=1>x<div>y</a>z</div></p>",
    "<i>1<i>2<i>3<i>4</i></i></i></i>",
    "<svg><p>break</p></svg> out <b>bold</b>",
    "<p>x<!-- a -- b -->y<!--->z</p>",
    "<p>a &amp;<b>&lt;</b>&gt; &nbsp; &copy</p>",
    "<p><nobr>a<nobr>b</nobr></nobr></p>",
    "<ul><li>one <b>two<li>three</b></ul>",
    "<p>unterminated <b",
    "<p>tail <!-- open comment",
    "<button>a <b>b</b></button><label>c <i>d</i></label>",
    "<p>x</p></b>y <b>z</b>",
    '<p><img src=x alt="a\'b">x<br/>y</p>',
    "<p><code>a<b>b</b></code> <kbd>Ctrl</kbd>+<kbd>C</kbd></p>",
    "<select><option>o</option></select><p>after <b>it</b></p>",
    "<noscript><p>x</p></noscript><p>after</p>",
]


@pytest.mark.parametrize("page", HOSTILE)
def test_every_text_node_markup_py_lists_is_in_one_text_and_nothing_else_changes(page):
    """The text nodes the texts stand for are those markup.py lists (each once), and with each
    text upper-cased html5lib reads the same elements and attributes."""
    document = html.read(page.encode(), "page.html")
    covered = []
    for part in document.parts:
        if isinstance(part, html._Stretch):
            tokens = document.tokens[part.first : part.stop]
            covered += [(t.start, t.end) for t in tokens if t.listed]
        elif isinstance(part, html._Node):
            covered.append((document.tokens[part.token].start, document.tokens[part.token].end))
    assert sorted(covered) == HtmlFragment.parse(page).spans
    translated = [Translated(upper(text), 1.0) for text in document.texts()]
    out = document.render(translated, RenderOptions()).decode()
    assert_only_text_changed(page, out)
    same = document.render([Translated(t, 1.0) for t in document.texts()], RenderOptions())
    assert same == page.encode()


@pytest.mark.parametrize("page", HOSTILE + [p.read_text(encoding="utf-8") for p in PAGES])
def test_the_tokens_cover_the_input_one_after_another(page):
    at = 0
    for token in HtmlTokens.parse(page, document=True).tokens:
        assert token.start == at and token.end >= token.start
        at = token.end
    assert at == len(page)


# --- escaping: a translation is text ------------------------------------------------------


def test_a_translation_is_escaped_as_text_attribute_value_and_title():
    page = (
        "<!DOCTYPE html><html><head><title>A &amp; B</title>"
        '<meta name="description" content=\'Say "hi"\'></head><body>'
        '<p title=tip>Hi <abbr title="HyperText">HTML</abbr>!</p>'
        '<input placeholder="Search" aria-label="Search box"></body></html>'
    )
    texts, out = rendered(
        page,
        [
            "</title><script>alert(1)</script>",
            'It\'s "new" <ok>',
            'T\'ip "x" onmouseover=alert(1)',
            "<script>alert(1)</script> <g1>HTML</g1> &amp;",
            'Hyper & "Text"',
            "Suche\xa0hier",
            "Suchfeld",
        ],
    )
    assert texts == ["A & B", 'Say "hi"', "tip", "Hi <g1>HTML</g1>!", "HyperText", "Search"] + [
        "Search box"
    ]
    assert out == (
        "<!DOCTYPE html><html><head><title>&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;"
        '</title><meta name="description" content=\'It&#39;s "new" &lt;ok&gt;\'></head><body>'
        '<p title="T\'ip &quot;x&quot; onmouseover=alert(1)">&lt;script&gt;alert(1)&lt;/script&gt;'
        ' <abbr title="Hyper &amp; &quot;Text&quot;">HTML</abbr> &amp;amp;</p>'
        '<input placeholder="Suche&nbsp;hier" aria-label="Suchfeld"></body></html>'
    )
    assert [str(e.tag) for e in elements(out)] == [str(e.tag) for e in elements(page)]


def test_runs_that_come_together_are_escaped_as_one_text():
    """A "<" at the end of one run and "script>" at the start of the next (its element already
    written) must not make a tag."""
    page = "<p>a < b <b><i>x</i>y</b></p>"
    texts, out = rendered(page, ["<g2>a</g2>b<<g1>script>alert(1)</g1>"])
    assert texts == ["a < b <g1><g2>x</g2>y</g1>"]
    assert out == "<p><b><i>a</i></b>b&lt;script&gt;alert(1)</p>"
    assert "script" not in [str(e.tag) for e in elements(out)]


def test_characters_are_written_as_the_text_held_them():
    """&, < and > bare where the text held them bare and they start no markup, else escaped; a
    no-break space as &nbsp; (as markup.py writes a text node)."""
    page = "<p>1 < 2 <b>&nbsp;</b> &amp; 3 > 2 &copy;</p>"
    texts, out = rendered(page, ["1 < 2 <g1>\xa0</g1> & 3 > 2 © <b>"])
    assert texts == ["1 < 2 <g1>\xa0</g1> & 3 > 2 ©"]
    assert out == "<p>1 < 2 <b>&nbsp;</b> &amp; 3 > 2 © &lt;b></p>"
    page = "<p>Tom &amp; Jerry &lt;3 a<b>x</b></p>"
    _, out = rendered(page, ["Tom & Jerry <3 > <g1>y</g1>"])
    assert out == "<p>Tom &amp; Jerry &lt;3 &gt; <b>y</b></p>"


# --- what is translated and what is not -------------------------------------------------


def test_untranslated_elements_stay_as_written():
    page = (
        "<p>x<script>var a = 1;</script>y</p><style>p {}</style><pre>keep <b>it</b></pre>"
        '<p translate="no">no <b>no</b></p><span translate=no>n</span> t '
        "<textarea>ta</textarea><select><option>o</option></select><svg><text>s</text></svg>"
        "<template>tt</template><p>a <code>b</code> c</p>"
    )
    texts, out = rendered(page, ["X", "Y", "<x1/> T", "A <x1/> C"])
    assert texts == ["x", "y", "<x1/> t", "a <x1/> c"]
    assert out == page.replace(">x<", ">X<").replace(">y<", ">Y<").replace(" t ", " T ").replace(
        "a <code>b</code> c", "A <code>b</code> C"
    )


def test_a_page_marked_translate_no_is_left_as_it_is():
    page = '<html translate="no"><head><title>T</title></head><body><p>x</p></body></html>'
    assert rendered(page) == ([], page)
    page = (
        '<html><head><title>T &amp; U</title><meta name="Description" content="About it">'
        '</head><body translate="no"><p title="t">x</p></body></html>'
    )
    assert rendered(page)[0] == ["T & U", "About it"]


def test_the_head_of_a_libreoffice_page_leaves_the_rest_translated():
    """Its noscript holds a meta (a refresh): with scripting on or off, no text and the same
    end; markup.py, reading a fragment, stops translating there."""
    page = (
        '<!DOCTYPE html>\n<html lang="en-US">\n<head>\n<noscript><meta http-equiv="refresh" '
        'content="0; URL=noscript.html"></noscript>\n<title>Time</title>\n</head>\n<body>\n'
        '<p><span class="avis">Displays the time.</span></p>\n</body>\n</html>\n'
    )
    assert rendered(page)[0] == ["Time", "Displays the time."]
    assert HtmlFragment.parse(page).texts() == []


def test_meta_other_than_description_and_blank_values_are_not_translated():
    page = (
        '<meta name="keywords" content="a, b"><meta property="og:title" content="x">'
        '<img alt=""><img alt="  "><img title><p aria-label="Label">Text</p>'
    )
    assert rendered(page)[0] == ["Label", "Text"]


# --- real pages --------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES, ids=[p.stem for p in PAGES])
def test_a_real_page_comes_back_byte_for_byte_translated_as_itself(path):
    data = path.read_bytes()
    document = html.read(data, path.name)
    assert document.texts()
    same = document.render([Translated(t, 1.0) for t in document.texts()], RenderOptions())
    assert same == data


@pytest.mark.parametrize("path", PAGES, ids=[p.stem for p in PAGES])
def test_a_real_page_with_a_fake_translation_keeps_every_element_and_attribute(path):
    data = path.read_bytes()
    document = html.read(data, path.name)
    texts = document.texts()
    out = document.render([Translated(upper(t), 1.0) for t in texts], RenderOptions()).decode()
    assert assert_only_text_changed(data.decode(), out) > 0
    assert sum(isinstance(part, html._Node) for part in document.parts) == 0  # all grouped
    reordered = [Translated(" ".join(reversed(top_level(t))), 1.0) for t in texts]
    out = document.render(reordered, RenderOptions()).decode()

    def counted(markup: str) -> collections.Counter:
        return collections.Counter(
            (str(e.tag), tuple((k, v) for k, v in sorted(e.attrib.items()) if k != "alt"))
            for e in elements(markup)
        )

    assert counted(out) == counted(data.decode())


def test_the_texts_of_a_real_page():
    path = next(p for p in PAGES if p.stem == "insert_mode")
    texts = html.read(path.read_bytes(), path.name).texts()
    assert texts[:7] == [
        "Insert Mode",
        "LibreOffice 7.4 Help",
        "Module",
        "Contents",
        "Index  🔎︎",
        "Search in all modules",
        "Insert Mode",
    ]
    assert texts[7] == (
        "<g1>Displays the current insert mode. You can toggle between <g2>INSRT</g2> = insert "
        "and <g3>OVER</g3> = overwrite.</g1><g4> This field is only active if the cursor is in "
        "the input line of the formula bar or in a cell.</g4>"
    )
    assert texts[-2:] == [
        "This page is: <g1>/text/shared/02/20040000.xhp</g1>",
        "Title is: Insert Mode",
    ]


def test_translated_sentence_by_sentence_the_tags_come_back():
    """With translating.translate_texts (sentences split, never inside a tag pair)."""
    from translate.decode.pipeline import Translation

    path = next(p for p in PAGES if p.stem == "insert_mode")
    document = html.read(path.read_bytes(), path.name)

    def fake(lines: list[str]) -> list[Translation]:
        return [Translation(upper(line), 0.0, 0.0, 1) for line in lines]

    translated = translate_texts(document.texts(), fake)
    out = document.render(translated, RenderOptions()).decode()
    assert assert_only_text_changed(path.read_text(encoding="utf-8"), out) > 0
    assert '<span class="emph">INSRT</span> = INSERT AND <span class="emph">OVER</span>' in out


def test_xhtml_is_read_as_html():
    page = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
        'Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html xmlns='
        '"http://www.w3.org/1999/xhtml"><head><title>T</title></head><body><p>A<br/>b <img '
        'src="i.png" alt="i"/></p></body></html>'
    )
    document = format_of("page.xhtml").read(page.encode(), "page.xhtml")
    assert document.texts() == ["T", "A<x1/>b <x2/>", "i"]
    out = document.render([Translated(upper(t), 1.0) for t in document.texts()], RenderOptions())
    assert out.decode() == page.replace("A<br/>b", "A<br/>B").replace('alt="i"', 'alt="I"')


# --- encodings and limits -----------------------------------------------------------------


def test_a_declared_encoding_is_read_and_written_in_it():
    page = '<meta charset="ISO-8859-1"><p>caf\xe9 €</p>'.encode("cp1252")
    document = html.read(page, "page.html")
    assert document.texts() == ["café €"]
    out = document.render([Translated("Café Ω", 1.0)], RenderOptions())
    assert out == '<meta charset="ISO-8859-1"><p>Café &#937;</p>'.encode("cp1252")
    page = (
        '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-2"><p>\u0159</p>'
    ).encode("iso-8859-2")
    assert html.read(page, "page.html").texts() == ["\u0159"]
    page = '<?xml version="1.0" encoding="windows-1251"?><p>\u0436</p>'.encode("cp1251")
    assert html.read(page, "page.html").texts() == ["\u0436"]


def test_utf8_with_a_byte_order_mark_is_written_with_it():
    page = "\ufeff<p>caf\xe9</p>".encode()
    document = html.read(page, "page.html")
    assert document.texts() == ["caf\xe9"]
    assert document.render([Translated("X", 1.0)], RenderOptions()) == "\ufeff<p>X</p>".encode()


@pytest.mark.parametrize(
    "data, message",
    [
        (b"<p>ok</p>\n<p>caf\xe9</p>", "page.html line 2: not UTF-8 text"),
        (b'<meta charset="x-unknown"><p>x</p>', "declares the character encoding 'x-unknown'"),
        (
            b'<meta charset="utf-7"><p>+ADw-script+AD4-</p>',
            "declares the character encoding 'utf-7'",
        ),
        (b'<meta charset="utf-32"><p>x</p>', "declares the character encoding 'utf-32'"),
        (b'<meta charset="shift_jis">\n\n<p>\x81</p>', "page.html line 3: not shift_jis text"),
    ],
    ids=["not-utf8", "unknown", "utf-7", "utf-32", "bad-bytes"],
)
def test_bytes_that_are_not_the_text_they_claim_are_a_one_line_error(data, message):
    with pytest.raises(DocumentError, match=re.escape(message)) as error:
        html.read(data, "page.html")
    assert "\n" not in str(error.value) and "page.html" in str(error.value)


def test_pages_over_the_caps_are_a_one_line_error():
    nodes = "<p>\n" + "<b>x</b>" * (MAX_NODES // 2 + 1)
    with pytest.raises(DocumentError, match=r"^big.html line 2: more than 20,000 nodes") as error:
        html.read(nodes.encode(), "big.html")
    assert "\n" not in str(error.value)
    deep = "<div>\n" * (MAX_DEPTH + 1)
    with pytest.raises(DocumentError, match=r"^deep.html line 513: more than 512 elements open"):
        html.read(deep.encode(), "deep.html")
    with pytest.raises(DocumentError, match="more than the 10 a file may hold"):
        html.read(b"<p>" + b"x" * 20 + b"</p>", "long.html", Limits(max_bytes=10))
    with pytest.raises(DocumentError, match="long.html: 3 texts, more than the 2 allowed"):
        html.read(b"<p>a</p><p>b</p><p>c</p>", "long.html", Limits(max_texts=2))


def test_rendering_needs_one_translation_a_text():
    document = html.read(b"<p>a</p><p>b</p>", "page.html")
    with pytest.raises(ValueError, match="2 texts, 1 translations"):
        document.render([Translated("x", 1.0)], RenderOptions())
