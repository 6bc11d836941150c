"""HTML translated in place (translate/text/markup.py), with upper-casing as the translation: the
expected output is written out by hand as a browser reads the input (the HTML standard's
tokenizer and tree construction), also where Python's html.parser reads it otherwise; and
html5lib, a parser that follows the standard, reads hostile inputs, foreign content, select and
noscript, mis-nested tags and translations and their outputs with its own tree: no text it
places in an untranslated element is listed, and the output is the input but for the text."""

import itertools
import re

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import strategies as st  # noqa: E402

from translate.text.markup import MAX_DEPTH, MAX_NODES, HtmlFragment, MarkupTooLarge  # noqa: E402

XSS = "<img src=x onerror=alert(1)>"


def upper(markup: str) -> tuple[list[str], str]:
    fragment = HtmlFragment.parse(markup)
    texts = fragment.texts()
    return texts, fragment.render([text.upper() for text in texts])


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        (
            "<p>Click <b>the <i>OK</i> button</b> now.</p>",
            ["Click ", "the ", "OK", " button", " now."],
            "<p>CLICK <b>THE <i>OK</i> BUTTON</b> NOW.</p>",
        ),
        ("one<br>two<br/>three", ["one", "two", "three"], "ONE<br>TWO<br/>THREE"),
        (
            "Tom &amp; Jerry &lt;3&nbsp;cats &copy;",
            ["Tom & Jerry <3\xa0cats ©"],
            "TOM &amp; JERRY &lt;3&nbsp;CATS ©",
        ),
        (
            '<a href="/x?a=1&amp;b=2" title="Tom &amp; Jerry" class="u-url mention">link</a>',
            ["link"],
            '<a href="/x?a=1&amp;b=2" title="Tom &amp; Jerry" class="u-url mention">LINK</a>',
        ),
        (
            "  <p>\n  spaced   out\n  </p>\t",
            ["\n  spaced   out\n  "],
            "  <p>\n  SPACED   OUT\n  </p>\t",
        ),
        ("<b> \t\n\r\x0c</b><i>\xa0</i>", ["\xa0"], "<b> \t\n\r\x0c</b><i>&nbsp;</i>"),
        (
            "<script>var a = 'b';</script><style>p {}</style><code>x</code><pre>y</pre>ok",
            ["ok"],
            "<script>var a = 'b';</script><style>p {}</style><code>x</code><pre>y</pre>OK",
        ),
        (
            '<span translate="no">Name</span> <span>word</span><!-- note -->',
            ["word"],
            '<span translate="no">Name</span> <span>WORD</span><!-- note -->',
        ),
        ("<p>open <b>bold</p>", ["open ", "bold"], "<p>OPEN <b>BOLD</p>"),
        ("</div>stray", ["stray"], "</div>STRAY"),
        ("", [], ""),
        ("<p> </p>", [], "<p> </p>"),
        (
            '<p>Hi <span class="h-card"><a href="https://m.example/@ann" class="u-url mention">'
            "@<span>ann</span></a></span> look: "
            '<a href="https://example.org" rel="nofollow noopener" target="_blank">'
            '<span class="invisible">https://</span><span class="">example.org</span></a> '
            '<a href="/tags/mt" class="mention hashtag" rel="tag">#<span>mt</span></a></p>',
            ["Hi ", "@", "ann", " look: ", "https://", "example.org", "#", "mt"],
            '<p>HI <span class="h-card"><a href="https://m.example/@ann" class="u-url mention">'
            "@<span>ANN</span></a></span> LOOK: "
            '<a href="https://example.org" rel="nofollow noopener" target="_blank">'
            '<span class="invisible">HTTPS://</span><span class="">EXAMPLE.ORG</span></a> '
            '<a href="/tags/mt" class="mention hashtag" rel="tag">#<span>MT</span></a></p>',
        ),
    ],
    ids=[
        "nested",
        "br",
        "entities",
        "attributes",
        "whitespace",
        "only-html-whitespace-left-out",
        "untranslated",
        "translate-no",
        "unclosed",
        "stray-end",
        "empty",
        "blank",
        "mastodon",
    ],
)
def test_text_nodes_are_translated_and_everything_else_kept(markup, texts, expected):
    assert upper(markup) == (texts, expected)


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        (
            '<img src="ok.png" onerror="" onerror="alert(1)">a',
            ["a"],
            '<img src="ok.png" onerror="" onerror="alert(1)">A',
        ),
        (
            '<a href="https://example.com/ok" href="javascript:alert(1)">ok</a>',
            ["ok"],
            '<a href="https://example.com/ok" href="javascript:alert(1)">OK</a>',
        ),
        (
            '<p translate="no" translate="yes">a</p><p translate="yes" TRANSLATE="no">b</p>',
            ["b"],
            '<p translate="no" translate="yes">a</p><p translate="yes" TRANSLATE="no">B</p>',
        ),
    ],
    ids=["onerror", "href", "translate-names-case-insensitive"],
)
def test_of_an_attribute_written_twice_the_first_counts(markup, texts, expected):
    """As browsers read it (html.parser keeps the last), and written out as it was: rebuilding
    the tag with the last made inert markup live."""
    assert upper(markup) == (texts, expected)


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        ("<!-->x-->", ["x-->"], "<!-->X-->"),
        ("<!--->x", ["x"], "<!--->X"),
        ("<!-- a --!> b", [" b"], "<!-- a --!> B"),
        ("<!-- a -- > b --> c", [" c"], "<!-- a -- > b --> C"),
        ("a<!-- b <b>c</b>", ["a"], "A<!-- b <b>c</b>"),
        ("a<!x <b c", ["a"], "A<!x <b c"),
        ("a<?x <b c", ["a"], "A<?x <b c"),
        ("a</ x <b c", ["a"], "A</ x <b c"),
        ("<!x>a", ["a"], "<!x>A"),
        ("<?x>a", ["a"], "<?x>A"),
        ('<span translate="no">a</ span>b', [], '<span translate="no">a</ span>b'),
        ("</>a</", ["a</"], "</>A&lt;/"),
        ("<![CDATA[a > b]]>", [" b]]>"], "<![CDATA[a > B]]>"),
        ("<![if x]>a<![endif]>", ["a"], "<![if x]>A<![endif]>"),
        ("a<![b", ["a"], "A<![b"),
    ],
    ids=[
        "abrupt-empty",
        "abrupt-dash",
        "bang-close",
        "no-space-before-close",
        "unclosed",
        "bang-unclosed",
        "question-unclosed",
        "end-space-unclosed",
        "bang",
        "question",
        "end-space",
        "end-empty",
        "cdata-in-html",
        "marked-section",
        "unknown-marked-section",
    ],
)
def test_comments_end_where_the_standard_ends_them(markup, texts, expected):
    """https://html.spec.whatwg.org/#comment-start-state and the bogus comment state: "<!" and
    "<?" not starting a comment or doctype ("<![CDATA[" included, which starts a CDATA section
    only in svg and math), and "</" then neither a letter nor ">", start a comment to the next
    ">"; any comment not closed runs to the end of the input. A ">" the text held bare stays so."""
    assert upper(markup) == (texts, expected)


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        ("<img src=x\xa0onerror=alert(1)>a", ["a"], "<img src=x\xa0onerror=alert(1)>A"),
        ('<img src="x"\x0bonerror=alert(1)>a', ["a"], '<img src="x"\x0bonerror=alert(1)>A'),
        ("<b onclic\u212a=alert(1)>a</b>", ["a"], "<b onclic\u212a=alert(1)>A</b>"),
        (f'</b x="{XSS}">a', ["a"], f'</b x="{XSS}">A'),
        ("<a\x00b>a", ["a"], "<a\x00b>A"),
        ('<iframe srcdoc="&ltscript&gt;">a', [], '<iframe srcdoc="&ltscript&gt;">a'),
        (f"<style>a</ style>{XSS}</style>b", ["b"], f"<style>a</ style>{XSS}</style>B"),
        (f"<STYLE>a</style\t>{XSS}b", ["b"], f"<STYLE>a</style\t>{XSS}B"),
        (f"<style/>{XSS}a", [], f"<style/>{XSS}a"),
        (f"<template/>{XSS}a", [], f"<template/>{XSS}a"),
        (
            f"<div><textarea></div>{XSS}</textarea>a",
            ["a"],
            f"<div><textarea></div>{XSS}</textarea>A",
        ),
        ("<title>a &amp; <b>b</b></title>", [], "<title>a &amp; <b>b</b></title>"),
        ("<plaintext><b>a</b>", [], "<plaintext><b>a</b>"),
        ("<script>a", [], "<script>a"),
        ('a<b title="b', ["a"], 'A<b title="b'),
        ("<p>a<br/>b<b/>c", ["a", "b", "c"], "<p>A<br/>B<b/>C"),
    ],
    ids=[
        "nbsp-is-no-space",
        "vertical-tab-is-no-space",
        "names-lowered-in-ascii-only",
        "end-tag-with-quoted-gt",
        "nul-in-a-name",
        "attribute-references",
        "raw-text-end-tag-with-space",
        "raw-text-end-tag-with-tab",
        "self-closing-style",
        "self-closing-template",
        "rcdata-not-closed-by-outer-end-tag",
        "rcdata",
        "plaintext",
        "unclosed-raw-text",
        "unclosed-tag-dropped",
        "self-closing",
    ],
)
def test_tags_and_raw_text_end_where_the_standard_ends_them(markup, texts, expected):
    """Tag, attribute and raw text (script, style, textarea, title, ...) states as the standard
    has them; the markup is written out as it was, so what a browser holds inert stays so."""
    assert upper(markup) == (texts, expected)


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        (
            "<script><!--<script></script>a</script>b",
            ["b"],
            "<script><!--<script></script>a</script>B",
        ),
        ("<script><!--</script>a", ["a"], "<script><!--</script>A"),
        ("<script><!--<script>--></script>a", ["a"], "<script><!--<script>--></script>A"),
        (
            "<script><!--<script></script>--></script>a",
            ["a"],
            "<script><!--<script></script>--></script>A",
        ),
        ("<script><!--><script></script>a", ["a"], "<script><!--><script></script>A"),
        ("<script><!--<scripts></script>a", ["a"], "<script><!--<scripts></script>A"),
        (
            "<SCRIPT><!--<Script/></sCrIpT\n>a</script>b",
            ["b"],
            "<SCRIPT><!--<Script/></sCrIpT\n>a</script>B",
        ),
        ("<script><!--<script>a", [], "<script><!--<script>a"),
    ],
    ids=[
        "double-escaped-end-tag-ends-only-the-double-escape",
        "escaped-end-tag-ends-the-script",
        "dashes-end-a-double-escape",
        "dashes-end-an-escape",
        "abrupt-escape",
        "other-name-does-not-double-escape",
        "names-ascii-case-insensitive",
        "unclosed",
    ],
)
def test_a_script_ends_where_the_standard_ends_it(markup, texts, expected):
    """https://html.spec.whatwg.org/#script-data-escaped-state and the double-escaped states: in
    a script, "<!--" then "<script" make the next "</script>" part of the script."""
    assert upper(markup) == (texts, expected)


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        (
            "a<svg><![CDATA[>b]]><!-- ]]><img src=x onerror=alert(1)> -->c",
            ["a"],
            "A<svg><![CDATA[>b]]><!-- ]]><img src=x onerror=alert(1)> -->c",
        ),
        (
            'a<svg><style><!--</style>-->b<b title="--><img src=x onerror=alert(1)>">',
            ["a"],
            'A<svg><style><!--</style>-->b<b title="--><img src=x onerror=alert(1)>">',
        ),
        (
            "a<MATH><mi><style>b</style></mi></MATH>c",
            ["a"],
            "A<MATH><mi><style>b</style></mi></MATH>c",
        ),
        (
            'a<select><iframe><!--</iframe>-->b<b title="--><input autofocus onfocus=alert(1)>">',
            ["a"],
            'A<select><iframe><!--</iframe>-->b<b title="--><input autofocus onfocus=alert(1)>">',
        ),
        (
            'a<noscript><!--</noscript>-->b<b title="--><img src=x onerror=alert(1)>">',
            ["a"],
            'A<noscript><!--</noscript>-->b<b title="--><img src=x onerror=alert(1)>">',
        ),
        ("a<svg></g>b</svg>c", ["a"], "A<svg></g>b</svg>c"),
        ("a<template><b>b</b></template>c", ["a"], "A<template><b>b</b></template>c"),
    ],
    ids=[
        "svg-cdata",
        "svg-style",
        "math-html",
        "select",
        "noscript",
        "svg-end-tag-of-none-open",
        "template-with-tags",
    ],
)
def test_foreign_content_select_and_noscript_are_left_as_written(markup, texts, expected):
    """After svg and math a browser reads "<![CDATA[" as CDATA and style as markup (but in mi,
    foreignObject and the other elements whose content is HTML), in a select the raw-text
    elements are markup in some browsers and raw text in others, and noscript is raw text only
    where scripting is on: written out as they came, never translated, and where what follows
    cannot be known alike for every browser (no end tag, HTML in math, a tag a select does not
    hold, a comment in a noscript, an end tag that closes nothing in the svg), nothing after is
    translated either (translating "b" here lets the img or input out of an attribute)."""
    assert upper(markup) == (texts, expected)


