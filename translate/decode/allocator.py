"""glibc's allocator told to keep freed memory for reuse, in the commands that decode.

Every decoding step allocates a new self-attention cache one position longer than the last
(beam search also reorders its rows into it). glibc serves an allocation above its threshold
(128 KiB at first, then the largest block freed so far) with a fresh `mmap` and unmaps it on
free, so sizes that keep growing pay page faults, and the kernel's zeroing of each page, at
every step. Served from the heap and kept there once freed, the next step's buffer reuses the
pages (docs/benchmarks.md has the faults and the time saved). Only glibc has `mallopt`; other
C libraries, and a user's own `MALLOC_*` or `GLIBC_TUNABLES` settings, are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest: blocks up to 32 MiB come from the heap
TRIM_THRESHOLD = 2**30  # freed memory at the heap's top is returned to the system only above 1 GiB
USER_SETTINGS = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "GLIBC_TUNABLES",
)


def keep_freed_memory() -> bool:
    """Set glibc's thresholds for decoding (see the module docstring); True where they were set."""
    if not sys.platform.startswith("linux") or any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success; setting a threshold also turns off glibc's adaptive one
    return (
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    )
