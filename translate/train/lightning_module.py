"""The LightningModule: label-smoothed loss, Adam with inverse-square-root warm-up, validation BLEU.

Validation statistics are torchmetrics states (sums of loss, token counts and sacrebleu's
n-gram counts), so under DDP they are summed over all ranks before the score is computed: the
figure equals the single-process one on the same data.

Training randomness (dropout) is drawn from a generator reseeded before every batch from the
run's seed, the batch number and the rank, so a run resumed from a checkpoint draws the same
masks as one never stopped, whatever else consumed random numbers in between.

The loss of an update is the mean over every target token of the update: all its accumulated
micro-batches on all ranks (as fairseq normalises), not a mean of per-batch means, which would
weight a token of a short batch more than one of a long batch.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, get_args

import lightning as L
import torch
from torchmetrics import Metric, SumMetric

from translate.decode.search import Search, search_batch
from translate.decode.settings import SearchPlan
from translate.errors import UsageError
from translate.model.checkpoint import (
    ARTIFACT_KEY,
    STARTED_FROM_KEY,
    TrainingConfig,
    translation_artifact,
)
from translate.model.transformer import TIE_MODES, ModelConfig, Transformer
from translate.model.tying import choose_tie
from translate.score.metrics import bleu_of_statistics, bleu_statistics, make_metric
from translate.text.vocab import PAD_ID, Vocabularies
from translate.text.vocab_overlap import PieceUse
from translate.train.compiled_step import CompiledLoss, StepMode, step_choice
from translate.train.loss import batch_nll

if TYPE_CHECKING:
    from translate.train.starting import StartingPoint

log = logging.getLogger(__name__)


class CorpusBLEU(Metric):
    """sacrebleu's corpus BLEU as a torchmetrics Metric, for validation under DDP.

    The state is sacrebleu's own sufficient statistics (`score.metrics.bleu_statistics`: n-gram
    matches and totals, hypothesis and reference lengths), summed over batches and over ranks;
    the score is computed from the sums by sacrebleu, so it equals `corpus_scores` on all the
    sentences at once, smoothing included. Each sentence is tokenized as its target language
    needs (`score.metrics.make_metric`, as translate-eval tokenizes): zh for Chinese, ja-mecab
    for Japanese, 13a for most languages.
    """

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self._metrics: dict[str | None, object] = {}  # sacrebleu's BLEU, by target language
        size = 2 * self.metric(None).max_ngram_order + 2
        self.add_state(
            "statistics", default=torch.zeros(size, dtype=torch.float64), dist_reduce_fx="sum"
        )

    def metric(self, language: str | None):
        """sacrebleu's BLEU for `language`, made once (a missing tokenizer package fails here)."""
        if language not in self._metrics:
            self._metrics[language] = make_metric("bleu", language)
        return self._metrics[language]

    def update(
        self,
        hypotheses: list[str],
        references: list[str],
        languages: list[str | None] | None = None,
    ) -> None:
        """Adds the sentences' statistics; `languages`: each one's target language (None: 13a)."""
        languages = languages or [None] * len(hypotheses)
        for language in dict.fromkeys(languages):
            rows = [i for i, lang in enumerate(languages) if lang == language]
            counts = bleu_statistics(
                self.metric(language),
                [hypotheses[i] for i in rows],
                [references[i] for i in rows],
            )
            self.statistics += torch.tensor(
                counts, dtype=torch.float64, device=self.statistics.device
            )

    def compute(self) -> torch.Tensor:
        statistics = [int(value) for value in self.statistics]
        return torch.tensor(bleu_of_statistics(self.metric(None), statistics), dtype=torch.float64)


def inverse_sqrt_schedule(warmup_steps: int):
    """Linear warm-up to 1, then decay as sqrt(warmup / step) (Vaswani et al., 2017); with no
    warm-up (0) the first update takes the peak rate and the decay starts from there."""
    warmup = max(warmup_steps, 1)

    def factor(step: int) -> float:
        step = step + 1
        return min(step / warmup, math.sqrt(warmup / step))

    return factor


