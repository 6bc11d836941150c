"""Continuous batching: sentences that join a running beam search at any step decode as they do
alone (`search.beam_search`, itself checked against exhaustive search and full-prefix scoring),
and so do sentences joining a running greedy search (`search.greedy_search`)."""

import pytest
import torch
from joining import (
    BEAM_LIMITS,
    FORBIDDEN,
    GREEDY_LIMITS,
    check_beam_joins,
    check_greedy_joins,
    greedy_allowed,
    run_continuously,
    running_search,
    sources_of,
)
from search_oracle import beam_search, greedy_search, tiny_model
from tolerances import search_terms, within_rounding

from translate.decode import search as search_module
from translate.decode.search import Cost, Search, search_joined
from translate.decode.settings import Budget, SearchPlan, SentinelIds
from translate.text.vocab import EOS_ID, PAD_ID


@pytest.mark.numerical
@pytest.mark.parametrize(
    "beam, alpha, n_best, cohorts", [(5, 1.0, 1, 4), (3, 0.0, 2, 2), (4, 1.3, 3, 1), (1, 1.0, 1, 3)]
)
def test_each_sentence_decodes_as_it_does_alone(beam, alpha, n_best, cohorts, monkeypatch):
    monkeypatch.setattr(
        search_module, "MAX_COHORTS", cohorts
    )  # few: cohorts merge, rows at different steps share one
    model = tiny_model(seed=beam, eos_bias=0.5)
    search = running_search(model, beam, alpha, n_best, **BEAM_LIMITS)
    check_beam_joins(model, search, beam, alpha, n_best)


def test_a_start_token_and_forbidden_ids_apply_per_sentence():
    model = tiny_model(seed=3, eos_bias=0.3)
    sources = sources_of(seed=5, count=8)
    starts = [4 + i % 3 for i in range(len(sources))]
    search = running_search(model, beam=3, alpha=1.0, max_len_a=1.0, max_len_b=5, never=[7])
    answered = run_continuously(search, sources, seed=1, starts=starts)
    for index, source in enumerate(sources):
        [expected] = beam_search(
            model,
            torch.tensor([source]),
            3,
            1.0,
            max_len_a=1.0,
            max_len_b=5,
            start=torch.tensor([starts[index]]),
            never=[7],
        )
        assert answered[index][0].tokens == expected[0].tokens
        assert 7 not in answered[index][0].tokens


@pytest.mark.numerical
@pytest.mark.parametrize("beam, n_best", [(1, 1), (3, 2)])
def test_sentences_with_their_own_plans_share_one_search(beam, n_best, monkeypatch):
    """Length penalty, length rule, allowed tokens and first token are each sentence's own: in one
    search, each sentence gets what the oracle gives it alone under its plan."""
    monkeypatch.setattr(search_module, "MAX_COHORTS", 2)  # rows of several plans share a cohort
    model = tiny_model(seed=4, eos_bias=0.3)
    restricted = torch.ones(model.tgt_vocab_size, dtype=torch.bool)
    restricted[9:12] = False
    only_few = torch.zeros(model.tgt_vocab_size, dtype=torch.bool)
    only_few[[EOS_ID, 4, 5, 6, 8]] = True
    kinds = [
        SearchPlan(beam, 0.0, n_best, 1.0, 6),
        SearchPlan(beam, 1.6, n_best, 1.5, 3, restricted),
        SearchPlan(beam, 0.6, n_best, 0.5, 9, only_few),
    ]
    sources = sources_of(seed=7, count=18)
    plans = [kinds[i % 3] for i in range(len(sources))]
    starts = [4 + i % 2 for i in range(len(sources))]
    search = Search(model, kinds[0])
    answered = run_continuously(search, sources, seed=2, starts=starts, plans=plans)
    assert sorted(answered) == list(range(len(sources)))
    for index, source in enumerate(sources):
        plan, src = plans[index], torch.tensor([source])
        limits = {"max_len_a": plan.max_len_a, "max_len_b": plan.max_len_b}
        start = torch.tensor([starts[index]])
        got = answered[index]
        if beam == 1:
            [tokens] = greedy_search(
                model, src, **limits, allowed_tokens=plan.allowed_tokens, start=start
            )
            assert [h.tokens for h in got] == [tokens], index
            continue
        [expected] = beam_search(
            model,
            src,
            beam,
            plan.length_penalty,
            n_best,
            **limits,
            allowed_tokens=plan.allowed_tokens,
            start=start,
        )
        assert [h.tokens for h in got] == [h.tokens for h in expected], index
        terms = search_terms(model, src, *limits.values())
        assert [h.score for h in got] == within_rounding(
            [h.score for h in expected], torch.float32, 2 * terms
        )
    lengths = {plan.length_penalty: set() for plan in kinds}
    for index, hypotheses in answered.items():
        lengths[plans[index].length_penalty].add(len(hypotheses[0].tokens))
    assert len(set(map(frozenset, lengths.values()))) > 1, "the plans made no difference"


