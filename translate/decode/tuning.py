"""The length penalty a model translates best with, chosen on its dev set and kept in its checkpoint.

Beam search ranks hypotheses by log-probability / ((5 + length) / 6) ** alpha (GNMT). A short
hypothesis loses less log-probability, so too small an alpha lets beam search prefer
translations that stop early (a brevity penalty well under 1), and the best alpha differs by
model and corpus. Each candidate alpha is tried at the model's beam size on dev sentences; the
one with the best BLEU among those whose brevity penalty is at least 0.95 is kept (the longest,
where none is), and greedy search is scored beside them for comparison.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from translate.decode.loaded_model import LoadedModel
from translate.decode.settings import EngineChoice, SearchSettings
from translate.defaults import LENGTH_PENALTY_CANDIDATES as CANDIDATES
from translate.defaults import MIN_BREVITY_PENALTY
from translate.model.checkpoint import ARTIFACT_KEY, SEARCH_KEY
from translate.score.scored_text import ScoredText


def score(
    loaded: LoadedModel, texts: list[ScoredText], beam: int, alpha: float, batch_tokens: int
) -> dict:
    """BLEU, chrF and brevity penalty of one search setting, averaged over the directions."""
    from translate.decode.evaluation import translate_text
    from translate.score.metrics import corpus_scores

    settings = SearchSettings(beam=beam, length_penalty=alpha)
    rows = []
    for text in texts:
        hypotheses = [found.text for found in translate_text(loaded, text, settings, batch_tokens)]
        rows.append(corpus_scores(hypotheses, text.references[0], target_lang=text.target_lang))
    return {
        "beam": beam,
        "length_penalty": alpha,
        "bleu": statistics.mean(r.bleu for r in rows),
        "chrf": statistics.mean(r.chrf for r in rows),
        "brevity_penalty": statistics.mean(r.brevity_penalty for r in rows),
    }


def tune_length_penalty(
    loaded: LoadedModel,
    texts: list[ScoredText],
    beam: int = 5,
    candidates: Sequence[float] = CANDIDATES,
    batch_tokens: int = 4096,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The search settings to store: `{"beam", "length_penalty", "greedy", "candidates", ...}`.
    `texts` are dev sentences, one reference each (`evaluation.own_texts`)."""
    greedy = score(loaded, texts, 1, 0.0, batch_tokens)
    tried = []
    for alpha in candidates:
        tried.append(score(loaded, texts, beam, alpha, batch_tokens))
        if progress:
            row = tried[-1]
            progress(
                f"alpha {alpha:.1f}: BLEU {row['bleu']:.2f}, chrF {row['chrf']:.2f}, BP {row['brevity_penalty']:.3f}"
            )
    long_enough = [row for row in tried if row["brevity_penalty"] >= MIN_BREVITY_PENALTY]
    best = (
        max(long_enough, key=lambda row: (row["bleu"], row["chrf"]))
        if long_enough
        else max(tried, key=lambda row: row["brevity_penalty"])
    )
    return {
        "beam": beam,
        "length_penalty": best["length_penalty"],
        "greedy": greedy,
        "candidates": tried,
        "sentences": sum(len(text.sources) for text in texts),
    }


def tune_checkpoint(
    path,
    device,
    split: str = "dev",
    sentences: int | None = 300,
    beam: int = 5,
    candidates: Sequence[float] = CANDIDATES,
    progress: Callable[[str], None] | None = None,
    write: bool = True,
    engine: EngineChoice = EngineChoice(),
) -> dict:
    """Load the checkpoint at `path`, tune its length penalty on `split` (searching with
    `engine`, said to `progress` unless it is the PyTorch search asked for) and (with `write`)
    store the result in it: what translate-tune and the end of translate-train fit do."""
    from translate.decode.engine import load_searching
    from translate.decode.evaluation import own_texts

    loaded = load_searching(path, device, engine)
    if progress and engine.name != "pytorch":
        progress(f"searching with {loaded.engine}")
    texts = own_texts(loaded, split, sentences=sentences)
    settings = tune_length_penalty(loaded, texts, beam, candidates, progress=progress)
    if write:
        store(path, settings)
    return settings


def store(path, settings: dict) -> None:
    """Write the tuned settings into the checkpoint at `path` (atomically, nothing else changed)."""
    import torch

    from translate.files import atomic_output
    from translate.model.checkpoint import read_checkpoint

    checkpoint = read_checkpoint(path)
    checkpoint[ARTIFACT_KEY][SEARCH_KEY] = settings
    with atomic_output(path) as handle:
        torch.save(checkpoint, handle)


def report(settings: dict) -> str:
    greedy = settings["greedy"]
    lines = [
        f"dev: {settings['sentences']:,} sentences",
        "",
        "| search | BLEU | chrF | BP |",
        "|---|---:|---:|---:|",
        f"| greedy | {greedy['bleu']:.2f} | {greedy['chrf']:.2f} | {greedy['brevity_penalty']:.3f} |",
    ]
    for row in settings["candidates"]:
        chosen = " (chosen)" if row["length_penalty"] == settings["length_penalty"] else ""
        lines.append(
            f"| beam {row['beam']}, alpha {row['length_penalty']:.1f}{chosen} | {row['bleu']:.2f} | "
            f"{row['chrf']:.2f} | {row['brevity_penalty']:.3f} |"
        )
    return "\n".join(lines)
