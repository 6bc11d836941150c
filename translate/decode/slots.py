"""Greedy and beam search over a fixed table of slots, every per-sentence quantity on the device.

The searches of translate/decode/continuous.py keep their sentences in cohorts and their state in
Python lists: on the CPU that does least arithmetic, but every step copies lists to the device and
reads results back. Here a sentence takes a slot, and everything a step needs lives in tensors
indexed by slot, allocated once per size (`SlotTable`):

- the self-attention keys and values, `(layers, rows, heads, positions, head dim)`, each row's
  new step written in place at its own position, attention reading the positions written so far
  under a length mask (so rows at different steps share one product, no cohorts);
- the encoder's keys and values, `(layers, slots, heads, source positions, head dim)`, written
  once when a sentence joins, for all layers from one encoder call, with the source mask;
- step counts, length limits, the last tokens, the beams' log-probabilities, the best finished
  hypotheses, and the output as backpointers (each row's token and parent row by step), which
  nothing moves: a finished hypothesis is read by following its parents, once, on the host.

A step reads nothing back. The host knows what it needs without asking: each slot's step count
and length limit (it counts the steps and computed the limits from the source lengths), so the
width of the cache a step reads and the slots in use are host integers. It reads the device
once per `poll_every` steps: which slots are done, and their outputs; then it frees those slots
and fills them from the sentences waiting. A sentence that ends between two reads keeps its
results (a done slot is frozen: nothing of it changes) and its slot is refilled at the read.

Every sentence decodes as it does alone (tests/search_oracle.py), like the cohort searches:
`SlotSearch` is the same interface (`add`, `step`, `len`). Which of the two a device gets is
`search_backend` (translate/decode/backend.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from translate.decode.search import (
    NEVER_GENERATED,
    Hypothesis,
    best_tokens,
    encode_by_length,
    extensions,
    length_penalties,
    length_penalty,
    output_lengths,
    sentinel_rule,
    token_bias,
)
from translate.decode.settings import SearchPlan
from translate.model.padding import pad
from translate.model.transformer import Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID

# The table's sizes grow in these steps, so that a size is met again rather than each time anew.
SLOT_QUANTUM = 8
POSITION_QUANTUM = 32


def round_up(value: int, quantum: int) -> int:
    return -(-value // quantum) * quantum


@dataclass(eq=False)
class SelfAttentionRows:
    """One decoder layer's self-attention cache as `MultiHeadAttention` reads cached rows
    (`translate.model.transformer.CachedRows`): `append` writes each row's new step at its own
    position and returns the positions written so far, which `mask` limits per row."""

    k_cache: Tensor  # (rows, heads, positions, head dim), this layer's part of the table
    v_cache: Tensor
    rows: Tensor  # 0 .. rows - 1
    positions: Tensor  # (rows,) where each row's new step goes
    width: int  # positions the step reads (host-known bound)
    mask: Tensor  # (rows, 1, 1, width): True at the positions each row has written
    size: int

    @property
    def k(self) -> Tensor:
        return self.k_cache[:, :, : self.width]

    @property
    def v(self) -> Tensor:
        return self.v_cache[:, :, : self.width]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.k_cache[self.rows, :, self.positions] = k[:, :, 0]
        self.v_cache[self.rows, :, self.positions] = v[:, :, 0]
        return self.k, self.v


@dataclass(eq=False)
class EncoderRows:
    """One decoder layer's cross-attention keys and values, one row per slot (its beams share it)."""

    k: Tensor
    v: Tensor
    mask: Tensor
    size: int


@dataclass(eq=False)
class LayerRows:
    steps: list[SelfAttentionRows]
    encoder: list[EncoderRows]


@dataclass(eq=False)
class StepCache:
    """What `Transformer.decode` reads at one step: each layer's rows."""

    layers: list[LayerRows]


