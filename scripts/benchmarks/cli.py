"""The tool's command line: every mode's arguments, parsed before a mode's module (and torch) is
imported, so that `--help` answers at once; each mode's help is its module's docstring."""

from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import yaml

from benchmarks.harness import DEFAULT_CHECKPOINT, REPO

MODULES = {
    "train": "training",
    "translate": "translating",
    "serve": "serving",
    "startup": "startup",
    "data": "data",
    "report": "report",
}
SUMMARIES = {
    "train": "training speed and MFU against transformers' Marian, memory, a step's profile",
    "translate": "decoding speed: systems, one step, profile",
    "serve": "translate-serve under load, against LibreTranslate; fairness probes",
    "startup": "how long the translating commands take to start",
    "data": "the data path's speed and memory as the corpus grows",
    "report": "the GPU figures in one capped run (make gpu-report), and the docs filled from it",
}
SERVE_MODES = ("continuous", "unbatched", "libretranslate", "pytorch")
PROBES = ("fairness", "cancellation", "event-loop")


def docstring(module: str) -> str:
    """A mode module's docstring, read without importing it."""
    path = Path(__file__).with_name(f"{module}.py")
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def numbers(text: str) -> list[int]:
    """A comma-separated list of integers ('' is none)."""
    try:
        return [int(item) for item in text.split(",") if item]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not comma-separated whole numbers") from None


def words(text: str) -> list[str]:
    return [item for item in text.split(",") if item]


def train_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--config", type=Path, default=REPO / "configs" / "default.yaml")
    add("--device", choices=["cpu", "cuda"], default="cpu")
    add("--precisions", type=words, help="from fp32,bf16 (default: both on cpu, bf16 on cuda)")
    add("--batches", type=int, default=20, help="distinct batches, cycled (default 20)")
    add("--steps", type=int, default=10, help="timed steps a row and round (default 10)")
    add("--rounds", type=int, default=7, help="timing rounds (default 7)")
    add("--warmup", type=int, default=3, help="untimed steps a row first (default 3)")
    add("--threads", type=int, help="torch CPU threads (default: torch's)")
    add("--no-memory", action="store_true", help="skip the per-row memory processes")
    add(
        "--peak-tflops",
        type=float,
        help="the device's peak in the precision (default: measured on the CPU, the data sheet's for known GPUs)",
    )
    add(
        "--fixed-shapes",
        action="store_true",
        help="add ours on fixed batch shapes: eager, with the step compiled without CUDA graphs, and as model.step compiled runs it",
    )
    add(
        "--loss-chunk",
        type=int,
        metavar="ROWS",
        help="add ours with model.loss_chunk ROWS (0: all at once)",
    )
    add("--compile", action="store_true", help="add ours under torch.compile, as model.compile")
    add("--math-attention", action="store_true", help="add ours with attention as plain products")
    add("--unfused-adam", action="store_true", help="add ours stepping torch's plain Adam")
    add(
        "--data",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a data setting over the config's (YAML value), e.g. cache_dir=/tmp/cache; repeatable",
    )
    add("--max-tokens", type=int, help="padded tokens a batch (default: the config's)")
    add(
        "--rows",
        type=words,
        metavar="NAMES",
        help="time only these of the rows chosen, e.g. ours,ours-captured",
    )
    add(
        "--profile",
        metavar="ROW",
        help="instead: profile this row (ours, marian, ours-compiled, ...)",
    )
    add("--top", type=int, default=20, help="with --profile: kernels listed (default 20)")
    add("--json", type=Path, help="also write the figures here")
    add("--memory-worker", nargs=2, metavar=("ROW", "PRECISION"), help=argparse.SUPPRESS)


