"""translate-serve's decoding engine loop: the model side of continuous batching, in the model's
process (or a thread of the server), which never sees text.

The server tokenises a request's lines (`service.tokenise`) and sends them as one `Join`;
the engine loop (`run_engine`, in the model's process or thread) puts them into the running
search of their setting at its next step, steps every running search once, and sends an
`Answer` for each request whose last line is done: the hypotheses' ids, which the server
detokenises (`service.detokenise`). No turns: between two steps the loop takes whatever has
arrived, without waiting; it waits only when nothing is left to search.

Each search setting (`SearchSettings`) has a running search of its own, made as translate-cli
makes its own (`pipeline.search_plan`, `search.Search`): the same length rule, input limit
and restriction; greedy at beam 1.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from translate.decode import pipeline
from translate.decode.loaded_model import LoadedModel
from translate.decode.search import Search
from translate.decode.settings import SearchSettings
from translate.decode.steps import Hypothesis
from translate.text.vocab import EOS_ID

# Waiting lines join a running search once they are an eighth of it, or have waited this many
# steps: each join is an encoder call (and with the cohorts a cache of its own), so joining one
# by one costs more.
JOIN_FRACTION = 8
JOIN_AFTER_STEPS = 4


@dataclass(frozen=True)
class Join:
    """A request for the engine: its segments' source ids (`Segments.ids`) and its search setting."""

    request_id: int
    segments: list[list[int]]
    key: SearchSettings


@dataclass(frozen=True)
class Cancel:
    """The request's client left: its lines not yet searched are dropped."""

    request_id: int


@dataclass(frozen=True)
class Answer:
    """A request done (`found`: each segment's hypotheses) or failed (`error`), with what the model
    did since the answer before: `seconds` at work and `searching`, the most segments it held."""

    request_id: int
    found: list[list[Hypothesis]] | None
    error: str = ""
    seconds: float = 0.0
    searching: int = 0


@dataclass(frozen=True)
class Loaded:
    """The model's process has loaded the model: its loop runs (the server's loading bound ends,
    its bound on silence begins)."""


@dataclass(frozen=True)
class Heartbeat:
    """The engine still works on what it holds: sent while a long search answers nothing, so
    that the server does not take it for a stalled process."""


@dataclass(frozen=True)
class Failed:
    """Why the model's process cannot go on (its model did not load, or its loop raised), sent
    before it exits."""

    error: str


@dataclass
class _Request:
    found: list[list[Hypothesis]]
    left: int


@dataclass
class _RunningSearch:
    """One search setting's running search, and the segments waiting to join it: a queue a
    request, taken in turn (round robin), so that a request of many sentences holds another's
    one behind at most one of its own."""

    search: Search
    target: pipeline.TargetTags
    waiting: dict[int, deque] = field(default_factory=dict)  # request -> (segment, source ids)
    waited: int = 0  # steps the first waiting segment has waited
    tokens: dict = field(default_factory=dict)  # segment -> source tokens, of the segments searched

    @property
    def waiting_count(self) -> int:
        return sum(map(len, self.waiting.values()))

    def wait(self, request_id: int, segment: tuple[int, int], ids: list[int]) -> None:
        self.waiting.setdefault(request_id, deque()).append((segment, ids))

    def next_waiting(self) -> tuple[tuple[int, int], list[int]] | None:
        """The segment whose turn it is (of the request first in turn), without taking it."""
        for queue_ in self.waiting.values():
            return queue_[0]
        return None

    def take_next(self) -> tuple[tuple[int, int], list[int]]:
        """The segment whose turn it is; its request goes to the end of the turn."""
        request_id = next(iter(self.waiting))
        queue_ = self.waiting.pop(request_id)
        entry = queue_.popleft()
        if queue_:
            self.waiting[request_id] = queue_
        return entry

    def forget(self, request_id: int) -> None:
        """A request's segments gone: those waiting dropped, those searched leaving the search."""
        self.waiting.pop(request_id, None)
        searched = [segment for segment in self.tokens if segment[0] == request_id]
        if searched:
            self.search.drop(searched)
            for segment in searched:
                del self.tokens[segment]


