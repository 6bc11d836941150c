"""int8 decoding: every linear layer quantized, outputs close to float32, flags checked."""

from pathlib import Path

import pytest
import torch
from helpers import random_tied_checkpoint
from torch import nn

from translate.cli.translate import main
from translate.decode.loaded_model import load_model
from translate.model.quantize import linear_bytes, quantization_available
from translate.model.transformer import FeedForward

pytestmark = pytest.mark.skipif(
    not quantization_available(), reason="no quantized CPU engine in this torch"
)


@pytest.fixture(scope="module")
def checkpoint_path(tmp_path_factory) -> Path:
    """A larger model than conftest's English-German `checkpoint_path`, which this replaces here."""
    return random_tied_checkpoint(
        tmp_path_factory.mktemp("int8") / "model.ckpt", d_model=64, layers=2
    )


@pytest.mark.numerical
def test_every_linear_layer_becomes_int8_and_the_logits_stay_close(checkpoint_path):
    fp32 = load_model(checkpoint_path, pack=False)
    int8 = load_model(checkpoint_path, quantize="int8")
    assert not any(type(m) is nn.Linear for m in int8.model.modules())
    quantized = [
        m for m in int8.model.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)
    ]
    assert len(quantized) == sum(type(m) is nn.Linear for m in fp32.model.modules())
    # the tie survives in the float32 part: one embedding matrix for source and target
    assert int8.model.src_embed.weight is int8.model.tgt_embed.weight
    assert linear_bytes(int8.model) < linear_bytes(fp32.model)

    torch.manual_seed(1)
    src = torch.randint(4, len(fp32.vocab.source), (3, 9))
    tgt = torch.randint(4, len(fp32.vocab.target), (3, 7))
    with torch.no_grad():
        reference = fp32.model(src, tgt, 0).log_softmax(-1)
        quantized_out = int8.model(src, tgt, 0).log_softmax(-1)
    # int8 weights and activations: close to float32, not equal to it. Not a rounding tolerance: steps of
    # 1/127 of each weight matrix's range and 1/255 of each activation's, through every layer, move the
    # probabilities far beyond float32 rounding (by 0.005 here); 0.05 is a loose bound on that.
    assert not torch.equal(reference, quantized_out)
    assert (reference.exp() - quantized_out.exp()).abs().max() < 0.05


@pytest.mark.numerical
def test_the_feed_forward_relu_runs_inside_the_int8_product_with_the_same_result(checkpoint_path):
    int8 = load_model(checkpoint_path, quantize="int8")
    blocks = [m for m in int8.model.modules() if isinstance(m, FeedForward)]
    assert blocks and all(
        isinstance(b.linear1, torch.ao.nn.intrinsic.quantized.dynamic.LinearReLU) for b in blocks
    )
    # the reference: PyTorch's dynamic quantization of the plain model, ReLU a pass of its own
    plain = load_model(checkpoint_path, pack=False).model
    reference = torch.ao.quantization.quantize_dynamic(plain, {nn.Linear}, dtype=torch.qint8)
    assert all(
        isinstance(b.activation, nn.ReLU) for b in reference.modules() if isinstance(b, FeedForward)
    )
    torch.manual_seed(2)
    src = torch.randint(4, len(int8.vocab.source), (4, 11))
    tgt = torch.randint(4, len(int8.vocab.target), (4, 8))
    with (
        torch.no_grad()
    ):  # the same int8 products and output step; a ReLU of its own changes no value
        assert torch.equal(int8.model(src, tgt, 0), reference(src, tgt, 0))


def test_translate_cli_int8_keeps_every_line(checkpoint_path, tmp_path, capsys):
    source = tmp_path / "in.en"
    source.write_text("Click OK.\n\nChoose Tools - Options.\n", encoding="utf-8")
    output = tmp_path / "out.de"
    code = main(
        [
            "--checkpoint",
            str(checkpoint_path),
            "--source",
            str(source),
            "--output",
            str(output),
            "--quantize",
            "int8",
            "--device",
            "cpu",
            "--quiet",
        ]
    )
    assert code == 0
    lines = output.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[-1] == "" and lines[1] == ""


def test_int8_with_another_precision_is_refused_before_loading(checkpoint_path, tmp_path, capsys):
    code = main(
        [
            "--checkpoint",
            str(tmp_path / "missing.ckpt"),
            "--quantize",
            "int8",
            "--precision",
            "bf16-mixed",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert (
        code == 2
        and "--quantize int8" in err
        and "32-true" in err
        and len(err.strip().splitlines()) == 1
    )
