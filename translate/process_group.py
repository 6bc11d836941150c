"""Commands that start processes of their own, run so that none outlives them: each in a process
group of its own, which ends whole on a timeout, a failure, an interruption, or the death of the
process that started it.

A command's group cannot end with its starter by itself: a starter killed outright (SIGKILL, the
out-of-memory killer) runs no clean-up, and a group in a session of its own gets no signal from
a terminal. So `start_group` runs each command under a keeper, this module run as a program
(standard library only, so it starts in milliseconds): the keeper stays in its starter's group,
starts the command in a new session (a group the command leads), and ends that whole group,
SIGTERM then SIGKILL, when it is told to (SIGTERM, SIGINT, SIGHUP: `end_group`), when its starter
is gone (it watches its parent), or when the command has exited (what it left behind). It exits
as the command did. POSIX only; elsewhere the command runs alone, in a process group of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 10.0  # between a group's SIGTERM and its SIGKILL
_POLL_S = 0.1


def start_group(
    argv: list[str] | tuple[str, ...], grace_s: float = GRACE_S, **popen
) -> subprocess.Popen:
    """`argv` under a keeper in a process group of its own (the module's docstring), with
    `popen`'s settings (cwd, env, stdin, stdout, stderr, text, ...). The Popen returned is the
    keeper's: its exit status is the command's; `end_group` ends it and the whole group."""
    if os.name != "posix":
        flags = popen.pop("creationflags", 0) | subprocess.CREATE_NEW_PROCESS_GROUP
        return subprocess.Popen(list(argv), creationflags=flags, **popen)
    keeper = [sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(grace_s), "--"]
    return subprocess.Popen([*keeper, *argv], **popen)


def end_group(process: subprocess.Popen, wait_s: float = GRACE_S + 5) -> None:
    """A command started by `start_group`, and every process of its group: its keeper is told to
    end them (SIGTERM, then SIGKILL after the grace), and killed itself after `wait_s`."""
    if process.poll() is None:
        try:
            process.terminate()
            process.wait(wait_s)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


def run_group(
    argv: list[str] | tuple[str, ...], timeout: float | None = None, **popen
) -> subprocess.CompletedProcess:
    """`subprocess.run` for a command that starts others: run by `start_group`, its whole group
    ended on the timeout (`subprocess.TimeoutExpired`, as `run` raises it), on an exception or on
    an interruption (KeyboardInterrupt) while it runs."""
    if popen.pop("capture_output", False):
        popen["stdout"] = popen["stderr"] = subprocess.PIPE
    process = start_group(argv, **popen)
    try:
        out, err = process.communicate(timeout=timeout)
    except BaseException:
        end_group(process)
        raise
    return subprocess.CompletedProcess(list(argv), process.returncode, out, err)


# ---------------------------------------------------------------------------------------------
# The keeper


def _end(group: int, command: subprocess.Popen, grace_s: float) -> None:
    """Every process of `group`: SIGTERM, then SIGKILL for those left after `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        deadline = time.monotonic() + wait_s
        try:
            os.killpg(group, sig)
            while time.monotonic() < deadline:
                command.poll()  # reaped, the command no longer holds the group
                os.killpg(group, 0)  # ProcessLookupError once none is left
                time.sleep(_POLL_S / 2)
        except (ProcessLookupError, PermissionError):
            return


def _keep(grace_s: float, argv: list[str]) -> int:
    parent = os.getppid()
    told: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: told.append(number))
    try:
        command = subprocess.Popen(argv, start_new_session=True)
    except OSError as error:
        print(f"error: {argv[0]}: {error.strerror or error}", file=sys.stderr)
        return 127
    while command.poll() is None and not told and os.getppid() == parent:
        time.sleep(_POLL_S)
    _end(command.pid, command, grace_s)
    code = command.wait()
    if told:
        return 128 + told[0]
    if code < 0:  # killed by a signal: so is the keeper, for its starter to see
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(_keep(float(sys.argv[1]), sys.argv[3:]))
