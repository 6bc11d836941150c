"""How translate-serve watches its model process: what it hears from it (`Watch`: loaded,
heartbeats, answers; stalled when it holds work and says nothing for the model timeout), how a
process that ended is told (`exit_cause`), what requests get meanwhile (`ModelUnavailable`: 503
with Retry-After) and when the next starts (`Restarts`: backed off, given up once too many in a
row failed to load, `Down` saying why)."""

from __future__ import annotations

import logging
import math
import signal
import time
from dataclasses import dataclass

from translate.serve.engine_loop import Failed, Loaded

log = logging.getLogger("translate.serve")

LOAD_TIMEOUT = 600.0  # seconds a model process has to load its model
FAILURE_CHARS = 400  # of a load error's message, in the log


class ModelUnavailable(Exception):
    """No model process can answer a request: the one holding it stopped or stalled, a new one is
    yet to start, or the server gave up starting them. `retry_after`: seconds, for Retry-After."""

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ModelStartError(Exception):
    """A model process that could not be started: the log's detail, and `cause` in words without
    paths (clients and /ready see it)."""

    def __init__(self, detail: str, cause: str) -> None:
        super().__init__(detail)
        self.cause = cause


def load_failure(checkpoint: str, error: BaseException) -> str:
    """Why `checkpoint` did not load, in one line of the log (at most `FAILURE_CHARS` of it)."""
    words = " ".join(str(error).split())
    if len(words) > FAILURE_CHARS:
        words = words[: FAILURE_CHARS - 3] + "..."
    return f"could not load {checkpoint}: {type(error).__name__}: {words}"


def check_checkpoint(checkpoint: str) -> None:
    """ModelStartError where the checkpoint cannot be opened: said before a process is spawned."""
    try:
        with open(checkpoint, "rb"):
            pass
    except OSError as error:
        raise ModelStartError(
            load_failure(checkpoint, error), "could not open its checkpoint"
        ) from None


def start_failure(error: Exception) -> tuple[str, str]:
    """A failed start's cause (for clients and /ready) and detail (for the log)."""
    if isinstance(error, ModelStartError):
        return error.cause, str(error)
    return "could not be started", f"could not be started: {type(error).__name__}: {error}"


def exit_cause(exitcode: int | None) -> str:
    """How a process ended, from its exit code: `exited with status 1`, `was killed by SIGKILL`."""
    if exitcode is None:
        return "closed its pipe without exiting"
    if exitcode >= 0:
        return f"exited with status {exitcode}"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        name = f"signal {-exitcode}"
    return f"was killed by {name}" + (" (out of memory?)" if exitcode == -signal.SIGKILL else "")


class Watch:
    """What the server knows of one model process: when it started, loaded and was last heard
    from, since when it holds work, and what it reported before it exited (`Failed`)."""

    def __init__(self, timeout: float, load_timeout: float = LOAD_TIMEOUT) -> None:
        self.timeout, self.load_timeout = timeout, load_timeout
        self.started = self.heard = self.held_since = time.monotonic()
        self.loaded_at: float | None = None
        self.failure = ""

    def heard_from(self, message) -> bool:
        """Any message: the process is alive. True for `Loaded`."""
        self.heard = time.monotonic()
        if isinstance(message, Failed):
            self.failure = message.error
        if isinstance(message, Loaded):
            self.loaded_at = self.heard
            return True
        return False

    def holding(self) -> None:
        """Work sent to a process that held none: its silence counts from now."""
        self.held_since = time.monotonic()

    def silence(self, holds_work: bool) -> float:
        """Seconds the loaded process has said nothing while it held work (0 while it holds none)."""
        if self.loaded_at is None or not holds_work:
            return 0.0
        return time.monotonic() - max(self.heard, self.held_since)

    def stalled(self, holds_work: bool) -> str:
        """Why the process is taken for stalled, or "" while it is not."""
        if self.loaded_at is None and time.monotonic() - self.started > self.load_timeout:
            return f"did not load within {self.load_timeout:g} s"
        if self.silence(holds_work) > self.timeout:
            return f"sent nothing for {self.timeout:g} s while holding requests (--model-timeout)"
        return ""

    def state(self, holds_work: bool) -> str | None:
        """Why the process cannot translate now (/ready), or None."""
        if self.loaded_at is None:
            return "the model process is loading the model"
        silence = self.silence(holds_work)
        if silence > self.timeout / 2:
            return (
                f"the model process has not answered for {silence:.0f} s (it is killed after "
                f"{self.timeout:g} s: --model-timeout)"
            )
        return None

    def loaded_for(self) -> float | None:
        return None if self.loaded_at is None else time.monotonic() - self.loaded_at

    def detail(self, cause: str) -> str:
        """`cause` with what the process reported before it exited, for the log."""
        return f"{cause}: {self.failure}" if self.failure else cause


