"""Input lines as they arrive, and in chunks: a terminal or a pipe is answered as soon as a line
comes, a file in full chunks.

A line ends at `\n`, `\r\n` or `\r` (an old Mac export, or a mix of the three in one file), as
`translate.text.sentences.lines_of` reads a text: `text_lines` and `file_lines` give each line
without its end, decoded as strict UTF-8 (`translate.text.corpus.iter_decoded`: a byte-order mark
opening the input is dropped, a bad byte stops with the line's number).

A chunk is what is there already, up to `size` lines: from a file that is always `size` lines
(the last chunk aside), so batches stay full; from a pipe or a terminal a thread reads ahead
while the current chunk is translated, and a chunk never waits for lines that have not been
written yet, so a line typed at the prompt is translated at once. At most `size` lines are read
ahead, so memory stays bounded however long the stream.
"""

from __future__ import annotations

import gzip
import queue
import re
import threading
import zlib
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import BinaryIO

_END = object()  # the stream ended
_LINE_END = re.compile(rb"\r\n|\n|\r")
BLOCK = 1 << 16  # bytes read at a time


def split_lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a byte stream given in blocks of any size, each with its end (`\n`, `\r\n`
    or `\r`; a last line without one as it is). A `\r` that ends a block ends its line at once,
    so a live stream is not kept waiting for the next block; a `\n` opening that next block is
    the rest of the `\r\n` and is dropped."""
    pending = bytearray()
    after_cr = False
    for block in blocks:
        if not block:
            continue
        start = 1 if after_cr and block.startswith(b"\n") else 0
        for match in _LINE_END.finditer(block, start):
            pending += block[start : match.end()]
            yield bytes(pending)
            pending.clear()
            start = match.end()
        pending += block[start:]
        after_cr = block.endswith(b"\r")
    if pending:
        yield bytes(pending)


def read_blocks(handle: BinaryIO, live: bool) -> Iterator[bytes]:
    """`handle`'s bytes, a block at a time; `live` (a terminal or pipe): what has arrived, so a
    line is answered as soon as it comes."""
    read = handle.read1 if live else handle.read
    while block := read(BLOCK):
        yield block


def text_lines(handle: BinaryIO, name: str, live: bool) -> Iterator[str]:
    """The lines of an open binary stream (standard input: `sys.stdin.buffer`), decoded, without
    their ends; `name` is what an error calls the stream."""
    from translate.text.corpus import iter_decoded

    return iter_decoded(split_lines(read_blocks(handle, live)), name)


def file_lines(path: str | Path, live: bool = False) -> Iterator[str]:
    """`text_lines` of a file (gzip if its name ends in .gz), streamed: a missing file, a
    directory, or a truncated or unreadable one stops with the file's name."""
    from translate.text.corpus import CorpusError

    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file")
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory, not a text file")
    return _file_lines(path, live)


def _file_lines(path: Path, live: bool) -> Iterator[str]:
    from translate.text.corpus import CorpusError

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        lines = text_lines(handle, str(path), live)
        number = 0
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except (EOFError, OSError, zlib.error) as error:
                raise CorpusError(
                    f"{path}: unreadable after line {number} ({error}); is the file truncated?"
                ) from None
            number += 1
            yield line


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
