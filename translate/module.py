"""The LightningModule: label-smoothed loss, Adam with inverse-square-root warm-up, validation BLEU.

Validation statistics are torchmetrics states (sums of loss, token counts and sacrebleu's
n-gram counts), so under DDP they are summed over all ranks before the score is computed: the
figure equals the single-process one on the same data.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import Literal

import lightning as L
import torch
import torch.nn.functional as F
from torchmetrics import SumMetric

from translate.metrics import CorpusBLEU
from translate.model import ModelConfig, Transformer
from translate.search import greedy_search
from translate.vocab import PAD_ID, Vocabularies

ARTIFACT_KEY = "translate"  # checkpoint entry holding everything needed to translate


def label_smoothed_nll(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Sum over non-pad target tokens of cross-entropy against (1 - e) one-hot + e uniform."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1),
        ignore_index=PAD_ID, label_smoothing=smoothing, reduction="sum",
    )


def inverse_sqrt_schedule(warmup_steps: int):
    """Linear warm-up to 1, then decay as sqrt(warmup / step) (Vaswani et al., 2017)."""

    def factor(step: int) -> float:
        step = step + 1
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

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


class TranslationModule(L.LightningModule):
    """Trains a `Transformer`; `vocab` comes from the data module (linked by the CLI)."""

    def __init__(
        self,
        vocab: Vocabularies,
        model: ModelConfig | None = None,
        lr: float = 7e-4,
        warmup_steps: int = 4000,
        lr_schedule: LrSchedule = "inverse_sqrt",
        betas: tuple[float, float] = (0.9, 0.98),
        weight_decay: float = 0.0,
        label_smoothing: float = 0.1,
        val_bleu: bool = True,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
    ) -> None:
        super().__init__()
        self.vocab = vocab
        self.model_config = model or ModelConfig()
        self.model = Transformer(
            self.model_config, len(vocab.source), len(vocab.target), shared_vocab=vocab.joint
        )
        self.training_config = {
            "lr": lr, "warmup_steps": warmup_steps, "lr_schedule": lr_schedule, "betas": list(betas),
            "weight_decay": weight_decay, "label_smoothing": label_smoothing,
            "max_len_a": max_len_a, "max_len_b": max_len_b,
        }
        self.val_bleu_enabled = val_bleu
        self.run_config: str | None = None  # the resolved CLI config, set by the CLI
        self.target_tokens: list[int] | None = None  # ids seen on the target side of the training data
        self.eval_nll, self.eval_tokens = SumMetric(), SumMetric()
        self.eval_bleu = CorpusBLEU()
        self._throughput_start: tuple[float, int] | None = None
        self._tokens_seen = 0

    # --- training -------------------------------------------------------------------
    def on_fit_start(self) -> None:
        """Record which ids the training targets use, so decoding can be restricted to them."""
        datamodule = getattr(self.trainer, "datamodule", None)
        if self.target_tokens is None and hasattr(datamodule, "target_tokens"):
            self.target_tokens = datamodule.target_tokens()

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        logits = self.model(batch["src"], batch["tgt_in"], PAD_ID)
        tokens = int((batch["tgt_out"] != PAD_ID).sum())
        loss = label_smoothed_nll(logits, batch["tgt_out"], self.training_config["label_smoothing"]) / tokens
        self._tokens_seen += tokens
        self.log("train_loss", loss, prog_bar=True)
        self.log("lr", self.optimizers().param_groups[0]["lr"], prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        """Target tokens per second over the steps since the last log."""
        now = time.perf_counter()
        if self._throughput_start is None:
            self._throughput_start = (now, self._tokens_seen)
            return
        if self.trainer.global_step % max(self.trainer.log_every_n_steps, 1) == 0:
            start, seen = self._throughput_start
            if now > start:
                rate = (self._tokens_seen - seen) / (now - start) * self.trainer.world_size
                self.log("train_tgt_tokens_per_sec", rate, prog_bar=True)
            self._throughput_start = (now, self._tokens_seen)

    def configure_optimizers(self):
        cfg = self.training_config
        optimizer = torch.optim.Adam(
            self.parameters(), lr=cfg["lr"], betas=tuple(cfg["betas"]), eps=1e-9,
            weight_decay=cfg["weight_decay"],
        )
        if cfg["lr_schedule"] == "linear":
            if self.trainer.max_steps <= 0:
                raise ValueError("lr_schedule 'linear' decays to 0 at trainer.max_steps, which is not set")
            schedule = linear_decay_schedule(cfg["warmup_steps"], self.trainer.max_steps)
        else:
            schedule = inverse_sqrt_schedule(cfg["warmup_steps"])
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # --- validation and test ----------------------------------------------------------
    def _evaluation_step(self, batch: dict) -> None:
        logits = self.model(batch["src"], batch["tgt_in"], PAD_ID)
        self.eval_nll.update(label_smoothed_nll(logits, batch["tgt_out"], 0.0))
        self.eval_tokens.update((batch["tgt_out"] != PAD_ID).sum())
        if self.val_bleu_enabled:
            hypotheses = self.vocab.target.decode(
                greedy_search(self.model, batch["src"], self.training_config["max_len_a"],
                              self.training_config["max_len_b"])
            )
            self.eval_bleu.update(hypotheses, batch["references"])

    def _evaluation_epoch_end(self, prefix: str) -> None:
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
        checkpoint[ARTIFACT_KEY] = {
            "model_config": asdict(self.model_config),
            "src_vocab_size": self.model.src_vocab_size,
            "tgt_vocab_size": self.model.tgt_vocab_size,
            "vocab": self.vocab.state(),
            "training_config": self.training_config,
            "run_config": self.run_config,
            "target_tokens": self.target_tokens,
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Resuming with another vocabulary would silently scramble every embedding row."""
        artifact = checkpoint.get(ARTIFACT_KEY, {})
        self.target_tokens = artifact.get("target_tokens", self.target_tokens)
        saved = artifact.get("vocab")
        if saved is not None and saved != self.vocab.state():
            raise ValueError(
                "the checkpoint was trained with a different SentencePiece vocabulary than the "
                "data module built; resume with the same corpus and vocabulary settings"
            )
