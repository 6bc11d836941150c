"""What Lightning and its dependencies print that says nothing about the run, silenced at the source."""

from __future__ import annotations

import logging
import warnings


def quiet_third_party_noise() -> None:
    """Silence what third parties print that says nothing about this run: Lightning's adverts
    for its cloud products, and warnings about its own internals (deprecations in its pytree
    helper). Warnings about the run itself are kept."""

    class NoAdverts(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not str(record.getMessage()).startswith("💡 Tip:")

    for name in ("lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero"):
        logging.getLogger(name).addFilter(NoAdverts())
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")
    # jsonargparse deprecations that Lightning's own calls trigger
    warnings.filterwarnings("ignore", message=r"\s*skip_none parameter was deprecated")
    warnings.filterwarnings(
        "ignore",
        message=r"\s*``(ArgumentParser.add_instantiator|instantiate_classes)`` was deprecated",
    )
    # run_cli(argv) from Python (the tying study, tests) is meant: argv replaces the command line.
    warnings.filterwarnings(
        "ignore", message=r"LightningCLI's args parameter is intended to run from within Python"
    )
    # Trainer.predict over lists of lines: there are no sample indices to infer.
    warnings.filterwarnings(
        "ignore", message=r"Couldn't infer the batch indices fetched from your dataloader"
    )
