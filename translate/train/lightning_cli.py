"""translate-train's LightningCLI over the module and the data: what it adds, all decided before
anything is built (the command itself, `translate/cli/train.py`, imports this only after it
starts, so a worker process that imports the command's module as its main stays light).

- a run directory (`--run_dir`, else derived from the config and the data) that holds the logs
  and checkpoints, printed at the start and, with the checkpoint, at the end;
- `trainer.precision` chosen for the hardware where the config leaves it unset;
- with a checkpoint (`test --ckpt_path CKPT`), the data settings it was trained with;
- `--ckpt_path last`: the newest complete checkpoint of the run, by training step;
- plain progress lines where no progress bar can be drawn; at the end of fit, the length penalty
  tuned on the dev set.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_only

from translate.errors import UsageError
from translate.text.run_data import RunData
from translate.train.data_module import TranslationDataModule
from translate.train.lightning_module import TranslationModule
from translate.train.messages import show_on_stderr
from translate.train.quiet import quiet_third_party_noise
from translate.train.run_dir import (
    DATA_IDENTITY,
    bundled_corpus_name,
    checkpoint_data,
    checkpoint_settings,
    data_identity,
    default_run_dir,
    newest_checkpoint,
)

log = logging.getLogger(__name__)

PROG = "translate-train"
# Settings of a checkpoint's `data` section that belong to this machine, not to the data.
MACHINE_DATA_SETTINGS = {"cache_dir", "encode_workers"}
RESUME_KEYWORDS = {"last", "best", "hpc", "registry"}  # Lightning's named checkpoints


def say(message: str) -> None:
    """A line for the person running the training, from global rank 0 only (every DDP process
    runs this CLI)."""
    if rank_zero_only.rank == 0:
        log.info(message)


def given_flags(argv: list[str], section: str = "data") -> set[str]:
    """The settings of `section` (`data`, `model.model`) given on the command line
    (`--data.KEY VALUE` or `--data.KEY=VALUE`)."""
    prefix = f"--{section}."
    keys = (word[len(prefix) :].split("=", 1)[0] for word in argv if word.startswith(prefix))
    return {key for key in keys if "." not in key}


class SaveConfigToCheckpoint(SaveConfigCallback):
    """Writes config.yaml beside the logs and keeps the resolved config in every checkpoint."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        pl_module.run_config = self.parser.dump(self.config, skip_unset=False)


