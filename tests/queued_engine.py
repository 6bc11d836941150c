"""A stand-in for translate-serve's engine loop, for tests of the server's batcher alone:
messages in on one queue, answers out on another, `_run` (a subclass's) answering in a thread of
its own; EOFError put among the answers is the engine gone."""

from __future__ import annotations

import queue
import threading


class QueuedEngine:
    def __init__(self) -> None:
        self.messages: queue.Queue = queue.Queue()
        self.answers: queue.Queue = queue.Queue()

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        raise NotImplementedError

    def send(self, message) -> None:
        self.messages.put(message)

    def receive(self):
        answer = self.answers.get()
        if answer is EOFError:
            raise EOFError
        return answer

    def stop(self) -> None:
        self.messages.put(None)
