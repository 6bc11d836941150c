"""Beam search against independent references: full-prefix scoring, greedy, exhaustive search."""

import copy
import itertools

import pytest
import torch
from joining import running_search
from search_oracle import (
    TINY_VOCAB,
    beam_search,
    full_prefix_log_probs,
    greedy_search,
    random_sources,
    strip_padding,
    tiny_model,
    uncached_greedy,
)
from tolerances import (
    assert_within_rounding,
    search_terms,
    tolerance,
    transformer_terms,
    within_rounding,
)

from translate.decode import encoding, steps
from translate.decode.encoding import encode_by_length, length_groups
from translate.decode.settings import Budget
from translate.decode.steps import Hypothesis, length_penalty
from translate.model.transformer import Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID

OUTPUTS = [t for t in range(TINY_VOCAB) if t not in (PAD_ID, BOS_ID)]  # what a search may produce


def products_answers(model, src: torch.Tensor, **settings) -> list:
    """What the product's search (`translate.decode.search`) answers each row of `src` with, the
    batch searched to its end (`running_search`'s settings)."""
    from translate.decode.search import search_batch

    sources = [row[row != PAD_ID].tolist() for row in src]
    return search_batch(running_search(model, **settings), sources)


class Prefix:
    """The ids decoded so far, as a search's cache: the search's own reordering reorders them."""

    def __init__(self) -> None:
        self.ids: torch.Tensor | None = None

    def reorder(self, rows: torch.Tensor, sentences: torch.Tensor | None) -> None:
        self.ids = self.ids.index_select(0, rows)


class Uncached:
    """The model behind the incremental interface, recomputing the whole prefix each step."""

    def __init__(self, model: Transformer) -> None:
        self.model, self.cfg, self.tgt_vocab_size = model, model.cfg, model.tgt_vocab_size
        self.source_mask, self.encode = model.source_mask, model.encode

    def search_cache(self, memory, src_mask, rows) -> Prefix:
        return Prefix()

    def decode(self, tgt_ids, memory, src_mask, cache, offset):
        ids = tgt_ids if cache.ids is None else torch.cat([cache.ids, tgt_ids], dim=1)
        assert ids.shape[1] == offset + 1
        cache.ids = ids
        self.steps = offset + 1
        return self.model.decode(ids, memory, src_mask)


@pytest.mark.numerical
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_cached_beam_search_equals_uncached_and_full_prefix_scores(alpha):
    model = tiny_model(0)
    src = random_sources(1, 6)
    cached = beam_search(model, src, beam=4, alpha=alpha, n_best=4, max_len_a=1.0, max_len_b=3)
    uncached = beam_search(
        Uncached(model), src, beam=4, alpha=alpha, n_best=4, max_len_a=1.0, max_len_b=3
    )
    terms = search_terms(model, src, 1.0, 3)
    lengths = set()
    for row, (ours, reference) in enumerate(zip(cached, uncached)):
        assert len(ours) == 4
        assert [h.tokens for h in ours] == [h.tokens for h in reference]
        # both searches run in float32: each carries the rounding
        assert [h.score for h in ours] == within_rounding(
            [r.score for r in reference], torch.float32, 2 * terms
        )
        expected = full_prefix_log_probs(model, src[row], [h.tokens for h in ours])
        assert [h.log_prob for h in ours] == within_rounding(expected, torch.float32, terms)
        penalized = [
            log_prob / ((5 + len(h.tokens) + 1) / 6) ** alpha for h, log_prob in zip(ours, expected)
        ]
        assert [h.score for h in ours] == within_rounding(penalized, torch.float32, terms)
        lengths.update(len(h.tokens) for h in ours)
        assert [h.score for h in ours] == sorted((h.score for h in ours), reverse=True)
    assert len(lengths) > 2, "every hypothesis had the same length: the test would be weak"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_is_greedy(seed):
    model = tiny_model(seed)
    src = random_sources(10 + seed, 16)
    greedy = greedy_search(model, src, max_len_a=1.5, max_len_b=4)
    with torch.no_grad():
        assert greedy == uncached_greedy(model, src, 1.5, 4)
    assert len({len(tokens) for tokens in greedy}) > 2, "greedy output too uniform to compare"
    for alpha in (0.0, 1.0, 2.0):
        beam = beam_search(model, src, beam=1, alpha=alpha, max_len_a=1.5, max_len_b=4)
        assert [hypotheses[0].tokens for hypotheses in beam] == greedy


