"""One step of the search (translate/decode/search.py): greedy's choice of a token and beam
search's choice among the candidates (`next_tokens`, `extensions`), the length limits and
penalty, the token restriction and the sentinel rule. Scores are float32 log-probabilities even
when the model runs in bf16 or fp16 (the logits are cast before the log-softmax).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from translate.decode.settings import SentinelIds
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID

# Ids the decoder is never asked for: PAD fills batches and BOS starts the decoder, so a model
# gives them no trained probability, and an output holding them would decode to nonsense.
NEVER_GENERATED = [PAD_ID, BOS_ID]


@dataclass(frozen=True)
class Hypothesis:
    """One finished translation: ids without BOS/EOS, its length-normalized score and the
    total log-probability of its tokens (EOS included) under the model."""

    tokens: list[int]
    score: float
    log_prob: float


def output_lengths(src_lengths: Tensor, max_len_a: float, max_len_b: int, limit: int) -> Tensor:
    """`a * source_length + b` output tokens at most (in float32, cut to an integer), between 1
    and `limit`, for each of `src_lengths` (an integer tensor)."""
    return (src_lengths * max_len_a + max_len_b).long().clamp(min=1, max=limit)


def output_limits(lengths: Sequence[int], plans: Sequence, positions: int) -> Tensor:
    """Each sentence's output length limit under its plan's rule (`SearchPlan.max_len_a`,
    `max_len_b`; `output_lengths`), from its source length (EOS and tags included), on the CPU."""
    source = torch.tensor(lengths, dtype=torch.long)
    rules = {(plan.max_len_a, plan.max_len_b) for plan in plans}
    if len(rules) == 1:
        return output_lengths(source, *rules.pop(), positions)
    limits = torch.empty(len(plans), dtype=torch.long)
    for rule in rules:
        index = torch.tensor(
            [i for i, plan in enumerate(plans) if (plan.max_len_a, plan.max_len_b) == rule]
        )
        limits[index] = output_lengths(source[index], *rule, positions)
    return limits


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's `((5 + length) / 6) ** alpha` (Wu et al. 2016); `length` counts the output
    tokens including the final EOS.  alpha 0 gives 1: the raw sum of log-probabilities."""
    return ((5.0 + length) / 6.0) ** alpha


def length_penalties(alpha: float, steps: int, device: torch.device) -> Tensor:
    """`length_penalty` of a hypothesis ending at each of `steps` steps (step + 1 tokens), in
    float32 as a Python float becomes in a float32 division."""
    return torch.tensor([length_penalty(step + 1, alpha) for step in range(steps)], device=device)


def token_bias(
    allowed_tokens: Tensor | None, vocab_size: int, device: torch.device
) -> Tensor | None:
    """Added to every step's scores: 0 where `allowed_tokens` (a bool over the target
    vocabulary, which must allow EOS) is True, -inf where it is False; None without it."""
    if allowed_tokens is None:
        return None
    if allowed_tokens.dtype != torch.bool or allowed_tokens.shape != (vocab_size,):
        raise ValueError(
            f"allowed_tokens must be a bool tensor of shape ({vocab_size},), got "
            f"{allowed_tokens.dtype} {tuple(allowed_tokens.shape)}"
        )
    if not bool(allowed_tokens[EOS_ID]):
        raise ValueError("allowed_tokens must allow EOS, or no hypothesis could ever end")
    return torch.zeros(vocab_size).masked_fill_(~allowed_tokens.cpu(), float("-inf")).to(device)


