"""The training step's loss compiled once for every batch shape: with fixed batch shapes
(`data.batch_shapes`, translate/train/token_batches.py) each shape is met again, so
`torch.compile(dynamic=True)` builds one graph over symbolic sizes (forward and loss;
AOTAutograd the backward) and, on CUDA, records one CUDA graph a shape (mode `reduce-overhead`):
a step launches one graph instead of hundreds of kernels, and a new shape costs a recording,
not a compile. The eager step stays the default on the CPU and the fallback everywhere
(`model.step`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch.fx.experimental import _config as symbolic_shapes

from translate.train.loss import batch_nll

StepMode = Literal["auto", "eager", "compiled"]


@dataclass(frozen=True)
class StepChoice:
    compiled: bool
    reason: str


def step_choice(mode: StepMode, device_type: str, lengths: int | None) -> StepChoice:
    """Whether the training step is compiled, and why: `auto` compiles on CUDA where the batches
    have fixed shapes (`lengths`: how many lengths a side may take; None: exact batches);
    `compiled` wherever they do."""
    if mode == "eager":
        return StepChoice(False, "as asked")
    if lengths is None:
        return StepChoice(False, "the batches have no fixed shapes (data.batch_shapes exact)")
    if mode == "auto" and device_type != "cuda":
        return StepChoice(False, f"on {device_type} the eager step is the default")
    graphs = ", a CUDA graph recorded for each" if device_type == "cuda" else ""
    return StepChoice(
        True, f"compiled once for every batch shape ({lengths} lengths a side){graphs}"
    )


class CompiledLoss:
    """`loss.batch_nll` of fixed-shape batches, compiled once over symbolic sizes. Only the id
    tensors enter the compiled function (a batch's Python token count would be a new constant
    each step). `cuda_graphs` False compiles without recording graphs (what they add is
    measured apart: `scripts/bench.py train`'s `ours-shaped-compiled` row). A size of 1 (a batch of
    one row) is specialised by torch, so up to `lengths` (the fixed lengths a side may take)
    recompiles are allowed, beyond torch's default limit."""

    def __init__(
        self,
        model: torch.nn.Module,
        smoothing: float,
        chunk: int | None,
        device_type: str,
        lengths: int,
        cuda_graphs: bool = True,
    ) -> None:
        self.model, self.smoothing, self.chunk, self.lengths = model, smoothing, chunk, lengths
        mode = "reduce-overhead" if device_type == "cuda" and cuda_graphs else None
        self.compiled = torch.compile(self._loss, dynamic=True, mode=mode)

    def _loss(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        batch = {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out}
        return batch_nll(self.model, batch, self.smoothing, self.chunk)

    def __call__(self, batch: dict) -> torch.Tensor:
        limit = self.lengths + 1
        # Without duck shapes: a first batch whose source and target are equally long would
        # otherwise give both one size, and the first that differ would compile again.
        with (
            torch._dynamo.config.patch(recompile_limit=limit, cache_size_limit=limit),
            symbolic_shapes.patch(use_duck_shape=False),
        ):
            loss = self.compiled(batch["src"], batch["tgt_in"], batch["tgt_out"])
        # a CUDA graph's output is overwritten by its next replay: the caller keeps a copy
        return loss.clone()
