"""translate-serve's model process: the checkpoint loaded once in a process of its own, which
runs continuous batching's engine loop (`EngineProcess`) or translates each batch the server
sends it (`ModelProcess`, `--batching batch`).

In the server's process the search's Python work would share one interpreter lock with the
event loop that parses and answers requests, and each would keep stopping the other; in a
process of its own the model computes while the server talks to clients (LitServe's layout).

The process says when it has loaded (or why it could not), and while it works it sends a
heartbeat at least every `HEARTBEAT_SECONDS`; the server watches it (`translate.serve.supervision`).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from multiprocessing import get_context

from translate.decode.settings import SearchSettings
from translate.parent_watch import exit_with_parent
from translate.serve.continuous import Failed, Heartbeat, Loaded
from translate.serve.supervision import (
    LOAD_TIMEOUT,
    Down,
    ModelUnavailable,
    Restarts,
    Watch,
    check_checkpoint,
    exit_cause,
    load_failure,
    stalled_message,
    start_failure,
    stopped_message,
)

log = logging.getLogger("translate.serve")

HEARTBEAT_SECONDS = 1.0  # a model process at work says so at least this often
STOP_SECONDS = 30.0  # a model process told to stop that has not done so within these is killed


@dataclass(frozen=True)
class ModelSettings:
    """What the model's process is started with."""

    checkpoint: str
    device: str
    quantize: str
    threads: int | None
    batch_tokens: int

    def load(self):
        """The loaded, in the process that runs it."""
        import torch

        from translate.decode.loaded_model import load_model

        if self.threads:
            torch.set_num_threads(self.threads)
        return load_model(self.checkpoint, torch.device(self.device), quantize=self.quantize)


class ModelState:
    """What the model process holds for `--batching batch`, created in that process."""

    def __init__(self, settings: ModelSettings) -> None:
        self.loaded = settings.load()
        self.batch_tokens = settings.batch_tokens

    def translate(self, lines: list[str], key: SearchSettings) -> tuple[list[str], float]:
        """A batch, translated to its end."""
        return timed_translation(self.loaded, lines, key, self.batch_tokens)


def timed_translation(
    loaded, lines: list[str], key: SearchSettings, batch_tokens: int
) -> tuple[list[str], float]:
    """One batch of the server's lines, as translate-cli translates them (in either worker), and
    the seconds it took: timed here, the model's own time leaves out the trip to its process."""
    from translate.decode import pipeline

    started = time.perf_counter()
    outputs = pipeline.translate_lines(loaded, lines, key, batch_tokens=batch_tokens)
    return outputs, time.perf_counter() - started


