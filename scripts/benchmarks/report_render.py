"""report.json of `bench.py report` (`make gpu-report`) as Markdown sections and plots: report.md
is made from them, and `--docs` (`make gpu-docs`) puts the same sections into the docs.

Each docs section lies between `<!-- gpu-report:NAME -->` and `<!-- /gpu-report:NAME -->` in a
page under docs/ (NAME: environment, training, converge, decoding, serving, ddp); everything
between is replaced by the report's section, headed by the days, device and command lines that
made it; the plots are drawn again from report.json into docs/images/gpu-report/ (a report
fetched from another machine needs no plot files beside it) and report.json itself is kept in
docs/gpu-report/, so that the committed docs keep their source. Text outside the markers is
never touched, and nothing is written unless every marker pairs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.harness import REPO, say, table
from translate.files import write_atomic

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
        "(`scripts/bench.py train`).",
        "",
    ]
    cells = []
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
                cells.append(
                    (result["config"], f"{result['max_tokens']:,}")
                    + (f"{result.get('target_tokens_per_batch', 0):,.0f}", row["label"])
                    + (f"{row['tokens_per_s']:,.0f}", "" if first is None else f"{first:,.0f}")
                    + (versus, f"{row['tflops']:.1f}", mfu)
                )
    headers = ("config", "padded tokens a batch", "target tokens a batch", "row", "target tokens/s")
    lines.append(table(headers + ("first round", "against", "TFLOP/s", "MFU"), cells, "lrrlrrrrr"))
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
        table(
            ("updates", *(f"{step:,}" for step, _ in run["dev_bleu"])),
            [
                ("dev BLEU (greedy)", *(f"{bleu:.2f}" for _, bleu in run["dev_bleu"])),
                ("dev perplexity", *(f"{ppl:.2f}" for _, ppl in run["dev_ppl"])),
            ],
        ),
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

    def row(label: str, result: dict) -> tuple:
        rate = result.get("tokens_per_s")
        test, greedy = result["test"], result["test_greedy"]
        return (label, f"{result['updates']:,}", f"{rate:,.0f}" if rate else "-") + (
            f"{test['bleu']:.2f} / {test['chrf']:.2f}",
            f"{greedy['bleu']:.2f} / {greedy['chrf']:.2f}",
        )

    headers = ("run", "updates", "target tokens/s", "test BLEU / chrF2 (its search)", "greedy")
    return [
        f"The same run with `{fast['fast_path']}`, under the same cap (its compile counted in it):",
        "",
        table(headers, [row("as configured", run), row(fast["fast_path"], fast)]),
    ]


def decoding(report: dict) -> str:
    results = done(report, "decoding")
    if not results:
        return with_gaps(["No decoding was measured."], report, "decode-")
    lines = [
        "Whole test split of the bundled corpus, the converge run's checkpoint (`scripts/bench.py "
        "translate`; the others at length penalty 0, where all rank by the same score).",
        "",
    ]
    cells = []
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
            cells.append(
                (result["precision"], system, row["beam"], f"{row['length_penalty']:g}")
                + (f"{row['sentences_per_s']:,.1f}", f"{row['tokens_per_s']:,.0f}")
                + (f"{row['bleu']:.2f}", f"{row['chrf']:.2f}", same, ratio)
            )
    headers = ("precision", "system", "beam", "length penalty", "sent/s", "tok/s", "BLEU", "chrF")
    lines.append(table(headers + ("same as ours", "ours / this"), cells, "llrrrrrrrr"))
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
        f"(`scripts/bench.py serve --device {result['device']}`); translate-cli on the same "
        f"{result['sentences']:,} sentences as one file: "
        + ", ".join(f"{value:,.1f}" for value in cli)
        + " sentences/s (before and after).",
        "",
    ]
    cells = [
        (row["clients"], f"{row['sentences_per_s']:,.1f}")
        + (f"{row['sentences_per_s'] / row['ceiling']:.0%}", f"{row['batch']:.1f}")
        + (f"{row['model_busy']:.0%}", *(f"{1000 * row[q]:.0f}" for q in ("p50", "p95", "p99")))
        + (row["errors"],)
        for row in result["rows"]
    ]
    headers = ("clients", "sent/s", "of translate-cli", "sentences a batch", "model busy")
    lines.append(table(headers + ("p50 ms", "p95 ms", "p99 ms", "errors"), cells, "r" * 9))
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
            table(
                ("run", "updates", "target tokens/s (median)", "last train loss"),
                [
                    (label, f"{result[key]['updates']:,}", f"{result[key]['tokens_per_s']:,.0f}")
                    + (f"{result[key]['last_loss']:.3f}",)
                    for key, label in (
                        ("one", "one process"),
                        ("all", f"{result['processes']} processes"),
                    )
                ],
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
    steps = report.get("steps", {}).values()
    # Steps recorded before steps carried their day ran on the report's day.
    days = sorted({step.get("date") or report["date"] for step in steps})
    commits = sorted({step["commit"] for step in steps if step.get("commit")})
    commits_text = f", {'commits' if len(commits) > 1 else 'commit'} {', '.join(commits)}"
    return f"{', '.join(days or [report['date']])}, {device}{torch}" + (
        commits_text if commits else ""
    )


def provenance(report: dict) -> str:
    return f"`{report['command']}`, {when_and_where(report)}"


def plotted(report: dict) -> list[str]:
    """The sections `render_plots` draws a plot of: those with data for one."""
    runs = converge_runs(report)[0]
    return [
        section
        for section, data in (
            ("training", done(report, "training")),
            ("converge", runs and runs[0]["dev_bleu"]),
        )
        if data
    ]


def render_plots(report: dict, out: Path) -> dict[str, Path]:
    """PNG plots of what a person would rather see than read: MFU against the batch size (the knee)
    and the dev-BLEU curve. Returns {section: path} for those that had data."""
    plots = {}
    if not plotted(report):
        return plots
    results = done(report, "training")
    configs = sorted({result["config"] for result in results})
    runs, fast = converge_runs(report)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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


def render_markdown(report: dict, plots: dict[str, Path]) -> str:
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
            lines += [f"![{TITLES[section]}]({plots[section].name})", ""]
    notes = [
        (name, step["status"], f"{step['seconds']:.0f}")
        + (step["message"].replace("|", "\\|").replace("\n", " ")[:240],)
        for name, step in report.get("steps", {}).items()
    ]
    lines += ["## Steps", "", table(("step", "status", "seconds", "note"), notes, "llrl")]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The docs' sections

MARKER = re.compile(r"<!-- (/?)gpu-report:([a-z]+) -->")
IMAGES = "images/gpu-report"
KEPT_REPORT = "gpu-report/report.json"


def block(report: dict, name: str, images: dict[str, str]) -> str:
    lines = [
        f"_From {provenance(report)}; written by `scripts/bench.py report --docs` from the "
        "report's report.json: edit the report, not this text._",
        "",
        RENDERERS[name](report),
    ]
    if name in images:
        lines += ["", f"![{TITLES[name]}]({images[name]})"]
    return "\n".join(lines)


def fill(text: str, path: Path, report: dict, images: dict[str, str]) -> tuple[str, list[str]]:
    """`text` with every marked section replaced; the names filled. A marker without its pair,
    or with an unknown name, is an error naming the file and line."""
    pieces, filled, position, open_marker = [], [], 0, None
    for match in MARKER.finditer(text):
        closing, name = match.group(1) == "/", match.group(2)
        where = f"{path}:{text.count(chr(10), 0, match.start()) + 1}"
        if name not in RENDERERS:
            raise SystemExit(
                f"error: {where}: unknown GPU report section {name!r} (known: {', '.join(RENDERERS)})"
            )
        if not closing:
            if open_marker:
                raise SystemExit(
                    f"error: {where}: gpu-report:{name} opens inside gpu-report:{open_marker[0]}"
                )
            open_marker = (name, match.end())
            pieces.append(text[position : match.end()])
            continue
        if not open_marker or open_marker[0] != name:
            raise SystemExit(
                f"error: {where}: /gpu-report:{name} closes a section that was not opened"
            )
        pieces += ["\n" + block(report, name, images) + "\n", match.group(0)]
        position, open_marker = match.end(), None
        filled.append(name)
    if open_marker:
        raise SystemExit(
            f"error: {path}: gpu-report:{open_marker[0]} is never closed "
            f"(<!-- /gpu-report:{open_marker[0]} -->)"
        )
    pieces.append(text[position:])
    return "".join(pieces), filled


def fill_docs(report_path: Path, docs: Path | None, allow_dry_run: bool) -> int:
    """The GPU sections of every page under `docs` (default docs/) filled from `report_path`, its
    plots drawn again beside them and the report kept there; nothing is written unless every
    page's markers pair."""
    docs = docs or REPO / "docs"
    if not report_path.is_file():
        raise SystemExit(f"error: {report_path}: no report here (make one with: make gpu-report)")
    raw = report_path.read_bytes()  # parsed here, and kept as it is beside the docs
    try:
        report = json.loads(raw)
        report["command"], report["steps"]
    except (ValueError, KeyError) as error:
        raise SystemExit(
            f"error: {report_path}: not a report.json of the GPU report ({error})"
        ) from None
    if report.get("dry_run") and not allow_dry_run:
        raise SystemExit(
            f"error: {report_path} is a dry run's (toy sizes on the CPU): its figures do not belong "
            "in the docs (--allow-dry-run fills them anyway, e.g. into a copy)"
        )
    images = {name: f"{IMAGES}/{PLOTS[name]}" for name in plotted(report)}
    pages, every = {}, []
    for path in sorted(docs.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        new, filled = fill(text, path, report, images)
        if new != text:
            pages[path] = new
        every += [f"{name} ({path.name})" for name in filled]
    if images:
        (docs / IMAGES).mkdir(parents=True, exist_ok=True)
        render_plots(report, docs / IMAGES)
    (docs / KEPT_REPORT).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(docs / KEPT_REPORT, raw)
    for path, new in pages.items():
        write_atomic(path, new.encode("utf-8"))
    missing = sorted(set(RENDERERS) - {entry.split(" ")[0] for entry in every})
    say(
        f"gpu-report docs: filled {', '.join(every) or 'nothing'}"
        + (f"; no place in {docs} for {', '.join(missing)}" if missing else "")
    )
    return 0