DISCOURSE_HASHTAG = (
    '<a class="hashtag-cooked" href="/c/help/5" data-type="category" data-slug="help">'
    '<span class="hashtag-icon-placeholder"><svg class="fa d-icon d-icon-square-full svg-icon '
    'svg-node"><use href="#square-full"></use></svg></span><span>{}</span></a>'
)


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        (
            f"<p>See {DISCOURSE_HASHTAG.format('help')} now.</p><p>Then this.</p>",
            ["See ", "help", " now.", "Then this."],
            f"<p>SEE {DISCOURSE_HASHTAG.format('HELP')} NOW.</p><p>THEN THIS.</p>",
        ),
        ("a<svg><svg><g/></svg>b</svg>c", ["a", "c"], "A<svg><svg><g/></svg>b</svg>C"),
        ("a<SVG><![CDATA[</svg><p>]]></Svg>b", ["a", "b"], "A<SVG><![CDATA[</svg><p>]]></Svg>B"),
        ("a<svg><p>b</p></svg>c", ["a", "b", "c"], "A<svg><p>B</p></svg>C"),
        (
            "a<svg><font size=2>b</font></svg>c",
            ["a", "b", "c"],
            "A<svg><font size=2>B</font></svg>C",
        ),
        ("a<svg><font>b</font></svg>c", ["a", "c"], "A<svg><font>b</font></svg>C"),
        ("a<b>b</b><svg/><p>c</p>", ["a", "b", "c"], "A<b>B</b><svg/><p>C</p>"),
        ("a<math><mrow><msup/></mrow></math>b", ["a", "b"], "A<math><mrow><msup/></mrow></math>B"),
        (
            "a<select><option>b<option>c</select>d",
            ["a", "d"],
            "A<select><option>b<option>c</select>D",
        ),
        (
            'a<noscript><img src="x.png" alt="b"></noscript>c',
            ["a", "c"],
            'A<noscript><img src="x.png" alt="b"></noscript>C',
        ),
        ("a<template>b</template>c", ["a", "c"], "A<template>b</template>C"),
    ],
    ids=[
        "discourse-hashtag",
        "nested-svg",
        "cdata-holding-the-end-tag",
        "html-start-tag-ends-svg",
        "font-with-size-ends-svg",
        "font-stays-in-svg",
        "self-closing-svg",
        "math",
        "select",
        "noscript-image",
        "template-text",
    ],
)
def test_translation_goes_on_after_foreign_content_select_and_noscript(markup, texts, expected):
    """Each is skipped to where a browser's tree construction ends it: its end tag (one of the
    same name nested in it counted, a CDATA section's content being text), or, in svg and math,
    a start tag of HTML that breaks out of foreign content."""
    assert upper(markup) == (texts, expected)


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        ("&copy2024; a &amp", ["©2024; a &"], "©2024; A &amp;"),
        ("&#; &#; <b>x</b>", ["&#; &#; ", "x"], "&amp;#; &amp;#; <b>X</b>"),
    ],
    ids=["legacy-and-unterminated", "not-a-number"],
)
def test_character_references_are_decoded_as_the_standard_decodes_them(markup, texts, expected):
    assert upper(markup) == (texts, expected)


