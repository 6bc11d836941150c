"""Atomic file output: a crash or Ctrl-C never leaves a half-written file behind."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from translate.errors import UsageError


@contextmanager
def atomic_output(path: str | Path) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file beside `path` (`.NAME.*.tmp`), fsynced and renamed
    over `path` when the block ends; on any error the temporary file is removed and `path`
    keeps what it held."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it."""
    with atomic_output(path) as handle:
        handle.write(data)


def write_lines_atomic(path: str | Path, lines: list[str]) -> None:
    write_atomic(path, "".join(line + "\n" for line in lines).encode("utf-8"))


def file_digest(*paths: str | Path) -> str:
    """SHA-256 of the files' bytes, one after another: what caches and resumable outputs are keyed on."""
    digest = hashlib.sha256()
    for path in map(Path, paths):
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
