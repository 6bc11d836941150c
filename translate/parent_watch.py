"""Worker processes that end with their parent.

A parent killed outright (SIGKILL, the out-of-memory killer) runs no clean-up, and a pool's
workers wait on its pipes for ever, each holding its memory. So each worker watches its parent
itself: through the sentinel `multiprocessing` gives a spawned child (a pipe that closes the
moment the parent is gone, on every OS), else by polling the parent's process id.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from multiprocessing.connection import wait


def exit_with_parent(poll_seconds: float = 1.0) -> None:
    """Called first in a worker process: from now on it exits (code 0, no clean-up, as a killed
    process would) once the process that started it is gone."""
    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        target, args = _wait_on_sentinel, (parent.sentinel,)
    else:
        target, args = _poll_parent_id, (os.getppid(), poll_seconds)
    threading.Thread(target=target, args=args, name="exit-with-parent", daemon=True).start()


def _wait_on_sentinel(sentinel: int) -> None:
    wait([sentinel])  # ready once the parent's end of the pipe is closed: it has exited
    os._exit(0)


def _poll_parent_id(parent: int, poll_seconds: float) -> None:
    while os.getppid() == parent:  # an orphan is adopted by another process
        time.sleep(poll_seconds)
    os._exit(0)
