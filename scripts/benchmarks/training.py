"""`bench.py train`: training speed, our Transformer against Hugging Face `MarianMTModel` on the
same batches, and (`--profile ROW`) where one row's step spends its time.

Rows, all built from the config's `model.model` section and the data's vocabulary: ours as
configured; ours post-norm (`norm_first: false`); `MarianMTModel` with identical dimensions, ties,
ReLU, sinusoidal positions and embedding scaling, made from the post-norm model by
`to_huggingface` (the same weights: its first loss equals our post-norm model's, which is
checked); and one row a speed switch asked for (`--compile`, `--loss-chunk`, `--math-attention`,
`--unfused-adam`, `--fixed-shapes`). Every row trains on the first `--batches` batches of the
bundled corpus's shuffled first epoch with the config's token budget; a step is forward, the
label-smoothed loss on float32 logits, backward and an Adam step (fused on a GPU, as training
runs it), under bf16 autocast in the bf16 rows, the loss left on the device (the host never
waits for a step). Timing is in rounds of `--steps` steps a row, the rows interleaved (their
order rotated every round); a row's figure is the median over the rounds after the first of
target (non-pad) tokens a second, the first round (where shapes are met first) given apart.

MFU: each batch's model FLOPs counted from the architecture (`translate.model.flops`), over the
device's peak in that precision: a GPU's data-sheet dense peak (`--peak-tflops` for another), on
the CPU the best of several large matrix products measured here. Peak memory: each row in a fresh
process of its own over all the batches; on the CPU the resident high-water mark it added (VmHWM,
reset once the data was loaded), on a GPU `torch.cuda.max_memory_allocated`.

`--profile ROW`: torch.profiler over `--steps` steps of that row after `--warmup`, device kernels
(CPU operators on the CPU) grouped into matrix products, attention, the loss, the optimizer and
the rest, and the share of the wall time the device was busy.
"""

from __future__ import annotations

import gc
import json
import re
import statistics
import subprocess
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from benchmarks.harness import environment, interleaved, publish, say, table, tool_command

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
# Kernel or operator name patterns of the profile's groups, first match wins.
GROUPS = (
    ("attention", r"flash|fmha|attention|efficient"),
    ("matrix products", r"gemm|cutlass|nvjet|xmma|matmul|addmm|\bmm\b|bmm|linear"),
    ("loss (softmax, cross-entropy)", r"softmax|cross_entropy|nll|logsumexp"),
    ("optimizer", r"adam|foreach|multi_tensor"),
    ("normalisation", r"layer_norm|layernorm|norm"),
    ("dropout, masks, random", r"dropout|bernoulli|philox|masked|fused_dropout"),
    ("copies and casts", r"copy|memcpy|memset|cast|to_copy|cat"),
)


def rows_chosen(args) -> tuple[str, ...]:
    models = ("ours", "ours-postnorm", "marian")
    models += ("ours-projected",) if args.loss_chunk is not None else ()
    models += ("ours-compiled",) if args.compile else ()
    models += ("ours-math",) if args.math_attention else ()
    models += ("ours-unfused-adam",) if args.unfused_adam else ()
    models += SHAPED if args.fixed_shapes else ()
    if args.rows is None:
        return models
    unknown = [name for name in args.rows if name not in models]
    if unknown or not args.rows:
        raise SystemExit(
            f"error: --rows: {', '.join(unknown) or 'none given'} not among the rows chosen "
            f"({', '.join(models)})"
        )
    return tuple(name for name in models if name in args.rows)


def read_config(args) -> dict:
    """The model, optimizer and data settings of the training config, with `--data` and
    `--max-tokens` over its data section."""
    if not args.config.is_file():
        raise SystemExit(f"error: {args.config}: no such config file")
    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    model = config.get("model", {})
    data = {**config.get("data", {}), **args.data_settings}
    if args.max_tokens:
        data["max_tokens"] = args.max_tokens
    return {
        "model": model.get("model", {}),
        "lr": model.get("lr", 7e-4),
        "betas": tuple(model.get("betas", (0.9, 0.98))),
        "label_smoothing": model.get("label_smoothing", 0.1),
        "data": data,
        "seed": config.get("seed_everything", 1),
    }


