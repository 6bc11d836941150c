"""Checkpoint averaging: exact means in float64, ties kept, incompatible checkpoints refused."""

import importlib.util
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import FIXTURE

from translate.cli.translate import main as translate_main
from translate.decode.loaded_model import load_model
from translate.model.checkpoint import (
    AVERAGED_KEY,
    CheckpointError,
    average_checkpoints,
    last_checkpoints,
)
from translate.model.transformer import ModelConfig
from translate.train.data_module import TranslationDataModule
from translate.train.lightning_module import TranslationModule

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "average_checkpoints.py"
_spec = importlib.util.spec_from_file_location("average_checkpoints", SCRIPT)
_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_script)
average_main = _script.main
TIED = ("model.src_embed.weight", "model.tgt_embed.weight", "model.output.weight")


@pytest.fixture(scope="module")
def vocabs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("vocab")

    def make(size: int):
        return TranslationDataModule(
            corpus_dir=str(FIXTURE), vocab_size=size, cache_dir=str(directory)
        ).vocab

    return make(300), make(350)


def save_checkpoint(path: Path, vocab, seed: int, step: int, **model_options) -> dict:
    """A checkpoint as Lightning writes it for TranslationModule (weights of a seeded init)."""
    torch.manual_seed(seed)
    options = dict(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=32, dropout=0.0)
    module = TranslationModule(vocab, ModelConfig(**{**options, **model_options}))
    state = {
        "state_dict": module.state_dict(),
        "global_step": step,
        "epoch": 0,
        "optimizer_states": [{"state": {}}],
    }
    module.on_save_checkpoint(state)
    torch.save(state, path)
    return {name: value.clone() for name, value in module.state_dict().items()}


def test_averaging_copies_of_one_checkpoint_gives_it_back(vocabs, tmp_path):
    weights = save_checkpoint(tmp_path / "a.ckpt", vocabs[0], seed=1, step=10)
    averaged = average_checkpoints([tmp_path / "a.ckpt"] * 3)
    assert averaged["state_dict"].keys() == weights.keys()
    for name, value in weights.items():
        assert averaged["state_dict"][name].dtype == value.dtype
        assert torch.equal(averaged["state_dict"][name], value), name


def test_averaging_two_gives_their_elementwise_mean(vocabs, tmp_path):
    a = save_checkpoint(tmp_path / "a.ckpt", vocabs[0], seed=1, step=10)
    b = save_checkpoint(tmp_path / "b.ckpt", vocabs[0], seed=2, step=20)
    averaged = average_checkpoints([tmp_path / "a.ckpt", tmp_path / "b.ckpt"])["state_dict"]
    differing = 0
    for name in a:
        expected = (a[name].numpy().astype(np.float64) + b[name].numpy().astype(np.float64)) / 2
        np.testing.assert_array_equal(
            averaged[name].numpy(), expected.astype(np.float32), err_msg=name
        )
        differing += not torch.equal(a[name], b[name])
    assert differing > 10  # the two inits really differ, so the mean is not trivially either


def test_tied_weights_stay_one_tensor_and_load_as_one_parameter(vocabs, tmp_path):
    a = save_checkpoint(tmp_path / "a.ckpt", vocabs[0], seed=1, step=10)
    save_checkpoint(tmp_path / "b.ckpt", vocabs[0], seed=2, step=20)
    assert main_ok(
        [
            "--checkpoints",
            str(tmp_path / "a.ckpt"),
            str(tmp_path / "b.ckpt"),
            "--output",
            str(tmp_path / "avg.ckpt"),
        ]
    )
    saved = torch.load(tmp_path / "avg.ckpt", weights_only=True)["state_dict"]
    pointers = {saved[name].untyped_storage().data_ptr() for name in TIED}
    assert len(pointers) == 1  # written once, under all three names
    loaded = load_model(tmp_path / "avg.ckpt")
    model = loaded.model
    assert model.output.weight is model.src_embed.weight is model.tgt_embed.weight
    assert not torch.equal(model.src_embed.weight, a[TIED[0]])  # it is the mean, not one input
    assert torch.equal(model.src_embed.weight, saved[TIED[0]])


def test_partial_ties_survive(vocabs, tmp_path):
    """With decoder-only tying, tgt_embed = output is one tensor but src_embed another."""
    for seed in (1, 2):
        save_checkpoint(
            tmp_path / f"{seed}.ckpt", vocabs[0], seed=seed, step=seed, tie_embeddings="decoder"
        )
    averaged = average_checkpoints([tmp_path / "1.ckpt", tmp_path / "2.ckpt"])["state_dict"]
    assert averaged["model.tgt_embed.weight"] is averaged["model.output.weight"]
    assert averaged["model.src_embed.weight"] is not averaged["model.tgt_embed.weight"]


