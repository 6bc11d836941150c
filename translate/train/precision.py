"""Which training precision the hardware runs fast: bf16-mixed where bfloat16 is native, else 32-true.

bf16 autocast on a CPU without bfloat16 instructions (AVX2-only x86, Apple silicon) runs
through slow emulation, slower than float32; so the CPU configs leave `trainer.precision`
unset and this module chooses, at start-up, from what the machine has.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

# CPU flags (Linux /proc/cpuinfo) that mean bfloat16 arithmetic in hardware.
BF16_CPU_FLAGS = {"avx512_bf16", "amx_bf16", "bf16"}  # x86 AVX512-BF16 and AMX; Arm FEAT_BF16
# TRANSLATE_CPU_BF16=0: choose as on a CPU without bfloat16 instructions (an AVX2-only x86, which
# `make test-avx2` stands in for on a machine that has them).
NO_BF16_ENV = "TRANSLATE_CPU_BF16"


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them, or an empty set elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes in bfloat16 in hardware (so bf16 autocast pays); False where
    `NO_BF16_ENV` is 0."""
    if _bf16_turned_off():
        return False
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):  # torch's own x86 checks
        check = getattr(torch.cpu, probe, None)
        if check is not None and check():
            return True
    if platform.system() == "Darwin":  # no bf16 kernels that beat float32 on Apple silicon
        return False
    return bool(BF16_CPU_FLAGS & cpu_flags())


def _bf16_turned_off() -> bool:
    return os.environ.get(NO_BF16_ENV, "").strip() == "0"


def uses_cuda(accelerator: str | None) -> bool:
    """Whether Lightning's `accelerator` setting ends up on a CUDA GPU here."""
    accelerator = str(accelerator or "auto").lower()
    if accelerator in ("gpu", "cuda"):
        return True
    return accelerator == "auto" and torch.cuda.is_available()


def choose_precision(accelerator: str | None) -> tuple[str, str]:
    """(trainer.precision, why) for this machine: bf16-mixed on a GPU with bfloat16 (Ampere and
    newer) or a CPU with native bfloat16, 16-mixed (with loss scaling) on older GPUs, else 32-true."""
    if uses_cuda(accelerator):
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return "bf16-mixed", "the GPU computes in bfloat16"
        return "16-mixed", "the GPU has no bfloat16: float16 with loss scaling"
    if str(accelerator or "auto").lower() in ("cpu", "auto"):
        if cpu_has_native_bf16():
            return "bf16-mixed", "the CPU has bfloat16 instructions"
        if _bf16_turned_off():
            return "32-true", f"{NO_BF16_ENV}=0: as on a CPU without bfloat16 instructions"
        return (
            "32-true",
            "the CPU has no bfloat16 instructions, so bf16 autocast would be slower than float32",
        )
    return "32-true", f"accelerator {accelerator}"
