"""translate-serve under load: closed-loop clients over loopback, continuous batching against
whole batches and no batching,
beside translate-cli on the same lines as one file (the batch ceiling).

    .venv/bin/python scripts/benchmarks/benchmark_serve.py --checkpoint runs/default/checkpoints/last.ckpt
    .venv/bin/python scripts/benchmarks/benchmark_serve.py --clients 32 --seconds 600 --modes continuous   # soak: RSS at start and end
    .venv/bin/python scripts/benchmarks/benchmark_serve.py --clients 128 --seconds 360 --modes continuous --rss-every 30   # and on the way

Each client (a coroutine with an httpx.AsyncClient of its own) sends one test-split sentence a
request and the next as soon as the answer comes, for --seconds per level; the clients take the
sentences in one shuffled order of the whole split (seed 0), so that the few hundred a level
reaches are a fair sample of what translate-cli translates (the split's first lines are longer
than the rest). Modes: `continuous` (translate-serve's defaults: requests join the running
search between two steps, up to --batch-tokens, and leave it answered at the step they are done),
`batched` (`--batching batch`: requests pooled up to --batch-tokens, waiting at most 10 ms, each
batch translated to its end) and `unbatched` (`--batching batch --max-wait-ms 0 --batch-tokens 1`:
one request at a time, as a server without batching).
`litserve` (`--modes litserve`, after `pip install 'tiedmt[bench]'`) is the same model behind
Lightning's LitServe instead: its own request batching (up to 64 requests, waiting at most 10
ms, as batched) in one worker process, each batch translated by the same `translate_lines`.
`libretranslate` is LibreTranslate itself (PyPI, in a virtual environment of its own, created at
first use under --libretranslate-venv) serving the checkpoint exported as an Argos package
(`translate-export --format argos`), offline: its package index points at a closed local port,
sentences are split by the package's spaCy pipeline (ARGOS_CHUNK_TYPE=SPACY), and its beam is
the checkpoint's. With `--api libretranslate` every client speaks LibreTranslate's API
({"q", "source", "target"}) to whichever server, and each server's BLEU on the test split is
measured through its own API:

    .venv/bin/python scripts/benchmarks/benchmark_serve.py --modes continuous,libretranslate --api libretranslate --batch-ceiling ''
Servers run with --threads; translate-cli translates the same sentences as one file with the
same threads (its start-up, timed on one line, left out), before every mode and after the last,
and each mode's "of translate-cli" is to the mean of the runs before and after it.  Figures:
sentences/s, latency p50/p95/p99, errors, the RSS of the server's processes together; from
translate-serve's own metrics, sentences a batch, the share of the time its model was translating
(model busy) and sentences a second while it was (model sent/s busy, to set beside
translate-cli's). Last, the model alone (no HTTP) on batches of 16 and 32 test sentences drawn at
random (`--batch-ceiling`): the most a closed loop of that many single-sentence clients can get
from whole-batch serving.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from translate.decode.settings import SearchSettings  # noqa: E402
from translate.process_group import end_group, start_group  # noqa: E402
from translate.serve.launch import free_loopback_port, serve_command, wait_until_ready  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from libretranslate_env import (  # noqa: E402
    DEFAULT_VENV,
    install_checkpoint,
    libretranslate_venv,
    start_libretranslate,
)

MODES = {
    "continuous": [],
    "batched": ["--batching", "batch"],
    "unbatched": ["--batching", "batch", "--max-wait-ms", "0", "--batch-tokens", "1"],
    "litserve": None,
    "libretranslate": None,
}
LITSERVE_BATCH, LITSERVE_WAIT_S = 64, 0.010


def libretranslate_server(
    checkpoint: str, threads: int, venv: Path, workdir: Path
) -> tuple[subprocess.Popen, str]:
    """LibreTranslate (libretranslate_env.py) serving the checkpoint's Argos packages on
    127.0.0.1 with its beam, with nothing to reach but this machine; it prints how long it took
    to start."""
    env = install_checkpoint(checkpoint, venv, workdir, threads)
    started = time.perf_counter()
    try:
        server, base = start_libretranslate(venv, env, workdir)
    except RuntimeError as error:
        raise SystemExit(str(error)) from None
    print(f"LibreTranslate ready after {time.perf_counter() - started:.0f} s", flush=True)
    return server, base


def request_for(api: str, sentences: list[str]) -> dict:
    if api == "libretranslate":
        return {"q": sentences, "source": "en", "target": "de"}
    return {"text": sentences}


def translations_of(api: str, answer: dict) -> list[str]:
    return answer["translatedText"] if api == "libretranslate" else answer["translations"]


def bleu_through_api(
    base: str, api: str, sources: list[str], references: list[str]
) -> tuple[float, float]:
    """BLEU and chrF of the server's translations of the test split, asked for 16 at a time."""
    from translate.score.metrics import corpus_scores

    hypotheses = []
    with httpx.Client(base_url=base, timeout=600) as http:
        for start in range(0, len(sources), 16):
            response = http.post("/translate", json=request_for(api, sources[start : start + 16]))
            response.raise_for_status()
            hypotheses += translations_of(api, response.json())
    scores = corpus_scores(hypotheses, references)
    return scores.bleu, scores.chrf


