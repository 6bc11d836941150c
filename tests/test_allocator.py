"""glibc's thresholds for decoding (`translate.decode.allocator`), checked through glibc's own accounting."""

import ctypes
import ctypes.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from translate.decode import allocator

PROBE = r"""
import ctypes, ctypes.util, json
from translate.decode.allocator import keep_freed_memory

libc = ctypes.CDLL(ctypes.util.find_library("c"))
class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def allocate(size):
    # blocks mapped for this allocation alone, and the free bytes the heap holds once it is freed
    before = libc.mallinfo2().hblks
    block = libc.malloc(size)
    mapped = libc.mallinfo2().hblks - before
    libc.free(block)
    return mapped, libc.mallinfo2().fordblks

# Growing sizes, as a decoding cache's: glibc's own threshold rises to the largest block freed so
# far, so only a larger block shows whether the setting holds.
plain = allocate(8 * 2**20)
kept = keep_freed_memory()
print(json.dumps({"plain": plain, "kept": kept, "after": allocate(16 * 2**20)}))
"""


def glibc_with_mallinfo2() -> bool:
    name = ctypes.util.find_library("c")
    return (
        sys.platform.startswith("linux")
        and name is not None
        and hasattr(ctypes.CDLL(name), "mallinfo2")
    )


@pytest.mark.skipif(not glibc_with_mallinfo2(), reason="needs glibc 2.33 or later")
def test_large_blocks_come_from_the_heap_and_stay_there_once_kept():
    env = {
        "PYTHONPATH": str(Path(allocator.__file__).resolve().parents[1])
    }  # and no MALLOC_* of the caller's
    result = json.loads(
        subprocess.run(
            [sys.executable, "-c", PROBE], env=env, check=True, capture_output=True, text=True
        ).stdout
    )
    assert result["plain"][0] == 1  # glibc as it comes maps 8 MiB of its own
    assert result["kept"] is True
    mapped, free_after = result["after"]
    assert (
        mapped == 0 and free_after >= 16 * 2**20
    )  # from the heap, and kept there for the next step


def test_a_users_own_malloc_settings_are_left_alone(monkeypatch):
    calls = []
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")  # not one of ours: does not stop it
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda *args: calls.append(args))
    assert allocator.keep_freed_memory() is False
    assert calls == []
