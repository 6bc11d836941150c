"""What every mode shares: where things are, the machine, day and commit a figure was measured on,
the bundled test split and a checkpoint loaded as translate-cli loads it, timing in interleaved
rounds and best-of, and one writer for the Markdown tables and the JSON figures.

Nothing here imports torch at module level: the tool parses its arguments first."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "scripts" / "bench.py"
DEFAULT_CHECKPOINT = "runs/default/checkpoints/last.ckpt"


def tool_command(mode: str, *args: str) -> list[str]:
    """This tool again, in a process of its own (a measurement that needs a fresh process)."""
    return [sys.executable, str(TOOL), mode, *args]


@dataclass(frozen=True)
class Environment:
    """Where, when and by what a figure was measured: what a docs table's caption names."""

    date: str
    machine: str
    cpus: int
    torch: str
    commit: str
    command: str

    def caption(self) -> str:
        return (
            f"{self.date}, {self.machine}, {self.cpus} CPUs, torch {self.torch}, "
            f"commit {self.commit}: `{self.command}`"
        )


def cpu_name() -> str:
    """The CPU's model name as the kernel gives it, else what Python knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit() -> str:
    """The checkout's commit, `+changes` where its tracked files differ from it."""

    def git(*args: str) -> str:
        command = ["git", "-C", str(REPO), *args]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if changed else "")


def environment(device: str = "cpu") -> Environment:
    import torch

    return Environment(
        date=datetime.date.today().isoformat(),
        machine=torch.cuda.get_device_name() if device == "cuda" else cpu_name(),
        cpus=os.cpu_count() or 0,
        torch=torch.__version__,
        commit=commit(),
        command=shlex.join(["scripts/bench.py", *sys.argv[1:]]),
    )


def test_split(limit: int | None = None, split: str = "test") -> tuple[list[str], list[str]]:
    """The bundled corpus's `split` (English sources, German references), its first `limit` lines."""
    from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths

    sources, references = split_paths(BUNDLED_CORPUS, split, "en", "de")
    return read_lines(sources)[:limit], read_lines(references)[:limit]


def decoding_model(checkpoint: str, device: str = "cpu", threads: int | None = None, **load):
    """`checkpoint` loaded as translate-cli loads it (`load_model`'s `load` settings), in a process
    set up as translate-cli's: `threads` torch threads, freed memory kept on the CPU."""
    import torch

    from translate.decode.device import prepare_decoding
    from translate.decode.loaded_model import load_model

    if threads:
        torch.set_num_threads(threads)
    prepare_decoding(device)
    return load_model(checkpoint, device, **load)


def synchronizer(device: str) -> Callable[[], None]:
    """What makes the host wait for `device`'s queued work (nothing on the CPU)."""
    if device == "cuda":
        import torch

        return torch.cuda.synchronize
    return lambda: None


@dataclass
class Rounds:
    """Every timed run of each case, in order: its seconds and what it returned."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    outputs: dict[str, list] = field(default_factory=dict)

    def best(self, name: str) -> float:
        return min(self.seconds[name])

    def last(self, name: str):
        return self.outputs[name][-1]


def interleaved(
    cases: dict[str, Callable[[], object]],
    rounds: int,
    sync: Callable[[], None] = lambda: None,
    rotate: bool = False,
    after_round: Callable[[int, Rounds], None] | None = None,
) -> Rounds:
    """Each case run once a round, one after another (their order rotated every round with
    `rotate`), so that a slow spell of a shared machine hits every case alike; `sync` before
    and after each run, so that a device's queued work is timed with the run that queued it."""
    names = list(cases)
    timed = Rounds({name: [] for name in names}, {name: [] for name in names})
    for index in range(rounds):
        shift = index % len(names) if rotate else 0
        for name in names[shift:] + names[:shift]:
            sync()
            started = time.perf_counter()
            output = cases[name]()
            sync()
            timed.seconds[name].append(time.perf_counter() - started)
            timed.outputs[name].append(output)
        if after_round:
            after_round(index, timed)
    return timed


def best_of(repeats: int, run: Callable[[], object], warm: bool = True) -> float:
    """The fewest seconds of `repeats` runs of `run`, after an untimed one with `warm`."""
    if warm:
        run()
    return min(interleaved({"run": run}, repeats).seconds["run"])


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> str:
    """A Markdown table, each cell as given; `align` a letter a column (`l` left, `r` right),
    by default the first column left and the others, figures, right."""
    align = align or "l" + "r" * (len(headers) - 1)
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if side == "r" else "---" for side in align) + "|",
    ]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: Path | str, data: object) -> None:
    from translate.files import write_atomic

    write_atomic(Path(path), (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def publish(env: Environment, text: str, json_path: Path | str | None = None, **figures) -> None:
    """A mode's result: on stdout its caption (the environment) and `text` (its tables); with
    `json_path`, the `figures` there beside the environment."""
    print(f"{env.caption()}\n\n{text}", flush=True)
    if json_path:
        write_json(json_path, {"environment": asdict(env), **figures})


def say(*parts: object) -> None:
    """Progress on stderr, at once."""
    print(*parts, file=sys.stderr, flush=True)