def test_different_vocabularies_are_refused(vocabs, tmp_path):
    save_checkpoint(tmp_path / "a.ckpt", vocabs[0], seed=1, step=10)
    save_checkpoint(tmp_path / "b.ckpt", vocabs[1], seed=1, step=20)
    with pytest.raises(
        CheckpointError, match="a.ckpt and .*b.ckpt were trained with different SentencePiece"
    ):
        average_checkpoints([tmp_path / "a.ckpt", tmp_path / "b.ckpt"])


def test_different_architectures_are_refused(vocabs, tmp_path):
    save_checkpoint(tmp_path / "a.ckpt", vocabs[0], seed=1, step=10)
    save_checkpoint(tmp_path / "b.ckpt", vocabs[0], seed=1, step=20, ffn_dim=64)
    with pytest.raises(CheckpointError, match="different architectures: model_config"):
        average_checkpoints([tmp_path / "a.ckpt", tmp_path / "b.ckpt"])
    # Same config recorded but other weights (a file edited by hand): still refused.
    state = torch.load(tmp_path / "a.ckpt", weights_only=True)
    state["state_dict"]["model.extra"] = torch.zeros(3)
    torch.save(state, tmp_path / "c.ckpt")
    with pytest.raises(CheckpointError, match="e.g. model.extra"):
        average_checkpoints([tmp_path / "a.ckpt", tmp_path / "c.ckpt"])


def test_last_n_are_chosen_by_saved_step_not_file_time(vocabs, tmp_path):
    run = tmp_path / "checkpoints"
    run.mkdir()
    steps = {"step300.ckpt": 300, "step100.ckpt": 100, "step200.ckpt": 200, "best.ckpt": 150}
    for seed, (name, step) in enumerate(steps.items()):
        save_checkpoint(run / name, vocabs[0], seed=seed, step=step)
    shutil.copy(run / "step300.ckpt", run / "last.ckpt")
    for age, name in enumerate(
        ["step300.ckpt", "step200.ckpt", "best.ckpt", "step100.ckpt", "last.ckpt"]
    ):
        os.utime(run / name, (1_000_000 + age, 1_000_000 + age))  # file times in another order
    assert [p.name for p in last_checkpoints(run, 3)] == [
        "best.ckpt",
        "step200.ckpt",
        "step300.ckpt",
    ]

    assert main_ok(["--dir", str(run), "--last", "2", "--output", str(run / "averaged.ckpt")])
    averaged = torch.load(run / "averaged.ckpt", weights_only=True)
    assert [entry["global_step"] for entry in averaged[AVERAGED_KEY]] == [200, 300]
    assert averaged["global_step"] == 300
    # The averaged file in the directory is not itself taken as a checkpoint of step 300.
    assert [p.name for p in last_checkpoints(run, 4)] == [
        "step100.ckpt",
        "best.ckpt",
        "step200.ckpt",
        "step300.ckpt",
    ]
    with pytest.raises(CheckpointError, match="only 4 distinct training steps"):
        last_checkpoints(run, 5)


def test_script_reports_errors_without_a_traceback(vocabs, tmp_path, capsys):
    save_checkpoint(tmp_path / "a.ckpt", vocabs[0], seed=1, step=10)
    save_checkpoint(tmp_path / "b.ckpt", vocabs[1], seed=1, step=20)
    code = average_main(
        [
            "--checkpoints",
            str(tmp_path / "a.ckpt"),
            str(tmp_path / "b.ckpt"),
            "--output",
            str(tmp_path / "avg.ckpt"),
        ]
    )
    assert code == 2
    assert "different SentencePiece vocabularies" in capsys.readouterr().err
    assert not (tmp_path / "avg.ckpt").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    state = torch.load(tmp_path / "a.ckpt", weights_only=True)
    del state["global_step"]
    torch.save(state, tmp_path / "nostep.ckpt")
    assert (
        average_main(
            ["--checkpoints", str(tmp_path / "nostep.ckpt"), "--output", str(tmp_path / "x.ckpt")]
        )
        == 2
    )
    assert "nostep.ckpt: no global_step recorded" in capsys.readouterr().err


def test_translate_cli_accepts_the_average(vocabs, tmp_path, capsys):
    for seed in (1, 2, 3):
        save_checkpoint(tmp_path / f"{seed}.ckpt", vocabs[0], seed=seed, step=seed * 10)
    assert main_ok(
        ["--dir", str(tmp_path), "--last", "3", "--output", str(tmp_path / "avg" / "avg.ckpt")]
    )
    capsys.readouterr()
    source = tmp_path / "input.en"
    source.write_text("Click OK.\n\nSelect the cells.\n", encoding="utf-8")
    output = tmp_path / "output.de"
    code = translate_main(
        [
            "--checkpoint",
            str(tmp_path / "avg" / "avg.ckpt"),
            "--source",
            str(source),
            "--output",
            str(output),
            "--quiet",
            "--max-len-a",
            "0",
            "--max-len-b",
            "4",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert len(output.read_text(encoding="utf-8").splitlines()) == 3


def main_ok(argv: list[str]) -> bool:
    return average_main(argv) == 0