def test_a_plan_of_another_lane_is_refused():
    model = tiny_model(seed=0)
    search = running_search(model, beam=3)
    for other in (SearchPlan(2, 1.0, 1, 1.5, 10), SearchPlan(3, 1.0, 1, 1.5, 10, never=(7,))):
        with pytest.raises(ValueError, match="must keep the search's beam"):
            search.add([0], [[5, EOS_ID]], plans=[other])
    assert len(search) == 0


def test_the_budget_counts_what_the_sentences_not_yet_answered_hold():
    """`held` adds each joining sentence's source tokens and cache bytes and takes them off as
    it is answered or dropped; `room` lets in what fits, and into an empty search one sentence
    over the budget alone."""
    model = tiny_model(seed=2, eos_bias=-1.0)
    search = running_search(model, beam=2, max_len_a=1.0, max_len_b=3, budget=Budget(10, 10**9))
    cfg = model.cfg
    position = 2 * cfg.decoder_layers * cfg.d_model * 4  # float32 keys and values
    assert search.cost(5) == Cost(5, (2 * (5 + 3) + 5) * position)
    assert search.room().take(search.cost(50))  # an empty search takes any one sentence
    search.add(["a", "b"], [[5, 6, EOS_ID], [7, 8, 9, 4, EOS_ID]])
    assert search.held == search.cost(3) + search.cost(5)
    room = search.room()
    assert room.take(search.cost(2)) and not room.take(search.cost(1))  # 8 + 2 of 10 tokens
    search.drop(["a"])
    assert search.held == search.cost(5)
    while len(search):
        search.step()
    assert search.held == Cost(0, 0)

    by_cache = running_search(model, beam=2, max_len_a=1.0, max_len_b=3, budget=Budget(100, 1))
    by_cache.add(["a"], [[5, 6, EOS_ID]])
    assert not by_cache.room().take(by_cache.cost(1))  # the cache bytes bind, not the tokens


def test_the_caches_hold_only_what_live_sentences_need():
    """Self-attention caches as wide as each cohort's steps, and the empty search starts afresh."""
    model = tiny_model(seed=1, eos_bias=-3.0)  # long outputs: sentences overlap for many steps
    search = running_search(model, beam=2, alpha=1.0, max_len_a=2.0, max_len_b=8)
    search.add(["a"], [[5, 6, 7, EOS_ID]])
    for _ in range(3):
        search.step()
    search.add(["b", "c"], [[4, EOS_ID], [8, 9, 5, 6, 7, EOS_ID]])
    search.step()
    widths = [block.width for block in search.cache.layers[0].steps]
    assert widths == [4, 1] and search.cohorts == [1, 2]
    assert search.history.shape == (6, 4)
    while len(search):
        search.step()
    assert search.cohorts == [] and search.history.shape == (0, 0)


def test_a_bad_setting_is_refused():
    model = tiny_model(seed=0)
    with pytest.raises(ValueError, match="beam must be at least 1"):
        running_search(model, beam=0)
    with pytest.raises(ValueError, match="n_best"):
        running_search(model, beam=2, n_best=3)


@pytest.mark.parametrize("cohorts, eos_bias, seed", [(12, 0.5, 1), (2, 0.0, 2), (1, -0.5, 3)])
def test_each_sentence_joining_a_greedy_search_gets_greedy_search_s_tokens(
    cohorts, eos_bias, seed, monkeypatch
):
    monkeypatch.setattr(
        search_module, "MAX_COHORTS", cohorts
    )  # few: cohorts merge, rows at different steps share one
    model = tiny_model(seed=seed, eos_bias=eos_bias)
    search = running_search(
        model, **GREEDY_LIMITS, allowed_tokens=greedy_allowed(model), never=FORBIDDEN
    )
    check_greedy_joins(model, search, seed)
    assert search.cohorts == [] and search.sentence_ids == []