def test_a_translation_count_that_does_not_match_is_an_error():
    with pytest.raises(ValueError, match="2 text nodes, 1 translations"):
        HtmlFragment.parse("<b>a</b>b").render(["A"])


def test_a_translation_is_written_as_text():
    fragment = HtmlFragment.parse('<p title="a">a</p>')
    assert fragment.render([f'" onclick="x" {XSS} &amp;\xa0']) == (
        '<p title="a">" onclick="x" &lt;img src=x onerror=alert(1)&gt; &amp;amp;&nbsp;</p>'
    )


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        (
            "The value must be < 10 and > 2.\nSave & close the dialog.",
            ["The value must be < 10 and > 2.\nSave & close the dialog."],
            "THE VALUE MUST BE < 10 AND > 2.\nSAVE & CLOSE THE DIALOG.",
        ),
        ("<p>a &lt; b &gt; c &amp; d</p>", ["a < b > c & d"], "<p>A &lt; B &gt; C &amp; D</p>"),
        ("<p>a < b &lt; c</p>", ["a < b < c"], "<p>A &lt; B &lt; C</p>"),
        ("<p>a & b &amp c</p>", ["a & b & c"], "<p>A &amp; B &amp; C</p>"),
        ("<b>a > b</b> c < d", ["a > b", " c < d"], "<b>A > B</b> C < D"),
        ("<p>a <&lt;b & c</p>", ["a <<b & c"], "<p>A <&lt;B & C</p>"),
    ],
    ids=[
        "nextcloud",
        "references",
        "one-of-two-a-reference",
        "legacy-reference",
        "per-node",
        "a-reference-where-one-is-needed",
    ],
)
def test_what_a_text_node_held_bare_comes_back_bare(markup, texts, expected):
    """Nextcloud shows the answer to format=html as plain text: "<", ">" and "&" that the text
    node held bare come back bare; where the text node wrote one as a reference (but where bare
    it would start markup), they come back as references."""
    assert upper(markup) == (texts, expected)