def linear_decay_schedule(warmup_steps: int, total_steps: int):
    """Linear warm-up to 1, then linear decay to 0 at `total_steps`: for runs whose length is
    fixed in advance (a short budget gains from ending at a small learning rate)."""

    def factor(step: int) -> float:
        step = step + 1
        if step <= warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


LrSchedule = Literal["inverse_sqrt", "linear"]


def attention_backend(name: str) -> contextlib.AbstractContextManager:
    """The context that makes `scaled_dot_product_attention` use backend `name` (default: any)."""
    if name == "math":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.MATH)
    return contextlib.nullcontext()


def use_fused_optimizer(
    requested: bool | None, device_type: str, clipping: bool, precision: str
) -> bool:
    """Whether Adam runs as one fused kernel: as `model.fused_optimizer` asks, by default on a
    GPU; but Lightning refuses to clip the gradients of an optimizer that unscales them itself
    under mixed precision, so there a default gives way and an explicit request is refused."""
    conflict = clipping and precision.endswith("-mixed")
    if requested and conflict:
        raise UsageError(
            f"model.fused_optimizer true cannot clip gradients under trainer.precision {precision}: "
            "set trainer.gradient_clip_val 0 or model.fused_optimizer false"
        )
    if requested is None:
        return device_type == "cuda" and not conflict  # one launch for every tensor on a GPU
    return requested


