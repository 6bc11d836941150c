"""`make gpu-report` (`scripts/bench.py report`), run as a user runs it: the dry run makes every
step's figures on the CPU through the tool's other modes, the step runner records a failed, stuck
or unrun step and goes on, and the docs fill from a report between their markers only, the
committed ones being what their kept report renders."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO
from processes import process_table

from translate.process_group import run_group

TOOL = REPO / "scripts" / "bench.py"
KEPT = REPO / "docs" / "gpu-report" / "report.json"  # the report the docs were filled from
SECTIONS = ("environment", "training", "converge", "decoding", "serving", "ddp")
MARKER = re.compile(r"<!-- (/?)gpu-report:([a-z]+) -->")
PNG = b"\x89PNG\r\n\x1a\n"
FAST_PATH = "converge-fixed-compiled"


def report_tool(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """The report mode run as a group that ends whole, on the timeout too (no orphan)."""
    return run_group(
        [sys.executable, str(TOOL), "report", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def blocks(text: str) -> dict[str, str]:
    """The GPU sections of a page, by name."""
    found = re.findall(r"<!-- gpu-report:(\w+) -->(.*?)<!-- /gpu-report:\1 -->", text, flags=re.S)
    return dict(found)


def strip_blocks(text: str) -> str:
    return re.sub(r"<!-- gpu-report:(\w+) -->.*?<!-- /gpu-report:\1 -->", "", text, flags=re.S)


def filled_docs(report: Path, docs: Path, *args: str) -> subprocess.CompletedProcess:
    """A copy of docs/ at `docs` filled from `report` (`--docs`)."""
    shutil.copytree(REPO / "docs", docs)
    return report_tool("--docs", "--report", report, "--docs-dir", docs, *args)


def every_block(docs: Path) -> dict[str, str]:
    return {
        name: text for page in docs.glob("*.md") for name, text in blocks(page.read_text()).items()
    }


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, bundled_corpus_cache) -> Path:
    out = tmp_path_factory.mktemp("gpu-report")
    done = report_tool("--dry-run", "--out", out, "--cache-dir", bundled_corpus_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def cpu_precision(report: dict) -> tuple[str, str]:
    """The precision the dry run ran in (translate-train's choice for this CPU), and its name
    in the train mode's results."""
    precision = report["steps"]["environment"]["result"]["cpu_precision"]
    return precision, "bf16" if precision == "bf16-mixed" else "fp32"


def listed(*args: str) -> list[str]:
    done = report_tool(*args, "--list", timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.slow
def test_the_dry_run_records_every_step_with_its_figures(dry_run):
    report = read(dry_run)
    steps = report["steps"]
    assert report["dry_run"] and report["command"].startswith("scripts/bench.py report --dry-run")
    assert list(steps) == listed("--dry-run")
    failed = {name: step["message"] for name, step in steps.items() if step["status"] != "ok"}
    # the CPU's own precision: bf16 only where it has bfloat16 instructions, as translate-train
    environment = steps["environment"]["result"]
    precision, key = cpu_precision(report)
    assert environment["cpu_precision"] == precision and environment["cpu_precision_why"]
    not_run = {"decode-fp16": "16-mixed (float16 autocast) needs a CUDA device"}
    if precision != "bf16-mixed":
        not_run["decode-bf16"] = (
            "bf16-mixed would be emulated: this CPU has no bfloat16 instructions"
        )
    assert failed == not_run
    assert environment["torch"].startswith("2.")
    # every measurement is one of the tool's own modes, and each step names its day and commit
    for name, mode in (
        ("train-tiny-512", "train"),
        ("decode-fp32", "translate"),
        ("serve", "serve"),
    ):
        assert f"scripts/bench.py {mode} " in steps[name]["commands"][0], steps[name]["commands"]
    assert all(step["date"] and step["commit"] for step in steps.values() if step["status"] == "ok")

    sizes = report["scale"]["batch_tokens"]
    trained = {name: step["result"] for name, step in steps.items() if name.startswith("train-")}
    assert sorted(r["max_tokens"] for n, r in trained.items() if "shaped" not in n) == sizes
    for name, train in trained.items():
        assert 0 < train["target_tokens_per_batch"] <= train["max_tokens"]
        rows = train["results"][key]
        if train["shaped"]:
            # the fixed shapes, eager and with the compiled step (on the CPU here), beside ours
            # on the exact batches of the same run (the other rows are the other step's)
            assert set(rows) == {"ours", "ours-shaped", "ours-captured"}, name
            assert all(
                r["tokens_per_s"] > 0 and r["first_round_tokens_per_s"] > 0 for r in rows.values()
            )
            continue
        assert set(rows) == {
            "ours",
            "ours-postnorm",
            "marian",
            "ours-projected",
            "ours-compiled",
            "ours-math",
            "ours-unfused-adam",
        }
        assert all(
            row["tokens_per_s"] > 0 and 0 < row["tflops"] / row["peak_tflops"] < 1
            for row in rows.values()
        )

    converge = steps["converge"]["result"]
    assert [updates for updates, _ in converge["dev_bleu"]] == [4, 8] and converge["updates"] == 8
    assert converge["test"]["lines"] == converge["test_greedy"]["lines"] > 1000
    assert converge["test"]["bleu_signature"].startswith("nrefs:1|")
    # the same run with fixed shapes and the step `auto` chooses (eager on the CPU), same cap
    fast = steps[FAST_PATH]["result"]
    assert fast["fast_path"] == " ".join(report["scale"]["fast_path"]) and not converge["fast_path"]
    assert fast["command"].endswith(fast["fast_path"]) and fast["updates"] == 8
    assert fast["test"]["lines"] == converge["test"]["lines"]
    assert (dry_run / "steps" / FAST_PATH / "run" / "checkpoints").is_dir()

    decoded = {
        step["result"]["precision"]: step["result"]["rows"]
        for name, step in steps.items()
        if name.startswith("decode-") and step["status"] == "ok"
    }
    assert set(decoded) == {"bf16-mixed", "32-true"} - (set() if key == "bf16" else {"bf16-mixed"})
    systems = {row["system"] for row in decoded["32-true"]}
    assert {"ours", "transformers", "ctranslate2"} <= systems  # CTranslate2 translates on the CPU
    assert "ctranslate2" not in {
        row["system"] for row in decoded.get("bf16-mixed", [])
    }  # no bfloat16 on this CPU backend
    assert all(
        row["sentences"] == 24 and row["sentences_per_s"] > 0
        for rows in decoded.values()
        for row in rows
    )

    serve = steps["serve"]["result"]
    assert [row["clients"] for row in serve["rows"]] == [2, 4]
    assert all(row["errors"] == 0 and row["sentences_per_s"] > 0 for row in serve["rows"])

    ddp = steps["ddp"]["result"]  # two ranks, started with a launcher's environment, in step
    assert ddp["processes"] == 2 and ddp["one"]["updates"] == ddp["all"]["updates"] == 4

    run = {"updates": converge["updates"], "finished": converge["finished"]}
    for name in (
        "ctranslate2",
        *(f"decode-{p}" for p in ("bf16", "fp32") if p != "bf16" or key == p),
        "serve",
    ):
        assert steps[name]["result"]["checkpoint"] == run, name


@pytest.mark.slow
def test_the_dry_run_writes_its_markdown_and_plots(dry_run):
    text = (dry_run / "report.md").read_text()
    report = read(dry_run)
    assert text.startswith(f"# GPU report ({report['date']}, the CPU, torch 2.")
    assert "\nMade by `scripts/bench.py report --dry-run " in text
    for title in (
        "## Machine",
        "## Training throughput and MFU",
        "## Decoding",
        "## translate-serve",
        "## DDP",
    ):
        assert title in text
    _, key = cpu_precision(report)
    ours = report["steps"]["train-tiny-512"]["result"]["results"][key]["ours"]
    assert f"| {ours['tokens_per_s']:,.0f} |" in text
    # the fixed-shape rows against ours on the exact batches of their own run
    shaped = report["steps"]["train-shaped-tiny-512"]["result"]["results"][key]
    ratio = shaped["ours-captured"]["tokens_per_s"] / shaped["ours"]["tokens_per_s"]
    assert f"| {ratio:.2f}x ours |" in text
    assert "`decode-fp16`: skipped (16-mixed (float16 autocast) needs a CUDA device)" in text
    for plot in ("training-mfu.png", "converge-dev-bleu.png"):
        assert (dry_run / plot).read_bytes().startswith(PNG)
        assert f"]({plot})" in text


@pytest.mark.slow
def test_the_docs_fill_from_the_report_between_their_markers_only(dry_run, tmp_path):
    docs = tmp_path / "docs"
    refused = filled_docs(dry_run / "report.json", docs)
    assert refused.returncode != 0 and "is a dry run's" in refused.stderr
    assert all(
        (docs / page.name).read_text() == page.read_text() for page in (REPO / "docs").glob("*.md")
    )

    filled = report_tool(
        "--docs", "--report", dry_run / "report.json", "--docs-dir", docs, "--allow-dry-run"
    )
    assert filled.returncode == 0, filled.stderr
    report = read(dry_run)
    for page in (REPO / "docs").glob("*.md"):
        assert strip_blocks((docs / page.name).read_text()) == strip_blocks(page.read_text())
    sections = every_block(docs)
    ours = report["steps"]["train-tiny-1k"]["result"]["results"][cpu_precision(report)[1]]["ours"]
    assert f"| {ours['tokens_per_s']:,.0f} |" in sections["training"]
    assert "_From `scripts/bench.py report --dry-run " in sections["converge"]
    assert "written by `scripts/bench.py report --docs`" in sections["converge"]
    assert "![" in sections["converge"]
    assert json.loads((docs / "gpu-report" / "report.json").read_text()) == report
    converge = report["steps"]["converge"]["result"]["test"]
    assert f"**{converge['bleu']:.2f} BLEU / {converge['chrf']:.2f} chrF2**" in sections["converge"]
    fast = report["steps"][FAST_PATH]["result"]
    assert f"| {fast['fast_path']} | {fast['updates']:,} |" in sections["converge"]
    assert f"{fast['test']['bleu']:.2f} / {fast['test']['chrf']:.2f}" in sections["converge"]
    assert (docs / "images" / "gpu-report" / "converge-dev-bleu.png").read_bytes().startswith(PNG)
    assert "another checkpoint" not in sections["decoding"] + sections["serving"]
    pages = {page.name: page.read_text() for page in docs.glob("*.md")}
    again = report_tool(
        "--docs", "--report", dry_run / "report.json", "--docs-dir", docs, "--allow-dry-run"
    )
    assert again.returncode == 0
    assert {page.name: page.read_text() for page in docs.glob("*.md")} == pages  # a refill: same


@pytest.mark.slow
def test_figures_of_a_replaced_checkpoint_are_named_as_such(dry_run, tmp_path):
    report = read(dry_run)
    precision, key = cpu_precision(report)
    decoded = report["steps"][f"decode-{key}"]["result"]
    decoded["checkpoint"] = {"updates": 922, "finished": "2026-01-01T00:00:00+00:00"}
    report["steps"]["serve"]["result"].pop("checkpoint")
    changed = tmp_path / "report.json"
    changed.write_text(json.dumps(report))
    done = filled_docs(changed, tmp_path / "docs", "--allow-dry-run")
    assert done.returncode == 0, done.stderr
    sections = every_block(tmp_path / "docs")
    assert (
        f"{precision}: an earlier converge run's checkpoint (922 updates)" in sections["decoding"]
    )
    other = "32-true" if precision == "bf16-mixed" else "bf16-mixed"
    assert f"{other}:" not in sections["decoding"]
    assert "translate-serve: a checkpoint of an unrecorded converge run" in sections["serving"]


def test_every_report_section_has_one_place_in_the_docs_and_they_are_what_it_renders(tmp_path):
    places = [
        match.group(2)
        for page in sorted((REPO / "docs").glob("*.md"))
        for match in MARKER.finditer(page.read_text())
        if not match.group(1)
    ]
    assert sorted(places) == sorted(SECTIONS)
    done = filled_docs(KEPT, tmp_path / "docs")
    assert done.returncode == 0, done.stderr
    assert "no place" not in done.stderr
    assert all(f"{name} (" in done.stderr for name in SECTIONS), done.stderr
    changed = [
        page.name
        for page in (REPO / "docs").glob("*.md")
        if (tmp_path / "docs" / page.name).read_text() != page.read_text()
    ]
    assert not changed, f"{changed}: not what docs/gpu-report/report.json renders (make gpu-docs)"


@pytest.mark.parametrize(
    "page, error",
    [
        ("# t\n<!-- gpu-report:ddp -->\nold\n", r"page.md: gpu-report:ddp is never closed"),
        (
            "# t\n\n<!-- gpu-report:speed -->\n<!-- /gpu-report:speed -->\n",
            r"page.md:3: unknown GPU report section 'speed'",
        ),
        (
            "# t\n<!-- /gpu-report:ddp -->\n",
            r"page.md:2: /gpu-report:ddp closes a section that was not opened",
        ),
    ],
)
def test_an_unclosed_or_unknown_marker_is_named_with_its_file_and_line(tmp_path, page, error):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text(page)
    other = "# o\n<!-- gpu-report:environment -->\n<!-- /gpu-report:environment -->\n"
    (docs / "other.md").write_text(other)
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"command": "make gpu-report", "date": "2026-01-01", "steps": {}}))
    done = report_tool("--docs", "--report", report, "--docs-dir", docs, timeout=60)
    assert done.returncode != 0 and re.search(error, done.stderr), done.stderr
    assert sorted(path.name for path in docs.iterdir()) == [
        "other.md",
        "page.md",
    ]  # nothing written
    assert (docs / "other.md").read_text() == other


