"""An output file written chunk by chunk, so that a crash keeps the finished work and a rerun
picks up where it stopped.

Translating a large file takes hours; written at the end only, a crash, a Ctrl-C or a lost
node would lose all of it.  Lines go to `OUTPUT.partial` instead, appended and fsynced after
every chunk, and `OUTPUT.partial.json` records how many input lines and bytes are done, a
digest of those input lines (as the command reads them, without their line ends: the same
lines with other line ends continue the same run) and a fingerprint of the work (the checkpoint
and the settings that change the output).  When all is done the partial file is renamed over
OUTPUT, so OUTPUT itself only ever appears complete.  A rerun with `resume` checks the
fingerprint, drops any bytes written after the last recorded chunk, checks that the input starts
with the lines already done (`skip_done`: the input may be a stream, read once) and continues
from there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from translate.errors import UsageError
from translate.files import write_atomic


class PartialOutputError(UsageError):
    """A partial output that cannot be continued (or must not be overwritten); says why."""


def partial_paths(path: Path) -> tuple[Path, Path]:
    """Where the unfinished output of `path` and its state are kept."""
    return path.with_name(path.name + ".partial"), path.with_name(path.name + ".partial.json")


class PartialOutput:
    """`append` chunks of output lines, then `finish`; `lines_done` says where to start, and
    `skip_done` reads past those input lines, checking them."""

    def __init__(self, path: str | Path, fingerprint: dict, resume: bool) -> None:
        self.path = Path(path)
        self.partial, self.state = partial_paths(self.path)
        self.fingerprint = fingerprint
        self.lines_done, self.bytes_done = 0, 0
        self._input = hashlib.sha256()  # of the input lines done, as UTF-8 lines
        self._saved_input_digest = self._input.hexdigest()
        if self.partial.exists() or self.state.exists():
            saved = self._saved_state()
            if not resume:
                raise PartialOutputError(
                    f"{self.partial} holds the translations of {saved['lines_done']:,} input lines from an "
                    "earlier run that did not finish: add --resume to continue it, or delete it and "
                    f"{self.state.name} to start again"
                )
            changed = sorted(
                key
                for key in fingerprint.keys() | saved["fingerprint"].keys()
                if fingerprint.get(key) != saved["fingerprint"].get(key)
            )
            if changed:
                raise PartialOutputError(
                    f"{self.partial} was written for another {', '.join(changed)} than this run's: "
                    "rerun with the same checkpoint and settings, or delete it and "
                    f"{self.state.name} to start again"
                )
            self.lines_done, self.bytes_done = saved["lines_done"], saved["bytes"]
            self._saved_input_digest = saved["input_digest"]
            with open(self.partial, "r+b") as handle:  # bytes after the last recorded chunk
                handle.truncate(self.bytes_done)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.partial.write_bytes(b"")
            self._save_state()

    def _saved_state(self) -> dict:
        try:
            saved = json.loads(self.state.read_text(encoding="utf-8"))
            size = self.partial.stat().st_size
            fields = (
                saved["fingerprint"],
                saved["lines_done"],
                saved["bytes"],
                saved["input_digest"],
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise PartialOutputError(
                f"{self.partial} and {self.state.name} do not describe an unfinished run ({error}); "
                "delete them to start again"
            ) from None
        if not isinstance(fields[0], dict) or size < fields[2]:
            raise PartialOutputError(
                f"{self.partial} is shorter than {self.state.name} records ({size:,} < {fields[2]:,} "
                "bytes): delete both to start again"
            )
        return saved

    def _save_state(self) -> None:
        state = {
            "fingerprint": self.fingerprint,
            "lines_done": self.lines_done,
            "bytes": self.bytes_done,
            "input_digest": self._input.hexdigest(),
        }
        write_atomic(self.state, json.dumps(state, indent=1).encode("utf-8"))

    def _hash(self, input_lines: list[str]) -> None:
        for line in input_lines:
            self._input.update(line.encode("utf-8") + b"\n")

    def skip_done(self, lines: Iterator[str]) -> None:
        """Read the `lines_done` input lines already translated off `lines`, and refuse to go
        on if they are not the lines the partial output was written for."""
        done = list(islice(lines, self.lines_done))
        self._hash(done)
        if len(done) < self.lines_done or self._input.hexdigest() != self._saved_input_digest:
            found = (
                f"has only {len(done):,} lines"
                if len(done) < self.lines_done
                else "differs in them"
            )
            raise PartialOutputError(
                f"{self.partial} holds the translations of the first {self.lines_done:,} input lines "
                f"of another input (this input {found}): rerun with the same input, or delete it and "
                f"{self.state.name} to start again"
            )

    def append(self, lines: list[str], input_lines: list[str]) -> None:
        """Add the output `lines` of the next input lines, `input_lines`, durably."""
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        with open(self.partial, "ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        self._hash(input_lines)
        self.lines_done += len(input_lines)
        self.bytes_done += len(data)
        self._save_state()

    def finish(self) -> None:
        """Rename the complete output into place and forget the run's state."""
        os.replace(self.partial, self.path)
        self.state.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove the partial output and its state (for a run stopped before any chunk)."""
        self.partial.unlink(missing_ok=True)
        self.state.unlink(missing_ok=True)

    def read(self) -> list[str]:
        """The output lines written so far (all of them after `finish`)."""
        source = self.path if not self.partial.exists() else self.partial
        return source.read_text(encoding="utf-8").split("\n")[:-1]
