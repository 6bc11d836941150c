"""Raw lines in, translations out, one for one: checkpoint → ids → search → detokenized text."""

from __future__ import annotations

import sys

import torch
from tqdm import tqdm

from translate.checkpoint import Translator
from translate.search import greedy_search
from translate.vocab import EOS_ID
from translate.data import pad


def translate_lines(
    translator: Translator,
    lines: list[str],
    batch_tokens: int = 4096,
    max_len_a: float | None = None,
    max_len_b: int | None = None,
    max_input_tokens: int | None = None,
    progress: bool = False,
) -> list[str]:
    """Translate every line; an empty line gives an empty line and nothing is ever dropped.

    Lines are sorted by length so batches carry little padding, then put back in order.
    A line longer than the model can read is cut to `max_input_tokens` with a warning.
    """
    model, vocab = translator.model, translator.vocab
    config = translator.training_config
    max_len_a = config.get("max_len_a", 1.5) if max_len_a is None else max_len_a
    max_len_b = config.get("max_len_b", 10) if max_len_b is None else max_len_b
    limit = max_input_tokens or model.cfg.max_positions - 1
    device = next(model.parameters()).device

    encoded = vocab.source.encode(lines)
    for number, ids in enumerate(encoded, start=1):
        if len(ids) > limit:
            print(f"warning: line {number} has {len(ids)} tokens; translating its first {limit}",
                  file=sys.stderr)
            encoded[number - 1] = ids[:limit]
    outputs = [""] * len(lines)
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
    bar = tqdm(total=len(lines), unit="sent", disable=not progress, file=sys.stderr)
    bar.update(len(lines) - len(order))  # empty lines are done already
    start = 0
    while start < len(order):
        longest = len(encoded[order[start]]) + 1
        end = start + 1
        while end < len(order) and (len(encoded[order[end]]) + 1) * (end - start + 1) <= max(batch_tokens, longest):
            end += 1
        batch = order[start:end]
        src = pad([encoded[i] + [EOS_ID] for i in batch]).to(device)
        with torch.inference_mode():
            hypotheses = greedy_search(model, src, max_len_a, max_len_b)
        for index, text in zip(batch, vocab.target.decode(hypotheses)):
            outputs[index] = text
        bar.update(len(batch))
        start = end
    bar.close()
    return outputs
