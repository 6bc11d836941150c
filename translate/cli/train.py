"""`translate-train fit|validate|test --config configs/X.yaml`: LightningCLI over the module and data.

The same command runs on one device, on all GPUs of a node (`trainer.devices`, `strategy: ddp`)
and on several nodes (`trainer.num_nodes`, one process per GPU started by torchrun or SLURM's
srun); `fit --ckpt_path CKPT|last` resumes exactly where a checkpoint left off. What it adds to
LightningCLI (run directories, the precision, resuming, progress lines, the tuned length
penalty) is `translate/train/lightning_cli.py`.
"""

from __future__ import annotations

import sys

from translate.cli.common import run_command


def main(argv: list[str] | None = None) -> int:
    def run() -> int:
        # Lightning is imported here, not at the top: the encoding workers are spawned processes,
        # which import the main module (this one) again before their work.
        from translate.train.lightning_cli import run_cli

        run_cli(argv)
        return 0

    return run_command("translate-train", run)


if __name__ == "__main__":
    sys.exit(main())
