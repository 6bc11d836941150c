"""Checkpoints load safely and alone; a wrong or foreign file is refused with a reason."""

import inspect
import pickle
from dataclasses import fields

import pytest
import torch

from translate.decode.loaded_model import LoadedModel, load_model
from translate.model.checkpoint import CheckpointError, TrainingConfig
from translate.model.transformer import ModelConfig
from translate.text import run_data as run_data_module
from translate.train.data_module import TranslationDataModule
from translate.train.lightning_module import TranslationModule


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, request):
    fixture = request.config.rootpath / "tests" / "fixtures" / "libreoffice_small"
    directory = tmp_path_factory.mktemp("ckpt")
    data = TranslationDataModule(corpus_dir=str(fixture), vocab_size=300, cache_dir=str(directory))
    module = TranslationModule(
        data.vocab, ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=32)
    )
    state = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(state)
    path = directory / "model.ckpt"
    torch.save(state, path)
    return path, module


def test_checkpoint_alone_rebuilds_the_model(checkpoint):
    path, module = checkpoint
    loaded = load_model(path)
    for name, value in module.model.state_dict().items():
        assert torch.equal(value, loaded.model.state_dict()[name])
    assert loaded.vocab.state() == module.vocab.state()
    assert loaded.model.output.weight is loaded.model.src_embed.weight


def test_the_training_settings_are_stored_plain_and_read_back_typed(checkpoint):
    path, module = checkpoint
    stored = torch.load(path, weights_only=True)["translate"]["training_config"]
    assert stored == {
        "lr": 7e-4,
        "warmup_steps": 4000,
        "lr_schedule": "inverse_sqrt",
        "betas": [0.9, 0.98],
        "weight_decay": 0.0,
        "label_smoothing": 0.1,
        "max_len_a": 1.5,
        "max_len_b": 10,
        "optimizer": "adam",
        "fused_optimizer": None,
    }
    assert load_model(path).training_config == module.training_config == TrainingConfig()


def test_an_older_checkpoint_lacking_a_training_setting_loads_with_its_default(
    checkpoint, tmp_path
):
    path, _ = checkpoint
    state = torch.load(path, weights_only=True)
    state["translate"]["training_config"] = {"max_len_a": 1.2, "label_smoothing": 0.2, "gone": 1}
    torch.save(state, tmp_path / "older.ckpt")
    config = load_model(tmp_path / "older.ckpt").training_config
    assert config == TrainingConfig(max_len_a=1.2, label_smoothing=0.2)
    assert (config.max_len_b, config.betas, config.lr) == (10, (0.9, 0.98), 7e-4)
    del state["translate"]["training_config"]
    torch.save(state, tmp_path / "oldest.ckpt")
    assert load_model(tmp_path / "oldest.ckpt").training_config == TrainingConfig()


def test_a_missing_training_setting_takes_translate_train_s_default():
    signature = inspect.signature(TranslationModule).parameters
    for field in fields(TrainingConfig):
        default = signature[field.name].default
        assert getattr(TrainingConfig(), field.name) == (
            tuple(default) if field.name == "betas" else default
        ), field.name


def test_checkpoint_with_another_vocabulary_is_refused(checkpoint, tmp_path, request):
    path, _ = checkpoint
    state = torch.load(path, weights_only=True)
    fixture = request.config.rootpath / "tests" / "fixtures" / "libreoffice_small"
    other = TranslationDataModule(
        corpus_dir=str(fixture), vocab_size=350, cache_dir=str(tmp_path)
    ).vocab
    state["translate"]["vocab"] = other.state()
    torch.save(state, tmp_path / "mixed.ckpt")
    with pytest.raises(CheckpointError, match="does not belong to these weights"):
        load_model(tmp_path / "mixed.ckpt")


def test_pickled_code_is_not_executed(tmp_path):
    class Exploit:
        def __reduce__(self):
            return (print, ("executed",))

    path = tmp_path / "evil.ckpt"
    with open(path, "wb") as handle:
        pickle.dump({"state_dict": Exploit()}, handle)
    with pytest.raises(CheckpointError, match="not a loadable checkpoint"):
        load_model(path)


def test_foreign_and_missing_files_are_named(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="not a translation checkpoint"):
        load_model(tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="absent.ckpt: no such checkpoint file"):
        load_model(tmp_path / "absent.ckpt")


def run_cli(checkpoint_path, data: bytes, *args: str):
    import subprocess
    import sys

    return subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.translate",
            "--checkpoint",
            str(checkpoint_path),
            "--quiet",
            *args,
        ],
        input=data,
        capture_output=True,
    )


def test_cli_keeps_one_line_per_input_line(checkpoint, tmp_path):
    path, _ = checkpoint
    lines = ["Click OK.", "", "word " * 1500, "Нажмите кнопку ОК.", "点击确定", "", "Last line."]
    result = run_cli(
        path, "".join(line + "\n" for line in lines).encode(), "--output", str(tmp_path / "out.de")
    )
    assert result.returncode == 0, result.stderr.decode()
    output = (tmp_path / "out.de").read_text(encoding="utf-8").split("\n")
    assert len(output) == len(lines) + 1 and output[-1] == ""
    assert output[1] == "" and output[5] == ""
    assert b"warning: line 3 has" in result.stderr  # translated in segments, not dropped


def test_cli_refuses_invalid_utf8_before_writing(checkpoint, tmp_path):
    path, _ = checkpoint
    out = tmp_path / "out.de"
    result = run_cli(path, b"fine\nbroken \xc3\x28 here\n", "--output", str(out))
    assert result.returncode == 2
    assert b"<stdin>:2: invalid UTF-8" in result.stderr
    assert not out.exists()


def test_the_saved_config_is_parsed_once_not_on_every_question(monkeypatch):
    parses = []
    safe_load = run_data_module.yaml.safe_load
    monkeypatch.setattr(
        run_data_module.yaml, "safe_load", lambda text: parses.append(text) or safe_load(text)
    )
    loaded = LoadedModel(None, None, TrainingConfig(), "data:\n  src_lang: en\n  tgt_lang: de\n")
    assert [loaded.data.languages for _ in range(3)] == [
        ("en", "de")
    ] * 3 and loaded.data.directions == (("en", "de"),)
    assert len(parses) == 1
    loaded.run_config = "data:\n  src_lang: de\n  tgt_lang: en\n"  # another config is read again
    assert loaded.data.languages == ("de", "en") and len(parses) == 2
