"""What a trained model's sharing looks like from the inside: the direct path, parameters, ties.

The direct path is the part of the network that maps the decoder's input token straight to the
output logits through the residual stream, skipping every layer: M = W_E A^T W_U^T, with W_E the
decoder's input embedding, A the optional `embedding_adapter` (the identity without it) and W_U
the pre-softmax matrix (constant factors such as sqrt(d_model) do not change the measures below).
With three-way or decoder tying and no adapter, M = W_E W_E^T is symmetric: the direct path must
score "b after a" exactly as "a after b", while real next-token statistics are far from
symmetric. `asymmetry` measures how far a trained M is from that, and `bigram_mrr` how well M
ranks the next tokens that the training targets really have.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from translate.model.transformer import Transformer
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, SentencePieceVocab

# Top-level submodules of `Transformer` and the component each belongs to.
COMPONENTS = {
    "src_embed": "embeddings",
    "tgt_embed": "embeddings",
    "output": "output",
    "tgt_embed_adapter": "adapters",
    "encoder_layers": "encoder",
    "encoder_norm": "encoder",
    "decoder_layers": "decoder",
    "decoder_norm": "decoder",
}


# --- the direct path ------------------------------------------------------------------------
@torch.no_grad()
def direct_path(model: Transformer) -> Tensor:
    """M[a, b]: the logit of b contributed by input token a through the residual stream alone
    (float32, target vocabulary by target vocabulary)."""
    embedding = model.tgt_embed.weight.detach().float()
    adapter = getattr(model, "tgt_embed_adapter", None)
    if adapter is not None:
        embedding = embedding @ adapter.weight.detach().float().T
    return embedding @ model.output.weight.detach().float().T


def self_preference(matrix: Tensor, rows: Tensor | None = None) -> float:
    """The share of `rows` (default all) whose largest entry of M is on the diagonal: input
    tokens whose direct path scores themselves as the next token above every other. With a
    tied decoder M = W_E W_E^T, whose diagonal |e_a|^2 bounds each row where the norms are
    alike (Cauchy-Schwarz): a pull towards repeating the token just read."""
    chosen = torch.arange(matrix.shape[0]) if rows is None else rows
    best = matrix[chosen].argmax(dim=1)
    return float((best == chosen).double().mean())


def asymmetry(matrix: Tensor) -> float:
    """||M - M^T||_F / ||M||_F: 0 for a symmetric M, 2 for an antisymmetric one."""
    matrix = matrix.double()
    norm = torch.linalg.matrix_norm(matrix)
    if norm == 0:
        raise ValueError("the asymmetry of an all-zero matrix is undefined")
    return float(torch.linalg.matrix_norm(matrix - matrix.T) / norm)


@dataclass
class Bigrams:
    """Sparse next-token counts: `count[k]` times token `next[k]` followed token `prev[k]`."""

    prev: np.ndarray
    next: np.ndarray
    count: np.ndarray
    vocab_size: int


def target_bigrams(sequences: Iterable[Sequence[int]], vocab_size: int) -> Bigrams:
    """Bigrams as the decoder sees them: BOS before each sentence, EOS after it."""
    codes = []
    for ids in sequences:
        seq = np.asarray([BOS_ID, *ids, EOS_ID], dtype=np.int64)
        if seq.min() < 0 or seq.max() >= vocab_size:
            raise ValueError(f"token id outside the vocabulary of {vocab_size} in {list(ids)[:20]}")
        codes.append(seq[:-1] * vocab_size + seq[1:])
    if not codes:
        raise ValueError("no sentences to count bigrams in")
    unique, count = np.unique(np.concatenate(codes), return_counts=True)
    return Bigrams(unique // vocab_size, unique % vocab_size, count, vocab_size)


def bigram_mrr(scores: Tensor, bigrams: Bigrams) -> float:
    """Mean reciprocal rank, in each row of `scores`, of that token's most frequent successor.

    Why this measure: at each step the direct path proposes a ranking of the next token given
    the current one, and the most frequent successor is the single best answer the corpus
    gives; its reciprocal rank is 1 when M puts it first and decays with every token scored
    above it, over the whole vocabulary (not only the successors that happen to be observed,
    which a Spearman correlation over observed bigrams would be limited to: it would ignore
    that M may place unseen successors above all the observed ones). The mean is weighted by
    how often each previous token occurs, i.e. it is taken over the positions of the training
    targets. PAD and BOS, never predicted, are left out of the ranking; tied scores share their
    mean rank, so a constant row is no better than chance. A tied model without
    adapter has M = M^T and so must rank "b after a" as "a after b"; `asymmetry` says how far
    a model moved away from that, this says whether it was towards the corpus's order.

    `scores` is (V, V), or (1, V) for one ranking shared by every row (a unigram baseline).
    """
    order = np.lexsort((-bigrams.count, bigrams.prev))  # by prev, most frequent first
    prev, nxt, count = bigrams.prev[order], bigrams.next[order], bigrams.count[order]
    first = np.ones(len(prev), dtype=bool)
    first[1:] = prev[1:] != prev[:-1]
    rows = torch.from_numpy(prev[first])
    best = torch.from_numpy(nxt[first])
    weight = torch.from_numpy(np.add.reduceat(count, np.flatnonzero(first))).double()
    reciprocal = torch.empty(len(rows), dtype=torch.float64)
    for start in range(0, len(rows), 1024):
        chunk = slice(start, start + 1024)
        row_scores = (
            scores[rows[chunk]] if scores.shape[0] > 1 else scores.expand(len(rows[chunk]), -1)
        )
        row_scores = row_scores.double().clone()
        row_scores[:, [PAD_ID, BOS_ID]] = float("-inf")
        target = row_scores.gather(1, best[chunk, None])
        above, level = (row_scores > target).sum(dim=1), (row_scores == target).sum(dim=1) - 1
        reciprocal[chunk] = 1.0 / (1 + above + level / 2).double()  # ties share their mean rank
    return float((reciprocal * weight).sum() / weight.sum())


def unigram_scores(bigrams: Bigrams) -> Tensor:
    """(1, V) next-token frequencies: the ranking a model that ignores the previous token gives."""
    counts = np.bincount(bigrams.next, weights=bigrams.count, minlength=bigrams.vocab_size)
    return torch.from_numpy(counts)[None, :]


# --- parameters and ties --------------------------------------------------------------------
def _storage_key(tensor: Tensor) -> tuple:
    """Tensors with equal keys are views of the same memory (the same tied weight)."""
    if tensor.is_meta:  # no storage to compare: fall back on object identity
        return ("meta", id(tensor))
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))


def component_of(name: str) -> str:
    return COMPONENTS.get(name.split(".", 1)[0], "other")


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Parameters by component, each stored tensor counted once (under the first component that
    names it), plus "total" and "in_embeddings" (the distinct embedding matrices)."""
    counts = {component: 0 for component in dict.fromkeys(COMPONENTS.values())}
    seen: set[tuple] = set()
    for name, parameter in model.named_parameters(remove_duplicate=False):
        key = _storage_key(parameter)
        if key not in seen:
            seen.add(key)
            component = component_of(name)
            counts[component] = counts.get(component, 0) + parameter.numel()
    counts["total"] = sum(counts.values())
    if isinstance(model, Transformer):
        distinct = {_storage_key(w): w.numel() for w in model.embedding_parameters()}
        counts["in_embeddings"] = sum(distinct.values())
    return counts


