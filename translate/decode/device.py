"""What a decoding process sets up for its device: whether CUDA is there, the CPU threads,
freed memory kept for reuse on the CPU, and the autocast context of a precision. Light to
import: torch loads when one of these is called."""

from __future__ import annotations

import contextlib


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def set_threads(threads: int | None) -> None:
    """The CPU threads torch's operators use (None: torch's own choice)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def prepare_decoding(device: str) -> None:
    """Process settings for a command that decodes: on the CPU, freed memory kept for reuse
    (`translate.decode.allocator`)."""
    if device == "cpu":
        from translate.decode.allocator import keep_freed_memory

        keep_freed_memory()


def autocast(device: str, precision: str) -> contextlib.AbstractContextManager:
    """The autocast context `precision` asks for on `device` (none for 32-true)."""
    import torch

    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision)
    return (
        contextlib.nullcontext()
        if dtype is None
        else torch.autocast(device_type=device, dtype=dtype)
    )