@pytest.mark.parametrize("join_below", [0.0, 0.5, 1.0, 100.0])
def test_joined_batches_get_each_batch_s_greedy_search(join_below):
    """Batches joining the running search (each once the one before is done, at half the budget,
    at the whole budget, all at once) give what
    greedy_search gives each batch; a few sentences run to the model's last position, and those
    done there leave before the others, so that none passes it."""
    model = tiny_model(seed=4, eos_bias=-1.0)
    sources = sources_of(seed=6, count=30)
    batches = [
        (list(range(start, min(start + 7, 30))), sources[start : start + 7])
        for start in range(0, 30, 7)
    ]
    search = running_search(model, max_len_a=8.0, max_len_b=1, budget=Budget(40))
    found = {
        index: hypotheses[0].tokens
        for index, hypotheses in search_joined(search, batches, join_below=join_below)
    }
    assert sorted(found) == list(range(30))
    limits = [min(8 * len(source) + 1, model.cfg.max_positions) for source in sources]
    assert any(
        len(found[i]) + 1 == model.cfg.max_positions for i in range(30)
    )  # the last position reached
    assert any(
        len(found[i]) + 1 == limits[i] < model.cfg.max_positions for i in range(30)
    )  # a shorter limit
    for sentence_ids, batch in batches:
        src = torch.nn.utils.rnn.pad_sequence(
            [torch.tensor(s) for s in batch], batch_first=True, padding_value=PAD_ID
        )
        assert [found[i] for i in sentence_ids] == greedy_search(
            model, src, max_len_a=8.0, max_len_b=1
        )


@pytest.mark.numerical
def test_joined_batches_get_each_batch_s_beam_search():
    model = tiny_model(seed=5, eos_bias=0.0)
    sources = sources_of(seed=7, count=20)
    batches = [
        (list(range(start, min(start + 6, 20))), sources[start : start + 6])
        for start in range(0, 20, 6)
    ][::-1]
    search = running_search(
        model, beam=3, alpha=1.0, n_best=2, max_len_a=1.5, max_len_b=4, never=[7], budget=Budget(30)
    )
    found = dict(search_joined(search, batches, start=5))
    assert sorted(found) == list(range(20))
    for sentence_ids, batch in batches:
        src = torch.nn.utils.rnn.pad_sequence(
            [torch.tensor(s) for s in batch], batch_first=True, padding_value=PAD_ID
        )
        expected = beam_search(
            model,
            src,
            3,
            1.0,
            2,
            max_len_a=1.5,
            max_len_b=4,
            never=[7],
            start=torch.full((len(batch),), 5),
        )
        terms = 2 * search_terms(model, src, 1.5, 4)  # both searches run in float32
        for index, hypotheses in zip(sentence_ids, expected):
            assert [h.tokens for h in found[index]] == [h.tokens for h in hypotheses]
            assert [h.score for h in found[index]] == within_rounding(
                [h.score for h in hypotheses], torch.float32, terms
            )


# Sentinels of the tiny vocabulary: ids 8, 9, 10 in the source; the target writes them as they are
# or, sentinel 0, also as 11 (a swapped form).
TINY_SENTINELS = SentinelIds(source=(8, 9, 10), target=(8, 9, 10, 11), target_slot=(0, 1, 2, 0))


def sentinels_written(tokens: list[int]) -> list[int]:
    """The sentinels (slots) an output writes, one entry per time written."""
    slot_of = dict(zip(TINY_SENTINELS.target, TINY_SENTINELS.target_slot))
    return sorted(slot_of[t] for t in tokens if t in slot_of)