def translate_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--mode", choices=["systems", "step", "profile"], default="systems")
    add("--checkpoint", default=DEFAULT_CHECKPOINT)
    add("--limit", type=int, help="the first N test sentences (default: all)")
    add("--beams", type=numbers, default=[1, 5], help="(default: 1,5; profile: the first)")
    add("--repeats", type=int, default=3, help="timed runs of each; the best counts (default 3)")
    add("--threads", type=int, default=1, help="CPU threads for every system (default 1)")
    add("--batch-tokens", type=int, help="source tokens a batch (default: translate-cli's)")
    add("--device", choices=["cpu", "cuda"], default="cpu", help="systems: cuda too")
    add(
        "--precision",
        choices=["32-true", "bf16-mixed", "16-mixed"],
        default="32-true",
        help="as translate-cli's; CTranslate2's compute type to match",
    )
    add(
        "--quantize",
        choices=["none", "int8"],
        default="none",
        help="step and profile: ours as translate-cli --quantize (CTranslate2 to match)",
    )
    add("--json", type=Path, help="also write the figures here")
    systems = parser.add_argument_group("systems")
    systems.add_argument("--split", default="test", help="bundled corpus split (default: test)")
    systems.add_argument(
        "--skip",
        default="",
        help="systems not to run: ours-unpacked,ours-int8,ours-int8-unfused,transformers,ctranslate2,ctranslate2-int8,student,student-ctranslate2,student-ctranslate2-int8,student-int8",
    )
    systems.add_argument(
        "--student",
        help="another checkpoint (a distilled student) timed beside --checkpoint: student, "
        "student-ctranslate2, student-ctranslate2-int8, student-int8",
    )
    systems.add_argument(
        "--ct2-in-process",
        action="store_true",
        help="CTranslate2 in this process, beside ours: how two OpenMP runtimes slow each other",
    )
    step = parser.add_argument_group("step")
    step.add_argument(
        "--rows", type=numbers, default=[1, 5, 40, 136], help="rows a step (default: 1,5,40,136)"
    )
    step.add_argument("--source-tokens", type=int, default=40, help="(default 40)")
    step.add_argument(
        "--short", type=int, default=20, help="output tokens of the short run (default 20)"
    )
    step.add_argument(
        "--long", type=int, default=100, help="output tokens of the long run (default 100)"
    )
    step.add_argument(
        "--by-batch",
        action="store_true",
        help="instead: each of translate-cli's batches of the --limit sentences",
    )
    profile = parser.add_argument_group("profile")
    profile.add_argument("--length-penalty", type=float, default=0.0)
    profile.add_argument("--top", type=int, default=15, help="operators listed (default 15)")
    profile.add_argument(
        "--by-rows", action="store_true", help="instead: the encoder and the steps by rows decoded"
    )
    profile.add_argument("--batch", type=int, default=0, help="with --by-rows: random batches of N")


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--checkpoint", default=DEFAULT_CHECKPOINT)
    add(
        "--modes",
        type=words,
        default=list(SERVE_MODES[:3]),
        help=f"from {','.join(SERVE_MODES)} (default: the first three)",
    )
    add(
        "--clients",
        type=numbers,
        default=[1, 8, 32, 128],
        help="concurrency levels (default: 1,8,32,128)",
    )
    add(
        "--seconds",
        type=float,
        default=20,
        help="load time a level, or a fairness probe's (default 20)",
    )
    add("--threads", type=int, default=1, help="torch threads of the server and translate-cli")
    add("--limit", type=int, help="only the first N test sentences")
    add("--rss-every", type=float, default=0, help="print the server's RSS every N seconds")
    add(
        "--batch-ceiling",
        type=numbers,
        default=[16, 32],
        help="the model alone on random batches of these sizes (default: 16,32; '' skips)",
    )
    add("--device", choices=["cpu", "cuda"], default="cpu")
    add(
        "--api",
        choices=["native", "libretranslate"],
        default="native",
        help="what the clients speak",
    )
    add(
        "--libretranslate-venv",
        type=Path,
        default=REPO / ".cache" / "libretranslate-venv",
        help="--modes libretranslate: its virtual environment, made at first use",
    )
    add(
        "--libretranslate-checkpoint",
        help="--modes libretranslate: the checkpoint whose Argos export it serves (default: "
        "--checkpoint), e.g. a teacher against its student",
    )
    add(
        "--probe",
        type=words,
        metavar="PARTS",
        help=f"instead: the fairness probes, from {','.join(PROBES)}",
    )
    add(
        "--tree",
        help="serve from this checkout too, each level beside this one's (with --probe: instead)",
    )
    add("--rounds", type=int, default=1, help="each mode (and --tree) this many times, in turn")
    add(
        "--targets",
        type=words,
        help="a many-to-many model: each request asks for the next of these target languages "
        "(no translate-cli runs; use with --batch-ceiling '')",
    )
    add(
        "--corpus",
        type=Path,
        help="with --targets: a multi-way corpus (scripts/build_corpus.py) whose English test "
        "sentences the clients send (default: the bundled corpus's)",
    )
    add("--json", type=Path, help="also write the figures here")
    add("--random-batches", type=numbers, help=argparse.SUPPRESS)


def startup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")