class SentinelRule:
    """Each sentinel of a source written exactly once, and no other: a model trained with
    `data.protect_spans` reads a line's protected spans as sentinels (`text.protected.mask`),
    and a sentinel it dropped or repeated would drop or repeat a number or a placeholder. Each
    row keeps the sentinels its hypothesis still owes (`OwedSentinels`). Tensors only, no read
    back: the steps stay capturable."""

    def __init__(self, ids: SentinelIds, device: torch.device) -> None:
        self.source = torch.tensor(ids.source, dtype=torch.long, device=device)
        self.target = torch.tensor(ids.target, dtype=torch.long, device=device)
        self.slot = torch.tensor(ids.target_slot, dtype=torch.long, device=device)
        self.sentinels = len(ids.source)
        # (target ids, sentinels): which sentinel each target id writes
        self.writes = torch.nn.functional.one_hot(self.slot, self.sentinels).bool()

    def required(self, src_ids: Tensor) -> Tensor:
        """(sentences, sentinels) bool: the sentinels each source (padded ids) holds."""
        return (src_ids[:, :, None] == self.source).any(dim=1)

    def owed(
        self, remaining: Tensor, limits: Tensor, steps: Tensor, rows_per_sentence: int
    ) -> OwedSentinels:
        """A step's rows under the rule: `remaining` per row, the length limits and the tokens
        written so far per sentence, each sentence `rows_per_sentence` rows."""
        left = (limits - steps - 1).repeat_interleave(rows_per_sentence)
        return OwedSentinels(self, remaining, left)

    def written(self, remaining: Tensor, token: Tensor) -> Tensor:
        """What each row owes once it has written `token` ((rows,))."""
        hit = token[:, None] == self.target  # (rows, target ids)
        return remaining & ~(hit[:, :, None] & self.writes).any(dim=1)


@dataclass(frozen=True)
class OwedSentinels:
    """A step's rows under the sentinel rule: the sentinels each owes (`remaining`, bool (rows,
    sentinels)) and the tokens each may still write before its length limit leaves it only EOS
    (`left`, (rows,); 0 at the limit)."""

    rule: SentinelRule
    remaining: Tensor
    left: Tensor

    def restrict(self, scores: Tensor) -> None:
        """`scores` ((rows, vocab), changed in place) without the sentinels a row does not owe,
        without EOS while it owes one, and with nothing but its owed sentinels once they need
        every token it has left; a row at its limit keeps its EOS."""
        rule, remaining = self.rule, self.remaining
        owed_count = remaining.sum(dim=1)
        before_limit = self.left > 0
        kept = scores[:, rule.target].masked_fill(~remaining[:, rule.slot], float("-inf"))
        scores.masked_fill_(((owed_count >= self.left) & before_limit)[:, None], float("-inf"))
        scores[:, rule.target] = kept
        scores[:, EOS_ID] = scores[:, EOS_ID].masked_fill(
            (owed_count > 0) & before_limit, float("-inf")
        )


def sentinel_rule(ids: SentinelIds | None, device: torch.device) -> SentinelRule | None:
    return None if ids is None else SentinelRule(ids, device)


def next_tokens(
    logits: Tensor,
    blocked: Sequence[int],
    bias: Tensor | None,
    at_limit: Tensor,
    owed: OwedSentinels | None = None,
) -> Tensor:
    """One greedy step's choice for each row: the best token of `logits`
    ((rows, vocab) at this step; changed in place) once the `blocked` ids, the `bias` of
    `allowed_tokens` and the sentinel rule (`owed`) are applied; EOS for the rows `at_limit`
    (bool, (rows,))."""
    logits[:, blocked] = float("-inf")
    if owed is not None:
        owed.restrict(logits)
    token = best_tokens(logits if bias is None else logits.float() + bias)
    return token.masked_fill(at_limit, EOS_ID)