@pytest.mark.numerical
@pytest.mark.parametrize("beam", [1, 3])
def test_each_sentinel_of_a_source_is_written_exactly_once(beam):
    """Greedy and beam search, joining at random steps, give each sentence what the
    oracles give it under the sentinel rule (kept there as Python sets); every output writes
    each of its source's sentinels once and no other, also those the length limit ends (the
    sentinels owed take the last tokens); and the rule changes outputs (without it some drop or
    repeat one)."""
    model = tiny_model(seed=7, eos_bias=2.0)
    with torch.no_grad():  # the sentinels as likely as EOS: a free search repeats some
        model.output.weight[list(TINY_SENTINELS.target), 0] = 2.0
    limits = {"max_len_a": 0.5, "max_len_b": 2}
    search = running_search(model, beam, 1.0, 1, *limits.values(), sentinels=TINY_SENTINELS)
    sources = sources_of(seed=11, count=16)
    answered = run_continuously(search, sources, seed=3)
    differs, at_limit = 0, 0
    for index, source in enumerate(sources):
        src = torch.tensor([source])
        if beam == 1:
            [expected] = greedy_search(model, src, **limits, sentinels=TINY_SENTINELS)
            [free] = greedy_search(model, src, **limits)
            got = answered[index][0].tokens
        else:
            [hypotheses] = beam_search(model, src, beam, 1.0, **limits, sentinels=TINY_SENTINELS)
            expected = hypotheses[0].tokens
            free = beam_search(model, src, beam, 1.0, **limits)[0][0].tokens
            got = answered[index][0].tokens
        assert got == expected, index
        owed = sorted({k for k, s in enumerate(TINY_SENTINELS.source) if s in source})
        assert sentinels_written(got) == owed, (index, source, got)
        at_limit += len(got) + 1 == int(len(source) * 0.5 + 2)
        differs += sentinels_written(free) != owed
    assert differs and at_limit, (differs, at_limit)


# Taking sentences back (`drop`), greedy and beam: the model and sources give
# short and long outputs, so that some sentences are answered and others still searched after a
# few steps.
DROP_BEAMS = [1, 3]
# Steps after which some of these sentences are answered, greedy and beam, and most are not.
FEW_STEPS = 5


def dropping_search(beam: int):
    model = tiny_model(seed=1, eos_bias=-1.0)
    return model, running_search(model, beam, **BEAM_LIMITS), sources_of(seed=8, count=8)


class DecoderRows:
    """The rows of each call to `model.decode` made while it is wrapped (`monkeypatch`)."""

    def __init__(self, model, monkeypatch) -> None:
        self.rows: list[int] = []
        decode = model.decode

        def counted(tgt_ids, *args, **kwargs):
            self.rows.append(tgt_ids.shape[0])
            return decode(tgt_ids, *args, **kwargs)

        monkeypatch.setattr(model, "decode", counted)


def rows_of_next_step(search) -> int:
    """The decoder rows the next step of `search` computes when no sentence waits to join: each
    sentence's beams, those answered whose rows have not left yet (greedy) too."""
    return len(search.sentence_ids) * search.beam


def steps_to_end(search, found: dict) -> None:
    """`search` stepped until it holds nothing, what it answers added to `found` (once each)."""
    while len(search):
        for sentence_id, result in search.step():
            assert sentence_id not in found
            found[sentence_id] = result


def assert_as_alone(model, sources: list[list[int]], found: dict, beam: int) -> None:
    """Each answer of `found` (by index into `sources`) is what the oracle gives its source
    alone: the same tokens, scores within float32's rounding."""
    for index, got in found.items():
        src = torch.tensor([sources[index]])
        if beam == 1:
            assert [h.tokens for h in got] == greedy_search(model, src, **BEAM_LIMITS), index
            continue
        [expected] = beam_search(model, src, beam, 1.0, 1, **BEAM_LIMITS)
        assert [h.tokens for h in got] == [h.tokens for h in expected], index
        terms = 2 * search_terms(model, src, *BEAM_LIMITS.values())  # both in float32
        assert [h.score for h in got] == within_rounding(
            [h.score for h in expected], torch.float32, terms
        )


def after_a_few_steps(beam: int, monkeypatch):
    """A dropping search holding every source, stepped `FEW_STEPS` times: the model, the search,
    the sources, its decoder calls and what it answered so far."""
    model, search, sources = dropping_search(beam)
    calls = DecoderRows(model, monkeypatch)
    search.add(range(len(sources)), sources)
    found = {}
    for _ in range(FEW_STEPS):
        found.update(search.step())
    return model, search, sources, calls, found


