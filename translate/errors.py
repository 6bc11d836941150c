"""The errors a command reports in one line, without a traceback: input the user can fix."""

from __future__ import annotations


class UsageError(ValueError):
    """A bad file, flag or setting; the message names it (file and line, or the flag) and says
    what to do. Commands print it as `PROG: error: MESSAGE` and exit with status 2."""
