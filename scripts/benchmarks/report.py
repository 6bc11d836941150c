"""`bench.py report`: the GPU figures in one command, every measurement a step under its own time
cap, written to runs/gpu-report/ as report.json, report.md and plots; `--docs` then fills the
docs' GPU sections from a report.json.

    make install TORCH=torch && make gpu-report        # on a CUDA machine
    make gpu-report DRY_RUN=1                           # every step at toy size on the CPU
    .venv/bin/python scripts/bench.py report --steps converge,decode-bf16   # only these
    .venv/bin/python scripts/bench.py report --docs     # the docs' GPU sections from report.json

Each step runs its commands (this tool's other modes, translate-train, translate-eval) in a
process group of its own with what is left of its cap and of the whole report's; one that fails
or runs out of time is recorded as such, with its last output, and the next runs. A group ends
whole with its step, and with the report however it ends (killed outright too:
`translate.process_group`), so no process of a step outlives it. report.json is rewritten after
every step, and a step already recorded as done is not run again unless `--again`, so that one
report can be made over several short leases of a GPU; it names every command line that filled
it, and each step its day and commit.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from benchmarks.harness import REPO, TOOL, commit, say
from benchmarks.report_render import (
    converge_run,
    fill_docs,
    render_markdown,
    render_plots,
    size_label,
)
from translate.files import write_atomic
from translate.process_group import end_group, start_group
from translate.serve.launch import free_loopback_port

DONE = "ok"


@dataclass(frozen=True)
class Scale:
    """How big each step is: a real GPU run, or the dry run's toy sizes on the CPU."""

    device: str
    train_configs: tuple[str, ...]
    batch_tokens: tuple[int, ...]
    train_timing: tuple[str, ...]  # the train mode's rounds, steps, warm-up and batches
    shaped_rows: str  # the train-shaped-* steps' rows (without CUDA graphs, two are one)
    loss_chunk: int
    precisions: tuple[str, ...]
    decode_limit: tuple[str, ...]  # the translate mode's sentence limit, repeats, batch size
    converge: tuple[str, ...]  # translate-train settings over the converge config
    # the settings a second converge run adds, under the same cap: fixed shapes, compiled step
    fast_path: tuple[str, ...]
    checkpoint: str  # which checkpoint of the converge run decoding and serving use
    serve: tuple[str, ...]
    ddp: tuple[str, ...]  # translate-train settings of the DDP runs
    step_cap_s: float
    total_cap_s: float
    decode_skip: tuple[str, ...] = ()  # the translate mode's systems left out


GPU = Scale(
    device="cuda",
    train_configs=("base", "big"),
    batch_tokens=(32768, 8192, 16384, 65536),  # 32k first: the size the configs' figures use
    train_timing=("--rounds", "5", "--steps", "16", "--warmup", "3", "--batches", "16"),
    shaped_rows="ours,ours-shaped,ours-shaped-compiled,ours-captured",
    loss_chunk=8192,
    precisions=("bf16-mixed", "32-true", "16-mixed"),
    decode_limit=("--repeats", "2", "--batch-tokens", "16384"),
    converge=("--config", "configs/converge.yaml", "--trainer.max_time", "00:00:06:00"),
    fast_path=("--data.batch_shapes", "fixed", "--model.step", "compiled"),
    checkpoint="best.ckpt",
    serve=("--clients", "32,128", "--seconds", "30"),
    ddp=("--config", "configs/base.yaml", "--trainer.max_steps", "300")
    + ("--trainer.log_every_n_steps", "50"),
    step_cap_s=9 * 60,
    total_cap_s=40 * 60,
)

