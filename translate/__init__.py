"""An encoder-decoder Transformer translation toolkit on PyTorch Lightning."""

__version__ = "0.1.0"
