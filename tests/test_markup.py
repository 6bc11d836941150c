"""HTML translated in place (translate/text/markup.py), with upper-casing as the translation: the
expected output is written out by hand."""

import pytest

pytest.importorskip("bs4")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import strategies as st  # noqa: E402

from translate.text.markup import HtmlFragment, collapse_space  # noqa: E402


def upper(markup: str) -> tuple[list[str], str]:
    fragment = HtmlFragment.parse(markup)
    texts = fragment.texts()
    return texts, fragment.render([text.upper() for text in texts])


@pytest.mark.parametrize(
    "markup, texts, expected",
    [
        (
            "<p>Click <b>the <i>OK</i> button</b> now.</p>",
            ["Click", "the", "OK", "button", "now."],
            "<p>CLICK <b>THE <i>OK</i> BUTTON</b> NOW.</p>",
        ),
        ("one<br>two<br/>three", ["one", "two", "three"], "ONE<br>TWO<br>THREE"),
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
        ("  <p>\n  spaced   out\n  </p>\t", ["spaced out"], "  <p>\n  SPACED OUT\n  </p>\t"),
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
        ("<p>open <b>bold</p>", ["open", "bold"], "<p>OPEN <b>BOLD</b></p>"),
        ("</div>stray", ["stray"], "STRAY"),
        ("", [], ""),
        ("<p> </p>", [], "<p> </p>"),
        (
            '<p>Hi <span class="h-card"><a href="https://m.example/@ann" class="u-url mention">'
            "@<span>ann</span></a></span> look: "
            '<a href="https://example.org" rel="nofollow noopener" target="_blank">'
            '<span class="invisible">https://</span><span class="">example.org</span></a> '
            '<a href="/tags/mt" class="mention hashtag" rel="tag">#<span>mt</span></a></p>',
            ["Hi", "@", "ann", "look:", "https://", "example.org", "#", "mt"],
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


def test_a_translation_count_that_does_not_match_is_an_error():
    with pytest.raises(ValueError, match="2 text nodes, 1 translations"):
        HtmlFragment.parse("<b>a</b>b").render(["A"])


def test_only_htmls_spaces_collapse():
    assert collapse_space(" a \t\n b\r\x0c c ") == "a b c"
    assert collapse_space("a\xa0 b") == "a\xa0 b"


@hypothesis.settings(max_examples=300, deadline=None, database=None, derandomize=True)
@hypothesis.given(
    st.lists(
        st.sampled_from(["<b>", "</b>", "<p", ">", "<br>", "&amp;", "&", "<!--", "-->", "<", "x y"])
        | st.text(max_size=6),
        max_size=15,
    ).map("".join)
)
def test_any_input_is_answered_and_a_second_round_changes_nothing(markup):
    """Malformed HTML included: parsed and rendered; translating each text to itself and
    rendering again is then a fixed point (the first round may mend the markup)."""
    fragment = HtmlFragment.parse(markup)
    once = fragment.render(fragment.texts())
    again = HtmlFragment.parse(once)
    assert again.render(again.texts()) == once
