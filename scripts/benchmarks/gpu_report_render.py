"""report.json of `make gpu-report` as Markdown sections and plots: report.md is made from them,
and scripts/benchmarks/gpu_report_docs.py puts the same sections into the docs."""

from __future__ import annotations

from pathlib import Path

PLOTS = {"training": "training-mfu.png", "converge": "converge-dev-bleu.png"}  # file by section
SECTIONS = ("environment", "training", "converge", "decoding", "serving", "ddp")
TITLES = {
    "environment": "Machine",
    "training": "Training throughput and MFU",
    "converge": "configs/converge.yaml, capped",
    "decoding": "Decoding",
    "serving": "translate-serve",
    "ddp": "DDP",
}


def size_label(tokens: int) -> str:
    """A batch size as the report names it: 32k, or 512."""
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def done(report: dict, section: str) -> list[dict]:
    """The results of the section's steps that ran to the end, in run order."""
    return [
        step["result"]
        for step in report.get("steps", {}).values()
        if step["status"] == "ok" and step["section"] == section
    ]


def why_not(step: dict) -> str:
    """Why a step has no figures, in words: for one that ran, how long and its last output line
    (its command is in the report's commands)."""
    if step["status"] not in ("timed out", "failed"):
        return f"{step['status']} ({step['message']})" if step["message"] else step["status"]
    last = step["message"].rsplit(" / ", 1)[-1].split("its last output: ")[-1].strip()
    return f"{step['status']} after {step['seconds']:.0f} s" + (
        f", last output: {last}" if last else ""
    )


def not_done(report: dict, prefix: str) -> list[str]:
    """'name: status (why)' of the steps named `prefix...` that did not finish."""
    return [
        f"`{name}`: {why_not(step)}"
        for name, step in report.get("steps", {}).items()
        if name.startswith(prefix) and step["status"] != "ok"
    ]


def with_gaps(lines: list[str], report: dict, prefix: str) -> str:
    missing = not_done(report, prefix)
    if missing:
        lines += ["", "Not measured in this report: " + "; ".join(missing) + "."]
    return "\n".join(lines)


def converge_runs(report: dict) -> tuple[list[dict], list[dict]]:
    """The converge runs as configured (whose checkpoint the decoding and serving steps measure)
    and those with the fast path's settings (fixed shapes, compiled step), each in run order."""
    results = done(report, "converge")
    return (
        [run for run in results if not run.get("fast_path")],
        [run for run in results if run.get("fast_path")],
    )


def converge_run(converge: dict) -> dict:
    """What names a converge run, from its result: the checkpoint of each step that measured it
    records this, so a rerun of converge (a new checkpoint) shows which figures are older."""
    return {key: converge[key] for key in ("updates", "finished") if key in converge}


def earlier_checkpoint(report: dict, result: dict) -> str:
    """'' when `result` measured the converge section's checkpoint; else which run's it measured
    (a rerun converge step replaces the checkpoint, the steps measured before keep their figures)."""
    converge = converge_runs(report)[0]
    current = converge_run(converge[0]) if converge else {}
    theirs = result.get("checkpoint")
    if theirs == current:
        return ""
    if not theirs:
        return "a checkpoint of an unrecorded converge run"
    return f"an earlier converge run's checkpoint ({theirs['updates']:,} updates)"


def mixed_checkpoints(report: dict, named: list[tuple[str, dict]]) -> list[str]:
    """A note naming the (name, result)s measured on another checkpoint than the converge section's."""
    others = [(name, earlier_checkpoint(report, result)) for name, result in named]
    others = [(name, which) for name, which in others if which]
    if not others:
        return []
    return [
        "",
        "Measured on another checkpoint than the converge section's, so compare the systems "
        "within their own rows, not their BLEU with the other rows: "
        + "; ".join(f"{name}: {which}" for name, which in others)
        + ".",
    ]


def environment(report: dict) -> str:
    env = done(report, "environment")
    if not env:
        return with_gaps(["The machine was not probed."], report, "environment")
    env = env[0]
    packages = ", ".join(
        f"{name} {version}" for name, version in env["packages"].items() if version
    )
    device = ", ".join(env["gpus"]) or "no GPU (the CPU)"
    return "\n".join(
        [
            f"- device: {device}; driver {env.get('driver') or 'none'}; CUDA {env.get('cuda') or 'none'}; "
            f"cuDNN {env.get('cudnn') or 'none'}; {env['cpu_count']} CPUs",
            f"- torch {env['torch']}, Python {env['python']}, {packages}",
            f"- {env['platform']}",
        ]
    )


