"""Both training samplers' saved position: the end of an epoch rolls over to the next, and a
resume under another rank count warns and skips the same share of the epoch."""

import numpy as np
import pytest

from translate.train.directions import TemperatureBatchSampler
from translate.train.token_batches import TokenBatchSampler


def token_sampler(rank=0, world=1, seed=4):
    lengths = np.random.default_rng(0).integers(2, 30, size=(240, 2))
    return TokenBatchSampler(lengths, 120, True, seed=seed, rank=rank, world_size=world)


def temperature_sampler(rank=0, world=1, seed=4):
    parts = [np.full((size, 2), 4) for size in (200, 60, 30)]  # 5 examples of 4 tokens a batch
    return TemperatureBatchSampler(parts, 20, 5.0, seed=seed, rank=rank, world_size=world)


SAMPLERS = pytest.mark.parametrize("make", [token_sampler, temperature_sampler])


def epoch_order(make, epoch, **kwargs):
    sampler = make(**kwargs)
    sampler.set_epoch(epoch)
    return list(sampler)


@SAMPLERS
def test_a_finished_epoch_resumes_at_the_start_of_the_next(make):
    sampler = make()
    sampler.set_epoch(3)
    state = sampler.state_dict(consumed=len(sampler))
    assert (state["epoch"], state["consumed"]) == (4, 0)
    resumed = make()
    resumed.load_state_dict(state)
    assert list(resumed) == epoch_order(make, 4)
    assert list(resumed) == epoch_order(make, 4), "the skip holds for one iteration only"


@SAMPLERS
def test_a_resume_under_another_rank_count_warns_and_skips_the_same_share(make):
    alone = make()
    alone.set_epoch(1)
    state = alone.state_dict(consumed=10)  # 10 of one rank's batches: 5 of each of two ranks
    resumed = make(rank=1, world=2)
    with pytest.warns(UserWarning, match=r"different data layout \(ranks, batches, seed: \(1, "):
        resumed.load_state_dict(state)
    assert resumed.epoch == 1
    assert list(resumed) == epoch_order(make, 1, rank=1, world=2)[5:]


@SAMPLERS
def test_a_resume_with_another_seed_warns(make):
    state = make(seed=4).state_dict(consumed=3)
    resumed = make(seed=5)
    with pytest.warns(UserWarning, match="different data layout"):
        resumed.load_state_dict(state)
    assert list(resumed) == epoch_order(make, 0, seed=5)[3:]