def enumerate_and_score(model, src_row, tokens: list[int], max_len: int, alpha: float):
    """Every output the search could give: up to max_len - 1 tokens then EOS (the last one
    forced), scored by the full-prefix scorer; best first."""
    sequences = [
        list(prefix)
        for length in range(max_len)
        for prefix in itertools.product(tokens, repeat=length)
    ]
    log_probs = full_prefix_log_probs(model, src_row, sequences)
    scored = [
        (lp / length_penalty(len(seq) + 1, alpha), lp, seq) for seq, lp in zip(sequences, log_probs)
    ]
    return sorted(scored, key=lambda entry: entry[0], reverse=True)


@pytest.mark.numerical
@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("allowed,max_len", [(None, 3), ((4, 5, 6, 7), 4)])
def test_wide_beam_finds_the_exhaustive_best(alpha, allowed, max_len):
    model = tiny_model(3, eos_bias=0.5)
    src = random_sources(20, 3, max_len=5)
    if allowed is None:
        tokens, mask = [t for t in OUTPUTS if t != EOS_ID], None
    else:
        tokens = list(allowed)
        mask = torch.zeros(TINY_VOCAB, dtype=torch.bool)
        mask[list(allowed) + [EOS_ID]] = True
    # As wide as the search space: every extension of every prefix is within the beam.
    width = len(tokens) ** (max_len - 2) * (len(tokens) + 1)
    results = beam_search(
        model,
        src,
        beam=width,
        alpha=alpha,
        n_best=5,
        max_len_a=0.0,
        max_len_b=max_len,
        allowed_tokens=mask,
    )
    terms = search_terms(model, src, 0.0, max_len)
    for row, hypotheses in enumerate(results):
        exhaustive = enumerate_and_score(model, src[row], tokens, max_len, alpha)
        # float32 ranks the best six as float64 does where no two are within both their roundings
        scores = [score for score, _, _ in exhaustive[:6]]
        rounding = tolerance(torch.float32, terms) * max(map(abs, scores))
        assert min(a - b for a, b in zip(scores, scores[1:])) > 2 * rounding, (
            "near-tie: pick another seed"
        )
        assert [h.tokens for h in hypotheses] == [seq for _, _, seq in exhaustive[:5]]
        assert [h.score for h in hypotheses] == within_rounding(scores[:5], torch.float32, terms)
        assert [h.log_prob for h in hypotheses] == within_rounding(
            [lp for _, lp, _ in exhaustive[:5]], torch.float32, terms
        )


def test_alpha_changes_the_winner():
    """The length penalty is applied (a check that the two alphas above differ somewhere)."""
    model = tiny_model(3, eos_bias=0.5)
    src = random_sources(20, 3, max_len=5)
    raw = beam_search(model, src, beam=60, alpha=0.0, max_len_a=0.0, max_len_b=4)
    normalized = beam_search(model, src, beam=60, alpha=2.0, max_len_a=0.0, max_len_b=4)
    assert [h[0].tokens for h in raw] != [h[0].tokens for h in normalized]
    assert sum(len(h[0].tokens) for h in normalized) > sum(len(h[0].tokens) for h in raw)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_the_best_hypothesis_does_not_depend_on_how_many_were_asked_for(alpha):
    """With a length penalty the search waits for `beam` finished hypotheses whatever n_best
    is: stopping at the first one would keep the penalty from choosing a longer one."""
    model = tiny_model(4, eos_bias=1.5)
    src = random_sources(20, 24)
    one = beam_search(model, src, beam=4, alpha=alpha, n_best=1, max_len_a=1.5, max_len_b=4)
    four = beam_search(model, src, beam=4, alpha=alpha, n_best=4, max_len_a=1.5, max_len_b=4)
    assert [h[0].tokens for h in one] == [h[0].tokens for h in four]