def litserve_server(checkpoint: str, port: int, threads: int) -> None:
    """The model behind LitServe on 127.0.0.1:port (scripts/benchmarks/litserve_translate.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from litserve_translate import serve

    serve(checkpoint, port, threads, LITSERVE_BATCH, LITSERVE_WAIT_S)


@contextlib.contextmanager
def rss_samples(pid: int, every: float):
    """With `every` > 0, the server's RSS printed every `every` seconds while the block runs:
    whether memory levels off or keeps growing, which start and end alone cannot tell."""
    done = threading.Event()

    def sample() -> None:
        started = time.monotonic()
        while not done.wait(every):
            print(f"RSS at {time.monotonic() - started:.0f} s: {rss_mib(pid):.0f} MiB", flush=True)

    sampler = threading.Thread(target=sample, daemon=True)
    if every > 0:
        sampler.start()
    try:
        yield
    finally:
        done.set()
        if every > 0:
            sampler.join()


def rss_mib(pid: int) -> float:
    """Resident memory of `pid` and every process below it (LitServe's workers are children)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, total = {pid}, 0.0
    for _ in range(8):  # a few levels down: enough for a server and its workers
        tree |= {child for child, parent in parents.items() if parent in tree}
    for member in tree:
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def start_server(
    checkpoint: str,
    threads: int,
    mode: str,
    max_wait_ms: float = 10,
    device: str = "cpu",
    libretranslate: tuple[Path, Path] | None = None,
) -> tuple[subprocess.Popen, str]:
    if mode == "libretranslate":
        return libretranslate_server(checkpoint, threads, *libretranslate)
    port = free_loopback_port()
    if MODES[mode] is None:
        command = [
            sys.executable,
            __file__,
            "--litserve-server",
            checkpoint,
            str(port),
            str(threads),
        ]
    else:
        command = serve_command(
            checkpoint,
            port,
            "--device",
            device,
            "--max-queued-sentences",
            "100000",
            "--max-wait-ms",
            str(max_wait_ms),
            *MODES[mode],
            threads=threads,
        )  # unbatched's 0 comes last and wins
    server = start_group(command)  # a group of its own: end_group ends its workers too
    base = f"http://127.0.0.1:{port}"
    ready = "/health" if MODES[mode] is None else "/ready"
    failure = wait_until_ready(server, f"{base}{ready}", 120)
    if failure:
        end_group(server)
        raise SystemExit(f"the {mode} server {failure}")
    return server, base


async def load(
    base: str, sentences: list[str], clients: int, seconds: float, api: str = "native"
) -> dict:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    shuffled = random.Random(0).sample(sentences, len(sentences))
    next_sentence = itertools.cycle(
        shuffled
    ).__next__  # shared by the clients: one event loop, no lock

    async def client() -> None:
        nonlocal errors
        # A connection pool of its own: one pool shared by 128 clients scans all its connections
        # for every request and made the load generator, not the server, the bottleneck.
        async with httpx.AsyncClient(base_url=base, timeout=120) as http:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                try:
                    response = await http.post(
                        "/translate", json=request_for(api, [next_sentence()])
                    )
                    ok = (
                        response.status_code == 200
                        and len(translations_of(api, response.json())) == 1
                    )
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - began
    quantiles = (
        statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    )
    return {
        "seconds": elapsed,
        "sentences_per_s": len(latencies) / elapsed,
        "p50": quantiles[49],
        "p95": quantiles[94],
        "p99": quantiles[98],
        "errors": errors,
        "requests": len(latencies),
    }


def batches_so_far(base: str, mode: str) -> tuple[float, float, float, float]:
    """(sentences in batches, batches, seconds in the model, lines translated) translate-serve's
    metrics have counted (with continuous batching, a batch is a turn of the running search and
    its size the most lines it held); LitServe and LibreTranslate have no such metrics."""
    if MODES[mode] is None:
        return float("nan"), float("nan"), float("nan"), float("nan")
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{base}/metrics", timeout=10).text
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return (
        samples["translate_batch_sentences_sum"],
        samples["translate_batch_sentences_count"],
        samples["translate_model_seconds_total"],
        samples["translate_sentences_total"],
    )


def cli_seconds(checkpoint: str, sentences: list[str], threads: int, device: str = "cpu") -> float:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.txt"
        source.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "translate.cli.translate",
                "--checkpoint",
                checkpoint,
                "--source",
                str(source),
                "--output",
                str(Path(tmp) / "out.txt"),
                "--quiet",
                "--threads",
                str(threads),
                "--device",
                device,
            ],
            check=True,
        )
        return time.perf_counter() - started