def greedy_extensions(
    logits: Tensor,
    beam_lp: Tensor,
    at_limit: Tensor,
    blocked: Sequence[int],
    bias: Tensor | None,
    owed: OwedSentinels | None = None,
) -> Extensions:
    """One greedy step's choice for each row (beam 1) as `extensions` words a beam step's: the
    token `next_tokens` picks, its hypothesis's log-probability so far (`beam_lp`, (rows, 1)) plus
    the token's float32 log-probability (`top_lp`), finishing where it is EOS; the row lives on
    with that token otherwise (`live_lp` -inf where it finished)."""
    normalizer = torch.logsumexp(logits.float(), dim=-1)  # before `next_tokens` changes `logits`
    token = next_tokens(logits, blocked, bias, at_limit, owed)
    # One logit a row, cast as `normalizer`'s were (not the whole row again).
    top_lp = beam_lp + (logits.gather(1, token[:, None]).float() - normalizer[:, None])
    ends = (token == EOS_ID)[:, None]
    zero = torch.zeros_like(token)[:, None]
    live_lp = top_lp.masked_fill(ends, float("-inf"))
    return Extensions(top_lp, zero, ends, live_lp, zero, token[:, None])


class Extensions(NamedTuple):
    """A beam step's choice, per sentence (see `extensions`)."""

    top_lp: Tensor  # (n, 2 * beam) the best extensions' total log-probabilities, best first
    top_beam: Tensor  # the live hypothesis each extends
    ends: Tensor  # bool: those that finish (EOS among the first `beam`)
    live_lp: Tensor  # (n, beam) the next live hypotheses: log-probabilities,
    live_beam: Tensor  # the hypothesis each extends,
    live_token: Tensor  # and its new token


def extensions(
    logits: Tensor,
    beam_lp: Tensor,
    at_limit: Tensor,
    beam: int,
    blocked: Sequence[int],
    bias: Tensor | None,
    owed: OwedSentinels | None = None,
) -> Extensions:
    """One beam-search step's choice for each sentence. Of the extensions of
    its `k` live hypotheses (`logits`: (n * k, vocab) at this step; `beam_lp`: (n, k) their
    log-probabilities), the best `2 * beam` by total log-probability: `top_lp`, and `top_beam`,
    the hypothesis each extends; `ends`, those that finish (EOS among the first `beam`); and the
    next live ones, `live_lp`, `live_beam`, `live_token` (the first `beam` that are not EOS). For
    the sentences `at_limit` (bool, (n,)) every token but EOS is removed."""
    n, k = beam_lp.shape
    vocab = logits.shape[-1]
    width = min(2 * beam, k * vocab)
    rank = torch.arange(width, device=logits.device)
    lprobs = torch.log_softmax(logits.float(), dim=-1)
    if blocked:  # (none where the bias blocks them already)
        lprobs[:, blocked] = float("-inf")
    if bias is not None:
        lprobs.add_(bias)
    if owed is not None:
        owed.restrict(lprobs)
    lprobs = only_eos_at_limit(lprobs.view(n, k, vocab), at_limit)
    candidates = lprobs.add_(beam_lp[:, :, None]).view(n, k * vocab)
    top_lp, top_index = best_candidates(candidates, width)
    top_beam, top_token = top_index // vocab, top_index % vocab
    is_eos = top_token == EOS_ID
    ends = is_eos & (rank < beam) & torch.isfinite(top_lp)
    # The first `beam` non-EOS extensions in rank order (at most k <= `beam` are EOS, one
    # per live hypothesis, so 2 * beam candidates hold enough where the vocabulary does).
    keep = (is_eos.long() * width + rank).argsort(dim=1)[:, : min(beam, width)]
    live_lp = top_lp.gather(1, keep).masked_fill(is_eos.gather(1, keep), float("-inf"))
    return Extensions(
        top_lp, top_beam, ends, live_lp, top_beam.gather(1, keep), top_token.gather(1, keep)
    )