@pytest.mark.numerical
def test_a_sentence_gets_the_same_translation_alone_and_in_any_batch():
    model = tiny_model(4)
    src = random_sources(30, 8)
    alone = [
        beam_search(model, strip_padding(src[i : i + 1]), beam=3, n_best=3, max_len_b=4)[0]
        for i in range(len(src))
    ]
    batches = [list(range(8)), [7, 3, 5, 0], [2, 6], [1, 4, 6, 2, 0]]
    terms = 2 * search_terms(model, src, max_len_b=4)  # both searches run in float32
    for batch in batches:
        results = beam_search(model, strip_padding(src[batch]), beam=3, n_best=3, max_len_b=4)
        for index, hypotheses in zip(batch, results):
            assert [h.tokens for h in hypotheses] == [h.tokens for h in alone[index]]
            assert [h.score for h in hypotheses] == within_rounding(
                [h.score for h in alone[index]], torch.float32, terms
            )
    assert len({len(h[0].tokens) for h in alone}) > 2


def test_allowed_tokens_are_the_only_ones_produced():
    model = tiny_model(5)
    src = random_sources(40, 10)
    allowed = torch.zeros(TINY_VOCAB, dtype=torch.bool)
    allowed[[EOS_ID, 5, 8, 9]] = True
    free = beam_search(model, src, beam=4, n_best=4)
    assert {t for hs in free for h in hs for t in h.tokens} - {5, 8, 9}, "nothing to remove"
    restricted = beam_search(model, src, beam=4, n_best=4, allowed_tokens=allowed)
    produced = {t for hs in restricted for h in hs for t in h.tokens}
    assert produced and produced <= {5, 8, 9}
    greedy = greedy_search(model, src, allowed_tokens=allowed)
    assert {t for tokens in greedy for t in tokens} <= {5, 8, 9}
    assert {t for tokens in greedy_search(model, src) for t in tokens} - {5, 8, 9}

    no_eos = allowed.clone()
    no_eos[EOS_ID] = False
    for beam in (1, 4):  # the product's search refuses a restriction no hypothesis could end in
        with pytest.raises(ValueError, match="must allow EOS"):
            running_search(model, beam, allowed_tokens=no_eos)


@torch.no_grad()
def reference_beam_search(model: Transformer, src_row: torch.Tensor, beam: int, max_len: int):
    """The documented scheme written plainly for one sentence, without a cache and without
    early stopping: every step to the length limit, every finished hypothesis kept; in float64."""
    model = copy.deepcopy(model).double()
    src = strip_padding(src_row[None])
    live, finished = [([], 0.0)], []
    for step in range(max_len):
        candidates = []
        for tokens, log_prob in live:
            logits = model(src, torch.tensor([[BOS_ID] + tokens]), PAD_ID)[0, -1]
            lprobs = torch.log_softmax(logits, dim=-1).tolist()
            for token in [EOS_ID] if step + 1 >= max_len else OUTPUTS:
                candidates.append((log_prob + lprobs[token], tokens, token))
        top = sorted(candidates, key=lambda c: c[0], reverse=True)[: 2 * beam]
        finished += [
            (tokens, lp)
            for rank, (lp, tokens, token) in enumerate(top)
            if token == EOS_ID and rank < beam
        ]
        live = [(tokens + [token], lp) for lp, tokens, token in top if token != EOS_ID][:beam]
        if not live:
            break
    return sorted(finished, key=lambda f: f[1], reverse=True)


