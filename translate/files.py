"""Safe file output: atomic, through symlinks, with the user's permissions, refused up front where
it could only fail or destroy something.

A crash or Ctrl-C never leaves a half-written file: output goes to a temporary file beside the
target, is fsynced and renamed over it. A symlink is written through (its target is replaced,
the link stays), and a directory, device, FIFO or socket is never replaced by a regular file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from translate.errors import UsageError


class OutputError(UsageError):
    """An output path that cannot be written as asked; the message names it and says why."""


@functools.cache
def _umask() -> int:
    """The process's umask: read from /proc where the kernel offers it, since setting it to read
    it back briefly changes it for every thread."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def regular_output_path(path: str | Path) -> Path:
    """Where writing `path` lands: a symlink's final target. An OutputError if that exists and
    is not a regular file (a directory, device, FIFO or socket is never replaced by a file)."""
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target
    except OSError as error:
        raise OutputError(f"{path}: cannot be written ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        raise OutputError(f"{path}: is {_kind(mode)}, not a file this command may replace")
    return target


def same_file(path: str | Path | int, other: str | Path | int) -> bool:
    """Whether writing `path` would write the existing file `other` (each a path, or an open
    file descriptor such as standard input's 0): the same device and inode, through symlinks and
    hard links, of `path` where it exists, else of the path writing it resolves to (its symlinks
    and `..` resolved, as `regular_output_path` does). False where `other` does not exist."""
    try:
        theirs = os.fstat(other) if isinstance(other, int) else os.stat(other)
    except OSError:
        return False
    for candidate in (path,) if isinstance(path, int) else (path, os.path.realpath(path)):
        try:
            mine = os.fstat(candidate) if isinstance(candidate, int) else os.stat(candidate)
        except OSError:
            continue
        return os.path.samestat(mine, theirs)
    return False


def check_writable(path: str | Path) -> Path:
    """`regular_output_path(path)`, after making sure a file can be created beside it (its
    directory made if missing): called before long work, so a read-only directory or a full
    disk is found before anything is computed, not after."""
    target = regular_output_path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise OutputError(f"{path}: cannot write in {target.parent} ({error.strerror})") from None
    return target


@contextmanager
def atomic_output(path: str | Path) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file beside `path` (`.NAME.*.tmp`; beside a symlink's
    target), fsynced and renamed over it when the block ends; on any error the temporary file is
    removed and `path` keeps what it held. The file gets the replaced file's permissions, or
    the umask's for a new one (not the 0600 of a temporary file)."""
    target = check_writable(path)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.chmod(tmp, mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def directory_once(path: str | Path) -> Iterator[Path]:
    """A temporary directory beside `path` to fill, renamed to `path` when the block ends (with
    the umask's permissions, not a temporary directory's 0700), or deleted: on any error, and
    where another process published `path` meanwhile (theirs is kept, whole). For caches, where
    any complete copy will do."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        yield tmp
        tmp.chmod(0o777 & ~_umask())
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


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
