"""Loss, schedule and batching against obvious references; a model that overfits and translates back."""

import os
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from helpers import FIXTURE, REPO
from tolerances import assert_within_rounding, transformer_terms, within_rounding

from translate.cli.train import main as train_main
from translate.errors import UsageError
from translate.model.transformer import ModelConfig
from translate.text.corpus import read_parallel
from translate.text.vocab import Vocabularies
from translate.train.collate import collate
from translate.train.data_module import TranslationDataModule
from translate.train.lightning_module import (
    TranslationModule,
    inverse_sqrt_schedule,
    linear_decay_schedule,
    use_fused_optimizer,
)
from translate.train.loss import label_smoothed_nll
from translate.train.token_batches import TokenBatchSampler


@pytest.mark.numerical
def test_label_smoothed_loss_equals_explicit_formula():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7)
    target = torch.tensor([[4, 5, 0], [6, 0, 0]])  # 0 is padding
    eps, vocab = 0.1, 7
    expected = 0.0
    for b in range(2):
        for t in range(3):
            if target[b, t] == 0:
                continue
            logp = torch.log_softmax(logits[b, t].double(), dim=-1)
            smooth = [
                (1 - eps) * (k == int(target[b, t])) + eps / vocab for k in range(vocab)
            ]  # float64
            expected -= sum(q * logp[k] for k, q in enumerate(smooth))
    terms = (
        2 * vocab + 3
    )  # the log-softmax's and the smoothing's sums over the vocabulary, then the 3 tokens
    assert label_smoothed_nll(logits, target, eps).item() == within_rounding(
        float(expected), torch.float32, terms
    )
    # and in float64, where the formula and the reference each round
    assert label_smoothed_nll(logits.double(), target, eps).item() == within_rounding(
        float(expected), torch.float64, 2 * terms
    )


# The factors below are one correctly rounded division or square root of whole numbers: equal to the literal.
def test_inverse_sqrt_schedule_warms_up_then_decays():
    factor = inverse_sqrt_schedule(warmup_steps=100)
    assert factor(0) == 0.01
    assert factor(49) == 0.5
    assert factor(99) == 1.0
    assert factor(399) == 0.5


def test_linear_schedule_warms_up_then_reaches_zero_at_the_last_step():
    factor = linear_decay_schedule(warmup_steps=10, total_steps=110)
    assert factor(0) == 0.1
    assert factor(9) == 1.0
    assert factor(59) == 0.5
    assert factor(109) == 0.0 and factor(500) == 0.0


def test_no_warm_up_starts_at_the_peak():
    inverse_sqrt = inverse_sqrt_schedule(warmup_steps=0)
    assert inverse_sqrt(0) == 1.0 and inverse_sqrt(3) == 0.5
    linear = linear_decay_schedule(warmup_steps=0, total_steps=10)
    assert linear(0) == 0.9 and linear(9) == 0.0
    with pytest.raises(UsageError, match="warmup_steps must be 0"):
        TranslationModule(Vocabularies.train([("a b", "c d")] * 50, vocab_size=30), warmup_steps=-1)


def encoded_batch(vocab: Vocabularies, pairs: list[tuple[str, str]]) -> dict:
    """`pairs` encoded and collated into one training batch."""
    return collate(
        [
            (np.array(vocab.source.encode([s])[0]), np.array(vocab.target.encode([t])[0]), None)
            for s, t in pairs
        ]
    )


def loss_terms(cfg: ModelConfig, batch: dict, vocab: int) -> int:
    """A batch's loss: each token's log-softmax and the smoothing's sum over the vocabulary, summed over tokens."""
    longest = max(batch["src"].shape[1], batch["tgt_in"].shape[1])
    return transformer_terms(cfg, longest, vocab) + vocab + batch["tgt_tokens"]


def gradient_terms(cfg: ModelConfig, batch: dict, vocab: int) -> int:
    """A gradient: back along the forward pass's sums, and summed over every token."""
    return 2 * loss_terms(cfg, batch, vocab)


