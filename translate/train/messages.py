"""What training tells a person (its run directory, model, data, step, progress) as log records
of the `translate.train` logger: from global rank 0, but for the training data's line, which
every rank logs.

The library only logs, and says nothing where no one asked: the front end that runs the training
(translate-train, `lightning_cli.run_cli`) shows the lines on stderr under its own name. Under
`strategy: ddp` every process runs that command, so every process shows them; a process that
`ddp_spawn` starts does not run it and stays silent.
"""

from __future__ import annotations

import logging
import sys

LOGGER_NAME = "translate.train"  # the parent of every training module's logging.getLogger(__name__)


class PrefixedStderr(logging.Handler):
    """Each record as `PROG: message`, on `sys.stderr` as it is when the line is written (so a
    stream replaced after the handler was added, as a test's capture does, still gets it)."""

    def __init__(self, prog: str) -> None:
        super().__init__(logging.INFO)
        self.prog = prog

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"{self.prog}: {record.getMessage()}\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def show_on_stderr(prog: str) -> None:
    """Training's lines on stderr as `PROG: line`: one handler, replacing an earlier one, so a
    process that runs the training twice still writes each line once."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # a root handler set up by the caller would print every line twice
    for handler in [h for h in logger.handlers if isinstance(h, PrefixedStderr)]:
        logger.removeHandler(handler)
    logger.addHandler(PrefixedStderr(prog))