class SlotTable:
    """The device state of `slots` sentences of `beam` rows each, `keep` finished hypotheses a
    slot (beam search), `positions` output steps, `source_positions` source tokens and the
    `sentinels` a row may owe (`search.SentinelRule`)."""

    def __init__(
        self,
        model: Transformer,
        slots: int,
        beam: int,
        keep: int,
        positions: int,
        source_positions: int,
        sentinels: int = 0,
    ) -> None:
        cfg = model.cfg
        parameter = next(model.parameters())
        device, dtype = parameter.device, parameter.dtype
        if torch.is_autocast_enabled(device.type):  # the keys and values come in its type
            dtype = torch.get_autocast_dtype(device.type)
        head_dim, rows = cfg.d_model // cfg.heads, slots * beam
        self.slots, self.beam, self.keep = slots, beam, keep
        self.positions, self.source_positions = positions, source_positions
        cache = (cfg.decoder_layers, rows, cfg.heads, positions, head_dim)
        self.self_k = torch.zeros(cache, device=device, dtype=dtype)
        self.self_v = torch.zeros_like(self.self_k)
        cross = (cfg.decoder_layers, slots, cfg.heads, source_positions, head_dim)
        self.cross_k = torch.zeros(cross, device=device, dtype=dtype)
        self.cross_v = torch.zeros_like(self.cross_k)
        self.source_mask = torch.zeros(
            (slots, 1, 1, source_positions), dtype=torch.bool, device=device
        )
        # A slot never filled still attends somewhere (to a zero key), so that a step over it
        # computes finite numbers: its rows may be part of a captured step's fixed shape.
        self.source_mask[..., 0] = True
        long = {"dtype": torch.long, "device": device}
        self.step = torch.zeros(slots, **long)  # tokens each row of the slot has
        self.limit = torch.ones(slots, **long)
        self.live = torch.zeros(slots, dtype=torch.bool, device=device)  # searched, not done
        self.done = torch.zeros(slots, dtype=torch.bool, device=device)  # done, not yet read
        self.last = torch.full((rows,), PAD_ID, **long)
        self.remaining = torch.zeros((rows, sentinels), dtype=torch.bool, device=device)
        # By step: each row's token, and the row (in its slot) whose hypothesis it extends.
        self.tokens = torch.full((rows, positions), PAD_ID, **long)
        self.parents = torch.zeros((rows, positions), **long)
        float_ = {"dtype": torch.float32, "device": device}
        self.beam_lp = torch.full((slots, beam), float("-inf"), **float_)
        self.finished_score = torch.full((slots, keep), float("-inf"), **float_)
        self.finished_log_prob = torch.full((slots, keep), float("-inf"), **float_)
        self.finished_row = torch.zeros((slots, keep), **long)  # the row it extended
        self.finished_steps = torch.zeros((slots, keep), **long)  # its tokens before EOS
        self.row_index = torch.arange(rows, device=device)
        self.position_index = torch.arange(positions, device=device)

    # The tensors indexed by slot (first dimension) and by row, for `grown`.
    BY_SLOT = (
        "step",
        "limit",
        "live",
        "done",
        "beam_lp",
        "finished_score",
        "finished_log_prob",
        "finished_row",
        "finished_steps",
    )

    def resized(self, model: Transformer, slots: int, positions: int, source_positions: int):
        """A table of `slots` slots (fewer than this one's only where the slots dropped are
        free) and at least these positions, holding this one's state (slots keep their index)."""
        other = SlotTable(
            model,
            slots,
            self.beam,
            self.keep,
            max(positions, self.positions),
            max(source_positions, self.source_positions),
            self.remaining.shape[1],
        )
        kept = min(slots, self.slots)
        rows, width, source = kept * self.beam, self.positions, self.source_positions
        for name in ("self_k", "self_v"):
            getattr(other, name)[:, :rows, :, :width] = getattr(self, name)[:, :rows]
        for name in ("cross_k", "cross_v"):
            getattr(other, name)[:, :kept, :, :source] = getattr(self, name)[:, :kept]
        other.source_mask[:kept, ..., :source] = self.source_mask[:kept]
        for name in self.BY_SLOT:
            getattr(other, name)[:kept] = getattr(self, name)[:kept]
        other.last[:rows] = self.last[:rows]
        other.remaining[:rows] = self.remaining[:rows]
        other.tokens[:rows, :width] = self.tokens[:rows]
        other.parents[:rows, :width] = self.parents[:rows]
        return other