def assert_gradients_within_rounding(
    gradients: dict, expected: dict, dtype: torch.dtype, terms: int
) -> None:
    """All gradients as one vector, so relative to the largest: a gradient that cancels (a key bias's:
    softmax ignores a shift) keeps the error of its large terms."""
    names = list(expected)
    assert_within_rounding(
        torch.cat([gradients[name].reshape(-1) for name in names]),
        torch.cat([expected[name].reshape(-1) for name in names]),
        dtype,
        terms,
    )


class GradientRecorder(TranslationModule):
    """Keeps the gradient the optimizer would step with (after the module's normalisation)."""

    def on_before_optimizer_step(self, optimizer) -> None:
        super().on_before_optimizer_step(optimizer)
        self.gradient = {name: p.grad.clone() for name, p in self.model.named_parameters()}


def one_update(module: TranslationModule, batches: list[dict], accumulate: int) -> dict:
    trainer = L.Trainer(
        accelerator="cpu",
        precision="64-true",
        max_steps=1,
        accumulate_grad_batches=accumulate,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(module, torch.utils.data.DataLoader(batches, batch_size=None))
    return module.gradient


@pytest.mark.numerical
def test_the_loss_of_an_update_is_the_mean_over_all_its_tokens():
    """One batch of 2N tokens and two accumulated batches (of very different sizes) give the same
    gradient: that of the summed loss over every target token divided by their count, computed
    here independently with autograd (a mean of the two batches' means would differ)."""
    pairs = read_parallel(FIXTURE / "train.en", FIXTURE / "train.de")
    vocab = Vocabularies.train(pairs, vocab_size=300)
    short = [p for p in pairs if len(p[1].split()) <= 4][:6]
    long = [p for p in pairs if len(p[1].split()) >= 15][:2]

    first, second, both = (encoded_batch(vocab, chosen) for chosen in (short, long, short + long))
    assert first["tgt_tokens"] + second["tgt_tokens"] == both["tgt_tokens"]
    assert abs(first["tgt_tokens"] - second["tgt_tokens"]) > 10, "the batches must differ in size"

    def module():
        torch.manual_seed(0)
        config = ModelConfig(
            d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=64, dropout=0.0
        )
        return GradientRecorder(vocab, config, warmup_steps=1, label_smoothing=0.1, val_bleu=False)

    accumulated = one_update(module(), [first, second], accumulate=2)
    whole = one_update(module(), [both], accumulate=1)

    reference = module().double()
    loss = sum(
        label_smoothed_nll(reference.model(b["src"], b["tgt_in"], 0), b["tgt_out"], 0.1)
        for b in (first, second)
    )
    (loss / both["tgt_tokens"]).backward()
    names = [name for name, _ in reference.model.named_parameters()]
    expected = torch.cat([p.grad.reshape(-1) for p in reference.model.parameters()])
    # Everything runs in float64: the backward pass sums over every token of the update along
    # the forward pass's own sums. A mean of the two batches' means is off by about 10%.
    longest = max(b["src"].shape[1] for b in (first, second, both))
    terms = (
        2 * transformer_terms(module().model.cfg, longest, len(vocab.target)) + both["tgt_tokens"]
    )
    for gradient in (accumulated, whole):
        assert_within_rounding(
            torch.cat([gradient[name].reshape(-1) for name in names]),
            expected,
            torch.float64,
            terms,
        )


def test_token_batches_respect_budget_cover_everything_and_shard():
    lengths = [((i * 7) % 23 + 1, (i * 5) % 19 + 1) for i in range(500)]
    sampler = TokenBatchSampler(lengths, max_tokens=120, shuffle=True, seed=3)
    for batch in sampler:
        longest = max(max(lengths[i]) for i in batch)
        assert longest * len(batch) <= 120
    assert sorted(i for batch in sampler for i in batch) == list(range(500))
    sampler.set_epoch(1)
    first = list(sampler)
    sampler.set_epoch(2)
    assert list(sampler) != first
    sampler.set_epoch(1)
    assert list(sampler) == first

    for world in (2, 3, 7):
        ranks = [
            TokenBatchSampler(lengths, 120, True, seed=3, rank=r, world_size=world)
            for r in range(world)
        ]
        assert len(set(map(len, ranks))) == 1, "ranks got different batch counts"
        seen = [[i for batch in rank for i in batch] for rank in ranks]
        assert sorted(i for rank in seen for i in rank) == list(range(500)), (
            "not disjoint or not complete"
        )
        assert len(list(ranks[0])) == len(ranks[0])


def write_corpus(directory: Path, pairs: list[tuple[str, str]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        (directory / f"{split}.en").write_text(
            "".join(s + "\n" for s, _ in pairs), encoding="utf-8"
        )
        (directory / f"{split}.de").write_text(
            "".join(t + "\n" for _, t in pairs), encoding="utf-8"
        )


@pytest.mark.slow  # 250 updates
def test_overfits_32_pairs_and_translate_cli_reproduces_them(tmp_path, fixture_dir):
    unique = {}  # one target per source, or no model could reproduce them all
    for src, tgt in read_parallel(fixture_dir / "train.en", fixture_dir / "train.de"):
        if len(src.split()) <= 10:
            unique.setdefault(src, tgt)
    pairs = list(unique.items())[:32]
    assert len(pairs) == 32
    write_corpus(tmp_path / "corpus", pairs)
    L.seed_everything(0)
    data = TranslationDataModule(
        corpus_dir=str(tmp_path / "corpus"),
        vocab_size=300,
        max_tokens=4096,
        cache_dir=str(tmp_path / "cache"),
    )
    module = TranslationModule(
        data.vocab,
        ModelConfig(
            d_model=64,
            heads=4,
            encoder_layers=2,
            decoder_layers=2,
            ffn_dim=128,
            dropout=0.0,
            tie_embeddings="all",
        ),
        lr=3e-3,
        warmup_steps=30,
        label_smoothing=0.0,
    )
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=250,
        limit_val_batches=0,
        logger=False,  # all 32 are right from about 120
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, datamodule=data)
    checkpoint = tmp_path / "overfit.ckpt"
    trainer.save_checkpoint(checkpoint)

    sources = [s for s, _ in pairs]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.translate",
            "--checkpoint",
            str(checkpoint),
            "--quiet",
        ],
        input="\n".join(sources[:16] + [""] + sources[16:]) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    outputs = result.stdout.split("\n")[:-1]
    assert outputs == [t for _, t in pairs[:16]] + [""] + [t for _, t in pairs[16:]]


def test_translate_cli_reports_missing_checkpoint(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.translate",
            "--checkpoint",
            str(tmp_path / "none.ckpt"),
        ],
        input="Hallo\n",
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "none.ckpt: no such checkpoint file" in result.stderr


@pytest.mark.skipif(not (REPO / "Makefile").is_file(), reason="needs the source tree")
@pytest.mark.slow  # the vocabulary, training, tuning and the test split
def test_tiny_config_runs_the_whole_make_train_path(tmp_path, bundled_corpus_cache):
    """corpus → vocabulary → training → checkpoint → translation → BLEU, as `make train` runs it
    (into a temporary run directory and cache: a user's runs/ and .cache/ are never touched)."""
    bin_dir = Path(sys.executable).parent
    run_dir = tmp_path / "run"
    started = time.time()
    result = subprocess.run(
        [
            "make",
            "-s",
            "-o",
            "install",
            "train",
            "CONFIG=configs/tiny.yaml",
            f"BIN={bin_dir}",
            f"RUN_DIR={run_dir}",
            f"TRAIN_ARGS=--data.cache_dir {bundled_corpus_cache}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in result.stdout
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    assert checkpoint.is_file() and checkpoint.stat().st_mtime >= started, (
        "last.ckpt was not rewritten"
    )
    assert (
        f"run directory {run_dir}" in result.stderr and f"checkpoint {checkpoint}" in result.stderr
    )
    hypotheses = (run_dir / "test.hyp").read_text(encoding="utf-8").split("\n")[:-1]
    references = read_parallel(
        *[
            REPO / "translate/corpora/libreoffice_help_en_de" / f"test.{lang}.gz"
            for lang in ("en", "de")
        ]
    )
    assert len(hypotheses) == len(references)
    saved = torch.load(checkpoint, weights_only=True)["translate"]
    assert "tie_embeddings: auto" in saved["run_config"]


@pytest.mark.parametrize("config", sorted(p.name for p in (REPO / "configs").glob("*.yaml")))
def test_every_config_parses_with_the_cli(config, capsys):
    """Each shipped config is valid for LightningCLI (parsed, not run: no data or GPU needed;
    in this process, since --print_config exits before anything is built)."""
    with pytest.raises(SystemExit) as exit_:
        train_main(["fit", "--config", str(REPO / "configs" / config), "--print_config"])
    output = capsys.readouterr()
    assert exit_.value.code in (0, None), output.err[-2000:]
    assert "tie_embeddings:" in output.out


@pytest.mark.numerical
def test_a_compiled_model_computes_what_the_eager_one_does():
    """`model.compile: true` (torch.compile, in place): same loss and gradients, same parameter names."""
    vocab = Vocabularies.train(
        read_parallel(FIXTURE / "train.en", FIXTURE / "train.de"), vocab_size=300
    )
    pairs = read_parallel(FIXTURE / "dev.en", FIXTURE / "dev.de")[:6]
    batch = encoded_batch(vocab, pairs)
    cfg = ModelConfig(
        d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=64, dropout=0.0
    )

    def loss_and_gradients(compiled: bool, dtype: torch.dtype):
        torch.manual_seed(0)
        module = TranslationModule(vocab, cfg, compile=compiled, val_bleu=False)
        module.to(dtype).configure_model()
        loss = label_smoothed_nll(
            module.model(batch["src"], batch["tgt_in"], 0), batch["tgt_out"], 0.1
        )
        loss.backward()
        return (
            loss.item(),
            {n: p.grad.clone() for n, p in module.model.named_parameters()},
            module.state_dict().keys(),
        )

    eager_loss, eager_grads, eager_keys = loss_and_gradients(False, torch.float64)  # the reference
    compiled_loss, compiled_grads, compiled_keys = loss_and_gradients(True, torch.float32)
    assert compiled_keys == eager_keys
    size = len(vocab.target)
    assert compiled_loss == within_rounding(eager_loss, torch.float32, loss_terms(cfg, batch, size))
    assert_gradients_within_rounding(
        compiled_grads, eager_grads, torch.float32, gradient_terms(cfg, batch, size)
    )


@pytest.mark.numerical
@pytest.mark.parametrize("tie", ["none", "all"])
def test_the_projected_loss_equals_the_loss_of_the_full_logits(tie):
    """`model.loss_chunk` (padding dropped before the output projection, logits made a few rows
    at a time under checkpointing): the same loss and gradients as the logits of every position."""
    vocab = Vocabularies.train(
        read_parallel(FIXTURE / "train.en", FIXTURE / "train.de"), vocab_size=300
    )
    pairs = read_parallel(FIXTURE / "dev.en", FIXTURE / "dev.de")[:6]
    batch = encoded_batch(vocab, pairs)
    assert (batch["tgt_out"] == 0).any()  # the batch has padding to drop

    cfg = ModelConfig(
        d_model=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
        ffn_dim=64,
        dropout=0.0,
        tie_embeddings=tie,
    )

    def loss_and_gradients(chunk, dtype=torch.float32):
        torch.manual_seed(0)
        module = TranslationModule(vocab, cfg, loss_chunk=chunk, val_bleu=False).to(dtype)
        loss = module.nll(batch, 0.1)
        loss.backward()
        return loss.item(), {n: p.grad.clone() for n, p in module.model.named_parameters()}

    reference_loss, reference_grads = loss_and_gradients(
        None, torch.float64
    )  # every position's logits, in float64
    size = len(vocab.target)
    for chunk in (None, 0, 7, 1000):
        loss, grads = loss_and_gradients(chunk)
        assert loss == within_rounding(
            reference_loss, torch.float32, loss_terms(cfg, batch, size)
        ), chunk
        assert_gradients_within_rounding(
            grads, reference_grads, torch.float32, gradient_terms(cfg, batch, size)
        )
    with pytest.raises(UsageError, match="loss_chunk"):
        TranslationModule(
            vocab,
            ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=64),
            loss_chunk=-1,
        )


def test_weight_decay_spares_biases_and_norms():
    vocab = Vocabularies.train([("a b", "c d")] * 50, vocab_size=30)
    module = TranslationModule(
        vocab,
        ModelConfig(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=32),
        weight_decay=0.01,
        optimizer="adamw",
    )
    decayed, spared = module.parameter_groups()
    assert decayed["weight_decay"] == 0.01 and spared["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decayed["params"]) and all(p.ndim < 2 for p in spared["params"])
    assert len(decayed["params"]) + len(spared["params"]) == len(list(module.parameters()))


def test_a_default_fused_optimizer_gives_way_to_clipping_under_mixed_precision():
    assert use_fused_optimizer(None, "cuda", clipping=False, precision="bf16-mixed")
    assert not use_fused_optimizer(None, "cuda", clipping=True, precision="bf16-mixed")
    assert use_fused_optimizer(None, "cuda", clipping=True, precision="32-true")
    assert not use_fused_optimizer(None, "cpu", clipping=False, precision="32-true")
    assert use_fused_optimizer(True, "cpu", clipping=True, precision="32-true")


@pytest.mark.parametrize("fused", [None, True])
def test_clipping_under_mixed_precision_trains_or_says_which_settings_conflict(fused):
    """Lightning refuses mid-step to clip a fused optimizer's gradients under mixed precision
    (configs/default.yaml clips, and a GPU made Adam fused by default): the default now
    trains, an explicit request is refused up front naming both settings."""
    pairs = read_parallel(FIXTURE / "train.en", FIXTURE / "train.de")
    vocab = Vocabularies.train(pairs, vocab_size=300)
    batch = encoded_batch(vocab, pairs[:4])
    module = TranslationModule(
        vocab,
        ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=64),
        warmup_steps=1,
        val_bleu=False,
        fused_optimizer=fused,
    )
    trainer = L.Trainer(
        accelerator="cpu",
        precision="bf16-mixed",
        gradient_clip_val=1.0,
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    if fused:
        with pytest.raises(UsageError, match="fused_optimizer.*gradient_clip_val"):
            trainer.fit(module, torch.utils.data.DataLoader([batch], batch_size=None))
    else:
        trainer.fit(module, torch.utils.data.DataLoader([batch], batch_size=None))
        assert trainer.global_step == 1


def autograd_nodes(loss: torch.Tensor) -> set[str]:
    """The names of every backward node behind `loss`."""
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack += [parent for parent, _ in node.next_functions]
    return {type(node).__name__ for node in seen}


@pytest.mark.numerical
def test_math_attention_trains_the_same_loss_and_gradients_through_plain_products():
    pairs = read_parallel(FIXTURE / "train.en", FIXTURE / "train.de")
    vocab = Vocabularies.train(pairs, vocab_size=300)
    batch = encoded_batch(vocab, pairs[:6])
    cfg = ModelConfig(
        d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=64, dropout=0.0
    )
    results = {}
    for backend, dtype in (
        ("default", torch.float32),
        ("math", torch.float32),
        ("math", torch.float64),
    ):
        torch.manual_seed(0)
        module = TranslationModule(vocab, cfg, training_attention=backend).to(dtype)
        loss = module.training_step(batch, 0)
        nodes = autograd_nodes(loss)
        loss.backward()
        results[backend, dtype] = (
            loss.item(),
            {n: p.grad.clone() for n, p in module.model.named_parameters()},
            nodes,
        )
    assert any("FlashAttention" in name for name in results["default", torch.float32][2]), (
        "the fused kernel was not the default here"
    )
    assert not any("Attention" in name for name in results["math", torch.float32][2]), (
        "math attention still ran a fused kernel"
    )
    reference_loss, reference_grads, _ = results["math", torch.float64]
    size = len(vocab.target)
    for backend in ("default", "math"):  # each within float32's rounding of the float64 reference
        loss, grads, _ = results[backend, torch.float32]
        assert loss == within_rounding(reference_loss, torch.float32, loss_terms(cfg, batch, size))
        assert_gradients_within_rounding(
            grads, reference_grads, torch.float32, gradient_terms(cfg, batch, size)
        )
    with pytest.raises(UsageError, match="training_attention"):
        TranslationModule(
            vocab,
            ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=64),
            training_attention="flash",
        )
