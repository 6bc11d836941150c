"""PartialOutput: chunks appended durably, resumed only for the same work and input, never overwritten unasked."""

import json

import pytest

from translate.partial_output import PartialOutput, PartialOutputError

WORK = {"checkpoint": "abc", "--beam": 5}
INPUT = ["a", "b", "c"]


def test_chunks_resume_and_finish(tmp_path):
    out = tmp_path / "sub" / "out.txt"
    first = PartialOutput(out, WORK, resume=False)
    first.append(["A", "B"], input_lines=INPUT[:2])
    assert not out.exists() and first.read() == ["A", "B"]
    again = PartialOutput(out, dict(WORK), resume=True)
    assert (again.lines_done, again.read()) == (2, ["A", "B"])
    rest = iter(INPUT)
    again.skip_done(rest)
    assert list(rest) == ["c"], "exactly the lines done are read off the input"
    again.append(["C ||| with\u2028odd text"], input_lines=["c"])
    again.finish()
    assert out.read_text(encoding="utf-8") == "A\nB\nC ||| with\u2028odd text\n"
    assert again.read() == ["A", "B", "C ||| with\u2028odd text"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.txt"]


def test_no_input_gives_an_empty_file(tmp_path):
    output = PartialOutput(tmp_path / "out", WORK, resume=False)
    output.finish()
    assert (tmp_path / "out").read_bytes() == b""


def test_a_resume_over_another_input_is_refused(tmp_path):
    out = tmp_path / "out"
    PartialOutput(out, WORK, resume=False).append(["A", "B"], input_lines=["a", "b"])
    with pytest.raises(
        PartialOutputError, match="first 2 input lines of another input .this input differs in them"
    ):
        PartialOutput(out, WORK, resume=True).skip_done(iter(["a", "x", "c"]))
    with pytest.raises(PartialOutputError, match="this input has only 1 lines"):
        PartialOutput(out, WORK, resume=True).skip_done(iter(["a"]))
    assert (tmp_path / "out.partial").read_text() == "A\nB\n", (
        "a refused resume must not touch the partial"
    )
    PartialOutput(out, WORK, resume=True).skip_done(iter(["a", "b", "c"]))


def test_what_cannot_be_resumed_is_refused_and_kept(tmp_path):
    out = tmp_path / "out"
    PartialOutput(out, WORK, resume=False).append(["A"], input_lines=["a"])
    with pytest.raises(PartialOutputError, match="holds the translations of 1 input lines"):
        PartialOutput(out, WORK, resume=False)
    with pytest.raises(PartialOutputError, match="another --beam, checkpoint than"):
        PartialOutput(out, {"checkpoint": "other", "--beam": 4}, resume=True)
    assert (tmp_path / "out.partial").read_text() == "A\n", (
        "a refused resume must not touch the partial"
    )

    (tmp_path / "out.partial").write_text("")
    with pytest.raises(PartialOutputError, match="shorter than"):
        PartialOutput(out, WORK, resume=True)
    (tmp_path / "out.partial.json").write_text("{not json")
    with pytest.raises(PartialOutputError, match="do not describe an unfinished run"):
        PartialOutput(out, WORK, resume=True)
    (tmp_path / "out.partial.json").write_text(json.dumps({"lines_done": 1}))
    with pytest.raises(PartialOutputError, match="do not describe an unfinished run"):
        PartialOutput(out, WORK, resume=True)
