"""What users feed the translating commands by mistake: byte-order marks, blank lines of every
kind, outputs that are links, pipes, devices or directories, closed pipes, empty files, and
stdin typed line by line. Each gives a clear one-line error or the right output, and loses nothing."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from helpers import joint_vocab, random_checkpoint
from processes import TRAINING_STACK, imported_after

import translate.decode.loaded_model
from translate.cli.evaluate import main as eval_main
from translate.cli.translate import main
from translate.decode.loaded_model import load_model

SENTENCES = ["Click OK.", "Select the cells that you want to copy.", "Last line."]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("hostile")
    random_checkpoint(directory / "model.ckpt", joint_vocab(), None)
    return directory / "model.ckpt"


def cli(ckpt: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--checkpoint", str(ckpt), "--quiet", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(path: Path, lines: list[str], prefix: str = "") -> Path:
    path.write_text(prefix + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(needle in lines[0] for needle in needles), err


def run_module(module: str, *args: str, data: bytes = b"", **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args], input=data, capture_output=True, **kwargs
    )


# --- what reaches the model -----------------------------------------------------------------------
def test_a_byte_order_mark_is_dropped_from_input_and_references(ckpt, capsys, tmp_path):
    vocab = load_model(ckpt).vocab.source
    assert vocab.encode(["\ufeffClick OK."]) != vocab.encode(["Click OK."]), (
        "the mark would reach the model"
    )
    code, plain, err = cli(ckpt, capsys, "--source", str(write(tmp_path / "plain.en", SENTENCES)))
    assert code == 0, err
    code, marked, err = cli(
        ckpt, capsys, "--source", str(write(tmp_path / "bom.en", SENTENCES, "\ufeff"))
    )
    assert code == 0 and marked == plain
    result = run_module(
        "translate.cli.translate",
        "--checkpoint",
        str(ckpt),
        "--quiet",
        data=("\ufeff" + "\n".join(SENTENCES) + "\n").encode(),
    )
    assert result.returncode == 0 and result.stdout.decode() == plain

    references = write(tmp_path / "ref.de", SENTENCES, "\ufeff")
    hypotheses = write(tmp_path / "hyp.de", SENTENCES)
    assert (
        eval_main(["--hypotheses", str(hypotheses), "--reference", str(references), "--json"]) == 0
    )
    assert '"bleu": 100.0' in capsys.readouterr().out


def test_blank_lines_of_any_kind_give_empty_lines(ckpt, capsys, tmp_path):
    blanks = ["\t", "\x00", "   ", "\u3000", "\u00a0\t", "\u200b", "\x00\x00 \t"]
    vocab = load_model(ckpt).vocab.source
    assert all(vocab.encode([b])[0] for b in ["\t", "\x00", "\u3000", "\u200b"]), (
        "they would be decoded"
    )
    lines = [SENTENCES[0], *blanks, SENTENCES[1]]
    code, out, err = cli(
        ckpt, capsys, "--source", str(write(tmp_path / "in.en", lines)), "--beam", "2"
    )
    assert code == 0, err
    output = out.split("\n")
    assert len(output) == len(lines) + 1 and output[-1] == ""
    assert output[1 : 1 + len(blanks)] == [""] * len(blanks)
    assert output[0] and output[len(lines) - 1]


# --- where the output goes --------------------------------------------------------------------------
def test_output_through_a_symlink_replaces_its_target_and_keeps_the_link(ckpt, capsys, tmp_path):
    source = write(tmp_path / "in.en", SENTENCES)
    target = tmp_path / "real.de"
    target.write_text("old\n")
    (tmp_path / "link.de").symlink_to(target)
    code, _, err = cli(ckpt, capsys, "--source", str(source), "--output", str(tmp_path / "link.de"))
    assert code == 0, err
    assert (tmp_path / "link.de").is_symlink() and os.readlink(tmp_path / "link.de") == str(target)
    assert len(target.read_text(encoding="utf-8").splitlines()) == len(SENTENCES)


def test_output_to_a_fifo_or_a_character_device_is_a_stream(ckpt, capsys, tmp_path):
    source = write(tmp_path / "in.en", SENTENCES)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: queue.Queue = queue.Queue()
    reader = threading.Thread(
        target=lambda: received.put(fifo.read_text(encoding="utf-8")), daemon=True
    )
    reader.start()
    code, _, err = cli(ckpt, capsys, "--source", str(source), "--output", str(fifo))
    assert code == 0, err
    assert len(received.get(timeout=60).splitlines()) == len(SENTENCES)
    assert fifo.is_fifo() and not list(tmp_path.glob("*.partial*"))

    code, _, err = cli(ckpt, capsys, "--source", str(source), "--output", os.devnull)
    assert code == 0, err
    assert Path(os.devnull).is_char_device()
    code, _, err = cli(ckpt, capsys, "--source", str(source), "--output", os.devnull, "--resume")
    one_line_error(err, "--resume continues an --output FILE")


def test_an_unwritable_output_is_refused_before_any_work(ckpt, capsys, tmp_path, monkeypatch):
    source = write(tmp_path / "in.en", SENTENCES)

    def no_work(*args, **kwargs):
        raise AssertionError("the checkpoint was loaded before the output was checked")

    monkeypatch.setattr(translate.decode.loaded_model, "load_model", no_work)
    (tmp_path / "dir.de").mkdir()
    code, _, err = cli(ckpt, capsys, "--source", str(source), "--output", str(tmp_path / "dir.de"))
    assert code == 2
    one_line_error(err, "dir.de: is a directory")

    read_only = tmp_path / "read-only"
    read_only.mkdir()
    real_mkstemp = tempfile.mkstemp

    def refused_there(*args, dir=None, **kwargs):  # as a read-only directory refuses (even root's)
        if dir is not None and Path(dir) == read_only:
            raise PermissionError(13, "Permission denied")
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refused_there)
    code, _, err = cli(ckpt, capsys, "--source", str(source), "--output", str(read_only / "out.de"))
    assert code == 2
    one_line_error(err, "read-only/out.de: cannot write in", "Permission denied")
    code = eval_main(
        [
            "--checkpoint",
            str(ckpt),
            "--source",
            str(source),
            "--reference",
            str(source),
            "--output",
            str(read_only / "hyp.de"),
        ]
    )
    assert code == 2
    one_line_error(capsys.readouterr().err, "cannot write in", "Permission denied")
    assert list(read_only.iterdir()) == []


def test_a_closed_pipe_ends_quietly(ckpt, tmp_path):
    source = write(tmp_path / "in.en", SENTENCES * 400)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "translate.cli.translate",
            "--checkpoint",
            str(ckpt),
            "--quiet",
            "--source",
            str(source),
            "--beam",
            "1",
            "--chunk-lines",
            "10",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout.readline()  # `| head -1`: one line, then the reader leaves
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    assert process.returncode == 141 and err == b"", err.decode()


# --- scoring ------------------------------------------------------------------------------------------
def test_empty_files_are_not_scored(capsys, tmp_path):
    empty = tmp_path / "empty.de"
    empty.write_text("")
    assert eval_main(["--hypotheses", str(empty), "--reference", str(empty)]) == 2
    one_line_error(capsys.readouterr().err, "nothing to score", "empty.de has no lines")
    blank = write(tmp_path / "blank.de", ["", ""])
    assert eval_main(["--hypotheses", str(blank), "--reference", str(blank)]) == 2
    one_line_error(capsys.readouterr().err, "blank.de has 2 lines, all of them empty")


def test_translate_eval_refuses_half_given_and_ignored_flags(ckpt, capsys, tmp_path):
    text = write(tmp_path / "text", SENTENCES)
    cases = [
        (["--checkpoint", str(ckpt), "--source", str(text)], "--source without --reference"),
        (["--checkpoint", str(ckpt), "--reference", str(text)], "--reference without --source"),
        (["--hypotheses", str(text)], "--hypotheses needs --reference"),
        (
            ["--hypotheses", str(text), "--reference", str(text), "--beam", "3"],
            "--beam apply only with --checkpoint",
        ),
        (
            ["--hypotheses", str(text), "--reference", str(text), "--output", str(text)],
            "--output apply only",
        ),
        (
            [
                "--checkpoint",
                str(ckpt),
                "--source",
                str(text),
                "--reference",
                str(text),
                "--split",
                "dev",
            ],
            "--split chooses a split",
        ),
        (["--checkpoint", str(ckpt), "--hypotheses", str(text)], "exactly one of --checkpoint"),
        (["--checkpoint", str(ckpt)], "does not record the corpus and languages it was trained on"),
    ]
    for argv, message in cases:
        assert eval_main(argv) == 2, argv
        one_line_error(capsys.readouterr().err, message)


# --- standard input ----------------------------------------------------------------------------------
def test_stdin_is_answered_line_by_line_as_it_arrives(ckpt):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "translate.cli.translate",
            "--checkpoint",
            str(ckpt),
            "--quiet",
            "--beam",
            "1",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    answers: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: [answers.put(line) for line in process.stdout], daemon=True
    ).start()
    try:
        first, second = (answers_for(process, answers, line) for line in ("Click OK.\n", "\t\n"))
        assert first.strip() and second == b"\n", "a blank line is answered with an empty line"
        process.stdin.write(b"Last line.\n")
        process.stdin.close()
        assert process.wait(timeout=120) == 0, process.stderr.read().decode()
        assert answers.get(timeout=10).strip()
    finally:
        process.kill()


def answers_for(process: subprocess.Popen, answers: queue.Queue, line: str) -> bytes:
    """Write one line and wait for its translation while stdin stays open: only a command that
    translates what has arrived, without waiting for the end of its input, can answer."""
    process.stdin.write(line.encode())
    process.stdin.flush()
    try:
        return answers.get(timeout=120)
    except queue.Empty:
        pytest.fail(f"no answer to {line!r} while the input stayed open")


# --- start-up ----------------------------------------------------------------------------------------
LEAN = [
    "translate.cli.translate",
    "translate.cli.evaluate",
    "translate.cli.export",
    "translate.cli.inspect",
    "translate.cli.serve",
    "translate.cli.tune",
]


def test_help_loads_no_torch_and_no_command_loads_the_training_stack(ckpt, tmp_path):
    for module in LEAN:
        code = f"import {module} as m\ntry:\n    m.main(['--help'])\nexcept SystemExit:\n    pass"
        _, loaded = imported_after(code, ("torch", *TRAINING_STACK))
        assert loaded == [], module

    source = write(tmp_path / "in.en", SENTENCES)
    runs = {
        "translate.cli.translate": ["--checkpoint", str(ckpt), "--source", str(source), "--quiet"],
        "translate.cli.evaluate": [
            "--checkpoint",
            str(ckpt),
            "--source",
            str(source),
            "--reference",
            str(source),
        ],
        "translate.cli.inspect": ["--checkpoint", str(ckpt)],
        "translate.cli.export": [
            "--checkpoint",
            str(ckpt),
            "--output",
            str(tmp_path / "ct2"),
            "--format",
            "ctranslate2",
        ],
    }
    for module, argv in runs.items():
        if module == "translate.cli.export" and not __import__("importlib").util.find_spec(
            "ctranslate2"
        ):
            continue
        printed, loaded = imported_after(
            f"import {module} as m\nprint('exit', m.main({argv!r}))", TRAINING_STACK
        )
        assert printed[-1] == "exit 0" and loaded == [], (module, printed)


def test_translate_eval_scores_a_checkpoint_on_its_own_corpus(ckpt, capsys, tmp_path):
    """A Spanish-English checkpoint is scored on the test split it records, never the bundled en-de one."""
    import torch

    corpus = tmp_path / "bible"
    corpus.mkdir()
    write(corpus / "test.es", ["Y llamó su nombre.", "En el principio."])
    write(corpus / "test.en", ["And he called his name.", "In the beginning."])
    state = torch.load(ckpt, weights_only=True)
    state["translate"]["run_config"] = (
        f"data:\n  corpus_dir: {corpus}\n  src_lang: es\n  tgt_lang: en\n  test_split: test\n"
    )
    torch.save(state, tmp_path / "es-en.ckpt")
    assert eval_main(["--checkpoint", str(tmp_path / "es-en.ckpt"), "--beam", "1", "--json"]) == 0
    captured = capsys.readouterr()
    assert f"es→en, split 'test' of {corpus} (2 lines)" in captured.err
    own = captured.out
    assert (
        eval_main(
            [
                "--checkpoint",
                str(tmp_path / "es-en.ckpt"),
                "--beam",
                "1",
                "--json",
                "--source",
                str(corpus / "test.es"),
                "--reference",
                str(corpus / "test.en"),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == own

    (corpus / "test.en").unlink()
    assert eval_main(["--checkpoint", str(tmp_path / "es-en.ckpt")]) == 2
    one_line_error(
        capsys.readouterr().err,
        "test.en: no such file",
        "es-en.ckpt was trained on this corpus",
        "give --source and --reference",
    )
