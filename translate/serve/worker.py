"""translate-serve's model process: the checkpoint loaded once in a worker of its own, which
translates each batch the server sends it.

In the server's process the search's Python work would share one interpreter lock with the
event loop that parses and answers requests, and each would keep stopping the other; in a
process of its own the model computes while the server talks to clients (LitServe's layout).
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from translate.decode.settings import SearchSettings
from translate.parent_watch import exit_with_parent

_translator = None
_batch_tokens = 0
_continuous = None


def _load(
    checkpoint: str, device: str, quantize: str, threads: int | None, batch_tokens: int
) -> None:
    # Ctrl-C reaches the whole process group: the server drains its requests, then stops this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()  # a server killed outright (SIGKILL, out of memory) cannot stop it: it goes too
    import torch

    from translate.decode.translator import load_translator
    from translate.serve.continuous import ContinuousTranslator

    global _translator, _batch_tokens, _continuous
    if threads:
        torch.set_num_threads(threads)
    _translator = load_translator(checkpoint, torch.device(device), quantize=quantize)
    _batch_tokens = batch_tokens
    _continuous = ContinuousTranslator(_translator, batch_tokens)


def translate_with(
    translator, lines: list[str], key: SearchSettings, batch_tokens: int
) -> tuple[list[str], float]:
    """One batch of the server's lines, as translate-cli translates them (in either worker), and
    the seconds it took: timed here, the model's own time leaves out the trip to its process."""
    from translate.decode import pipeline

    started = time.perf_counter()
    outputs = pipeline.translate_lines(
        translator,
        lines,
        key,
        batch_tokens=batch_tokens,
    )
    return outputs, time.perf_counter() - started


def translate(lines: list[str], key: SearchSettings) -> tuple[list[str], float]:
    """In the model process: a batch with the model `_load` loaded."""
    return translate_with(_translator, lines, key, _batch_tokens)


def advance(new: list[tuple[int, list[str], SearchSettings]], max_seconds: float):
    """In the model process: continuous batching's next steps (`ContinuousTranslator.advance`)."""
    return _continuous.advance(new, max_seconds)


# oneDNN keeps a compiled product for every shape it meets, in two caches of 1,024 each, and a
# server meets new batch shapes for as long as it runs: bounded, its memory stays flat (docs/serving.md).
ONEDNN_CACHES = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "16", "LRU_CACHE_CAPACITY": "16"}


def bound_onednn_caches() -> None:
    """For the processes started after this call, which read it as they start; a user's value wins."""
    for name, capacity in ONEDNN_CACHES.items():
        os.environ.setdefault(name, capacity)


def start(
    checkpoint: str, device: str, quantize: str, threads: int | None, batch_tokens: int
) -> ProcessPoolExecutor:
    """One model process (spawned: no copy of the server's threads or sockets)."""
    bound_onednn_caches()
    return ProcessPoolExecutor(
        1,
        mp_context=get_context("spawn"),
        initializer=_load,
        initargs=(checkpoint, device, quantize, threads, batch_tokens),
    )
