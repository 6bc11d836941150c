"""Input lines as they arrive, and in chunks: a terminal or a pipe is answered as soon as a line
comes, a file in full chunks. The lines are read by `translate.text.corpus` (`iter_lines`,
`text_lines`).

A chunk is what is there already, up to `size` lines: from a file that is always `size` lines
(the last chunk aside), so batches stay full; from a pipe or a terminal a thread reads ahead
while the current chunk is translated, and a chunk never waits for lines that have not been
written yet, so a line typed at the prompt is translated at once. At most `size` lines are read
ahead, so memory stays bounded however long the stream.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from itertools import islice

_END = object()  # the stream ended


class _Failed:
    """The reading thread's exception, raised in the reader once the lines before it are out."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def chunks(lines: Iterator[str], size: int, live: bool) -> Iterator[list[str]]:
    """`lines` in consecutive chunks of at most `size`; `live` (a terminal or pipe): a chunk is
    what has arrived, at least one line."""
    if size < 1:
        raise ValueError(f"the chunk size must be at least 1, got {size}")
    if not live:
        while chunk := list(islice(lines, size)):
            yield chunk
        return
    ahead: queue.Queue = queue.Queue(maxsize=size)

    def read() -> None:
        try:
            for line in lines:
                ahead.put(line)
        except BaseException as error:  # handed to the reader, after the lines before it
            ahead.put(_Failed(error))
        else:
            ahead.put(_END)

    threading.Thread(target=read, name="line-feed", daemon=True).start()
    item = ahead.get()
    while True:
        chunk: list[str] = []
        while isinstance(item, str):
            chunk.append(item)
            if len(chunk) == size:
                item = None
                break
            try:
                item = ahead.get_nowait()
            except queue.Empty:
                item = None
                break
        if chunk:
            yield chunk
        if isinstance(item, _Failed):
            raise item.error
        if item is _END:
            return
        item = ahead.get()
