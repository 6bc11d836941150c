"""Which engine searches: the PyTorch search (`search.Search`), or CTranslate2's
(`ctranslate2_search.CTranslate2Search`, the checkpoint converted once), behind one door,
`search_sentences`, which every command's lines go through (`pipeline.translate_nbest`).

`auto` takes CTranslate2 on the CPU in float32 precision where the package is installed and the
model converts, PyTorch elsewhere, and says which and why (`choose_engine`)."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from translate.decode.loaded_model import LoadedModel, load_model
from translate.decode.search import Cost, Room, Search, search_joined
from translate.decode.settings import Budget, EngineChoice, SearchPlan
from translate.decode.steps import Hypothesis
from translate.errors import UsageError


def load_searching(
    checkpoint, device: str | torch.device, choice: EngineChoice, precision: str = "32-true"
) -> LoadedModel:
    """`checkpoint` loaded on `device` (quantized as `choice` asks), set up to search with the
    engine `choice` asks for (`choose_engine`; `loaded.engine` says which and why).

    Where CTranslate2 may search, the model loads with torch on one thread and CTranslate2 gets
    the threads torch was given: once torch's OpenMP threads have run, CTranslate2's (a runtime
    of its own in the same process) run several times slower. Torch gets its threads back where
    the PyTorch search is chosen."""
    threads = torch.get_num_threads()
    kind = torch.device(device).type
    if choice.name != "pytorch" and kind == "cpu":
        torch.set_num_threads(1)
    loaded = None
    try:
        loaded = load_model(checkpoint, torch.device(device), quantize=choice.quantize)
        choose_engine(loaded, choice, kind, precision, threads)
    finally:
        if loaded is None or loaded.ctranslate2 is None:
            torch.set_num_threads(threads)
    return loaded


def choose_engine(
    loaded: LoadedModel,
    choice: EngineChoice,
    device: str,
    precision: str = "32-true",
    threads: int | None = None,
) -> str:
    """Set `loaded` up to search with the engine `choice` asks for on `device` (CTranslate2 in
    `loaded.ctranslate2`, on `threads` threads, None: torch's thread count); the line saying
    which engine and why, also kept as `loaded.engine`. A UsageError where CTranslate2 is asked
    for and cannot run the model."""
    loaded.ctranslate2 = None
    loaded.engine = _chosen(loaded, choice, device, precision, threads or torch.get_num_threads())
    return loaded.engine


def _chosen(
    loaded: LoadedModel, choice: EngineChoice, device: str, precision: str, threads: int
) -> str:
    from translate.decode.ctranslate2_model import converted_ctranslate2, unsupported
    from translate.decode.ctranslate2_search import (
        CTranslate2Error,
        CTranslate2Search,
        load_translator,
        require_ctranslate2,
    )

    if choice.name == "pytorch":
        return "the PyTorch search (--engine pytorch)"
    why_not = None
    if device != "cpu":
        why_not = f"CTranslate2 runs on the CPU here, and the model is on {device}"
    elif precision != "32-true":
        why_not = f"CTranslate2 runs in float32 or int8 here, not {precision}"
    elif loaded.path is None:
        why_not = "the model was not loaded from a checkpoint file"
    else:
        why_not = unsupported(loaded.model)
        if why_not is None:
            try:
                require_ctranslate2()
                directory = converted_ctranslate2(loaded, choice.cache_dir)
            except CTranslate2Error as error:
                why_not = str(error)
            except OSError as error:
                why_not = (
                    f"its conversion cannot be written in {error.filename or 'the cache'} "
                    f"({error.strerror}): give --engine-cache DIR"
                )
    if why_not is not None:
        if choice.name == "ctranslate2":
            raise UsageError(f"--engine ctranslate2: {why_not}; use --engine pytorch")
        return f"the PyTorch search (--engine auto: {why_not})"
    compute = "int8" if choice.quantize == "int8" else "float32"
    translator = load_translator(directory, compute, threads)
    loaded.ctranslate2 = CTranslate2Search(translator, loaded.vocab, loaded.model.cfg.max_positions)
    how = f"{compute}, {threads} thread{'s' if threads > 1 else ''}"
    if choice.name == "ctranslate2":
        return f"CTranslate2 ({how})"
    return f"CTranslate2 ({how}; --engine auto on the CPU: --engine pytorch for the PyTorch search)"


def search_sentences(
    loaded: LoadedModel,
    plan: SearchPlan,
    batches: Iterable[tuple[Sequence[Hashable], Sequence[Sequence[int]]]],
    start: int | None,
    batch_tokens: int,
) -> Iterator[tuple[Hashable, list[Hypothesis]]]:
    """Batches (keys, source ids with EOS) searched as `plan` asks by `loaded`'s engine; yields
    (key, hypotheses) as sentences are done. With CTranslate2, the sentences it hands back (a
    protected span not kept, a length limit reached) are searched by PyTorch after."""
    engine = loaded.ctranslate2
    if engine is None:
        yield from search_joined(Search(loaded.model, plan, Budget(batch_tokens)), batches, start)
        return
    handed_back = []
    for keys, sources in batches:
        answers, back = engine.search(keys, sources, [plan] * len(keys), [start] * len(keys))
        yield from answers
        if back:
            handed_back.append(([keys[i] for i in back], [sources[i] for i in back]))
    if handed_back:
        search = Search(loaded.model, plan, Budget(batch_tokens))
        yield from search_joined(search, handed_back, start)


class CTranslate2Lane:
    """One lane of translate-serve's engine loop (`serve.engine_loop`) searched by CTranslate2,
    stepped as a `Search` is (`add`, `step`, `drop`, `room`, `cost`, `held_ids`): the sentences
    added between two steps are searched at the next in one call, each with its own plan and
    start, and answered; those CTranslate2 hands back join a PyTorch `Search` of the lane, which
    steps with it."""

    def __init__(self, loaded: LoadedModel, plan: SearchPlan, budget: Budget) -> None:
        if loaded.ctranslate2 is None:
            raise ValueError("a CTranslate2 lane needs a model with CTranslate2 chosen")
        self.engine, self.plan, self.budget = loaded.ctranslate2, plan, budget
        # The lane's PyTorch search (its costs, and the sentences handed back to it).
        self.pytorch = Search(loaded.model, plan, budget)
        self.waiting: list[_Added] = []

    def __len__(self) -> int:
        return len(self.waiting) + len(self.pytorch)

    def held_ids(self) -> list[Hashable]:
        return [entry.key for entry in self.waiting] + self.pytorch.held_ids()

    def cost(self, source_tokens: int, plan: SearchPlan | None = None) -> Cost:
        return self.pytorch.cost(source_tokens, plan)

    @property
    def held(self) -> Cost:
        """What the sentences not yet answered hold of the budget."""
        return sum((entry.cost for entry in self.waiting), self.pytorch.held)

    def room(self) -> Room:
        return Room.left(self.budget, self.held, not len(self))

    def add(
        self,
        sentence_ids: Sequence[Hashable],
        sources: Sequence[Sequence[int]],
        starts: Sequence[int | None] | None = None,
        plans: Sequence[SearchPlan] | None = None,
    ) -> None:
        plans = self.plan.joining(plans, len(sources))
        starts = starts or [None] * len(sources)
        for key, ids, start, plan in zip(sentence_ids, sources, starts, plans):
            self.waiting.append(_Added(key, list(ids), start, plan, self.cost(len(ids), plan)))

    def drop(self, keys: Collection[Hashable]) -> int:
        keys = set(keys)
        kept = [entry for entry in self.waiting if entry.key not in keys]
        dropped = len(self.waiting) - len(kept)
        self.waiting = kept
        return dropped + self.pytorch.drop(keys)

    def step(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """The sentences added since the last step searched and answered (those handed back
        joining the PyTorch search), and one step of that search."""
        answers = []
        if self.waiting:
            added, self.waiting = self.waiting, []
            found, back = self.engine.search(
                [entry.key for entry in added],
                [entry.ids for entry in added],
                [entry.plan for entry in added],
                [entry.start for entry in added],
            )
            answers += found
            if back:
                self.pytorch.add(
                    [added[i].key for i in back],
                    [added[i].ids for i in back],
                    [added[i].start for i in back],
                    [added[i].plan for i in back],
                )
        if len(self.pytorch):
            answers += self.pytorch.step()
        return answers


@dataclass(frozen=True)
class _Added:
    """A sentence added to a CTranslate2 lane, waiting for its next step."""

    key: Hashable
    ids: list[int]
    start: int | None
    plan: SearchPlan
    cost: Cost
