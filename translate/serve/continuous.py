"""translate-serve's decoding engine loop: the model side of continuous batching.

The server tokenises a request's lines (`prepare`) and sends them as one `Join`;
the engine loop (`run_engine`, in the model's process or thread) puts them into the running
search of their setting at its next step, steps every running search once, and sends an
`Answer` for each request whose last line is done: the hypotheses' ids, which the server
detokenises (`finish`). No turns: between two steps the loop takes whatever has
arrived, without waiting; it waits only when nothing is left to search.

Each search setting (`SearchSettings`) has a running search of its own, made as translate-cli
makes its own (`pipeline.search_plan`, `engine.new_search`): the same length rule, input limit
and restriction; greedy at beam 1.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from translate.decode import pipeline
from translate.decode.engine import Search, new_search
from translate.decode.settings import SearchSettings
from translate.decode.translator import Translator
from translate.text.vocab import EOS_ID

# Waiting lines join a running search once they are an eighth of it, or have waited this many
# steps: each join is an encoder call (and with the cohorts a cache of its own), so joining one
# by one costs more.
JOIN_FRACTION = 8
JOIN_AFTER_STEPS = 4


def prepare(translator: Translator, lines: list[str], key: SearchSettings) -> pipeline.Units:
    """A request's lines cut, tagged and tokenised as translate-cli does (`pipeline.source_units`),
    by the server, once."""
    direction = pipeline.direction_for(translator, key.target_lang, key.source_lang)
    return pipeline.source_units(translator, lines, direction, key.max_input_tokens)


def finish(translator: Translator, units: pipeline.Units, found: list, n_best: int) -> list[str]:
    """An answer's hypotheses as `translate_lines` gives them: each line's n-best texts."""
    nbest = pipeline.join_units(translator, units, found, n_best)
    return [entry.text for entries in nbest for entry in entries]


@dataclass(frozen=True)
class Join:
    """A request for the engine: its units' source ids (`Units.ids`) and its search setting."""

    ticket: int
    units: list[list[int]]
    key: SearchSettings


@dataclass(frozen=True)
class Cancel:
    """The request's client left: its lines not yet searched are dropped."""

    ticket: int


@dataclass(frozen=True)
class Answer:
    """A request done (`found`: each unit's hypotheses) or failed (`error`), with what the model
    did since the answer before: `seconds` at work and `searching`, the most units it held."""

    ticket: int
    found: list[list[pipeline.Found]] | None
    error: str = ""
    seconds: float = 0.0
    searching: int = 0


@dataclass
class _Request:
    found: list[list[pipeline.Found]]
    left: int


@dataclass
class _Lane:
    """One search setting's running search, and the units waiting to join it."""

    search: Search
    direction: pipeline.Direction
    waiting: deque = field(default_factory=deque)  # (unit, source ids)
    waited: int = 0  # steps the first waiting unit has waited
    tokens: dict = field(default_factory=dict)  # unit -> source tokens, of the units searched


