"""translate-serve's model side with continuous batching: requests' lines join the running search
between two steps and each request is answered at the step its last line is done.

`advance` is what the server calls, over and over, in the model's worker: it hands over the
requests that arrived, runs steps until a request is done or `max_seconds` have passed, and
returns the translations done. Lines are cut, tagged and joined again as translate-cli does
(`pipeline.source_units`, `pipeline.join_units`), and each search setting (`SearchSettings`) has a
running search of its own, made as translate-cli makes its own (`pipeline.search_plan`,
`engine.new_search`): the same length rule, input limit and restriction; greedy at beam 1.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from translate.decode import pipeline
from translate.decode.engine import Search, new_search
from translate.decode.settings import SearchSettings
from translate.decode.translator import Translator
from translate.text.vocab import EOS_ID

# Waiting lines join a running search once they are an eighth of it, or have waited this many
# steps: each join is an encoder call and a cache of its own, so joining one by one costs more.
JOIN_FRACTION = 8
JOIN_AFTER_STEPS = 4


@dataclass
class Progress:
    """What one `advance` call did: requests done (ticket, translations) and failed (ticket,
    why), the seconds the model worked, and the most lines it searched at once (its batch size)."""

    done: list[tuple[int, list[str]]]
    failed: list[tuple[int, str]]
    seconds: float
    searching: int


@dataclass
class _Request:
    lines: int
    owners: list[int]
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


class ContinuousTranslator:
    """The requests in the model's hands, and a running search per search setting."""

    def __init__(self, translator: Translator, batch_tokens: int) -> None:
        self.translator = translator
        self.batch_tokens = (
            batch_tokens  # source tokens a search holds at most (one longer line alone)
        )
        self.requests: dict[int, _Request] = {}
        self.lanes: dict[SearchSettings, _Lane] = {}

    def _lane(self, key: SearchSettings) -> _Lane:
        if key not in self.lanes:
            direction = pipeline.direction_for(self.translator, key.target_lang, key.source_lang)
            plan = pipeline.search_plan(self.translator, key, direction)
            self.lanes[key] = _Lane(new_search(self.translator.model, plan), direction)
        return self.lanes[key]

    def advance(
        self, new: list[tuple[int, list[str], SearchSettings]], max_seconds: float
    ) -> Progress:
        """Take the requests `new` (ticket, lines, setting), then search until a request is done
        or `max_seconds` have passed; a request whose lines are all blank is done at once."""
        started = time.perf_counter()
        done, failed = [], []
        for ticket, lines, key in new:
            try:
                lane = self._lane(key)
                units, owners = pipeline.source_units(
                    self.translator, lines, lane.direction, key.max_input_tokens
                )
            except Exception as error:  # noqa: BLE001 - one bad request fails alone
                failed.append((ticket, f"{type(error).__name__}: {error}"))
                continue
            request = _Request(len(lines), owners, [[([], 0.0, 0.0)] for _ in units], 0)
            self.requests[ticket] = request
            for index, ids in enumerate(units):
                if ids:  # an empty unit (a blank line) is not decoded
                    lane.waiting.append(((ticket, index), lane.direction.prefix + ids + [EOS_ID]))
                    request.left += 1
            if not request.left:
                done.append((ticket, self._texts(ticket, key.n_best)))
        searching = 0
        while not done and any(len(lane.search) or lane.waiting for lane in self.lanes.values()):
            for key, lane in list(self.lanes.items()):
                try:
                    self._join(lane)
                    searching = max(
                        searching, sum(len(other.search) for other in self.lanes.values())
                    )
                    finished = lane.search.step()
                except Exception as error:  # noqa: BLE001 - the lane's requests fail, the server goes on
                    failed += self._fail_lane(key, f"{type(error).__name__}: {error}")
                    continue
                for unit, hypotheses in finished:
                    ticket, index = unit
                    lane.tokens.pop(unit)
                    request = self.requests.get(ticket)
                    if request is None:
                        continue
                    request.found[index] = pipeline.as_found(hypotheses, key.beam)
                    request.left -= 1
                    if not request.left:
                        done.append((ticket, self._texts(ticket, key.n_best)))
            if time.perf_counter() - started >= max_seconds:
                break
        for key in [
            key for key, lane in self.lanes.items() if not (len(lane.search) or lane.waiting)
        ]:
            del self.lanes[key]  # idle: a client sending ever new settings must not grow the server
        return Progress(done, failed, time.perf_counter() - started, searching)

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

    def _texts(self, ticket: int, n_best: int) -> list[str]:
        """A request's translations as `translate_lines` gives them: each line's n-best list."""
        request = self.requests.pop(ticket)
        nbest = pipeline.join_units(
            self.translator, request.lines, request.owners, request.found, n_best
        )
        return [entry.text for entries in nbest for entry in entries]

    def _fail_lane(self, key: SearchSettings, why: str) -> list[tuple[int, str]]:
        """Every request with a line in lane `key` fails with `why`; the lane starts afresh."""
        lane = self.lanes.pop(key)
        tickets = {ticket for ticket, _ in lane.tokens} | {
            ticket for (ticket, _), _ in lane.waiting
        }
        for ticket in tickets:
            self.requests.pop(ticket, None)
        return [(ticket, why) for ticket in sorted(tickets)]
