"""Greedy and beam search over the model's incremental-decoding interface.

Both encode the source once and decode one target position per step with a key/value cache
(`Transformer.decode` with `new_cache()`); the encoder's keys and values are computed once,
by the first decoding step, and reused.  Scores are float32 log-probabilities even when the
model runs in bf16 or fp16 (the logits are cast before the log-softmax).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from translate.model.transformer import Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID

# Ids the decoder is never asked for: PAD fills batches and BOS starts the decoder, so a model
# gives them no trained probability, and an output holding them would decode to nonsense.
NEVER_GENERATED = [PAD_ID, BOS_ID]


@dataclass
class Hypothesis:
    """One finished translation: ids without BOS/EOS, its length-normalized score and the
    total log-probability of its tokens (EOS included) under the model."""

    tokens: list[int]
    score: float
    log_prob: float


def max_output_lengths(src_ids: Tensor, max_len_a: float, max_len_b: int, limit: int) -> Tensor:
    """Per sentence: at most `a * source_length + b` output tokens (EOS included)."""
    src_lengths = (src_ids != PAD_ID).sum(dim=1)
    return (src_lengths * max_len_a + max_len_b).long().clamp(min=1, max=limit)


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's `((5 + length) / 6) ** alpha` (Wu et al. 2016); `length` counts the output
    tokens including the final EOS.  alpha 0 gives 1: the raw sum of log-probabilities."""
    return ((5.0 + length) / 6.0) ** alpha


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


def first_tokens(start: Tensor | None, batch: int, device: torch.device) -> Tensor:
    """(batch, 1) first decoder tokens: `start` where given, else BOS."""
    if start is None:
        return torch.full((batch, 1), BOS_ID, dtype=torch.long, device=device)
    return start.reshape(batch, 1).to(device=device, dtype=torch.long)


def select_rows(cache: list[dict], rows: Tensor, sentences: Tensor | None) -> None:
    """Keep (and reorder) decoder rows `rows` of the self-attention cache, and, when
    `sentences` is given, sentences `sentences` of the cross-attention cache (which holds one
    row per sentence, shared by its beams)."""
    for layer in cache:
        for name, part in layer.items():
            index = sentences if name == "cross" else rows
            if index is None:
                continue
            if (
                name == "self" and "k" in part
            ):  # applied with the next step's append (model.append_steps)
                part["rows"] = index if "rows" not in part else part["rows"].index_select(0, index)
                continue
            for key, value in part.items():
                part[key] = value.index_select(0, index)


# What one more encoder call costs, in padded source tokens of work (its fixed cost on the CPU):
# a split into length groups must save more padding than its calls cost.
ENCODE_CALL_TOKENS = 16


def length_groups(lengths: list[int], call_tokens: int = ENCODE_CALL_TOKENS) -> list[list[int]]:
    """Row indexes grouped by length so that encoding group by group pads least: of the splits
    of the length-sorted rows, the one with the least `call_tokens` + rows x longest summed over
    its groups (dynamic programming over the distinct lengths); one group where no split
    costs less."""
    whole = call_tokens + len(lengths) * max(lengths, default=0)
    if call_tokens + sum(lengths) >= whole:  # no padding: no split could cost less
        return [list(range(len(lengths)))]
    distinct = sorted(set(lengths))
    below = [sum(length < value for length in lengths) for value in distinct] + [len(lengths)]
    # best[j]: least cost of the rows shorter than distinct[j]; their last group starts at distinct[cut[j]].
    best, cut = [0] * (len(distinct) + 1), [0] * (len(distinct) + 1)
    for j in range(1, len(distinct) + 1):
        best[j], cut[j] = min(
            (best[i] + call_tokens + (below[j] - below[i]) * distinct[j - 1], i) for i in range(j)
        )
    if best[-1] >= whole:
        return [list(range(len(lengths)))]
    groups, j = [], len(distinct)
    while j:
        low, high = distinct[cut[j]], distinct[j - 1]
        groups.append([row for row, length in enumerate(lengths) if low <= length <= high])
        j = cut[j]
    return groups[::-1]


