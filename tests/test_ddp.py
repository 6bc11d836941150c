"""Two-process DDP (gloo, CPU) through `translate-train fit --trainer.devices 2 --trainer.strategy ddp`.

One run of 8 updates (2 accumulated batches each) with validation at the end, then checks:
identical parameters on both ranks, disjoint training data, the effective batch summed over
ranks and accumulation, and a validation BLEU and loss equal to an independent single-process
computation over the whole dev set.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import FIXTURE
from search_oracle import greedy_search
from tolerances import transformer_terms, within_rounding
from training_runs import logged, overlay, read_records, train

from translate.decode.loaded_model import load_model
from translate.model.transformer import ModelConfig
from translate.score.metrics import corpus_scores
from translate.text.vocab import PAD_ID
from translate.train.data_module import TranslationDataModule
from translate.train.loss import label_smoothed_nll
from translate.train.token_batches import TokenBatchSampler

pytestmark = pytest.mark.slow  # each test starts two training processes

STEPS = 8


def validation_loss_terms(cfg: ModelConfig, batches: list[dict], vocab: int) -> int:
    """A logged validation loss: each batch's (its forward pass, then sums over the vocabulary and its tokens),
    summed over the batches in float32, divided by the tokens and logged."""
    longest = max(max(batch["src"].shape[1], batch["tgt_in"].shape[1]) for batch in batches)
    tokens = sum(int(batch["tgt_tokens"]) for batch in batches)
    return transformer_terms(cfg, longest, vocab) + vocab + tokens + len(batches) + 2


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("ddp")
    run_dir = root / "run"
    trainer = {
        "devices": 2,
        "strategy": "ddp",
        "max_steps": STEPS,
        "accumulate_grad_batches": 2,
        "val_check_interval": 2 * STEPS,
        "limit_val_batches": 1.0,
        "num_sanity_val_steps": 0,
    }
    train(overlay(run_dir, root / "cache", trainer), "fit", timeout=400)
    return run_dir, root / "cache"


def test_ranks_keep_identical_parameters_and_see_disjoint_data(ddp_run):
    run_dir, _ = ddp_run
    params = [
        torch.load(run_dir / f"record.rank{rank}.params.pt", weights_only=True) for rank in (0, 1)
    ]
    assert torch.equal(params[0], params[1]), "parameters differ between ranks"
    records = [read_records(run_dir, rank) for rank in (0, 1)]
    assert len(records[0]) == len(records[1]) == 2 * STEPS
    assert all(r["plan_matches"] for rank in records for r in rank), (
        "a batch was not the sampler's batch"
    )
    epochs = sorted({r["epoch"] for rank in records for r in rank})
    assert len(epochs) >= 2, "the run should cross an epoch boundary"
    for epoch in epochs:
        seen = [[i for r in rank if r["epoch"] == epoch for i in r["indices"]] for rank in records]
        assert all(len(set(s)) == len(s) for s in seen), f"an example repeated within epoch {epoch}"
        assert not set(seen[0]) & set(seen[1]), f"the ranks saw the same examples in epoch {epoch}"
        if epoch < epochs[-1]:  # a whole epoch: together the ranks saw every example
            union = set(seen[0]) | set(seen[1])
            assert union == set(range(len(union))) and len(union) > 300


def test_effective_batch_sums_ranks_and_accumulated_batches(ddp_run):
    run_dir, _ = ddp_run
    by_step: dict[int, int] = {}
    for rank in (0, 1):
        for record in read_records(run_dir, rank):
            by_step[record["step"]] = by_step.get(record["step"], 0) + record["tokens"]
    assert logged(run_dir, "train_batch_tgt_tokens") == {s: float(n) for s, n in by_step.items()}
    assert len(by_step) == STEPS


@pytest.mark.numerical
def test_gradients_kept_in_small_buckets_train_the_same_parameters(ddp_run, tmp_path):
    """DDP with `gradient_as_bucket_view` (the gradients live in the all-reduce buckets: one
    copy fewer) and buckets small enough to split the model, as docs/training.md suggests for
    large models: the module scales the gradients in place before each step, which must act
    on the bucket views as on plain gradients, so the run ends with the same parameters."""
    run_dir, cache = ddp_run
    strategy = {
        "class_path": "lightning.pytorch.strategies.DDPStrategy",
        "init_args": {"gradient_as_bucket_view": True, "bucket_cap_mb": 0.05},
    }
    trainer = {
        "devices": 2,
        "strategy": strategy,
        "max_steps": STEPS,
        "accumulate_grad_batches": 2,
        "val_check_interval": 2 * STEPS,
        "limit_val_batches": 1.0,
        "num_sanity_val_steps": 0,
    }
    train(overlay(tmp_path / "run", cache, trainer), "fit", timeout=400)
    expected = torch.load(run_dir / "record.rank0.params.pt", weights_only=True)
    got = torch.load(tmp_path / "run" / "record.rank0.params.pt", weights_only=True)
    # exact: whatever the buckets, each all-reduced gradient is the two ranks' sum, scaled by the same factor
    assert torch.equal(got, expected)


@pytest.mark.numerical
def test_validation_bleu_equals_single_process_figure_on_the_whole_dev_set(ddp_run):
    """The logged DDP figures against sacrebleu and a plain loop over every dev sentence, in one process."""
    run_dir, cache = ddp_run
    bleu = logged(run_dir, "val_bleu")
    loss = logged(run_dir, "val_loss")
    assert list(bleu) == list(loss) == [STEPS - 1]

    loaded = load_model(run_dir / "checkpoints" / "last.ckpt")
    config = loaded.training_config
    data = TranslationDataModule(
        corpus_dir=str(FIXTURE),
        cache_dir=str(cache),
        vocab_size=1000,
        max_tokens=600,
        max_length=200,
        dev_max_sentences=64,
    )
    data.setup("validate")
    dev = data.datasets["dev"]
    assert len(dev) == 40
    hypotheses, references, nll, tokens, batches = [], [], 0.0, 0, []
    with torch.no_grad():
        for batch in data.val_dataloader():  # the same batches as the ranks, all in one process
            batches.append(batch)
            logits = loaded.model(batch["src"], batch["tgt_in"], PAD_ID)
            nll += float(label_smoothed_nll(logits, batch["tgt_out"], 0.0))
            tokens += int((batch["tgt_out"] != PAD_ID).sum())
            output = greedy_search(loaded.model, batch["src"], config.max_len_a, config.max_len_b)
            hypotheses += data.vocab.target.decode(output)
            references += batch["references"]
    assert sorted(references) == sorted(dev[i][2] for i in range(len(dev))), (
        "dev sentences lost or repeated"
    )
    expected = corpus_scores(hypotheses, references).bleu
    assert expected > 0, "a BLEU of 0 would not tell a shard from the whole"
    assert bleu[STEPS - 1] == within_rounding(
        expected, torch.float32, 1
    )  # the same counts' BLEU, logged as float32
    terms = validation_loss_terms(loaded.model.cfg, batches, len(data.vocab.target))
    assert loss[STEPS - 1] == within_rounding(nll / tokens, torch.float32, terms)
    assert math.isfinite(loss[STEPS - 1])


@pytest.mark.numerical
def test_a_rank_without_dev_sentences_still_validates(tmp_path):
    """One dev sentence, two ranks: the rank with nothing to score must still take part in the
    validation's collectives (the metrics' sums over ranks), or the other waits for it forever."""
    run_dir = tmp_path / "run"
    trainer = {
        "devices": 2,
        "strategy": "ddp",
        "max_steps": 2,
        "val_check_interval": 2,
        "limit_val_batches": 1.0,
        "num_sanity_val_steps": 0,
    }
    train(
        overlay(run_dir, tmp_path / "cache", trainer, data={"dev_max_sentences": 1}),
        "fit",
        timeout=240,
    )
    bleu, loss = logged(run_dir, "val_bleu"), logged(run_dir, "val_loss")
    assert list(bleu) == list(loss) == [1]

    loaded = load_model(run_dir / "checkpoints" / "last.ckpt")
    data = TranslationDataModule(
        corpus_dir=str(FIXTURE),
        cache_dir=str(tmp_path / "cache"),
        vocab_size=1000,
        max_tokens=600,
        max_length=200,
        dev_max_sentences=1,
    )
    data.setup("validate")
    [batch] = list(data.val_dataloader())
    with torch.no_grad():
        logits = loaded.model(batch["src"], batch["tgt_in"], PAD_ID)
    expected = float(label_smoothed_nll(logits, batch["tgt_out"], 0.0)) / batch["tgt_tokens"]
    terms = validation_loss_terms(loaded.model.cfg, [batch], len(data.vocab.target))
    assert loss[1] == within_rounding(expected, torch.float32, terms), (
        "the stand-in batch must not be scored"
    )


def test_dev_batches_are_split_so_every_rank_scores_and_none_repeats():
    lengths = np.array([(5, 6)] * 6)
    for world in (2, 4, 6):
        ranks = [
            TokenBatchSampler(
                lengths,
                max_tokens=1000,
                shuffle=False,
                rank=r,
                world_size=world,
                equal_per_rank=False,
            )
            for r in range(world)
        ]
        assert all(len(rank) >= 1 for rank in ranks)
        assert sorted(i for rank in ranks for batch in rank for i in batch) == list(range(6))


def test_shared_rows_trains_alike_on_both_ranks_and_loads_for_translation(tmp_path):
    """tie_embeddings shared_rows under DDP: the tied matrix and the rows apart are one set of
    parameters, equal on both ranks after the steps, and the checkpoint loads for translation
    with its rows apart folded into plain matrices."""
    trainer = {
        "devices": 2,
        "strategy": "ddp",
        "max_steps": 4,
        "val_check_interval": 8,
        "limit_val_batches": 1.0,
        "num_sanity_val_steps": 0,
    }
    run_dir = tmp_path / "run"
    config = overlay(run_dir, tmp_path / "cache", trainer)
    result = train(config, "fit", "--model.model.tie_embeddings", "shared_rows", timeout=400)
    assert "tie_embeddings shared_rows, " in result.stderr
    params = [
        torch.load(run_dir / f"record.rank{rank}.params.pt", weights_only=True) for rank in (0, 1)
    ]
    assert torch.equal(params[0], params[1]), "parameters differ between ranks"
    loaded = load_model(run_dir / "checkpoints" / "last.ckpt")
    model = loaded.model
    assert loaded.tie_choice.mode == "shared_rows"
    apart = loaded.tie_choice.target_only_pieces
    assert 0 < apart < len(loaded.vocab.target)
    differing = (model.tgt_embed.weight != model.src_embed.weight).any(-1)
    assert int(differing.sum()) == apart  # exactly the target-only rows are the decoder's own
    assert torch.equal(model.tgt_embed.weight[~differing], model.output.weight[~differing])