def cli_throughput(
    checkpoint: str, sentences: list[str], threads: int, device: str = "cpu"
) -> float:
    """translate-cli's sentences/s on the file, its start-up (the time for one line) left out."""
    start_up = cli_seconds(checkpoint, sentences[:1], threads, device)
    translating = cli_seconds(checkpoint, sentences, threads, device) - start_up
    return (
        len(sentences) / translating if translating > 0 else float("nan")
    )  # too few lines to tell


def random_batches(
    checkpoint: str, sentences: list[str], sizes: list[int], threads: int
) -> dict[int, float]:
    """The model alone, no HTTP: sentences/s on batches of `size` test sentences drawn at random,
    what a closed loop of `size` single-sentence clients offers at best (printed as JSON)."""
    import torch

    from translate.decode.loaded_model import load_model
    from translate.decode.pipeline import translate_lines
    from translate.defaults import BATCH_TOKENS

    torch.set_num_threads(threads)
    loaded = load_model(checkpoint)
    search = loaded.search_defaults()
    throughput = {}
    for size in sizes:
        draw = random.Random(0)

        def translate() -> None:
            translate_lines(
                loaded,
                draw.sample(sentences, size),
                SearchSettings(beam=search["beam"], length_penalty=search["length_penalty"]),
                batch_tokens=BATCH_TOKENS,
            )

        translate()  # warm-up
        count, started = 0, time.perf_counter()
        while count < 480:
            translate()
            count += size
        throughput[size] = count / (time.perf_counter() - started)
    return throughput


