"""A request rate per client (its API key, else its address) over a moving window of one minute,
as LibreTranslate's --req-limit counts it; a request costs what the caller says (translate-serve:
one a line it holds)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class RateLimiter:
    """`allow(client, cost)`: whether `client` may spend `cost` more in the last minute. Clients
    idle for a whole window are forgotten, so the table never outgrows the clients of a minute."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute, self.clock = per_minute, clock
        self.spent: dict[str, deque[tuple[float, int]]] = {}
        self.next_sweep = 0.0

    def allow(self, client: str, cost: int = 1) -> bool:
        now = self.clock()
        if now >= self.next_sweep:
            self._forget_idle(now)
        window = self.spent.setdefault(client, deque())
        while window and window[0][0] <= now - WINDOW_SECONDS:
            window.popleft()
        if sum(spent for _, spent in window) + cost > self.per_minute:
            return False
        window.append((now, cost))
        return True

    def _forget_idle(self, now: float) -> None:
        for client in [
            c for c, w in self.spent.items() if not w or w[-1][0] <= now - WINDOW_SECONDS
        ]:
            del self.spent[client]
        self.next_sweep = now + WINDOW_SECONDS

    def message(self) -> str:
        return f"Slowdown: {self.per_minute} per 1 minute"
