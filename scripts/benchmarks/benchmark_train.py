"""Training-speed benchmark: our Transformer against Hugging Face `MarianMTModel`, same batches.

    .venv/bin/python scripts/benchmarks/benchmark_train.py                      # CPU, configs/default.yaml
    .venv/bin/python scripts/benchmarks/benchmark_train.py --steps 2 --rounds 1 --no-memory   # quick check
    .venv/bin/python scripts/benchmarks/benchmark_train.py --device cuda --config configs/base.yaml

Three models, all built from the config's `model.model` section and the data module's
vocabulary: ours as configured; ours post-norm (`norm_first: false`); and `MarianMTModel` with
identical dimensions, ties, ReLU, sinusoidal positions and embedding scaling, made from the
post-norm model by `translate.export.huggingface.to_huggingface` (so it starts from the same weights: its
first loss equals our post-norm model's, which the script checks). Marian is post-norm, so the
post-norm row is the like-for-like comparison; the configured row is what `make train` runs.

Every model trains on the same batches, in the same order: the first `--batches` batches of
the bundled corpus's shuffled training epoch from `TranslationDataModule` with the config's
token budget. A step is forward, the label-smoothed loss (the same function for all models,
on float32 logits), backward and an Adam step (fused on a GPU, as training runs it), under
bf16 autocast in the bf16 rows; the loss stays on the device, so the host never waits for a
step (training reads it back only on logging steps). `--compile` adds a row of ours under
`torch.compile`, `--loss-chunk` one with the chunked loss, `--math-attention` one with
attention as plain products. The machine is shared and noisy, so timing is in rounds of `--steps` steps per model, the models
interleaved (their order rotated every round), and each model's figure is the median over
the rounds after the first of target (non-pad) tokens per second; the first round, where the
shapes are met first, is given apart. With `--steps` equal to `--batches`, a round is one pass
over every batch.

Utilisation. Each batch's model FLOPs are counted from the architecture (`translate.model.flops`:
every matrix product of forward and backward, attention scores and the output projection
included; a test checks the count against torch's FlopCounterMode), so a row's FLOP/s is the
FLOPs of the steps it ran over their time, and its MFU that rate over the device's peak: on a
GPU the data-sheet dense peak of its precision (`--peak-tflops` for another device); on the CPU
the peak of this machine measured here, the best of several large matrix products in the same
precision and thread count (a CPU has no data-sheet figure that holds for a shared machine).

Peak memory is measured per model and precision in a fresh subprocess running the same steps
over all the batches. On the CPU: the process's resident high-water mark (VmHWM) after the
steps, having reset it (`/proc/self/clear_refs`) once the data was loaded and before the model
was built, minus the resident memory at that point: what the model, its gradients, Adam's
state and the activations added. On a GPU: `torch.cuda.max_memory_allocated`. A subprocess
per model keeps one model's freed memory (the allocator keeps it) from hiding another's peak.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import yaml  # noqa: E402

MODELS = ("ours", "ours-postnorm", "marian")
LABELS = {
    "ours": "ours (as configured)",
    "ours-postnorm": "ours, post-norm",
    "marian": "transformers MarianMTModel",
    "ours-projected": "ours, padding dropped before the output projection",
    "ours-compiled": "ours, torch.compile (model.compile)",
    "ours-math": "ours, math attention (model.training_attention math)",
    "ours-unfused-adam": "ours, plain Adam (model.fused_optimizer false)",
    "ours-shaped": "ours, fixed batch shapes (data.batch_shapes fixed)",
    "ours-shaped-compiled": "ours, fixed shapes + compiled step without CUDA graphs",
    "ours-captured": "ours, fixed shapes + compiled step (model.step compiled; CUDA graphs on a GPU)",
}
# The rows trained on fixed-shape batches (the same pairs, cut and padded to the shapes).
SHAPED = ("ours-shaped", "ours-shaped-compiled", "ours-captured")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "default.yaml")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--precisions",
        default=None,
        help="comma-separated from fp32,bf16 (default: both on cpu, bf16 on cuda)",
    )
    parser.add_argument(
        "--batches", type=int, default=20, help="distinct batches, cycled (default 20)"
    )
    parser.add_argument(
        "--steps", type=int, default=10, help="timed steps per model and round (default 10)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=7,
        help="timing rounds; the median of those after the first is reported (default 7)",
    )
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed steps per model first (default 3)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's)"
    )
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the per-model memory subprocesses"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="the device's peak TFLOP/s in the benchmark's precision (default: measured on the "
        "CPU, the data sheet's for known GPUs)",
    )
    parser.add_argument(
        "--fixed-shapes",
        action="store_true",
        help="add three rows: ours on fixed batch shapes (data.batch_shapes fixed), eager, with "
        "the step compiled once for every shape without CUDA graphs, and as model.step compiled "
        "runs it (a CUDA graph a shape on a GPU); their TFLOP/s count the exact "
        "batches' work per target token, not the padding",
    )
    parser.add_argument(
        "--loss-chunk",
        type=int,
        default=None,
        metavar="ROWS",
        help="add a row: ours with model.loss_chunk ROWS (padding dropped before the output "
        "projection, logits made ROWS at a time; 0: all at once)",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="add a row: ours with torch.compile of the model, as model.compile does in training",
    )
    parser.add_argument(
        "--math-attention",
        action="store_true",
        help="add a row: ours with attention as plain products (model.training_attention math)",
    )
    parser.add_argument(
        "--unfused-adam",
        action="store_true",
        help="add a row: ours stepping torch's plain Adam instead of the fused kernel",
    )
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a data setting over the config's (YAML value), e.g. cache_dir=/tmp/cache; repeatable",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="padded tokens per batch (default: the config's data.max_tokens)",
    )
    parser.add_argument(
        "--rows",
        default=None,
        metavar="NAMES",
        help="comma-separated: time only these of the rows chosen (default: all of them), e.g. "
        "ours,ours-shaped,ours-captured where the others are measured already",
    )
    parser.add_argument(
        "--memory-worker", nargs=2, metavar=("MODEL", "PRECISION"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.precisions is None:
        args.precisions = "fp32,bf16" if args.device == "cpu" else "bf16"
    args.precisions = args.precisions.split(",")
    args.models = (
        MODELS
        + (("ours-projected",) if args.loss_chunk is not None else ())
        + (("ours-compiled",) if args.compile else ())
        + (("ours-math",) if args.math_attention else ())
        + (("ours-unfused-adam",) if args.unfused_adam else ())
        + (SHAPED if args.fixed_shapes else ())
    )
    if args.rows is not None:
        kept = args.rows.split(",")
        unknown = [name for name in kept if name not in args.models]
        if unknown or not kept:
            parser.error(
                f"--rows: {', '.join(unknown) or 'none given'} not among the rows chosen "
                f"({', '.join(args.models)})"
            )
        args.models = tuple(name for name in args.models if name in kept)
    for precision in args.precisions:
        if precision not in ("fp32", "bf16"):
            parser.error(f"--precisions: unknown precision {precision!r} (choose from fp32, bf16)")
    args.data_settings = {}
    for setting in args.data:
        key, equals, value = setting.partition("=")
        if not equals or not key:
            parser.error(f"--data {setting!r}: write KEY=VALUE, e.g. --data cache_dir=/tmp/cache")
        args.data_settings[key] = yaml.safe_load(value)
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error("--max-tokens must be at least 1")
    for name in ("batches", "steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(
            f"--device cuda: torch {torch.__version__} sees no CUDA device on this machine "
            "(install the CUDA build of torch: make install TORCH=torch)"
        )
    return args


def read_config(path: Path) -> dict:
    """The model, optimizer and data settings of a training config."""
    if not path.is_file():
        raise SystemExit(f"error: {path}: no such config file")
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    model_section = config.get("model", {})
    return {
        "model": model_section.get("model", {}),
        "lr": model_section.get("lr", 7e-4),
        "betas": tuple(model_section.get("betas", (0.9, 0.98))),
        "label_smoothing": model_section.get("label_smoothing", 0.1),
        "data": config.get("data", {}),
        "seed": config.get("seed_everything", 1),
    }


def load_batches(config: dict, count: int, fixed_shapes: bool = False):
    """The vocabulary and the first `count` batches of the shuffled first training epoch (with
    `fixed_shapes`, cut and padded to them), each with its target token count (counted here, so
    that the timed steps need no host sync), and how many lengths a side may take (0 without).
    The tie of `config["model"]` is set to the one `tie_embeddings` chooses for the data."""
    from translate.model.tying import choose_tie
    from translate.text.vocab import PAD_ID
    from translate.train.data_module import TranslationDataModule

    shaping = {"batch_shapes": "fixed"} if fixed_shapes else {}
    data = TranslationDataModule(**{"seed": config["seed"], **config["data"], **shaping})
    data.setup("fit")
    # the config's tie resolved from the data, as translate-train resolves tie_embeddings auto
    asked = config["model"].get("tie_embeddings", "all")
    config["model"]["tie_embeddings"] = choose_tie(asked, data.piece_use).mode
    shapes = data.training_shapes(on_gpu=False)
    batches = []
    for batch in data.train_dataloader():
        batches.append(
            {
                **{key: batch[key] for key in ("src", "tgt_in", "tgt_out")},
                "tokens": int((batch["tgt_out"] != PAD_ID).sum()),
            }
        )
        if len(batches) == count:
            break
    return data.vocab, batches, len(shapes.lengths) if shapes else 0


class Trainee:
    """One model with its optimizer and a training step on our batch format."""

    def __init__(
        self,
        name: str,
        config: dict,
        vocab,
        device: torch.device,
        loss_chunk: int | None = None,
        lengths: int = 0,
    ) -> None:
        from translate.export.huggingface import to_huggingface
        from translate.model.transformer import ModelConfig, Transformer
        from translate.train.lightning_module import use_fused_optimizer

        torch.manual_seed(config["seed"])
        cfg = ModelConfig(**config["model"])
        if name in ("ours-postnorm", "marian"):
            cfg = replace(cfg, norm_first=False)
        model = Transformer(cfg, len(vocab.source), len(vocab.target), shared_vocab=vocab.joint)
        if name == "marian":
            model = to_huggingface(model)  # same dimensions, ties and weights
        self.name, self.model, self.device = name, model.to(device).train(), device
        if name == "ours-compiled":
            self.model.compile(dynamic=True)  # what model.compile does in training
        self.parameters = [p for p in self.model.parameters() if p.requires_grad]
        # Fused Adam where training's default fuses it (a GPU; nothing is clipped here).
        fuse = name != "ours-unfused-adam" and use_fused_optimizer(
            None, device.type, clipping=False, precision=""
        )
        fused = {"fused": True} if fuse else {}
        self.optimizer = torch.optim.Adam(
            self.parameters, lr=config["lr"], betas=config["betas"], eps=1e-9, **fused
        )
        self.label_smoothing = config["label_smoothing"]
        self.loss_chunk = loss_chunk if name == "ours-projected" else None
        self.compiled = None
        if name in ("ours-captured", "ours-shaped-compiled"):  # model.step compiled's loss
            from translate.train.compiled_step import CompiledLoss

            self.compiled = CompiledLoss(
                self.model,
                self.label_smoothing,
                None,
                device.type,
                max(lengths, 1),
                cuda_graphs=name == "ours-captured",
            )

    def step(self, batch: dict, precision: str) -> tuple[int, torch.Tensor]:
        """One update; returns the target tokens trained on and the loss, left on the device
        (reading it would make the host wait for every step, which training does not)."""
        from translate.text.vocab import PAD_ID
        from translate.train.lightning_module import attention_backend
        from translate.train.loss import batch_nll, label_smoothed_nll

        tokens = batch["tokens"]
        autocast = (
            torch.autocast(self.device.type, dtype=torch.bfloat16)
            if precision == "bf16"
            else nullcontext()
        )
        self.optimizer.zero_grad(set_to_none=True)
        with autocast, attention_backend("math" if self.name == "ours-math" else "default"):
            if self.name == "marian":
                logits = self.model(
                    input_ids=batch["src"],
                    attention_mask=(batch["src"] != PAD_ID).long(),
                    decoder_input_ids=batch["tgt_in"],
                    use_cache=False,
                ).logits
                nll = label_smoothed_nll(logits, batch["tgt_out"], self.label_smoothing)
            elif self.compiled is not None:
                nll = self.compiled(batch)
            else:
                nll = batch_nll(self.model, batch, self.label_smoothing, self.loss_chunk)
        loss = nll / tokens
        loss.backward()
        self.optimizer.step()
        return tokens, loss.detach()


def batch_flops(config: dict, vocab, batch: dict) -> int:
    """Model FLOPs of one training step on `batch` (its padded shapes)."""
    from translate.model.flops import training_flops
    from translate.model.transformer import ModelConfig

    rows, src_len = batch["src"].shape
    return training_flops(
        ModelConfig(**config["model"]), len(vocab.target), rows, src_len, batch["tgt_in"].shape[1]
    )


def measured_peak_tflops(
    device: torch.device, precision: str, size: int = 2048, repeats: int = 5
) -> float:
    """The best TFLOP/s of `repeats` (size x size) @ (size x size) products in `precision`."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    a @ b  # warm-up: allocations, kernel choice
    best = 0.0
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        a @ b
        synchronize(device)
        best = max(best, 2 * size**3 / (time.perf_counter() - start) / 1e12)
    return best