def shared_tensors(model: nn.Module) -> list[list[str]]:
    """Names of parameters that share storage (by data_ptr), one list per stored tensor."""
    groups: dict[tuple, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        groups.setdefault(_storage_key(parameter), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def shared_modules(model: nn.Module) -> list[list[str]]:
    """The same ties as `shared_tensors`, summarised: groups of modules whose parameters are all
    one storage each, largest modules only (a shared attention block, not its eight tensors).
    Tensors shared outside such a group (e.g. an embedding tied to an output projection that
    has a bias) are listed by name."""
    by_signature: dict[tuple, list[str]] = {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        parameters = sorted(module.named_parameters(remove_duplicate=False))
        if prefix and parameters:
            signature = tuple((name, _storage_key(p)) for name, p in parameters)
            by_signature.setdefault(signature, []).append(prefix)
    groups = [names for names in by_signature.values() if len(names) > 1]
    covered_prefixes = {name for names in groups for name in names}

    def inside(name: str) -> bool:
        parts = name.split(".")
        return any(".".join(parts[:i]) in covered_prefixes for i in range(1, len(parts)))

    groups = [names for names in groups if not all(inside(n) for n in names)]
    kept = {name for names in groups for name in names}

    def covered(tensor: str) -> bool:
        parts = tensor.split(".")
        return any(".".join(parts[:i]) in kept for i in range(1, len(parts)))

    for names in shared_tensors(model):
        if not all(covered(n) for n in names):
            groups.append(names)
    return groups


def distinct_ids(vocab: SentencePieceVocab, lines: list[str]) -> int:
    """How many vocabulary entries the text of one language uses."""
    used: set[int] = set()
    for ids in vocab.encode(lines):
        used.update(ids)
    return len(used)
