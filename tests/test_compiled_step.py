"""The training step compiled once for every batch shape (translate/train/compiled_step.py): on
the CPU (inductor's C++), the loss and gradients of fixed-shape batches equal the eager step's up
to rounding, one graph serves every shape however often each recurs, and `model.step` chooses
as documented."""

import numpy as np
import pytest
import torch
from tolerances import assert_within_rounding, tolerance, transformer_terms

from translate.model.transformer import ModelConfig, Transformer
from translate.train.collate import collate
from translate.train.compiled_step import CompiledLoss, step_choice
from translate.train.loss import batch_nll
from translate.train.token_batches import BatchShapes


def test_the_step_is_compiled_on_cuda_with_fixed_shapes_or_where_asked():
    assert step_choice("auto", "cuda", 13).compiled
    assert "CUDA graph" in step_choice("auto", "cuda", 13).reason
    assert not step_choice("auto", "cpu", 13).compiled
    assert not step_choice("auto", "cuda", None).compiled
    assert step_choice("compiled", "cpu", 13).compiled
    assert not step_choice("compiled", "cuda", None).compiled
    assert not step_choice("eager", "cuda", 13).compiled


@pytest.mark.slow
def test_a_compiled_step_gives_the_eager_loss_and_gradients_and_compiles_once_for_all_shapes():
    vocab = 40
    cfg = ModelConfig(
        d_model=32, heads=4, encoder_layers=1, decoder_layers=1, ffn_dim=64, dropout=0.0
    )
    torch.manual_seed(0)
    model = Transformer(cfg, vocab, vocab, shared_vocab=True)
    shapes = BatchShapes.for_lengths(96, 20)
    rng = np.random.default_rng(1)

    def batch(source: int, target: int) -> dict:
        """Three pairs, the longest `source` and `target` tokens long as padded."""
        examples = [
            (
                rng.integers(4, vocab, rng.integers(1, source)),
                rng.integers(4, vocab, rng.integers(1, target)),
                None,
            )
            for _ in range(2)
        ]
        examples.append(
            (rng.integers(4, vocab, source - 1), rng.integers(4, vocab, target - 1), None)
        )
        return collate(examples, shapes=shapes)

    # four shapes, two of them met again; sources as long as, shorter and longer than targets
    batches = [batch(6, 6), batch(7, 14), batch(5, 6), batch(20, 12), batch(14, 6), batch(6, 16)]
    met = [(tuple(b["src"].shape), tuple(b["tgt_in"].shape)) for b in batches]
    assert len(set(met)) == 4 and len({src != tgt for src, tgt in met}) == 2
    compiled = CompiledLoss(model, 0.1, None, "cpu", len(shapes.lengths))
    torch._dynamo.reset()
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for each in batches:
        model.zero_grad()
        eager = batch_nll(model, each, 0.1)
        eager.backward()
        expected = torch.cat([p.grad.flatten() for p in model.parameters()])
        model.zero_grad()
        loss = compiled(each)
        loss.backward()
        terms = transformer_terms(cfg, each["src"].shape[1], vocab) + each["tgt_tokens"]
        assert_within_rounding(loss.detach(), eager.detach().double(), torch.float32, terms)
        # the gradients as one vector: a near-zero entry carries the rounding of the large ones
        got = torch.cat([p.grad.flatten() for p in model.parameters()])
        assert_within_rounding(got, expected.double(), torch.float32, 4 * terms)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - frames == 1


@pytest.mark.slow
def test_translate_train_with_a_compiled_step_logs_the_eager_step_s_losses(tmp_path):
    """The CPU dry run of a captured step: a few updates of configs/tiny.yaml with fixed batch
    shapes, eager and compiled, log the same losses up to float32 rounding over the updates."""
    import csv
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    losses = {}
    for mode in ("eager", "compiled"):
        run = tmp_path / mode
        result = subprocess.run(
            [
                str(Path(sys.executable).parent / "translate-train"),
                "fit",
                "--config",
                str(repo / "configs" / "tiny.yaml"),
                "--run_dir",
                str(run),
                "--model.step",
                mode,
                "--data.batch_shapes",
                "fixed",
                "--data.cache_dir",
                str(tmp_path / "cache"),
                "--trainer.max_steps",
                "4",
                "--trainer.log_every_n_steps",
                "2",
                "--model.model.dropout",
                "0",
                "--model.val_bleu",
                "false",
            ],
            capture_output=True,
            text=True,
            cwd=repo,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"translate-train: training step {mode}" in result.stderr
        [metrics] = run.glob("logs/*/metrics.csv")
        losses[mode] = [
            float(row["train_loss"]) for row in csv.DictReader(metrics.open()) if row["train_loss"]
        ]
    assert len(losses["eager"]) == 2
    # each logged loss is a mean over one update's tokens, after the same updates of the weights:
    # the rounding of the tiny model's sums (224 positions, 1,000 pieces) over its 4 updates
    tiny = ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=64)
    rel = tolerance(torch.float32, 4 * transformer_terms(tiny, 224, 1000))
    assert losses["compiled"] == pytest.approx(losses["eager"], rel=rel)


def test_the_training_loss_traces_as_one_graph_over_symbolic_lengths():
    """Dynamo traces the loss with the batch's lengths symbolic (the compiled step's and
    `model.compile`'s dynamic shapes) without a graph break: a break there would send part of
    every step back to eager execution, and outside a CUDA graph."""
    cfg = ModelConfig(
        d_model=32, heads=4, encoder_layers=1, decoder_layers=1, ffn_dim=64, dropout=0.0
    )
    torch.manual_seed(0)
    model = Transformer(cfg, 40, 40, shared_vocab=True).train()
    src, tgt = torch.randint(4, 40, (3, 9)), torch.randint(4, 40, (3, 7))
    torch._dynamo.mark_dynamic(src, 1)
    torch._dynamo.mark_dynamic(tgt, 1)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(
        lambda s, t: batch_nll(model, {"src": s, "tgt_in": t, "tgt_out": t}, 0.1)
    )(src, tgt)
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    assert explained.graph_count == 1
