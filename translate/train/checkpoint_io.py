"""Crash-safe checkpoint writing: a kill, crash or full disk mid-save never corrupts a checkpoint.

`torch.save` straight to `last.ckpt` truncates the old file first, so a job killed while
writing (a SLURM time limit, an out-of-memory kill, a node failure) can leave the run's only
checkpoint half-written. Here the checkpoint is written to a temporary file in the same
directory, flushed and fsynced, and only then renamed over the target with `os.replace`, which
is atomic on POSIX: the path holds either the old checkpoint or the complete new one. The
directory is fsynced too, so the rename itself survives a power loss. On any failure the
temporary file is removed; one left by a process killed mid-write is removed at the next save
of the same checkpoint.

Use: `Trainer(plugins=[AtomicCheckpointIO()])`, or in a config
`trainer.plugins: [{class_path: translate.train.checkpoint_io.AtomicCheckpointIO}]`.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

import torch
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.plugins.io import TorchCheckpointIO

from translate.files import atomic_output


def _fsync_directory(directory: Path) -> None:
    """Persist a rename: the new directory entry is only durable once the directory is synced."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories; the rename still happened
        pass
    finally:
        os.close(fd)


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """`torch.save(obj, path)` that never leaves `path` partly written, nor a temporary file behind."""
    path = Path(path)
    with atomic_output(path) as handle:
        torch.save(obj, handle)
    _fsync_directory(path.parent)


def remove_stale_temporaries(path: Path) -> None:
    """Delete what an earlier save of `path` left when its process was killed mid-write
    (SIGKILL gives no chance to clean up; each leftover may be as large as a checkpoint).
    Only Lightning's global rank 0 saves, so no other writer of `path` can be running."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        stale.unlink(missing_ok=True)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's `TorchCheckpointIO`, saving local checkpoints through `atomic_torch_save`.

    Remote paths (`s3://`, `gs://`, ...) keep Lightning's own saving: object stores replace
    an object as a whole anyway.
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError(
                f"{type(self).__name__} takes no storage_options (got {storage_options!r})"
            )
        if not isinstance(get_filesystem(path), LocalFileSystem):
            super().save_checkpoint(checkpoint, path)
            return
        path = Path(LocalFileSystem._strip_protocol(os.fspath(path)))  # also takes file:// URLs
        remove_stale_temporaries(path)
        atomic_torch_save(checkpoint, path)