def load_batches(config: dict, count: int, device: torch.device, fixed_shapes: bool = False):
    """The vocabulary, the first `count` batches of the shuffled first training epoch on `device`
    (with `fixed_shapes`, cut and padded to them), each with its target token count (counted
    here, so that the timed steps need no host sync), and how many lengths a side may take (0
    without). The config's tie is resolved from the data, as translate-train resolves `auto`."""
    from translate.model.tying import choose_tie
    from translate.text.vocab import PAD_ID
    from translate.train.data_module import TranslationDataModule

    shaping = {"batch_shapes": "fixed"} if fixed_shapes else {}
    data = TranslationDataModule(**{"seed": config["seed"], **config["data"], **shaping})
    data.setup("fit")
    asked = config["model"].get("tie_embeddings", "all")
    config["model"]["tie_embeddings"] = choose_tie(asked, data.piece_use).mode
    shapes = data.training_shapes(on_gpu=False)
    batches = []
    for batch in data.train_dataloader():
        tensors = {key: batch[key].to(device) for key in ("src", "tgt_in", "tgt_out")}
        batches.append({**tensors, "tokens": int((batch["tgt_out"] != PAD_ID).sum())})
        if len(batches) == count:
            break
    return data.vocab, batches, len(shapes.lengths) if shapes else 0