@pytest.mark.parametrize(
    "translation, expected",
    [
        ("x <b> y", "<p>x &lt;b> y</p>"),
        ("x </p> y", "<p>x &lt;/p> y</p>"),
        ("x <!-- y", "<p>x &lt;!-- y</p>"),
        ("x <? y", "<p>x &lt;? y</p>"),
        ("x &amp; y", "<p>x &amp;amp; y</p>"),
        ("x &#60; y &lt", "<p>x &amp;#60; y &amp;lt</p>"),
        ("x < y & z > w", "<p>x < y & z > w</p>"),
    ],
    ids=["tag", "end-tag", "comment", "bogus-comment", "named", "numeric-and-legacy", "inert"],
)
def test_a_bare_character_that_would_start_markup_or_a_reference_is_escaped(translation, expected):
    assert HtmlFragment.parse("<p>a < b & c > d</p>").render([translation]) == expected


@hypothesis.settings(max_examples=400, deadline=None, database=None, derandomize=True)
@hypothesis.given(st.text(st.sampled_from("<>&;#/!?aZ9 \n\xa0"), max_size=14))
def test_a_translation_is_read_back_exactly_and_inert_characters_stay_bare(translation):
    """Whatever the translation holds, html5lib reads the output's text node as exactly the
    translation: none of it becomes a tag, a comment or a reference. And a "<", ">" or "&" that
    the text node held bare, followed in the translation by whitespace or by nothing, is bare in
    the output."""
    output = HtmlFragment.parse("<p>a < b & c > d</p>").render([translation])
    html5lib = pytest.importorskip("html5lib")
    root = html5lib.parseFragment(output, treebuilder="dom", namespaceHTMLElements=False)
    root.normalize()
    [paragraph] = root.childNodes
    assert [(node.nodeType, node.data) for node in paragraph.childNodes] == (
        [(paragraph.TEXT_NODE, translation)] if translation else []
    )
    inert = re.compile(r"[<>&](?=[ \n]|$)")
    assert inert.findall(output.removeprefix("<p>").removesuffix("</p>")) == inert.findall(
        translation
    )