def only_eos_at_limit(lprobs: Tensor, at_limit: Tensor) -> Tensor:
    """`lprobs` ((n, k, vocab), changed in place) with every token but EOS removed for the
    sentences `at_limit` (bool, (n,)). On the CPU only those rows are touched (found by reading
    the mask); elsewhere one masked write, which reads nothing back to the host."""
    if lprobs.is_cpu:
        limited = at_limit.nonzero()[:, 0]
        if limited.numel():
            eos = lprobs[limited, :, EOS_ID]
            lprobs[limited] = float("-inf")
            lprobs[limited, :, EOS_ID] = eos
        return lprobs
    # Made by comparison: writing EOS's False into a device tensor would wait for the device.
    others = torch.arange(lprobs.shape[-1], device=lprobs.device) != EOS_ID
    return lprobs.masked_fill_(at_limit[:, None, None] & others, float("-inf"))


# On the CPU, rows of at least this many scores take `best_candidates`' grouped path.
GROUPED_TOPK_MIN_SCORES = 8192
TOPK_GROUPS = 256


def best_candidates(scores: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """`scores.topk(width, dim=1)` (values and indexes, best first), ranking few of a long row's
    scores: they fall into `TOPK_GROUPS` interleaved groups (score j in group j mod TOPK_GROUPS),
    and only the `width` groups with the largest maxima are ranked. A score of any other group is
    at most its group's maximum, which is at most each of those `width` maxima: `width` scores
    rank above it, so it is not among the best. On the CPU topk selects over a copy of every
    row; the group maxima take one vectorized pass (docs/benchmarks.md). Exact ties may come in
    another order."""
    rows, count = scores.shape
    per_group = count // TOPK_GROUPS
    if (
        count < GROUPED_TOPK_MIN_SCORES
        or per_group < 2
        or width * 2 > TOPK_GROUPS
        or not scores.is_cpu
        or not scores.is_contiguous()
    ):
        return scores.topk(width, dim=1)
    grouped = count - count % TOPK_GROUPS
    # (row, j, group): score j * groups + group.
    body = scores[:, :grouped].view(rows, per_group, TOPK_GROUPS)
    groups = body.amax(dim=1).topk(width, dim=1).indices  # (rows, width)
    picked = body.gather(2, groups[:, None, :].expand(rows, per_group, width)).reshape(rows, -1)
    positions = torch.arange(per_group, device=scores.device)[:, None] * TOPK_GROUPS
    index = (positions + groups[:, None, :]).reshape(rows, -1)
    if grouped < count:  # the last `count % TOPK_GROUPS` scores are ranked with them
        picked = torch.cat([picked, scores[:, grouped:]], dim=1)
        index = torch.cat(
            [index, torch.arange(grouped, count, device=scores.device).expand(rows, -1)], dim=1
        )
    values, where = picked.topk(width, dim=1)
    return values, index.gather(1, where)


# On the CPU, rows of at least this many scores in all take `best_tokens`' grouped path.
GROUPED_ARGMAX_MIN_SCORES = 2**15
ARGMAX_GROUP = 64


def best_tokens(scores: Tensor) -> Tensor:
    """`scores.argmax(dim=1)`, the first index of each row's maximum, found through the maxima of
    consecutive groups of `ARGMAX_GROUP` scores: the first group holding the row's maximum holds
    its first index. On the CPU argmax walks every score one by one; the group maxima take one
    vectorized pass, and argmax then reads a sixty-fourth of the scores (docs/benchmarks.md)."""
    rows, count = scores.shape
    if rows * count < GROUPED_ARGMAX_MIN_SCORES or count < 2 * ARGMAX_GROUP or not scores.is_cpu:
        return scores.argmax(dim=1)
    whole = count - count % ARGMAX_GROUP
    maxima = scores[:, :whole].view(rows, -1, ARGMAX_GROUP).amax(dim=2)
    if whole < count:  # the last, shorter group
        maxima = torch.cat([maxima, scores[:, whole:].amax(dim=1, keepdim=True)], dim=1)
    first = maxima.argmax(dim=1) * ARGMAX_GROUP
    index = (first[:, None] + torch.arange(ARGMAX_GROUP, device=scores.device)).clamp_(
        max=count - 1
    )
    return first + scores.gather(1, index).argmax(dim=1)