@pytest.mark.numerical
def test_early_stopping_loses_nothing_with_alpha_zero():
    """With alpha 0 the stopping rule is exact: the beam's best `beam` finished hypotheses are
    those of the same search run to the length limit."""
    model = tiny_model(8, eos_bias=1.0)
    src = random_sources(68, 6)
    results = beam_search(model, src, beam=3, alpha=0.0, n_best=3, max_len_a=0.0, max_len_b=8)
    terms = search_terms(model, src, 0.0, 8)
    for row, hypotheses in enumerate(results):
        reference = reference_beam_search(model, src[row], beam=3, max_len=8)
        assert [h.tokens for h in hypotheses] == [tokens for tokens, _ in reference[:3]]
        assert [h.log_prob for h in hypotheses] == within_rounding(
            [lp for _, lp in reference[: len(hypotheses)]], torch.float32, terms
        )
    steps = []
    for row in range(len(src)):
        counting = Uncached(model)
        beam_search(
            counting,
            strip_padding(src[row : row + 1]),
            beam=3,
            alpha=0.0,
            max_len_a=0.0,
            max_len_b=8,
        )
        steps.append(counting.steps)
    assert min(steps) < 8, "every search ran to the limit: early stopping was not tested"


@pytest.mark.numerical
def test_bfloat16_model_is_scored_in_float32():
    model = tiny_model(6).to(torch.bfloat16)
    src = random_sources(50, 4)
    # One forced step: the score is log p(EOS | BOS), from the bf16 logits cast to float32.
    with torch.no_grad():
        mask = model.source_mask(src, PAD_ID)
        logits = model.decode(torch.full((4, 1), BOS_ID), model.encode(src, mask), mask)[:, -1]
    expected = torch.log_softmax(logits.float(), dim=-1)[:, EOS_ID]
    in_bf16 = torch.log_softmax(logits, dim=-1)[:, EOS_ID].float()
    # the log-softmax of the same logits in float32: a sum over the vocabulary, and the live score added;
    # a search scoring in bf16 must fall outside that rounding
    terms = TINY_VOCAB + 1
    float32_rounding = tolerance(torch.float32, terms) * expected.abs().max()
    assert (expected - in_bf16).abs().max() > float32_rounding, (
        "bf16 and float32 agree: the test would be weak"
    )
    single = beam_search(model, src, beam=2, max_len_a=0.0, max_len_b=1)
    assert [h[0].log_prob for h in single] == within_rounding(
        expected.tolist(), torch.float32, terms
    )
    results = beam_search(model, src, beam=3, n_best=3, max_len_b=4)
    for hypotheses in results:
        for h in hypotheses:
            assert isinstance(h, Hypothesis) and isinstance(h.log_prob, float)
            assert h.log_prob < 0 and h.score == h.log_prob / length_penalty(
                len(h.tokens) + 1, 1.0
            )  # as computed
    assert greedy_search(model, src, max_len_b=4) == [
        h[0].tokens for h in beam_search(model, src, beam=1, max_len_b=4)
    ]


def test_invalid_settings_are_refused():
    model = tiny_model(0)
    src = random_sources(0, 2)
    with pytest.raises(ValueError, match="n_best must be between 1 and the beam size 2"):
        beam_search(model, src, beam=2, n_best=3)
    with pytest.raises(ValueError, match="beam must be at least 1"):
        beam_search(model, src, beam=0)


