"""Continuous batching for translate-serve, the server's side: each request's segments (the
server cut and tokenised them) are sent to the model's engine loop (`translate.serve.engine_loop`,
in the model's process) at once and join its running search between two steps; a thread reads
the answers back to the requests' futures and watches the engine (`translate.serve.supervision`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from translate.decode.pipeline import Segments
from translate.decode.settings import SearchSettings
from translate.decode.steps import Hypothesis
from translate.serve.engine_loop import Answer, Cancel, Join
from translate.serve.supervision import (
    LOAD_TIMEOUT,
    Down,
    ModelUnavailable,
    Restarts,
    Watch,
    stalled_message,
    start_failure,
    stopped_message,
)

log = logging.getLogger("translate.serve")


class QueueFull(Exception):
    """More lines are waiting than the server accepts; the client should retry later."""


def check_room(queued: int, sentences: int, max_queued: int) -> None:
    """QueueFull where `sentences` more would pass the bound on sentences waiting (or held)."""
    if queued + sentences > max_queued:
        raise QueueFull(
            f"{queued} sentences are waiting (at most {max_queued}, --max-queued-sentences)"
        )


class ShuttingDown(Exception):
    """The server's drain time ran out before this request was answered."""


@dataclass(eq=False)  # compared, and kept in a set, by identity
class Job:
    lines: list[str]
    key: SearchSettings
    sentences: int  # what the job counts against the queue's bound: its segments searched
    tokens: int
    future: asyncio.Future = field(repr=False)

    @classmethod
    def of(cls, lines: list[str], key: SearchSettings, segments: Segments) -> Job:
        """The job of `lines`, searched as `segments`, answered through a new future."""
        future = asyncio.get_running_loop().create_future()
        return cls(lines, key, segments.sentences, segments.tokens, future)


class Engine(Protocol):
    """Continuous batching's engine loop as the server sees it (`translate.serve.worker`'s
    `EngineProcess` or `EngineThread`)."""

    def send(self, message: Join | Cancel) -> None: ...

    def receive(self) -> Answer | None: ...  # EOFError once the engine is gone

    def stop(self) -> None: ...


