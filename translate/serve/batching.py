"""Dynamic batching for translate-serve: the sentences of concurrent requests translated together.

Requests wait in one queue. By default (`ContinuousBatcher`, at the end) they join the model's
running search between two steps. With `--batching batch` (`Batcher`), the batching task takes
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
import collections
import concurrent.futures
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor
from dataclasses import dataclass, field

from translate.decode.settings import SearchSettings


class QueueFull(Exception):
    """More lines are waiting than the server accepts; the client should retry later."""


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
        self.on_batch = (
            on_batch  # (sentences, source tokens, model seconds) of each batch, for the metrics
        )
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
        """The batching task stopped, and the worker with it once its call under way ends (a
        turn of the search, or a batch); the calls queued behind it are dropped."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._worker.shutdown(wait=True, cancel_futures=True)

    async def submit(self, lines: list[str], key: SearchSettings) -> list[str]:
        """The translations of `lines`, in order (`key.n_best` a line, as `translate_lines` gives
        them); QueueFull when the queue is at its bound."""
        if not lines:
            return []
        if self.queued_lines + len(lines) > self.max_queued_lines:
            raise QueueFull(
                f"{self.queued_lines} lines are waiting (at most {self.max_queued_lines})"
            )
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


# Turns of the continuous search asked for ahead: the next waits in the worker's queue while one runs.
PIPELINED_TURNS = 2


class ContinuousBatcher(Batcher):
    """Continuous batching: requests join the model's running search between two of its steps
    and are answered at the step their last line is done (`translate.serve.continuous`), so a
    short sentence does not wait for a batch's longest, nor a new one for the batch to end.

    `advance(new, max_seconds)` runs in the worker: it takes the new requests (ticket, lines,
    setting) and returns a `Progress` once a request is done or `max_seconds` have passed."""

    def __init__(
        self,
        advance: Callable,
        count_tokens: Callable[[str], int],
        max_wait: float,
        max_queued_lines: int,
        on_batch: Callable[..., None] | None = None,
        new_worker: Callable[[], Executor] | None = None,
    ) -> None:
        super().__init__(advance, count_tokens, 0, max_wait, max_queued_lines, on_batch, new_worker)
        self._in_flight: dict[int, Job] = {}
        self._tickets = 0

    def _hand_over(self) -> list[tuple[int, list[str], SearchSettings]]:
        """The requests waiting now, as the worker takes them (ticket, lines, setting). Their lines
        count against `max_queued_lines` until they are answered: the worker holds them meanwhile."""
        new = []
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if job.future.done():  # a client that left is not translated for
                self.queued_lines -= len(job.lines)
                continue
            self._tickets += 1
            self._in_flight[self._tickets] = job
            new.append((self._tickets, job.lines, job.key))
        return new

    def _answered(self, ticket: int) -> Job:
        job = self._in_flight.pop(ticket)
        self.queued_lines -= len(job.lines)
        return job

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        calls: collections.deque = collections.deque()  # the worker's turns asked for, in order

        def next_turn() -> None:
            new = self._hand_over()
            try:
                calls.append(loop.run_in_executor(self._worker, self.translate, new, self.max_wait))
            except (
                Exception
            ) as error:  # a broken executor refuses work at once: the turn fails as one that ran
                refused = loop.create_future()
                refused.set_exception(error)
                calls.append(refused)

        while True:
            if not calls:
                if not self._in_flight:  # idle: wait for a request
                    job = await self._queue.get()
                    self._queue.put_nowait(job)
                next_turn()
            if len(calls) < PIPELINED_TURNS and self._in_flight:
                next_turn()  # queued behind the one under way, so the model never waits for this loop
            try:
                progress = await calls.popleft()
            except Exception as error:  # the worker failed as a whole: every request it held fails
                for call in calls:
                    call.cancel()
                calls.clear()
                self._fail([self._answered(ticket) for ticket in list(self._in_flight)], error)
                continue
            answered = [(self._answered(ticket), outputs) for ticket, outputs in progress.done]
            for ticket, why in progress.failed:
                job = self._answered(ticket)
                if not job.future.done():
                    job.future.set_exception(RuntimeError(why))
            if self.on_batch is not None:
                self.on_batch(
                    sum(len(job.lines) for job, _ in answered),
                    sum(job.tokens for job, _ in answered),
                    progress.seconds,
                    progress.searching,
                )
            for job, outputs in answered:
                if not job.future.done():
                    job.future.set_result(outputs)