@pytest.mark.parametrize("beam", DROP_BEAMS)
def test_sentences_dropped_before_their_first_step_are_never_decoded(beam, monkeypatch):
    """Dropped right after `add`, into an empty search and into a running one: they leave at
    once, the next step decodes only the others' rows, and the others get their answers."""
    model, search, sources = dropping_search(beam)
    calls = DecoderRows(model, monkeypatch)
    search.add(range(4), sources[:4])
    assert search.drop([1]) == 1 and len(search) == 3
    found = dict(search.step())
    assert calls.rows == [3 * beam]
    search.add(range(4, 8), sources[4:])
    assert search.drop([5, 7]) == 2 and len(search) == 5 - len(found)
    steps_to_end(search, found)
    assert sorted(found) == [0, 2, 3, 4, 6]
    assert calls.rows[1] == 5 * beam  # no sentence was answered at the first step
    assert_as_alone(model, sources, found, beam)


@pytest.mark.parametrize("beam", DROP_BEAMS)
def test_sentences_dropped_mid_search_leave_at_once(beam, monkeypatch):
    """After a few steps, with some sentences answered: the first and the last still searched
    leave; the next step decodes fewer rows, and the others get their answers."""
    model, search, sources, calls, found = after_a_few_steps(beam, monkeypatch)
    held = [i for i in range(len(sources)) if i not in found]
    assert found and len(held) == len(search) >= 4
    rows = rows_of_next_step(search)
    assert search.drop([held[0], held[-1]]) == 2 and len(search) == len(held) - 2
    assert rows_of_next_step(search) < rows
    rows = rows_of_next_step(search)
    found.update(search.step())
    assert calls.rows[FEW_STEPS] == rows
    steps_to_end(search, found)
    assert sorted(found) == sorted(set(range(len(sources))) - {held[0], held[-1]})
    assert_as_alone(model, sources, found, beam)


@pytest.mark.parametrize("beam", DROP_BEAMS)
def test_a_search_whose_sentences_are_all_dropped_is_empty_and_takes_new_ones(beam, monkeypatch):
    model, search, sources = dropping_search(beam)
    calls = DecoderRows(model, monkeypatch)
    search.add(range(6), sources[:6])
    found = dict(search.step())
    found.update(search.step())
    held = len(search)
    assert search.drop(range(6)) == held > 0 and len(search) == 0
    assert search.step() == [] and len(calls.rows) == 2
    search.add([6, 7], sources[6:])
    again = {}
    steps_to_end(search, again)
    assert sorted(again) == [6, 7] and calls.rows[2] == 2 * beam
    assert_as_alone(model, sources, found | again, beam)


@pytest.mark.parametrize("beam", DROP_BEAMS)
def test_dropping_keys_the_search_does_not_hold_changes_nothing(beam, monkeypatch):
    """An unknown key and one already answered: nothing leaves, and every step decodes the
    rows and gives the answers of the same search without the drop, to the last bit."""
    runs = []
    for drop in (False, True):
        model, search, sources, calls, found = after_a_few_steps(beam, monkeypatch)
        if drop:
            held = len(search)
            answered = next(iter(found))
            assert search.drop(["unknown", answered]) == 0 and len(search) == held
        steps_to_end(search, found)
        runs.append((calls.rows, found))
    assert runs[0] == runs[1]
    assert sorted(runs[1][1]) == list(range(len(sources)))
    assert_as_alone(model, sources, runs[1][1], beam)


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("young_steps", [0, 2])
def test_dropping_a_merged_cohort_s_older_sentences_keeps_only_the_younger_s_steps(
    beam, young_steps, monkeypatch
):
    """One cohort at most: a sentence joining after three steps merges with the running one,
    its cached steps aligned at the end after the older's. The older dropped, the cohort's
    cache keeps the younger's steps alone (none before its first step), unmasked, and the
    younger gets its answer."""
    monkeypatch.setattr(search_module, "MAX_COHORTS", 1)
    model = tiny_model(seed=2, eos_bias=-1.0)  # long outputs: both searched throughout
    search = running_search(model, beam, **BEAM_LIMITS)
    sources = sources_of(seed=8, count=2)
    search.add(["old"], sources[:1])
    for _ in range(3):
        assert search.step() == []
    search.add(["young"], sources[1:])
    for _ in range(young_steps):
        assert search.step() == []
    assert search.cohorts == [2]
    assert search.drop(["old"]) == 1 and search.cohorts == [1] and len(search) == 1
    for layer in search.cache.layers:
        [steps], [encoder] = layer.steps, layer.encoder
        assert steps.width == young_steps and encoder.k.shape[0] == 1
    found = {}
    steps_to_end(search, found)
    assert_as_alone(model, sources, {1: found["young"]}, beam)