class ContinuousBatcher:
    """Continuous batching: a request's segments (the server cut and tokenised them) are sent to
    the engine loop at once (`translate.serve.engine_loop`), join its running search at one of the
    next steps, and are answered with their hypotheses at the step the last is done (the server
    makes the texts: `service.detokenise`), so a short sentence does not wait for a batch's
    longest, nor a new one for a batch to end. A reader thread
    waits for the engine's answers and hands them to the event loop.

    The engine is watched (`supervision.Watch`): one that has not loaded within `load_timeout`, or
    holds requests and has sent nothing (no answer, no heartbeat) for `timeout` seconds, is
    killed. An engine that ends or is killed fails the requests it held (`ModelUnavailable`:
    503), is logged with its cause, and a new one starts at once or after `restarts`' delay;
    meanwhile, and once they gave up, requests fail at once. `down` says why it cannot translate
    (/ready)."""

    def __init__(
        self,
        start_engine: Callable[[], Engine],
        max_queued_sentences: int,
        on_batch: Callable[..., None] | None = None,
        *,
        timeout: float = 30.0,
        load_timeout: float = LOAD_TIMEOUT,
        restarts: Restarts | None = None,
    ) -> None:
        self.max_queued_sentences = max_queued_sentences
        self.on_batch = on_batch  # (sentences, source tokens, model seconds, lines searched)
        self.queued_sentences = 0  # sent and not answered: the engine holds them meanwhile
        self._start_engine = start_engine
        self.timeout, self.load_timeout = timeout, load_timeout
        self._restarts = restarts or Restarts()
        # The engine in use (`_Live`), or where none runs (`_Refusing`); None once stopped.
        self._engine: _Live | _Refusing | None = None
        self._reader: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching: asyncio.TimerHandle | None = None
        self._starting: asyncio.TimerHandle | None = None
        self._sent: dict[int, Job] = {}  # by request id: sent and not answered
        self._tickets = 0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._run_engine()
        self._watch()

    def _run_engine(self) -> None:
        """A new engine, read by a thread of its own; one that cannot be started counts as one
        that never loaded."""
        self._starting = None
        try:
            engine = self._start_engine()
        except Exception as error:  # noqa: BLE001 - the server stays up, answering 503
            cause, detail = start_failure(error)
            log.error("the model process %s", detail)
            self._after_end(None, cause, detail)
            return
        live = self._engine = _Live(engine, Watch(self.timeout, self.load_timeout), self._held)
        self._reader = threading.Thread(
            target=self._read, args=(live,), name="translate-answers", daemon=True
        )
        self._reader.start()

    def _read(self, live: _Live) -> None:
        """The engine's messages to the event loop, until it stops (None) or is gone (`_Gone`,
        with how it ended)."""
        while True:
            try:
                message = live.engine.receive()
            except (EOFError, OSError):
                message = _Gone(_how_it_ended(live.engine))
            if message is None:
                return
            try:
                self._loop.call_soon_threadsafe(self._arrived, live, message)
            except RuntimeError:  # the event loop is closed
                return
            if isinstance(message, _Gone):
                return

    def _arrived(self, live: _Live, answer) -> None:
        """A message of the engine's, on the event loop: an `Answer` to its request, a message
        for its watch (`Loaded`, `Heartbeat`, `Failed`), or `_Gone`."""
        if live is not self._engine:  # a killed or stopped engine's: once gone, let go
            if isinstance(answer, _Gone):
                live.engine.stop()
            return
        if live.watch.heard_from(answer):
            if self._restarts.restarting:
                log.warning("the model process (pid %s) has loaded: translating again", live.pid)
            if answer.engine:
                log.warning("the model (pid %s) searches with %s", live.pid, answer.engine)
        if isinstance(answer, _Gone):
            self._gone(live, answer.cause)
            return
        if not isinstance(answer, Answer):  # Loaded, Heartbeat, Failed: the watch's
            return
        job = self._sent.pop(answer.request_id, None)
        if job is None:  # its client left, or the drain failed it
            return
        self.queued_sentences -= job.sentences
        if self.on_batch is not None:
            self.on_batch(job.sentences, job.tokens, answer.seconds, answer.searching)
        if job.future.done():
            return
        if answer.error:
            job.future.set_exception(RuntimeError(answer.error))
        else:
            job.future.set_result(answer.found)

    async def submit(
        self, lines: list[str], key: SearchSettings, segments: Segments
    ) -> list[list[Hypothesis]]:
        """Each of `segments`' hypotheses (`lines` are theirs, cut and tokenised by the server:
        `service.tokenise`); QueueFull when the sentences the engine holds would pass the
        bound."""
        if not lines:
            return []
        check_room(self.queued_sentences, segments.sentences, self.max_queued_sentences)
        job = Job.of(lines, key, segments)
        self._tickets += 1
        request_id = self._tickets
        self._sent[request_id] = job
        self.queued_sentences += job.sentences
        try:
            self._engine.send(Join(request_id, segments.ids, key))
            found = await job.future  # cancelled with the request when its client goes away
        finally:
            if self._sent.pop(request_id, None) is not None:  # not answered: dropped
                self.queued_sentences -= job.sentences
                self._engine.send(Cancel(request_id))
        return found

    def fail_all(self, error: Exception) -> None:
        """Every request sent and not answered fails with `error` now (the server's drain time is
        over); what the engine still answers for them is dropped."""
        for job in list(self._sent.values()):
            if not job.future.done():
                job.future.set_exception(error)

    async def stop(self) -> None:
        """The engine stopped once its step under way is done; its answers after that dropped."""
        for handle in (self._watching, self._starting):
            if handle is not None:
                handle.cancel()
        live, self._engine = self._engine, None
        if isinstance(live, _Live):
            await asyncio.get_running_loop().run_in_executor(None, live.engine.stop)
        if self._reader is not None:
            self._reader.join()

    @property
    def down(self) -> str | None:
        """Why the model cannot translate now (/ready answers 503 with it), or None."""
        engine = self._engine
        if engine is None:
            return "the model process is stopped"
        if isinstance(engine, _Refusing):
            return engine.down.reason()
        return engine.watch.state(bool(self._sent))

    def _held(self) -> int:
        """The requests the engine holds (sent and not answered)."""
        return len(self._sent)

    def _watch(self) -> None:
        """Every tick (a quarter of `timeout`, at most a second): an engine that stalls
        (`Watch.stalled`) is killed."""
        live = self._engine
        if isinstance(live, _Live):
            why = live.watch.stalled(bool(self._sent))
            if why:
                self._stalled(live, why)
        self._watching = self._loop.call_later(min(1.0, self.timeout / 4), self._watch)

    def _stalled(self, live: _Live, why: str) -> None:
        log.error("the model process (pid %s) %s: killing it (SIGKILL)", live.pid, why)
        self._engine = None  # what it still sends is dropped
        getattr(live.engine, "kill", live.engine.stop)()
        self._fail_held(ModelUnavailable(stalled_message(why)))
        self._after_end(live.watch.loaded_for(), why, why)

    def _gone(self, live: _Live, cause: str) -> None:
        log.error("the model process (pid %s) %s", live.pid, live.watch.detail(cause))
        self._fail_held(ModelUnavailable(stopped_message(cause)))
        live.engine.stop()
        self._after_end(live.watch.loaded_for(), cause, live.watch.detail(cause))

    def _fail_held(self, error: Exception) -> None:
        """Every request the engine held fails with `error`."""
        sent, self._sent = self._sent, {}
        self.queued_sentences -= sum(job.sentences for job in sent.values())
        for job in sent.values():
            if not job.future.done():
                job.future.set_exception(error)

    def _after_end(self, loaded_for: float | None, cause: str, detail: str) -> None:
        """The next engine started at once, or later (requests refused meanwhile), or never."""
        down = self._restarts.after(loaded_for, cause, detail)
        if down is None:
            self._run_engine()
            return
        self._engine = _Refusing(down, self._refuse)
        if down.until is not None:
            self._starting = self._loop.call_later(down.wait(), self._run_engine)

    def _refuse(self, request_id: int, error: Exception) -> None:
        """A request sent while no engine runs fails at once."""
        job = self._sent.get(request_id)
        if job is not None and not job.future.done():
            job.future.set_exception(error)


@dataclass(frozen=True)
class _Gone:
    """The engine is gone: how it ended (`supervision.exit_cause`)."""

    cause: str


def _how_it_ended(engine: Engine) -> str:
    ended = getattr(engine, "ended", None)
    return ended() if ended is not None else "ended"


class _Live:
    """An engine in use and its `Watch`: a request sent while it held no other starts the
    watch's clock on its silence."""

    def __init__(self, engine: Engine, watch: Watch, held: Callable[[], int]) -> None:
        self.engine, self.watch, self._held = engine, watch, held

    @property
    def pid(self) -> int | None:
        return getattr(self.engine, "pid", None)

    def send(self, message: Join | Cancel) -> None:
        if isinstance(message, Join) and self._held() <= 1:
            self.watch.holding()
        self.engine.send(message)


class _Refusing:
    """Where the engine would be while none runs (`down`: a new one yet to start, or none after
    they gave up): a request sent here fails at once."""

    def __init__(self, down: Down, refuse: Callable[[int, Exception], None]) -> None:
        self.down, self._refuse = down, refuse

    def send(self, message: Join | Cancel) -> None:
        if isinstance(message, Join):
            self._refuse(message.request_id, self.down.refusal())