def test_pad_and_bos_are_never_produced():
    """A model that prefers PAD and BOS to every other token: no search produces them, and
    each gives what it gives when they are explicitly disallowed; a checkpoint's target-token
    mask leaves them out too."""
    from translate.decode.loaded_model import LoadedModel
    from translate.model.checkpoint import TrainingConfig

    model = tiny_model(9)
    with torch.no_grad():
        model.output.weight[[PAD_ID, BOS_ID], 0] = 6.0  # the constant hidden unit favours them
    src = random_sources(90, 8)
    with torch.no_grad():  # the model's own first choice is PAD or BOS: the test is not vacuous
        mask_ = model.source_mask(src, PAD_ID)
        first = model.decode(torch.full((8, 1), BOS_ID), model.encode(src, mask_), mask_)[
            :, -1
        ].argmax(-1)
    assert set(first.tolist()) <= {PAD_ID, BOS_ID}
    others = torch.ones(TINY_VOCAB, dtype=torch.bool)
    others[[PAD_ID, BOS_ID]] = False

    def search(allowed):
        outputs = greedy_search(model, src, max_len_b=4, allowed_tokens=allowed)
        nbest = beam_search(model, src, beam=4, n_best=4, max_len_b=4, allowed_tokens=allowed)
        return outputs, [
            [(h.tokens, h.score) for h in hs] for hs in nbest
        ]  # a bias of 0 changes no score

    free = search(None)
    produced = {t for tokens in free[0] for t in tokens} | {
        t for hs in free[1] for tokens, _ in hs for t in tokens
    }
    assert produced and not produced & {PAD_ID, BOS_ID}
    assert free == search(others)
    mask = LoadedModel(
        model, None, TrainingConfig(), None, target_tokens=list(range(TINY_VOCAB))
    ).target_token_mask()
    assert not mask[PAD_ID] and not mask[BOS_ID] and mask[4:].all()
    assert search(mask) == free


def test_query_rows_must_divide_among_key_rows():
    model = tiny_model(0)
    src = random_sources(0, 3)
    mask = model.source_mask(src, PAD_ID)
    memory = model.encode(src, mask)
    with torch.no_grad():
        assert (
            model.decode(torch.full((6, 1), BOS_ID), memory, mask).shape[0] == 6
        )  # 2 beams a sentence
        with pytest.raises(ValueError, match="4 query rows cannot share 3 key rows"):
            model.decode(torch.full((4, 1), BOS_ID), memory, mask)


def split_cost(groups: list[list[int]], lengths: list[int], call_tokens: int) -> int:
    return sum(call_tokens + len(group) * max(lengths[row] for row in group) for group in groups)


@pytest.mark.parametrize("seed", range(6))
def test_length_groups_are_the_cheapest_split_of_the_sorted_rows(seed):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(
        1, 60, (int(torch.randint(1, 9, (1,), generator=generator)),), generator=generator
    ).tolist()
    groups = length_groups(lengths, call_tokens=4)
    assert sorted(row for group in groups for row in group) == list(range(len(lengths)))
    # Every split of the length-sorted rows into runs, written out (the reference).
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    splits = []
    for cuts in itertools.product([False, True], repeat=len(order) - 1):
        runs, run = [], [order[0]]
        for row, cut in zip(order[1:], cuts):
            if cut:
                runs.append(run)
                run = []
            run.append(row)
        splits.append(runs + [run])
    cheapest = min(split_cost(split, lengths, 4) for split in splits)
    whole = split_cost([list(range(len(lengths)))], lengths, 4)
    assert split_cost(groups, lengths, 4) == cheapest
    if cheapest == whole:
        assert groups == [list(range(len(lengths)))]


def test_length_groups_leave_a_batch_of_like_lengths_whole_and_split_a_mixed_one():
    assert length_groups([20, 21, 20, 22, 21]) == [[0, 1, 2, 3, 4]]
    assert length_groups([3, 60, 5, 58, 4]) == [[0, 2, 4], [1, 3]]