def test_render_leaves_the_fragment_as_parsed():
    fragment = HtmlFragment.parse("<p>one <b>two</b></p>")
    assert fragment.render(["1 ", "2"]) == "<p>1 <b>2</b></p>"
    assert fragment.render(["uno ", "dos"]) == "<p>uno <b>dos</b></p>"
    assert fragment.texts() == ["one ", "two"]


@pytest.mark.parametrize(
    "markup, caps, what, limit",
    [
        ("<b><i><u>x</u></i></b>", {"max_depth": 2}, "depth", 2),
        ("<b>x</b>" * 3, {"max_nodes": 5}, "nodes", 5),
        ('<a href="x" title="y">', {"max_nodes": 2}, "nodes", 2),
        ("<!--a--><!--b--><!--c-->", {"max_nodes": 2}, "nodes", 2),
        ("</b>" * 5, {"max_nodes": 2}, "nodes", 2),
        ("a < b < c", {"max_nodes": 2}, "nodes", 2),
    ],
    ids=["depth", "elements-and-texts", "attributes", "comments", "end-tags", "stray-lt"],
)
def test_a_fragment_over_a_cap_is_refused(markup, caps, what, limit):
    with pytest.raises(MarkupTooLarge) as caught:
        HtmlFragment.parse(markup, **caps)
    assert (caught.value.what, caught.value.limit) == (what, limit)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "markup, max_nodes, max_depth",
    [
        ("<b><i>x</i></b>", 100, 2),
        ("<b>x</b>" * 3, 6, 100),
        ('<a href="x">', 2, 100),
        ("</b>" * 4, 2, 100),
        ("a < b", 2, 100),
    ],
    ids=["depth", "elements-and-texts", "attributes", "end-tags", "stray-lt"],
)
def test_a_fragment_at_its_caps_is_read(markup, max_nodes, max_depth):
    HtmlFragment.parse(markup, max_nodes=max_nodes, max_depth=max_depth)


@pytest.mark.parametrize(
    "markup, what, limit",
    [("<b> " * 250_000, "depth", MAX_DEPTH), ("</b>" * 250_000, "nodes", MAX_NODES)],
    ids=["nested", "end-tags"],
)
def test_a_hostile_megabyte_is_refused_at_the_default_caps(markup, what, limit):
    with pytest.raises(MarkupTooLarge) as caught:
        HtmlFragment.parse(markup)
    assert (caught.value.what, caught.value.limit) == (what, limit)


def test_a_fragment_nested_to_the_depth_cap_is_rendered():
    """Nested look-alikes to the cap, which a parse tree compared by recursion would descend."""
    markup = "<b>" * (MAX_DEPTH - 1) + "<i></i>x</b>" + "x</b>" * (MAX_DEPTH - 2)
    fragment = HtmlFragment.parse(markup)
    assert fragment.render(fragment.texts()) == markup
    assert fragment.render([text.upper() for text in fragment.texts()]) == markup.replace("x", "X")


PIECES = [
    *("<b>", "</b>", "<p", ">", "<br>", "&amp;", "&", "<", "x y", "\n", "/>", "'", "\xa0", "\x00"),
    *("<!--", "-->", "<!-->", "<!--->", "--!>", "<!", "<?", "</", "</ ", "<![", "<![CDATA["),
    *('<a href="1" HREF="2">', "<style>", "</style>", "<style/>", "<textarea>", "<code>"),
    *("&copy", "&#", "&nbsp;", ' translate="no"', "<script>", "</script>", "<!--<script>", "<svg>"),
]


@hypothesis.settings(max_examples=300, deadline=None, database=None, derandomize=True)
@hypothesis.given(st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=15).map("".join))
def test_any_input_is_answered_and_a_second_round_changes_nothing(markup):
    """Malformed HTML included: parsed and rendered; translating each text to itself, the texts
    read again are the same, and rendering again changes nothing (the first round may write
    references out otherwise)."""
    fragment = HtmlFragment.parse(markup)
    once = fragment.render(fragment.texts())
    again = HtmlFragment.parse(once)
    assert again.texts() == fragment.texts()
    assert again.render(again.texts()) == once


