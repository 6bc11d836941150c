"""`translate-serve --checkpoint CKPT`: an HTTP translation service.

    POST /v1/translate  {"text": ["...", ...], "beam": 5, "target_lang": "de"} -> {"translations": [...]}
    LibreTranslate's  POST /translate {"q": ..., "source": "auto", "target": "de", "format": "html"},
                      GET /languages, POST /detect, GET /frontend/settings (its clients work as is),
                      POST /translate_file (a multipart form: file, source, target, api_key)
                      -> {"translatedFileUrl": ...}, GET /download_file/NAME
    GET  /            a page to type text into and translate
    GET  /health      alive;  GET /ready: ready once the model has translated a warm-up line
    GET  /info        languages, tie mode, vocabulary, checkpoint digest, limits
    GET  /metrics     Prometheus metrics;  GET /docs: the OpenAPI page

Lines of concurrent requests are translated together: they join the model's running search
between two of its steps, under --batch-tokens; every line's translation is what translate-cli
gives it. The model runs in a process of its own. SIGTERM or Ctrl-C stops accepting requests
and finishes those in flight within --drain-seconds; the rest get 503 with Retry-After.

Set TRANSLATE_DEBUG=1 for a traceback instead of a one-line error.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from translate.cli.common import (
    add_checkpoint_argument,
    add_engine_arguments,
    add_glossary_argument,
    add_output_arguments,
    add_quantize_argument,
    resolve_device,
    run_command,
)
from translate.defaults import BATCH_TOKENS
from translate.errors import UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="translate-serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_checkpoint_argument(parser)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only)",
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)"
    )
    parser.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="require the API key held by environment variable NAME: in header X-API-Key or "
        "Authorization: Bearer (both APIs), or in LibreTranslate's field api_key (JSON body, "
        "form or query)",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        default=None,
        metavar="IPS",
        help="trust X-Forwarded-For and X-Forwarded-Proto from these proxy addresses (comma-"
        "separated, as uvicorn takes them; '*' any), so that --req-limit counts the client the "
        "proxy names (default: trust none; every client is the address that connected)",
    )
    parser.add_argument(
        "--req-limit",
        type=int,
        default=None,
        metavar="N",
        help="sentences a minute per API key or client address (a request costs one a sentence "
        "the model searches: each line of the native API, each sentence of LibreTranslate's texts "
        "and HTML text nodes, each sentence of a line too long for the model); beyond, 429, and "
        "413 for a request of more (default: no limit)",
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=BATCH_TOKENS,
        help=f"source tokens in a running search (default: {BATCH_TOKENS}; a longer line alone)",
    )
    parser.add_argument(
        "--max-cache-mib",
        type=int,
        default=None,
        metavar="MIB",
        help="attention cache a running search holds at most, counted for each sentence at its "
        "length limit (default: bounded by --batch-tokens alone)",
    )
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=1024,
        help="sentences a request, as the model searches them (each line of the native API, each "
        "sentence of LibreTranslate's texts and HTML text nodes, each sentence of a line too "
        "long for the model); beyond, 413 (default: 1024)",
    )
    parser.add_argument(
        "--max-line-chars",
        type=int,
        default=4000,
        help="characters a line of the native API (beyond, 413); a longer sentence of the "
        "LibreTranslate API is cut at a space into pieces of this size (default: 4000)",
    )
    parser.add_argument(
        "--char-limit",
        type=int,
        default=None,
        metavar="N",
        help="LibreTranslate's --char-limit: characters of each text of a LibreTranslate call "
        "(markup included); beyond, 400 (default: no limit, as LibreTranslate's)",
    )
    parser.add_argument(
        "--max-body-bytes", type=int, default=1 << 20, help="bytes a request body (default: 1 MiB)"
    )
    parser.add_argument(
        "--disable-files-translation",
        action="store_true",
        help="answer LibreTranslate's POST /translate_file with 403, as LibreTranslate's flag of "
        "this name does (default: files are translated)",
    )
    parser.add_argument(
        "--files-dir",
        default=None,
        metavar="DIR",
        help="where translated files are kept until they expire (made if missing; only the files "
        "this server writes there are ever removed) (default: a temporary directory, removed at "
        "exit)",
    )
    parser.add_argument(
        "--file-max-bytes",
        type=int,
        default=10 << 20,
        metavar="N",
        help="bytes a file sent to POST /translate_file (its form may hold 64 KiB more; "
        "--max-body-bytes is for the other routes); beyond, 413 (default: 10 MiB)",
    )
    parser.add_argument(
        "--file-expiry-seconds",
        type=float,
        default=1800.0,
        metavar="S",
        help="how long a translated file can be downloaded; then it is removed (default: 1800, "
        "LibreTranslate's 30 minutes)",
    )
    parser.add_argument(
        "--max-queued-sentences",
        type=int,
        default=4096,
        help="sentences sent to the model and not yet answered, of all requests; beyond, requests "
        "get 503 with Retry-After (default: 4096)",
    )
    parser.add_argument(
        "--cache-entries",
        type=int,
        default=10_000,
        help="lines whose translations are kept, for the requests that send them again (keyed "
        "by the line and every search setting); 0: none (default: 10000)",
    )
    parser.add_argument(
        "--max-beam", type=int, default=16, help="largest beam a request may ask for (default: 16)"
    )
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=30.0,
        help="on SIGTERM or Ctrl-C, how long requests in flight have to finish; those still "
        "unanswered then get 503 with Retry-After (default: 30)",
    )
    parser.add_argument(
        "--model-timeout",
        type=float,
        default=30.0,
        help="seconds the model process may hold requests without a word (it sends a heartbeat "
        "every second while it works, however long the search); beyond, it is taken for stalled, "
        "killed and replaced, and its requests get 503 with Retry-After (default: 30)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where to translate (default: auto, CUDA where torch sees a GPU)",
    )
    add_quantize_argument(parser)
    add_engine_arguments(parser, default="auto")
    add_output_arguments(parser)
    add_glossary_argument(parser)
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads for torch and CTranslate2"
    )
    return parser


def settings_error(args: argparse.Namespace) -> str | None:
    for flag in (
        "batch_tokens",
        "max_sentences",
        "max_line_chars",
        "max_body_bytes",
        "max_queued_sentences",
        "max_beam",
        "file_max_bytes",
    ):
        if getattr(args, flag) < 1:
            return f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}"
    for flag in ("req_limit", "char_limit", "max_input_tokens", "max_cache_mib"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            return f"--{flag.replace('_', '-')} must be at least 1, got {value}"
    if args.cache_entries < 0:
        return f"--cache-entries must be 0 or more, got {args.cache_entries}"
    if args.max_sentences > args.max_queued_sentences:
        return (
            f"--max-sentences {args.max_sentences} is over --max-queued-sentences "
            f"{args.max_queued_sentences}: such a request could never be queued"
        )
    if not 0 <= args.drain_seconds < float("inf"):
        return f"--drain-seconds must be 0 or more (and finite), got {args.drain_seconds}"
    if args.files_dir and Path(args.files_dir).exists() and not Path(args.files_dir).is_dir():
        return f"--files-dir {args.files_dir}: not a directory"
    if not 0 < args.file_expiry_seconds < float("inf"):
        return (
            f"--file-expiry-seconds must be more than 0 (and finite), got "
            f"{args.file_expiry_seconds}"
        )
    if not 0 < args.model_timeout < float("inf"):
        return f"--model-timeout must be more than 0 (and finite), got {args.model_timeout}"
    if not 0 <= args.port < 65536:
        return f"--port must be between 0 and 65535, got {args.port}"
    return None


def api_key(name: str | None) -> str | None:
    if name is None:
        return None
    key = os.environ.get(name, "")
    if not key:
        raise UsageError(
            f"--api-key-env {name}: the environment variable {name} is not set or empty"
        )
    return key


def serve(args: argparse.Namespace) -> int:
    error = settings_error(args)
    if error:
        raise UsageError(error)
    key = api_key(args.api_key_env)
    import uvicorn

    from translate.decode.device import set_threads
    from translate.decode.loaded_model import load_model
    from translate.decode.pipeline import check_glossary
    from translate.decode.settings import Budget, EngineChoice, SearchSettings
    from translate.files import file_digest
    from translate.model.quantize import quantization_available
    from translate.serve.app import DrainingServer, ServeSettings, create_app
    from translate.serve.files import FileSettings
    from translate.serve.worker import ModelSettings
    from translate.text.glossary import Glossary

    args.precision = "32-true"
    device = resolve_device(args)
    set_threads(args.threads)
    if args.quantize == "int8" and not quantization_available():
        raise UsageError("--quantize int8: this PyTorch build has no quantized CPU engine")
    # Only for the vocabulary (token counts), the languages and /info: the model process holds
    # the weights and translates, so this copy holds none.
    loaded = load_model(args.checkpoint, weights=False)
    glossary = None
    if args.glossary_file:  # refused now, where the model cannot keep terms, not per request
        glossary = Glossary.read(args.glossary_file)
        check_glossary(loaded, glossary)
    if args.restrict_target:  # refused now, where the checkpoint cannot restrict, not per request
        for lang in loaded.data.target_languages if loaded.multilingual() else [None]:
            loaded.target_token_mask(lang)
    budget = Budget(
        args.batch_tokens, None if args.max_cache_mib is None else args.max_cache_mib << 20
    )
    settings = ServeSettings(
        budget=budget,
        max_sentences=args.max_sentences,
        max_line_chars=args.max_line_chars,
        max_body_bytes=args.max_body_bytes,
        max_queued_sentences=args.max_queued_sentences,
        cache_entries=args.cache_entries,
        max_beam=args.max_beam,
        api_key=key,
        req_limit=args.req_limit,
        char_limit=args.char_limit,
        checkpoint_digest=file_digest(args.checkpoint),
        drain_seconds=args.drain_seconds,
        model_timeout=args.model_timeout,
        search=SearchSettings(
            max_len_a=args.max_len_a,
            max_len_b=args.max_len_b,
            max_input_tokens=args.max_input_tokens,
            restrict_to_target=args.restrict_target,
            glossary=glossary,
        ),
    )
    engine = EngineChoice.from_args(args)
    model_process = ModelSettings(args.checkpoint, str(device), args.threads, budget, engine)
    file_settings = None
    if not args.disable_files_translation:
        file_settings = FileSettings(
            directory=Path(args.files_dir) if args.files_dir else None,
            max_bytes=args.file_max_bytes,
            expiry_seconds=args.file_expiry_seconds,
        )
    app = create_app(loaded, settings, model_process, file_settings)
    print(
        f"translate-serve: {args.checkpoint} on {device}; http://{args.host}:{args.port}/ "
        f"(API docs at /docs){'; API key required' if key else ''}",
        file=sys.stderr,
    )
    # uvicorn's own graceful timeout, after which it cancels requests (500s), comes only after the
    # service has answered every request: within the drain, or with 503 at its end.
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=int(args.drain_seconds) + 10,
        # uvicorn trusts X-Forwarded-For from 127.0.0.1 by default: any local proxy's clients,
        # or a forged header, would each get a rate bucket of their own.
        proxy_headers=args.forwarded_allow_ips is not None,
        forwarded_allow_ips=args.forwarded_allow_ips,
    )
    # What is alive now (torch, the vocabulary, the application) lives as long as the server: out
    # of the collector's reach, a full collection walks only what requests made since, so it no
    # longer stops the event loop for a tenth of a second.
    gc.collect()
    gc.freeze()
    DrainingServer(config, app.state.service).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("translate-serve", lambda: serve(args))


if __name__ == "__main__":
    sys.exit(main())
