"""Crash-safe saving: a save that fails or is killed midway leaves the old checkpoint intact."""

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import lightning as L
import pytest
import torch
from helpers import FIXTURE, REPO
from lightning.pytorch.callbacks import ModelCheckpoint

from translate.decode.loaded_model import load_model
from translate.model.checkpoint import read_checkpoint
from translate.model.transformer import ModelConfig
from translate.train.checkpoint_io import AtomicCheckpointIO
from translate.train.data_module import TranslationDataModule
from translate.train.lightning_module import TranslationModule


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_failed_save_keeps_the_old_checkpoint_and_no_temporary(tmp_path, monkeypatch):
    io = AtomicCheckpointIO()
    path = tmp_path / "last.ckpt"
    old = {"weights": torch.arange(10_000, dtype=torch.float32), "global_step": 1}
    io.save_checkpoint(old, path)
    before = digest(path)
    real_save = torch.save

    def save_half_then_fail(obj, handle, *args, **kwargs):
        """Writes the first half of the real bytes, then fails (disk full, a crash...)."""
        import io as bytes_io

        buffer = bytes_io.BytesIO()
        real_save(obj, buffer, *args, **kwargs)
        handle.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", save_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        io.save_checkpoint({"weights": torch.zeros(10_000), "global_step": 2}, path)
    monkeypatch.setattr(torch, "save", real_save)
    assert digest(path) == before
    assert torch.equal(torch.load(path, weights_only=True)["weights"], old["weights"])
    assert leftovers(tmp_path) == []


def test_kill_mid_save_keeps_the_old_checkpoint(tmp_path):
    """A process killed (SIGKILL) halfway through writing: the old file is untouched, and the
    temporary it left behind is removed by the next save."""
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"weights": torch.ones(50_000), "global_step": 1}, path)
    before = digest(path)
    program = textwrap.dedent(f"""
        import io, os, signal, torch
        from translate.train.checkpoint_io import AtomicCheckpointIO
        real_save = torch.save
        def killed_midway(obj, handle, *args, **kwargs):
            buffer = io.BytesIO()
            real_save(obj, buffer)
            handle.write(buffer.getvalue()[:100_000])
            handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        torch.save = killed_midway
        AtomicCheckpointIO().save_checkpoint({{"weights": torch.zeros(50_000), "global_step": 2}}, {str(path)!r})
    """)
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True)
    assert result.returncode == -9, result.stderr.decode()
    assert digest(path) == before
    assert len(leftovers(tmp_path)) == 1  # the killed process could not clean up
    AtomicCheckpointIO().save_checkpoint({"weights": torch.full((5,), 3.0), "global_step": 3}, path)
    assert leftovers(tmp_path) == []
    assert torch.load(path, weights_only=True)["global_step"] == 3


def test_trainer_with_the_plugin_saves_loadable_checkpoints(tmp_path):
    data = TranslationDataModule(
        corpus_dir=str(FIXTURE), vocab_size=300, max_tokens=400, cache_dir=str(tmp_path / "cache")
    )
    module = TranslationModule(
        data.vocab,
        ModelConfig(
            d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=32, dropout=0.0
        ),
        warmup_steps=2,
        val_bleu=False,
    )
    directory = tmp_path / "checkpoints"
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=3,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        use_distributed_sampler=False,
        plugins=[AtomicCheckpointIO()],
        callbacks=[
            ModelCheckpoint(
                dirpath=directory,
                filename="step{step}",
                every_n_train_steps=1,
                save_top_k=-1,
                monitor="step",
                mode="max",
                save_last=True,
                auto_insert_metric_name=False,
            )
        ],
    )
    assert isinstance(trainer.strategy.checkpoint_io, AtomicCheckpointIO)
    trainer.fit(module, datamodule=data)
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["last.ckpt", "step1.ckpt", "step2.ckpt", "step3.ckpt"]
    assert read_checkpoint(directory / "step2.ckpt")["global_step"] == 2
    loaded = load_model(directory / "last.ckpt")
    for name, value in module.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value), name
