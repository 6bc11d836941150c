"""translate-serve's decoding engine loop: the model side of continuous batching, in the model's
process (or a thread of the server), which never sees text.

The server tokenises a request's lines (`service.tokenise`) and sends them as one `Join`;
the engine loop (`run_engine`, in the model's process or thread) puts them into the running
search of their lane at its next step, steps every running search once, and sends an
`Answer` for each request whose last line is done: the hypotheses' ids, which the server
detokenises (`service.detokenise`). No turns: between two steps the loop takes whatever has
arrived, without waiting; it waits only when nothing is left to search.

A request's search settings (`SearchSettings`) become its plan as translate-cli makes its own
(`pipeline.search_plan`): the same length rule, restriction and target tags; greedy at beam 1.
Requests whose plans share a lane (`SearchPlan.lane`: beam and n-best sizes) share one running
search, each sentence with its own length penalty, length rule, allowed tokens and target tag:
requests for ten target languages step one search, not ten.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from translate.decode import pipeline
from translate.decode.engine import CTranslate2Lane
from translate.decode.loaded_model import LoadedModel
from translate.decode.search import Search
from translate.decode.settings import Budget, SearchPlan, SearchSettings
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
    its bound on silence begins); `engine` says what searches, and why."""

    engine: str = ""


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
    left: int  # segments not yet answered


@dataclass(frozen=True)
class _Waiting:
    """A segment waiting to join a search: its source ids (EOS and any source tag included),
    its request's plan and first decoder token."""

    segment: tuple[int, int]  # (request, index)
    ids: list[int]
    plan: SearchPlan
    start: int | None


@dataclass
class _RunningSearch:
    """One lane's running search, and the segments waiting to join it: a queue a request,
    taken in turn (round robin), so that a request of many sentences holds another's one behind
    at most one of its own."""

    search: Search | CTranslate2Lane
    waiting: dict[int, deque[_Waiting]] = field(default_factory=dict)  # by request
    waited: int = 0  # steps the first waiting segment has waited

    @property
    def waiting_count(self) -> int:
        return sum(map(len, self.waiting.values()))

    def wait(self, request_id: int, entry: _Waiting) -> None:
        self.waiting.setdefault(request_id, deque()).append(entry)

    def next_waiting(self) -> _Waiting | None:
        """The segment whose turn it is (of the request first in turn), without taking it."""
        for queue_ in self.waiting.values():
            return queue_[0]
        return None

    def take_next(self) -> _Waiting:
        """The segment whose turn it is; its request goes to the end of the turn."""
        request_id = next(iter(self.waiting))
        queue_ = self.waiting.pop(request_id)
        entry = queue_.popleft()
        if queue_:
            self.waiting[request_id] = queue_
        return entry

    def forget(self, request_id: int, segments: int) -> None:
        """A request's `segments` gone: those waiting dropped, those searched leaving the search."""
        self.waiting.pop(request_id, None)
        self.search.drop([(request_id, index) for index in range(segments)])

    def request_ids(self) -> set[int]:
        """The requests with a segment searched or waiting."""
        searched = {request_id for request_id, _ in self.search.held_ids()}
        return searched | set(self.waiting)


class EngineLoop:
    """The requests in the model's hands, and a running search per lane (`SearchPlan.lane`)."""

    def __init__(self, loaded: LoadedModel, budget: Budget) -> None:
        self.loaded = loaded
        self.budget = budget  # what each running search holds (one longer line alone)
        self.requests: dict[int, _Request] = {}
        self.searches: dict[tuple, _RunningSearch] = {}
        self.seconds = 0.0  # at work since the last answer
        self.searching = 0  # the most segments searched at once since the last answer

    @property
    def busy(self) -> bool:
        return any(len(running.search) or running.waiting for running in self.searches.values())

    def take(self, message: Join | Cancel) -> list[Answer]:
        """A new request waits for the next step of its lane's search (a request of blank
        lines alone is answered at once; one whose settings fail, failed); a cancelled one's
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
            target = pipeline.target_tags_for(self.loaded, key.target_lang, key.source_lang)
            plan = pipeline.search_plan(self.loaded, key, target)
            running = self._running_search(plan)
        except Exception as error:  # noqa: BLE001 - one bad request fails alone
            return [self._answer(request_id, None, f"{type(error).__name__}: {error}")]
        request = _Request([[pipeline.BLANK] for _ in message.segments], 0)
        self.requests[request_id] = request
        for index, ids in enumerate(message.segments):
            if ids:  # an empty segment (a blank line) is not decoded
                source = target.prefix + ids + [EOS_ID]
                running.wait(request_id, _Waiting((request_id, index), source, plan, target.start))
                request.left += 1
        if not request.left:
            return [self._answer(request_id, self.requests.pop(request_id).found)]
        return []

    def _cancel(self, request_id: int) -> None:
        """The request's client left: none of its segments is searched from the next step on."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return
        for running in self.searches.values():
            running.forget(request_id, len(request.found))

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
            for (request_id, index), hypotheses in finished:
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

    def _running_search(self, plan: SearchPlan) -> _RunningSearch:
        lane = plan.lane()
        if lane not in self.searches:
            search = (
                Search(self.loaded.model, plan, self.budget)
                if self.loaded.ctranslate2 is None
                else CTranslate2Lane(self.loaded, plan, self.budget)
            )
            self.searches[lane] = _RunningSearch(search)
        return self.searches[lane]

    def _join(self, running: _RunningSearch) -> None:
        """Waiting segments into the search, within its budget, when enough have gathered."""
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
        room = running.search.room()
        joining: list[_Waiting] = []
        while (turn := running.next_waiting()) is not None and room.take(
            running.search.cost(len(turn.ids), turn.plan)
        ):
            joining.append(running.take_next())
        if joining:
            running.search.add(
                [entry.segment for entry in joining],
                [entry.ids for entry in joining],
                [entry.start for entry in joining],
                [entry.plan for entry in joining],
            )
            running.waited = 0

    def _fail_lane(self, key: tuple, why: str) -> list[Answer]:
        """Every request with a line in lane `key`'s search fails with `why`; the lane starts
        afresh."""
        running = self.searches.pop(key)
        answers = []
        for request_id in sorted(running.request_ids()):
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
        say(Loaded(engine.loaded.engine))
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