def random_batch_ceiling(
    checkpoint: str, sentences: int | None, sizes: str, threads: int
) -> dict[int, float]:
    """`random_batches` in a process of its own, as the servers and translate-cli run."""
    command = [
        sys.executable,
        __file__,
        "--checkpoint",
        checkpoint,
        "--random-batches",
        sizes,
        "--threads",
        str(threads),
        *(["--sentences", str(sentences)] if sentences else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return {int(size): value for size, value in json.loads(done.stdout.splitlines()[-1]).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument(
        "--clients", default="1,8,32,128", help="concurrency levels (default: 1,8,32,128)"
    )
    parser.add_argument(
        "--seconds", type=float, default=20, help="load time per level (default: 20)"
    )
    parser.add_argument("--modes", default="continuous,batched,unbatched")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads of the server and the CLI"
    )
    parser.add_argument(
        "--sentences", type=int, default=None, help="only the first N test sentences"
    )
    parser.add_argument(
        "--max-wait-ms",
        type=float,
        default=10,
        help="translate-serve's --max-wait-ms (default: 10)",
    )
    parser.add_argument(
        "--rss-every",
        type=float,
        default=0,
        help="print the server's RSS every N seconds during each level (default: 0, never)",
    )
    parser.add_argument(
        "--batch-ceiling",
        default="16,32",
        help="also the model alone on random batches of these sizes (default: 16,32; '' skips)",
    )
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where translate-serve and translate-cli translate (default: cpu)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write the rows and translate-cli's runs here"
    )
    parser.add_argument(
        "--litserve-server", nargs=3, metavar=("CKPT", "PORT", "THREADS"), help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--api",
        choices=["native", "libretranslate"],
        default="native",
        help="what the clients speak: translate-serve's JSON, or LibreTranslate's (default: native)",
    )
    parser.add_argument(
        "--libretranslate-venv",
        type=Path,
        default=DEFAULT_VENV,
        help="--modes libretranslate: its virtual environment, created here at first use",
    )
    parser.add_argument("--random-batches", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.litserve_server:
        checkpoint, port, threads = args.litserve_server
        litserve_server(checkpoint, int(port), int(threads))
        return 0
    unknown = [mode for mode in args.modes.split(",") if mode not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)} (choose from {', '.join(MODES)})")
    if "libretranslate" in args.modes.split(",") and args.api != "libretranslate":
        parser.error(
            "--modes libretranslate speaks LibreTranslate's API only: add --api libretranslate"
        )

    sources = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0])[: args.sentences]
    if args.random_batches:
        sizes = [int(size) for size in args.random_batches.split(",")]
        print(json.dumps(random_batches(args.checkpoint, sources, sizes, args.threads)))
        return 0
    print(
        f"{len(sources)} test sentences; {args.threads} thread(s); {os.cpu_count()} CPUs; "
        f"{args.seconds:g} s a level",
        flush=True,
    )
    # translate-cli before every mode and after the last: a mode's ratios are to the mean of the two
    # runs around it, minutes apart, since this machine's speed drifts by 10-20% within an hour.
    ceilings = [cli_throughput(args.checkpoint, sources, args.threads, args.device)]
    print(f"translate-cli, one file: {ceilings[-1]:.1f} sentences/s", flush=True)
    rows, scores = [], {}
    references = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[1])[: args.sentences]
    workdir = Path(tempfile.mkdtemp(prefix="benchmark-serve-"))
    if "libretranslate" in args.modes.split(","):
        libretranslate_venv(args.libretranslate_venv)
    for mode in args.modes.split(","):
        server, base = start_server(
            args.checkpoint,
            args.threads,
            mode,
            args.max_wait_ms,
            args.device,
            (args.libretranslate_venv, workdir / mode),
        )
        first = len(rows)
        try:
            for clients in map(int, args.clients.split(",")):
                rss_start, before = rss_mib(server.pid), batches_so_far(base, mode)
                with rss_samples(server.pid, args.rss_every):
                    result = asyncio.run(load(base, sources, clients, args.seconds, args.api))
                held, batches, model_seconds, translated = (
                    after - start for after, start in zip(batches_so_far(base, mode), before)
                )
                rows.append(
                    {
                        "mode": mode,
                        "clients": clients,
                        "rss_start": rss_start,
                        "rss_end": rss_mib(server.pid),
                        "batch": held / max(batches, 1),
                        "model_busy": model_seconds / result["seconds"],
                        "model_rate": translated / model_seconds if model_seconds else float("nan"),
                        **result,
                    }
                )
                print(rows[-1], flush=True)
            if args.api == "libretranslate":
                scores[mode] = bleu_through_api(base, args.api, sources, references)
                print(
                    f"{mode}: BLEU {scores[mode][0]:.2f}, chrF {scores[mode][1]:.2f} through its API",
                    flush=True,
                )
        finally:
            end_group(server)
        ceilings.append(cli_throughput(args.checkpoint, sources, args.threads, args.device))
        print(f"translate-cli, one file: {ceilings[-1]:.1f} sentences/s", flush=True)
        for row in rows[first:]:
            row["ceiling"] = (ceilings[-2] + ceilings[-1]) / 2

    print(
        "\n| server | clients | sent/s | of translate-cli | sentences a batch | model busy | model sent/s busy "
        "| p50 ms | p95 ms | p99 ms | errors | RSS MiB start → end |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        known = row["batch"] == row["batch"]  # NaN: LitServe does not say
        batch, busy, rate = (
            (f"{row['batch']:.1f}", f"{row['model_busy']:.0%}", f"{row['model_rate']:.1f}")
            if known
            else ("", "", "")
        )
        print(
            f"| {row['mode']} | {row['clients']} | {row['sentences_per_s']:.1f} | "
            f"{row['sentences_per_s'] / row['ceiling']:.0%} | {batch} | {busy} | {rate} | {1000 * row['p50']:.0f} | "
            f"{1000 * row['p95']:.0f} | {1000 * row['p99']:.0f} | {row['errors']} | "
            f"{row['rss_start']:.0f} → {row['rss_end']:.0f} |"
        )
    for mode, (bleu, chrf) in scores.items():
        print(f"{mode}: test BLEU {bleu:.2f}, chrF {chrf:.2f}, through its own API")
    for mine in ("continuous", "batched"):
        ours = {r["clients"]: r for r in rows if r["mode"] == mine}
        for name in ("batched", "unbatched", "litserve", "libretranslate"):
            other = {r["clients"]: r for r in rows if r["mode"] == name}
            for clients in sorted(set(ours) & set(other)) if name != mine else []:
                ratio = ours[clients]["sentences_per_s"] / other[clients]["sentences_per_s"]
                print(f"{clients} clients: {mine} / {name} {ratio:.2f}x")
    print(
        "translate-cli, before each mode and after the last: "
        f"{', '.join(f'{ceiling:.1f}' for ceiling in ceilings)} sentences/s"
    )
    ceiling = statistics.mean(ceilings)
    alone = {}
    if args.batch_ceiling:
        alone = random_batch_ceiling(
            args.checkpoint, args.sentences, args.batch_ceiling, args.threads
        )
        for size, value in alone.items():
            print(
                f"the model alone on random batches of {size}: {value:.1f} sentences/s ({value / ceiling:.0%} of "
                "translate-cli)"
            )
    if args.json:
        from translate.files import write_atomic

        summary = {
            "device": args.device,
            "threads": args.threads,
            "sentences": len(sources),
            "seconds": args.seconds,
            "rows": rows,
            "cli_sentences_per_s": ceilings,
            "model_alone_sentences_per_s": alone,
            "api": args.api,
            "test_scores": {mode: {"bleu": b, "chrf": c} for mode, (b, c) in scores.items()},
        }
        write_atomic(args.json, (json.dumps(summary, indent=2) + "\n").encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