class TranslateCLI(LightningCLI):
    def __init__(self, *args, argv: list[str] | None = None, **kwargs) -> None:
        self.argv = sys.argv[1:] if argv is None else list(argv)
        self.started = time.perf_counter()
        super().__init__(*args, args=argv, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument(
            "--tune_search",
            type=bool,
            default=True,
            help="at the end of fit, choose the length penalty on the dev set and store it in the last "
            "checkpoint (translate-tune)",
        )
        parser.add_argument(
            "--init_from",
            type=str | None,
            default=None,
            help="start from this checkpoint: its weights, tie layout, model settings and "
            "SentencePiece vocabulary, with a fresh optimizer and schedule (fine-tuning on "
            "--data.corpus_dir; --data.mix_share mixes in its original corpus)",
        )
        parser.add_argument(
            "--run_dir",
            type=str | None,
            default=None,
            help="directory for this run's logs and checkpoints (default: runs/CONFIG, or "
            "runs/CONFIG-CORPUS-SRC-TGT when the command line gives other data)",
        )
        # The model's embedding shapes come from the vocabulary the data module trains.
        parser.link_arguments("data.vocab", "model.vocab", apply_on="instantiate")
        # tie_embeddings auto and shared_rows decide from how the training data uses it.
        parser.link_arguments("data.piece_use", "model.piece_use", apply_on="instantiate")
        parser.set_defaults(
            {
                # The batch sampler shards batches across ranks itself; Lightning must not wrap it
                # in a DistributedSampler, which would pad ranks with repeated examples.
                "trainer.use_distributed_sampler": False,
                # Checkpoints are written to a temporary file and renamed, so a kill mid-save never
                # corrupts the run's only checkpoint.
                "trainer.plugins": [
                    {"class_path": "translate.train.checkpoint_io.AtomicCheckpointIO"}
                ],
                # The module prints its own one-line summary (Lightning's table shows FLOPs of 0).
                "trainer.enable_model_summary": False,
            }
        )

    # --- before anything is built ----------------------------------------------------------
    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand]
        ckpt_path = config.get("ckpt_path")
        if ckpt_path and ckpt_path not in RESUME_KEYWORDS and not Path(ckpt_path).is_file():
            raise UsageError(f"--ckpt_path {ckpt_path}: no such checkpoint file")
        saved_run_dir = None
        if ckpt_path and Path(ckpt_path).is_file():
            saved = checkpoint_settings(ckpt_path)
            self.take_data_from_checkpoint(config, ckpt_path, saved.get("data"))
            # A resumed or evaluated run stays in its directory.
            saved_run_dir = saved.get("run_dir")
        if config.get("init_from"):
            self.start_from(config)
        data = config.data
        data.corpus_dir = self.absolute_corpus(data.corpus_dir, data.corpus_format)
        data.mix_corpus = self.absolute_corpus(data.mix_corpus, data.corpus_format)
        if data.get("directions"):  # a direction's own corpus, too
            data.directions = [
                [*d[:2], *(self.absolute_corpus(c, data.corpus_format) for c in d[2:])]
                for d in data.directions
            ]
        run_dir = Path(
            config.run_dir
            or saved_run_dir
            or default_run_dir(
                [Path(p) for p in config.get("config") or []],
                config.data,
                data_given=bool(given_flags(self.argv) & DATA_IDENTITY),
            )
        )
        config.run_dir = str(run_dir)
        self.place_outputs(config, run_dir)
        if self.subcommand == "fit" and not ckpt_path:
            self.refuse_other_run(config)
        if ckpt_path == "last":
            newest = newest_checkpoint(self.checkpoint_dirs(config))
            if newest is not None:
                config.ckpt_path = str(newest[0])
                say(
                    f"resuming from {newest[0]} (step {newest[1]:,}), the newest complete checkpoint"
                )
                self.take_data_from_checkpoint(config, config.ckpt_path, checkpoint_data(newest[0]))
        self.check_lengths(config)
        self.choose_precision(config)
        if config.trainer.get("enable_progress_bar") is None and not (
            sys.stdout.isatty() and sys.stderr.isatty()
        ):
            # A bar redrawn in a file shows nothing until the end.
            config.trainer.enable_progress_bar = False
        say(f"run directory {run_dir} (logs, config.yaml, checkpoints)")

    def start_from(self, config) -> None:
        """`--init_from CKPT`: the checkpoint's model and vocabulary settings (`starting.settle`)."""
        if self.subcommand != "fit":
            raise UsageError(
                f"--init_from starts a training run (fit), not {self.subcommand}: give the "
                "checkpoint as --ckpt_path"
            )
        from translate.train.starting import StartingPoint, settle

        start = StartingPoint.read(config.init_from)
        config.init_from = str(start.path)
        taken = settle(config, start, given_flags(self.argv, "model.model"), given_flags(self.argv))
        say(
            f"starting from {start.path} (step {start.step:,}): its weights and vocabulary, a "
            "fresh optimizer and schedule"
            + (f"; settings from it: {', '.join(taken)}" if taken else "")
        )

    def take_data_from_checkpoint(self, config, ckpt_path: str, saved: dict | None) -> None:
        """Evaluate or resume on the data the checkpoint was trained with: its saved `data`
        settings replace the config file's, except those given on the command line."""
        if not isinstance(saved, dict):
            return
        given = given_flags(self.argv)
        # Resuming continues the same batches; evaluating may batch as this machine prefers.
        local = MACHINE_DATA_SETTINGS | ({"max_tokens"} if self.subcommand != "fit" else set())
        taken = []
        for key, value in saved.items():
            if (
                key in config.data
                and key not in given
                and key not in local
                and config.data[key] != value
            ):
                config.data[key] = value
                taken.append(key)
        if config.data.get("vocab_from"):
            # A run started from another checkpoint: this one holds the same vocabulary.
            config.data.vocab_from = str(Path(ckpt_path).resolve())
        if taken:
            say(
                f"data settings from {ckpt_path}: {', '.join(f'{k}={saved[k]}' for k in sorted(taken))}"
            )

    @staticmethod
    def check_lengths(config) -> None:
        """A sentence of data.max_length tokens plus EOS (or BOS) must fit the model's positions,
        or the first long batch would stop the run."""
        max_length, positions = config.data.max_length, config.model.model.max_positions
        data = RunData.from_settings(config.data)
        # EOS or BOS, and a tag.
        added = 1 + (data.many_to_many and data.lang_tag == "source")
        if max_length + added > positions:
            what = "EOS or BOS added" if added == 1 else "EOS and the language tag added"
            raise UsageError(
                f"data.max_length {max_length} needs {max_length + added} positions ({what}), "
                f"but model.model.max_positions is {positions}: lower --data.max_length or raise "
                "--model.model.max_positions"
            )

    @staticmethod
    def absolute_corpus(corpus: str | None, corpus_format: str) -> str | None:
        """A local corpus directory as an absolute path, so the saved config still finds it from
        another working directory (translate-eval reads it from the checkpoint)."""
        if corpus and (corpus_format != "hf" or Path(corpus).is_dir()) and Path(corpus).exists():
            return str(Path(corpus).resolve())
        return corpus

    @staticmethod
    def place_outputs(config, run_dir: Path) -> None:
        """Put logs and checkpoints in the run directory: `{run_dir}` in any trainer setting
        (a logger's save_dir, a checkpoint callback's dirpath) becomes it, and a checkpoint
        callback without a directory gets RUN_DIR/checkpoints."""
        trainer = config.trainer
        if not trainer.get("default_root_dir"):
            trainer.default_root_dir = str(run_dir)
        _fill_placeholder(trainer, str(run_dir))
        for callback in trainer.get("callbacks") or []:
            init = getattr(callback, "init_args", None)
            if (
                callback.class_path.endswith("ModelCheckpoint")
                and init is not None
                and not init.get("dirpath")
            ):
                init.dirpath = str(run_dir / "checkpoints")

    @staticmethod
    def checkpoint_dirs(config) -> list[Path]:
        return [
            Path(c.init_args.dirpath)
            for c in config.trainer.get("callbacks") or []
            if c.class_path.endswith("ModelCheckpoint") and c.init_args.get("dirpath")
        ]

    def refuse_other_run(self, config) -> None:
        """A new run must not replace a checkpoint of other data (another corpus or language
        pair) in its run directory; running the same data again replaces it, as `make train`
        does."""
        ours = data_identity(config.data)
        for directory in self.checkpoint_dirs(config):
            last = directory / "last.ckpt"
            if not last.is_file():
                continue
            theirs = data_identity(checkpoint_data(last))
            if theirs != ours:
                raise UsageError(
                    f"{last} is a model of other data ({theirs[0] or bundled_corpus_name()}, {theirs[3]}→{theirs[4]}) "
                    f"that this run ({ours[0] or bundled_corpus_name()}, {ours[3]}→{ours[4]}) would replace: "
                    "choose another --run_dir, or move that run away"
                )

    @staticmethod
    def choose_precision(config) -> None:
        if config.trainer.get("precision") is not None:
            return
        from translate.train.precision import choose_precision

        precision, why = choose_precision(config.trainer.get("accelerator"))
        config.trainer.precision = precision
        say(f"precision {precision} ({why}); --trainer.precision chooses another")

    def before_fit(self) -> None:
        """A run started from a checkpoint (`--init_from`) takes its weights, unless it resumes
        (`--ckpt_path`), whose checkpoint holds them."""
        config = self.config.fit
        if config.get("init_from"):
            from translate.train.starting import StartingPoint

            self.model.start_from(
                StartingPoint.read(config.init_from), load_weights=not config.ckpt_path
            )

    # --- after the run ---------------------------------------------------------------------
    def after_fit(self) -> None:
        trainer = self.trainer
        if not trainer.is_global_zero:
            return
        elapsed = time.perf_counter() - self.started
        from translate.train.progress import clock

        max_steps = trainer.max_steps
        if (
            max_steps
            and max_steps > 0
            and trainer.global_step < max_steps
            and not trainer.interrupted
        ):
            stopper = (
                "an early-stopping callback"
                if trainer.should_stop and not _timer_expired(trainer)
                else None
            )
            reason = stopper or (
                "trainer.max_time" if _timer_expired(trainer) else "trainer.max_epochs"
            )
            say(
                f"WARNING: training stopped after {trainer.global_step:,} of {max_steps:,} updates ({reason}); "
                "the results are not those of the full budget"
            )
        checkpoint = _last_checkpoint(trainer)
        say(
            f"done: {trainer.global_step:,} updates in {clock(elapsed)}"
            + (
                f"; checkpoint {checkpoint} (translate-eval --checkpoint scores it)"
                if checkpoint
                else ""
            )
        )
        if checkpoint and self.config[self.subcommand].get("tune_search"):
            self.tune_search(checkpoint)

    def tune_search(self, checkpoint: str) -> None:
        """translate-tune on the last checkpoint: its length penalty chosen on the dev set."""
        from translate.decode.tuning import report, tune_checkpoint

        sentences = self.config[self.subcommand].data.get("dev_max_sentences") or 300
        settings = tune_checkpoint(checkpoint, self.trainer.strategy.root_device, "dev", sentences)
        say(
            f"length penalty {settings['length_penalty']:.1f} chosen on the dev set and stored in {checkpoint}:\n"
            + report(settings)
        )


