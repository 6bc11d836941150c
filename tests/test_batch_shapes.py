"""Fixed batch shapes for training (`data.batch_shapes`, translate/train/token_batches.py): few
shapes, every pair in exactly one batch within its shape's rows, the rows added counted by
nothing, and the loss of a batch padded to its shape that of its pairs one by one."""

import numpy as np
import pytest
import torch
from tolerances import assert_within_rounding, transformer_terms

from translate.errors import UsageError
from translate.model.transformer import ModelConfig, Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID
from translate.train.collate import collate
from translate.train.data_module import TranslationDataModule
from translate.train.loss import batch_nll
from translate.train.token_batches import (
    LENGTH_GROWTH,
    LENGTH_QUANTUM,
    BatchShapes,
    TokenBatchSampler,
    budget_batches,
    length_steps,
    padding_share,
)


def random_lengths(seed: int, count: int = 3000) -> np.ndarray:
    """(source, target) lengths as padded, most short, a few long, as a corpus's are."""
    rng = np.random.default_rng(seed)
    source = np.clip(rng.lognormal(3.0, 0.6, count).astype(int), 2, 201)
    target = np.clip((source * rng.uniform(0.7, 1.4, count)).astype(int), 2, 201)
    return np.stack([source, target], axis=1)


def test_lengths_step_by_a_quantum_then_by_a_quarter_and_cover_the_longest():
    for longest in (1, 8, 9, 64, 65, 201, 1024):
        steps = length_steps(longest)
        assert steps[-1] >= longest and (len(steps) == 1 or steps[-2] < longest)
        assert all(step % LENGTH_QUANTUM == 0 for step in steps)
        for shorter, longer in zip(steps, steps[1:]):
            # a pair one token longer than `shorter` pads by at most this much
            assert longer - shorter <= max(LENGTH_QUANTUM, shorter * (LENGTH_GROWTH - 1) + 8)
    assert len(length_steps(201)) <= 16


@pytest.mark.parametrize("max_tokens", [500, 2000, 4096])
def test_each_pair_is_in_one_batch_that_fits_its_shape(max_tokens):
    lengths = random_lengths(1)
    shapes = BatchShapes.for_lengths(max_tokens, int(lengths.max()))
    batches = budget_batches(lengths, max_tokens, seed=3, shapes=shapes)
    seen = np.sort(np.concatenate(batches))
    assert (seen == np.arange(len(lengths))).all()
    shapes_met = set()
    for batch in batches:
        rows, length = shapes.shape(int(lengths[batch].max()))
        assert len(batch) <= rows and rows * length <= max(max_tokens, length)
        shapes_met.add((rows, length))
    assert len(shapes_met) <= len(shapes.lengths)
    # the same length-sorted order of pairs as the exact batches: only the cuts differ
    exact = budget_batches(lengths, max_tokens, seed=3)
    assert (np.concatenate(batches) == np.concatenate(exact)).all()
    # padding stays bounded: at most a fifth more than the exact batches' positions padded
    fixed, plain = padding_share(lengths, batches, shapes), padding_share(lengths, exact)
    assert plain <= fixed < plain + 0.2


def test_ddp_ranks_get_disjoint_equal_shares_of_shaped_batches():
    lengths = random_lengths(2, 500)
    shapes = BatchShapes.for_lengths(1000, int(lengths.max()))
    ranks = [
        list(TokenBatchSampler(lengths, 1000, True, seed=5, rank=r, world_size=3, shapes=shapes))
        for r in range(3)
    ]
    assert len({len(batches) for batches in ranks}) == 1
    indices = [i for batches in ranks for batch in batches for i in batch]
    assert sorted(indices) == list(range(len(lengths)))
    for batches in ranks:
        for batch in batches:
            assert len(batch) <= shapes.shape(int(lengths[batch].max()))[0]


