"""Tolerances from the dtype and the length of the sums a result went through, not from one CPU.

Kernels built for other instruction sets (AVX2, AVX-512, AMX; oneDNN, MKL, fbgemm) split and
order a sum differently, so two correct results differ by rounding. Summing n terms errs by at
most about n·eps times the sum of their magnitudes (Higham, Accuracy and Stability of Numerical
Algorithms, 2nd ed., §4.2), and a result that went through several sums in turn gathers the
error of each. A tolerance of that size holds on every CPU, while a real fault (a lost term, a
wrong mask, a mean of means) stays orders of magnitude above it.
"""

from __future__ import annotations

import pytest
import torch

from translate.model.transformer import ModelConfig, Transformer


def tolerance(dtype: torch.dtype, terms: int) -> float:
    """The relative error a result of `terms` summed terms (along its whole path) may carry in `dtype`."""
    return terms * torch.finfo(dtype).eps


def transformer_terms(cfg: ModelConfig, length: int, vocab: int = 0) -> int:
    """The terms summed along one output's path through a Transformer of `cfg` over sequences of
    at most `length` positions, plus a softmax over `vocab` where it is taken: per attention
    block the input and output projections (d_model each), the scores (d_model / heads), the
    softmax and the weighted sum (length each); per feed-forward block its two products
    (d_model, ffn_dim); per LayerNorm its mean and variance (d_model each)."""
    d, f = cfg.d_model, cfg.ffn_dim
    attention = 2 * d + d // cfg.heads + 2 * length
    feed_forward = d + f
    norm = 2 * d
    encoder = cfg.encoder_layers * (attention + feed_forward + 2 * norm)
    decoder = cfg.decoder_layers * (2 * attention + feed_forward + 3 * norm)
    return encoder + decoder + d + vocab  # the output projection, then the softmax


def bounds(expected: torch.Tensor, dtype: torch.dtype, terms: int) -> tuple[float, float]:
    """The relative bound, and the largest magnitude of `expected` that scales the absolute one."""
    return tolerance(dtype, terms), float(expected.abs().max()) if expected.numel() else 0.0


def assert_within_rounding(
    actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, terms: int
) -> None:
    """`actual` (computed in `dtype`) equals `expected` (best computed in float64) up to the
    rounding of `terms` summed terms: relative to each value, and absolute relative to the
    largest, since a sum that cancels to near zero keeps the error of its large terms."""
    expected = expected.to(torch.float64)
    bound, scale = bounds(expected, dtype, terms)
    torch.testing.assert_close(
        actual.to(torch.float64), expected, rtol=bound, atol=bound * max(scale, 1e-30)
    )


def within_rounding(expected, dtype: torch.dtype, terms: int):
    """`pytest.approx` of a float or a list of floats with `assert_within_rounding`'s bounds, for results
    that come back as Python floats (search scores, losses, metrics)."""
    bound, scale = bounds(torch.as_tensor(expected, dtype=torch.float64), dtype, terms)
    return pytest.approx(expected, rel=bound, abs=bound * scale)


def score_terms(cfg: ModelConfig, length: int, vocab: int, steps: int) -> int:
    """A search score: the log-softmax of each of `steps` outputs, summed in float32 and divided by the
    length penalty. The log-probabilities share one sign, so each step's error is relative to the score."""
    return transformer_terms(cfg, length, vocab) + steps + 1


def search_terms(
    model: Transformer, src: torch.Tensor, max_len_a: float = 1.5, max_len_b: int = 10
) -> int:
    """The terms behind the scores of a search over `src` (`score_terms`), for as many steps as
    the search may take."""
    steps = min(int(src.shape[-1] * max_len_a + max_len_b), model.cfg.max_positions)
    return score_terms(model.cfg, max(src.shape[-1], steps), model.tgt_vocab_size, steps)
