"""A text cut into sentences, line by line, and put together again (translate/text/sentences.py):
hand-made cases written out, and any text given back as it was."""

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import strategies as st  # noqa: E402

from translate.text.sentences import is_blank, join_lines, lines_of, split_text  # noqa: E402


@pytest.mark.parametrize(
    "text, pieces, between",
    [
        ("Click OK.\nSave the file.", ["Click OK.", "Save the file."], ["", "\n", ""]),
        (
            "  Click OK.  Save the file!\r\n\r\n\tDone?  ",
            ["Click OK.", "Save the file!", "Done?"],
            ["  ", "  ", "\r\n\r\n\t", "  "],
        ),
        ("1. Click OK. 2. Save.", ["1. Click OK.", "2. Save."], ["", " ", ""]),
        ("Select cell 15. Save.", ["Select cell 15.", "Save."], ["", " ", ""]),
        (
            "Use e.g. the menu. Dr. Smith agrees.",
            ["Use e.g. the menu.", "Dr. Smith agrees."],
            ["", " ", ""],
        ),
        ("J. Smith wrote it.", ["J. Smith wrote it."], ["", ""]),
        ("Version 3.5 is out... and more.", ["Version 3.5 is out... and more."], ["", ""]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."], ["", " ", ""]),
        ("Wait (see below.) Next one.", ["Wait (see below.)", "Next one."], ["", " ", ""]),
        ("你好。我很好！谢谢", ["你好。", "我很好！", "谢谢"], ["", "", "", ""]),
        ("Choose Format - Cells.", ["Choose Format - Cells."], ["", ""]),
        ("   ", [], ["   "]),
        ("", [], [""]),
        ("\n\n", [], ["\n\n"]),
        ("a\u200b\n\ufeffb", ["a", "b"], ["", "\u200b\n\ufeff", ""]),
    ],
)
def test_sentences_and_lines_are_the_pieces_and_the_rest_is_kept_between(text, pieces, between):
    split = split_text(text)
    assert list(split.pieces) == pieces and list(split.between) == between
    assert split.join(split.pieces) == text


def test_lines_only():
    split = split_text("One. Two.\n\n  Three.\n", sentences=False)
    assert split.pieces == ("One. Two.", "Three.")
    assert split.join(["1", "3"]) == "1\n\n  3\n"
    with pytest.raises(ValueError, match="2 pieces, 1 translations"):
        split.join(["1"])


def test_a_piece_over_the_limit_is_cut_at_a_space_else_at_the_limit():
    split = split_text("Click the button the button now.", max_chars=15)
    assert split.pieces == ("Click the", "button the", "button now.")
    assert split.between == ("", " ", " ", "")
    assert split_text("x" * 25, max_chars=10).pieces == ("x" * 10, "x" * 10, "x" * 5)
    with pytest.raises(ValueError, match="at least 1"):
        split_text("a", max_chars=0)


def test_lines_and_their_breaks_as_written():
    assert lines_of("a\r\nb\n\nc\r") == (["a", "b", "", "c", ""], ["\r\n", "\n", "\n", "\r"])
    assert lines_of("") == ([""], [])
    assert is_blank(" \t\u3000\x00\u200b\ufeff") and not is_blank(" a ")


TEXT = st.lists(
    st.sampled_from(
        [
            "Click OK.",
            " ",
            "  ",
            "\n",
            "\r\n",
            "\r",
            "\t",
            "e.g.",
            "1.",
            "Dr.",
            "?",
            "!",
            "。",
            "\u200b",
            '"',
            ")",
            "x",
            "Save",
            "a.b",
            "…",
        ]  # fmt: skip
    )
    | st.text(max_size=5),
    max_size=25,
).map("".join)


@hypothesis.settings(max_examples=300, deadline=None, database=None, derandomize=True)
@hypothesis.given(TEXT, st.sampled_from([None, 1, 3, 8]), st.booleans())
def test_any_text_comes_back_whole_from_its_pieces(text, max_chars, sentences):
    split = split_text(text, sentences=sentences, max_chars=max_chars)
    assert split.join(split.pieces) == text
    assert len(split.between) == len(split.pieces) + 1
    for piece in split.pieces:
        assert piece and not is_blank(piece[0]) and not is_blank(piece[-1])
        assert not any(char in piece for char in "\r\n")
        assert max_chars is None or len(piece) <= max_chars
    assert join_lines(*lines_of(text)) == text