RUN_DIR_PLACEHOLDER = "{run_dir}"


def _fill_placeholder(node, run_dir: str):
    """`node` with `{run_dir}` replaced in every string inside it (namespaces and lists in place)."""
    if isinstance(node, str):
        return node.replace(RUN_DIR_PLACEHOLDER, run_dir)
    if isinstance(node, list):
        node[:] = [_fill_placeholder(item, run_dir) for item in node]
    elif hasattr(node, "items") and hasattr(node, "__setitem__"):
        for key, value in list(node.items()):
            if isinstance(value, (str, list)) or hasattr(value, "items"):
                node[key] = _fill_placeholder(value, run_dir)
    return node


def _timer_expired(trainer) -> bool:
    from lightning.pytorch.callbacks import Timer

    return any(
        isinstance(c, Timer) and c.time_remaining() is not None and c.time_remaining() <= 0
        for c in trainer.callbacks
    )


def _last_checkpoint(trainer) -> str | None:
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, ModelCheckpoint):
            path = callback.last_model_path or callback.best_model_path
            if path and Path(path).is_file():
                return (
                    os.path.relpath(path)
                    if Path(path).resolve().is_relative_to(Path.cwd())
                    else path
                )
    return None


def help_parser_kwargs(argv: list[str]) -> dict:
    """For `SUBCOMMAND --config FILE --help`: the config files as the subcommand parser's default
    config files, so the help shows the values the run would use, not the class defaults."""
    if not {"--help", "-h"} & set(argv):
        return {}
    subcommand = next((w for w in argv if w in ("fit", "validate", "test", "predict")), None)
    configs = [argv[i + 1] for i, w in enumerate(argv[:-1]) if w in ("--config", "-c")]
    configs += [w.split("=", 1)[1] for w in argv if w.startswith("--config=")]
    return {subcommand: {"default_config_files": configs}} if subcommand and configs else {}


def run_cli(argv: list[str] | None = None) -> TranslateCLI:
    """Parse `argv` (default: the command line) and run the subcommand it names."""
    from translate.train.progress import ProgressLog

    quiet_third_party_noise()
    show_on_stderr(PROG)
    return TranslateCLI(
        TranslationModule,
        TranslationDataModule,
        save_config_callback=SaveConfigToCheckpoint,
        save_config_kwargs={"overwrite": True},
        trainer_defaults={"callbacks": [ProgressLog()]},
        parser_kwargs=help_parser_kwargs(sys.argv[1:] if argv is None else argv),
        argv=argv,
    )