class EngineLoop:
    """The requests in the model's hands, and a running search per search setting."""

    def __init__(self, loaded: LoadedModel, batch_tokens: int) -> None:
        self.loaded = loaded
        self.batch_tokens = batch_tokens  # source tokens a search holds (one longer line alone)
        self.requests: dict[int, _Request] = {}
        self.searches: dict[SearchSettings, _RunningSearch] = {}
        self.seconds = 0.0  # at work since the last answer
        self.searching = 0  # the most segments searched at once since the last answer

    @property
    def busy(self) -> bool:
        return any(len(running.search) or running.waiting for running in self.searches.values())

    def take(self, message: Join | Cancel) -> list[Answer]:
        """A new request waits for the next step of its setting's search (a request of blank
        lines alone is answered at once; one whose setting fails, failed); a cancelled one's
        lines not yet searched are dropped."""
        started = time.perf_counter()
        try:
            if isinstance(message, Cancel):
                self._cancel(message.request_id)
                return []
            return self._join_request(message)
        finally:
            self.seconds += time.perf_counter() - started

    def _join_request(self, message: Join) -> list[Answer]:
        request_id, key = message.request_id, message.key
        try:
            running = self._running_search(key)
        except Exception as error:  # noqa: BLE001 - one bad request fails alone
            return [self._answer(request_id, None, f"{type(error).__name__}: {error}")]
        request = _Request([[pipeline.BLANK] for _ in message.segments], 0)
        self.requests[request_id] = request
        for index, ids in enumerate(message.segments):
            if ids:  # an empty segment (a blank line) is not decoded
                running.wait(
                    request_id, (request_id, index), running.target.prefix + ids + [EOS_ID]
                )
                request.left += 1
        if not request.left:
            return [self._answer(request_id, self.requests.pop(request_id).found)]
        return []

    def _cancel(self, request_id: int) -> None:
        """The request's client left: none of its segments is searched from the next step on."""
        if self.requests.pop(request_id, None) is None:
            return
        for running in self.searches.values():
            running.forget(request_id)

    def step(self) -> list[Answer]:
        """One step of every running search, the waiting segments joining first; the requests done
        at it, and those failed (every request of a search that raised: the server goes on)."""
        started = time.perf_counter()
        answers = []
        for key, running in list(self.searches.items()):
            try:
                self._join(running)
                self.searching = max(
                    self.searching, sum(len(other.search) for other in self.searches.values())
                )
                finished = running.search.step()
            except Exception as error:  # noqa: BLE001 - that search's requests fail
                answers += self._fail_lane(key, f"{type(error).__name__}: {error}")
                continue
            for segment, hypotheses in finished:
                request_id, index = segment
                running.tokens.pop(segment)
                request = self.requests.get(request_id)
                if request is None:  # cancelled
                    continue
                request.found[index] = hypotheses
                request.left -= 1
                if not request.left:
                    answers.append(self._answer(request_id, self.requests.pop(request_id).found))
        for key in [
            key
            for key, running in self.searches.items()
            if not (len(running.search) or running.waiting)
        ]:
            # Idle: a client sending ever new settings must not grow the server.
            del self.searches[key]
        self.seconds += time.perf_counter() - started
        return answers

    def _answer(self, request_id: int, found: list | None, error: str = "") -> Answer:
        """An answer carrying the work done since the last one (the server's metrics)."""
        answer = Answer(request_id, found, error, self.seconds, self.searching)
        self.seconds, self.searching = 0.0, 0
        return answer

    def _running_search(self, key: SearchSettings) -> _RunningSearch:
        if key not in self.searches:
            target = pipeline.target_tags_for(self.loaded, key.target_lang, key.source_lang)
            plan = pipeline.search_plan(self.loaded, key, target)
            self.searches[key] = _RunningSearch(Search(self.loaded.model, plan), target)
        return self.searches[key]

    def _join(self, running: _RunningSearch) -> None:
        """Waiting segments into the search, under the token budget, when enough have gathered."""
        searching = len(running.search)
        if not running.waiting:
            return
        running.waited += 1
        if (
            searching
            and running.waiting_count * JOIN_FRACTION < searching
            and running.waited <= JOIN_AFTER_STEPS
        ):
            return
        tokens = sum(running.tokens.values())
        segments, sources, starts = [], [], []
        while (turn := running.next_waiting()) is not None and (
            tokens + len(turn[1]) <= self.batch_tokens or not (searching or segments)
        ):
            segment, ids = running.take_next()
            segments.append(segment)
            sources.append(ids)
            starts.append(running.target.start)
            running.tokens[segment] = len(ids)
            tokens += len(ids)
        if segments:
            running.search.add(segments, sources, starts)
            running.waited = 0

    def _fail_lane(self, key: SearchSettings, why: str) -> list[Answer]:
        """Every request with a line in running `key` fails with `why`; the running starts afresh."""
        running = self.searches.pop(key)
        request_ids = {request_id for request_id, _ in running.tokens} | set(running.waiting)
        answers = []
        for request_id in sorted(request_ids):
            if self.requests.pop(request_id, None) is not None:
                answers.append(self._answer(request_id, None, why))
        return answers


def run_engine(
    engine: EngineLoop,
    inbox,
    send: Callable[[Answer | Loaded | Heartbeat | None], None],
    heartbeat: float | None = None,
) -> None:
    """The engine loop: take every message waiting in `inbox` (a `queue.Queue` or a
    multiprocessing one; `None` ends the loop), step, send the answers; wait on `inbox` only when
    there is nothing to search. Its last message is `None`.

    With `heartbeat` (seconds) it first sends `Loaded`, and while it holds work it sends a
    `Heartbeat` after each step that ends `heartbeat` seconds or more after its last message: a
    server that hears nothing for longer while it waits for answers knows the loop has stalled."""
    said = time.monotonic()

    def say(message: Answer | Loaded | Heartbeat) -> None:
        nonlocal said
        send(message)
        said = time.monotonic()

    if heartbeat is not None:
        say(Loaded())
    while True:
        block = not engine.busy
        while True:
            try:
                message = inbox.get(block=block)
            except queue.Empty:
                break
            if message is None:
                send(None)
                return
            for answer in engine.take(message):
                say(answer)
            block = False
        for answer in engine.step():
            say(answer)
        if heartbeat is not None and engine.busy and time.monotonic() - said >= heartbeat:
            say(Heartbeat())
