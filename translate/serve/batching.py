"""Dynamic batching for translate-serve: the sentences of concurrent requests translated together.

By default (`ContinuousBatcher`, at the end) each request is sent to the model's engine loop
at once and joins its running search between two steps. With `--batching batch` (`Batcher`),
requests wait in one queue; the batching task takes
the first, then keeps taking requests until their source tokens reach the token budget or
`max_wait` has passed since the first (no wait after a batch of one request),
and translates all their lines in one call of the same length-sorted, token-budgeted search
translate-cli runs (requests asking for other search settings go in their own call). The
model runs in one worker (a thread, or the process of `translate.serve.worker`), so the event
loop keeps accepting requests meanwhile; a worker process that dies fails its batch's requests
and is replaced for the next.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor
from dataclasses import dataclass, field
from typing import Protocol

from translate.decode.pipeline import Segments
from translate.decode.settings import SearchSettings
from translate.serve.continuous import Answer, Cancel, Join


class QueueFull(Exception):
    """More lines are waiting than the server accepts; the client should retry later."""


def check_room(queued_lines: int, lines: int, max_queued_lines: int) -> None:
    """QueueFull where `lines` more would pass the bound on lines waiting (or held)."""
    if queued_lines + lines > max_queued_lines:
        raise QueueFull(f"{queued_lines} lines are waiting (at most {max_queued_lines})")


class ShuttingDown(Exception):
    """The server's drain time ran out before this request was answered."""


@dataclass(eq=False)  # compared, and kept in a set, by identity
class Job:
    lines: list[str]
    key: SearchSettings
    tokens: int
    future: asyncio.Future = field(repr=False)


