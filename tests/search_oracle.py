"""The references searches are checked against. The whole-batch greedy and beam searches, kept
as oracles: written apart from the product's joinable search (translate/decode/search.py),
which must give every sentence what these give it; they read the model through the same
incremental-decoding interface. Slower references still: scores re-read by the training forward
pass, and greedy search re-reading the whole prefix every step. And the tiny random models and
sources they are all run on.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor

from translate.decode.cache import SearchCache
from translate.decode.settings import SentinelIds
from translate.decode.steps import Hypothesis
from translate.model.transformer import ModelConfig, Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID

# --- the oracles' own step maths, written apart from the product's (translate/decode/steps.py) ---
NEVER_WRITTEN = [PAD_ID, BOS_ID]  # the decoder is never asked for these


def allowed_bias(allowed_tokens: Tensor | None, vocab: int, device) -> Tensor | None:
    """0 where `allowed_tokens` allows an id, -inf where it does not; None without it."""
    if allowed_tokens is None:
        return None
    bias = torch.zeros(vocab, device=device)
    bias[~allowed_tokens.to(device)] = float("-inf")
    return bias


def output_limits(src_ids: Tensor, max_len_a: float, max_len_b: int, positions: int) -> Tensor:
    """Per sentence: `a * source length + b` output tokens at most (EOS included), 1 to
    `positions`."""
    lengths = (src_ids != PAD_ID).sum(dim=1).tolist()
    limits = [min(max(int(length * max_len_a + max_len_b), 1), positions) for length in lengths]
    return torch.tensor(limits, device=src_ids.device)


def gnmt_penalty(length: int, alpha: float) -> float:
    """GNMT's length penalty of `length` output tokens (EOS included)."""
    return ((5.0 + length) / 6.0) ** alpha


def most_probable(
    logits: Tensor, blocked: list[int], bias: Tensor | None, at_limit: Tensor
) -> Tensor:
    """Greedy search's token of each row: the first best allowed score; EOS at the limit."""
    scores = logits.float().clone()
    scores[:, blocked] = float("-inf")
    if bias is not None:
        scores = scores + bias
    return scores.argmax(dim=1).masked_fill(at_limit, EOS_ID)


