"""Processes: those of this machine as /proc shows them, for tests of what a process leaves
running, the translate-serve servers tests start on loopback, and what a fresh Python imports."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from translate.serve.launch import free_loopback_port, serve_command, wait_until_ready

# What inference must never import (the floors' contract: inference never imports training).
TRAINING_STACK = ("lightning", "torchmetrics", "pytorch_lightning")


def imported_after(code: str, packages: Iterable[str]) -> tuple[list[str], list[str]]:
    """`code` run by a fresh Python: the lines it printed, and which of `packages` (top-level
    names) it left imported."""
    probe = (
        f"{code}\nimport sys as _sys\n"
        f"print(sorted({{n.split('.')[0] for n in _sys.modules}} & {set(packages)!r}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    *printed, last = result.stdout.strip().splitlines()
    return printed, ast.literal_eval(last)


def process_table() -> dict[int, tuple[int, str, bytes]]:
    """Every process: its parent, its state and its command line, from /proc."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            table[int(stat.parent.name)] = (
                int(fields[1]),
                fields[0],
                (stat.parent / "cmdline").read_bytes(),
            )
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return table


def descendants(pid: int) -> dict[int, bytes]:
    """The processes `pid` started, and theirs, with their command lines."""
    table, found, frontier = process_table(), {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, _, command) in table.items():
            if ppid == parent and child not in found:
                found[child] = command
                frontier.append(child)
    return found


def running(pids) -> list[int]:
    """Those of `pids` still running (a zombie has exited: only its entry waits to be reaped)."""
    table = process_table()
    return [pid for pid in pids if pid in table and table[pid][1] != "Z"]


def start_server(
    checkpoint_path: Path, *flags: str, env: dict | None = None
) -> tuple[subprocess.Popen, str]:
    """translate-serve on a free loopback port, returned once /ready answers (at most 30 s)."""
    port = free_loopback_port()
    server = subprocess.Popen(
        serve_command(checkpoint_path, port, *flags),
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    failure = wait_until_ready(server, f"{base}/ready", 30)
    if failure:
        server.kill()
        pytest.fail(f"translate-serve {failure}: {server.stderr.read()}")
    return server, base


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.kill()
        server.wait()


def served_metric(base: str, name: str, headers: dict | None = None) -> float:
    """The value of sample `name` on a server's /metrics (0 where it has none yet)."""
    import httpx

    text = httpx.get(f"{base}/metrics", headers=headers or {}, timeout=10).text
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[-1])
    return 0.0


def wait_until(condition, what: str, polls: int = 1200, interval: float = 0.05) -> None:
    """Return once `condition()` holds, checked every `interval` seconds; fail the test naming
    `what` after `polls` checks (an event another process makes happen)."""
    import time

    for _ in range(polls):
        if condition():
            return
        time.sleep(interval)
    pytest.fail(f"{what}: not seen within {polls * interval:g} s")
