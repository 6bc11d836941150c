"""int8 decoding on the CPU: dynamic quantization of a decoding model's linear layers.

Each `nn.Linear` becomes PyTorch's dynamically quantized linear layer (weights stored as int8
once, activations quantized per call, products in int32 through fbgemm/oneDNN): the path
`torch.ao.quantization.quantize_dynamic` has offered since 1.3, not a kernel of our own.  The
embeddings stay float32; a pre-softmax projection tied to them gets its own int8 copy, so the
ties in the checkpoint are untouched. A feed-forward block's first layer and its ReLU become one
fused layer (`LinearReLU`), as packing fuses them in float32.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.ao.nn.intrinsic import LinearReLU

from translate.model.transformer import FeedForward

QUANTIZATIONS = ("none", "int8")


def quantization_available() -> bool:
    """A quantized engine (fbgemm/x86 on x86, qnnpack on ARM) is built into this torch."""
    return any(engine != "none" for engine in torch.backends.quantized.supported_engines)


def quantize_int8(model: nn.Module) -> nn.Module:
    """`model` (float32, CPU, eval mode, not packed) with every linear layer int8; returns the
    new model."""
    if not quantization_available():
        raise RuntimeError(
            "this PyTorch build has no quantized CPU engine; int8 decoding is not available"
        )
    with warnings.catch_warnings():
        # torch.ao announces a move to torchao; the eager dynamic path is what runs today
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        fuse_feed_forward_relu(model)
        return torch.ao.quantization.quantize_dynamic(
            model, {nn.Linear, LinearReLU}, dtype=torch.qint8
        )


def fuse_feed_forward_relu(model: nn.Module) -> None:
    """Each feed-forward block's first layer and ReLU as one `LinearReLU`, in place: quantized,
    the ReLU runs inside the int8 product's output step instead of as a pass of its own."""
    for module in list(model.modules()):
        if (
            isinstance(module, FeedForward)
            and isinstance(module.activation, nn.ReLU)
            and type(module.linear1) is nn.Linear
        ):
            module.linear1, module.activation = (
                LinearReLU(module.linear1, module.activation),
                nn.Identity(),
            )


def linear_bytes(model: nn.Module) -> int:
    """Bytes of parameters and quantized weights held by `model` (its size in memory)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for module in model.modules():
        if isinstance(module, torch.ao.nn.quantized.dynamic.Linear):
            weight, bias = module.weight(), module.bias()
            total += weight.numel() * weight.element_size() + (
                bias.numel() * bias.element_size() if bias is not None else 0
            )
    return total