def encode_by_length(model: Transformer, src_ids: Tensor, src_mask: Tensor) -> Tensor:
    """`model.encode` of a (right-padded) batch, in length groups (`length_groups`) where its
    sources differ much in length (a server's unsorted batch), so that the encoder does not
    work on padding; what a padding position holds differs (the source mask hides it)."""
    if (
        src_ids.device.type != "cpu"
    ):  # a GPU pads for almost nothing; one call launches fewest kernels
        return model.encode(src_ids, src_mask)
    lengths = src_mask[:, 0, 0].sum(dim=1).tolist()
    groups = length_groups(lengths)
    if len(groups) == 1:
        return model.encode(src_ids, src_mask)
    memory = None
    for group in groups:
        rows = torch.tensor(group, device=src_ids.device)
        width = max(lengths[row] for row in group)
        encoded = model.encode(src_ids[rows, :width], src_mask[rows, ..., :width])
        if memory is None:
            memory = encoded.new_zeros(*src_ids.shape, encoded.shape[-1])
        memory[rows, :width] = encoded
    return memory


@torch.inference_mode()
def greedy_search(
    model: Transformer,
    src_ids: Tensor,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    allowed_tokens: Tensor | None = None,
    start: Tensor | None = None,
    never: Sequence[int] = (),
) -> list[list[int]]:
    """Most probable next token at each step, for a batch; returns ids without BOS/EOS.

    `allowed_tokens` (bool over the target vocabulary, EOS included) removes every False id
    from the choice at every step; PAD and BOS are never chosen, nor the ids in `never` (a
    many-to-many model's language tags). `start` gives each row's first decoder token (a
    target-language tag) in place of BOS.  Finished sentences leave the batch once they are a
    tenth of it (dropping rows copies the cache, which costs more than decoding a few rows
    longer; what a finished row produces after its EOS is cut off).
    """
    device = src_ids.device
    bias = token_bias(allowed_tokens, model.tgt_vocab_size, device)
    blocked = NEVER_GENERATED + list(never)
    src_mask = model.source_mask(src_ids, PAD_ID)
    memory = encode_by_length(model, src_ids, src_mask)
    limits = max_output_lengths(src_ids, max_len_a, max_len_b, model.cfg.max_positions)
    batch = src_ids.shape[0]
    cache = model.new_cache()
    last = first_tokens(start, batch, device)
    active = torch.arange(batch, device=device)  # original index of each row still decoding
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # rows that produced EOS
    output = torch.full((batch, int(limits.max())), EOS_ID, dtype=torch.long, device=device)
    for step in range(int(limits.max())):
        logits = model.decode(last, memory, src_mask, cache, offset=step)[:, -1]
        token = next_tokens(logits, blocked, bias, step + 1 >= limits)
        output[active, step] = token
        done |= token == EOS_ID
        finished = int(done.sum())
        if finished == done.numel():
            break
        if finished * 10 >= done.numel():
            keep = (~done).nonzero()[:, 0]
            select_rows(cache, keep, keep)
            memory, src_mask = memory.index_select(0, keep), src_mask.index_select(0, keep)
            active, limits, token, done = active[keep], limits[keep], token[keep], done[keep]
        last = token[:, None]
    return [strip_special(row) for row in output.tolist()]


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src_ids: Tensor,
    beam: int = 5,
    alpha: float = 1.0,
    n_best: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    allowed_tokens: Tensor | None = None,
    start: Tensor | None = None,
    never: Sequence[int] = (),
) -> list[list[Hypothesis]]:
    """Beam search for a batch of (PAD-padded) sources; per sentence, up to `n_best`
    hypotheses, best first.

    Scoring.  A hypothesis's `log_prob` is the sum of the float32 log-probabilities of its
    output tokens, EOS included.  Its `score` is `log_prob / ((5 + n) / 6) ** alpha`, where
    `n` is the number of output tokens including EOS (BOS is not counted); hypotheses are
    ranked by `score`.  alpha 0 ranks by the raw sum of log-probabilities.

    Length limit.  Sentence i gets at most `max_len_a * source_length + max_len_b` output
    tokens (EOS included, source length counting its EOS, as `greedy_search`); at the limit
    every token but EOS is removed, so all live hypotheses end there with EOS and the model's
    log-probability of that EOS.

    Each step, per sentence (the fairseq scheme).  The live hypotheses' extensions by every
    token are ranked by total log-probability and the best `2 * beam` kept.  An extension by
    EOS that ranks among the first `beam` is finished and set aside with its score; the first
    `beam` extensions by other tokens are the next live hypotheses.  A sentence is done when
    (a) it has at least W finished hypotheses and its best live hypothesis, scored at its
    current length, cannot beat the W-th best finished score, or (b) no live hypothesis is
    left (the length limit, or `allowed_tokens` leaving nothing else).  With alpha 0, W is
    `n_best` and rule (a) is exact: a continuation only lowers the log-probability, so no live
    hypothesis can enter the best `n_best`, and the result is that of the same search run to
    the length limit; waiting for `n_best` rather than `beam` saves the steps that could only
    change hypotheses nobody asked for.  With alpha > 0, W is `beam` (as in fairseq) and rule
    (a) is the usual approximation: a longer continuation is divided by a larger penalty and
    might still score better. Stopping at the first finished hypothesis there would end the
    search before the penalty can favour a longer one: alpha above 1 would barely lengthen
    the output.  With `beam=1` the search makes `greedy_search`'s choices (an exact
    tie between two tokens aside): EOS ends it exactly when EOS is the most probable token.
    A done sentence leaves the batch: its rows are no longer decoded.

    `allowed_tokens` (bool over the target vocabulary; EOS must be allowed) gives every False
    id a log-probability of -inf at every step, as PAD, BOS and the ids in `never` always get.
    `start` gives each sentence's first decoder token in place of BOS (see `greedy_search`).  Fewer than
    `n_best` hypotheses come back only when the search space itself is smaller (a tiny length
    limit or allowed set).

    The encoder output is not repeated per beam: the cross-attention keys and values are
    computed once per sentence and shared by its `beam` decoder rows.
    """
    if beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    if not 1 <= n_best <= beam:
        raise ValueError(f"n_best must be between 1 and the beam size {beam}, got {n_best}")
    device = src_ids.device
    vocab = model.tgt_vocab_size
    bias = token_bias(allowed_tokens, vocab, device)
    blocked = NEVER_GENERATED + list(never)
    batch = src_ids.shape[0]
    src_mask = model.source_mask(src_ids, PAD_ID)
    memory = encode_by_length(model, src_ids, src_mask)  # one row per sentence, shared by its beams
    limits = max_output_lengths(src_ids, max_len_a, max_len_b, model.cfg.max_positions)
    max_steps = int(limits.max())

    # Decoder rows: `k` per sentence, sentence-major; k is 1 at the first step (every beam
    # would be the same BOS) and `beam` once the first step has given that many tokens.
    cache = model.new_cache()
    active = torch.arange(batch, device=device)  # original index of each sentence still searched
    beam_lp = torch.zeros((batch, 1), device=device)  # (sentences, k): live log-probabilities
    history = torch.empty((batch, 0), dtype=torch.long, device=device)
    last = first_tokens(start, batch, device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    # Per sentence, the `wait_for` best finished scores (-inf where fewer), for the stopping rule.
    # With alpha 0 the first n_best finished are final (see above); with alpha > 0 a later, longer
    # hypothesis may still win, so wait for `beam` of them (fairseq), or alpha could not lengthen.
    wait_for = n_best if alpha == 0 else beam
    best_finished = torch.full((batch, wait_for), float("-inf"), device=device)
    for step in range(max_steps):
        n, k = beam_lp.shape
        logits = model.decode(last, memory, src_mask, cache, offset=step)[:, -1]
        top_lp, top_beam, ends, live_lp, live_beam, live_token = extensions(
            logits, beam_lp, step + 1 >= limits, beam, blocked, bias
        )

        penalty = length_penalty(step + 1, alpha)
        ending = ends.nonzero()
        if ending.numel():
            sentence, column = ending[:, 0], ending[:, 1]
            log_probs = top_lp[sentence, column]
            tokens = history.index_select(0, sentence * k + top_beam[sentence, column]).tolist()
            for owner, ids, log_prob in zip(active[sentence].tolist(), tokens, log_probs.tolist()):
                finished[owner].append(Hypothesis(ids, log_prob / penalty, log_prob))
            new_scores = torch.where(ends, top_lp / penalty, float("-inf"))
            best_finished = (
                torch.cat([best_finished, new_scores], dim=1).topk(wait_for, dim=1).values
            )

        # Done: no live hypothesis, or `wait_for` finished ones that the best live cannot beat.
        best_live = live_lp[:, 0]
        done = (best_live == float("-inf")) | (best_live / penalty <= best_finished[:, -1])
        going = (~done).nonzero()[:, 0]
        if going.numel() == 0:
            break
        rows = ((going * k)[:, None] + live_beam[going]).view(-1)
        if going.numel() < n:  # drop the done sentences: their rows, encoder output and cache
            select_rows(cache, rows, going)
            memory, src_mask = memory.index_select(0, going), src_mask.index_select(0, going)
            active, limits, best_finished = active[going], limits[going], best_finished[going]
            live_lp, live_token = live_lp[going], live_token[going]
        else:
            select_rows(cache, rows, None)
        last = live_token.view(-1, 1)
        history = torch.cat([history.index_select(0, rows), last], dim=1)
        beam_lp = live_lp

    results = []
    for hypotheses in finished:
        hypotheses.sort(key=lambda h: h.score, reverse=True)
        if not hypotheses:  # only if the model gives EOS a log-probability of -inf
            hypotheses = [Hypothesis([], float("-inf"), float("-inf"))]
        results.append(hypotheses[:n_best])
    return results


def next_tokens(
    logits: Tensor, blocked: Sequence[int], bias: Tensor | None, at_limit: Tensor
) -> Tensor:
    """One greedy step's choice for each row (see `greedy_search`): the best token of `logits`
    ((rows, vocab) at this step; changed in place) once the `blocked` ids and the `bias` of
    `allowed_tokens` are applied; EOS for the rows `at_limit` (bool, (rows,))."""
    logits[:, blocked] = float("-inf")
    token = best_tokens(logits if bias is None else logits.float() + bias)
    return token.masked_fill(at_limit, EOS_ID)


def extensions(
    logits: Tensor,
    beam_lp: Tensor,
    at_limit: Tensor,
    beam: int,
    blocked: Sequence[int],
    bias: Tensor | None,
) -> tuple[Tensor, ...]:
    """One beam-search step's choice for each sentence (see `beam_search`). Of the extensions of
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
    lprobs[:, blocked] = float("-inf")
    if bias is not None:
        lprobs.add_(bias)
    lprobs = lprobs.view(n, k, vocab)
    limited = at_limit.nonzero()[:, 0]
    if limited.numel():  # only EOS may follow
        eos = lprobs[limited, :, EOS_ID]
        lprobs[limited] = float("-inf")
        lprobs[limited, :, EOS_ID] = eos
    candidates = lprobs.add_(beam_lp[:, :, None]).view(n, k * vocab)
    top_lp, top_index = best_candidates(candidates, width)
    top_beam, top_token = top_index // vocab, top_index % vocab
    is_eos = top_token == EOS_ID
    ends = is_eos & (rank < beam) & torch.isfinite(top_lp)
    # The first `beam` non-EOS extensions in rank order (at most k <= `beam` are EOS, one
    # per live hypothesis, so 2 * beam candidates hold enough where the vocabulary does).
    keep = (is_eos.long() * width + rank).argsort(dim=1)[:, : min(beam, width)]
    live_lp = top_lp.gather(1, keep).masked_fill(is_eos.gather(1, keep), float("-inf"))
    return top_lp, top_beam, ends, live_lp, top_beam.gather(1, keep), top_token.gather(1, keep)


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
    body = scores[:, :grouped].view(
        rows, per_group, TOPK_GROUPS
    )  # (row, j, group): score j * groups + group
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


def strip_special(ids: list[int]) -> list[int]:
    """Tokens before the first EOS."""
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids
