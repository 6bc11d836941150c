"""Which search runs, made in one place for every caller (translate-cli, translate-eval, tuning,
validation BLEU, the benchmarks and translate-serve): greedy at beam 1, beam search above, on
one of two engines with the same answers (tests/test_slots.py, tests/test_continuous.py):

- `slots` (translate/decode/slots.py): a table of slots, every per-sentence quantity on the
  device, no read back between steps but one every `poll_every`: what a GPU needs, where each
  read of the device waits for it;
- `cohorts` (translate/decode/continuous.py): caches as wide as each cohort's own steps and
  state in Python lists: the least arithmetic, which is what the CPU needs, where reading a
  tensor costs nothing.

`auto` picks by device and beam (docs/benchmarks.md has the measurements behind the choice):
the cohorts on the CPU and for beam search on a GPU, the slots for greedy search on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from translate.decode.continuous import ContinuousBeamSearch, ContinuousGreedySearch
from translate.decode.settings import ENGINES, Engine, SearchPlan
from translate.decode.slots import SlotSearch
from translate.model.transformer import Transformer

Search = ContinuousGreedySearch | ContinuousBeamSearch | SlotSearch

# The slot engine reads which sentences are done every this many steps on a GPU.
GPU_POLL_EVERY = 4


@dataclass(frozen=True)
class EngineChoice:
    name: Literal["cohorts", "slots"]
    reason: str


def engine_for(engine: Engine, device: torch.device | str, beam: int = 1) -> EngineChoice:
    """The engine that searches at `beam` on `device`, and why (the measurements behind the
    choice are in docs/benchmarks.md)."""
    device = torch.device(device)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine != "auto":
        return EngineChoice(engine, "as asked")
    if device.type == "cpu":
        return EngineChoice("cohorts", "on the CPU the cohorts do the least arithmetic")
    if beam > 1:
        return EngineChoice(
            "cohorts", f"beam search on {device.type}: the slots reorder more cache a step"
        )
    return EngineChoice("slots", f"greedy search on {device.type}: the slots' steps are captured")


def new_search(model: Transformer, plan: SearchPlan) -> Search:
    """An empty running search for `plan`: sentences `add`, `step` answers them (token lists at
    beam 1, greedy search; hypotheses above), `drop` takes back those no longer wanted."""
    device = next(model.parameters()).device
    greedy = plan.beam == 1
    if engine_for(plan.engine, device, plan.beam).name == "slots":
        return SlotSearch(model, plan, poll_every=1 if device.type == "cpu" else GPU_POLL_EVERY)
    if greedy:
        return ContinuousGreedySearch(
            model, plan.max_len_a, plan.max_len_b, plan.allowed_tokens, plan.never, plan.sentinels
        )
    return ContinuousBeamSearch(
        model,
        plan.beam,
        plan.length_penalty,
        plan.n_best,
        plan.max_len_a,
        plan.max_len_b,
        plan.allowed_tokens,
        plan.never,
        plan.sentinels,
    )
