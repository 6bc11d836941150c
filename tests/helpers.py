"""The small models and vocabularies tests share: the fixture corpus, its joint SentencePiece
vocabulary (trained once a session), seeded checkpoints written by the library's own writer
(`translate.model.checkpoint.write_checkpoint`, as translate-train saves them), and the model
variants of the sharing options."""

from __future__ import annotations

import functools
import itertools
import struct
from pathlib import Path

import torch
from torch import nn

from translate.model.checkpoint import TrainingConfig, write_checkpoint
from translate.model.transformer import ModelConfig, Transformer
from translate.text.protected import SENTINEL_PIECES
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabularies, train_sentencepiece

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).parent / "fixtures" / "libreoffice_small"


def fixture_lines(name: str) -> list[str]:
    """The lines of one file of the fixture corpus (`train.en`, `test.de`, ...)."""
    return FIXTURE.joinpath(name).read_text(encoding="utf-8").splitlines()


def tiny_fit(root: Path, *flags: str) -> Path:
    """`translate-train fit` of configs/tiny.yaml on the fixture corpus, its run and cache under
    `root`, 600-token batches, with `flags` added; the run's last checkpoint."""
    from translate.cli.train import main

    argv = ["fit", "--config", str(REPO / "configs" / "tiny.yaml"), "--run_dir", str(root / "run")]
    argv += ["--data.corpus_dir", str(FIXTURE), "--data.cache_dir", str(root / "cache")]
    assert main([*argv, "--data.max_tokens", "600", *flags]) == 0
    return root / "run" / "checkpoints" / "last.ckpt"


@functools.cache
def joint_vocab(size: int = 200) -> Vocabularies:
    """One SentencePiece model of the fixture's train.en and train.de lines (in that order) for
    both sides. Trained once a session: SentencePiece is seeded, so every training on these
    lines gives this same model, and the pieces' ids tests rely on."""
    joint = train_sentencepiece(fixture_lines("train.en") + fixture_lines("train.de"), size)
    return Vocabularies(joint, joint)


