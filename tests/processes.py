"""The processes of this machine as /proc shows them, for tests of what a process leaves running."""

from __future__ import annotations

from pathlib import Path


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