class EngineLoop:
    """The requests in the model's hands, and a running search per search setting."""

    def __init__(self, translator: Translator, batch_tokens: int) -> None:
        self.translator = translator
        self.batch_tokens = batch_tokens  # source tokens a search holds (one longer line alone)
        self.requests: dict[int, _Request] = {}
        self.lanes: dict[SearchSettings, _Lane] = {}
        self.seconds = 0.0  # at work since the last answer
        self.searching = 0  # the most units searched at once since the last answer

    @property
    def busy(self) -> bool:
        return any(len(lane.search) or lane.waiting for lane in self.lanes.values())

    def take(self, message: Join | Cancel) -> list[Answer]:
        """A new request waits for the next step of its setting's search (a request of blank
        lines alone is answered at once; one whose setting fails, failed); a cancelled one's
        lines not yet searched are dropped."""
        started = time.perf_counter()
        try:
            if isinstance(message, Cancel):
                self._cancel(message.ticket)
                return []
            return self._join_request(message)
        finally:
            self.seconds += time.perf_counter() - started

    def _join_request(self, message: Join) -> list[Answer]:
        ticket, key = message.ticket, message.key
        try:
            lane = self._lane(key)
        except Exception as error:  # noqa: BLE001 - one bad request fails alone
            return [self._answer(ticket, None, f"{type(error).__name__}: {error}")]
        request = _Request([[([], 0.0, 0.0)] for _ in message.units], 0)
        self.requests[ticket] = request
        for index, ids in enumerate(message.units):
            if ids:  # an empty unit (a blank line) is not decoded
                lane.waiting.append(((ticket, index), lane.direction.prefix + ids + [EOS_ID]))
                request.left += 1
        if not request.left:
            return [self._answer(ticket, self.requests.pop(ticket).found)]
        return []

    def _cancel(self, ticket: int) -> None:
        if self.requests.pop(ticket, None) is None:
            return
        for lane in self.lanes.values():
            lane.waiting = deque(entry for entry in lane.waiting if entry[0][0] != ticket)

    def step(self) -> list[Answer]:
        """One step of every running search, the waiting units joining first; the requests done
        at it, and those failed (every request of a search that raised: the server goes on)."""
        started = time.perf_counter()
        answers = []
        for key, lane in list(self.lanes.items()):
            try:
                self._join(lane)
                self.searching = max(
                    self.searching, sum(len(other.search) for other in self.lanes.values())
                )
                finished = lane.search.step()
            except Exception as error:  # noqa: BLE001 - the lane's requests fail
                answers += self._fail_lane(key, f"{type(error).__name__}: {error}")
                continue
            for unit, hypotheses in finished:
                ticket, index = unit
                lane.tokens.pop(unit)
                request = self.requests.get(ticket)
                if request is None:  # cancelled
                    continue
                request.found[index] = pipeline.as_found(hypotheses, key.beam)
                request.left -= 1
                if not request.left:
                    answers.append(self._answer(ticket, self.requests.pop(ticket).found))
        for key in [
            key for key, lane in self.lanes.items() if not (len(lane.search) or lane.waiting)
        ]:
            del self.lanes[key]  # idle: a client sending ever new settings must not grow the server
        self.seconds += time.perf_counter() - started
        return answers

    def _answer(self, ticket: int, found: list | None, error: str = "") -> Answer:
        """An answer carrying the work done since the last one (the server's metrics)."""
        answer = Answer(ticket, found, error, self.seconds, self.searching)
        self.seconds, self.searching = 0.0, 0
        return answer

    def _lane(self, key: SearchSettings) -> _Lane:
        if key not in self.lanes:
            direction = pipeline.direction_for(self.translator, key.target_lang, key.source_lang)
            plan = pipeline.search_plan(self.translator, key, direction)
            self.lanes[key] = _Lane(new_search(self.translator.model, plan), direction)
        return self.lanes[key]

    def _join(self, lane: _Lane) -> None:
        """Waiting units into the search, under the token budget, when enough have gathered."""
        searching = len(lane.search)
        if not lane.waiting:
            return
        lane.waited += 1
        if (
            searching
            and len(lane.waiting) * JOIN_FRACTION < searching
            and lane.waited <= JOIN_AFTER_STEPS
        ):
            return
        tokens = sum(lane.tokens.values())
        units, sources, starts = [], [], []
        while lane.waiting and (
            tokens + len(lane.waiting[0][1]) <= self.batch_tokens or not (searching or units)
        ):
            unit, ids = lane.waiting.popleft()
            units.append(unit)
            sources.append(ids)
            starts.append(lane.direction.start)
            lane.tokens[unit] = len(ids)
            tokens += len(ids)
        if units:
            lane.search.add(units, sources, starts)
            lane.waited = 0

    def _fail_lane(self, key: SearchSettings, why: str) -> list[Answer]:
        """Every request with a line in lane `key` fails with `why`; the lane starts afresh."""
        lane = self.lanes.pop(key)
        tickets = {ticket for ticket, _ in lane.tokens} | {
            ticket for (ticket, _), _ in lane.waiting
        }
        answers = []
        for ticket in sorted(tickets):
            if self.requests.pop(ticket, None) is not None:
                answers.append(self._answer(ticket, None, why))
        return answers


def run_engine(engine: EngineLoop, inbox, send: Callable[[Answer | None], None]) -> None:
    """The engine loop: take every message waiting in `inbox` (a `queue.Queue` or a
    multiprocessing one; `None` ends the loop), step, send the answers; wait on `inbox` only when
    there is nothing to search. Its last message is `None`."""
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
                send(answer)
            block = False
        for answer in engine.step():
            send(answer)
