"""translate-serve's model process: the checkpoint loaded once in a process of its own, which
runs continuous batching's engine loop (`EngineProcess`) or translates each batch the server
sends it (`ModelProcess`, `--batching batch`).

In the server's process the search's Python work would share one interpreter lock with the
event loop that parses and answers requests, and each would keep stopping the other; in a
process of its own the model computes while the server talks to clients (LitServe's layout).
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from concurrent.futures import BrokenExecutor, Executor, Future
from dataclasses import dataclass
from multiprocessing import get_context

from translate.decode.settings import SearchSettings
from translate.parent_watch import exit_with_parent


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


def _serve(connection, settings: ModelSettings) -> None:
    """The model process: one `ModelState`, then each call the server sends, answered in order."""
    _as_model_process()
    state = ModelState(settings)
    while (call := connection.recv()) is not None:
        number, name, args = call
        try:
            connection.send((number, True, getattr(state, name)(*args)))
        except Exception as fault:  # noqa: BLE001 - the server's future gets it, as a pool's would
            connection.send((number, False, fault))


class ModelProcess(Executor):
    """The model in a process of its own (spawned: no copy of the server's threads or sockets).
    `submit(ModelState.translate, ...)` runs that method of the process's `ModelState`; if the
    process dies, its pending and later calls fail with `BrokenExecutor`, as a process pool's."""

    def __init__(self, settings: ModelSettings) -> None:
        context = get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, settings), daemon=True)
        self._process.start()
        child.close()  # held here too, it would keep the reader waiting after the process died
        # `_lock` guards the futures; `_sending` keeps one send at a time. Apart, so that a large
        # call being sent never holds up the reader, and with it the process sending a result.
        self._lock, self._sending = threading.Lock(), threading.Lock()
        self._pending: dict[int, Future] = {}
        self._count, self._broken, self._closed = 0, "", False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._lock:
            if self._broken:
                raise BrokenExecutor(self._broken)
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            number, self._count = self._count, self._count + 1
            self._pending[number] = future
        self._send((number, fn.__name__, args))
        return future

    def _send(self, message) -> None:
        """A failed send means the process is gone: the reader fails what is pending then."""
        with self._sending:
            try:
                self._connection.send(message)
            except OSError:
                pass

    def _read(self) -> None:
        while True:
            try:
                number, ok, value = self._connection.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future = self._pending.pop(number, None)
            if future is not None and future.set_running_or_notify_cancel():
                (future.set_result if ok else future.set_exception)(value)
        with self._lock:
            self._broken = "the model process ended"
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if future.set_running_or_notify_cancel():
                future.set_exception(BrokenExecutor(self._broken))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:  # all but the call the process is on (it answers them in order)
                for number in sorted(self._pending)[1:]:
                    self._pending[number].cancel()
            broken = self._broken
        if not broken:
            self._send(None)  # ends the process once its current call is done
        if wait:
            self._process.join()
            self._reader.join()


def _run_engine(inbox, sender, settings: ModelSettings) -> None:
    """The engine's process: the model loaded, then `continuous.run_engine` until the server
    sends None (or goes: `exit_with_parent`)."""
    from translate.serve.continuous import EngineLoop, run_engine

    _as_model_process()
    run_engine(EngineLoop(settings.load(), settings.batch_tokens), inbox, sender.send)


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

    def send(self, message) -> None:
        self._inbox.put(message)

    def receive(self):
        return self._answers.recv()

    def stop(self) -> None:
        """Ends the loop once its step under way is done (a process already gone: at once)."""
        if self._process.is_alive():
            self._inbox.put(None)
        else:  # what is still buffered for it would never be read
            self._inbox.cancel_join_thread()
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
                run_engine(engine, self._inbox, self._answers.put)
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


def start(settings: ModelSettings) -> ModelProcess:
    """The model process for `--batching batch`, with oneDNN's caches bounded."""
    bound_onednn_caches()
    return ModelProcess(settings)


def start_engine(settings: ModelSettings) -> EngineProcess:
    """The engine's process for continuous batching, with oneDNN's caches bounded."""
    bound_onednn_caches()
    return EngineProcess(settings)
