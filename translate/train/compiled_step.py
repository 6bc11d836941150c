"""The training step's loss compiled once per batch shape: with fixed batch shapes
(`data.batch_shapes`, translate/train/token_batches.py) each shape is met again, so
`torch.compile(dynamic=False)` builds one graph a shape (forward and loss; AOTAutograd the
backward) and, on CUDA, captures it as a CUDA graph (mode `reduce-overhead`): a step launches
one graph instead of hundreds of kernels. The eager step stays the default on the CPU and the
fallback everywhere (`model.step`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from translate.train.loss import batch_nll

StepMode = Literal["auto", "eager", "compiled"]


@dataclass(frozen=True)
class StepChoice:
    compiled: bool
    reason: str


def step_choice(mode: StepMode, device_type: str, shapes: int | None) -> StepChoice:
    """Whether the training step is compiled, and why: `auto` compiles on CUDA where the batches
    have fixed shapes (`shapes` of them; None: exact batches); `compiled` wherever they do."""
    if mode == "eager":
        return StepChoice(False, "as asked")
    if shapes is None:
        return StepChoice(False, "the batches have no fixed shapes (data.batch_shapes exact)")
    if mode == "auto" and device_type != "cuda":
        return StepChoice(False, f"on {device_type} the eager step is the default")
    graphs = " and captured as CUDA graphs" if device_type == "cuda" else ""
    return StepChoice(True, f"compiled once per batch shape ({shapes} shapes){graphs}")


class CompiledLoss:
    """`loss.batch_nll` of fixed-shape batches, compiled once per shape. Only the id tensors
    enter the compiled function (a batch's Python token count would be a new constant each
    step); up to `shapes` graphs are kept, beyond torch's default limit of recompiles."""

    def __init__(
        self,
        model: torch.nn.Module,
        smoothing: float,
        chunk: int | None,
        device_type: str,
        shapes: int,
    ) -> None:
        self.model, self.smoothing, self.chunk, self.shapes = model, smoothing, chunk, shapes
        mode = "reduce-overhead" if device_type == "cuda" else None
        self.compiled = torch.compile(self._loss, dynamic=False, mode=mode)

    def _loss(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        batch = {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out}
        return batch_nll(self.model, batch, self.smoothing, self.chunk)

    def __call__(self, batch: dict) -> torch.Tensor:
        limit = self.shapes + 1
        with torch._dynamo.config.patch(recompile_limit=limit, cache_size_limit=limit):
            loss = self.compiled(batch["src"], batch["tgt_in"], batch["tgt_out"])
        # a CUDA graph's output is overwritten by its next replay: the caller keeps a copy
        return loss.clone()