class Trainee:
    """One row's model with its optimizer and a training step on our batch format."""

    def __init__(
        self, name: str, config: dict, vocab, device: torch.device, loss_chunk=None, lengths=0
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
        fuse = name != "ours-unfused-adam" and use_fused_optimizer(
            None, device.type, clipping=False, precision=""
        )  # fused where training's default fuses it (a GPU; nothing is clipped here)
        self.optimizer = torch.optim.Adam(
            self.parameters,
            lr=config["lr"],
            betas=config["betas"],
            eps=1e-9,
            **({"fused": True} if fuse else {}),
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
        """One update: the target tokens trained on, and the loss left on the device."""
        from translate.text.vocab import PAD_ID
        from translate.train.lightning_module import attention_backend
        from translate.train.loss import batch_nll, label_smoothed_nll

        bf16 = precision == "bf16"
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
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
        loss = nll / batch["tokens"]
        loss.backward()
        self.optimizer.step()
        return batch["tokens"], loss.detach()


def batch_flops(config: dict, vocab, batch: dict) -> int:
    """Model FLOPs of one training step on `batch` (its padded shapes)."""
    from translate.model.flops import training_flops
    from translate.model.transformer import ModelConfig

    rows, src_len = batch["src"].shape
    model = ModelConfig(**config["model"])
    return training_flops(model, len(vocab.target), rows, src_len, batch["tgt_in"].shape[1])


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_tflops(args, device: torch.device, precision: str) -> tuple[float | None, str]:
    """The peak MFU is measured against, and where it comes from: `--peak-tflops`, a GPU's data
    sheet, or on the CPU the best of five 2048 x 2048 products in `precision` here."""
    if args.peak_tflops:
        return args.peak_tflops, "--peak-tflops"
    if device.type == "cuda":
        from translate.model.flops import device_peak

        name = torch.cuda.get_device_name()
        return device_peak(name, precision), f"{name} data sheet, dense {precision}"
    size, dtype = 2048, torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    timed = interleaved({"product": lambda: a @ b}, 6, lambda: synchronize(device))
    best = 2 * size**3 / min(timed.seconds["product"][1:]) / 1e12  # the first one warms
    return best, f"best 2048x2048 {precision} matrix product here"


def cuda_graph_work(device: torch.device) -> str:
    """What inductor's CUDA graph trees did on `device` so far, in words: graphs recorded,
    recordings made again, the allocator's state restored, graphs skipped. Read from torch's
    internals, so best effort: whether a slow captured row records, switches or replays."""
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


def time_rows(args, config, vocab, batches, precision, device, shaped=((), 0)) -> dict:
    """Each row's target tokens/s over interleaved rounds (the first round apart, the steady state
    the median of those after it), its TFLOP/s, first loss and parameters. `shaped`: the
    fixed-shape batches and how many lengths a side may take, for the `SHAPED` rows."""
    shaped_batches, lengths = shaped
    trainees = {
        name: Trainee(name, config, vocab, device, args.loss_chunk, lengths) for name in args.models
    }
    own = {name: shaped_batches if name in SHAPED else batches for name in args.models}
    first_loss = {}
    for name, trainee in trainees.items():
        # Where a row's warm-up goes (a compile, new shapes) shows even if a cap ends the run.
        started = time.perf_counter()
        first_loss[name] = trainee.step(own[name][0], precision)[1].item()
        for index in range(1, args.warmup):
            trainee.step(own[name][index % len(own[name])], precision)
        synchronize(device)
        warmup = time.perf_counter() - started
        say(f"  {precision} {name}: warm-up ({max(args.warmup, 1)} steps) in {warmup:.1f} s")
    flops = [batch_flops(config, vocab, batch) for batch in batches]
    # The shaped rows' work: the exact batches' FLOPs per target token, padding not counted.
    per_token = sum(flops) / sum(b["tokens"] for b in batches)
    rounds_run = dict.fromkeys(args.models, 0)

    def one_round(name: str) -> tuple[int, float]:
        tokens, work, index = 0, 0.0, rounds_run[name] * args.steps
        for position in range(index, index + args.steps):
            done = trainees[name].step(own[name][position % len(own[name])], precision)[0]
            tokens += done
            work += done * per_token if name in SHAPED else flops[position % len(batches)]
        rounds_run[name] += 1
        return tokens, work

    def progress(index: int, rounds) -> None:
        rates = (
            f"{name} {rounds.outputs[name][-1][0] / rounds.seconds[name][-1]:,.0f}"
            for name in args.models
        )
        say(f"  {precision} round {index + 1}/{args.rounds}: " + ", ".join(rates))

    cases = {name: (lambda name=name: one_round(name)) for name in args.models}
    timed = interleaved(cases, args.rounds, lambda: synchronize(device), True, progress)
    if "ours-captured" in trainees and device.type == "cuda":
        say(f"  {precision} ours-captured: {cuda_graph_work(device)}")
    steady = slice(1, None) if args.rounds > 1 else slice(None)
    results = {}
    for name in args.models:
        rates = [t / s for (t, _), s in zip(timed.outputs[name], timed.seconds[name])]
        flop_rates = [w / s for (_, w), s in zip(timed.outputs[name], timed.seconds[name])]
        unique = {id(p): p for p in trainees[name].parameters}.values()
        results[name] = {
            "label": LABELS[name],
            "tokens_per_s": statistics.median(rates[steady]),
            "first_round_tokens_per_s": rates[0],
            "rounds": rates,
            "tflops": statistics.median(flop_rates[steady]) / 1e12,
            "flops_per_token": per_token,
            "first_loss": first_loss[name],
            "parameters": sum(p.numel() for p in unique),
        }
    return results


def memory_status() -> dict[str, float]:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {key: int(status[key].split()[0]) / 1024 for key in ("VmHWM", "VmRSS")}


def memory_worker(args, config: dict, name: str, precision: str) -> int:
    """In a fresh process: the peak memory of training one row over all the batches (JSON)."""
    device = torch.device(args.device)
    vocab, batches, _ = load_batches(config, args.batches, device)
    gc.collect()
    before = memory_status()["VmRSS"]
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident size
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    trainee = Trainee(name, config, vocab, device, args.loss_chunk)
    for batch in batches:
        trainee.step(batch, precision)
    synchronize(device)
    peak = memory_status()["VmHWM"]
    result = {"peak_rss_mib": peak, "added_rss_mib": peak - before}
    if device.type == "cuda":
        result["max_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(result))
    return 0


def measure_memory(args, name: str, precision: str) -> dict:
    command = tool_command(
        "train", "--config", str(args.config), "--device", args.device,
        "--batches", str(args.batches), "--memory-worker", name, precision,
    )  # fmt: skip
    if args.threads:
        command += ["--threads", str(args.threads)]
    if args.loss_chunk is not None:
        command += ["--loss-chunk", str(args.loss_chunk)]
    if args.max_tokens:
        command += ["--max-tokens", str(args.max_tokens)]
    for setting in args.data:
        command += ["--data", setting]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(
            f"error: the memory of {name} ({precision}) could not be measured:\n{done.stderr[-2000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def speed_table(results: dict, device: str, models: tuple[str, ...], loss_chunk) -> str:
    cuda = device == "cuda"
    key = "max_allocated_mib" if cuda else "added_rss_mib"
    cells = []
    for precision, rows in results.items():
        marian = rows.get("marian")  # absent where --rows leaves it out
        for name in models:
            row, memory = rows[name], rows[name].get("memory")
            memory_text, memory_ratio = "not measured", ""
            if memory is not None:
                memory_text = f"{memory[key]:,.0f} MiB"
                memory_text += "" if cuda else f" ({memory['peak_rss_mib']:,.0f} MiB)"
                memory_ratio = f"{memory[key] / marian['memory'][key]:.2f}x" if marian else ""
            peak = row.get("peak_tflops")
            mfu = f"{100 * row['tflops'] / peak:.1f}%" if peak else "no peak known"
            label = LABELS[name] + (
                f" (loss_chunk {loss_chunk})" if name == "ours-projected" else ""
            )
            versus = f"{row['tokens_per_s'] / marian['tokens_per_s']:.2f}x" if marian else ""
            cells.append(
                (precision, label, f"{row['parameters']:,}", f"{row['tokens_per_s']:,.0f}")
                + (f"{row['first_round_tokens_per_s']:,.0f}", versus)
                + (f"{row['flops_per_token'] / 1e9:.3f}", f"{row['tflops']:.3f}", mfu)
                + (memory_text, memory_ratio)
            )
    memory_column = (
        "peak GPU memory (max allocated)" if cuda else "memory added by training (peak RSS)"
    )
    headers = ("precision", "model", "parameters")
    headers += (f"target tokens/s{' per GPU' if cuda else ''} (median)", "first round", "vs Marian")
    headers += ("model GFLOP per target token", "TFLOP/s", "MFU", memory_column, "vs Marian")
    peaks = "; ".join(
        f"{precision} {rows['ours']['peak_tflops']:.3f} TFLOP/s ({rows['ours']['peak_source']})"
        if rows.get("ours", {}).get("peak_tflops")
        else f"{precision}: none"
        for precision, rows in results.items()
    )
    return table(headers, cells, "l" * len(headers)) + f"\n\nMFU against: {peaks}"


def run(args) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    args.models = rows_chosen(args)
    config = read_config(args)
    if args.memory_worker:
        return memory_worker(args, config, *args.memory_worker)
    device = torch.device(args.device)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"error: --device cuda: torch {torch.__version__} sees no CUDA device")
    if args.profile:
        if args.profile not in LABELS:
            raise SystemExit(f"error: --profile {args.profile}: not a row ({', '.join(LABELS)})")
        return profile(args, config, device)
    vocab, batches, _ = load_batches(config, args.batches, device)
    shaped = ((), 0)
    if args.fixed_shapes:
        _, shaped_batches, lengths = load_batches(config, args.batches, device, fixed_shapes=True)
        shaped = (shaped_batches, lengths)
    tokens = statistics.mean(b["tokens"] for b in batches)
    say(
        f"{args.config}: {len(batches)} batches of at most {config['data'].get('max_tokens')} padded "
        f"tokens, {tokens:,.0f} target tokens on average; device {device}, "
        f"{torch.get_num_threads()} threads; {args.rounds} rounds x {args.steps} steps"
    )
    results = {}
    for precision in args.precisions:
        results[precision] = time_rows(args, config, vocab, batches, precision, device, shaped)
        peak, source = peak_tflops(args, device, precision)
        for row in results[precision].values():
            row["peak_tflops"], row["peak_source"] = peak, source
        gc.collect()
        losses = {name: row["first_loss"] for name, row in results[precision].items()}
        if {"ours-postnorm", "marian"} <= losses.keys():
            gap = abs(losses["ours-postnorm"] - losses["marian"])
            if gap > 1e-2 * max(1.0, abs(losses["marian"])):
                say(
                    f"warning: {precision}: first losses of ours post-norm "
                    f"({losses['ours-postnorm']:.4f}) and Marian ({losses['marian']:.4f}) differ: "
                    "not the same computation"
                )
    if not args.no_memory:
        for precision in args.precisions:
            for name in args.models:
                if name not in SHAPED:  # measured on the exact batches only
                    results[precision][name]["memory"] = measure_memory(args, name, precision)
    text = "\n".join(
        [
            f"{args.config}: {len(batches)} batches, {tokens:,.0f} target tokens on average, "
            f"{torch.get_num_threads()} threads, {args.rounds} rounds x {args.steps} steps",
            "",
            speed_table(results, args.device, args.models, args.loss_chunk),
            *(
                f"{precision} first losses: "
                + ", ".join(f"{name} {rows[name]['first_loss']:.4f}" for name in args.models)
                for precision, rows in results.items()
            ),
        ]
    )
    summary = {
        "config": str(args.config),
        "device": args.device,
        "threads": torch.get_num_threads(),
        "batches": len(batches),
        "target_tokens_per_batch": tokens,
        "steps": args.steps,
        "rounds": args.rounds,
        "torch": torch.__version__,
        "results": results,
    }
    if device.type == "cuda":
        summary["gpu"] = torch.cuda.get_device_name()
    publish(environment(args.device), text, args.json, **summary)
    return 0


def profile(args, config: dict, device: torch.device) -> int:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    precision = args.precisions[0]
    vocab, batches, lengths = load_batches(config, args.batches, device, args.profile in SHAPED)
    trainee = Trainee(args.profile, config, vocab, device, args.loss_chunk, lengths)
    for index in range(args.warmup):
        trainee.step(batches[index % len(batches)], precision)
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    synchronize(device)
    with profiler(activities=activities) as prof:
        started = time.perf_counter()
        for index in range(args.steps):
            trainee.step(batches[index % len(batches)], precision)
        synchronize(device)
        wall = time.perf_counter() - started
    events = prof.key_averages()
    if cuda:  # the kernels and copies themselves
        timed = [
            (e.key, e.self_device_time_total / 1e6, e.count)
            for e in events
            if e.device_type == DeviceType.CUDA
        ]
    else:
        timed = [(e.key, e.self_cpu_time_total / 1e6, e.count) for e in events]
        timed = [entry for entry in timed if entry[1] > 0]
    busy = sum(seconds for _, seconds, _ in timed)
    tokens = sum(batches[index % len(batches)]["tokens"] for index in range(args.steps))
    where = torch.cuda.get_device_name() if cuda else "cpu"
    caption = (
        f"{args.config} on {where}, {args.profile}, {precision}, {args.steps} steps, {tokens:,} "
        f"target tokens: wall {wall:.3f} s ({tokens / wall:,.0f} tokens/s, profiler on); "
        + (
            f"device busy {busy:.3f} s = {100 * busy / wall:.1f}% of the wall time"
            if cuda
            else f"operators {busy:.3f} s"
        )
    )
    groups: dict[str, float] = {}
    for name, seconds, _ in timed:
        group = next((g for g, pattern in GROUPS if re.search(pattern, name, re.I)), None)
        group = group or "other elementwise"
        groups[group] = groups.get(group, 0.0) + seconds
    by_group = sorted(groups.items(), key=lambda item: -item[1])
    group_cells = [(g, f"{s:.3f}", f"{100 * s / busy:.1f}%") for g, s in by_group]
    top = sorted(timed, key=lambda item: -item[1])[: args.top]
    kernel_cells = [(n[:90], c, f"{s:.4f}", f"{100 * s / busy:.1f}%") for n, s, c in top]
    text = "\n\n".join(
        [
            caption,
            table(("group", "seconds", "share of busy time"), group_cells),
            table(("kernel", "calls", "seconds", "share"), kernel_cells),
        ]
    )
    publish(environment(args.device), text, args.json, groups=groups, wall_s=wall, busy_s=busy)
    return 0