# A fragment written by someone who knows how parsers differ: tags and attributes with quotes,
# spaces HTML does not count as space (no-break, vertical tab), a name a Kelvin sign lower-cases
# to "onclick" in Unicode only, attributes written twice; comments of every odd form and what the
# standard reads as bogus comments; raw text and end tags that do or do not end it; references;
# CDATA; the start tags after which a browser's reading depends on its tree, and the end tags
# and HTML that end them; tags a browser closes or reopens otherwise than as they are written.
HOSTILE = [
    *("<b>", "</b>", "<i>", "</I>", "<p", "<img", ">", "/>", "<br/>", "<B/>", "<div>", "</div>"),
    *(' a="1"', " a='1'", " a=1", ' a="', " a='", " =x", ' "a"=b', " a = 'b c'", "\xa0", "\x0b"),
    *(" x=\xa0onerror=1", ' x="y"\x0bonclick=1', " onclic\u212a=1", ' href="1" HREF="2"'),
    *(' translate="no"', " TRANSLATE=No", ' translate="yes"', "<table>", "<td>", "<template>"),
    *("<!--", "-->", "<!-->", "<!--->", "<!---->", "--!>", "-- >", "<!", "<!x>", "<?", "<?x>"),
    *("</", "</ x>", "</>", "<![CDATA[", "]]>", "<!DOCTYPE html>", "<!doctype", "</template>"),
    *("<style>", "</style>", "</ style>", "</STYLE\t>", "<style/>", "<script>", "</script>"),
    *("<!--<script>", "<textarea>", "</textarea>", "<title>", "</title>", "<xmp>", "<iframe>"),
    *("</iframe>", "<noembed>", "<noframes>", "<plaintext>", "<code>", "</code>", "<pre>"),
    *("<svg>", "</svg>", "<math>", "<select>", "<noscript>", "</noscript>", "<svg><![CDATA[>"),
    *("<svg><style><!--</style>-->", "<select><xmp><!--</xmp>-->", "<noscript><!--</noscript>-->"),
    *("<script><!--<script></script>", '<b title="-->', "<!--x-->"),
    *("</math>", "<p>", "</p>", "</select>", "<option>", "<mi>", "<font color=x>", "</table>"),
    *("<noscript><img>", "<tr>", "</td>", "<li>", "<span>", "</span>", "<a>", "</a>", "</svg"),
    *("&amp;", "&", "&copy", "&copy2024;", "&#", "&#x3c;", "&#0;", "&lt", "&notit;", "&nbsp;"),
    *("x y", "\n", "'", '"', "=", "-", "<", "\x00"),
]
TRANSLATIONS = [
    '" onerror=x <img src=x onerror=y> --> </style> <script>',
    *('"', "'", "<img src=x onerror=y>", "-->", "--!>", "</style>", "<script>", "</textarea>"),
    *("<!--", "]]>", "&amp;", "&", "\xa0", " ", "", "x"),
]
MARK = "\ue000"  # around each translation's number, to find it in html5lib's reading
HTML5LIB_RAW_TEXT = {"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"}


def html5lib_reading(markup: str, scripting: bool) -> tuple[set, set, list[str]]:
    """html5lib's reading of a fragment (in a div), from its own tree (its DOM one: its etree one
    loses the nodes it moves out of a table): each element's name and namespace with each of its
    attributes, the comments and raw-text elements' contents, and the other text nodes."""
    html5lib = pytest.importorskip("html5lib")
    root = html5lib.parseFragment(
        markup, treebuilder="dom", namespaceHTMLElements=False, scripting=scripting
    )
    root.normalize()  # adjacent text nodes joined
    raw_text = HTML5LIB_RAW_TEXT | {"plaintext"} | ({"noscript"} if scripting else set())
    attributes, inert, text = set(), set(), []
    nodes = [root]
    while nodes:
        node = nodes.pop()
        if node.nodeType == node.COMMENT_NODE:
            inert.add(("#comment", node.data))
        elif node.nodeType == node.TEXT_NODE:
            parent = node.parentNode
            if parent.namespaceURI is None and parent.nodeName in raw_text:
                inert.add((parent.nodeName, node.data))
            else:
                text.append(node.data)
        else:
            name = (getattr(node, "namespaceURI", None), node.nodeName)
            attributes.update((name, *attribute) for attribute in (node.attributes or {}).items())
            nodes.extend(node.childNodes)
    return attributes, inert, text


def comparable(text: str) -> str:
    """Text with its newlines as the standard makes them (CR LF and CR: LF), and without the
    controls and noncharacters that html.unescape drops from references where html5lib keeps
    them."""
    return "".join(
        char
        for char in text.replace("\r\n", "\n").replace("\r", "\n")
        if not (
            (char < " " and char not in "\t\n\f")
            or "\x7f" <= char <= "\x9f"
            or "\ufdd0" <= char <= "\ufdef"
            or ord(char) & 0xFFFE == 0xFFFE
        )
    )