@dataclass
class Occupant:
    """A slot's sentence as the host knows it."""

    sentence_id: Hashable
    limit: int  # at most this many output tokens, EOS included: done by then for sure
    steps: int = 0  # steps taken since it joined (an upper bound once it is done on the device)


@dataclass
class Waiting:
    sentence_id: Hashable
    source: list[int]
    start: int


class CapturedSteps:
    """The CUDA graphs of one search's step shapes, in one memory pool (the steps run one
    after another). A shape's first step runs as it is (and warms up what it needs), its
    second is captured, then replayed. `forget` drops them all with their pool: a pool whose
    graphs are gone must not be captured into again (CUDA's allocator asserts)."""

    def __init__(self) -> None:
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.warmed: set[tuple[int, int]] = set()
        self.pool: tuple[int, int] | None = None

    def forget(self) -> None:
        self.graphs.clear()
        self.warmed.clear()
        self.pool = None

    def run(self, shape: tuple[int, int], step: Callable[[int, int], None]) -> None:
        graph = self.graphs.get(shape)
        if graph is None and shape not in self.warmed:
            self.warmed.add(shape)
            step(*shape)
            return
        if graph is None:
            graph = self.graphs[shape] = torch.cuda.CUDAGraph()
            dtype = torch.get_autocast_dtype("cuda")
            # Autocast's cache of cast weights must stay out of a capture.
            with (
                torch.autocast(
                    "cuda", dtype, enabled=torch.is_autocast_enabled("cuda"), cache_enabled=False
                ),
                torch.cuda.graph(graph, pool=self.pool),
            ):
                step(*shape)
            self.pool = graph.pool()
        graph.replay()


