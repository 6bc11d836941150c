"""No orphan: a command that starts others runs in a process group of its own that ends whole on a
timeout, on an interruption, and when the process that started it dies, killed outright too
(translate/process_group.py); the GPU report's steps and a script's server among them."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from processes import descendants, running, wait_until

from translate.process_group import end_group, run_group, start_group
from translate.serve.launch import free_loopback_port, serve_command, wait_until_ready

pytestmark = pytest.mark.skipif(
    os.name != "posix" or not Path("/proc/self/stat").exists(),
    reason="process groups are POSIX's; the tests read the process table in /proc",
)

# A command that starts a grandchild which ignores SIGTERM, writes its pid, then waits.
STUBBORN = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(300)\n"
)


def first_line(process: subprocess.Popen) -> int:
    return int(process.stdout.readline())


@contextlib.contextmanager
def starter(argv: list[str], **popen):
    """A process that starts others, in a session of its own so that the test's own clean-up
    ends whatever is left of it, whatever happens."""
    process = subprocess.Popen(argv, cwd=REPO, start_new_session=True, **popen)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def killed_leaves_none(process: subprocess.Popen, sig: int) -> None:
    """Kill `process` with `sig` and check that nothing it started is left running."""
    tree = descendants(process.pid)
    os.kill(process.pid, sig)
    process.wait(30)
    wait_until(lambda: not running(tree), f"no descendant left after {signal.Signals(sig).name}")


def test_the_command_s_exit_status_and_output_come_back_through_its_keeper():
    done = run_group(
        [sys.executable, "-c", "import sys; print('out'); sys.exit(3)"],
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (3, "out\n")
    killed = run_group([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], timeout=60)
    assert killed.returncode == -signal.SIGKILL
    missing = run_group(["/no/such/command"], timeout=60, capture_output=True, text=True)
    assert missing.returncode == 127 and "/no/such/command" in missing.stderr


def test_a_timeout_ends_the_whole_group_even_what_ignores_sigterm():
    process = start_group(
        [sys.executable, "-c", STUBBORN], grace_s=1, stdout=subprocess.PIPE, text=True
    )
    grandchild = first_line(process)
    tree = descendants(process.pid)
    assert grandchild in tree
    end_group(process)
    wait_until(lambda: not running(tree), "the group gone after SIGTERM, then SIGKILL")
    with pytest.raises(subprocess.TimeoutExpired):
        run_group([sys.executable, "-c", "import time; time.sleep(300)"], timeout=0.5)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_starter_that_dies_takes_its_groups_with_it(sig):
    """The starter killed outright runs no clean-up: its keepers see it gone."""
    # Ctrl-C's default handler, as a program started from a shell has it, whatever the test
    # process's own (an ignored SIGINT is inherited).
    code = (
        "import signal, subprocess, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from translate.process_group import start_group\n"
        f"group = start_group([sys.executable, '-c', {STUBBORN!r}], grace_s=1)\n"
        "group.wait()\n"
    )
    with starter([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as process:
        grandchild = first_line(process)
        tree = descendants(process.pid)
        assert grandchild in tree and len(tree) >= 3  # keeper, command, grandchild
        killed_leaves_none(process, sig)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_report_killed_mid_step_leaves_no_process_of_the_step(
    tmp_path, sig, bundled_corpus_cache
):
    """The GPU report (`scripts/bench.py report`) killed while its converge step's translate-train
    runs: nothing the step started is left running."""
    argv = [sys.executable, str(REPO / "scripts" / "bench.py"), "report", "--dry-run"]
    argv += [
        "--out",
        str(tmp_path),
        "--cache-dir",
        str(bundled_corpus_cache),
        "--steps",
        "converge",
    ]
    with starter(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as report:

        def training() -> bool:
            return any(
                b"translate.cli.train" in command for command in descendants(report.pid).values()
            )

        wait_until(training, "the step running")
        killed_leaves_none(report, sig)


def test_a_script_killed_outright_takes_its_server_and_the_server_s_model_process(
    checkpoint_path,
):
    port = free_loopback_port()
    code = (
        "import sys, time\n"
        "from translate.process_group import start_group\n"
        f"start_group({serve_command(str(checkpoint_path), port)!r})\n"
        "time.sleep(300)\n"
    )
    with starter([sys.executable, "-c", code]) as script:
        assert wait_until_ready(script, f"http://127.0.0.1:{port}/ready", 60) is None
        commands = descendants(script.pid).values()
        assert any(b"translate.cli.serve" in command for command in commands)
        assert any(b"spawn_main" in command for command in commands)  # its model process
        killed_leaves_none(script, signal.SIGKILL)