@pytest.mark.numerical
def test_encoding_by_length_groups_equals_encoding_the_batch_whole(monkeypatch):
    model = tiny_model(8)
    lengths = [3, 60, 5, 58, 4, 31]
    src = torch.full((len(lengths), 61), PAD_ID)
    generator = torch.Generator().manual_seed(8)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, TINY_VOCAB, (length,), generator=generator)
        src[row, length] = EOS_ID
    mask = model.source_mask(src, PAD_ID)
    assert len(length_groups((src != PAD_ID).sum(dim=1).tolist())) > 1
    reference = copy.deepcopy(model).double()
    with torch.inference_mode():
        whole = reference.encode(src, mask)  # the batch whole, in float64
        grouped = encode_by_length(model, src, mask)
        real = mask[:, 0, 0, :, None]
        assert_within_rounding(
            grouped * real, whole * real, torch.float32, transformer_terms(model.cfg, src.shape[1])
        )
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert encode_by_length(model, src, mask).dtype == model.encode(src, mask).dtype
    # the product's searches, which encode their sentences so, against the batch encoded whole
    split_greedy = [[h.tokens for h in hyps] for hyps in products_answers(model, src)]
    split_beam = products_answers(model, src, beam=3, n_best=3)
    monkeypatch.setattr(
        encoding, "length_groups", lambda lengths: [list(range(len(lengths)))]
    )  # never split
    assert [[h.tokens for h in hyps] for hyps in products_answers(model, src)] == split_greedy
    terms = 2 * search_terms(model, src)  # both searches run in float32
    for ours, theirs in zip(products_answers(model, src, beam=3, n_best=3), split_beam):
        assert [h.tokens for h in ours] == [h.tokens for h in theirs]
        assert [h.score for h in ours] == within_rounding(
            [h.score for h in theirs], torch.float32, terms
        )