DRY = Scale(
    device="cpu",
    train_configs=("tiny",),
    batch_tokens=(512, 1024),
    train_timing=("--rounds", "1", "--steps", "2", "--warmup", "1", "--batches", "2"),
    shaped_rows="ours,ours-shaped,ours-captured",
    loss_chunk=128,
    precisions=("bf16-mixed", "32-true", "16-mixed"),
    decode_limit=("--limit", "24", "--repeats", "1"),
    decode_skip=("ours-unpacked", "ours-int8", "ours-int8-unfused", "ctranslate2-int8"),
    converge=(
        *("--config", "configs/tiny.yaml", "--trainer.max_steps", "8"),
        *("--trainer.val_check_interval", "4", "--trainer.limit_val_batches", "1"),
        *("--trainer.log_every_n_steps", "2", "--tune_search", "false"),
        # Eight updates do not learn to stop: outputs capped at 8 tokens keep the test split's
        # two translations short.
        *("--model.max_len_a", "0", "--model.max_len_b", "8"),
    ),
    # `auto` keeps the CPU's eager step: what is tested here is the run's path and its figures
    fast_path=("--data.batch_shapes", "fixed", "--model.step", "auto"),
    checkpoint="last.ckpt",
    serve=("--clients", "2,4", "--seconds", "1", "--limit", "64"),
    ddp=(
        *("--config", "configs/tiny.yaml", "--trainer.max_steps", "4"),
        *("--trainer.log_every_n_steps", "1", "--trainer.accelerator", "cpu"),
        *("--trainer.precision", "32-true"),
    ),
    step_cap_s=3 * 60,
    total_cap_s=15 * 60,
)


@dataclass(frozen=True)
class Command:
    """One process of a step (or `ranks` processes started as one DDP group on this machine)."""

    argv: tuple[str, ...]
    stdout: str | None = None  # file in the step's directory for its standard output
    ranks: int = 1


@dataclass
class Outcome:
    status: str  # ok, failed, timed out, skipped, not run
    section: str = ""
    seconds: float = 0.0
    commands: list[str] = field(default_factory=list)
    message: str = ""
    result: dict = field(default_factory=dict)
    date: str = ""  # the day the step ran (a report can be made over several leases)
    commit: str = ""  # the checkout it ran from


@dataclass(frozen=True)
class Context:
    """What a step needs to know to plan its commands: where things go and what ran before."""

    out: Path
    cache: Path
    scale: Scale
    outcomes: dict[str, Outcome]

    def directory(self, step: str) -> Path:
        return self.out / "steps" / step

    def environment(self) -> dict:
        outcome = self.outcomes.get("environment")
        return outcome.result if outcome and outcome.status == DONE else {}

    def cpu_emulates(self, precision: str) -> bool:
        """Whether a dry run's `precision` would be emulated here: bf16-mixed on a CPU without
        bfloat16 instructions (an AVX2-only x86), where translate-train chooses 32-true."""
        return (
            self.scale.device == "cpu"
            and precision == "bf16-mixed"
            and self.environment().get("cpu_precision", "32-true") != precision
        )

    def training_precision(self) -> str:
        """The train mode's precision: bf16 on a GPU, on a CPU what translate-train chooses."""
        return "fp32" if self.cpu_emulates("bf16-mixed") else "bf16"

    def checkpoint(self) -> Path:
        return self.directory("converge") / "run" / "checkpoints" / self.scale.checkpoint

    def data(self) -> tuple[str, ...]:
        return ("--data.cache_dir", str(self.cache))

    def converge_run(self) -> dict:
        """Which converge run made the checkpoint (report_render.converge_run); {} before one."""
        outcome = self.outcomes.get("converge")
        return converge_run(outcome.result) if outcome and outcome.status == DONE else {}


@dataclass(frozen=True)
class Step:
    name: str
    section: str  # environment, training, converge, decoding, ctranslate2, serving, ddp
    plan: Callable[[Context], list[Command]]
    read: Callable[[Context, Path], dict]
    needs: Callable[[Context], str] = lambda context: ""  # why it cannot run now; "" if it can
    uses_checkpoint: bool = False  # measures the converge run's checkpoint (its result names it)


def mode(name: str, *args: str) -> tuple[str, ...]:
    return (sys.executable, str(TOOL), name, *args)


def figures(path: Path) -> dict:
    """A mode's JSON figures, without the environment the report records once."""
    found = json.loads(path.read_text())
    found.pop("environment", None)
    return found


# ---------------------------------------------------------------------------------------------
# The steps


