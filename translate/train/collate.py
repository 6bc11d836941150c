"""Examples into padded batches: the source ends in EOS, the decoder reads BOS+y and predicts
y+EOS, a many-to-many example's language tag in its place, each side padded to a fixed shape
where one is asked; and the stand-in batch of a rank that has no sentence to score."""

from __future__ import annotations

import numpy as np
import torch

from translate.model.padding import pad
from translate.text.languages import TagPosition
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID
from translate.train.encoded import EncodedPairs
from translate.train.token_batches import BatchShapes


def _to_shape(ids: torch.Tensor, rows: int, length: int, first: int | None) -> torch.Tensor:
    """`ids` in a PAD-filled (rows, length) tensor; the rows added begin with `first`, if any."""
    out = torch.full((rows, length), PAD_ID, dtype=ids.dtype)
    out[: ids.shape[0], : ids.shape[1]] = ids
    if first is not None:
        out[ids.shape[0] :, 0] = first
    return out


def collate(
    examples: list[tuple], tag_position: TagPosition = "source", shapes: BatchShapes | None = None
) -> dict:
    """Pad a list of examples: source ends in EOS; the decoder reads BOS+y and predicts y+EOS.

    An example is (source ids, target ids, reference or None[, tag id]). A many-to-many
    example's target-language tag goes before the source (`tag_position` "source") or takes
    BOS's place as the decoder's first token ("decoder").
    `tgt_tokens` (the predicted tokens, EOS included) is counted here, on the host, so the loss
    normalisation never waits on the device for it. With `shapes`, each side is padded to its
    fixed length and the rows to the shape's (`BatchShapes.sides`): the rows added read EOS and
    predict nothing (their targets are PAD, which the loss leaves out), so the loss is the
    examples' own.
    """
    sources = [example[0] for example in examples]
    targets = [example[1] for example in examples]
    tags = [example[3] if len(example) > 3 else None for example in examples]
    if tag_position == "source" and any(tag is not None for tag in tags):
        sources = [
            np.concatenate([[tag], src]) if tag is not None else src
            for tag, src in zip(tags, sources)
        ]
    batch = {
        "src": pad(sources, after=EOS_ID),
        "tgt_in": pad(targets, before=BOS_ID),
        "tgt_out": pad(targets, after=EOS_ID),
        "tgt_tokens": sum(len(tgt) + 1 for tgt in targets),
    }
    if tag_position == "decoder":
        for row, tag in enumerate(tags):
            if tag is not None:
                batch["tgt_in"][row, 0] = tag
    if shapes is not None:
        rows, source, target = shapes.sides(batch["src"].shape[1], batch["tgt_in"].shape[1])
        batch["src"] = _to_shape(batch["src"], rows, source, EOS_ID)
        batch["tgt_in"] = _to_shape(batch["tgt_in"], rows, target, BOS_ID)
        batch["tgt_out"] = _to_shape(batch["tgt_out"], rows, target, None)
    if examples and examples[0][2] is not None:
        batch["references"] = [example[2] for example in examples]
    return batch


class PaddedRank(torch.utils.data.Dataset):
    """An evaluation split seen by a rank that has no sentence of its own (fewer dev sentences
    than ranks): position `len(dataset)` is a copy of sentence 0 marked not to be scored. The
    rank still runs validation, and so takes part in the metrics' collectives instead of leaving
    the others waiting for it."""

    def __init__(self, dataset: EncodedPairs) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset) + 1

    def __getitem__(self, position: int):
        return self.dataset[position % len(self.dataset)]


def collate_unscored(examples: list, tag_position: TagPosition = "source") -> dict:
    return {**collate(examples, tag_position), "scored": False}
