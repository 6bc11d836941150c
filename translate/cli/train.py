"""`translate-train fit|validate|test --config configs/X.yaml`: LightningCLI over the module and data.

The same command runs on one device, on all GPUs of a node (`trainer.devices`, `strategy: ddp`)
and on several nodes (`trainer.num_nodes`, one process per GPU started by torchrun or SLURM's
srun); `fit --ckpt_path CKPT|last` resumes exactly where a checkpoint left off.
"""

from __future__ import annotations

from lightning.pytorch.cli import LightningCLI, SaveConfigCallback

from translate.data import TranslationDataModule
from translate.module import TranslationModule


class SaveConfigToCheckpoint(SaveConfigCallback):
    """Writes config.yaml beside the logs and keeps the resolved config in every checkpoint."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        pl_module.run_config = self.parser.dump(self.config, skip_none=False)


class TranslateCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # The model's embedding shapes come from the vocabulary the data module trains.
        parser.link_arguments("data.vocab", "model.vocab", apply_on="instantiate")
        # The batch sampler shards batches across ranks itself; Lightning must not wrap it in a
        # DistributedSampler, which would pad ranks with repeated examples.
        parser.set_defaults({"trainer.use_distributed_sampler": False})
        # Checkpoints are written to a temporary file and renamed, so a kill mid-save never
        # corrupts the run's only checkpoint.
        parser.set_defaults(
            {"trainer.plugins": [{"class_path": "translate.checkpoint_io.AtomicCheckpointIO"}]}
        )


def main() -> None:
    TranslateCLI(
        TranslationModule,
        TranslationDataModule,
        save_config_callback=SaveConfigToCheckpoint,
        save_config_kwargs={"overwrite": True},
    )


if __name__ == "__main__":
    main()
