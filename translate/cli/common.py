"""What the commands share: one spelling of each flag, and one way to fail.

Nothing heavy is imported here: torch and the model load only after the arguments are parsed,
so `--help` and a mistyped flag answer at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from translate.decode.settings import ENGINES
from translate.defaults import BATCH_TOKENS, LENGTH_PENALTY_RANGE

PRECISIONS = ("32-true", "bf16-mixed", "16-mixed")  # spelled as in training (trainer.precision)
DEBUG_VARIABLE = "TRANSLATE_DEBUG"  # set to 1 for a traceback instead of a one-line error


def add_checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint", required=True, metavar="CKPT", help="a checkpoint from translate-train"
    )


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where to translate (default: auto, CUDA where torch sees a GPU, else the CPU)",
    )
    parser.add_argument(
        "--precision",
        default="32-true",
        choices=PRECISIONS,
        help="as trainer.precision: 32-true (default), bf16-mixed, or 16-mixed (CUDA only); "
        "scores are computed in float32 either way",
    )


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """The search settings, shared by translate-cli and translate-eval so both read alike."""
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=BATCH_TOKENS,
        help=f"source tokens per batch (default: {BATCH_TOKENS})",
    )
    parser.add_argument(
        "--beam",
        type=int,
        default=None,
        help="beam size (default: the checkpoint's, tuned with its length penalty; else 5); "
        "1 is greedy search",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        help="GNMT length penalty alpha: hypotheses are ranked by log-prob / ((5 + length) / 6) "
        "** alpha; 0 = raw log-prob (default: the value tuned on the dev set at the end of "
        "training and stored in the checkpoint, else 1.0)",
    )
    add_glossary_argument(parser)
    add_output_arguments(parser)
    add_quantize_argument(parser)
    add_device_arguments(parser)
    add_engine_arguments(parser)


def add_glossary_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--glossary",
        dest="glossary_file",
        metavar="FILE",
        help="source terms and the target terms to write for them, one 'source<TAB>target' a "
        "line: each term found (as written, whole words) comes out as its target term, once "
        "(a model trained with protected spans)",
    )


def add_engine_arguments(parser: argparse.ArgumentParser, default: str = "pytorch") -> None:
    parser.add_argument(
        "--engine",
        default=default,
        choices=ENGINES,
        help="the search: pytorch (our own), ctranslate2 (CTranslate2 on the CPU, the checkpoint "
        "converted once; a line whose protected spans it does not keep is searched by pytorch), "
        "or auto (ctranslate2 on the CPU where the model converts and the package is installed, "
        f"else pytorch); default: {default}",
    )
    parser.add_argument(
        "--engine-cache",
        default=None,
        metavar="DIR",
        help="where CTranslate2's conversions of checkpoints are kept (default: beside each)",
    )


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """What bounds and shapes every output whatever the beam: shared by
    the commands that search and by translate-serve, so that both translate alike."""
    parser.add_argument(
        "--max-len-a",
        type=float,
        default=None,
        help="at most A * source length + B output tokens (default: the checkpoint's training setting)",
    )
    parser.add_argument("--max-len-b", type=int, default=None, help="see --max-len-a")
    parser.add_argument(
        "--max-input-tokens",
        type=int,
        default=None,
        help="translate a line over this many source tokens sentence by sentence "
        "(default: the longest training sentence, data.max_length)",
    )
    parser.add_argument(
        "--restrict-target",
        action="store_true",
        help="produce only tokens seen on the target side of the training data (a vocabulary "
        "shortlist)",
    )


def add_quantize_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantize",
        default="none",
        choices=["none", "int8"],
        help="int8: dynamically quantized linear layers, faster on the CPU at a small cost "
        "in BLEU (CPU and 32-true only; default: none)",
    )


def add_language_arguments(parser: argparse.ArgumentParser) -> None:
    """The output language of a many-to-many model, and the input's language where known."""
    parser.add_argument(
        "--target-lang",
        default=None,
        metavar="LANG",
        help="a many-to-many model's output language (one of those it was trained on)",
    )
    parser.add_argument(
        "--source-lang",
        default=None,
        metavar="LANG",
        help="the input's language: a direction the model was not trained on is said (zero-shot)",
    )