def data_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--sizes", type=words, default=["bundled", "100000", "1000000"])
    add("--workers", type=int, help="encoding processes (default: CPUs, at most 8)")
    add("--max-tokens", type=int, default=2000, help="batch budget (configs/default.yaml's)")
    add("--max-length", type=int, default=200)
    add(
        "--multiway",
        type=Path,
        metavar="CORPUS",
        help="instead: the many-to-many path on this multi-way corpus",
    )
    add("--languages", nargs="+", default=["de", "fr", "ja", "zh-CN", "ru"])
    add("--copies", type=numbers, default=[1, 4, 16])
    add("--build", nargs="+", metavar="LANG", help="instead: time the multi-way build of each")
    add("--json", type=Path, help="also write the figures here")
    add("--measure", help=argparse.SUPPRESS)


def report_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--dry-run", action="store_true", help="every step at toy size on the CPU")
    add("--out", type=Path, help="default: runs/gpu-report (a dry run: runs/gpu-report-dry-run)")
    add("--cache-dir", type=Path, help="vocabularies and encoded corpora (default: OUT/cache)")
    add("--steps", type=words, default=[], help="the steps to run (default: all)")
    add("--again", action="store_true", help="run steps already recorded as done again")
    add("--minutes", type=float, help="the whole report's cap (default 40; dry run 15)")
    add("--step-minutes", type=float, help="each step's cap (default 9; dry run 3)")
    add("--converge-minutes", type=float, help="the converge run's training time (default 6)")
    add("--list", action="store_true", help="print the steps and exit")
    add("--docs", action="store_true", help="instead: fill the docs' GPU sections from --report")
    add("--report", type=Path, help="with --docs: the report.json (default: OUT/report.json)")
    add("--docs-dir", type=Path, help="with --docs: the docs folder to fill (default: docs/)")
    add("--allow-dry-run", action="store_true", help="with --docs: a dry run's figures too")
    add("--probe-environment", action="store_true", help=argparse.SUPPRESS)
    add("--probe-ctranslate2", nargs=2, metavar=("CKPT", "DEVICE"), help=argparse.SUPPRESS)


ARGUMENTS = {
    "train": train_arguments,
    "translate": translate_arguments,
    "serve": serve_arguments,
    "startup": startup_arguments,
    "data": data_arguments,
    "report": report_arguments,
}


def checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """The settings no type checks: those that depend on each other."""
    if args.tool == "train":
        args.precisions = args.precisions or (
            ["fp32", "bf16"] if args.device == "cpu" else ["bf16"]
        )
        if set(args.precisions) - {"fp32", "bf16"}:
            parser.error(f"--precisions {','.join(args.precisions)}: choose from fp32, bf16")
        args.data_settings = {}
        for setting in args.data:
            key, equals, value = setting.partition("=")
            if not equals or not key:
                parser.error(
                    f"--data {setting!r}: write KEY=VALUE, e.g. --data cache_dir=/tmp/cache"
                )
            args.data_settings[key] = yaml.safe_load(value)
        for name in ("batches", "steps", "rounds", "max_tokens"):
            if getattr(args, name) is not None and getattr(args, name) < 1:
                parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.tool == "translate":
        if args.precision == "16-mixed" and args.device == "cpu":
            parser.error("--precision 16-mixed needs --device cuda")
        if args.mode in ("step", "profile") and args.device != "cpu":
            parser.error(f"--mode {args.mode} measures the CPU path")
    if args.tool == "serve":
        for name, given, known in (
            ("modes", args.modes, SERVE_MODES),
            ("probe", args.probe, PROBES),
        ):
            unknown = sorted(set(given or ()) - set(known))
            if unknown:
                parser.error(
                    f"--{name}: unknown {', '.join(unknown)} (choose from {', '.join(known)})"
                )
    if args.tool == "report":
        for name in ("minutes", "step_minutes", "converge_minutes"):
            if getattr(args, name) is not None and getattr(args, name) <= 0:
                parser.error(f"--{name.replace('_', '-')} must be more than 0")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench.py",
        description="The project's benchmarks, one mode a question; every figure printed under "
        "the day, machine, torch, commit and command line it was measured with.",
    )
    modes = parser.add_subparsers(dest="tool", required=True, metavar="MODE")
    for name, add in ARGUMENTS.items():
        add(
            modes.add_parser(
                name,
                help=SUMMARIES[name],
                description=docstring(MODULES[name]),
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
        )
    args = parser.parse_args(argv)
    args = checked(modes.choices[args.tool], args)
    return importlib.import_module(f"benchmarks.{MODULES[args.tool]}").run(args)
