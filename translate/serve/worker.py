"""translate-serve's model process: the checkpoint loaded once in a process of its own, which
runs continuous batching's engine loop (`EngineProcess`).

In the server's process the search's Python work would share one interpreter lock with the
event loop that parses and answers requests, and each would keep stopping the other; in a
process of its own the model computes while the server talks to clients (LitServe's layout).

The process says when it has loaded (or why it could not), and while it works it sends a
heartbeat at least every `HEARTBEAT_SECONDS`; the server watches it (`translate.serve.supervision`).
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing import get_context

from translate.decode.settings import Budget, EngineChoice
from translate.parent_watch import exit_with_parent
from translate.serve.engine_loop import Failed
from translate.serve.supervision import (
    check_checkpoint,
    exit_cause,
    load_failure,
)

HEARTBEAT_SECONDS = 1.0  # a model process at work says so at least this often
STOP_SECONDS = 30.0  # a model process told to stop that has not done so within these is killed


@dataclass(frozen=True)
class ModelSettings:
    """What the model's process is started with."""

    checkpoint: str
    device: str
    threads: int | None
    budget: Budget
    engine: EngineChoice = EngineChoice()

    def load(self):
        """The loaded, with its engine chosen (`engine.load_searching`), in the process that
        runs it."""
        import torch

        from translate.decode.engine import load_searching

        if self.threads:
            torch.set_num_threads(self.threads)
        return load_searching(self.checkpoint, self.device, self.engine)


def _as_model_process() -> None:
    """What a model process sets first: Ctrl-C reaches the whole process group, and the server
    drains its requests, then stops this one; a server killed outright (SIGKILL, out of memory)
    cannot stop it, so it goes too (`exit_with_parent`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()


def _run_engine(inbox, sender, settings: ModelSettings) -> None:
    """The engine's process: the model loaded (`Failed` and exit status 1 where it cannot be),
    then `engine_loop.run_engine`, with heartbeats, until the server sends None (or goes:
    `exit_with_parent`)."""
    from translate.serve.engine_loop import EngineLoop, run_engine

    _as_model_process()
    try:
        loaded = settings.load()
    except Exception as error:  # noqa: BLE001 - the server logs it
        sender.send(Failed(load_failure(settings.checkpoint, error)))
        sys.exit(1)
    try:
        engine = EngineLoop(loaded, settings.budget)
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

    def __init__(self, loaded, budget: Budget) -> None:
        from translate.serve.engine_loop import EngineLoop, run_engine

        self._inbox: queue.Queue = queue.Queue()
        self._answers: queue.Queue = queue.Queue()
        engine = EngineLoop(loaded, budget)

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


def start_engine(settings: ModelSettings) -> EngineProcess:
    """The engine's process for continuous batching, with oneDNN's caches bounded; a checkpoint
    that cannot be opened is a ModelStartError before any process is spawned."""
    check_checkpoint(settings.checkpoint)
    bound_onednn_caches()
    return EngineProcess(settings)
