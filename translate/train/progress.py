"""Training progress as plain lines, for runs whose output goes to a file or a pipe.

Lightning's progress bar redraws one terminal line; written to a file it shows nothing until the
end. Where no bar is shown, this callback logs a line (`messages`) every
`trainer.log_every_n_steps` updates (step, loss, target tokens/s, learning rate, elapsed time and
ETA) and one after every validation, on global rank 0.
"""

from __future__ import annotations

import logging
import math
import time

import lightning as L

log = logging.getLogger(__name__)


def clock(seconds: float) -> str:
    """H:MM:SS, or M:SS under an hour."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def metric(trainer: L.Trainer, name: str) -> float | None:
    value = trainer.callback_metrics.get(name)
    return None if value is None else float(value)


class ProgressLog(L.Callback):
    """Plain progress lines on stderr wherever Lightning shows no progress bar."""

    def __init__(self) -> None:
        self._start: float | None = None
        self._start_step = 0
        self._printed_step = -1

    def _active(self, trainer: L.Trainer) -> bool:
        return trainer.is_global_zero and trainer.progress_bar_callback is None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start, self._start_step = time.perf_counter(), trainer.global_step

    def total_steps(self, trainer: L.Trainer) -> int | None:
        """The updates this run will make, where the trainer knows them."""
        try:
            total = trainer.estimated_stepping_batches
        except Exception:  # an iterable dataset of unknown length
            return None
        return int(total) if math.isfinite(total) else None

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx
    ) -> None:
        step = trainer.global_step
        every = max(trainer.log_every_n_steps, 1)
        if (
            not self._active(trainer)
            or step == self._printed_step
            or step % every
            or self._start is None
        ):
            return
        self._printed_step = step
        elapsed = time.perf_counter() - self._start
        total = self.total_steps(trainer)
        parts = [f"step {step:,}" + (f"/{total:,} ({100 * step / total:.0f}%)" if total else "")]
        loss, speed, lr = (
            metric(trainer, "train_loss"),
            metric(trainer, "train_tgt_tokens_per_sec"),
            metric(trainer, "lr"),
        )
        if loss is not None:
            parts.append(f"loss {loss:.3f}")
        if speed is not None:
            parts.append(f"{speed:,.0f} tgt tok/s")
        if lr is not None:
            parts.append(f"lr {lr:.2e}")
        parts.append(f"elapsed {clock(elapsed)}")
        done = step - self._start_step
        if total and done > 0:
            parts.append(f"ETA {clock(elapsed / done * (total - step))}")
        log.info(" · ".join(parts))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._active(trainer) or trainer.sanity_checking:
            return
        scores = [
            f"{name.removeprefix('val_')} {value:.2f}"
            for name in ("val_bleu", "val_loss", "val_ppl")
            if (value := metric(trainer, name)) is not None
        ]
        if scores:
            log.info(f"validation at step {trainer.global_step:,}: {', '.join(scores)}")