def test_the_best_candidates_found_among_few_groups_are_topk_s():
    """Rows where the best scores crowd into one interleaved group, sit past the last whole group,
    or are spread out; a fifth of the scores -inf (blocked tokens)."""
    generator = torch.Generator().manual_seed(0)
    groups, width = steps.TOPK_GROUPS, 10
    count = 37 * groups + 11  # 11 scores past the last whole group
    scores = torch.randn(6, count, generator=generator)
    scores[torch.rand(6, count, generator=generator) < 0.2] = float("-inf")
    scores[1, 5::groups] += 10.0  # the best are all in group 5
    scores[2, -11:] = 10.0 + torch.arange(11.0)  # the best include every score past the groups
    scores[3, 3 * groups + 7] = 50.0  # one far ahead, the rest as they come
    assert count >= steps.GROUPED_TOPK_MIN_SCORES
    values, indexes = steps.best_candidates(scores, width)
    expected_values, expected_indexes = scores.topk(width, dim=1)
    assert torch.equal(values, expected_values)
    assert torch.equal(indexes, expected_indexes)
    assert set(indexes[1].tolist()) <= set(range(5, count, groups))
    assert set(indexes[2].tolist()) <= set(range(count - 11, count))


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize(
    "beam,groups", [(2, 8), (3, 16)]
)  # 24 = 3 x 8 scores a row; 36 = 2 x 16 + 4
def test_beam_search_with_grouped_candidates_equals_it_with_topk(monkeypatch, alpha, beam, groups):
    model = tiny_model(6)
    src = random_sources(40, 12)
    settings = {"beam": beam, "alpha": alpha, "n_best": beam, "max_len_b": 5}
    with monkeypatch.context() as patch:
        patch.setattr(steps, "best_candidates", lambda scores, width: scores.topk(width, dim=1))
        expected = products_answers(model, src, **settings)
    monkeypatch.setattr(steps, "GROUPED_TOPK_MIN_SCORES", 0)
    monkeypatch.setattr(steps, "TOPK_GROUPS", groups)
    calls = []
    grouped = steps.best_candidates
    monkeypatch.setattr(
        steps,
        "best_candidates",
        lambda scores, width: calls.append(scores.shape) or grouped(scores, width),
    )
    found = products_answers(model, src, **settings)
    assert [[(h.tokens, h.score) for h in hyps] for hyps in found] == [
        [(h.tokens, h.score) for h in hyps] for hyps in expected
    ]
    assert any(shape[1] // groups >= 2 for shape in calls)  # the grouped path ran


def test_the_best_token_found_through_group_maxima_is_argmax_s():
    """Ties in two groups and inside one group (the first index wins, as argmax), a maximum past
    the last whole group, a row of -inf but one score, a NaN (argmax's choice), a row of -inf."""
    generator = torch.Generator().manual_seed(1)
    size = steps.ARGMAX_GROUP
    count = 40 * size + 9  # 9 scores past the last whole group
    scores = torch.randn(16, count, generator=generator)
    scores[0, [3 * size + 5, 30 * size + 1]] = 9.0  # a tie across groups
    scores[1, [7 * size + 9, 7 * size + 2]] = 9.0  # a tie inside a group
    scores[2, -3] = 9.0  # past the last whole group
    scores[3] = float("-inf")
    scores[3, 17 * size] = 0.0
    scores[4, 5] = float("nan")
    scores[5] = float("-inf")
    assert scores.numel() >= steps.GROUPED_ARGMAX_MIN_SCORES
    found = steps.best_tokens(scores)
    assert torch.equal(found, scores.argmax(dim=1))
    assert found[:4].tolist() == [3 * size + 5, 7 * size + 2, count - 3, 17 * size]


def test_greedy_search_with_grouped_best_tokens_equals_it_with_argmax(monkeypatch):
    model = tiny_model(7)
    src = random_sources(41, 16)
    expected = products_answers(model, src, max_len_b=6)
    monkeypatch.setattr(steps, "GROUPED_ARGMAX_MIN_SCORES", 0)
    monkeypatch.setattr(steps, "ARGMAX_GROUP", 4)  # the tiny vocabulary in several groups
    calls = []
    grouped = steps.best_tokens
    monkeypatch.setattr(
        steps, "best_tokens", lambda scores: calls.append(scores.shape) or grouped(scores)
    )
    assert products_answers(model, src, max_len_b=6) == expected
    assert calls and calls[0][1] >= 2 * steps.ARGMAX_GROUP  # the grouped path ran


@pytest.mark.numerical
def test_searches_with_values_summed_by_rows_equal_them_with_the_batched_product(monkeypatch):
    """Decoding's attention sums the cached values row by row (`cpu_attention.weighted_values`); every
    search gives the tokens and scores it gives with the plain batched product."""
    from joining import running_search

    from translate.decode.search import search_joined
    from translate.model import cpu_attention

    model, src = tiny_model(7), random_sources(41, 10)
    sources = [row[row != PAD_ID].tolist() for row in src]

    def searches():
        batches = [([0, 1, 2], sources[:3]), ([3, 4], sources[3:5])]
        joined = {
            index: [h.tokens for h in hypotheses]
            for index, hypotheses in search_joined(running_search(model, budget=Budget(8)), batches)
        }
        return (
            greedy_search(model, src),
            [
                [(h.tokens, h.score) for h in hyps]
                for hyps in beam_search(model, src, beam=3, n_best=3, max_len_b=6)
            ],
            joined,
        )

    summed_calls = []
    summed = cpu_attention.weighted_values
    monkeypatch.setattr(
        cpu_attention,
        "weighted_values",
        lambda w, v, rows=None: summed_calls.append(w.shape) or summed(w, v, rows),
    )
    by_rows = searches()
    monkeypatch.setattr(
        cpu_attention, "weighted_values", lambda w, v, rows=None: torch.matmul(w, v)
    )
    expected = searches()
    assert by_rows[0] == expected[0] and by_rows[2] == expected[2]
    terms = 2 * search_terms(model, src, max_len_b=6)  # both searches run in float32
    for ours, theirs in zip(by_rows[1], expected[1]):
        assert [tokens for tokens, _ in ours] == [tokens for tokens, _ in theirs]
        assert [score for _, score in ours] == within_rounding(
            [score for _, score in theirs], torch.float32, terms
        )
    assert any(shape[2] > 1 for shape in summed_calls)  # beams sharing their sentence's values ran
