"""Raw lines in, translations out, one for one: checkpoint → ids → search → detokenized text."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from tqdm import tqdm

from translate.checkpoint import Translator
from translate.search import beam_search, greedy_search
from translate.vocab import EOS_ID
from translate.data import pad


# Source tokens per batch: with beam 5 about a thousand decoder rows, enough for efficient
# matrix products, while a batch's slowest sentence holds up few others.
BATCH_TOKENS = 4096


@dataclass
class Translation:
    """One entry of an n-best list: detokenized text, length-normalized score, total log-prob.

    Greedy search (beam 1) computes no scores: both are None there.  An empty input line is
    not decoded and gets an empty text with score 0.  Entries that fill an n-best list the
    search could not fill (a search space smaller than n_best) have an empty text and -inf.
    """

    text: str
    score: float | None
    log_prob: float | None


def length_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Indexes of the non-empty sentences, shortest first, cut into batches of at most
    `batch_tokens` padded source tokens (EOS counted); a longer sentence goes alone.

    Sorting by length keeps padding, and the steps spent on sentences that finished early,
    small.  The benchmark uses this too, so every system decodes the same batches.
    """
    order = sorted((i for i, length in enumerate(lengths) if length), key=lambda i: lengths[i])
    batches, start = [], 0
    while start < len(order):
        longest = lengths[order[start]] + 1
        end = start + 1
        while end < len(order) and (lengths[order[end]] + 1) * (end - start + 1) <= max(batch_tokens, longest):
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


def translate_nbest(
    translator: Translator,
    lines: list[str],
    batch_tokens: int = BATCH_TOKENS,
    max_len_a: float | None = None,
    max_len_b: int | None = None,
    max_input_tokens: int | None = None,
    progress: bool = False,
    beam: int = 1,
    length_penalty: float = 1.0,
    n_best: int = 1,
    restrict_to_target: bool = False,
) -> list[list[Translation]]:
    """Exactly `n_best` translations for every line, best first; nothing is ever dropped.

    Lines are sorted by length so batches carry little padding, then put back in order.
    A line longer than the model can read is cut to `max_input_tokens` with a warning.
    `batch_tokens` budgets source tokens; beam search decodes `beam` rows per sentence.
    Beam 1 is greedy search (which beam search with beam 1 equals); `length_penalty` is the
    GNMT alpha of `beam_search`.  `restrict_to_target` lets the model produce only the ids
    seen on the target side of its training data (plus UNK and EOS).
    """
    if beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    if not 1 <= n_best <= beam:
        raise ValueError(f"n_best must be between 1 and the beam size {beam}, got {n_best}")
    model, vocab = translator.model, translator.vocab
    config = translator.training_config
    max_len_a = config.get("max_len_a", 1.5) if max_len_a is None else max_len_a
    max_len_b = config.get("max_len_b", 10) if max_len_b is None else max_len_b
    limit = max_input_tokens or model.cfg.max_positions - 1
    device = next(model.parameters()).device
    allowed = translator.target_token_mask().to(device) if restrict_to_target else None

    encoded = vocab.source.encode(lines)
    for number, ids in enumerate(encoded, start=1):
        if len(ids) > limit:
            print(f"warning: line {number} has {len(ids)} tokens; translating its first {limit}",
                  file=sys.stderr)
            encoded[number - 1] = ids[:limit]
    outputs = [[Translation("", 0.0, 0.0)] for _ in lines]
    batches = length_batches([len(ids) for ids in encoded], batch_tokens)
    bar = tqdm(total=len(lines), unit="sent", disable=not progress, file=sys.stderr)
    bar.update(len(lines) - sum(map(len, batches)))  # empty lines are done already
    for batch in batches:
        src = pad([encoded[i] + [EOS_ID] for i in batch]).to(device)
        with torch.inference_mode():
            if beam == 1:
                for index, text in zip(batch, vocab.target.decode(
                        greedy_search(model, src, max_len_a, max_len_b, allowed))):
                    outputs[index] = [Translation(text, None, None)]
            else:
                nbest = beam_search(model, src, beam, length_penalty, n_best, max_len_a, max_len_b, allowed)
                for index, hypotheses in zip(batch, nbest):
                    texts = vocab.target.decode([h.tokens for h in hypotheses])
                    outputs[index] = [Translation(text, h.score, h.log_prob)
                                      for text, h in zip(texts, hypotheses)]
        bar.update(len(batch))
    bar.close()
    for entries in outputs:
        entries.extend(Translation("", float("-inf"), float("-inf")) for _ in range(n_best - len(entries)))
    return outputs


def translate_lines(
    translator: Translator,
    lines: list[str],
    batch_tokens: int = BATCH_TOKENS,
    max_len_a: float | None = None,
    max_len_b: int | None = None,
    max_input_tokens: int | None = None,
    progress: bool = False,
    beam: int = 1,
    length_penalty: float = 1.0,
    n_best: int = 1,
    restrict_to_target: bool = False,
) -> list[str]:
    """Translate every line; an empty line gives an empty line and nothing is ever dropped.

    Returns `n_best * len(lines)` texts: the n-best list of line 1 (best first), then that of
    line 2, and so on; with `n_best=1`, one translation per line in input order.  See
    `translate_nbest` for the settings, and for the scores.
    """
    nbest = translate_nbest(
        translator, lines, batch_tokens, max_len_a, max_len_b, max_input_tokens, progress,
        beam, length_penalty, n_best, restrict_to_target,
    )
    return [entry.text for entries in nbest for entry in entries]