class Batcher:
    def __init__(
        self,
        translate: Callable[[list[str], SearchSettings], tuple[list[str], float]],
        count_tokens: Callable[[str], int],
        batch_tokens: int,
        max_wait: float,
        max_queued_lines: int,
        on_batch: Callable[[int, int, float], None] | None = None,
        new_worker: Callable[[], Executor] | None = None,
    ) -> None:
        self.translate = translate  # the translations of a batch and the seconds the model took
        self.count_tokens = count_tokens
        self.batch_tokens = batch_tokens
        self.max_wait = max_wait
        self.max_queued_lines = max_queued_lines
        # Called with (sentences, source tokens, model seconds) of each batch, for the metrics.
        self.on_batch = on_batch
        self.queued_lines = 0
        self._queue: asyncio.Queue[Job] = asyncio.Queue()
        self._new_worker = new_worker or (
            lambda: concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="translate")
        )
        self._worker = self._new_worker()
        self._task: asyncio.Task | None = None
        self._last_batch_jobs = 0
        self._unanswered: set[Job] = set()  # waiting, or being translated

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """The batching task stopped, and the worker with it once the batch under way ends; the
        calls queued behind it are dropped."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._worker.shutdown(wait=True, cancel_futures=True)

    async def submit(self, lines: list[str], key: SearchSettings) -> list[str]:
        """The translations of `lines`, in order (`key.n_best` a line, as `translate_lines` gives
        them); QueueFull when the queue is at its bound."""
        if not lines:
            return []
        check_room(self.queued_lines, len(lines), self.max_queued_lines)
        job = Job(
            lines,
            key,
            sum(map(self.count_tokens, lines)),
            asyncio.get_running_loop().create_future(),
        )
        self.queued_lines += len(lines)
        self._unanswered.add(job)
        try:
            await self._queue.put(job)
            return await job.future  # cancelled with the request when its client goes away
        finally:
            self._unanswered.discard(job)

    def fail_all(self, error: Exception) -> None:
        """Every request waiting or being translated fails with `error` now (the server's drain
        time is over); what the worker still returns for them is dropped."""
        for job in list(self._unanswered):
            if not job.future.done():
                job.future.set_exception(error)

    def _fail(self, jobs: list[Job], error: Exception) -> None:
        """`jobs` fail with `error` (those whose client is still there); a worker process that
        died (killed, out of memory) is replaced for the next."""
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(error)
        if isinstance(error, BrokenExecutor):
            self._worker.shutdown(wait=False)
            self._worker = self._new_worker()

    async def _collect(self) -> list[Job]:
        """The first waiting job and those that arrive within `max_wait`, up to the token budget.

        After a batch of one request there is no wait: a lone client would only pay for it, and
        under load requests queue while the model works and join without one."""
        jobs = [await self._queue.get()]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.max_wait if self._last_batch_jobs > 1 else 0.0)
        tokens = jobs[0].tokens
        while tokens < self.batch_tokens:
            try:
                job = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            jobs.append(job)
            tokens += job.tokens
        self._last_batch_jobs = len(jobs)
        return jobs

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._collect()
            self.queued_lines -= sum(len(job.lines) for job in jobs)
            groups: dict[SearchSettings, list[Job]] = {}
            for job in jobs:
                if not job.future.done():  # a client that left is not translated for
                    groups.setdefault(job.key, []).append(job)
            for key, group in groups.items():
                lines = [line for job in group for line in job.lines]
                try:
                    outputs, seconds = await loop.run_in_executor(
                        self._worker, self.translate, lines, key
                    )
                except Exception as error:  # one bad batch fails its own requests, not the server
                    self._fail(group, error)
                    continue
                if self.on_batch is not None:
                    self.on_batch(len(lines), sum(job.tokens for job in group), seconds)
                start, each = 0, key.n_best
                for job in group:
                    if not job.future.done():
                        job.future.set_result(outputs[start : start + each * len(job.lines)])
                    start += each * len(job.lines)


class Engine(Protocol):
    """Continuous batching's engine loop as the server sees it (`translate.serve.worker`'s
    `EngineProcess` or `EngineThread`)."""

    def send(self, message: Join | Cancel) -> None: ...

    def receive(self) -> Answer | None: ...  # EOFError once the engine is gone

    def stop(self) -> None: ...


@dataclass
class _Sent:
    job: Job
    segments: Segments


class ContinuousBatcher:
    """Continuous batching: a request is tokenised here (`prepare`), sent to the engine loop at
    once (`translate.serve.continuous`), joins its running search at one of the next steps and is
    answered at the step its last line is done (`finish` makes the texts), so a short sentence
    does not wait for a batch's longest, nor a new one for a batch to end. A reader thread
    waits for the engine's answers and hands them to the event loop; an engine that is gone
    (its process killed, out of memory) fails the requests it held and is started again."""

    def __init__(
        self,
        start_engine: Callable[[], Engine],
        prepare: Callable[[list[str], SearchSettings], Segments],
        finish: Callable[[Segments, list, int], list[str]],
        max_queued_lines: int,
        on_batch: Callable[..., None] | None = None,
    ) -> None:
        self.max_queued_lines = max_queued_lines
        self.on_batch = on_batch  # (sentences, source tokens, model seconds, lines searched)
        self.queued_lines = 0  # lines sent and not answered: the engine holds them meanwhile
        self._start_engine, self._prepare, self._finish = start_engine, prepare, finish
        self._engine: Engine | None = None
        self._reader: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sent: dict[int, _Sent] = {}
        self._tickets = 0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._run_engine()

    def _run_engine(self) -> None:
        engine = self._engine = self._start_engine()
        self._reader = threading.Thread(
            target=self._read, args=(engine,), name="translate-answers", daemon=True
        )
        self._reader.start()

    def _read(self, engine: Engine) -> None:
        """The engine's answers to the event loop, until it stops (None) or is gone (EOFError)."""
        while True:
            try:
                answer = engine.receive()
            except (EOFError, OSError):
                answer = EOFError
            if answer is None:
                return
            try:
                self._loop.call_soon_threadsafe(self._arrived, engine, answer)
            except RuntimeError:  # the event loop is closed
                return
            if answer is EOFError:
                return

    def _arrived(self, engine: Engine, answer: Answer | type[EOFError]) -> None:
        if engine is not self._engine:  # a stopped engine's
            return
        if answer is EOFError:
            sent, self._sent = self._sent, {}
            self.queued_lines -= sum(len(entry.job.lines) for entry in sent.values())
            for entry in sent.values():
                if not entry.job.future.done():
                    entry.job.future.set_exception(BrokenExecutor("the model process ended"))
            engine.stop()
            self._run_engine()
            return
        entry = self._sent.pop(answer.request_id, None)
        if entry is None:  # its client left, or the drain failed it
            return
        job = entry.job
        self.queued_lines -= len(job.lines)
        if self.on_batch is not None:
            self.on_batch(len(job.lines), job.tokens, answer.seconds, answer.searching)
        if job.future.done():
            return
        if answer.error:
            job.future.set_exception(RuntimeError(answer.error))
        else:
            job.future.set_result(self._finish(entry.segments, answer.found, job.key.n_best))

    async def submit(self, lines: list[str], key: SearchSettings) -> list[str]:
        """The translations of `lines`, in order (`key.n_best` a line, as `translate_lines` gives
        them); QueueFull when the lines the engine holds would pass the bound."""
        if not lines:
            return []
        check_room(self.queued_lines, len(lines), self.max_queued_lines)
        segments = self._prepare(lines, key)
        tokens = sum(len(ids) + 1 for ids in segments.ids if ids)
        job = Job(lines, key, tokens, asyncio.get_running_loop().create_future())
        self._tickets += 1
        request_id = self._tickets
        self._sent[request_id] = _Sent(job, segments)
        self.queued_lines += len(lines)
        try:
            self._engine.send(Join(request_id, segments.ids, key))
            return await job.future  # cancelled with the request when its client goes away
        finally:
            if self._sent.pop(request_id, None) is not None:  # not answered: its lines are dropped
                self.queued_lines -= len(lines)
                self._engine.send(Cancel(request_id))

    def fail_all(self, error: Exception) -> None:
        """Every request sent and not answered fails with `error` now (the server's drain time is
        over); what the engine still answers for them is dropped."""
        for entry in list(self._sent.values()):
            if not entry.job.future.done():
                entry.job.future.set_exception(error)

    async def stop(self) -> None:
        """The engine stopped once its step under way is done; its answers after that dropped."""
        engine, self._engine = self._engine, None
        if engine is not None:
            await asyncio.get_running_loop().run_in_executor(None, engine.stop)
        if self._reader is not None:
            self._reader.join()
