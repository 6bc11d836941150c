"""`make gpu-report`: the dry run makes every step's figures on the CPU, the step runner keeps
going past a failed or stuck step, and the docs fill from the report between their markers only."""

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

from translate.process_group import run_group

SCRIPTS = REPO / "scripts" / "benchmarks"
sys.path.insert(0, str(SCRIPTS))

import gpu_report  # noqa: E402
from gpu_report_docs import MARKER  # noqa: E402
from gpu_report_render import RENDERERS  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """A script run as a group that ends whole, on the timeout too (no orphan)."""
    return run_group(
        [sys.executable, str(SCRIPTS / name), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, bundled_corpus_cache) -> Path:
    out = tmp_path_factory.mktemp("gpu-report")
    done = script(
        "gpu_report.py", "--dry-run", "--out", str(out), "--cache-dir", str(bundled_corpus_cache)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def cpu_precision(report: dict) -> tuple[str, str]:
    """The precision the dry run ran in (translate-train's choice for this CPU), and its name
    in benchmark_train.py's results."""
    precision = report["steps"]["environment"]["result"]["cpu_precision"]
    return precision, "bf16" if precision == "bf16-mixed" else "fp32"


@pytest.mark.slow
def test_the_dry_run_records_every_step_with_its_figures(dry_run):
    report = json.loads((dry_run / "report.json").read_text())
    steps = report["steps"]
    assert report["dry_run"] and report["command"].startswith(
        "scripts/benchmarks/gpu_report.py --dry-run"
    )
    assert list(steps) == [step.name for step in gpu_report.steps(gpu_report.DRY)]
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

    assert steps["environment"]["result"]["torch"].startswith("2.")
    for size in gpu_report.DRY.batch_tokens:
        train = steps[gpu_report.training_step_name("tiny", size)]["result"]
        assert train["max_tokens"] == size and 0 < train["target_tokens_per_batch"] <= size
        rows = train["results"][key]
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
        # the fixed shapes, eager and with the compiled step (on the CPU here), beside ours on
        # the exact batches of the same run (the other rows are the step above's)
        shaped = steps[gpu_report.training_step_name("tiny", size, shaped=True)]["result"]
        rows = shaped["results"][key]
        assert set(rows) == {"ours", "ours-shaped", "ours-captured"}
        assert all(
            row["tokens_per_s"] > 0 and row["first_round_tokens_per_s"] > 0 for row in rows.values()
        )

    converge = steps["converge"]["result"]
    assert [updates for updates, _ in converge["dev_bleu"]] == [4, 8] and converge["updates"] == 8
    assert converge["test"]["lines"] == converge["test_greedy"]["lines"] > 1000
    assert converge["test"]["bleu_signature"].startswith("nrefs:1|")
    # the same run with fixed shapes and the step `auto` chooses (eager on the CPU), same cap
    fast = steps[gpu_report.FAST_PATH]["result"]
    assert fast["fast_path"] == " ".join(gpu_report.DRY.fast_path) and not converge["fast_path"]
    assert fast["command"].endswith(fast["fast_path"]) and fast["updates"] == 8
    assert fast["test"]["lines"] == converge["test"]["lines"]
    assert (dry_run / "steps" / gpu_report.FAST_PATH / "run" / "checkpoints").is_dir()

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

    ddp = steps["ddp"]["result"]
    assert ddp["processes"] == 2 and ddp["one"]["updates"] == ddp["all"]["updates"] == 4

    run = {"updates": converge["updates"], "finished": converge["finished"]}
    for name in (
        "ctranslate2",
        *(f"decode-{p}" for p in ("bf16", "fp32") if p != "bf16" or key == p),
        "serve",
    ):
        assert steps[name]["result"]["checkpoint"] == run, name


@pytest.mark.slow
def test_figures_of_a_replaced_checkpoint_are_named_as_such(dry_run):
    report = json.loads((dry_run / "report.json").read_text())
    assert "another checkpoint" not in RENDERERS["decoding"](report)
    assert "another checkpoint" not in RENDERERS["serving"](report)

    precision, key = cpu_precision(report)
    decoded = report["steps"][f"decode-{key}"]["result"]
    decoded["checkpoint"] = {"updates": 922, "finished": "2026-01-01T00:00:00+00:00"}
    report["steps"]["serve"]["result"].pop("checkpoint")
    decoding, serving = RENDERERS["decoding"](report), RENDERERS["serving"](report)
    assert f"{precision}: an earlier converge run's checkpoint (922 updates)" in decoding
    other = "32-true" if precision == "bf16-mixed" else "bf16-mixed"
    assert f"{other}:" not in decoding
    assert "translate-serve: a checkpoint of an unrecorded converge run" in serving


@pytest.mark.slow
def test_the_dry_run_writes_its_markdown_and_plots(dry_run):
    text = (dry_run / "report.md").read_text()
    report = json.loads((dry_run / "report.json").read_text())
    assert text.startswith(f"# GPU report ({report['date']}, the CPU, torch 2.")
    assert "\nMade by `scripts/benchmarks/gpu_report.py --dry-run " in text
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


def strip_blocks(text: str) -> str:
    return re.sub(r"<!-- gpu-report:(\w+) -->.*?<!-- /gpu-report:\1 -->", "", text, flags=re.S)


@pytest.mark.slow
def test_the_docs_fill_from_the_report_between_their_markers_only(dry_run, tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    refused = script(
        "gpu_report_docs.py", "--report", str(dry_run / "report.json"), "--docs", str(docs)
    )
    assert refused.returncode != 0 and "is a dry run's" in refused.stderr
    assert all(
        (docs / page.name).read_text() == page.read_text() for page in (REPO / "docs").glob("*.md")
    )

    filled = script(
        "gpu_report_docs.py",
        "--report",
        str(dry_run / "report.json"),
        "--docs",
        str(docs),
        "--allow-dry-run",
    )
    assert filled.returncode == 0, filled.stderr
    report = json.loads((dry_run / "report.json").read_text())
    benchmarks, training = (docs / "benchmarks.md").read_text(), (docs / "training.md").read_text()
    for name in ("benchmarks.md", "training.md"):
        assert strip_blocks((docs / name).read_text()) == strip_blocks(
            (REPO / "docs" / name).read_text()
        )
    ours = report["steps"]["train-tiny-1k"]["result"]["results"][cpu_precision(report)[1]]["ours"]
    assert f"| {ours['tokens_per_s']:,.0f} |" in benchmarks
    assert "_From `scripts/benchmarks/gpu_report.py --dry-run " in training and "![" in training
    assert json.loads((docs / "gpu-report" / "report.json").read_text()) == report
    converge = report["steps"]["converge"]["result"]["test"]
    assert f"**{converge['bleu']:.2f} BLEU / {converge['chrf']:.2f} chrF2**" in training
    fast = report["steps"][gpu_report.FAST_PATH]["result"]
    assert f"| {fast['fast_path']} | {fast['updates']:,} |" in training
    assert f"{fast['test']['bleu']:.2f} / {fast['test']['chrf']:.2f}" in training
    assert (docs / "images" / "gpu-report" / "converge-dev-bleu.png").read_bytes().startswith(PNG)
    again = script(
        "gpu_report_docs.py",
        "--report",
        str(dry_run / "report.json"),
        "--docs",
        str(docs),
        "--allow-dry-run",
    )
    assert (
        again.returncode == 0 and (docs / "benchmarks.md").read_text() == benchmarks
    )  # the same on a refill


def test_every_report_section_has_one_place_in_the_docs():
    places = [
        match.group(2)
        for page in sorted((REPO / "docs").glob("*.md"))
        for match in MARKER.finditer(page.read_text())
        if not match.group(1)
    ]
    assert sorted(places) == sorted(RENDERERS)


def test_an_unclosed_or_unknown_marker_is_named_with_its_file_and_line(tmp_path):
    from gpu_report_docs import fill

    page = tmp_path / "page.md"
    with pytest.raises(SystemExit, match=r"page.md: gpu-report:ddp is never closed"):
        fill("# t\n<!-- gpu-report:ddp -->\nold\n", page, {}, {})
    with pytest.raises(SystemExit, match=r"page.md:3: unknown GPU report section 'speed'"):
        fill("# t\n\n<!-- gpu-report:speed -->\n<!-- /gpu-report:speed -->\n", page, {}, {})
    with pytest.raises(
        SystemExit, match=r"page.md:2: /gpu-report:ddp closes a section that was not opened"
    ):
        fill("# t\n<!-- /gpu-report:ddp -->\n", page, {}, {})


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def fake_step(name: str, *commands: gpu_report.Command) -> gpu_report.Step:
    return gpu_report.Step(
        name,
        "test",
        plan=lambda context: list(commands),
        read=lambda context, directory: {"read": name},
    )


def test_a_failed_or_stuck_step_is_recorded_and_the_next_one_runs(tmp_path):
    child = tmp_path / "child.pid"
    stuck = python(
        "import subprocess, sys, time\n"
        f"open({str(child)!r}, 'w').write(str(subprocess.Popen(['sleep', '300']).pid))\n"
        "time.sleep(300)"
    )
    plan = [
        fake_step(
            "fails", gpu_report.Command(python("import sys; sys.exit('no such thing: the cause')"))
        ),
        fake_step("stuck", gpu_report.Command(stuck)),
        fake_step("works", gpu_report.Command(python("print('{}')"), "out.json")),
        fake_step("late", gpu_report.Command(python("pass"))),
    ]
    context = gpu_report.Context(tmp_path, tmp_path / "cache", gpu_report.DRY, {})
    report: dict = {"command": "make gpu-report", "date": "2026-01-01", "steps": {}}
    started = time.monotonic()
    gpu_report.run_steps(plan[:3], context, report, set(), False, caps=(2.0, 600.0))
    assert time.monotonic() - started < 30
    steps = json.loads((tmp_path / "report.json").read_text())["steps"]
    assert (
        steps["fails"]["status"] == "failed"
        and "no such thing: the cause" in steps["fails"]["message"]
    )
    assert steps["stuck"]["status"] == "timed out"
    assert steps["works"]["status"] == "ok" and steps["works"]["result"] == {"read": "works"}
    pid = int(child.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (
        not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    ), "the stuck step's child outlived it"
    assert "| stuck | timed out |" in (tmp_path / "report.md").read_text()

    # The docs say why a step has no figures in words, not by its command line; each step keeps
    # the day it ran, and a report made over several days names them all.
    from gpu_report_render import not_done, when_and_where

    why = dict(line.split(": ", 1) for line in not_done(report, ""))
    assert why["`fails`"].startswith("failed after ") and why["`fails`"].endswith(
        "last output: no such thing: the cause"
    ), why
    assert why["`stuck`"].startswith("timed out after ") and sys.executable not in why["`stuck`"]
    ran = {step["date"] for step in report["steps"].values()}
    assert ran == {time.strftime("%Y-%m-%d")}, ran
    earlier = {
        **report,
        "steps": {**report["steps"], "works": {**steps["works"], "date": "2025-12-31"}},
    }
    assert when_and_where(earlier).startswith(f"2025-12-31, {time.strftime('%Y-%m-%d')}, ")

    # A later run goes on where this one stopped: what is done is kept, the rest runs; with the
    # total spent, a step is recorded as not run.
    (tmp_path / "steps" / "works" / "out.json").unlink()
    gpu_report.run_steps(plan, context, report, set(), False, caps=(60.0, 0.0))
    steps = json.loads((tmp_path / "report.json").read_text())["steps"]
    assert steps["works"]["status"] == "ok"
    assert steps["late"]["status"] == "not run" and "minutes were spent" in steps["late"]["message"]


def test_a_ddp_group_s_ranks_get_a_launcher_s_environment_and_a_failed_rank_ends_them(tmp_path):
    show = python(  # one write a rank: two ranks' lines cannot interleave in the shared file
        "import os\n"
        "line = ' '.join(os.environ[k] for k in ('WORLD_SIZE', 'NODE_RANK', 'LOCAL_RANK', 'MASTER_ADDR'))\n"
        "os.write(1, (line + '\\n').encode())"
    )
    status, message = gpu_report.run_command(
        gpu_report.Command(show, "ranks.txt", ranks=2), tmp_path, time.monotonic() + 60
    )
    assert status == "ok", message
    assert sorted((tmp_path / "ranks.txt").read_text().splitlines()) == [
        "2 0 0 127.0.0.1",
        "2 1 0 127.0.0.1",
    ]
    waits = python(
        "import os, sys, time\nif os.environ['NODE_RANK'] == '1': sys.exit(3)\ntime.sleep(300)"
    )
    started = time.monotonic()
    status, message = gpu_report.run_command(
        gpu_report.Command(waits, ranks=2), tmp_path, time.monotonic() + 120
    )
    assert status == "failed" and "3]" in message, (status, message)
    assert time.monotonic() - started < 30, message  # not left waiting for its peer


def test_the_report_names_each_command_line_that_filled_it_once():
    first = gpu_report.invocations(None, ["--steps", "environment,converge", "--minutes", "9"])
    assert first == "scripts/benchmarks/gpu_report.py --steps environment,converge --minutes 9"
    second = gpu_report.invocations(first, ["--steps", "decode-bf16"])
    assert second == first + "; scripts/benchmarks/gpu_report.py --steps decode-bf16"
    assert gpu_report.invocations(second, ["--steps", "decode-bf16"]) == second


def test_converge_minutes_replaces_the_converge_run_s_time_cap():
    settings = gpu_report.with_converge_minutes(gpu_report.GPU, 2.5).converge
    assert settings.count("--trainer.max_time") == 1
    assert settings[settings.index("--trainer.max_time") + 1] == "00:00:02:30"
    assert settings[: settings.index("--trainer.max_time")] == gpu_report.GPU.converge[:2]
    dry = gpu_report.with_converge_minutes(gpu_report.DRY, 90).converge
    assert dry[-2:] == ("--trainer.max_time", "00:01:30:00") and dry[:-2] == gpu_report.DRY.converge


def test_a_report_of_the_other_kind_is_never_mixed_in(tmp_path):
    (tmp_path / "report.json").write_text(json.dumps({"dry_run": True, "steps": {}}))
    done = script("gpu_report.py", "--out", str(tmp_path), "--steps", "environment", timeout=60)
    assert done.returncode != 0 and "is a dry run's; pass another --out" in done.stderr
    done = script(
        "gpu_report.py", "--dry-run", "--steps", "nonsense", "--out", str(tmp_path), timeout=60
    )
    assert done.returncode != 0 and "--steps: unknown nonsense" in done.stderr


def test_the_gpu_plan_has_every_step_the_dry_run_proves_at_full_size():
    names = [step.name for step in gpu_report.steps(gpu_report.GPU)]
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
        gpu_report.FAST_PATH,
        "ctranslate2",
        "decode-bf16",
        "decode-fp32",
        "decode-fp16",
        "serve",
        "ddp",
    } <= set(names)
    others = [
        [step.name for step in gpu_report.steps(scale) if step.section != "training"]
        for scale in (gpu_report.GPU, gpu_report.DRY)
    ]
    assert others[0] == others[1]  # the dry run proves the same steps
