"""Sentences joining a running search at random steps, and the checks that each gets what the
whole-batch oracles (tests/search_oracle.py) give it alone (test_continuous.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from search_oracle import beam_search, full_prefix_log_probs, greedy_search, random_sources
from tolerances import search_terms, within_rounding

from translate.decode.search import Search
from translate.decode.settings import Budget, SearchPlan, SentinelIds
from translate.text.vocab import PAD_ID


def running_search(
    model,
    beam: int = 1,
    alpha: float = 1.0,
    n_best: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    allowed_tokens: torch.Tensor | None = None,
    never: Sequence[int] = (),
    sentinels: SentinelIds | None = None,
    budget: Budget | None = None,
) -> Search:
    """The product's search of `model` under these settings (beam 1: greedy)."""
    plan = SearchPlan(
        beam, alpha, n_best, max_len_a, max_len_b, allowed_tokens, tuple(never), sentinels
    )
    return Search(model, plan, budget)


def sources_of(seed: int, count: int) -> list[list[int]]:
    """Source id lists of different lengths, each ending in EOS."""
    return [
        [t for t in row.tolist() if t != PAD_ID] for row in random_sources(seed, count, max_len=9)
    ]


def run_continuously(
    search: Search,
    sources: list[list[int]],
    seed: int,
    starts: list[int] | None = None,
    plans: list[SearchPlan] | None = None,
) -> dict[int, list]:
    """Every sentence joins at a random step (some several at once, some into an empty search),
    under its own plan from `plans` where given; what each was answered with (its hypotheses),
    by sentence_id."""
    rng = random.Random(seed)
    waiting, answered, steps = list(range(len(sources))), {}, 0
    while waiting or len(search):
        if waiting and (not len(search) or rng.random() < 0.3):
            joining = [waiting.pop(0) for _ in range(min(len(waiting), rng.randint(1, 3)))]
            search.add(
                joining,
                [sources[i] for i in joining],
                None if starts is None else [starts[i] for i in joining],
                None if plans is None else [plans[i] for i in joining],
            )
        for sentence_id, hypotheses in search.step():
            assert sentence_id not in answered
            answered[sentence_id] = hypotheses
        steps += 1
        assert steps < 10_000
    return answered


BEAM_LIMITS = {"max_len_a": 1.0, "max_len_b": 6}


def check_beam_joins(model, search, beam: int, alpha: float, n_best: int) -> None:
    """Sentences joining `search` (made with these settings and `BEAM_LIMITS`) at random steps
    each get what beam search gives them alone: tokens, scores within float32's rounding, and
    log-probabilities the training forward pass reads again."""
    sources = sources_of(seed=beam, count=14)
    answered = run_continuously(search, sources, seed=beam)
    assert sorted(answered) == list(range(len(sources)))
    for index, source in enumerate(sources):
        src = torch.tensor([source])
        [expected] = beam_search(model, src, beam, alpha, n_best, **BEAM_LIMITS)
        got = answered[index]
        terms = search_terms(model, src, *BEAM_LIMITS.values())
        assert [h.tokens for h in got] == [h.tokens for h in expected], index
        # both searches run in float32: each carries the rounding
        assert [h.score for h in got] == within_rounding(
            [h.score for h in expected], torch.float32, 2 * terms
        )
        # the log-probabilities, re-read by the training forward pass without any cache (in float64)
        reread = full_prefix_log_probs(model, src[0], [h.tokens for h in got])
        assert [h.log_prob for h in got] == within_rounding(reread, torch.float32, terms)


# The greedy searches' shared case: a restriction (ids 9-11 not allowed), a forbidden id (7) and a
# first token per sentence.
GREEDY_LIMITS = {"max_len_a": 1.0, "max_len_b": 6}
FORBIDDEN = [7]


def greedy_allowed(model) -> torch.Tensor:
    allowed = torch.ones(model.tgt_vocab_size, dtype=torch.bool)
    allowed[9:12] = False
    return allowed


def check_greedy_joins(model, search, seed: int) -> None:
    """Sentences joining `search` (made with `GREEDY_LIMITS`, `greedy_allowed` and `FORBIDDEN`)
    at random steps each get greedy search's tokens alone, without a forbidden or disallowed id."""
    sources = sources_of(seed=seed, count=24)
    starts = [4 + i % 3 for i in range(len(sources))]
    answered = run_continuously(search, sources, seed=seed, starts=starts)
    assert sorted(answered) == list(range(len(sources))) and len(search) == 0
    for index, source in enumerate(sources):
        [expected] = greedy_search(
            model,
            torch.tensor([source]),
            **GREEDY_LIMITS,
            allowed_tokens=greedy_allowed(model),
            start=torch.tensor([starts[index]]),
            never=FORBIDDEN,
        )
        [got] = answered[index]
        assert got.tokens == expected
        assert not {7, 9, 10, 11} & set(got.tokens)
        # its log-probability, re-read by the training forward pass (in float64), and its score
        src = torch.tensor([source])
        terms = search_terms(model, src, *GREEDY_LIMITS.values())
        [reread] = full_prefix_log_probs(model, src[0], [got.tokens], start=starts[index])
        assert got.log_prob == within_rounding(reread, torch.float32, terms)
        assert got.score == got.log_prob / ((5 + len(got.tokens) + 1) / 6)