def probe_environment() -> dict:
    """Versions and the device, printed as JSON by `--probe-environment` (in a process of its own,
    so that the report's process never holds a GPU context)."""
    import importlib.metadata
    import platform

    import torch

    from translate.train.precision import BF16_CPU_FLAGS, choose_precision, cpu_flags

    cpu_precision, why = choose_precision("cpu")
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "cpu_count": os.cpu_count(),
        # what translate-train chooses on this CPU, which the dry run's steps run in
        "cpu_precision": cpu_precision,
        "cpu_precision_why": why,
        "cpu_flags": sorted(cpu_flags() & {"avx2", "avx512f", *BF16_CPU_FLAGS}),
        "packages": {},
    }
    names = ("lightning", "transformers", "ctranslate2", "sacrebleu", "sentencepiece", "triton")
    for package in names:
        try:
            info["packages"][package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            info["packages"][package] = None
    try:
        query = [
            "nvidia-smi",
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ]
        smi = subprocess.run(query, capture_output=True, text=True, timeout=30)
        info["nvidia_smi"] = smi.stdout.strip().splitlines()
        info["driver"] = info["nvidia_smi"][0].split(",")[1].strip() if info["nvidia_smi"] else None
    except (OSError, subprocess.TimeoutExpired):
        info["nvidia_smi"], info["driver"] = [], None
    return info


def environment_step() -> Step:
    return Step(
        "environment",
        "environment",
        plan=lambda context: [Command(mode("report", "--probe-environment"), "environment.json")],
        read=lambda context, directory: json.loads((directory / "environment.json").read_text()),
    )


def needs_device(context: Context) -> str:
    if context.scale.device == "cuda" and not context.environment().get("gpus"):
        return "torch sees no CUDA device (install the CUDA build: make install TORCH=torch)"
    return ""


def training_step(config: str, tokens: int, shaped: bool = False) -> Step:
    """Training throughput and MFU of ours against transformers' Marian on the same batches, each
    speed switch a row of its own; `shaped`: ours on the fixed batch shapes, eager and with the
    compiled step (with and without CUDA graphs on a GPU), beside ours as configured (a step of
    its own, so that a compile that takes the cap leaves the other rows measured)."""
    name = f"train-{'shaped-' if shaped else ''}{config}-{size_label(tokens)}"

    def plan(context: Context) -> list[Command]:
        scale = context.scale
        if shaped:
            switches = ("--fixed-shapes", "--rows", scale.shaped_rows)
        else:
            switches = ("--compile", "--loss-chunk", str(scale.loss_chunk))
            switches += ("--math-attention", "--unfused-adam")
        argv = mode(
            "train", "--device", scale.device, "--config", f"configs/{config}.yaml",
            "--max-tokens", str(tokens), "--precisions", context.training_precision(),
            *scale.train_timing, "--no-memory", *switches, "--data", f"cache_dir={context.cache}",
            "--json", str(context.directory(name) / "train.json"),
        )  # fmt: skip
        return [Command(argv)]

    def read(context: Context, directory: Path) -> dict:
        summary = figures(directory / "train.json")
        return {**summary, "config": config, "max_tokens": tokens, "shaped": shaped}

    return Step(name, "training", plan, read, needs_device)


def metric_rows(run_dir: Path) -> list[dict]:
    """The CSV logger's rows of a translate-train run (several versions: the last)."""
    import csv

    files = sorted(
        (run_dir / "logs").glob("version_*/metrics.csv"),
        key=lambda p: int(p.parent.name.split("_")[1]),
    )
    if not files:
        raise FileNotFoundError(f"{run_dir}/logs: no metrics.csv")
    with files[-1].open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def updates(rows: list[dict]) -> int:
    """Updates the run made (the logger's steps count from 0)."""
    return max(int(row["step"]) for row in rows) + 1


def series(rows: list[dict], name: str) -> list[tuple[int, float]]:
    """(updates, value) of a logged metric: the logger's step counts the updates before this one."""
    return [(int(r["step"]) + 1, float(r[name])) for r in rows if r.get(name) not in (None, "")]


FAST_PATH = "converge-fixed-compiled"  # the converge run with the scale's fast_path settings


def converge_step(name: str = "converge") -> Step:
    """make train's model on the GPU with the converge config, capped; its dev-BLEU curve and
    test scores. `FAST_PATH`: the same run with fixed batch shapes and the compiled step under
    the same cap (its checkpoint measures nothing else)."""

    def settings(context: Context) -> tuple[str, ...]:
        return context.scale.fast_path if name == FAST_PATH else ()

    def plan(context: Context) -> list[Command]:
        run_dir = context.directory(name) / "run"
        train = (sys.executable, "-m", "translate.cli.train", "fit", *context.scale.converge)
        evaluate = (sys.executable, "-m", "translate.cli.evaluate", "--checkpoint")
        evaluate += (str(run_dir / "checkpoints" / context.scale.checkpoint), "--json")
        evaluate += ("--device", context.scale.device)
        return [
            Command((*train, *settings(context), "--run_dir", str(run_dir), *context.data())),
            Command(evaluate, "test.json"),
            Command((*evaluate, "--beam", "1"), "test-greedy.json"),
        ]

    def read(context: Context, directory: Path) -> dict:
        rows = metric_rows(directory / "run")
        rates = [rate for _, rate in series(rows, "train_tgt_tokens_per_sec")]
        return {
            "command": " ".join((*context.scale.converge, *settings(context))),
            "fast_path": " ".join(settings(context)),
            "dev_bleu": series(rows, "val_bleu"),
            "dev_ppl": series(rows, "val_ppl"),
            "updates": updates(rows),
            "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "tokens_per_s": statistics.median(rates) if rates else None,
            "test": json.loads((directory / "test.json").read_text()),
            "test_greedy": json.loads((directory / "test-greedy.json").read_text()),
        }

    return Step(name, "converge", plan, read, needs_device)


def needs_checkpoint(context: Context) -> str:
    if needs_device(context) or context.checkpoint().is_file():
        return needs_device(context)
    return f"no checkpoint at {context.checkpoint()} (the converge step makes it)"


def ctranslate2_step() -> Step:
    """Whether CTranslate2 translates on this device: export the checkpoint, translate one line."""

    def plan(context: Context) -> list[Command]:
        probe = ("--probe-ctranslate2", str(context.checkpoint()), context.scale.device)
        return [Command(mode("report", *probe), "probe.json")]

    def read(context: Context, directory: Path) -> dict:
        return json.loads((directory / "probe.json").read_text())

    return Step("ctranslate2", "ctranslate2", plan, read, needs_checkpoint, uses_checkpoint=True)


def probe_ctranslate2(checkpoint: str, device: str) -> dict:
    import tempfile

    try:
        import ctranslate2

        from translate.decode.ctranslate2_model import COMPUTE_TYPES
        from translate.export.ctranslate2 import export_ctranslate2

        with tempfile.TemporaryDirectory() as tmp:
            directory = export_ctranslate2(Path(checkpoint), Path(tmp) / "ct2")
            ct2 = ctranslate2.Translator(str(directory), device=device)
            ct2.translate_batch([["▁a"]], max_decoding_length=4)
        offered = ctranslate2.get_supported_compute_types(device)
        return {
            "usable": True,
            "version": ctranslate2.__version__,
            "reason": "",
            "compute_types": sorted(offered),
            "precisions": [p for p, compute in COMPUTE_TYPES.items() if compute in offered],
        }
    except Exception as error:  # whatever stops it is the finding: an import, a library, a driver
        return {"usable": False, "reason": f"{type(error).__name__}: {error}".splitlines()[0][:300]}


PRECISION_NAMES = {"32-true": "fp32", "bf16-mixed": "bf16", "16-mixed": "fp16"}


def ctranslate2_probe(context: Context) -> dict:
    """What the ctranslate2 step found: the compute types CTranslate2 offers on this device and
    the precisions they serve; {} where it did not translate."""
    outcome = context.outcomes.get("ctranslate2")
    usable = outcome and outcome.status == DONE and outcome.result.get("usable")
    return outcome.result if usable else {}


def decoding_step(precision: str) -> Step:
    """translate-cli's search, greedy and beam 5, against transformers and CTranslate2 where it
    translates."""
    name = "decode-" + PRECISION_NAMES[precision]

    def plan(context: Context) -> list[Command]:
        probe = ctranslate2_probe(context)
        skip = list(context.scale.decode_skip)
        if precision not in probe.get("precisions", []):
            skip.append("ctranslate2")
        if "int8" not in probe.get("compute_types", []):
            skip.append("ctranslate2-int8")
        argv = mode(
            "translate", "--checkpoint", str(context.checkpoint()), "--device",
            context.scale.device, "--precision", precision, *context.scale.decode_limit,
            "--json", str(context.directory(name) / "decode.json"),
        )  # fmt: skip
        return [Command(argv + (("--skip", ",".join(dict.fromkeys(skip))) if skip else ()))]

    def read(context: Context, directory: Path) -> dict:
        return {
            "precision": precision,
            "ctranslate2": precision in ctranslate2_probe(context).get("precisions", []),
            "rows": figures(directory / "decode.json")["rows"],
        }

    def needs(context: Context) -> str:
        if precision == "16-mixed" and context.scale.device != "cuda":
            return "16-mixed (float16 autocast) needs a CUDA device"
        if context.cpu_emulates(precision):
            return f"{precision} would be emulated: this CPU has no bfloat16 instructions"
        return needs_checkpoint(context)

    return Step(name, "decoding", plan, read, needs, uses_checkpoint=True)


def serving_step() -> Step:
    def plan(context: Context) -> list[Command]:
        argv = mode(
            "serve", "--checkpoint", str(context.checkpoint()), "--device", context.scale.device,
            "--modes", "continuous", "--batch-ceiling", "", *context.scale.serve,
            "--json", str(context.directory("serve") / "serve.json"),
        )  # fmt: skip
        return [Command(argv)]

    def read(context: Context, directory: Path) -> dict:
        return figures(directory / "serve.json")

    return Step("serve", "serving", plan, read, needs_checkpoint, uses_checkpoint=True)


DDP_OVERLAY = {
    "tune_search": False,
    "trainer": {
        "callbacks": [],
        "enable_checkpointing": False,
        "num_sanity_val_steps": 0,
        "val_check_interval": 100000,
        "check_val_every_n_epoch": None,
        "enable_progress_bar": False,
        "logger": {
            "class_path": "lightning.pytorch.loggers.CSVLogger",
            "init_args": {"save_dir": "{run_dir}", "name": "logs"},
        },
    },
}


def ddp_step() -> Step:
    """DDP over every visible GPU against one (scaling efficiency); with one GPU, or on the CPU,
    two processes on the one device (gloo), started as a launcher on two nodes would start them."""

    def gpus(context: Context) -> int:
        return len(context.environment().get("gpus", [])) if context.scale.device == "cuda" else 0

    def plan(context: Context) -> list[Command]:
        directory = context.directory("ddp")
        overlay = directory / "overlay.yaml"
        overlay.write_text(json.dumps(DDP_OVERLAY), encoding="utf-8")  # JSON is YAML
        train = (sys.executable, "-m", "translate.cli.train", "fit", *context.scale.ddp)
        train += ("--config", str(overlay), *context.data())
        one = ("--run_dir", str(directory / "one"), "--trainer.devices", "1")
        one += ("--trainer.strategy", "auto")
        every = ("--run_dir", str(directory / "all"))
        if gpus(context) > 1:
            every += ("--trainer.devices", str(gpus(context)), "--trainer.strategy", "ddp")
            return [Command((*train, *one)), Command((*train, *every))]
        every += ("--trainer.devices", "1", "--trainer.num_nodes", "2", "--trainer.strategy")
        every += ("DDPStrategy", "--trainer.strategy.process_group_backend", "gloo")
        return [Command((*train, *one)), Command((*train, *every), ranks=2)]

    def read(context: Context, directory: Path) -> dict:
        result = {"gpus": gpus(context)}
        for name in ("one", "all"):
            rows = metric_rows(directory / name)
            rates = [rate for _, rate in series(rows, "train_tgt_tokens_per_sec")]
            result[name] = {
                "tokens_per_s": statistics.median(rates[1:] or rates),
                "updates": updates(rows),
                "last_loss": series(rows, "train_loss")[-1][1],
            }
        result["processes"] = processes = max(result["gpus"], 2)
        one = result["one"]["tokens_per_s"]
        result["efficiency"] = result["all"]["tokens_per_s"] / (processes * one)
        return result

    return Step("ddp", "ddp", plan, read, needs_device)


def steps(scale: Scale) -> list[Step]:
    """In the order they run: the figures most wanted first, in case the time runs out."""
    first, *rest = scale.batch_tokens
    configs = scale.train_configs
    return [
        environment_step(),
        *(training_step(config, first, shaped=True) for config in configs),
        *(training_step(config, first) for config in configs),
        converge_step(),
        converge_step(FAST_PATH),
        ctranslate2_step(),
        *(decoding_step(precision) for precision in scale.precisions),
        serving_step(),
        ddp_step(),
        *(training_step(config, tokens) for tokens in rest for config in configs),
        *(training_step(config, tokens, shaped=True) for tokens in rest for config in configs),
    ]


# ---------------------------------------------------------------------------------------------
# Running


def run_command(command: Command, directory: Path, deadline: float) -> tuple[str, str]:
    """(status, message) of one command run to `deadline`; its whole process group is ended
    when the time is up, and every rank's when one rank fails (its peers would wait in vain)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    port = free_loopback_port() if command.ranks > 1 else None
    processes = []
    log = directory / "stderr.log"
    stdout_path = directory / (command.stdout or "stdout.log")
    with log.open("ab") as errors, stdout_path.open("wb" if command.stdout else "ab") as out:
        for rank in range(command.ranks):
            launcher = {
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "WORLD_SIZE": str(command.ranks),
                "NODE_RANK": str(rank),
                "LOCAL_RANK": "0",
            }
            processes.append(
                start_group(
                    command.argv,
                    cwd=REPO,
                    env={**env, **launcher} if command.ranks > 1 else env,
                    stdout=out,
                    stderr=errors,
                    stdin=subprocess.DEVNULL,
                )
            )
        status = DONE
        while any(process.poll() is None for process in processes):
            if any(process.poll() for process in processes):
                break
            if time.monotonic() > deadline:
                status = "timed out"
                break
            time.sleep(0.1)
        for process in processes:
            if process.poll() is None:
                end_group(process)
    codes = [process.returncode for process in processes]
    if status == DONE and any(codes):
        status = "failed"
    if status == DONE:
        return status, ""
    text = log.read_text(encoding="utf-8", errors="replace")
    tail = [line for line in text.splitlines() if line.strip()][-3:]
    # The command itself is in the outcome's commands: the message says what became of it.
    return status, f"exit codes {codes}; its last output: " + " / ".join(tail)[-600:]


def run_step(step: Step, context: Context, deadline: float) -> Outcome:
    reason = step.needs(context)
    if reason:
        return Outcome("skipped", step.section, message=reason)
    directory = context.directory(step.name)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "stderr.log").unlink(missing_ok=True)
    started = time.monotonic()
    commands = step.plan(context)
    shown = [
        shlex.join(c.argv) + (f"  (x{c.ranks} ranks)" if c.ranks > 1 else "") for c in commands
    ]
    outcome = Outcome(DONE, step.section, commands=shown)
    for command in commands:
        outcome.status, outcome.message = run_command(command, directory, deadline)
        if outcome.status != DONE:
            break
    if outcome.status == DONE:
        try:
            outcome.result = step.read(context, directory)
            if step.uses_checkpoint:
                outcome.result["checkpoint"] = context.converge_run()
        except (OSError, ValueError, KeyError, IndexError) as error:
            outcome.status, outcome.message = "failed", f"its figures could not be read: {error}"
    outcome.seconds = time.monotonic() - started
    outcome.date, outcome.commit = datetime.date.today().isoformat(), commit()
    return outcome


def load_report(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise SystemExit(
            f"error: {path}: not a report ({error}); move it away or pass --out elsewhere"
        ) from None


def save(report: dict, out: Path) -> None:
    """report.json, then report.md and the plots from it; a fault in the latter costs no figures
    and stops no step (`--docs` makes them again from report.json)."""
    write_atomic(out / "report.json", (json.dumps(report, indent=2) + "\n").encode("utf-8"))
    try:
        plots = render_plots(report, out)
        write_atomic(out / "report.md", render_markdown(report, plots).encode("utf-8"))
    except Exception as error:  # noqa: BLE001 - report.json holds the figures either way
        say(f"gpu-report: report.md not written ({type(error).__name__}: {error}); report.json is")


def with_converge_minutes(scale: Scale, minutes: float) -> Scale:
    """The scale with the converge run capped at `minutes` of training instead of its own cap."""
    seconds = round(60 * minutes)
    cap = f"00:{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    settings = list(scale.converge)
    if "--trainer.max_time" in settings:
        settings[settings.index("--trainer.max_time") + 1] = cap
    else:
        settings += ["--trainer.max_time", cap]
    return replace(scale, converge=tuple(settings))


def invocations(earlier: str | None) -> str:
    """How the report was made: this run's command line after those of the earlier runs that
    filled the same report (joined by "; "), each named once."""
    command = shlex.join(["scripts/bench.py", *sys.argv[1:]])
    commands = earlier.split("; ") if earlier else []
    return "; ".join(commands if command in commands else [*commands, command])


def run_steps(plan, context: Context, report: dict, chosen: set[str], again: bool, caps) -> None:
    """Run the plan's steps (those `chosen`, or all; those done only `again`), each under the step
    cap and what is left of the total (`caps`, seconds), saving the report after each."""
    step_cap, total = caps
    deadline, outcomes = time.monotonic() + total, context.outcomes
    for step in plan:
        done = step.name in outcomes and outcomes[step.name].status == DONE
        if (chosen and step.name not in chosen) or (done and not again):
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            spent = f"the report's {total / 60:g} minutes were spent; run it again to go on"
            outcomes[step.name] = Outcome("not run", step.section, message=spent)
        else:
            say(f"gpu-report: {step.name} (at most {min(step_cap, left) / 60:.1f} min)")
            outcomes[step.name] = outcome = run_step(
                step, context, time.monotonic() + min(step_cap, left)
            )
            said = f": {outcome.message}" if outcome.message else ""
            say(f"gpu-report: {step.name} {outcome.status} in {outcome.seconds:.0f} s{said}")
        report["steps"] = {s.name: asdict(outcomes[s.name]) for s in plan if s.name in outcomes}
        save(report, context.out)


def run(args) -> int:
    if args.probe_environment:
        print(json.dumps(probe_environment(), indent=2))
        return 0
    if args.probe_ctranslate2:
        print(json.dumps(probe_ctranslate2(*args.probe_ctranslate2)))
        return 0
    default_out = REPO / "runs" / ("gpu-report-dry-run" if args.dry_run else "gpu-report")
    out = (args.out or default_out).resolve()
    if args.docs:
        return fill_docs(args.report or out / "report.json", args.docs_dir, args.allow_dry_run)
    scale = DRY if args.dry_run else GPU
    if args.converge_minutes is not None:
        scale = with_converge_minutes(scale, args.converge_minutes)
    plan = steps(scale)
    names = [step.name for step in plan]
    if args.list:
        print("\n".join(names))
        return 0
    chosen = set(args.steps)
    unknown = sorted(chosen - set(names))
    if unknown:
        raise SystemExit(
            f"error: --steps: unknown {', '.join(unknown)} (choose from {', '.join(names)})"
        )
    report = load_report(out / "report.json")
    if report and report.get("dry_run") != args.dry_run:
        kind = "a dry run" if report.get("dry_run") else "a GPU run"
        raise SystemExit(f"error: {out}/report.json is {kind}'s; pass another --out to keep it")
    out.mkdir(parents=True, exist_ok=True)
    # Steps recorded before steps carried their day ran on the day the report then gave.
    outcomes = {
        name: Outcome(**{"date": report.get("date", ""), **value})
        for name, value in report.get("steps", {}).items()
    }
    report.update(
        dry_run=args.dry_run,
        scale=asdict(scale),
        date=datetime.date.today().isoformat(),
        command=invocations(report.get("command")),
    )
    context = Context(out, (args.cache_dir or out / "cache").resolve(), scale, outcomes)
    caps = (
        60 * (args.step_minutes or scale.step_cap_s / 60),
        60 * (args.minutes or scale.total_cap_s / 60),
    )
    run_steps(plan, context, report, chosen, args.again, caps)
    save(report, out)
    done = sum(outcome.status == DONE for outcome in outcomes.values())
    say(f"gpu-report: {done} of {len(names)} steps done; {out / 'report.md'}")
    return 0