@hypothesis.settings(max_examples=300, deadline=None, database=None, derandomize=True)
@hypothesis.given(
    st.lists(
        st.sampled_from(HOSTILE) | st.text(st.characters(exclude_characters=MARK), max_size=3),
        max_size=20,
    ).map("".join),
    st.lists(st.sampled_from(TRANSLATIONS), min_size=1, max_size=4),
)
def test_a_standard_parser_reads_the_output_as_the_input_but_for_the_text(markup, translations):
    """html5lib, with scripting off and on, finds in the output the elements with the attributes,
    the comments and the raw text it finds in the input, whatever the translations hold; each
    text listed is text to it in the input (not in an attribute, comment or raw-text element, nor
    with markup of its own in it), and each translation is text to it in the output."""
    fragment = HtmlFragment.parse(markup)
    marks = [f"{MARK}{number}{MARK}" for number in range(len(fragment.texts()))]
    output = fragment.render(
        [translations[number % len(translations)] + mark for number, mark in enumerate(marks)]
    )
    for scripting in (False, True):
        attributes, inert, text = html5lib_reading(markup, scripting)
        text = [comparable(piece) for piece in text]
        assert [
            listed
            for listed in fragment.texts()
            if not any(comparable(listed) in piece for piece in text)
        ] == []
        attributes_out, inert_out, text_out = html5lib_reading(output, scripting)
        assert (attributes_out, inert_out) == (attributes, inert)
        assert [mark for mark in marks if not any(mark in piece for piece in text_out)] == []


UNTRANSLATED_IN_HTML5LIB = HTML5LIB_RAW_TEXT | {"plaintext", "code", "pre", "template"}


def html5lib_tree(markup: str, scripting: bool) -> tuple[list[tuple], list[str]]:
    """html5lib's tree of a fragment (its DOM one) as events (an element's start with its
    namespace and attributes, its end, a comment, a text node), and the text nodes not only of
    whitespace that a browser shows outside an element left untranslated: svg and math and all
    in them, select, noscript, template, code, pre, raw text and one marked translate="no"."""
    html5lib = pytest.importorskip("html5lib")
    root = html5lib.parseFragment(
        markup, treebuilder="dom", namespaceHTMLElements=False, scripting=scripting
    )
    root.normalize()
    events, free = [], []

    def walk(node, untranslated: bool) -> None:
        for child in node.childNodes:
            if child.nodeType == child.TEXT_NODE:
                events.append(("text", child.data))
                if not untranslated and child.data.strip(" \t\n\r\f"):
                    free.append(child.data)
            elif child.nodeType == child.COMMENT_NODE:
                events.append(("comment", child.data))
            else:
                name, attributes = child.nodeName, sorted(child.attributes.items())
                events.append(("start", child.namespaceURI, name, attributes))
                walk(
                    child,
                    untranslated
                    or child.namespaceURI is not None
                    or name in UNTRANSLATED_IN_HTML5LIB | {"select", "noscript"}
                    or child.getAttribute("translate").lower() == "no",
                )
                events.append(("end", name))

    walk(root, False)
    return events, free


# svg, math, select, noscript and template as they come, each with whether what follows it
# reads alike in every browser (then translation goes on after it).
REGIONS = [
    ('<svg class="fa d-icon"><use href="#far-image"></use></svg>', True),
    ("<svg><svg><g/></svg><text>x</text></SVG>", True),
    ("<svg><![CDATA[</svg><p>]]></svg>", True),
    ("<svg><style><!--</style>--></svg>", True),
    ("<svg><p>out</p></svg>", True),
    ("<svg><font color=red>out</font><g></g></svg>", True),
    ("<math><mrow><msup/></mrow></math>", True),
    ("<select><option>one<option>two</select>", True),
    ("<select><optgroup label=x><option>one</optgroup></select>", True),
    ("<noscript><img src=x alt='</b>'>plain</noscript>", True),
    ("<template>inert</template>", True),
    ("<svg><title>t</title></svg>", False),
    ("<svg></g>x</svg>", False),
    ("<math><mi>x</mi></math>", False),
    ("<select><option>a<style>b</style></select>", False),
    ("<noscript><p>x</p></noscript>", False),
    ("<template><b>x</b></template>", False),
    ("<svg>unclosed", False),
    ("<select>unclosed", False),
]
BEFORE_REGION = ["", "Before ", "<p>Before</p>", "<b>bold</b> "]
AFTER_REGION = [
    "after",
    "<p>after <b>bold</b></p>",
    ' <span translate="no">no</span> yes',
    "<ul><li>item</li></ul>",
    "<code>code</code> then",
]