def examples_of(seed: int, count: int, vocab: int, source_up_to: int = 12) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [
        (
            rng.integers(4, vocab, rng.integers(1, source_up_to)),
            rng.integers(4, vocab, rng.integers(1, 12)),
            None,
        )
        for _ in range(count)
    ]


def test_a_batch_padded_to_its_shape_has_its_pairs_loss():
    """Against each pair's loss alone (no padding at all), summed in float64: the exact batch
    and the batch padded to its fixed shape (rows and positions added, each side to its own
    length) both give it."""
    vocab = 40
    cfg = ModelConfig(
        d_model=32, heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64, dropout=0.0
    )
    torch.manual_seed(0)
    model = Transformer(cfg, vocab, vocab, shared_vocab=True).eval()
    examples = examples_of(4, 7, vocab, source_up_to=6)  # sources shorter than targets
    shapes = BatchShapes.for_lengths(200, 13)
    exact, shaped = collate(examples), collate(examples, shapes=shapes)
    rows, length = shapes.shape(max(exact["src"].shape[1], exact["tgt_in"].shape[1]))
    source = shapes.length(exact["src"].shape[1])
    assert shaped["tgt_in"].shape == shaped["tgt_out"].shape == (rows, length)
    assert shaped["src"].shape == (rows, source) and source < length
    assert rows > len(examples) and source >= exact["src"].shape[1]
    filler = slice(len(examples), None)
    assert (shaped["src"][filler, 0] == EOS_ID).all() and (
        shaped["src"][filler, 1:] == PAD_ID
    ).all()
    assert (shaped["tgt_in"][filler, 0] == BOS_ID).all() and (
        shaped["tgt_out"][filler] == PAD_ID
    ).all()
    assert shaped["tgt_tokens"] == exact["tgt_tokens"] == sum(len(e[1]) + 1 for e in examples)
    with torch.no_grad():
        alone = sum(float(batch_nll(model, collate([e]), 0.1)) for e in examples)
        for batch in (exact, shaped):
            nll = batch_nll(model, batch, 0.1)
            terms = transformer_terms(cfg, length, vocab) + batch["tgt_tokens"]
            assert_within_rounding(
                nll, torch.tensor(alone, dtype=torch.float64), torch.float32, terms
            )


def test_the_shapes_are_fixed_where_asked_or_on_a_gpu(tmp_path):
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "libreoffice_small"
    data = {
        mode: TranslationDataModule(
            corpus_dir=str(fixture), vocab_size=200, cache_dir=str(tmp_path), batch_shapes=mode
        )
        for mode in ("auto", "fixed", "exact")
    }
    for module in data.values():
        module.setup("fit")
    assert data["auto"].training_shapes(on_gpu=False) is None
    assert data["auto"].training_shapes(on_gpu=True) == data["fixed"].training_shapes(False)
    assert data["exact"].training_shapes(on_gpu=True) is None
    default = TranslationDataModule(
        corpus_dir=str(fixture), vocab_size=200, cache_dir=str(tmp_path)
    )
    default.setup("fit")
    assert default.training_shapes(on_gpu=True) is None  # exact until measured on a GPU
    with pytest.raises(UsageError, match="data.batch_shapes must be one of auto, fixed, exact"):
        TranslationDataModule(corpus_dir=str(fixture), cache_dir=str(tmp_path), batch_shapes="x")


def test_a_resumed_epoch_of_shaped_batches_goes_on_with_the_same_batches():
    lengths = random_lengths(3, 400)
    shapes = BatchShapes.for_lengths(800, int(lengths.max()))
    first = TokenBatchSampler(lengths, 800, True, seed=2, shapes=shapes)
    first.set_epoch(1)
    whole = list(first)
    state = first.state_dict(consumed=5)
    resumed = TokenBatchSampler(lengths, 800, True, seed=2, shapes=shapes)
    resumed.load_state_dict(state)
    assert list(resumed) == whole[5:]