def training(report: dict) -> str:
    results = sorted(done(report, "training"), key=lambda r: (r["config"], r["max_tokens"]))
    if not results:
        return with_gaps(["No training throughput was measured."], report, "train-")
    lines = [
        "Target (non-pad) tokens per second, the median over rounds (where a round is one pass "
        "over the batches, `--steps 16 --batches 16`, over the rounds after the first, which is "
        "given apart; in the earlier steps' `--steps 8`, over all of them), each row on the same "
        "batches; MFU is "
        "the model FLOPs counted from the architecture over the device's bf16 peak "
        "(`scripts/benchmarks/benchmark_train.py`).",
        "",
        "| config | padded tokens a batch | target tokens a batch | row | target tokens/s "
        "| first round | against | TFLOP/s | MFU |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for rows in result["results"].values():
            # the fixed-shape rows against ours on the exact batches of the same run, the
            # others against Marian
            base, label = ("ours", "ours") if result.get("shaped") else ("marian", "Marian")
            against = rows.get(base, {}).get("tokens_per_s")
            for name, row in rows.items():
                if result.get("shaped") and name in ("ours", "ours-postnorm", "marian"):
                    continue  # the step's own baselines
                mfu = f"{row['tflops'] / row['peak_tflops']:.1%}" if row.get("peak_tflops") else ""
                versus = f"{row['tokens_per_s'] / against:.2f}x {label}" if against else ""
                first = row.get("first_round_tokens_per_s", (row.get("rounds") or [None])[0])
                lines.append(
                    f"| {result['config']} | {result['max_tokens']:,} | "
                    f"{result.get('target_tokens_per_batch', 0):,.0f} | {row['label']} | "
                    f"{row['tokens_per_s']:,.0f} | {'' if first is None else f'{first:,.0f}'} | "
                    f"{versus} | {row['tflops']:.1f} | {mfu} |"
                )
    peaks = {
        f"{row['peak_tflops']:.1f} TFLOP/s ({row['peak_source']})"
        for result in results
        for rows in result["results"].values()
        for row in rows.values()
        if row.get("peak_tflops")
    }
    if peaks:
        lines += ["", "Peak: " + "; ".join(sorted(peaks)) + "."]
    best = {}
    for result in results:
        for rows in result["results"].values():
            for name, row in rows.items():
                if row.get("peak_tflops") and not name.startswith("marian"):
                    mfu = row["tflops"] / row["peak_tflops"]
                    if mfu > best.get(result["config"], (0, ""))[0]:
                        best[result["config"]] = (
                            mfu,
                            f"{row['label']} at {result['max_tokens']:,}",
                        )
    if best:
        lines += [
            "",
            "Best MFU of ours: "
            + "; ".join(
                f"{config} {mfu:.1%} ({where})" for config, (mfu, where) in sorted(best.items())
            )
            + ".",
        ]
    return with_gaps(lines, report, "train-")


def converge(report: dict) -> str:
    results, fast = converge_runs(report)
    if not results:
        return with_gaps(["The converge run did not finish."], report, "converge")
    run = results[0]
    lines = [
        f"`translate-train fit {run['command']}`: {run['updates']:,} updates"
        + (
            f", {run['tokens_per_s']:,.0f} target tokens/s (median of the logged windows)"
            if run.get("tokens_per_s")
            else ""
        )
        + ".",
        "",
        "| updates | " + " | ".join(f"{step:,}" for step, _ in run["dev_bleu"]) + " |",
        "|---|" + "---:|" * len(run["dev_bleu"]),
        "| dev BLEU (greedy) | " + " | ".join(f"{bleu:.2f}" for _, bleu in run["dev_bleu"]) + " |",
        "| dev perplexity | " + " | ".join(f"{ppl:.2f}" for _, ppl in run["dev_ppl"]) + " |",
        "",
    ]
    for label, test in (
        ("its checkpoint's search (beam, tuned length penalty)", run["test"]),
        ("greedy", run["test_greedy"]),
    ):
        lines.append(
            f"- test, {label}: **{test['bleu']:.2f} BLEU / {test['chrf']:.2f} chrF2** "
            f"({test['lines']:,} lines; `{test['bleu_signature']}`)"
        )
    if fast:
        lines += ["", *fast_path_lines(run, fast[0])]
    return with_gaps(lines, report, "converge")


def fast_path_lines(run: dict, fast: dict) -> list[str]:
    """The converge run beside the same run with fixed shapes and the compiled step, same cap."""

    def row(label: str, result: dict) -> str:
        rate = result.get("tokens_per_s")
        test, greedy = result["test"], result["test_greedy"]
        return (
            f"| {label} | {result['updates']:,} | {f'{rate:,.0f}' if rate else '-'} | "
            f"{test['bleu']:.2f} / {test['chrf']:.2f} | {greedy['bleu']:.2f} / {greedy['chrf']:.2f} |"
        )

    return [
        f"The same run with `{fast['fast_path']}`, under the same cap (its compile counted in it):",
        "",
        "| run | updates | target tokens/s | test BLEU / chrF2 (its search) | greedy |",
        "|---|---:|---:|---:|---:|",
        row("as configured", run),
        row(fast["fast_path"], fast),
    ]


def decoding(report: dict) -> str:
    results = done(report, "decoding")
    if not results:
        return with_gaps(["No decoding was measured."], report, "decode-")
    lines = [
        "Whole test split of the bundled corpus, the converge run's checkpoint (`scripts/benchmarks/benchmark_translate.py`; "
        "the others at length penalty 0, where all rank by the same score).",
        "",
        "| precision | system | beam | length penalty | sent/s | tok/s | BLEU | chrF | same as ours | ours / this |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        ours = {
            (row["beam"], row["length_penalty"]): row
            for row in result["rows"]
            if row["system"] == "ours"
        }
        for row in result["rows"]:
            mine = ours.get((row["beam"], row["length_penalty"]))
            ratio = (
                f"{mine['sentences_per_s'] / row['sentences_per_s']:.2f}x"
                if mine and row["system"] != "ours"
                else ""
            )
            same = (
                f"{row['identical_to_ours']}/{row['sentences']}"
                if row.get("identical_to_ours") is not None and row["system"] != "ours"
                else ""
            )
            system = row["system"] + (", restricted" if row["restrict"] else "")
            lines.append(
                f"| {result['precision']} | {system} | {row['beam']} | {row['length_penalty']:g} | "
                f"{row['sentences_per_s']:,.1f} | {row['tokens_per_s']:,.0f} | {row['bleu']:.2f} | "
                f"{row['chrf']:.2f} | {same} | {ratio} |"
            )
    lines += mixed_checkpoints(report, [(result["precision"], result) for result in results])
    probe = done(report, "ctranslate2")
    without = [result["precision"] for result in results if not result["ctranslate2"]]
    if probe and not probe[0]["usable"]:
        lines += [
            "",
            f"CTranslate2 was left out: it could not translate on this device ({probe[0]['reason']}).",
        ]
    elif probe and without:
        lines += [
            "",
            f"CTranslate2 was left out of {', '.join(without)}: it offers no such compute type on this "
            f"device (it offers {', '.join(probe[0].get('compute_types', []))}).",
        ]
    return with_gaps(lines, report, "decode-")


def serving(report: dict) -> str:
    results = done(report, "serving")
    if not results:
        return with_gaps(["translate-serve was not measured."], report, "serve")
    result = results[0]
    cli = result["cli_sentences_per_s"]
    lines = [
        f"Closed-loop clients over loopback, one test sentence a request, {result['seconds']:g} s a level "
        f"(`scripts/benchmarks/benchmark_serve.py --device {result['device']}`); translate-cli on the same "
        f"{result['sentences']:,} sentences as one file: "
        + ", ".join(f"{value:,.1f}" for value in cli)
        + " sentences/s (before and after).",
        "",
        "| clients | sent/s | of translate-cli | sentences a batch | model busy | p50 ms | p95 ms | p99 ms | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['clients']} | {row['sentences_per_s']:,.1f} | {row['sentences_per_s'] / row['ceiling']:.0%} "
            f"| {row['batch']:.1f} | {row['model_busy']:.0%} | {1000 * row['p50']:.0f} | "
            f"{1000 * row['p95']:.0f} | {1000 * row['p99']:.0f} | {row['errors']} |"
        )
    lines += mixed_checkpoints(report, [("translate-serve", result)])
    return with_gaps(lines, report, "serve")


def ddp(report: dict) -> str:
    results = done(report, "ddp")
    if not results:
        return with_gaps(["DDP was not run."], report, "ddp")
    result = results[0]
    if result["gpus"] > 1:
        how = (
            f"{result['gpus']} GPUs against one; scaling efficiency (tokens/s over {result['gpus']} x one's): "
            f"**{result['efficiency']:.0%}**"
        )
    else:
        how = (
            "two processes on one device (gloo), started as a launcher on two nodes starts them: this proves the "
            f"path, it is not a scaling figure (tokens/s over 2 x one process's: {result['efficiency']:.0%})"
        )
    return "\n".join(
        [
            how + ".",
            "",
            "| run | updates | target tokens/s (median) | last train loss |",
            "|---|---:|---:|---:|",
            *(
                f"| {label} | {result[key]['updates']:,} | {result[key]['tokens_per_s']:,.0f} | "
                f"{result[key]['last_loss']:.3f} |"
                for key, label in (
                    ("one", "one process"),
                    ("all", f"{result['processes']} processes"),
                )
            ),
        ]
    )


RENDERERS = {
    "environment": environment,
    "training": training,
    "converge": converge,
    "decoding": decoding,
    "serving": serving,
    "ddp": ddp,
}


def when_and_where(report: dict) -> str:
    env = done(report, "environment")
    device = ", ".join(env[0]["gpus"]) if env and env[0]["gpus"] else "the CPU"
    torch = f", torch {env[0]['torch']}" if env else ""
    # Steps recorded before steps carried their day ran on the report's day.
    days = sorted({step.get("date") or report["date"] for step in report.get("steps", {}).values()})
    return f"{', '.join(days or [report['date']])}, {device}{torch}"


def provenance(report: dict) -> str:
    return f"`{report['command']}`, {when_and_where(report)}"


def render_plots(report: dict, out: Path) -> dict[str, Path]:
    """PNG plots of what a person would rather see than read: MFU against the batch size (the knee)
    and the dev-BLEU curve. Returns {section: path} for those that had data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = {}
    results = done(report, "training")
    configs = sorted({result["config"] for result in results})
    if configs:
        figure, axes = plt.subplots(1, len(configs), figsize=(5.5 * len(configs), 4), squeeze=False)
        for axis, config in zip(axes[0], configs):
            mine = sorted(
                (r for r in results if r["config"] == config), key=lambda r: r["max_tokens"]
            )
            labels = {
                name: row["label"]
                for r in mine
                for rows in r["results"].values()
                for name, row in rows.items()
            }
            for name, label in labels.items():
                points = []
                for result in mine:
                    for rows in result["results"].values():
                        row = rows.get(name)
                        if row and row.get("peak_tflops"):
                            points.append(
                                (result["max_tokens"], 100 * row["tflops"] / row["peak_tflops"])
                            )
                if points:
                    axis.plot(*zip(*points), marker="o", label=label)
            axis.set_xscale("log", base=2)
            sizes = [result["max_tokens"] for result in mine]
            axis.set_xticks(sizes, [size_label(size) for size in sizes])
            axis.minorticks_off()
            axis.set_xlabel("padded tokens a batch")
            axis.set_ylabel("MFU (%)")
            axis.set_title(config)
            axis.grid(alpha=0.3)
        axes[0][-1].legend(fontsize=7)
        figure.suptitle(f"Training MFU, bf16\n{provenance(report).replace('`', '')}", fontsize=8)
        figure.tight_layout()
        plots["training"] = out / PLOTS["training"]
        figure.savefig(plots["training"], dpi=110)
        plt.close(figure)
    runs, fast = converge_runs(report)
    if runs and runs[0]["dev_bleu"]:
        figure, axis = plt.subplots(figsize=(5.5, 3.5))
        axis.plot(*zip(*runs[0]["dev_bleu"]), marker="o", label="as configured")
        if fast and fast[0]["dev_bleu"]:
            axis.plot(*zip(*fast[0]["dev_bleu"]), marker="s", label=fast[0]["fast_path"])
            axis.legend(fontsize=7)
        axis.set_xlabel("updates")
        axis.set_ylabel("dev BLEU (greedy)")
        axis.set_title(f"configs/converge.yaml\n{provenance(report).replace('`', '')}", fontsize=8)
        axis.grid(alpha=0.3)
        figure.tight_layout()
        plots["converge"] = out / PLOTS["converge"]
        figure.savefig(plots["converge"], dpi=110)
        plt.close(figure)
    return plots


def render_markdown(report: dict, plots: dict[str, Path], image_prefix: str = "") -> str:
    lines = [f"# GPU report ({when_and_where(report)})", "", f"Made by `{report['command']}`.", ""]
    if report.get("dry_run"):
        lines += [
            "**Dry run**: every step at toy size on the CPU, to prove the path; its figures say nothing "
            "about speed or quality.",
            "",
        ]
    for section in SECTIONS:
        lines += [f"## {TITLES[section]}", "", RENDERERS[section](report), ""]
        if section in plots:
            lines += [f"![{TITLES[section]}]({image_prefix}{plots[section].name})", ""]
    lines += ["## Steps", "", "| step | status | seconds | note |", "|---|---|---:|---|"]
    for name, step in report.get("steps", {}).items():
        note = step["message"].replace("|", "\\|").replace("\n", " ")[:240]
        lines.append(f"| {name} | {step['status']} | {step['seconds']:.0f} | {note} |")
    return "\n".join(lines) + "\n"
