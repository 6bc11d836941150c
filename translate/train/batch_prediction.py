"""One input file translated by several processes through Lightning's `Trainer.predict`.

Each process loads the checkpoint on its device, takes its contiguous run of whole input chunks
(`translate.cli.batch.shard`), translates them chunk by chunk and appends each to its own part
(a `PartialOutput`, so a stopped run resumes). The writer callback joins the parts in input
order on process 0 once all of them are complete.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from translate.decode.settings import SearchSettings
from translate.files import atomic_output, file_digest


class Chunks(torch.utils.data.IterableDataset):
    """The input lines of the chunks still to do, one list of lines each; an empty list where a
    process has nothing to do (it must still run, to meet the others at the end)."""

    def __init__(self, source: str, chunks: list[tuple[int, int]]) -> None:
        self.source, self.chunks = source, chunks

    def __iter__(self) -> Iterator[list[str]]:
        from translate.text.corpus import iter_lines

        if not self.chunks:
            yield []
            return
        lines = iter_lines(self.source)
        position = 0
        for start, end in self.chunks:
            # Skips to `start`, reads to `end`.
            chunk = list(islice(lines, start - position, end - position))
            position = end
            yield chunk


class BatchTranslation(L.LightningModule):
    """Translates this process's chunks; `part` is where they go; `on_split` is told of each
    over-long line translated in parts (`pipeline.SplitLine`). `args` are translate-batch's,
    the checkpoint's search defaults filled in."""

    def __init__(
        self,
        args: argparse.Namespace,
        chunks: list[tuple[int, int]],
        output: Path,
        on_split: Callable | None = None,
    ) -> None:
        super().__init__()
        self.args, self.chunks, self.output, self.on_split = args, chunks, output, on_split
        self.loaded = None
        self.part = None
        self.todo: list[tuple[int, int]] = []

    def predict_dataloader(self):
        """Loaded here, where the process knows its rank and device: the checkpoint, its part
        (resumed where asked), and the chunks still to translate."""
        from translate.decode import pipeline
        from translate.decode.engine import load_searching
        from translate.decode.settings import EngineChoice
        from translate.partial_output import PartialOutput

        args, rank, world = self.args, self.global_rank, self.trainer.world_size
        choice = EngineChoice.from_args(args)
        self.loaded = load_searching(args.checkpoint, self.device, choice, args.precision)
        # Refuse before any work.
        pipeline.target_tags_for(self.loaded, args.target_lang, args.source_lang)
        mine = shard(self.chunks, rank, world)
        fingerprint = {
            "checkpoint": file_digest(args.checkpoint),
            "source": file_digest(args.source),
            "part": [rank, world],
            "chunks": [list(chunk) for chunk in mine],
            "--beam": args.beam,
            "--length-penalty": args.length_penalty,
            "--max-input-tokens": args.max_input_tokens,
            "--restrict-target": args.restrict_target,
            "--target-lang": args.target_lang,
            "--precision": args.precision,
            "--quantize": args.quantize,
            "--engine": args.engine,
        }
        self.part = PartialOutput(part_path(self.output, rank, world), fingerprint, args.resume)
        # The part holds whole chunks: it resumes at a chunk's start.
        first = mine[0][0] if mine else 0
        self.todo = [(start, end) for start, end in mine if start >= first + self.part.lines_done]
        return torch.utils.data.DataLoader(Chunks(args.source, self.todo), batch_size=None)

    def predict_step(self, lines: list[str], batch_idx: int) -> tuple[list[str], list[str]]:
        from translate.decode import pipeline
        from translate.decode.device import autocast

        if not lines:
            return [], []
        args = self.args
        with autocast(self.device.type, args.precision):
            found = pipeline.translate_nbest(
                self.loaded,
                lines,
                SearchSettings.from_args(args),
                batch_tokens=args.batch_tokens,
                first_line=self.todo[batch_idx][0] + 1,
                on_split=self.on_split,
            )
        return lines, [entries[0].text for entries in found]


class PartWriter(BasePredictionWriter):
    """Appends each translated chunk to its process's part; joins the parts when all are done."""

    def __init__(self) -> None:
        super().__init__(write_interval="batch")

    def write_on_batch_end(
        self,
        trainer,
        pl_module: BatchTranslation,
        prediction,
        batch_indices,
        batch,
        batch_idx,
        dataloader_idx=0,
    ) -> None:
        lines, texts = prediction
        if lines:
            pl_module.part.append(texts, lines)

    def on_predict_end(self, trainer, pl_module: BatchTranslation) -> None:

        from translate.partial_output import partial_paths

        trainer.strategy.barrier("translate-batch parts complete")
        if trainer.is_global_zero:
            world = trainer.world_size
            parts = [
                partial_paths(part_path(pl_module.output, rank, world)) for rank in range(world)
            ]
            with atomic_output(pl_module.output) as handle:
                for lines, _ in parts:
                    with open(lines, "rb") as data:
                        handle.write(data.read())
            for lines, state in parts:
                lines.unlink(missing_ok=True)
                state.unlink(missing_ok=True)
        trainer.strategy.barrier("translate-batch joined")


def chunk_bounds(lines: int, chunk_lines: int) -> list[tuple[int, int]]:
    """[start, end) of every chunk of the input."""
    return [(start, min(start + chunk_lines, lines)) for start in range(0, lines, chunk_lines)]


def shard(chunks: list, rank: int, world: int) -> list:
    """Rank `rank`'s contiguous run of whole chunks: every chunk to exactly one rank, in order."""
    return chunks[rank * len(chunks) // world : (rank + 1) * len(chunks) // world]


def part_path(output: Path, rank: int, world: int) -> Path:
    return output.with_name(f"{output.name}.part-{rank}-of-{world}")
