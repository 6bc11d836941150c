"""Worker processes that end with their parent.

A parent killed outright (SIGKILL, the out-of-memory killer) runs no clean-up, and a pool's
workers wait on its pipes for ever, each holding its memory. So each worker watches its parent
itself, through the sentinel `multiprocessing` gives the processes it starts: a pipe that
closes the moment the parent is gone, on every OS.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from multiprocessing.connection import wait


def exit_with_parent() -> None:
    """Called first in a worker that `multiprocessing` started: from now on it exits (code 0, no
    clean-up, as a killed process would) once the process that started it is gone."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not started by multiprocessing: no parent to watch
        return
    threading.Thread(
        target=_exit_once_closed, args=(parent.sentinel,), name="exit-with-parent", daemon=True
    ).start()


def _exit_once_closed(sentinel: int) -> None:
    wait([sentinel])  # ready once the parent's end of the pipe is closed: it has exited
    os._exit(0)