def peak_tflops(args, device: torch.device, precision: str) -> tuple[float | None, str]:
    """The peak MFU is measured against, and where it comes from."""
    if args.peak_tflops:
        return args.peak_tflops, "--peak-tflops"
    if device.type == "cuda":
        from translate.model.flops import device_peak

        name = torch.cuda.get_device_name()
        return device_peak(name, precision), f"{name} data sheet, dense {precision}"
    return measured_peak_tflops(
        device, precision
    ), f"best 2048x2048 {precision} matrix product here"


def to_device(batches: list[dict], device: torch.device) -> list[dict]:
    return [
        {
            key: value.to(device) if isinstance(value, torch.Tensor) else value
            for key, value in batch.items()
        }
        for batch in batches
    ]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def cuda_graph_work(device: torch.device) -> str:
    """What inductor's CUDA graph trees did on `device` so far, in words: graphs recorded,
    recordings made again, the allocator's state restored (each switch to a graph recorded
    on another path), and graphs skipped. Read from torch's internals, so best effort: the
    counts say whether a slow captured row records, switches or replays."""
    from torch._dynamo.utils import counters

    try:
        from torch._inductor.cudagraph_trees import get_manager

        manager = get_manager(device.index or 0, create_if_none_exists=False)
    except (ImportError, AttributeError):
        manager = None
    skipped = counters["inductor"]["cudagraph_skips"]
    if manager is None:
        return f"no CUDA graph tree; {skipped} graphs skipped"
    try:
        recorded = int(repr(manager.graph_counter)[6:-1])  # itertools.count(n): n made so far
        again, restored = manager.debug_fail_counter, manager.debug_checkpointing_counter
    except (AttributeError, ValueError) as error:
        return f"CUDA graph tree counts unreadable in this torch ({error}); {skipped} skipped"
    return (
        f"{recorded} graphs recorded, {again} recordings made again, "
        f"{restored} allocator states restored, {skipped} skipped"
    )