class SlotSearch:
    """Greedy search (`plan.beam` 1) or beam search over sentences that join (`add`) and leave
    (`step`) at any step, in a table of slots on the model's device; the same answers as
    `ContinuousGreedySearch` (token lists) and `ContinuousBeamSearch` (hypotheses), with the
    same settings (`plan`). At most `max_slots` sentences are searched at once, and no more than
    keep the self-attention cache within `cache_bytes`; the others wait.
    `poll_every`: steps between reads of which slots are done (on the CPU a read costs nothing;
    on a GPU each read waits for the device, and a slot done in between idles until it)."""

    def __init__(
        self,
        model: Transformer,
        plan: SearchPlan,
        max_slots: int = 512,
        cache_bytes: int = 4 << 30,
        poll_every: int = 1,
        capture: bool | None = None,
        fixed_shapes: bool | None = None,
    ) -> None:
        beam, n_best = plan.beam, plan.n_best
        if beam < 1:
            raise ValueError(f"beam must be at least 1, got {beam}")
        if not 1 <= n_best <= beam:
            raise ValueError(f"n_best must be between 1 and the beam size {beam}, got {n_best}")
        if poll_every < 1 or max_slots < 1:
            raise ValueError(
                f"poll_every and max_slots must be at least 1, got {poll_every}, {max_slots}"
            )
        self.model, self.greedy = model, beam == 1
        self.beam, self.alpha, self.n_best = beam, plan.length_penalty, n_best
        alpha = self.alpha
        self.wait_for = n_best if alpha == 0 else beam  # W of the stopping rule
        self.max_len_a, self.max_len_b = plan.max_len_a, plan.max_len_b
        self.max_slots, self.poll_every = max_slots, poll_every
        # The self-attention cache's bytes a row and position (keys and values, every layer):
        # sentences wait rather than grow it past `cache_bytes` (one alone always joins).
        cfg, parameter = model.cfg, next(model.parameters())
        self.cache_bytes = cache_bytes
        self.row_position_bytes = cfg.decoder_layers * 2 * cfg.d_model * parameter.element_size()
        self.device = parameter.device
        # The blocked ids and the restriction as one bias added to every step's scores.
        vocab = model.tgt_vocab_size
        bias = token_bias(plan.allowed_tokens, vocab, self.device)
        self.bias = torch.zeros(vocab, device=self.device) if bias is None else bias.clone()
        self.bias[NEVER_GENERATED + list(plan.never)] = float("-inf")
        self.rule = sentinel_rule(plan.sentinels, self.device)
        self.penalties = length_penalties(alpha, model.cfg.max_positions, self.device)
        # On CUDA each step shape is captured once as a CUDA graph and replayed (`_advance`).
        self.capture = self.device.type == "cuda" if capture is None else capture
        # The step shapes a capture needs (also without one: the same numbers, for tests).
        self.fixed_shapes = self.capture if fixed_shapes is None else fixed_shapes or self.capture
        self.captured = CapturedSteps()
        self.table: SlotTable | None = None
        self.occupants: list[Occupant | None] = []
        self.waiting: deque[Waiting] = deque()
        self.steps_since_read = 0

    def __len__(self) -> int:
        """Sentences not answered yet: in slots or waiting for one."""
        return len(self.waiting) + sum(o is not None for o in self.occupants)

    def add(
        self,
        sentence_ids: Sequence[Hashable],
        sources: Sequence[Sequence[int]],
        starts: Sequence[int | None] | None = None,
    ) -> None:
        """Sentences that join at the next step (or as soon as a slot is free): source ids with
        EOS and any language tag, an optional first decoder token each in place of BOS, and the
        sentence_id `step` returns each with."""
        for index, (sentence_id, source) in enumerate(zip(sentence_ids, sources)):
            start = None if starts is None else starts[index]
            self.waiting.append(
                Waiting(sentence_id, list(source), BOS_ID if start is None else start)
            )

    @torch.inference_mode()
    def drop(self, keys: Collection[Hashable]) -> int:
        """The sentences whose sentence_id is one of `keys` leave now, waiting or in a slot (also
        one done since the last read): no later `step` returns them, and their slots are frozen
        (nothing of them changes, as a done slot's) and free for the next waiting sentences at
        the next step; how many left. A step still runs over the slots below the highest in
        use, a freed one among them, as it does over done ones."""
        keys = set(keys)
        waiting = len(self.waiting)
        self.waiting = deque(w for w in self.waiting if w.sentence_id not in keys)
        slots = [
            slot
            for slot, occupant in enumerate(self.occupants)
            if occupant is not None and occupant.sentence_id in keys
        ]
        for slot in slots:
            self.occupants[slot] = None
        if slots:
            index = torch.tensor(slots, device=self.device)
            self.table.live[index] = False
            self.table.done[index] = False
        return waiting - len(self.waiting) + len(slots)

    # -------------------------------------------------------------------------------------
    # Joining

    def _limit(self, source_length: int) -> int:
        """`search.max_output_lengths` of one source, reckoned alike (in float32)."""
        lengths = torch.tensor([source_length])
        return int(
            output_lengths(lengths, self.max_len_a, self.max_len_b, self.model.cfg.max_positions)
        )

    def _table_bytes(self, slots: int, positions: int) -> int:
        return slots * self.beam * positions * self.row_position_bytes

    def _fill(self) -> None:
        """Free slots taken by waiting sentences, in order, as many as `max_slots` and
        `cache_bytes` allow; the table grown where they need room."""
        occupied = sum(o is not None for o in self.occupants)
        longest = max((o.limit for o in self.occupants if o is not None), default=0)
        joining, limits = [], []
        while self.waiting and occupied + len(joining) < self.max_slots:
            limit = self._limit(len(self.waiting[0].source))
            slots = round_up(occupied + len(joining) + 1, SLOT_QUANTUM)
            positions = round_up(max(longest, limit), POSITION_QUANTUM)
            if (occupied or joining) and self._table_bytes(slots, positions) > self.cache_bytes:
                break
            joining.append(self.waiting.popleft())
            limits.append(limit)
            longest = max(longest, limit)
        if not joining:
            return
        self._make_room(occupied + len(joining), longest, max(len(w.source) for w in joining))
        free = [slot for slot, o in enumerate(self.occupants) if o is None][: len(joining)]
        for slot, waiting, limit in zip(free, joining, limits):
            self.occupants[slot] = Occupant(waiting.sentence_id, limit)
        self._write_joining(free, joining, limits)

    def _make_room(self, slots: int, positions: int, source_positions: int) -> None:
        """A table for `slots` sentences in use (the free slots lowest first) of `positions`
        output and `source_positions` source tokens. A table that must grow keeps its slots
        where `cache_bytes` allows, else only as many as are in use."""
        need = (
            round_up(slots, SLOT_QUANTUM),
            round_up(positions, POSITION_QUANTUM),
            round_up(source_positions, POSITION_QUANTUM),
        )
        table = self.table
        if table is None:
            sentinels = 0 if self.rule is None else self.rule.sentinels
            self.table = SlotTable(
                self.model, need[0], self.beam, self.wait_for, *need[1:], sentinels
            )
        elif need[0] > table.slots or need[1] > table.positions or need[2] > table.source_positions:
            in_use = max((i + 1 for i, o in enumerate(self.occupants) if o is not None), default=0)
            fewest = max(need[0], round_up(in_use, SLOT_QUANTUM))
            positions = max(need[1], table.positions)
            slots = max(fewest, table.slots)
            if self._table_bytes(slots, positions) > self.cache_bytes:
                slots = fewest
            self.table = table.resized(self.model, slots, positions, need[2])
            self.captured.forget()  # its graphs read the old table
        self.occupants = (self.occupants + [None] * self.table.slots)[: self.table.slots]

    @torch.inference_mode()
    def _write_joining(self, slots: list[int], joining: list[Waiting], limits: list[int]) -> None:
        """The joining sentences' encoder keys and values (one encoder call for all layers),
        first tokens, limits and fresh beams, in their slots."""
        model, table, beam, device = self.model, self.table, self.beam, self.device
        src_ids = pad([w.source for w in joining]).to(device)
        src_mask = model.source_mask(src_ids, PAD_ID)
        width = src_ids.shape[1]
        index = torch.tensor(slots, device=device)
        memory = encode_by_length(model, src_ids, src_mask)
        for layer, (k, v) in enumerate(model.cross_keys_values(memory)):
            table.cross_k[layer, index, :, :width] = k
            table.cross_v[layer, index, :, :width] = v
        table.source_mask[index] = False
        table.source_mask[index, ..., :width] = src_mask
        rows = (index[:, None] * beam + torch.arange(beam, device=device)).view(-1)
        starts = torch.tensor([w.start for w in joining], device=device)
        table.last[rows] = starts.repeat_interleave(beam)
        if self.rule is not None:
            table.remaining[rows] = self.rule.required(src_ids).repeat_interleave(beam, dim=0)
        table.step[index] = 0
        table.limit[index] = torch.tensor(limits, device=device)
        table.live[index] = True
        table.done[index] = False
        fresh = torch.full((len(slots), beam), float("-inf"), device=device)
        fresh[:, 0] = 0.0  # one live hypothesis: what a search started from one row picks
        table.beam_lp[index] = fresh
        table.finished_score[index] = float("-inf")
        table.finished_log_prob[index] = float("-inf")

    # -------------------------------------------------------------------------------------
    # Stepping

    def step(self) -> list[tuple[Hashable, list]]:
        """One step for every sentence in a slot (waiting ones join first); the sentences found
        done at this step's read, with their sentence_ids and what they get: token lists (greedy)
        or up to `n_best` hypotheses, best first."""
        self._fill()
        in_use = [slot for slot, o in enumerate(self.occupants) if o is not None]
        if not in_use:
            return []
        width = max(self.occupants[slot].steps for slot in in_use) + 1
        self._advance(in_use[-1] + 1, width)
        for slot in in_use:
            self.occupants[slot].steps += 1
        self.steps_since_read += 1
        # A sentence at its limit is done for sure: read then, whatever the interval.
        if self.steps_since_read >= self.poll_every or any(
            self.occupants[slot].steps >= self.occupants[slot].limit for slot in in_use
        ):
            return self._read(in_use[-1] + 1)
        return []

    def _advance(self, in_use: int, width: int) -> None:
        """`_step`, or on CUDA its captured graph for the step's shape: slots in use rounded up
        to a power of two and positions read to `POSITION_QUANTUM` (the rows and positions added
        are masked or not searched), so that few shapes recur (`CapturedSteps`)."""
        if not self.fixed_shapes:
            self._step(in_use, width)
            return
        table = self.table
        shape = (
            min(1 << (in_use - 1).bit_length(), table.slots),
            min(round_up(width, POSITION_QUANTUM), table.positions),
        )
        if not self.capture:
            self._step(*shape)
            return
        self.captured.run(shape, self._step)

    @torch.inference_mode()
    def _step(self, in_use: int, width: int) -> None:
        """One step of slots 0 .. in_use - 1 reading `width` cached positions; no host read."""
        table, beam = self.table, self.beam
        rows = in_use * beam
        step = table.step[:in_use]
        row_step = step.repeat_interleave(beam)
        mask = (table.position_index[:width] <= row_step[:, None])[:, None, None, :]
        # A done slot's step may sit past the last position: it reads and writes that one.
        write_at = row_step.clamp(max=min(table.positions, self.model.cfg.max_positions) - 1)
        cache = StepCache(
            [
                LayerRows(
                    [
                        SelfAttentionRows(
                            table.self_k[layer, :rows],
                            table.self_v[layer, :rows],
                            table.row_index[:rows],
                            write_at,
                            width,
                            mask,
                            rows,
                        )
                    ],
                    [
                        EncoderRows(
                            table.cross_k[layer, :in_use],
                            table.cross_v[layer, :in_use],
                            table.source_mask[:in_use],
                            rows,
                        )
                    ],
                )
                for layer in range(self.model.cfg.decoder_layers)
            ]
        )
        logits = self.model.decode(
            table.last[:rows, None], None, None, cache, offset=write_at, longest=width
        )[:, -1]
        live = table.live[:in_use].clone()  # as it was before this step
        at_limit = step + 1 >= table.limit[:in_use]
        if self.greedy:
            scores = logits.float() + self.bias
            if self.rule is not None:
                limits = table.limit[:in_use]
                self.rule.owed(table.remaining[:rows], limits, step, 1).restrict(scores)
            token = best_tokens(scores).masked_fill(at_limit, EOS_ID)
            if self.rule is not None:
                table.remaining[:rows] = self.rule.written(table.remaining[:rows], token)
            ending = live & (token == EOS_ID)
            table.tokens[:rows].index_put_((table.row_index[:rows], write_at), token)
            table.last[:rows] = token
        else:
            ending = live & self._beam_step(logits, in_use, step, at_limit, live, width, write_at)
        table.done[:in_use] |= ending
        table.live[:in_use] = live & ~ending
        table.step[:in_use] += live.long()

    def _beam_step(
        self,
        logits: Tensor,
        in_use: int,
        step: Tensor,
        at_limit: Tensor,
        live: Tensor,
        width: int,
        write_at: Tensor,
    ) -> Tensor:
        """`search.extensions`' choice for every slot in use, the best `wait_for` finished
        hypotheses kept on the device, the cache reordered to the live ones; which slots are done
        by the stopping rule."""
        table, beam = self.table, self.beam
        beam_lp = table.beam_lp[:in_use]
        # The bias blocks the ids never produced as well: no list of them to write each step.
        rows = in_use * beam
        owed = None
        if self.rule is not None:
            owed = self.rule.owed(table.remaining[:rows], table.limit[:in_use], step, beam)
        chosen = extensions(logits, beam_lp, at_limit, beam, (), self.bias, owed)
        top_lp, top_beam = chosen.top_lp, chosen.top_beam
        live_lp, live_beam, live_token = chosen.live_lp, chosen.live_beam, chosen.live_token
        ends = chosen.ends & live[:, None]
        width_top = top_lp.shape[1]

        # The finished: the best `wait_for` so far and this step's, by score; a stable sort keeps
        # the earlier of equal scores first, as sorting the list of all of them would.
        penalty = self.penalties[step.clamp(max=self.penalties.numel() - 1)]  # done slots: past it
        scores = torch.where(ends, top_lp / penalty[:, None], float("-inf"))
        pool = torch.cat([table.finished_score[:in_use], scores], dim=1)
        order = pool.sort(dim=1, descending=True, stable=True).indices[:, : self.wait_for]
        new = {
            "finished_log_prob": torch.where(ends, top_lp, float("-inf")),
            "finished_row": top_beam,
            "finished_steps": step[:, None].expand(-1, width_top),
        }
        for name, values in new.items():
            kept = getattr(table, name)
            kept[:in_use] = torch.cat([kept[:in_use], values], dim=1).gather(1, order)
        table.finished_score[:in_use] = pool.gather(1, order)
        best_live = live_lp[:, 0]
        done = (best_live == float("-inf")) | (
            best_live / penalty <= table.finished_score[:in_use, -1]
        )

        # The live hypotheses go on: each row's cache from the row it extends; the output grows
        # by backpointers, which nothing moves.
        active = (live & ~done).repeat_interleave(beam)
        first_row = (torch.arange(in_use, device=self.device) * beam)[:, None]
        source_rows = torch.where(active, (first_row + live_beam).view(-1), table.row_index[:rows])
        for cache in (table.self_k, table.self_v):
            part = cache[:, :rows, :, :width]
            part.copy_(part.index_select(1, source_rows))
        token = torch.where(active, live_token.view(-1), table.last[:rows])
        if self.rule is not None:
            owed_now = table.remaining[:rows]
            after = self.rule.written(owed_now.index_select(0, source_rows), token)
            owed_now.copy_(torch.where(active[:, None], after, owed_now))
        table.tokens[:rows].index_put_((table.row_index[:rows], write_at), token)
        table.parents[:rows].index_put_((table.row_index[:rows], write_at), live_beam.view(-1))
        table.last[:rows] = token
        table.beam_lp[:in_use] = torch.where(active.view(in_use, beam), live_lp, beam_lp)
        return done

    # -------------------------------------------------------------------------------------
    # Reading

    def _read(self, in_use: int) -> list[tuple[Hashable, list]]:
        """The sentences done since the last read, their slots freed (one read of the device)."""
        self.steps_since_read = 0
        table = self.table
        done = table.done[:in_use].nonzero()[:, 0]
        if not done.numel():
            return []
        table.done[done] = False
        slots = done.tolist()
        rows = (done[:, None] * self.beam + torch.arange(self.beam, device=self.device)).view(-1)
        tokens = table.tokens[rows].view(len(slots), self.beam, -1).tolist()
        answered = []
        if self.greedy:
            lengths = (table.step[done] - 1).tolist()
            for i, slot in enumerate(slots):
                answered.append((self.occupants[slot].sentence_id, tokens[i][0][: lengths[i]]))
        else:
            parents = table.parents[rows].view(len(slots), self.beam, -1).tolist()
            found = [
                table.finished_log_prob[done].tolist(),
                table.finished_row[done].tolist(),
                table.finished_steps[done].tolist(),
            ]
            for i, slot in enumerate(slots):
                # Scored as the cohort search scores them (the float32 sum over the penalty).
                hypotheses = [
                    Hypothesis(
                        follow(tokens[i], parents[i], row, steps),
                        log_prob / length_penalty(steps + 1, self.alpha),
                        log_prob,
                    )
                    for log_prob, row, steps in zip(*(column[i] for column in found))
                    if log_prob != float("-inf")
                ][: self.n_best]
                empty = Hypothesis([], float("-inf"), float("-inf"))
                answered.append((self.occupants[slot].sentence_id, hypotheses or [empty]))
        for slot in slots:
            self.occupants[slot] = None
        return answered


def follow(tokens: list[list[int]], parents: list[list[int]], row: int, steps: int) -> list[int]:
    """The `steps` tokens of the hypothesis that row `row` held after step `steps` - 1, read
    back through the backpointers (`tokens[row][t]`, `parents[row][t]`: row `row`'s token at
    step t and the row it extended)."""
    out = []
    for t in range(steps - 1, -1, -1):
        out.append(tokens[row][t])
        row = parents[row][t]
    return out[::-1]
