"""Linear layers with pre-packed weights, for fast float32 decoding on the CPU.

Decoding spends most of its time in the linear layers, multiplying a few dozen rows at a time.
oneDNN (the CPU backend bundled with PyTorch) multiplies faster when the weight has been
reordered once into its blocked layout, and it can apply the feed-forward ReLU in the same
pass; each call costs a small fixed overhead, where `F.linear` instead reorders the weight at every
call, at a cost that grows with the weight (docs/benchmarks.md, "Packed products"). So every layer
is packed, and a call with fewer than `PACK_MIN_ROWS` rows (the last sentences of a batch) takes
`F.linear` only on a layer of fewer than `PACK_ALWAYS_WEIGHTS` weights. `pack_linear_layers`
swaps a decoding model's `nn.Linear`s for `PackedLinear`s that do this.

A `PackedLinear` keeps the original `weight` and `bias` Parameters (the state dict, the ties
between embeddings and the export are unchanged), falls back to `F.linear` wherever the
packed path does not apply (gradients, autocast: bf16/fp16 decoding keeps its own kernels,
another device or dtype), and packs again a weight changed in place since.  The ops used are
the ones PyTorch's own compiler emits for frozen CPU models (`torch.ops.mkldnn`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from translate.model.transformer import FeedForward

PACK_MIN_WEIGHTS = 0
# Fewer rows take F.linear, which wins on a small layer (the crossover: docs/benchmarks.md).
PACK_MIN_ROWS = 12
# From this many weights (256 x 1024, 512 x 512) the packed path wins from one row.
PACK_ALWAYS_WEIGHTS = 2**18


def version(tensor: Tensor) -> int:
    """How often `tensor` was changed in place; inference tensors (loaded under
    `torch.inference_mode`, as `Trainer.predict` does) keep no count and cannot change outside it."""
    return -1 if tensor.is_inference() else tensor._version


def packing_available() -> bool:
    """oneDNN is built into every x86/ARM CPU wheel of PyTorch, but not into every build."""
    mkldnn = torch.ops.mkldnn
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(mkldnn, "_linear_pointwise")
        and hasattr(mkldnn, "_reorder_linear_weight")
    )


class PackedLinear(nn.Module):
    """`linear` (and optionally a ReLU after it) with its weight in oneDNN's blocked layout."""

    def __init__(self, linear: nn.Linear, activation: str = "none") -> None:
        super().__init__()
        if activation not in ("none", "relu"):
            raise ValueError(f"activation must be 'none' or 'relu', got {activation!r}")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.activation = activation
        # Fewer input elements than this take F.linear (see the module's docstring).
        rows = 1 if self.weight.numel() >= PACK_ALWAYS_WEIGHTS else PACK_MIN_ROWS
        # At least one row: an empty input takes F.linear.
        self._min_elements = rows * self.in_features
        self._pack()

    def _pack(self) -> None:
        with torch.no_grad():
            self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), None)
        self._packed_version = version(self.weight)

    def _packed_path_applies(self, x: Tensor) -> bool:
        # Cheapest tests first: this runs for every layer at every decoding step.
        weight = self.weight
        if not (
            x.is_cpu
            and weight.is_cpu
            and x.dtype == weight.dtype == torch.float32
            and x.numel() >= self._min_elements
        ):
            return False
        if torch.is_autocast_enabled("cpu"):
            return False
        return not (torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad))

    def forward(self, x: Tensor) -> Tensor:
        if not self._packed_path_applies(x):
            out = F.linear(x, self.weight, self.bias)
            return F.relu(out) if self.activation == "relu" else out
        if version(self.weight) != self._packed_version:  # changed in place since packing
            self._pack()
        return torch.ops.mkldnn._linear_pointwise(
            x, self._packed, self.bias, self.activation, [], ""
        )

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, activation={self.activation}"


def pack_linear_layers(model: nn.Module, min_weights: int = PACK_MIN_WEIGHTS) -> int:
    """Replace, in place, every `nn.Linear` with at least `min_weights` weights of a float32
    CPU model in eval mode by a `PackedLinear` (a feed-forward block's first layer with its
    ReLU fused); returns how many distinct layers were packed (0 where packing does not
    apply).  A layer shared by several places (tied or shared blocks) becomes one
    `PackedLinear` shared the same way."""

    def worth_packing(layer: nn.Module) -> bool:
        return isinstance(layer, nn.Linear) and layer.weight.numel() >= min_weights

    if not packing_available() or model.training:
        return 0
    parameters = list(model.parameters())
    if not parameters or any(
        p.device.type != "cpu" or p.dtype != torch.float32 for p in parameters
    ):
        return 0
    packed: dict[int, PackedLinear] = {}
    modules = list(model.modules())
    for module in modules:  # feed-forward blocks first, so that their first layer fuses the ReLU
        if isinstance(module, FeedForward) and worth_packing(module.linear1):
            packed[id(module.linear1)] = PackedLinear(module.linear1, activation="relu")
            module.linear1, module.activation = packed[id(module.linear1)], nn.Identity()
    for module in modules:
        for name, child in list(module.named_children()):
            if worth_packing(child):
                if id(child) not in packed:
                    packed[id(child)] = PackedLinear(child)
                setattr(module, name, packed[id(child)])
    return len(packed)