def beam_candidates(
    logits: Tensor,
    beam_lp: Tensor,
    at_limit: Tensor,
    beam: int,
    blocked: list[int],
    bias: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """A beam step of each sentence (fairseq's scheme): the best `2 * beam` extensions of its
    `k` live hypotheses by total log-probability (`top_lp`, `top_beam`); those by EOS among the
    first `beam` end (`ends`); the first `beam` others live on (`live_lp`, `live_beam`,
    `live_token`; -inf where too few). At the limit only EOS may extend."""
    n, k = beam_lp.shape
    vocab = logits.shape[-1]
    lprobs = torch.log_softmax(logits.float(), dim=-1)
    lprobs[:, blocked] = float("-inf")
    if bias is not None:
        lprobs = lprobs + bias
    lprobs = lprobs.view(n, k, vocab).clone()
    eos = lprobs[:, :, EOS_ID].clone()
    lprobs[at_limit] = float("-inf")
    lprobs[:, :, EOS_ID] = torch.where(at_limit[:, None], eos, lprobs[:, :, EOS_ID])
    totals = (lprobs + beam_lp[:, :, None]).view(n, k * vocab)
    width = min(2 * beam, k * vocab)
    top_lp, index = totals.topk(width, dim=1)
    top_beam, top_token = index // vocab, index % vocab
    ends = torch.zeros_like(top_token, dtype=torch.bool)
    live_lp = torch.full((n, beam), float("-inf"), device=logits.device)
    live_beam = torch.zeros((n, beam), dtype=torch.long, device=logits.device)
    live_token = torch.full((n, beam), EOS_ID, dtype=torch.long, device=logits.device)
    for sentence in range(n):
        living = 0
        for rank in range(width):
            lp, token = float(top_lp[sentence, rank]), int(top_token[sentence, rank])
            if token == EOS_ID:
                ends[sentence, rank] = rank < beam and lp != float("-inf")
            elif living < beam:
                live_lp[sentence, living] = lp
                live_beam[sentence, living] = top_beam[sentence, rank]
                live_token[sentence, living] = token
                living += 1
    return top_lp, top_beam, ends, live_lp, live_beam, live_token


def first_tokens(start: Tensor | None, batch: int, device: torch.device) -> Tensor:
    """(batch, 1) first decoder tokens: `start` where given, else BOS."""
    if start is None:
        return torch.full((batch, 1), BOS_ID, dtype=torch.long, device=device)
    return start.reshape(batch, 1).to(device=device, dtype=torch.long)


class OwedSets:
    """The sentinel rule (each sentinel of the source written exactly once, none other) kept as
    a Python set per row and applied as a per-row bias, written apart from the product's
    tensors (`search.SentinelRule`)."""

    def __init__(self, ids: SentinelIds | None, src_ids: Tensor) -> None:
        self.ids = ids
        self.slot_of = {} if ids is None else dict(zip(ids.target, ids.target_slot))
        self.rows: list[set[int]] = [
            set()
            if ids is None
            else {k for k, sentinel in enumerate(ids.source) if sentinel in row}
            for row in src_ids.tolist()
        ]

    def bias(self, bias: Tensor | None, vocab: int, left: list[int], device) -> Tensor | None:
        """`bias` (the restriction's) with the rule added, at -inf: a row's sentinels it does not
        owe; EOS while it owes one, short of its length limit (`left`: the tokens it may still
        write before only EOS is left); every token but its owed sentinels once those need all
        the tokens it has left."""
        if self.ids is None:
            return bias
        rows = torch.zeros((len(self.rows), vocab), device=device)
        for row, owed in enumerate(self.rows):
            if owed and len(owed) >= left[row] > 0:
                rows[row] = float("-inf")
                for target, slot in self.slot_of.items():
                    if slot in owed:
                        rows[row, target] = 0.0
            for target, slot in self.slot_of.items():
                if slot not in owed:
                    rows[row, target] = float("-inf")
            if owed and left[row] > 0:
                rows[row, EOS_ID] = float("-inf")
        return rows if bias is None else rows + bias

    def advance(self, rows: list[int], tokens: list[int]) -> None:
        """Row i of the next step extends row `rows[i]` by `tokens[i]`."""
        self.rows = [self.rows[r] - {self.slot_of.get(t)} for r, t in zip(rows, tokens)]


def new_cache(model, memory: Tensor, src_mask: Tensor, rows: int):
    """The search's cache of one batch (a test double of the model may bring its own)."""
    if hasattr(model, "search_cache"):
        return model.search_cache(memory, src_mask, rows)
    return SearchCache.for_batch(model, memory, src_mask, rows)


@torch.inference_mode()
def greedy_search(
    model: Transformer,
    src_ids: Tensor,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    allowed_tokens: Tensor | None = None,
    start: Tensor | None = None,
    never: Sequence[int] = (),
    sentinels: SentinelIds | None = None,
) -> list[list[int]]:
    """Most probable next token at each step, for a batch; returns ids without BOS/EOS.

    `allowed_tokens` (bool over the target vocabulary, EOS included) removes every False id
    from the choice at every step; PAD and BOS are never chosen, nor the ids in `never` (a
    many-to-many model's language tags). `start` gives each row's first decoder token (a
    target-language tag) in place of BOS.  Finished sentences leave the batch once they are a
    tenth of it (dropping rows copies the cache, which costs more than decoding a few rows
    longer; what a finished row produces after its EOS is cut off). `sentinels`: each
    sentinel of a source is written exactly once (`OwedSets`).
    """
    device = src_ids.device
    bias = allowed_bias(allowed_tokens, model.tgt_vocab_size, device)
    blocked = NEVER_WRITTEN + list(never)
    src_mask = model.source_mask(src_ids, PAD_ID)
    memory = model.encode(src_ids, src_mask)
    limits = output_limits(src_ids, max_len_a, max_len_b, model.cfg.max_positions)
    batch = src_ids.shape[0]
    cache = new_cache(model, memory, src_mask, batch)
    last = first_tokens(start, batch, device)
    active = torch.arange(batch, device=device)  # original index of each row still decoding
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # rows that produced EOS
    output = torch.full((batch, int(limits.max())), EOS_ID, dtype=torch.long, device=device)
    owed = OwedSets(sentinels, src_ids)
    for step in range(int(limits.max())):
        logits = model.decode(last, memory, src_mask, cache, offset=step)[:, -1]
        at_limit = step + 1 >= limits
        row_bias = owed.bias(bias, logits.shape[-1], (limits - step - 1).tolist(), device)
        token = most_probable(logits, blocked, row_bias, at_limit)
        owed.advance(list(range(len(owed.rows))), token.tolist())
        output[active, step] = token
        done |= token == EOS_ID
        finished = int(done.sum())
        if finished == done.numel():
            break
        if finished * 10 >= done.numel():
            keep = (~done).nonzero()[:, 0]
            cache.reorder(keep, keep)
            memory, src_mask = memory.index_select(0, keep), src_mask.index_select(0, keep)
            active, limits, token, done = active[keep], limits[keep], token[keep], done[keep]
            owed.advance(keep.tolist(), [-1] * keep.numel())
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
    sentinels: SentinelIds | None = None,
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
    computed once per sentence and shared by its `beam` decoder rows. `sentinels`: each
    sentinel of a source is written exactly once (`OwedSets`).
    """
    if beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    if not 1 <= n_best <= beam:
        raise ValueError(f"n_best must be between 1 and the beam size {beam}, got {n_best}")
    device = src_ids.device
    vocab = model.tgt_vocab_size
    bias = allowed_bias(allowed_tokens, vocab, device)
    blocked = NEVER_WRITTEN + list(never)
    batch = src_ids.shape[0]
    src_mask = model.source_mask(src_ids, PAD_ID)
    memory = model.encode(src_ids, src_mask)  # one row per sentence, shared by its beams
    limits = output_limits(src_ids, max_len_a, max_len_b, model.cfg.max_positions)
    max_steps = int(limits.max())

    # Decoder rows: `k` per sentence, sentence-major; k is 1 at the first step (every beam
    # would be the same BOS) and `beam` once the first step has given that many tokens.
    cache = new_cache(model, memory, src_mask, batch)
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
    owed = OwedSets(sentinels, src_ids)
    for step in range(max_steps):
        n, k = beam_lp.shape
        logits = model.decode(last, memory, src_mask, cache, offset=step)[:, -1]
        at_limit = step + 1 >= limits
        left = (limits - step - 1).repeat_interleave(k).tolist()
        row_bias = owed.bias(bias, vocab, left, device)
        top_lp, top_beam, ends, live_lp, live_beam, live_token = beam_candidates(
            logits, beam_lp, at_limit, beam, blocked, row_bias
        )

        penalty = gnmt_penalty(step + 1, alpha)
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
            cache.reorder(rows, going)
            memory, src_mask = memory.index_select(0, going), src_mask.index_select(0, going)
            active, limits, best_finished = active[going], limits[going], best_finished[going]
            live_lp, live_token = live_lp[going], live_token[going]
        else:
            cache.reorder(rows, None)
        last = live_token.view(-1, 1)
        owed.advance(rows.tolist(), last[:, 0].tolist())
        history = torch.cat([history.index_select(0, rows), last], dim=1)
        beam_lp = live_lp

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


# --- the references searches are checked against ---------------------------------------------
def strip_padding(src: Tensor) -> Tensor:
    """`src` without the columns that are padding in every row."""
    return src[:, : int((src != PAD_ID).sum(dim=1).max())]


@torch.no_grad()
def full_prefix_log_probs(
    model: Transformer, src_row: Tensor, hypotheses: list[list[int]], start: int = BOS_ID
) -> list[float]:
    """Sum of log p(token | source, prefix) over tokens + EOS, each hypothesis re-read in full
    by the training forward pass (no cache, no incremental decoding), in float64; the decoder
    starts from `start` (BOS, or a target-language tag)."""
    model = copy.deepcopy(model).double()
    targets = [tokens + [EOS_ID] for tokens in hypotheses]
    longest = max(map(len, targets))
    tgt_in = torch.full((len(targets), longest), PAD_ID)
    tgt_out = torch.full((len(targets), longest), PAD_ID)
    for row, target in enumerate(targets):
        tgt_in[row, : len(target)] = torch.tensor([start] + target[:-1])
        tgt_out[row, : len(target)] = torch.tensor(target)
    real = torch.arange(longest)[None, :] < torch.tensor([len(t) for t in targets])[:, None]
    src = strip_padding(src_row[None]).expand(len(targets), -1)
    logits = model(src, tgt_in, PAD_ID)
    token_lp = torch.log_softmax(logits, dim=-1).gather(2, tgt_out[:, :, None])[:, :, 0]
    return token_lp.masked_fill(~real, 0.0).sum(dim=1).tolist()


def uncached_greedy(
    model: Transformer, src: Tensor, max_len_a: float, max_len_b: int
) -> list[list[int]]:
    """Greedy decoding re-reading the whole prefix each step, one sentence at a time."""
    outputs = []
    for row in src:
        row = strip_padding(row[None])
        limit = min(
            int(int((row != PAD_ID).sum()) * max_len_a + max_len_b), model.cfg.max_positions
        )
        tokens = []
        while True:
            logits = model(row, torch.tensor([[BOS_ID] + tokens]), PAD_ID)[0, -1]
            candidates = [t for t in range(len(logits)) if t not in (PAD_ID, BOS_ID)]
            token = (
                EOS_ID
                if len(tokens) + 1 >= limit
                else max(candidates, key=lambda t: float(logits[t]))
            )
            if token == EOS_ID:
                break
            tokens.append(token)
        outputs.append(tokens)
    return outputs


# --- random models and inputs for them --------------------------------------------------------
TINY_VOCAB = 12


def tiny_model(seed: int, eos_bias: float = 1.0) -> Transformer:
    """A random model whose outputs vary: a constant hidden unit feeds EOS only, so EOS has a
    tunable bias, and the output projection is wide enough for peaked distributions."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        d_model=16,
        heads=2,
        encoder_layers=1,
        decoder_layers=2,
        ffn_dim=32,
        dropout=0.0,
        tie_embeddings="none",
        max_positions=64,
    )
    model = Transformer(cfg, TINY_VOCAB, TINY_VOCAB, shared_vocab=True)
    with torch.no_grad():
        model.output.weight.normal_(0.0, 0.5)
        last_norm = model.decoder_layers[-1].ffn_block.norm
        last_norm.weight[0], last_norm.bias[0] = 0.0, 1.0
        model.output.weight[:, 0] = 0.0
        model.output.weight[EOS_ID, 0] = eos_bias
    return model.eval()


def random_sources(seed: int, batch: int, max_len: int = 7) -> Tensor:
    """PAD-padded sources of different lengths, each ending in EOS."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len, (batch,), generator=generator).tolist()
    src = torch.full((batch, max(lengths) + 1), PAD_ID)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, TINY_VOCAB, (length,), generator=generator)
        src[row, length] = EOS_ID
    return src