def time_models(
    args, config, vocab, batches, precision: str, device: torch.device, shaped=((), 0)
) -> dict:
    """Target tokens/s of each model over interleaved rounds: the first round apart (the shapes
    met first; a CUDA graph is recorded at a shape's second meeting), the steady state the
    median of the rounds after it (the only round, where there is one). Rounds of as many steps
    as batches go over every batch once each. Also the first losses. `shaped`: the fixed-shape
    batches and how many lengths a side may take, for the `SHAPED` rows."""
    shaped_batches, lengths = shaped
    trainees = {
        name: Trainee(name, config, vocab, device, args.loss_chunk, lengths) for name in args.models
    }
    batches_of = {name: shaped_batches if name in SHAPED else batches for name in args.models}
    first_loss = {}
    for name, trainee in trainees.items():
        # Where a row's warm-up goes (a compile, new shapes) shows even if the step's cap ends it.
        start = time.perf_counter()
        first_loss[name] = trainee.step(batches_of[name][0], precision)[1].item()
        for index in range(1, args.warmup):
            trainee.step(batches_of[name][index % len(batches_of[name])], precision)
        synchronize(device)
        print(
            f"  {precision} {name}: warm-up ({max(args.warmup, 1)} steps) in "
            f"{time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )
    flops = [batch_flops(config, vocab, batch) for batch in batches]
    # The shaped rows' work: the exact batches' FLOPs per target token, padding not counted.
    per_token = sum(flops) / sum(b["tokens"] for b in batches)
    rates: dict[str, list[float]] = {name: [] for name in args.models}
    flop_rates: dict[str, list[float]] = {name: [] for name in args.models}
    for round_index in range(args.rounds):
        shift = round_index % len(args.models)
        for name in args.models[shift:] + args.models[:shift]:
            trainee, tokens, work, own = trainees[name], 0, 0, batches_of[name]
            synchronize(device)
            start = time.perf_counter()
            for step in range(args.steps):
                index = (round_index * args.steps + step) % len(own)
                done = trainee.step(own[index], precision)[0]
                tokens += done
                work += done * per_token if name in SHAPED else flops[index]
            synchronize(device)
            elapsed = time.perf_counter() - start
            rates[name].append(tokens / elapsed)
            flop_rates[name].append(work / elapsed)
        print(
            f"  {precision} round {round_index + 1}/{args.rounds}: "
            + ", ".join(f"{name} {rates[name][-1]:,.0f}" for name in args.models),
            file=sys.stderr,
        )
    if "ours-captured" in trainees and device.type == "cuda":
        print(f"  {precision} ours-captured: {cuda_graph_work(device)}", file=sys.stderr)
    tokens_total = sum(b["tokens"] for b in batches)
    steady = slice(1, None) if args.rounds > 1 else slice(None)
    return {
        name: {
            "label": LABELS[name],
            "tokens_per_s": statistics.median(rates[name][steady]),
            "first_round_tokens_per_s": rates[name][0],
            "rounds": rates[name],
            "tflops": statistics.median(flop_rates[name][steady]) / 1e12,
            "flops_per_token": sum(flops) / tokens_total,
            "first_loss": first_loss[name],
            "parameters": sum(
                p.numel() for p in {id(p): p for p in trainees[name].parameters}.values()
            ),
        }
        for name in args.models
    }


def memory_status() -> dict[str, float]:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {key: int(status[key].split()[0]) / 1024 for key in ("VmHWM", "VmRSS")}


def memory_worker(args, config, name: str, precision: str) -> None:
    """In a fresh process: peak memory of training one model over all the batches; prints JSON."""
    device = torch.device(args.device)
    vocab, batches, _ = load_batches(config, args.batches)
    batches = to_device(batches, device)
    gc.collect()
    before = memory_status()["VmRSS"]
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident size
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    trainee = Trainee(name, config, vocab, device, args.loss_chunk)
    for batch in batches:
        trainee.step(batch, precision)
    synchronize(device)
    result = {
        "peak_rss_mib": memory_status()["VmHWM"],
        "added_rss_mib": memory_status()["VmHWM"] - before,
    }
    if device.type == "cuda":
        result["max_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(result))


def measure_memory(args, name: str, precision: str) -> dict:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--config",
        str(args.config),
        "--device",
        args.device,
        "--batches",
        str(args.batches),
        "--memory-worker",
        name,
        precision,
    ]
    if args.threads:
        command += ["--threads", str(args.threads)]
    if args.loss_chunk is not None:
        command += ["--loss-chunk", str(args.loss_chunk)]
    if args.max_tokens:
        command += ["--max-tokens", str(args.max_tokens)]
    for setting in args.data:
        command += ["--data", setting]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(
            f"error: the memory measurement of {name} ({precision}) failed:\n{result.stderr[-2000:]}"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def markdown(
    results: dict, device: str, models: tuple[str, ...] = MODELS, loss_chunk: int | None = None
) -> str:
    memory_column = (
        "peak GPU memory (max allocated)"
        if device == "cuda"
        else "memory added by training (peak RSS)"
    )
    lines = [
        f"| precision | model | parameters | target tokens/s{' per GPU' if device == 'cuda' else ''} (median) "
        f"| first round | vs Marian | model GFLOP per target token | TFLOP/s | MFU | {memory_column} | vs Marian |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    key = "max_allocated_mib" if device == "cuda" else "added_rss_mib"
    for precision, rows in results.items():
        marian = rows.get("marian")  # absent where --rows leaves it out
        for name in models:
            row = rows[name]
            memory = row.get("memory")
            if memory is None:
                memory_text, memory_ratio = "not measured", ""
            else:
                memory_text = f"{memory[key]:,.0f} MiB"
                if device != "cuda":
                    memory_text += f" ({memory['peak_rss_mib']:,.0f} MiB)"
                memory_ratio = f"{memory[key] / marian['memory'][key]:.2f}x" if marian else ""
            mfu = (
                f"{100 * row['tflops'] / row['peak_tflops']:.1f}%"
                if row.get("peak_tflops")
                else "no peak known"
            )
            label = LABELS[name] + (
                f" (loss_chunk {loss_chunk})" if name == "ours-projected" else ""
            )
            versus = f"{row['tokens_per_s'] / marian['tokens_per_s']:.2f}x" if marian else ""
            lines.append(
                f"| {precision} | {label} | {row['parameters']:,} | {row['tokens_per_s']:,.0f} "
                f"| {row.get('first_round_tokens_per_s', float('nan')):,.0f} "
                f"| {versus} | {row['flops_per_token'] / 1e9:.3f} "
                f"| {row['tflops']:.3f} | {mfu} | {memory_text} | {memory_ratio} |"
            )
    peaks = {
        precision: (rows["ours"].get("peak_tflops"), rows["ours"].get("peak_source"))
        for precision, rows in results.items()
    }
    lines += [
        "",
        "MFU against: "
        + "; ".join(
            f"{precision} {peak:.3f} TFLOP/s ({source})" if peak else f"{precision}: none"
            for precision, (peak, source) in peaks.items()
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = read_config(args.config)
    config["data"].update(args.data_settings)
    if args.max_tokens:
        config["data"]["max_tokens"] = args.max_tokens
    if args.memory_worker:
        memory_worker(args, config, *args.memory_worker)
        return 0
    device = torch.device(args.device)
    vocab, batches, _ = load_batches(config, args.batches)
    batches = to_device(batches, device)
    shaped = ((), 0)
    if args.fixed_shapes:
        _, shaped_batches, lengths = load_batches(config, args.batches, fixed_shapes=True)
        shaped = (to_device(shaped_batches, device), lengths)
    tokens = [b["tokens"] for b in batches]
    print(
        f"{args.config}: {len(batches)} batches of at most {config['data'].get('max_tokens')} padded tokens, "
        f"{statistics.mean(tokens):,.0f} target tokens on average; device {device}, "
        f"{torch.get_num_threads()} threads; {args.rounds} rounds x {args.steps} steps",
        file=sys.stderr,
    )
    results = {}
    for precision in args.precisions:
        results[precision] = time_models(args, config, vocab, batches, precision, device, shaped)
        peak, source = peak_tflops(args, device, precision)
        for row in results[precision].values():
            row["peak_tflops"], row["peak_source"] = peak, source
        gc.collect()
        losses = results[precision]
        if "ours-postnorm" not in losses or "marian" not in losses:
            continue  # --rows left the pair out: nothing to compare
        gap = abs(losses["ours-postnorm"]["first_loss"] - losses["marian"]["first_loss"])
        if gap > 1e-2 * max(1.0, abs(losses["marian"]["first_loss"])):
            print(
                f"warning: {precision}: first losses of ours post-norm ({losses['ours-postnorm']['first_loss']:.4f}) "
                f"and Marian ({losses['marian']['first_loss']:.4f}) differ: not the same computation",
                file=sys.stderr,
            )
    if not args.no_memory:
        for precision in args.precisions:
            for name in args.models:
                if name not in SHAPED:  # measured on the exact batches only
                    results[precision][name]["memory"] = measure_memory(args, name, precision)
    summary = {
        "config": str(args.config),
        "device": args.device,
        "threads": torch.get_num_threads(),
        "batches": len(batches),
        "target_tokens_per_batch": statistics.mean(tokens),
        "steps": args.steps,
        "rounds": args.rounds,
        "torch": torch.__version__,
        "results": results,
    }
    if device.type == "cuda":
        summary["gpu"] = torch.cuda.get_device_name()
    table = markdown(results, args.device, args.models, args.loss_chunk)
    print(table)
    for precision, rows in results.items():
        print(
            f"{precision} first losses: "
            + ", ".join(f"{n} {rows[n]['first_loss']:.4f}" for n in args.models)
        )
    if args.json:
        from translate.files import write_atomic

        write_atomic(args.json, json.dumps(summary, indent=2).encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
