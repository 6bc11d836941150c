"""Greedy and beam search over the model's incremental-decoding interface.

Both encode the source once and decode one target position per step with a key/value cache
(`Transformer.decode` with `new_cache()`); the encoder's keys and values are computed once,
by the first decoding step, and reused.  Scores are float32 log-probabilities even when the
model runs in bf16 or fp16 (the logits are cast before the log-softmax).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from translate.model import Transformer, reorder_cache
from translate.vocab import BOS_ID, EOS_ID, PAD_ID


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


def _check_allowed(allowed_tokens: Tensor | None, vocab_size: int, device: torch.device) -> Tensor | None:
    if allowed_tokens is None:
        return None
    if allowed_tokens.dtype != torch.bool or allowed_tokens.shape != (vocab_size,):
        raise ValueError(
            f"allowed_tokens must be a bool tensor of shape ({vocab_size},), got "
            f"{allowed_tokens.dtype} {tuple(allowed_tokens.shape)}"
        )
    if not bool(allowed_tokens[EOS_ID]):
        raise ValueError("allowed_tokens must allow EOS, or no hypothesis could ever end")
    return allowed_tokens.to(device)


@torch.no_grad()
def greedy_search(
    model: Transformer,
    src_ids: Tensor,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    allowed_tokens: Tensor | None = None,
) -> list[list[int]]:
    """Most probable next token at each step, for a batch; returns ids without BOS/EOS.

    `allowed_tokens` (bool over the target vocabulary, EOS included) removes every False id
    from the choice at every step.
    """
    allowed = _check_allowed(allowed_tokens, model.tgt_vocab_size, src_ids.device)
    src_mask = model.source_mask(src_ids, PAD_ID)
    memory = model.encode(src_ids, src_mask)
    max_lengths = max_output_lengths(src_ids, max_len_a, max_len_b, model.cfg.max_positions)
    batch = src_ids.shape[0]
    cache = model.new_cache()
    last = torch.full((batch, 1), BOS_ID, dtype=torch.long, device=src_ids.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src_ids.device)
    steps = []
    for step in range(int(max_lengths.max())):
        logits = model.decode(last, memory, src_mask, cache, offset=step)[:, -1]
        if allowed is not None:
            logits = logits.float().masked_fill(~allowed, float("-inf"))
        token = logits.argmax(dim=-1)
        token = torch.where(step + 1 >= max_lengths, torch.full_like(token, EOS_ID), token)
        token = torch.where(finished, torch.full_like(token, PAD_ID), token)
        steps.append(token)
        finished |= token == EOS_ID
        if finished.all():
            break
        last = token[:, None]
    return [strip_special(row) for row in torch.stack(steps, dim=1).tolist()]


@torch.no_grad()
def beam_search(
    model: Transformer,
    src_ids: Tensor,
    beam: int = 5,
    alpha: float = 1.0,
    n_best: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    allowed_tokens: Tensor | None = None,
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
    (a) it has at least `beam` finished hypotheses and its best live hypothesis, scored at its
    current length, cannot beat the `beam`-th best finished score, or (b) no live hypothesis
    is left (the length limit, or `allowed_tokens` leaving nothing else).  With alpha 0 rule
    (a) is exact: a continuation only lowers the log-probability, so no live hypothesis can
    enter the best `beam`.  With alpha > 0 it is the usual approximation (Hugging Face's
    default): a longer continuation is divided by a larger penalty and might in principle
    still score better.  With `beam=1` the search makes `greedy_search`'s choices (an exact
    tie between two tokens aside): EOS ends it exactly when EOS is the most probable token.

    `allowed_tokens` (bool over the target vocabulary; EOS must be allowed) gives every False
    id a log-probability of -inf at every step.  Fewer than `n_best` hypotheses come back only
    when the search space itself is smaller (a tiny length limit or allowed set).
    """
    if beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    if not 1 <= n_best <= beam:
        raise ValueError(f"n_best must be between 1 and the beam size {beam}, got {n_best}")
    device = src_ids.device
    vocab = model.tgt_vocab_size
    allowed = _check_allowed(allowed_tokens, vocab, device)
    batch = src_ids.shape[0]
    src_mask = model.source_mask(src_ids, PAD_ID)
    memory = model.encode(src_ids, src_mask)
    max_lengths = max_output_lengths(src_ids, max_len_a, max_len_b, model.cfg.max_positions)

    # One row per (sentence, beam), sentence-major; the encoder output is repeated before the
    # first decoding step, so the cross-attention cache is built with beam rows per sentence.
    memory = memory.repeat_interleave(beam, dim=0)
    src_mask = src_mask.repeat_interleave(beam, dim=0)
    cache = model.new_cache()
    active = torch.arange(batch, device=device)  # original index of each sentence still searched
    limits = max_lengths.clone()
    beam_lp = torch.full((batch, beam), float("-inf"), device=device)
    beam_lp[:, 0] = 0.0  # all beams start as BOS: expand only the first, or the same one k times
    history = torch.empty((batch * beam, 0), dtype=torch.long, device=device)
    last = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    rank = torch.arange(2 * beam, device=device)
    width = min(2 * beam, beam * vocab)

    for step in range(int(max_lengths.max())):
        n = active.shape[0]
        logits = model.decode(last, memory, src_mask, cache, offset=step)[:, -1]
        lprobs = torch.log_softmax(logits.float(), dim=-1).view(n, beam, vocab)
        if allowed is not None:
            lprobs = lprobs.masked_fill(~allowed, float("-inf"))
        at_limit = step + 1 >= limits
        if bool(at_limit.any()):
            only_eos = torch.full_like(lprobs[0, 0], float("-inf"))
            only_eos[EOS_ID] = 0.0
            lprobs = torch.where(at_limit[:, None, None], lprobs + only_eos, lprobs)
        candidates = (beam_lp[:, :, None] + lprobs).view(n, beam * vocab)
        top_lp, top_index = candidates.topk(width, dim=1)
        top_beam, top_token = top_index // vocab, top_index % vocab
        is_eos = top_token == EOS_ID
        ends = is_eos & (rank[:width] < beam) & torch.isfinite(top_lp)
        # The first `beam` non-EOS extensions in rank order (at most `beam` are EOS, one per
        # live hypothesis, so 2 * beam candidates always hold enough).
        keep = (is_eos.long() * width + rank[:width]).argsort(dim=1)[:, :beam]
        live_lp = top_lp.gather(1, keep).masked_fill(is_eos.gather(1, keep), float("-inf"))
        live_beam, live_token = top_beam.gather(1, keep), top_token.gather(1, keep)

        if bool(ends.any()):
            sentence = ends.nonzero()[:, 0]
            tokens = history.index_select(0, sentence * beam + top_beam[ends]).tolist()
            penalty = length_penalty(step + 1, alpha)
            for owner, ids, log_prob in zip(active[sentence].tolist(), tokens, top_lp[ends].tolist()):
                finished[owner].append(Hypothesis(ids, log_prob / penalty, log_prob))

        # Done: no live hypothesis, or `beam` finished ones that the best live cannot beat.
        best_live = live_lp[:, 0].tolist()
        penalty = length_penalty(step + 1, alpha)
        done = []
        for s, owner in enumerate(active.tolist()):
            if best_live[s] == float("-inf"):
                done.append(True)
                continue
            scores = sorted((h.score for h in finished[owner]), reverse=True)
            done.append(len(scores) >= beam and best_live[s] / penalty <= scores[beam - 1])
        done_mask = torch.tensor(done, device=device)

        # Reorder to the new live hypotheses and drop the rows of finished sentences.
        order = (torch.arange(n, device=device)[:, None] * beam + live_beam)[~done_mask].view(-1)
        if order.numel() == 0:
            break
        reorder_cache(cache, order)
        if any(done):  # rows of one sentence share their encoder output: select whole sentences
            kept = torch.arange(n, device=device)[~done_mask][:, None] * beam + rank[:beam]
            memory = memory.index_select(0, kept.view(-1))
            src_mask = src_mask.index_select(0, kept.view(-1))
        next_tokens = live_token[~done_mask].view(-1, 1)
        history = torch.cat([history.index_select(0, order), next_tokens], dim=1)
        last = next_tokens
        beam_lp = live_lp[~done_mask]
        active, limits = active[~done_mask], limits[~done_mask]

    results = []
    for hypotheses in finished:
        hypotheses.sort(key=lambda h: h.score, reverse=True)
        if not hypotheses:  # only if the model gives EOS a log-probability of -inf
            hypotheses = [Hypothesis([], float("-inf"), float("-inf"))]
        results.append(hypotheses[:n_best])
    return results


def strip_special(ids: list[int]) -> list[int]:
    """Tokens before the first EOS."""
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids
