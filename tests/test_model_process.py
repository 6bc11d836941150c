"""translate-serve's model process, watched: a stalled one (SIGSTOP) is killed and its requests
get 503 with Retry-After within --model-timeout, a killed one is logged with its signal and
/ready answers 503 until a new one has loaded, restarts back off and give up while the
checkpoint is gone, and heartbeats keep a long search from being taken for a stall.

Real servers on loopback, each in a process group of its own that its test ends whole; the
batcher's own schedule against `ContinuousBatcher` with fake engines."""

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
from processes import process_table, wait_until  # noqa: E402
from queued_engine import QueuedEngine  # noqa: E402

from translate.decode.pipeline import Part, Segments  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.decode.steps import Hypothesis  # noqa: E402
from translate.serve.batching import ContinuousBatcher  # noqa: E402
from translate.serve.engine_loop import Answer, Cancel, Heartbeat, Loaded  # noqa: E402
from translate.serve.launch import free_loopback_port, serve_command, wait_until_ready  # noqa: E402
from translate.serve.supervision import ModelStartError, ModelUnavailable, Restarts  # noqa: E402

needs_proc = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds the model process through /proc"
)
TEXTS = (f"Click the button number {number}." for number in itertools.count())  # none cached


class Served:
    """translate-serve on a loopback port, in a process group of its own; its log's lines kept
    with the time each arrived."""

    def __init__(self, checkpoint: Path, *flags: str) -> None:
        port = free_loopback_port()
        self.base = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            serve_command(checkpoint, port, *flags),
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def log(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def model_processes(self) -> list[int]:
        """The server's model processes (its spawned children) that have not exited."""
        return [
            pid
            for pid, (parent, state, command) in process_table().items()
            if parent == self.process.pid and b"spawn_main" in command and state != "Z"
        ]

    def model_process(self) -> int:
        [pid] = self.model_processes()
        return pid

    def ready(self) -> httpx.Response:
        return httpx.get(f"{self.base}/ready", timeout=10)

    def translate(self, lines: list[str], **fields) -> httpx.Response:
        return httpx.post(f"{self.base}/v1/translate", json={"text": lines, **fields}, timeout=60)

    def end(self) -> None:
        """The server and every process it started, at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._reader.join(10)


@contextlib.contextmanager
def served(checkpoint: Path, *flags: str):
    """A `Served` once /ready has answered 200 (at most 60 s), ended with its group after."""
    server = Served(checkpoint, *flags)
    try:
        failure = wait_until_ready(server.process, f"{server.base}/ready", 60)
        if failure:
            pytest.fail(f"translate-serve {failure}: {server.log()}")
        yield server
    finally:
        server.end()


@needs_proc
def test_a_stopped_model_process_gets_503_within_the_model_timeout_and_is_replaced(checkpoint_path):
    with served(checkpoint_path, "--model-timeout", "2") as server:
        stopped = server.model_process()
        os.kill(stopped, signal.SIGSTOP)
        answered: dict[str, object] = {}

        def client() -> None:
            started = time.monotonic()
            answered["response"] = server.translate([next(TEXTS)])
            answered["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        ready: list[httpx.Response] = []
        wait_until(
            lambda: ready.append(server.ready()) or ready[-1].status_code == 503,
            "/ready 503 while the model process is stopped",
            polls=300,
        )
        assert "model process" in ready[-1].json()["error"]
        thread.join(30)
        response = answered["response"]
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "5"
        error = response.json()["error"]
        assert "not answering" in error and "--model-timeout" in error and "retry" in error
        # the timeout, a tick of the watch, and slack for a loaded machine: not the wait without end
        assert answered["seconds"] < 2 + 10
        # The server's line reaches the reader of its output a moment after the answer.
        said = f"the model process (pid {stopped}) sent nothing for 2 s"
        wait_until(lambda: said in server.log(), f"the server's log line {said!r}")

        wait_until(
            lambda: server.ready().status_code == 200, "/ready 200 once a new process has loaded"
        )
        assert server.model_process() != stopped
        assert server.translate([next(TEXTS)]).status_code == 200


@needs_proc
def test_a_killed_model_process_is_logged_and_ready_says_503_until_a_new_one_has_loaded(
    checkpoint_path,
):
    with served(checkpoint_path) as server:
        killed = server.model_process()
        os.kill(killed, signal.SIGKILL)
        statuses: list[int] = []

        def ready_again() -> bool:
            statuses.append(server.ready().status_code)
            return statuses[-1] == 200 and 503 in statuses

        wait_until(ready_again, "/ready 503, then 200 once a new process has loaded", 3000, 0.02)
        assert f"the model process (pid {killed}) was killed by SIGKILL" in server.log()
        assert server.model_process() != killed
        assert server.translate([next(TEXTS)]).status_code == 200


@needs_proc
def test_restarts_back_off_and_give_up_while_the_checkpoint_is_gone(checkpoint_path, tmp_path):
    """The first restart comes at once, then 1, 2, 4, 8 s apart; after five in a row that could
    not load, one line says why and what to do, /ready says it gave up and requests get 503 at
    once."""
    checkpoint = tmp_path / "model.ckpt"
    shutil.copy(checkpoint_path, checkpoint)
    with served(checkpoint) as server:
        checkpoint.rename(tmp_path / "moved.ckpt")
        os.kill(server.model_process(), signal.SIGKILL)
        wait_until(lambda: "gave up" in server.ready().text, "/ready saying it gave up", 240, 0.25)
        failed = [
            when
            for when, line in server.lines
            if line.startswith(f"the model process could not load {checkpoint}: FileNotFoundError")
        ]
        gaps = [later - earlier for earlier, later in itertools.pairwise(failed)]
        assert len(gaps) == 4, server.log()
        for gap, planned in zip(gaps, (1, 2, 4, 8)):
            assert planned - 0.5 < gap < planned + 5, gaps  # backed off, with slack for load
        [gave_up] = [line for _, line in server.lines if "times in a row" in line]
        assert "failed to start 5 times in a row" in gave_up and "FileNotFoundError" in gave_up
        assert str(checkpoint) in gave_up and "restart" in gave_up
        assert server.ready().status_code == 503

        started = time.monotonic()
        response = server.translate([next(TEXTS)])
        assert time.monotonic() - started < 10  # at once: not the model timeout's wait
        assert response.status_code == 503 and response.headers["retry-after"]
        assert "gave up" in response.json()["error"]
        assert server.model_processes() == []


@needs_proc
def test_heartbeats_keep_a_long_search_from_being_taken_for_a_stall(checkpoint_path):
    """A search twice as long as --model-timeout, with no answer before its end."""
    with served(checkpoint_path, "--model-timeout", "2", "--max-sentences", "2048") as server:
        worker = server.model_process()
        lines = [
            f"Sentence number {i} of a long request, with a few more words." for i in range(1500)
        ]
        started = time.monotonic()
        response = server.translate(lines, beam=16)
        seconds = time.monotonic() - started
        assert response.status_code == 200, response.text
        assert len(response.json()["translations"]) == len(lines)
        assert seconds > 2 * 2, "the search was too short to tell: give it more lines"
        assert "sent nothing" not in server.log()
        assert server.model_process() == worker


class FakeEngine(QueuedEngine):
    """An engine for the batcher alone: says it has loaded (unless `loads` is False), then
    answers each request with its own ids after `seconds`, a `Heartbeat` every `beat` seconds
    meanwhile (none: 0), or never (`answers` False); `kill` ends it."""

    def __init__(
        self, loads: bool = True, answers: bool = True, seconds: float = 0.0, beat: float = 0.0
    ) -> None:
        super().__init__()
        self.answering, self.seconds, self.beat = answers, seconds, beat
        self.killed = threading.Event()
        if loads:
            self.answers.put(Loaded())
        self.start()

    def _run(self) -> None:
        while (message := self.messages.get()) is not None:
            if isinstance(message, Cancel) or not self.answering:
                continue
            until = time.monotonic() + self.seconds
            while time.monotonic() < until:
                time.sleep(self.beat or self.seconds)
                if self.beat:
                    self.answers.put(Heartbeat())
            found = [[Hypothesis(ids, 0.0, 0.0)] for ids in message.segments]
            self.answers.put(Answer(message.request_id, found))
        self.answers.put(None)

    def ended(self) -> str:
        return "was killed by SIGKILL" if self.killed.is_set() else "exited with status 1"

    def kill(self) -> None:
        self.killed.set()
        self.answers.put(EOFError)


def batcher_over(start_engine, **watching) -> ContinuousBatcher:
    return ContinuousBatcher(start_engine, 100, **watching)


def segments_of(lines: list[str]) -> Segments:
    return Segments(
        [list(line.encode()) for line in lines],
        list(range(len(lines))),
        [Part(i) for i in range(len(lines))],
    )


KEY = SearchSettings(beam=1, length_penalty=0.0)


def test_a_silent_engine_is_killed_and_a_beating_one_is_waited_for():
    """Requests held by an engine that says nothing for `timeout` fail with ModelUnavailable
    (503) and a new engine starts at once; heartbeats keep a longer search alive."""
    engines = [FakeEngine(answers=False), FakeEngine(seconds=1.0, beat=0.1)]
    started = iter(engines)

    async def scenario():
        batcher = batcher_over(lambda: next(started), timeout=0.4)
        batcher.start()
        try:
            begun = time.monotonic()
            with pytest.raises(ModelUnavailable, match="not answering"):
                await batcher.submit(["a"], KEY, segments_of(["a"]))
            failed_after = time.monotonic() - begun
            await asyncio.sleep(0.05)  # the new engine's Loaded
            ready = batcher.down
            answer = await batcher.submit(["bc"], KEY, segments_of(["bc"]))
            return failed_after, ready, answer
        finally:
            await batcher.stop()

    failed_after, ready, answer = asyncio.run(scenario())
    assert 0.4 < failed_after < 0.4 + 5  # the timeout, and slack for a loaded machine
    assert engines[0].killed.is_set() and ready is None
    assert [bytes(hypotheses[0].tokens).decode() for hypotheses in answer] == ["bc"]


def test_the_continuous_batcher_backs_off_gives_up_and_then_refuses_at_once():
    """An engine that dies before it loads, then starts that fail: at once, then after the
    first delay, then twice that; given up after `give_up` in a row, requests fail at once."""
    starts: list[float] = []

    def start_engine():
        starts.append(time.monotonic())
        if len(starts) == 1:
            engine = FakeEngine(loads=False)
            engine.answers.put(EOFError)
            return engine
        raise ModelStartError("could not load /the/checkpoint: FileNotFoundError", "is gone")

    async def scenario():
        batcher = batcher_over(start_engine, restarts=Restarts(first_delay=0.2, give_up=4))
        batcher.start()
        try:
            while "gave up" not in (batcher.down or ""):
                await asyncio.sleep(0.02)
            begun = time.monotonic()
            with pytest.raises(ModelUnavailable, match="gave up") as refused:
                await batcher.submit(["a"], KEY, segments_of(["a"]))
            return time.monotonic() - begun, refused.value.retry_after, batcher.queued_sentences
        finally:
            await batcher.stop()

    waited, retry_after, queued = asyncio.run(scenario())
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(starts) == 4
    # Each delay doubles (slack above for a loaded machine); refused at once once given up.
    assert gaps[0] < 2 and 0.2 <= gaps[1] < 3 and 0.4 <= gaps[2] < 3, gaps
    assert waited < 5 and retry_after > 0 and queued == 0
