"""The front door from Python, `from translate import Translator`: what translate-cli gives the
same lines with the same settings, scores with every hypothesis, and nothing of torch imported
until it is asked for."""

import re

import pytest
from processes import imported_after

from translate.cli.translate import main

LINES = ["Click OK.", "", "Choose Tools - Options.", "Select the cells that you want to copy."]


@pytest.fixture(scope="module")
def translator(checkpoint_path):
    from translate import Translator

    return Translator(str(checkpoint_path), device="cpu")


def cli_output(checkpoint_path, tmp_path, capsys, *flags: str) -> list[str]:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert (
        main(["--quiet", "--checkpoint", str(checkpoint_path), "--source", str(source), *flags])
        == 0
    )
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("flags, settings", [((), {}), (("--beam", "1"), {"beam": 1})])
def test_translate_gives_what_translate_cli_gives(
    translator, checkpoint_path, tmp_path, capsys, flags, settings
):
    translations = translator.translate(LINES, **settings)
    assert translations == cli_output(checkpoint_path, tmp_path, capsys, *flags)
    assert len(translations) == len(LINES) and translations[1] == ""


def test_hypotheses_carry_scores_best_first_greedy_too(translator):
    for beam, n_best in ((1, 1), (4, 3)):
        found = translator.hypotheses(LINES, beam=beam, n_best=n_best)
        assert [len(entries) for entries in found] == [n_best] * len(LINES)
        assert found[1][0].text == "" and found[1][0].score == 0.0  # an empty line: not searched
        for entries in (found[0], found[2], found[3]):
            scores = [entry.score for entry in entries]
            assert scores == sorted(scores, reverse=True) and all(s < 0 for s in scores)
            assert all(
                entry.log_prob <= entry.score for entry in entries
            )  # penalty >= 1 at alpha >= 0
        assert [entries[0].text for entries in found] == translator.translate(LINES, beam=beam)


def test_a_bad_setting_is_a_clear_error(translator):
    with pytest.raises(TypeError, match="no_such_setting"):
        translator.translate(LINES, no_such_setting=1)
    with pytest.raises(ValueError, match="n_best must be between 1 and the beam size 2, got 3"):
        translator.translate(LINES, beam=2, n_best=3)


def test_importing_the_package_leaves_torch_unloaded():
    _, loaded = imported_after(
        "import translate; assert callable(translate.__getattr__)", ["torch"]
    )
    assert loaded == []


def test_the_readme_s_python_example_runs(checkpoint_path):
    """The README's example, with the test checkpoint in place of `make train`'s."""
    from helpers import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert "runs/default/checkpoints/last.ckpt" in example
    namespace: dict = {}
    code = example.replace("runs/default/checkpoints/last.ckpt", str(checkpoint_path))
    exec(compile(code, "README.md", "exec"), namespace)
    assert isinstance(namespace["translator"].translate(["Click OK."])[0], str)