class TranslationModule(L.LightningModule):
    """Trains a `Transformer`; `vocab` comes from the data module (linked by the CLI).

    Args:
        vocab: the SentencePiece vocabularies (set by the CLI from the data module).
        model: the architecture (its tie_embeddings `auto` is resolved here: `tie_choice`).
        piece_use: how the training data uses the joint vocabulary (set by the CLI from the data
            module), which tie_embeddings `auto` and `shared_rows` decide from.
        lr: peak learning rate of Adam.
        warmup_steps: updates of linear warm-up to the peak (0: none).
        lr_schedule: inverse_sqrt (Vaswani et al.) or linear decay to 0 at trainer.max_steps.
        betas: Adam's betas.
        weight_decay: weight decay of the matrices (not of biases and norms): L2 for adam,
            decoupled for adamw.
        label_smoothing: label smoothing of the training loss (0.1 in Vaswani et al.).
        val_bleu: translate the dev set greedily at each validation and log sacrebleu BLEU.
        max_len_a: output length limit a * source length + b, for validation and (as the
            checkpoint's default) translation.
        max_len_b: see max_len_a.
        optimizer: adam, or adamw (decoupled weight decay).
        fused_optimizer: the fused optimizer kernel (default: on a GPU, unless gradients are clipped
            under mixed precision, which Lightning cannot do for a fused optimizer).
        compile: torch.compile the model's forward pass (the training step; search is not compiled).
        step: the training step's loss `compiled` once for every batch shape (fixed batch
            shapes, `data.batch_shapes`; a CUDA graph a shape on a GPU:
            translate/train/compiled_step.py), or `eager` (the default until a whole training
            run has been measured compiled; the compiled step's speed: docs/benchmarks.md);
            `auto` compiles on CUDA where the batches have fixed shapes.
        training_attention: the `scaled_dot_product_attention` backend of the training steps:
            `default` (PyTorch's choice), or `math` (plain products and softmax, whose backward
            pass is faster than the CPU's fused kernel in bf16; validation and search unchanged).
        loss_chunk: None: the loss takes the logits of every position, padding included. A
            number: padded positions are dropped before the output projection, and the logits
            are made that many rows at a time under activation checkpointing (0: all at once).
    """

    def __init__(
        self,
        vocab: Vocabularies,
        model: ModelConfig | None = None,
        piece_use: PieceUse | None = None,
        lr: float = 7e-4,
        warmup_steps: int = 4000,
        lr_schedule: LrSchedule = "inverse_sqrt",
        betas: tuple[float, float] = (0.9, 0.98),
        weight_decay: float = 0.0,
        label_smoothing: float = 0.1,
        val_bleu: bool = True,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        optimizer: Literal["adam", "adamw"] = "adam",
        fused_optimizer: bool | None = None,
        compile: bool = False,
        loss_chunk: int | None = None,
        training_attention: Literal["default", "math"] = "default",
        step: StepMode = "eager",
    ) -> None:
        super().__init__()
        if warmup_steps < 0:
            raise UsageError(
                f"model.warmup_steps must be 0 (no warm-up) or more, got {warmup_steps}"
            )
        self.vocab = vocab
        asked = model or ModelConfig()
        if asked.tie_embeddings in ("auto", "shared_rows") and vocab.joint and piece_use is None:
            raise UsageError(
                f"model.model.tie_embeddings {asked.tie_embeddings} decides from how the training "
                "data uses the vocabulary, which this module was not given (piece_use)"
            )
        self.tie_choice = choose_tie(asked.tie_embeddings, piece_use)
        self.model_config = replace(asked, tie_embeddings=self.tie_choice.mode)
        target_only = (
            piece_use.target_only_ids()
            if TIE_MODES[self.tie_choice.mode].target_rows_apart and piece_use is not None
            else None
        )
        self.model = Transformer(
            self.model_config,
            len(vocab.source),
            len(vocab.target),
            shared_vocab=vocab.joint,
            target_only_ids=target_only,
        )
        self.training_config = TrainingConfig(
            lr=lr,
            warmup_steps=warmup_steps,
            lr_schedule=lr_schedule,
            betas=tuple(betas),
            weight_decay=weight_decay,
            label_smoothing=label_smoothing,
            max_len_a=max_len_a,
            max_len_b=max_len_b,
            optimizer=optimizer,
            fused_optimizer=fused_optimizer,
        )
        if loss_chunk is not None and loss_chunk < 0:
            raise UsageError(
                f"model.loss_chunk must be 0 (all rows at once), a row count, or null, got {loss_chunk}"
            )
        self.compile_model, self.loss_chunk = compile, loss_chunk
        if training_attention not in ("default", "math"):
            raise UsageError(
                f"model.training_attention must be default or math, got {training_attention!r}"
            )
        self.training_attention = training_attention
        if step not in get_args(StepMode):
            raise UsageError(
                f"model.step must be one of {', '.join(get_args(StepMode))}, got {step!r}"
            )
        self.step_mode = step
        self._compiled_loss: CompiledLoss | None = None  # set in on_fit_start where chosen
        self.val_bleu_enabled = val_bleu
        self.run_config: str | None = None  # the resolved CLI config, set by the CLI
        # Ids seen on the target side of the training data, all and per target language.
        self.target_tokens: list[int] | None = None
        self.target_tokens_by_language: dict[str, list[int]] | None = None
        # The checkpoint this run started from (`start_from`): its record, and the ids its
        # training targets used, which decoding keeps allowed.
        self.started_from: dict | None = None
        self._started_tokens: dict[str, list[int]] = {}
        # A many-to-many model's language tags.
        self._tag_languages = {index: lang for lang, index in vocab.target.tag_ids().items()}
        self.tag_ids = sorted(self._tag_languages)
        self.eval_nll, self.eval_tokens = SumMetric(), SumMetric()
        self.eval_bleu = CorpusBLEU()
        self._update_tokens = 0  # target tokens of the update in progress (this rank)
        self._update_nll: torch.Tensor | float = 0.0  # their summed loss (this rank)
        self._window_tokens = 0  # target tokens since the last throughput log (this rank)
        self._window_start: float | None = None

    # --- training -------------------------------------------------------------------
    def on_fit_start(self) -> None:
        """Record which ids the training targets use, so decoding can be restricted to them;
        say what is being trained."""
        datamodule = getattr(self.trainer, "datamodule", None)
        if self.target_tokens is None and hasattr(datamodule, "target_tokens_by_language"):
            self.target_tokens_by_language = {
                lang: sorted({*ids, *self._started_tokens.get(lang, ())})
                for lang, ids in datamodule.target_tokens_by_language().items()
            }
            self.target_tokens = sorted(
                {i for ids in self.target_tokens_by_language.values() for i in ids}
            )
        run_data = getattr(datamodule, "run_data", None)
        if self.val_bleu_enabled and run_data is not None:
            for language in run_data.target_languages:  # a tokenizer's package missing: now
                self.eval_bleu.metric(language)
        self._compiled_loss = self._choose_step(datamodule)
        if self.trainer.is_global_zero:
            log.info("model %s", self.summary())

    def start_from(self, start: StartingPoint, load_weights: bool = True) -> None:
        """Begin at a trained model (`translate-train fit --init_from`): its weights (unless a
        resumed checkpoint brings them), recorded as where this run started."""
        if load_weights:
            try:
                self.model.load_state_dict(start.weights())
            except RuntimeError as error:
                first = str(error).strip().splitlines()[-1].strip()
                raise UsageError(
                    f"--init_from {start.path}: its weights do not fit the model this run builds ({first})"
                ) from None
        self.started_from = start.record()
        self._started_tokens = start.target_tokens_by_language or {}

    def _choose_step(self, datamodule) -> CompiledLoss | None:
        """The compiled step where `model.step` chooses one (`compiled_step.step_choice`),
        with the choice printed; None for the eager step."""
        on_gpu = self.device.type == "cuda"
        shapes = (
            datamodule.training_shapes(on_gpu) if hasattr(datamodule, "training_shapes") else None
        )
        choice = step_choice(self.step_mode, self.device.type, shapes and len(shapes.lengths))
        if self.step_mode == "compiled" and not choice.compiled:
            raise UsageError(f"model.step compiled: {choice.reason}; set data.batch_shapes fixed")
        if choice.compiled and self.compile_model:
            raise UsageError(
                "model.compile and model.step compiled both compile the training step: "
                "set model.compile false"
            )
        if self.trainer.is_global_zero:
            kind = "compiled" if choice.compiled else "eager"
            log.info("training step %s: %s", kind, choice.reason)
        if not choice.compiled:
            return None
        return CompiledLoss(
            self.model,
            self.training_config.label_smoothing,
            self.loss_chunk,
            self.device.type,
            len(shapes.lengths),
        )

    def summary(self) -> str:
        """One line: parameters (tied tensors counted once), tying, size, vocabulary."""
        from translate.model.analysis import parameter_counts

        counts, cfg = parameter_counts(self.model), self.model_config
        vocab = (
            f"{len(self.vocab.target):,} joint"
            if self.vocab.joint
            else f"{len(self.vocab.source):,}/{len(self.vocab.target):,}"
        )
        return (
            f"{counts['total']:,} parameters ({counts.get('in_embeddings', 0):,} in embeddings, "
            f"{self.tie_choice.describe()}), d_model {cfg.d_model}, "
            f"{cfg.encoder_layers}+{cfg.decoder_layers} layers, vocabulary {vocab}"
        )

    def on_train_start(self) -> None:
        self._update_tokens, self._update_nll = 0, 0.0
        self._window_tokens, self._window_start = 0, time.perf_counter()

    def on_train_batch_start(self, batch: dict, batch_idx: int) -> None:
        """Reseed from (seed, batch number across the run, rank): resumable, distinct per rank."""
        index = self.trainer.fit_loop.epoch_loop.total_batch_idx
        seed = int(os.environ.get("PL_GLOBAL_SEED", 0))
        torch.manual_seed((seed * 1_000_003 + index * 4099 + self.global_rank) % (2**63 - 1))

    def nll(self, batch: dict, smoothing: float) -> torch.Tensor:
        """The batch's summed label-smoothed cross-entropy over its target tokens."""
        return batch_nll(self.model, batch, smoothing, self.loss_chunk)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        # Chosen in the forward pass; the backward pass follows it.
        with attention_backend(self.training_attention):
            if self._compiled_loss is not None:
                nll = self._compiled_loss(batch)
            else:
                nll = self.nll(batch, self.training_config.label_smoothing)
        self._update_nll = self._update_nll + nll.detach()
        self._update_tokens += batch["tgt_tokens"]
        self._window_tokens += batch["tgt_tokens"]
        # A sum: the update's token count is known only after its last micro-batch, so the
        # gradient is divided by it in on_before_optimizer_step.
        return nll

    def on_before_optimizer_step(self, optimizer) -> None:
        """Turn the accumulated gradient into that of the mean loss over the update's target
        tokens (all micro-batches, all ranks), before clipping; log that loss, the effective
        batch and, on logging steps, target tokens per second over all ranks."""
        update = torch.tensor(
            [self._update_tokens, self._window_tokens, 0.0], dtype=torch.float64, device=self.device
        )
        update[2] = self._update_nll  # stays on the device: no host sync on steps that do not log
        # One small collective per update.
        update = self.trainer.strategy.reduce(update, reduce_op="sum")
        tokens = update[0].clamp(min=1)
        # Lightning divided each micro-batch's loss by accumulate_grad_batches and DDP averaged
        # the gradients over ranks: undo both, then divide by the tokens.
        scale = self.trainer.accumulate_grad_batches * self.trainer.world_size / tokens
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if grads:
            torch._foreach_mul_(grads, scale.to(device=grads[0].device, dtype=grads[0].dtype))
        # Logged (and so read back to the host) on logging steps only: the rest run without a sync.
        if (self.trainer.global_step + 1) % max(self.trainer.log_every_n_steps, 1) == 0:
            now = time.perf_counter()
            self.log("train_loss", (update[2] / tokens).float(), prog_bar=True)
            self.log("lr", optimizer.param_groups[0]["lr"], prog_bar=True)
            self.log("train_batch_tgt_tokens", update[0])
            if self._window_start is not None and now > self._window_start:
                self.log(
                    "train_tgt_tokens_per_sec",
                    update[1] / (now - self._window_start),
                    prog_bar=True,
                )
            self._window_tokens, self._window_start = 0, now
        self._update_tokens, self._update_nll = 0, 0.0

    def configure_model(self) -> None:
        # In place: the parameter names, and so the checkpoints, stay the same.
        if self.compile_model:
            self.model.compile(dynamic=True)

    def parameter_groups(self) -> list[dict]:
        """Weight decay for the matrices only: biases and LayerNorm gains are not decayed."""
        decay = self.training_config.weight_decay
        parameters = [p for p in self.parameters() if p.requires_grad]
        if not decay:
            return [{"params": parameters, "weight_decay": 0.0}]
        return [
            {"params": [p for p in parameters if p.ndim >= 2], "weight_decay": decay},
            {"params": [p for p in parameters if p.ndim < 2], "weight_decay": 0.0},
        ]

    def configure_optimizers(self):
        cfg = self.training_config
        fused = use_fused_optimizer(
            cfg.fused_optimizer,
            self.device.type,
            bool(self.trainer.gradient_clip_val),
            str(self.trainer.precision),
        )
        kind = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
        optimizer = kind(
            self.parameter_groups(),
            lr=cfg.lr,
            betas=cfg.betas,
            eps=1e-9,
            **({"fused": True} if fused else {}),
        )
        if cfg.lr_schedule == "linear":
            if self.trainer.max_steps <= 0:
                raise ValueError(
                    "lr_schedule 'linear' decays to 0 at trainer.max_steps, which is not set"
                )
            schedule = linear_decay_schedule(cfg.warmup_steps, self.trainer.max_steps)
        else:
            schedule = inverse_sqrt_schedule(cfg.warmup_steps)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    # --- validation and test ----------------------------------------------------------
    def _evaluation_step(self, batch: dict) -> None:
        if not batch.get("scored", True):  # a stand-in batch of a rank with no sentence to score
            return
        self.eval_nll.update(self.nll(batch, 0.0))
        self.eval_tokens.update((batch["tgt_out"] != PAD_ID).sum())
        if self.val_bleu_enabled:
            plan = SearchPlan(
                1,
                1.0,
                1,
                self.training_config.max_len_a,
                self.training_config.max_len_b,
                never=tuple(self.tag_ids),
            )
            sources = [row[row != PAD_ID].tolist() for row in batch["src"]]
            found = search_batch(Search(self.model, plan), sources, batch["tgt_in"][:, 0].tolist())
            hypotheses = self.vocab.target.decode([best[0].tokens for best in found])
            self.eval_bleu.update(hypotheses, batch["references"], self._target_languages(batch))

    def _target_languages(self, batch: dict) -> list[str | None]:
        """Each row's target language, which BLEU's tokenizer follows: a many-to-many model's
        row carries its tag (at the decoder's start, or at the source's: its vocabulary is
        joint); a bilingual run's language is its data's (None without a data module: 13a)."""
        if self._tag_languages:
            return [
                self._tag_languages.get(int(tgt), self._tag_languages.get(int(src)))
                for tgt, src in zip(batch["tgt_in"][:, 0], batch["src"][:, 0], strict=True)
            ]
        run_data = getattr(getattr(self.trainer, "datamodule", None), "run_data", None)
        targets = run_data.target_languages if run_data is not None else []
        return [targets[0] if len(targets) == 1 else None] * len(batch["src"])

    def _evaluation_epoch_end(self, prefix: str) -> None:
        # The metrics' compute() already sums over all ranks, so every rank logs the same
        # values: no sync_dist (Lightning's DDP warning about it does not apply; and the BLEU
        # is a CPU tensor, which NCCL could not all-reduce).
        nll = self.eval_nll.compute() / self.eval_tokens.compute()
        self.log(f"{prefix}_loss", nll)
        self.log(f"{prefix}_ppl", torch.exp(nll))
        if self.val_bleu_enabled:
            self.log(f"{prefix}_bleu", self.eval_bleu.compute(), prog_bar=True)
        for metric in (self.eval_nll, self.eval_tokens, self.eval_bleu):
            metric.reset()

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluation_step(batch)

    def on_validation_epoch_end(self) -> None:
        self._evaluation_epoch_end("val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluation_step(batch)

    def on_test_epoch_end(self) -> None:
        self._evaluation_epoch_end("test")

    # --- checkpoint -------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Store what translation needs, in plain types, so the checkpoint stands alone."""
        checkpoint[ARTIFACT_KEY] = translation_artifact(
            self.model,
            self.vocab,
            tie_choice=self.tie_choice,
            training_config=self.training_config,
            run_config=self.run_config,
            target_tokens=self.target_tokens,
            target_tokens_by_language=self.target_tokens_by_language,
            started_from=self.started_from,
        )

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Resuming with another vocabulary would silently scramble every embedding row."""
        artifact = checkpoint.get(ARTIFACT_KEY, {})
        self.target_tokens = artifact.get("target_tokens", self.target_tokens)
        self.target_tokens_by_language = artifact.get(
            "target_tokens_by_language", self.target_tokens_by_language
        )
        self.started_from = artifact.get(STARTED_FROM_KEY, self.started_from)
        trained_tie = artifact.get("model_config", {}).get("tie_embeddings")
        if trained_tie is not None and trained_tie != self.model_config.tie_embeddings:
            raise UsageError(
                f"the checkpoint was trained with tie_embeddings {trained_tie}, but this run "
                f"builds {self.tie_choice.describe()}; resume with "
                f"--model.model.tie_embeddings {trained_tie}"
            )
        saved = artifact.get("vocab")
        if saved is not None and saved != self.vocab.state():
            raise ValueError(
                "the checkpoint was trained with a different SentencePiece vocabulary than the "
                "data module built; resume with the same corpus and vocabulary settings"
            )
