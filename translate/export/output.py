"""What the exports share: their one error, the refusal of sharing variants no format has, and
output written to a temporary directory beside the target, then moved into place."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from translate.errors import UsageError
from translate.model.sharing import sharing_variants_used
from translate.model.transformer import Transformer


class ExportError(UsageError):
    """A checkpoint that cannot be exported exactly; the message says why."""


def refuse_sharing_variants(model: Transformer, target: str) -> None:
    """ExportError for the sharing options `target` cannot express (copies would lose the tie)."""
    used = sharing_variants_used(model.cfg)
    if used:
        raise ExportError(
            f"this model uses {', '.join(f'{name}: true' for name in used)}, which {target} cannot "
            "express (it has no weights shared between layers and no map between the decoder's "
            "embedding and its layers); such models are used with translate-cli only"
        )


def prepare_output(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise ExportError(
            f"{out_dir} exists and is not empty; pass overwrite=True (--overwrite) to replace it"
        )


def publish(tmp: Path, out_dir: Path) -> None:
    """Rename the finished directory into place; an old one is moved aside, then deleted.

    The temporary directory (and some files in it) were created private; the published one
    gets the permissions of an ordinary directory under the current umask.
    """
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    for path in tmp.iterdir():
        if path.is_file():
            path.chmod(0o666 & ~umask)
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old."))
        os.replace(out_dir, old / out_dir.name)
    os.replace(tmp, out_dir)
    if old is not None:
        shutil.rmtree(old)


@contextlib.contextmanager
def staged(out_dir: Path, overwrite: bool) -> Iterator[Path]:
    """A temporary directory beside `out_dir` to write the export into: published in its place
    when the block ends (`out_dir` checked again: nobody filled it meanwhile), deleted if the
    block fails, so a failed export leaves nothing behind."""
    prepare_output(out_dir, overwrite)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp."))
    try:
        yield tmp
        prepare_output(out_dir, overwrite)
        publish(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