def stopped_message(cause: str) -> str:
    return (
        f"the model process stopped before answering this request: it {cause}; a new one is "
        "starting, retry shortly"
    )


def stalled_message(why: str) -> str:
    return (
        f"the model process is not answering: it {why}, so it was killed; a new one is "
        "starting, retry shortly"
    )


@dataclass(frozen=True)
class Down:
    """No model process runs: how the last ended (`cause`), and when the next starts (`until`,
    in `time.monotonic` seconds; None: the server gave up after `tries` in a row)."""

    cause: str
    until: float | None
    tries: int = 0

    def wait(self) -> float:
        return 0.0 if self.until is None else max(0.0, self.until - time.monotonic())

    def reason(self) -> str:
        """For /ready."""
        if self.until is None:
            return (
                f"the model process gave up: {self.tries} in a row failed to start, the last "
                f"one {self.cause}; translate-serve must be restarted"
            )
        return (
            f"the model process is down: the last one {self.cause}; a new one starts in "
            f"{self.wait():.0f} s"
        )

    def refusal(self) -> ModelUnavailable:
        """What a request gets meanwhile, at once."""
        if self.until is None:
            return ModelUnavailable(
                "the model process is down: it failed to start several times in a row and "
                "translate-serve gave up until it is restarted",
                retry_after=60,
            )
        wait = self.wait()
        return ModelUnavailable(
            f"the model process is down and starts again in {wait:.0f} s; retry then",
            retry_after=math.ceil(wait) + 5,
        )


@dataclass
class Restarts:
    """When the next model process starts after one ended: at once after one that had run well
    (loaded for `ran_well` seconds), then after `first_delay`, twice that, and so on up to
    `max_delay` while they keep ending early; never after `give_up` in a row that did not load."""

    first_delay: float = 1.0
    max_delay: float = 30.0
    give_up: int = 5
    ran_well: float = 60.0
    early: int = 0  # processes in a row that ended early
    unloaded: int = 0  # processes in a row that never loaded

    def delay(self, loaded_for: float | None) -> float | None:
        """Seconds to wait after a process that was loaded for `loaded_for` (None: never), or
        None: give up."""
        self.unloaded = self.unloaded + 1 if loaded_for is None else 0
        ran_well = loaded_for is not None and loaded_for >= self.ran_well
        self.early = 1 if ran_well else self.early + 1
        if self.unloaded >= self.give_up:
            return None
        if self.early == 1:
            return 0.0
        return min(self.max_delay, self.first_delay * 2 ** (self.early - 2))

    def after(self, loaded_for: float | None, cause: str, detail: str) -> Down | None:
        """After a process ended (`cause`; `detail` for the log): None to start the next at once,
        else a `Down` to wait for (or, given up, for ever). Logged either way."""
        delay = self.delay(loaded_for)
        if delay is None:
            log.error(
                "the model process failed to start %d times in a row, the last time: %s. "
                "translate-serve stays up and answers 503 (/ready too) until it is restarted: "
                "fix that (a checkpoint that cannot be loaded: put it back), then restart it",
                self.unloaded,
                detail,
            )
            return Down(cause, None, self.unloaded)
        if not delay:
            log.warning("starting a new model process")
            return None
        log.warning("starting a new model process in %g s", delay)
        return Down(cause, time.monotonic() + delay)

    @property
    def restarting(self) -> bool:
        """Whether a process has ended: each that loads since is a recovery worth a line."""
        return self.early > 0