# --- random checkpoints -------------------------------------------------------------------
def seeded_checkpoint(
    path: Path, vocab: Vocabularies, d_model: int, layers: int, ffn_dim: int, tie: str, **artifact
) -> Path:
    """A random model (seed 0) over `vocab`, saved as TranslationModule saves it, with a short
    output length rule; `artifact` holds further fields of `translation_artifact`."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        d_model=d_model,
        heads=2,
        encoder_layers=layers,
        decoder_layers=layers,
        ffn_dim=ffn_dim,
        dropout=0.0,
        tie_embeddings=tie,
        max_positions=64,
    )
    model = Transformer(cfg, len(vocab.source), len(vocab.target), shared_vocab=vocab.joint)
    write_checkpoint(
        path, model, vocab, training_config=TrainingConfig(max_len_a=1.0, max_len_b=5), **artifact
    )
    return path


def random_tied_checkpoint(path: Path, d_model: int, layers: int, **artifact) -> Path:
    """A random three-way-tied model over `joint_vocab()`."""
    return seeded_checkpoint(path, joint_vocab(), d_model, layers, 2 * d_model, "all", **artifact)


def random_checkpoint(path: Path, vocab: Vocabularies, target_tokens: list[int] | None) -> None:
    """A small random untied model over `vocab`."""
    seeded_checkpoint(path, vocab, 32, 1, 32, "none", target_tokens=target_tokens)


def en_de_checkpoint(directory: Path) -> Path:
    """A small random English-German model, its languages recorded as a training run does."""
    return random_tied_checkpoint(
        directory / "model.ckpt",
        d_model=32,
        layers=1,
        run_config="data:\n  src_lang: en\n  tgt_lang: de\n",
    )


# --- models trained a little, for the exports ------------------------------------------------
def small_config(norm_first: bool, tie: str) -> ModelConfig:
    return ModelConfig(
        d_model=32,
        heads=4,
        encoder_layers=2,
        decoder_layers=3,
        ffn_dim=48,
        dropout=0.0,
        norm_first=norm_first,
        tie_embeddings=tie,
        max_positions=128,
    )


# `shared_rows` models: rows apart for a fifth of the 200-piece joint vocabulary.
SHARED_ROWS_APART = list(range(10, 200, 5))


def pad_batch(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
    for index, row in enumerate(rows):
        out[index, : len(row)] = torch.tensor(row)
    return out


def trained_copy_checkpoint(
    path: Path, cfg: ModelConfig, vocab: Vocabularies, train_steps: int = 0
) -> Transformer:
    """A seeded model saved in the format translate.model.checkpoint reads (as TranslationModule saves it).

    A random model repeats one token forever; `train_steps` of a copy task give it outputs that
    vary with the source and end with EOS at different lengths, so greedy search is really tested.
    """
    torch.manual_seed(0)
    model = Transformer(
        cfg,
        len(vocab.source),
        len(vocab.target),
        shared_vocab=vocab.joint,
        target_only_ids=SHARED_ROWS_APART if cfg.tie_embeddings == "shared_rows" else None,
    )
    with torch.no_grad():  # non-trivial LayerNorm affine, so its permutation is checked too
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.normal_(1.0, 0.2)
                module.bias.normal_(0.0, 0.2)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    vocab_size = min(len(vocab.source), len(vocab.target))
    for _ in range(train_steps):
        rows = [
            torch.randint(4, vocab_size, (int(n),)).tolist() for n in torch.randint(3, 12, (32,))
        ]
        logits = model(
            pad_batch([r + [EOS_ID] for r in rows]), pad_batch([[BOS_ID] + r for r in rows]), PAD_ID
        )
        loss = nn.functional.cross_entropy(
            logits.flatten(0, 1),
            pad_batch([r + [EOS_ID] for r in rows]).flatten(),
            ignore_index=PAD_ID,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    write_checkpoint(path, model, vocab)
    return model.eval()


# --- the sharing variants ------------------------------------------------------------------
VARIANT_VOCAB = 50
SHARING = ("share_layer_attention", "share_encoder_decoder_layers", "embedding_adapter")


def variant_config(**changes) -> ModelConfig:
    base = dict(
        d_model=16,
        heads=2,
        encoder_layers=2,
        decoder_layers=3,
        ffn_dim=24,
        dropout=0.0,
        norm_first=True,
        max_positions=64,
        tie_embeddings="all",
    )
    return ModelConfig(**{**base, **changes})


def build_variant(seed: int = 0, **changes) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(variant_config(**changes), VARIANT_VOCAB, VARIANT_VOCAB, shared_vocab=True)


def all_variants() -> list[dict]:
    """Every combination of the three options, on two tie modes and both layer-count orders."""
    out = []
    for flags in itertools.product([False, True], repeat=3):
        for tie, layers in (("all", (2, 3)), ("none", (3, 2))):
            out.append(
                {
                    **dict(zip(SHARING, flags)),
                    "tie_embeddings": tie,
                    "encoder_layers": layers[0],
                    "decoder_layers": layers[1],
                }
            )
    return out


def variant_id(changes: dict) -> str:
    flags = [name for name in SHARING if changes[name]] or ["plain"]
    return (
        f"{changes['tie_embeddings']}-{changes['encoder_layers']}x{changes['decoder_layers']}-"
        + "+".join(flags)
    )


def protecting_model(directory, languages: bool = False):
    """A random model of a vocabulary with sentinels, trained with protected spans (and
    English to German recorded as its languages, with `languages`)."""
    pairs = list(zip(fixture_lines("train.en"), fixture_lines("train.de")))
    vocab = Vocabularies.train(pairs, 200, sentinels=SENTINEL_PIECES, split_digits=True)
    torch.manual_seed(0)
    cfg = ModelConfig(
        d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=16, max_positions=64
    )
    model = Transformer(cfg, len(vocab.source), len(vocab.target), shared_vocab=True)
    path = directory / "protects.ckpt"
    data = "data:\n  protect_spans: 0.5\n" + (
        "  src_lang: en\n  tgt_lang: de\n" if languages else ""
    )
    write_checkpoint(path, model, vocab, run_config=data)
    return path


def write_mo(path: Path, messages: dict[str, str]) -> None:
    """A gettext catalogue (GNU .mo, little-endian, no hash table), as msgfmt writes one."""
    keys = sorted(messages)
    ids = b"".join(key.encode() + b"\0" for key in keys)
    strs = b"".join(messages[key].encode() + b"\0" for key in keys)
    start = 7 * 4 + 16 * len(keys)
    table, offset = [], start
    for key in keys:
        table.append((len(key.encode()), offset))
        offset += len(key.encode()) + 1
    values, offset = [], start + len(ids)
    for key in keys:
        values.append((len(messages[key].encode()), offset))
        offset += len(messages[key].encode()) + 1
    header = struct.pack("<7I", 0x950412DE, 0, len(keys), 28, 28 + 8 * len(keys), 0, 0)
    body = b"".join(struct.pack("<2I", *entry) for entry in table + values)
    path.write_bytes(header + body + ids + strs)
