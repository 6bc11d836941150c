"""Checkpoints load safely and alone; a wrong or foreign file is refused with a reason."""

import pickle

import pytest
import torch

from translate.checkpoint import CheckpointError, load_translator
from translate.data import TranslationDataModule
from translate.model import ModelConfig
from translate.module import TranslationModule


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, request):
    fixture = request.config.rootpath / "tests" / "fixtures" / "libreoffice_small"
    directory = tmp_path_factory.mktemp("ckpt")
    data = TranslationDataModule(corpus_dir=str(fixture), vocab_size=300, cache_dir=str(directory))
    module = TranslationModule(data.vocab, ModelConfig(d_model=32, heads=2, encoder_layers=1,
                                                       decoder_layers=1, ffn_dim=32))
    state = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(state)
    path = directory / "model.ckpt"
    torch.save(state, path)
    return path, module


def test_checkpoint_alone_rebuilds_the_model(checkpoint):
    path, module = checkpoint
    translator = load_translator(path)
    for name, value in module.model.state_dict().items():
        assert torch.equal(value, translator.model.state_dict()[name])
    assert translator.vocab.state() == module.vocab.state()
    assert translator.model.output.weight is translator.model.src_embed.weight


def test_checkpoint_with_another_vocabulary_is_refused(checkpoint, tmp_path, request):
    path, _ = checkpoint
    state = torch.load(path, weights_only=True)
    fixture = request.config.rootpath / "tests" / "fixtures" / "libreoffice_small"
    other = TranslationDataModule(corpus_dir=str(fixture), vocab_size=350, cache_dir=str(tmp_path)).vocab
    state["translate"]["vocab"] = other.state()
    torch.save(state, tmp_path / "mixed.ckpt")
    with pytest.raises(CheckpointError, match="does not belong to these weights"):
        load_translator(tmp_path / "mixed.ckpt")


def test_pickled_code_is_not_executed(tmp_path):
    class Exploit:
        def __reduce__(self):
            return (print, ("executed",))

    path = tmp_path / "evil.ckpt"
    with open(path, "wb") as handle:
        pickle.dump({"state_dict": Exploit()}, handle)
    with pytest.raises(CheckpointError, match="not a loadable checkpoint"):
        load_translator(path)


def test_foreign_and_missing_files_are_named(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="not a translation checkpoint"):
        load_translator(tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="absent.ckpt: no such checkpoint file"):
        load_translator(tmp_path / "absent.ckpt")