def test_around_foreign_content_select_and_noscript_a_standard_parser_agrees():
    """Before and after each of REGIONS, html5lib (scripting off and on) finds outside any
    untranslated element the text nodes listed, all of them where what follows reads alike in
    every browser; and reads the output as the input but for those text nodes."""
    failures = []
    for before, (region, alike), after in itertools.product(BEFORE_REGION, REGIONS, AFTER_REGION):
        markup = before + region + after
        fragment = HtmlFragment.parse(markup)
        texts = fragment.texts()
        marks = [f"{MARK}{number}{MARK}" for number in range(len(texts))]
        output = fragment.render(marks)
        for scripting in (False, True):
            events, free = html5lib_tree(markup, scripting)
            read = [
                (kind, *rest) if kind != "text" else (kind, unmark(rest[0], marks, texts))
                for kind, *rest in html5lib_tree(output, scripting)[0]
            ]
            if (texts != free if alike else not set(texts) <= set(free)) or read != events:
                failures.append((markup, scripting, texts, free))
    assert failures == []


def unmark(text: str, marks: list[str], texts: list[str]) -> str:
    for mark, original in zip(marks, texts):
        text = text.replace(mark, original)
    return text


@pytest.mark.parametrize(
    "markup, texts",
    [
        ('<span translate="no"><p></span>Keep</p>', []),
        ('<p><b translate="no">x</p>Keep', []),
        ('<form translate="no"><div>x</form>Keep</div>', []),
        ('<table><tr><td translate="no"><table></td>Keep</table>', []),
        ('<b translate="no"><p>x</b>Free</p>', ["Free"]),
        ('<table><tr><td><b translate="no">x</td><td>Free</td></tr></table>', ["Free"]),
        ('<ul><li translate="no">x<li>Free</ul>', ["Free"]),
        ('<a translate="no">x<a>Free</a>', ["Free"]),
    ],
    ids=[
        "end-tag-ignored",
        "formatting-reopened",
        "form-closed-div-open",
        "cell-end-tag-ignored-in-a-table",
        "paragraph-moved-out",
        "cell-ends-formatting",
        "li-closes-li",
        "a-closes-a",
    ],
)
def test_text_a_browser_places_in_an_untranslated_element_is_left_untranslated(markup, texts):
    """As a browser's tree construction places the text: the end tags it ignores (the span's,
    a p being open in it; a cell's, in a table in it, which puts the text before that table),
    the formatting element it creates again for the text after (b), the div left open in the
    form it closes; and the elements it does close: the adoption agency
    moves the p out of the b, a cell ends the formatting elements in it, a li and an a close the
    one before."""
    assert HtmlFragment.parse(markup).texts() == texts


MISNESTED = ["span", "p", "b", "div", "a", "li", "td", "table", "i", "font", "nobr", "h1"]
MISNESTED += ["form", "button", "object", "code", "pre"]


def misnested(names: tuple[str, ...], marked: int, order: tuple[int, ...]) -> str:
    """Start tags of `names`, the one at `marked` marked translate="no", then their end tags in
    `order`; a text of its own after each tag."""
    starts = [f"<{name}{' translate=no' * (at == marked)}>" for at, name in enumerate(names)]
    tags = starts + [f"</{names[at]}>" for at in order]
    return "".join(f"{tag}T{number}x " for number, tag in enumerate(tags))


def held_by_html5lib(markup: str) -> set[str]:
    """The text nodes html5lib places in an untranslated element."""
    events, free = html5lib_tree(markup, scripting=False)
    return {event[1] for event in events if event[0] == "text"} - set(free)


def test_no_text_html5lib_holds_in_an_untranslated_element_is_listed_whatever_the_end_tags():
    """Every pair of MISNESTED with its end tags in the wrong order, and every triple of its
    first seven in any order but the right one, one of each marked translate="no"."""
    shapes = [
        misnested(pair, marked, (0, 1))
        for pair in itertools.product(MISNESTED, repeat=2)
        for marked in range(2)
    ]
    shapes += [
        misnested(triple, marked, order)
        for triple in itertools.product(MISNESTED[:7], repeat=3)
        for marked in range(3)
        for order in itertools.permutations(range(3))
        if order != (2, 1, 0)
    ]
    assert [m for m in shapes if set(HtmlFragment.parse(m).texts()) & held_by_html5lib(m)] == []


TREE_TAGS = [*MISNESTED, "ul", "dd", "tr", "th", "caption", "colgroup", "tbody", "h2", "em"]
TREE_TAGS += ["option", "select", "svg", "math", "template", "noscript", "ruby", "rt", "br"]
TREE_TAGS += ["hr", "img", "main", "summary", "dialog", "search", "textarea", "style", "u", "s"]


@hypothesis.settings(max_examples=500, deadline=None, database=None, derandomize=True)
@hypothesis.given(
    st.lists(st.tuples(st.sampled_from(TREE_TAGS), st.booleans(), st.booleans()), max_size=14)
)
def test_no_text_html5lib_holds_in_an_untranslated_element_is_listed_whatever_the_tags(tags):
    """Start and end tags of TREE_TAGS in any order, some start tags marked translate="no"."""
    markup = "".join(
        f"<{'/' * end}{name}{' translate=no' * (no and not end)}>T{number}x "
        for number, (name, end, no) in enumerate(tags)
    )
    assert set(HtmlFragment.parse(markup).texts()) & held_by_html5lib(markup) == set()