SEARCH_FLAGS = (
    "--batch-tokens",
    "--beam",
    "--length-penalty",
    "--max-len-a",
    "--max-len-b",
    "--max-input-tokens",
    "--restrict-target",
    "--quantize",
    "--device",
    "--precision",
    "--engine",
    "--glossary",
)


def search_settings_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the parsed search flags, or None (checked before any work)."""
    low, high = LENGTH_PENALTY_RANGE
    if args.beam is not None and args.beam < 1:
        return f"--beam must be at least 1, got {args.beam}"
    if args.length_penalty is not None and not low <= args.length_penalty <= high:
        return f"--length-penalty must be between {low:g} and {high:g}, got {args.length_penalty}"
    if args.batch_tokens < 1:
        return f"--batch-tokens must be at least 1, got {args.batch_tokens}"
    if args.max_input_tokens is not None and args.max_input_tokens < 1:
        return f"--max-input-tokens must be at least 1, got {args.max_input_tokens}"
    n_best = getattr(args, "n_best", 1)
    if n_best < 1 or (args.beam is not None and n_best > args.beam):
        return f"--n-best {n_best} must be between 1 and the beam size (--beam {args.beam})"
    if args.precision == "16-mixed" and args.device == "cpu":
        return "--precision 16-mixed (float16 autocast) needs a CUDA device; on the CPU use bf16-mixed or 32-true"
    if args.quantize == "int8" and (args.device == "cuda" or args.precision != "32-true"):
        return "--quantize int8 runs on the CPU in 32-true: add --device cpu and leave --precision at 32-true"
    return None


def apply_search_defaults(args: argparse.Namespace, loaded) -> None:
    """Fill --beam and --length-penalty where not given from the checkpoint's tuned settings
    (`LoadedModel.search_defaults`), and check the flags again with them."""
    from translate.errors import UsageError

    args.beam, args.length_penalty = loaded.search_defaults().fill(args.beam, args.length_penalty)
    error = search_settings_error(args)
    if error:
        raise UsageError(error)


def resolve_device(args: argparse.Namespace) -> str:
    """`--device` made concrete (auto: CUDA where torch sees a GPU); a UsageError where the
    device or the precision cannot run here."""
    from translate.decode.device import cuda_available
    from translate.errors import UsageError

    device = args.device
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    elif device == "cuda" and not cuda_available():
        raise UsageError("--device cuda asked for, but torch sees no CUDA device")
    if args.precision == "16-mixed" and device != "cuda":
        raise UsageError(
            "--precision 16-mixed (float16 autocast) needs a CUDA device; torch sees none"
        )
    if getattr(args, "quantize", "none") == "int8" and device != "cpu":
        raise UsageError("--quantize int8 runs on the CPU: add --device cpu")
    return device


def load_for_search(prog: str, args: argparse.Namespace, checkpoint: str, device: str):
    """`checkpoint` loaded on `device` with the engine `--engine` asks for; the engine chosen and
    why is said on stderr unless it is the PyTorch search asked for."""
    from translate.decode.engine import load_searching
    from translate.decode.settings import EngineChoice

    choice = EngineChoice.from_args(args)
    loaded = load_searching(checkpoint, device, choice, args.precision)
    if args.engine != "pytorch":
        print(f"{prog}: searching with {loaded.engine}", file=sys.stderr)
    return loaded


def handed_back_note(prog: str, loaded) -> None:
    """Where CTranslate2 searched, how many sentences it answered, repaired and handed back to the
    PyTorch search, on stderr."""
    engine = loaded.ctranslate2
    if engine is None or not (engine.counts.repaired or engine.counts.handed_back):
        return
    counts = engine.counts
    print(
        f"{prog}: CTranslate2 answered {counts.answered:,} sentences ({counts.repaired:,} "
        f"repaired to write their protected spans once each); {counts.handed_back:,} went to the "
        "PyTorch search",
        file=sys.stderr,
    )


def given_flags(argv: list[str] | None, flags: tuple[str, ...]) -> list[str]:
    """Those of `flags` that appear on the command line (`--flag` or `--flag=value`)."""
    words = sys.argv[1:] if argv is None else argv
    return [flag for flag in flags if any(w == flag or w.startswith(flag + "=") for w in words)]


def usage_message(error: Exception) -> str:
    """A library's error worded for the command line: a typed error with the flag that sets
    what it names, any other as its own message."""
    # An error of a module not imported cannot have been raised: nothing is imported to word it.
    pipeline = sys.modules.get("translate.decode.pipeline")
    evaluation = sys.modules.get("translate.decode.evaluation")
    scored_text = sys.modules.get("translate.score.scored_text")
    if pipeline and isinstance(error, pipeline.TargetLanguageError):
        model = str(error.model_path)
        if error.asked is None:
            return (
                f"{model} is a many-to-many model: choose the output language with "
                f"--target-lang (one of {', '.join(error.known)})"
            )
        return f"--target-lang {error.asked}: {error.reason(model)}"
    if evaluation and isinstance(error, evaluation.UnrecordedDataError):
        return f"{error}: give --source and --reference (or --test-set)"
    if evaluation and isinstance(error, evaluation.OwnCorpusError):
        return (
            f"{error.error} ({error.model_path} was trained on this corpus; give --source and "
            "--reference to score other text)"
        )
    if evaluation and isinstance(error, evaluation.DirectionError):
        return f"--directions: {error}"
    if evaluation and isinstance(error, evaluation.TestSetPairError):
        return (
            f"--test-set {error.name}: give --language-pair; the checkpoint does not say its one "
            "pair of languages"
        )
    test_sets = sys.modules.get("translate.score.test_sets")
    if test_sets and isinstance(error, test_sets.TestSetError):
        if error.field == "pair":
            return f"--language-pair {error.pair}: {error.detail}"
        if error.field == "cache":
            return f"--test-set {error.name} {error.pair} {error.detail}"
        return f"--test-set {error.name}: {error.detail}"
    metrics = sys.modules.get("translate.score.metrics")
    if metrics and isinstance(error, metrics.SourcesNeededError):
        return f"--metrics {error} (--source, or --test-set)"
    if scored_text and isinstance(error, scored_text.LineCountError):
        return (
            f"--source {error.source} has {error.lines} lines but --reference {error.reference} "
            f"has {error.reference_lines}: every line needs one reference"
        )
    return str(error)


def zero_shot_warning(checkpoint: str, source_lang: str | None, tags) -> None:
    """On stderr, where `tags` (`pipeline.TargetTags`) ask for a direction the model was not
    trained on."""
    if tags.zero_shot:
        print(
            f"warning: {checkpoint} was not trained on {source_lang}→{tags.target_lang}: "
            "translating zero-shot",
            file=sys.stderr,
        )


def split_line_warning(split) -> None:
    """On stderr: an over-long line (`pipeline.SplitLine`) is translated in parts."""
    print(
        f"warning: line {split.number} has {split.tokens} tokens, more than the {split.limit} the "
        f"model was trained on or can read; translating it in {split.parts} segments",
        file=sys.stderr,
    )


def run_command(prog: str, main: Callable[[], int]) -> int:
    """`main()`, with the failures a user can act on reported in one line (no traceback unless
    TRANSLATE_DEBUG=1): a UsageError as `PROG: error: ...` (status 2), Ctrl-C as status 130, and
    a closed output pipe (`| head`) silently."""
    from translate.errors import UsageError

    debug = os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    try:
        return main()
    except UsageError as error:
        if debug:
            raise
        print(f"{prog}: error: {usage_message(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        return 130
    except BrokenPipeError:
        # The reader left: nothing more can be shown. Point stdout at /dev/null so that the
        # interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a process a closed pipe ended