def _as_model_process() -> None:
    """What a model process sets first: Ctrl-C reaches the whole process group, and the server
    drains its requests, then stops this one; a server killed outright (SIGKILL, out of memory)
    cannot stop it, so it goes too (`exit_with_parent`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()


def _beat(send: Callable[[object], None], working: threading.Event) -> None:
    """A `Heartbeat` every `HEARTBEAT_SECONDS` while `working` is set."""
    while working.wait():
        time.sleep(HEARTBEAT_SECONDS)
        if working.is_set():
            try:
                send(Heartbeat())
            except OSError:  # the server is gone
                return


def _serve(connection, settings: ModelSettings) -> None:
    """The model process: one `ModelState` (`Loaded` once it is, `Failed` and exit status 1 where
    it cannot be), then each call the server sends, answered in order, with heartbeats while
    one runs."""
    _as_model_process()
    sending = threading.Lock()

    def send(message) -> None:
        with sending:
            connection.send(message)

    try:
        state = ModelState(settings)
    except Exception as error:  # noqa: BLE001 - the server logs it
        send(Failed(load_failure(settings.checkpoint, error)))
        sys.exit(1)
    send(Loaded())
    working = threading.Event()
    threading.Thread(target=_beat, args=(send, working), name="heartbeat", daemon=True).start()
    while (call := connection.recv()) is not None:
        number, name, args = call
        working.set()
        try:
            send((number, True, getattr(state, name)(*args)))
        except Exception as fault:  # noqa: BLE001 - the server's future gets it, as a pool's would
            send((number, False, fault))
        finally:
            working.clear()


class ModelProcess(Executor):
    """The model in a process of its own (spawned: no copy of the server's threads or sockets).
    `submit(ModelState.translate, ...)` runs that method of the process's `ModelState`. A process
    that dies, or that stalls (`Watch.stalled`: then it is killed), fails its pending and later
    calls with `ModelUnavailable`, and `on_end(process, cause, detail)` is called. `recovery`:
    it replaces one that ended, and says so in the log once it has loaded."""

    def __init__(
        self,
        settings: ModelSettings,
        timeout: float = 30.0,
        load_timeout: float = LOAD_TIMEOUT,
        on_end: Callable[[ModelProcess, str, str], None] | None = None,
        recovery: bool = False,
    ) -> None:
        context = get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, settings), daemon=True)
        self._process.start()
        child.close()  # held here too, it would keep the reader waiting after the process died
        self.watch = Watch(timeout, load_timeout)
        self._on_end, self._recovery = on_end, recovery
        # `_lock` guards the futures; `_sending` keeps one send at a time. Apart, so that a large
        # call being sent never holds up the reader, and with it the process sending a result.
        self._lock, self._sending = threading.Lock(), threading.Lock()
        self._pending: dict[int, Future] = {}
        self._count, self._closed = 0, False
        self._broken: ModelUnavailable | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._lock:
            if self._broken:
                raise ModelUnavailable(str(self._broken), self._broken.retry_after)
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            number, self._count = self._count, self._count + 1
            if not self._pending:
                self.watch.holding()
            self._pending[number] = future
        self._send((number, fn.__name__, args))
        return future

    def state(self) -> str | None:
        """Why the process cannot translate now (/ready), or None."""
        with self._lock:
            holds_work = bool(self._pending)
        return self.watch.state(holds_work)

    def _send(self, message) -> None:
        """A failed send means the process is gone: the reader fails what is pending then."""
        with self._sending:
            try:
                self._connection.send(message)
            except OSError:
                pass

    def _read(self) -> None:
        """The process's answers to their futures, until it ends or stalls."""
        stalled = ""
        tick = min(1.0, self.watch.timeout / 4)
        while not stalled:
            try:
                if not self._connection.poll(tick):
                    with self._lock:
                        holds_work = bool(self._pending)
                    stalled = self.watch.stalled(holds_work)
                    continue
                message = self._connection.recv()
            except (EOFError, OSError):
                break
            if self.watch.heard_from(message) and self._recovery:
                log.warning("the model process (pid %s) has loaded: translating again", self.pid)
            if isinstance(message, tuple):
                self._answered(*message)
        if stalled:
            log.error("the model process (pid %s) %s: killing it (SIGKILL)", self.pid, stalled)
            self._process.kill()
            self._process.join(STOP_SECONDS)
            cause = detail = stalled
            error = ModelUnavailable(stalled_message(stalled))
        else:
            self._process.join(5)
            cause = exit_cause(self._process.exitcode)
            detail = self.watch.detail(cause)
            error = ModelUnavailable(stopped_message(cause))
            if not self._closed:
                log.error("the model process (pid %s) %s", self.pid, detail)
        with self._lock:
            self._broken = error
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if future.set_running_or_notify_cancel():
                future.set_exception(error)
        if self._on_end is not None:
            self._on_end(self, cause, detail)

    def _answered(self, number: int, ok: bool, value) -> None:
        with self._lock:
            future = self._pending.pop(number, None)
        if future is not None and future.set_running_or_notify_cancel():
            (future.set_result if ok else future.set_exception)(value)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The process ends once its current call is done (killed where it has not within
        `STOP_SECONDS`, or stalls meanwhile)."""
        with self._lock:
            self._closed = True
            if cancel_futures:  # all but the call the process is on (it answers them in order)
                for number in sorted(self._pending)[1:]:
                    self._pending[number].cancel()
            broken = self._broken
        if not broken:
            self._send(None)  # ends the process once its current call is done
        if wait:
            self._process.join(STOP_SECONDS)
            if self._process.exitcode is None:
                self._process.kill()
            self._reader.join()


class ModelProcesses(Executor):
    """`--batching batch`'s worker: one `ModelProcess` at a time, and a new one when it ends or
    stalls (at once, or after `Restarts`' delay; none once they gave up), each end logged with
    its cause. A call while none can take it fails at once with `ModelUnavailable`; `down` says
    why (/ready)."""

    def __init__(
        self,
        settings: ModelSettings,
        timeout: float = 30.0,
        load_timeout: float = LOAD_TIMEOUT,
        restarts: Restarts | None = None,
    ) -> None:
        self._settings, self._timeout, self._load_timeout = settings, timeout, load_timeout
        self._restarts = restarts or Restarts()
        self._lock = threading.Lock()
        self._process: ModelProcess | None = None
        self._down: Down | None = None
        self._timer: threading.Timer | None = None
        self._closed = False
        self._start()

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                check_checkpoint(self._settings.checkpoint)
                self._process = ModelProcess(
                    self._settings,
                    self._timeout,
                    self._load_timeout,
                    self._ended,
                    self._restarts.restarting,
                )
                self._down = None
                return
            except Exception as error:  # noqa: BLE001 - the server stays up, answering 503
                cause, detail = start_failure(error)
        log.error("the model process %s", detail)
        self._after(None, cause, detail)

    def _ended(self, process: ModelProcess, cause: str, detail: str) -> None:
        with self._lock:
            if self._closed or process is not self._process:
                return
            self._process = None
        self._after(process.watch.loaded_for(), cause, detail)

    def _after(self, loaded_for: float | None, cause: str, detail: str) -> None:
        down = self._restarts.after(loaded_for, cause, detail)
        if down is None:
            self._start()
            return
        with self._lock:
            if self._closed:
                return
            self._down = down
            if down.until is not None:
                self._timer = threading.Timer(down.wait(), self._start)
                self._timer.daemon = True
                self._timer.start()

    @property
    def down(self) -> str | None:
        """Why no model process can translate now (/ready), or None."""
        with self._lock:
            process, down = self._process, self._down
        if process is not None:
            return process.state()
        return down.reason() if down is not None else "the model process is stopped"

    def submit(self, fn, /, *args, **kwargs) -> Future:
        with self._lock:
            process, down = self._process, self._down
        if process is None:
            if down is None:
                raise RuntimeError("cannot schedule new calls after shutdown")
            raise down.refusal()
        return process.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            process = self._process
            if self._timer is not None:
                self._timer.cancel()
        if process is not None:
            process.shutdown(wait, cancel_futures=cancel_futures)


def _run_engine(inbox, sender, settings: ModelSettings) -> None:
    """The engine's process: the model loaded (`Failed` and exit status 1 where it cannot be),
    then `continuous.run_engine`, with heartbeats, until the server sends None (or goes:
    `exit_with_parent`)."""
    from translate.serve.continuous import EngineLoop, run_engine

    _as_model_process()
    try:
        loaded = settings.load()
    except Exception as error:  # noqa: BLE001 - the server logs it
        sender.send(Failed(load_failure(settings.checkpoint, error)))
        sys.exit(1)
    try:
        engine = EngineLoop(loaded, settings.batch_tokens)
        run_engine(engine, inbox, sender.send, HEARTBEAT_SECONDS)
    except Exception as error:
        sender.send(Failed(f"its engine loop raised {type(error).__name__}: {error}"))
        raise


class EngineProcess:
    """Continuous batching's engine loop in a process of its own (spawned): `send` puts a message
    on its input queue (pickled and written by the queue's own thread, never by the caller),
    `receive` waits for its next answer, and raises EOFError once the process is gone."""

    def __init__(self, settings: ModelSettings) -> None:
        context = get_context("spawn")
        self._inbox = context.Queue()
        self._answers, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_run_engine, args=(self._inbox, sender, settings), daemon=True
        )
        self._process.start()
        sender.close()  # held here too, it would keep `receive` waiting after the process died

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def send(self, message) -> None:
        self._inbox.put(message)

    def receive(self):
        return self._answers.recv()

    def ended(self) -> str:
        """How the process ended (`exit_cause`), once `receive` has raised EOFError: waited for
        a few seconds, then killed."""
        self._process.join(5)
        cause = exit_cause(self._process.exitcode)
        if self._process.exitcode is None:
            self.kill()
            self._process.join()
        return cause

    def kill(self) -> None:
        """SIGKILL (a stalled process); what is still buffered for it is dropped."""
        self._inbox.cancel_join_thread()
        self._process.kill()

    def stop(self) -> None:
        """Ends the loop once its step under way is done (a process already gone: at once; one
        that has not ended within `STOP_SECONDS`: killed)."""
        if self._process.is_alive():
            self._inbox.put(None)
        else:  # what is still buffered for it would never be read
            self._inbox.cancel_join_thread()
        self._process.join(STOP_SECONDS)
        if self._process.exitcode is None:
            self.kill()
            self._process.join()
        self._inbox.close()


class EngineThread:
    """The same engine loop in a thread of this process (tests, or a server without a model
    process), over `loaded`."""

    def __init__(self, loaded, batch_tokens: int) -> None:
        from translate.serve.continuous import EngineLoop, run_engine

        self._inbox: queue.Queue = queue.Queue()
        self._answers: queue.Queue = queue.Queue()
        engine = EngineLoop(loaded, batch_tokens)

        def main() -> None:
            try:
                run_engine(engine, self._inbox, self._answers.put, HEARTBEAT_SECONDS)
            finally:
                self._answers.put(EOFError)  # after its last answer, or when it raised

        self._thread = threading.Thread(target=main, name="translate-engine", daemon=True)
        self._thread.start()

    def send(self, message) -> None:
        self._inbox.put(message)

    def receive(self):
        answer = self._answers.get()
        if answer is EOFError:
            raise EOFError("the engine thread ended")
        return answer

    def ended(self) -> str:
        return "ended (a thread of the server)"

    def kill(self) -> None:
        """A thread cannot be killed: it is told to end after its step under way."""
        self._inbox.put(None)

    def stop(self) -> None:
        self._inbox.put(None)
        self._thread.join()


# oneDNN keeps a compiled product for every shape it meets, in two caches of 1,024 each, and a
# server meets new batch shapes for as long as it runs: bounded, its memory stays flat (docs/serving.md).
ONEDNN_CACHES = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "16", "LRU_CACHE_CAPACITY": "16"}


def bound_onednn_caches() -> None:
    """For the processes started after this call, which read it as they start; a user's value wins."""
    for name, capacity in ONEDNN_CACHES.items():
        os.environ.setdefault(name, capacity)


def start(settings: ModelSettings, timeout: float = 30.0) -> ModelProcesses:
    """The model processes for `--batching batch` (`timeout`: --model-timeout), with oneDNN's
    caches bounded."""
    bound_onednn_caches()
    return ModelProcesses(settings, timeout)


def start_engine(settings: ModelSettings) -> EngineProcess:
    """The engine's process for continuous batching, with oneDNN's caches bounded; a checkpoint
    that cannot be opened is a ModelStartError before any process is spawned."""
    check_checkpoint(settings.checkpoint)
    bound_onednn_caches()
    return EngineProcess(settings)