def step_processes(out: Path) -> list[int]:
    """The processes still running that a step of the report in `out` started."""
    mark = str(out).encode()
    return [
        pid
        for pid, (_, state, command) in process_table().items()
        if mark in command and state != "Z"
    ]


@pytest.mark.slow
def test_a_failed_stuck_or_unrun_step_is_recorded_and_the_report_goes_on(
    tmp_path, bundled_corpus_cache
):
    out, cache = tmp_path / "report", ("--cache-dir", bundled_corpus_cache)
    assert report_tool("--dry-run", "--out", out, *cache, "--steps", "environment").returncode == 0
    environment = read(out)["steps"]["environment"]
    assert environment["status"] == "ok"

    # converge gets what is left of the report's 0.6 s, runs out of it and ends whole; ddp is
    # left with nothing and not run
    started = time.monotonic()
    done = report_tool(
        "--dry-run", "--out", out, *cache, "--steps", "converge,ddp", "--minutes", "0.01"
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60
    steps = read(out)["steps"]
    assert steps["converge"]["status"] == "timed out"
    assert steps["ddp"]["status"] == "not run" and "minutes were spent" in steps["ddp"]["message"]
    assert steps["environment"] == environment  # what is done is kept
    deadline = time.monotonic() + 10
    while step_processes(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not step_processes(out), "a process of the stuck step outlived it"
    assert "| converge | timed out |" in (out / "report.md").read_text()

    # a step whose command fails; the report names each day a step ran
    kept = read(out)
    kept["steps"]["environment"]["date"] = "2025-12-31"
    (out / "report.json").write_text(json.dumps(kept))
    checkpoint = out / "steps" / "converge" / "run" / "checkpoints" / "last.ckpt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.write_bytes(b"not a checkpoint")
    done = report_tool("--dry-run", "--out", out, *cache, "--steps", "decode-fp32")
    assert done.returncode == 0, done.stderr
    steps = read(out)["steps"]
    assert (
        steps["decode-fp32"]["status"] == "failed"
        and "exit codes [1]" in steps["decode-fp32"]["message"]
    )
    text = (out / "report.md").read_text()
    assert text.startswith(
        f"# GPU report (2025-12-31, {time.strftime('%Y-%m-%d')}, the CPU, torch "
    )
    # The docs say why a step has no figures in words, not by its command line.
    failed = re.search(r"`decode-fp32`: failed after \d+ s, last output: ([^;\n]+)", text)
    said = (out / "steps" / "decode-fp32" / "stderr.log").read_text().strip().splitlines()[-1]
    assert failed and said.strip().startswith(failed.group(1).strip().removesuffix(".")), said
    stuck = re.search(r"`converge`: timed out after \d+ s[^;\n]*", text)
    assert stuck and sys.executable not in stuck.group(0), text


def test_the_report_names_each_command_line_that_filled_it_once(tmp_path):
    """decode-fp16 is skipped at once on a CPU (it needs CUDA): runs that start nothing."""
    out = tmp_path / "report"
    first = ["--dry-run", "--out", str(out), "--steps", "decode-fp16"]
    for args in (first, first, [*first, "--again"]):
        assert report_tool(*args, timeout=60).returncode == 0
    assert read(out)["command"] == "; ".join(
        [
            f"scripts/bench.py report {' '.join(first)}",
            f"scripts/bench.py report {' '.join(first)} --again",
        ]
    )


def test_converge_minutes_replaces_the_converge_run_s_time_cap(tmp_path):
    scales = {}
    for name, args in (
        ("dry", ["--dry-run"]),
        ("dry, 90 minutes", ["--dry-run", "--converge-minutes", "90"]),
        ("gpu, 2.5 minutes", ["--converge-minutes", "2.5"]),
    ):
        out = tmp_path / name
        assert (
            report_tool(*args, "--out", out, "--steps", "decode-fp16", timeout=60).returncode == 0
        )
        assert read(out)["steps"]["decode-fp16"]["status"] == "skipped"
        scales[name] = read(out)["scale"]["converge"]
    gpu = scales["gpu, 2.5 minutes"]
    assert gpu.count("--trainer.max_time") == 1
    assert gpu[gpu.index("--trainer.max_time") + 1] == "00:00:02:30"
    assert gpu[: gpu.index("--trainer.max_time")] == ["--config", "configs/converge.yaml"]
    dry = scales["dry, 90 minutes"]
    assert dry[-2:] == ["--trainer.max_time", "00:01:30:00"] and dry[:-2] == scales["dry"]


def test_a_report_of_the_other_kind_is_never_mixed_in(tmp_path):
    (tmp_path / "report.json").write_text(json.dumps({"dry_run": True, "steps": {}}))
    done = report_tool("--out", tmp_path, "--steps", "environment", timeout=60)
    assert done.returncode != 0 and "is a dry run's; pass another --out" in done.stderr
    done = report_tool("--dry-run", "--steps", "nonsense", "--out", tmp_path, timeout=60)
    assert done.returncode != 0 and "--steps: unknown nonsense" in done.stderr


def test_the_gpu_plan_has_every_step_the_dry_run_proves_at_full_size():
    names = listed()
    # the most wanted first: the fixed shapes and the compiled step, then the other switches
    assert names[:5] == [
        "environment",
        "train-shaped-base-32k",
        "train-shaped-big-32k",
        "train-base-32k",
        "train-big-32k",
    ]
    assert {
        f"train-{shaped}{config}-{size}k"
        for shaped in ("", "shaped-")
        for config in ("base", "big")
        for size in (8, 16, 32, 64)
    } <= set(names)
    assert {
        "converge",
        FAST_PATH,
        "ctranslate2",
        "decode-bf16",
        "decode-fp32",
        "decode-fp16",
        "serve",
        "ddp",
    } <= set(names)
    others = [
        [n for n in plan if not n.startswith("train-")] for plan in (names, listed("--dry-run"))
    ]
    assert others[0] == others[1]  # the dry run proves the same steps
