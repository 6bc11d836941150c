"""What a decoding process sets up for its device: freed memory kept for reuse on the CPU, and
the autocast context of a precision."""

from __future__ import annotations

import contextlib


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
