"""The product's search: greedy (beam 1) and beam search, which sentences join and leave step
by step (continuous batching). translate-cli, translate-eval, tuning, serving, batch prediction
and validation BLEU all search here, through one `Search(model, plan)`.

A search that takes a batch and returns when its last sentence is done runs on for its longest
sentence while fewer and fewer rows decode, and the next batch waits (tests/search_oracle.py
keeps two such searches, written apart, as the oracles every sentence here must match). Here a
sentence joins between two steps (`add`) and leaves at the step it is done (`step`), so the rows
stay many: translate-serve's searches take requests as they come, and translate-cli lets each
batch join while the last sentences of the one before finish (`search_joined`).

Each sentence decodes as it does alone (the same steps, scores and stopping rule): its rows keep
their own step count, hence their own positions and length penalty. The sentences that joined
at one step form a cohort with attention caches of their own (`translate.decode.cache`), as
wide as its own steps and its own longest source; the products of a step run on every row at
once. Beyond `MAX_COHORTS` the two cohorts nearest in age merge, the younger's cached steps
aligned at the end and masked before its own. A joining sentence gets `beam` rows at once, all
but the first with a log-probability of -inf, which picks what a search started from a single
row picks. Every sentence is answered with hypotheses (tokens, score, log-probability), best
first, greedy search's one too.

Only the beam size and the n-best size are the search's (`SearchPlan.lane`): each sentence joins
with a plan of its own for what a step does to its rows alone, its length penalty, length limit
and allowed tokens, and its own first token (a target-language tag). translate-serve's requests
for many target languages, lengths and restrictions share one search.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from translate.decode.cache import KVBlock, SearchCache
from translate.decode.encoding import encode_by_length
from translate.decode.settings import Budget, SearchPlan
from translate.decode.steps import (
    NEVER_GENERATED,
    Extensions,
    Hypothesis,
    OwedSentinels,
    extensions,
    greedy_extensions,
    length_penalties,
    length_penalty,
    output_limits,
    sentinel_rule,
    token_bias,
)
from translate.model.padding import pad
from translate.model.transformer import Transformer
from translate.text.vocab import BOS_ID, PAD_ID

# Attention caches kept apart, one per cohort of sentences that joined at one step, so that each
# is as wide as its own steps; each costs its own attention products a step, so beyond this many
# the two nearest in age merge (8 to 16 alike at 32 clients; 4 lose a fifth at 128: docs/serving.md).
MAX_COHORTS = 12

# Greedy search's answered rows leave once they are one in this many of the rows (leaving copies
# the encoder's keys and values); beam search reorders its rows every step, so its answered rows
# leave at once.
GREEDY_LEAVE_ONE_IN = 10

# Length penalty tables kept, one per alpha; a search over sentences of several alphas computes
# each sentence's penalty a step.
PENALTY_TABLES = 8


class Search:
    """A running greedy or beam search (`plan.beam` 1 or more) over sentences that join (`add`)
    and leave (`step`, `drop`) at any step.

    A hypothesis's `log_prob` sums the float32 log-probabilities of its tokens, EOS included; it
    is ranked by `log_prob / ((5 + n) / 6) ** alpha` (GNMT; n counts EOS, alpha 0 ranks by the
    raw sum). Each beam step keeps a sentence's best `2 * beam` extensions by log-probability:
    those by EOS among the first `beam` finish, the first `beam` others live on (fairseq's
    scheme); a greedy step takes the most probable token. A sentence is done once it has W
    finished and its best live hypothesis, scored at its length, cannot beat the W-th (W is
    `n_best` at alpha 0, where the rule is exact, else `beam`, the usual approximation), or once
    nothing lives; greedy search's sentence is done at its EOS. At the length limit
    (`max_len_a * source length + max_len_b` tokens, EOS included) only EOS may follow.

    Admission: with a `budget`, `room` says which further sentences fit beside those held.
    """

    def __init__(self, model: Transformer, plan: SearchPlan, budget: Budget | None = None) -> None:
        self.model, self.plan, self.budget = model, plan, budget
        # Cache bytes of one position of one row: keys and values of every decoder layer.
        cfg = model.cfg
        self.position_bytes = (
            2 * cfg.decoder_layers * cfg.d_model * model.src_embed.weight.element_size()
        )
        self.beam, self.n_best = plan.beam, plan.n_best
        self.device = next(model.parameters()).device
        self.blocked = NEVER_GENERATED + list(plan.never)
        self.rule = sentinel_rule(plan.sentinels, self.device)
        token_bias(plan.allowed_tokens, model.tgt_vocab_size, self.device)  # checked now
        self.penalty_tables: dict[float, Tensor] = {}  # by alpha (`_penalties`)
        self._reset()

    def _reset(self) -> None:
        self.sentence_ids: list[Hashable] = []  # per sentence, what the caller knows it by
        self.steps: list[int] = []  # per sentence, the tokens each of its rows has
        self.cohorts: list[int] = []  # sentences per self-attention block, oldest first
        # Per decoder layer, one self- and one cross-attention block per cohort.
        self.cache = SearchCache.empty(self.model)
        self.limits = torch.empty(0, dtype=torch.long, device=self.device)
        # Per sentence, its plan's: length penalty, the column of `best_finished` its stopping
        # rule reads (W - 1), and its row of `biases` (-1: none).
        self.biases = BiasTable(self.model.tgt_vocab_size, self.device)
        self.alphas: list[float] = []
        self.wait_columns = torch.empty(0, dtype=torch.long, device=self.device)
        self.bias_rows: list[int] = []
        # A step's bias (`BiasTable.per_row`), made again when sentences join or leave.
        self.bias: Tensor | None = None
        self.bias_stale = True
        self.last = torch.empty((0, 1), dtype=torch.long, device=self.device)
        # Per row, the sentinels its hypothesis still owes (`steps.SentinelRule`; only with one).
        sentinels = 0 if self.rule is None else self.rule.sentinels
        self.remaining = torch.zeros((0, sentinels), dtype=torch.bool, device=self.device)
        self.finished: list[list[Hypothesis]] = []  # per sentence, its finished hypotheses
        self.beam_lp = torch.empty((0, self.beam), device=self.device)
        # Per sentence, the scores of its best finished hypotheses so far, best first.
        self.best_finished = torch.empty((0, self.beam), device=self.device)
        # Per row, its tokens so far, aligned at the end (the backpointers followed as it goes).
        self.history = torch.empty((0, 0), dtype=torch.long, device=self.device)
        # Per sentence, answered while its rows are still searched (greedy search: until they leave).
        self.answered: list[bool] = []
        self.answered_count = 0
        # Per sentence, its `Cost`; and what the sentences not yet answered hold together.
        self.costs: list[Cost] = []
        self.held = Cost(0, 0)

    def __len__(self) -> int:
        """Sentences being searched (not yet answered)."""
        return len(self.sentence_ids) - self.answered_count

    def held_ids(self) -> list[Hashable]:
        """The sentence_ids of the sentences not yet answered."""
        return [s for s, answered in zip(self.sentence_ids, self.answered) if not answered]

    def cost(self, source_tokens: int, plan: SearchPlan | None = None) -> Cost:
        """What a sentence of `source_tokens` (EOS and tags included) holds once it joins under
        `plan` (the search's by default): its source tokens, and the attention cache its rows
        take at its length limit (`beam` rows of self-attention steps, one row of the encoder's)."""
        [limit] = self._limits([source_tokens], [plan or self.plan]).tolist()
        return self._cost(source_tokens, limit)

    def _cost(self, source_tokens: int, limit: int) -> Cost:
        return Cost(source_tokens, (self.beam * limit + source_tokens) * self.position_bytes)

    def room(self) -> Room:
        """The room the budget leaves beside the sentences held (all of it, unbounded, without
        a budget)."""
        return Room.left(self.budget, self.held, not len(self))

    @torch.inference_mode()
    def add(
        self,
        sentence_ids: Sequence[Hashable],
        sources: Sequence[Sequence[int]],
        starts: Sequence[int | None] | None = None,
        plans: Sequence[SearchPlan] | None = None,
    ) -> None:
        """Sentences that join the search before its next step: source ids (with EOS, and any
        language tag the model reads), each with an id `step` will return it with, an optional
        first decoder token (a target-language tag) in place of BOS and an optional plan of its
        own (by default the search's), whose lane must be the search's."""
        if not sources:
            return
        plans = self.plan.joining(plans, len(sources))
        count = self._add(sentence_ids, sources, starts, plans)
        rows = count * self.beam
        self.history = torch.cat(
            [self.history, self.history.new_full((rows, self.history.shape[1]), PAD_ID)]
        )
        joining = torch.full((count, self.beam), float("-inf"), device=self.device)
        joining[:, 0] = 0.0
        self.beam_lp = torch.cat([self.beam_lp, joining])
        self.best_finished = torch.cat(
            [self.best_finished, torch.full((count, self.beam), float("-inf"), device=self.device)]
        )
        self.finished += [[] for _ in range(count)]
        self.answered += [False] * count

    @torch.inference_mode()
    def drop(self, keys: Collection[Hashable]) -> int:
        """The sentences not yet answered whose sentence_id is one of `keys` leave the search
        now, searched or joined since the last step: their rows, cache, hypotheses and history
        go, no later `step` decodes or returns them, and the others decode on as they do alone
        (the rows of those already answered go with them); how many left."""
        keys = set(keys)
        searched = [s for s, answered in enumerate(self.answered) if not answered]
        active = [s for s in searched if self.sentence_ids[s] not in keys]
        dropped = len(searched) - len(active)
        if not active:
            self._reset()
        elif dropped:
            index, rows = self._leave(active)
            self.held = sum(self.costs, Cost(0, 0))  # all of them searched now
            self.beam_lp = self.beam_lp.index_select(0, index)
            self.best_finished = self.best_finished.index_select(0, index)
            self.finished = [self.finished[s] for s in active]
            self.answered, self.answered_count = [False] * len(active), 0
            history = self.history.index_select(0, rows)
            self.history = history[:, history.shape[1] - max(self.steps) :]
        return dropped

    @torch.inference_mode()
    def step(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """One decoding step for every live sentence; the sentences done at it, with their
        sentence_ids and up to `n_best` hypotheses, best first."""
        if not len(self):
            return []
        beam, n = self.beam, len(self.sentence_ids)
        logits, steps = self._decode()
        at_limit = steps + 1 >= self.limits
        if self.bias_stale:  # sentences came or went
            self.bias, self.bias_stale = self.biases.per_row(self.bias_rows, beam), False
        bias = self.bias
        if beam == 1:
            chosen = greedy_extensions(
                logits, self.beam_lp, at_limit, self.blocked, bias, self._owed(steps)
            )
        else:
            chosen = extensions(
                logits, self.beam_lp, at_limit, beam, self.blocked, bias, self._owed(steps)
            )
        answered = self._finish(chosen, steps)
        if self.answered_count == n:
            self._reset()
            return answered
        # The rows that live on: each sentence's live hypotheses, in order; greedy search keeps
        # its answered rows in place until they are a share of the rows, or one would pass the
        # model's last position.
        last_position = steps + 1 >= self.model.cfg.max_positions
        rows = None
        if (
            beam > 1
            or self.answered_count * GREEDY_LEAVE_ONE_IN >= n
            or (self.answered_count and bool(last_position[self._answered_index()].any()))
        ):
            rows, chosen = self._live_rows(chosen)
        self.steps = [steps + 1 for steps in self.steps]
        self.last = chosen.live_token.reshape(-1, 1)
        if self.rule is not None:
            remaining = self.remaining if rows is None else self.remaining.index_select(0, rows)
            self.remaining = self.rule.written(remaining, self.last[:, 0])
        history = self.history if rows is None else self.history.index_select(0, rows)
        self.history = torch.cat([history, self.last], dim=1)
        self.history = self.history[:, -max(self.steps) :]  # columns no live row owns any more go
        self.beam_lp = chosen.live_lp
        return answered

    def _finish(self, chosen: Extensions, steps: Tensor) -> list[tuple[Hashable, list[Hypothesis]]]:
        """The hypotheses that end at this step kept, and the sentences done at it answered (and
        marked so: `answered`)."""
        beam, width = self.beam, self.history.shape[1]
        penalty = self._penalties(steps)[:, None]
        ends = chosen.ends
        if self.answered_count:
            ends = ends & ~self._answered_mask()[:, None]
        ending = ends.nonzero()
        if ending.numel():
            sentence, column = ending[:, 0], ending[:, 1]
            log_probs = chosen.top_lp[sentence, column]
            rows = self.history.index_select(
                0, sentence * beam + chosen.top_beam[sentence, column]
            ).tolist()
            for s, ids, log_prob in zip(sentence.tolist(), rows, log_probs.tolist()):
                tokens = ids[width - self.steps[s] :]
                self.finished[s].append(
                    Hypothesis(
                        tokens,
                        log_prob / length_penalty(self.steps[s] + 1, self.alphas[s]),
                        log_prob,
                    )
                )
            new_scores = torch.where(ends, chosen.top_lp / penalty, float("-inf"))
            self.best_finished = (
                torch.cat([self.best_finished, new_scores], dim=1).topk(beam, dim=1).values
            )
        best_live = chosen.live_lp[:, 0]
        waited_for = self.best_finished.gather(1, self.wait_columns[:, None])[:, 0]
        done = ((best_live == float("-inf")) | (best_live / penalty[:, 0] <= waited_for)).tolist()
        answered = []
        for s, is_done in enumerate(done):
            if not is_done or self.answered[s]:
                continue
            hypotheses = sorted(self.finished[s], key=lambda h: h.score, reverse=True)
            answered.append(
                (
                    self.sentence_ids[s],
                    hypotheses[: self.n_best] or [Hypothesis([], float("-inf"), float("-inf"))],
                )
            )
            self.answered[s] = True
            self.held = self.held - self.costs[s]
        self.answered_count += len(answered)
        return answered

    def _penalties(self, steps: Tensor) -> Tensor:
        """Per sentence, `length_penalty` of a hypothesis ending at this step under its alpha:
        read from a table where the sentences share one alpha (a few tables kept), else
        computed a sentence at a time."""
        alphas = set(self.alphas)
        if len(alphas) > 1:
            return torch.tensor(
                [length_penalty(n + 1, alpha) for n, alpha in zip(self.steps, self.alphas)],
                device=self.device,
            )
        alpha = alphas.pop()
        if alpha not in self.penalty_tables:
            if len(self.penalty_tables) >= PENALTY_TABLES:
                self.penalty_tables.clear()
            positions = self.model.cfg.max_positions
            self.penalty_tables[alpha] = length_penalties(alpha, positions, self.device)
        return self.penalty_tables[alpha][steps]

    def _answered_mask(self) -> Tensor:
        return torch.tensor(self.answered, dtype=torch.bool, device=self.device)

    def _answered_index(self) -> Tensor:
        return self._answered_mask().nonzero()[:, 0]

    def _live_rows(self, chosen: Extensions) -> tuple[Tensor, Extensions]:
        """The sentences not answered keep their live hypotheses' rows (reordered to them) in
        the caches; the others leave. Returns the decoder rows kept, and `chosen` of them."""
        beam = self.beam
        active_list = [s for s, answered in enumerate(self.answered) if not answered]
        active = torch.tensor(active_list, dtype=torch.long, device=self.device)
        rows = ((active * beam)[:, None] + chosen.live_beam[active]).view(-1)
        self._select_rows(rows, active_list)
        if len(active_list) < len(self.answered):
            self._keep(active_list)
            self.best_finished = self.best_finished.index_select(0, active)
            chosen = chosen._replace(
                live_lp=chosen.live_lp.index_select(0, active),
                live_token=chosen.live_token.index_select(0, active),
            )
            self.finished = [self.finished[s] for s in active_list]
            self.answered, self.answered_count = [False] * len(active_list), 0
        return rows, chosen

    def _owed(self, steps: Tensor) -> OwedSentinels | None:
        """The rows under the sentinel rule at this step (`steps`: each sentence's count)."""
        if self.rule is None:
            return None
        return self.rule.owed(self.remaining, self.limits, steps, self.beam)

    def _add(
        self,
        sentence_ids: Sequence[Hashable],
        sources: Sequence[Sequence[int]],
        starts: Sequence[int | None] | None,
        plans: Sequence[SearchPlan],
    ) -> int:
        """The sentences' encoder keys and values in a cohort (a new one, or the one that joined
        since the last step), their first tokens, limits and plans; returns how many joined."""
        model, beam, device = self.model, self.beam, self.device
        src_ids = pad(sources).to(device)
        src_mask = model.source_mask(src_ids, PAD_ID)
        cross = model.cross_keys_values(encode_by_length(model, src_ids, src_mask))
        count = len(sources)
        # Joined since the last step too.
        if self.cohorts and self.cache.layers[0].steps[-1].k is None:
            self.cohorts[-1] += count
            self.cache.join_last_cohort(cross, src_mask, count * beam)
        else:
            self.cohorts.append(count)
            self.cache.add_cohort(cross, src_mask, count * beam)
            while len(self.cohorts) > MAX_COHORTS:
                self._merge_cheapest()
        first = [BOS_ID if start is None else start for start in (starts or [None] * count)]
        self.last = torch.cat(
            [self.last, torch.tensor(first, device=device).repeat_interleave(beam)[:, None]]
        )
        lengths = [len(source) for source in sources]
        limits = self._limits(lengths, plans)
        self.limits = torch.cat([self.limits, limits.to(device)])
        costs = [self._cost(length, limit) for length, limit in zip(lengths, limits.tolist())]
        self.costs += costs
        self.held = sum(costs, self.held)
        self.alphas += [plan.length_penalty for plan in plans]
        # W of the stopping rule: `n_best` at alpha 0, where the rule is exact, else `beam`.
        wait_for = [plan.n_best if plan.length_penalty == 0 else plan.beam for plan in plans]
        self.wait_columns = torch.cat(
            [self.wait_columns, torch.tensor(wait_for, device=device) - 1]
        )
        rows = {id(plan): self.biases.row(plan.allowed_tokens) for plan in plans}
        self.bias_rows += [rows[id(plan)] for plan in plans]
        self.bias_stale = True
        if self.rule is not None:
            required = self.rule.required(src_ids).repeat_interleave(beam, dim=0)
            self.remaining = torch.cat([self.remaining, required])
        self.sentence_ids += list(sentence_ids)
        self.steps += [0] * count
        return count

    def _limits(self, lengths: Sequence[int], plans: Sequence[SearchPlan]) -> Tensor:
        """Each sentence's output length limit (`output_limits`): what joins the search and
        what the budget counts."""
        return output_limits(lengths, plans, self.model.cfg.max_positions)

    def _merge_cheapest(self) -> None:
        """Two neighbouring cohorts as one: the pair whose younger rows gain the fewest padded
        cache positions (masked) by taking the older one's width."""
        widths = [block.width for block in self.cache.layers[0].steps]
        added = [
            self.cohorts[i + 1] * (widths[i] - widths[i + 1]) for i in range(len(self.cohorts) - 1)
        ]
        i = added.index(min(added))
        self.cache.merge(i)
        self.cohorts[i] += self.cohorts.pop(i + 1)

    def _decode(self) -> tuple[Tensor, Tensor]:
        """The next token's logits of every row, and each sentence's step count as a tensor."""
        steps = torch.tensor(self.steps, device=self.device)
        offset = (
            self.steps[0]
            if min(self.steps) == max(self.steps)
            else steps.repeat_interleave(self.beam)
        )
        self._set_masks()
        return self.model.decode(self.last, None, None, self.cache, offset=offset)[:, -1], steps

    def _set_masks(self) -> None:
        """Per cohort whose rows are at different steps (merged cohorts), the cached keys each
        row may see at this step: its own, the last (steps) of them, and the new one."""
        start = 0
        for cohort, count in enumerate(self.cohorts):
            blocks = self.cache.cohort_steps(cohort)
            own = self.steps[start : start + count]
            start += count
            if min(own) == max(own):
                for block in blocks:
                    block.mask = None
                continue
            width = blocks[0].width
            row_steps = torch.tensor(own, device=self.device).repeat_interleave(self.beam)
            mask = (torch.arange(width + 1, device=self.device) >= (width - row_steps)[:, None])[
                :, None, None, :
            ]
            for block in blocks:
                block.mask = mask

    def _select_rows(self, rows: Tensor, active: list[int], written: int = 1) -> None:
        """Each cohort's rows from `rows` (the global decoder rows kept, reordered), picked with
        the next step's append; cohorts left empty go, and columns no row of a cohort owns.
        `written`: the positions cached beyond the step counts (1 within a step, after its
        append; 0 between steps)."""
        beam, first, cohorts, kept = self.beam, 0, [], []
        for cohort, count in enumerate(self.cohorts):
            # This cohort's sentences still searched.
            members = [s for s in active if first <= s < first + count]
            # Sentences of this cohort left: their encoder keys and values go.
            if len(members) < count:
                sentences = torch.tensor(
                    [s - first for s in members], dtype=torch.long, device=self.device
                )
                for joined in self.cache.cohort_encoder(cohort):
                    joined.select(sentences, len(members) * beam)
            if members:
                # The active rows of the cohorts before this one come first.
                start = sum(cohorts) * beam
                local = rows[start : start + len(members) * beam] - first * beam
                longest = max(self.steps[s] for s in members) + written
                for block in self.cache.cohort_steps(cohort):
                    block.reorder(local)
                    keep_last(block, longest)
                cohorts.append(len(members))
                kept.append(cohort)
            first += count
        if len(kept) < len(self.cohorts):
            self.cache.keep_cohorts(kept)
        self.cohorts = cohorts

    def _keep(self, active: list[int]) -> Tensor:
        """Only sentences `active` (indexes, in order) stay in the per-sentence lists; their indexes
        as a tensor, for the caller's tensors."""
        self.sentence_ids = [self.sentence_ids[s] for s in active]
        self.steps = [self.steps[s] for s in active]
        self.alphas = [self.alphas[s] for s in active]
        self.costs = [self.costs[s] for s in active]
        self.bias_rows = [self.bias_rows[s] for s in active]
        self.bias_stale = True
        index = torch.tensor(active, dtype=torch.long, device=self.device)
        self.limits = self.limits.index_select(0, index)
        self.wait_columns = self.wait_columns.index_select(0, index)
        return index

    def _leave(self, active: list[int]) -> tuple[Tensor, Tensor]:
        """Between two steps, only sentences `active` (indexes, in order) stay: their rows of the
        caches, last tokens and owed sentinels, and their per-sentence lists; their indexes and
        their rows' indexes as tensors, for the caller's tensors."""
        index = torch.tensor(active, dtype=torch.long, device=self.device)
        beams = torch.arange(self.beam, device=self.device)
        rows = (index[:, None] * self.beam + beams).view(-1)
        self._select_rows(rows, active, written=0)
        self._keep(active)
        self.last = self.last.index_select(0, rows)
        if self.rule is not None:
            self.remaining = self.remaining.index_select(0, rows)
        return index, rows


@dataclass(frozen=True)
class Cost:
    """What sentences hold of a search's budget: source tokens and attention cache bytes."""

    tokens: int
    cache_bytes: int

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.tokens + other.tokens, self.cache_bytes + other.cache_bytes)

    def __sub__(self, other: Cost) -> Cost:
        return Cost(self.tokens - other.tokens, self.cache_bytes - other.cache_bytes)


@dataclass
class Room:
    """What a search's budget leaves (`Search.room`), taken by the sentences that join: None
    is unbounded, and an empty search takes its first sentence whatever its cost."""

    tokens: int | None
    cache_bytes: int | None
    empty: bool

    @classmethod
    def left(cls, budget: Budget | None, held: Cost, empty: bool) -> Room:
        """What `budget` leaves beside what is `held` (all of it, unbounded, without a budget)."""
        if budget is None:
            return cls(None, None, empty)
        cache = None if budget.cache_bytes is None else budget.cache_bytes - held.cache_bytes
        return cls(budget.tokens - held.tokens, cache, empty)

    def take(self, cost: Cost) -> bool:
        """Whether a sentence of `cost` fits (and if so, the room it leaves)."""
        fits = (self.tokens is None or cost.tokens <= self.tokens) and (
            self.cache_bytes is None or cost.cache_bytes <= self.cache_bytes
        )
        if not (fits or self.empty):
            return False
        self.empty = False
        if self.tokens is not None:
            self.tokens -= cost.tokens
        if self.cache_bytes is not None:
            self.cache_bytes -= cost.cache_bytes
        return True


class BiasTable:
    """`token_bias` of each allowed-token set the search's sentences have asked for since it was
    last empty, one row each, and a last row of zeros (no restriction); `per_row` gives a step's
    bias for the rows."""

    def __init__(self, vocab_size: int, device: torch.device) -> None:
        self.vocab_size, self.device = vocab_size, device
        self.rows: dict[bytes, int] = {}
        self.table = torch.zeros((1, vocab_size), device=device)

    def row(self, allowed_tokens: Tensor | None) -> int:
        """The row of `allowed_tokens` (added at its first use); -1 for none (no restriction)."""
        if allowed_tokens is None:
            return -1
        key = allowed_tokens.cpu().numpy().tobytes()
        if key not in self.rows:
            bias = token_bias(allowed_tokens, self.vocab_size, self.device)
            self.rows[key] = len(self.rows)
            self.table = torch.cat([self.table[:-1], bias[None], self.table[-1:]])
        return self.rows[key]

    def per_row(self, sentence_rows: list[int], beam: int) -> Tensor | None:
        """What a step adds to the scores of the sentences' rows (`beam` rows each, whose bias
        rows are `sentence_rows`): None where none is restricted, one row broadcast where all
        share one, else a row each (zeros for those not restricted)."""
        first = sentence_rows[0]
        if all(row == first for row in sentence_rows):
            return None if first < 0 else self.table[first]
        index = torch.tensor(sentence_rows, device=self.device)  # -1 reads the zeros
        return self.table[index].repeat_interleave(beam, dim=0)


def keep_last(block: KVBlock, positions: int) -> None:
    """`block.keep_last(positions)`; at none (its rows joined since the last step and a merge
    put older rows' steps before theirs) the block holds no step, as a new cohort's."""
    if positions:
        block.keep_last(positions)
    else:
        block.k = block.v = block.mask = block.pending_rows = None


# translate-cli's batches: the next joins the running search once the sentences searched are down
# to this share of the batch budget in source tokens, so that few steps decode few rows
# (docs/benchmarks.md).
JOIN_BELOW = 0.5


def search_batch(
    search: Search,
    sources: Sequence[Sequence[int]],
    starts: Sequence[int | None] | None = None,
) -> list:
    """What `search` gives each of `sources` (source ids with EOS), one batch searched to its end,
    in their order (each sentence still as alone): for callers that hold a whole batch, such as
    validation BLEU in training."""
    search.add(range(len(sources)), sources, starts)
    found = {}
    while len(search):
        found.update(search.step())
    return [found[index] for index in range(len(sources))]


def search_joined(
    search: Search,
    batches: Iterable[tuple[Sequence[Hashable], Sequence[Sequence[int]]]],
    start: int | None = None,
    join_below: float = JOIN_BELOW,
) -> Iterator[tuple[Hashable, list]]:
    """Batches (sentence_ids, source ids with EOS) searched by one running `search`: the next batch
    joins whenever the sentences being searched hold at most `join_below` of the search's token
    budget; yields (sentence_id, what `search.step` gives) as each sentence is done, which is what
    it gets searched alone. Given longest first, the batches leave the shortest sentences for the
    last steps. `start` is every sentence's first decoder token in place of BOS (a
    target-language tag)."""
    if search.budget is None:
        raise ValueError("search_joined needs a search with a budget (Search(..., budget))")
    waiting, below = deque(batches), join_below * search.budget.tokens
    while waiting or len(search):
        while waiting and search.held.tokens <= below:
            sentence_ids, sources = waiting.popleft()
            search.add(sentence_ids, sources, [start] * len(sources))
        yield from search.step()
