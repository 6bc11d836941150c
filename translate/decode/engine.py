"""Which engine searches: the PyTorch search (`search.Search`), or CTranslate2's
(`ctranslate2_search.CTranslate2Search`, the checkpoint converted once), behind one door,
`search_sentences`, which every command's lines go through (`pipeline.translate_nbest`).

`auto` takes CTranslate2 on the CPU in float32 precision where the package is installed and the
model converts, PyTorch elsewhere, and says which and why (`choose_engine`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence

import torch

from translate.decode.loaded_model import LoadedModel
from translate.decode.search import Search, search_joined
from translate.decode.settings import Budget, EngineChoice, SearchPlan
from translate.decode.steps import Hypothesis
from translate.errors import UsageError


def choose_engine(
    loaded: LoadedModel, choice: EngineChoice, device: str, precision: str = "32-true"
) -> str:
    """Set `loaded` up to search with the engine `choice` asks for on `device` (CTranslate2 in
    `loaded.ctranslate2`, with torch's thread count); a line saying which engine and why. A
    UsageError where CTranslate2 is asked for and cannot run the model."""
    from translate.decode.ctranslate2_model import converted_ctranslate2, unsupported
    from translate.decode.ctranslate2_search import CTranslate2Error, require_ctranslate2

    loaded.ctranslate2 = None
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
            except CTranslate2Error as error:
                why_not = str(error)
    if why_not is not None:
        if choice.name == "ctranslate2":
            raise UsageError(f"--engine ctranslate2: {why_not}; use --engine pytorch")
        return f"the PyTorch search (--engine auto: {why_not})"
    from translate.decode.ctranslate2_search import CTranslate2Search, cpu_translator

    compute = "int8" if choice.quantize == "int8" else "float32"
    directory = converted_ctranslate2(loaded, choice.cache_dir)
    translator = cpu_translator(directory, compute, torch.get_num_threads())
    loaded.ctranslate2 = CTranslate2Search(translator, loaded.vocab, loaded.model.cfg.max_positions)
    how = f"{compute}, {torch.get_num_threads()} threads"
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
    search = Search(loaded.model, plan, Budget(batch_tokens))
    engine = loaded.ctranslate2
    if engine is None:
        yield from search_joined(search, batches, start)
        return
    handed_back = []
    for keys, sources in batches:
        answers, back = engine.search(keys, sources, plan, start)
        yield from answers
        if back:
            handed_back.append(([keys[i] for i in back], [sources[i] for i in back]))
    yield from search_joined(search, handed_back, start)
