"""`bench.py serve`: translate-serve under load, and (`--probe`) its fairness to its clients.

Load: closed-loop clients over loopback, each a coroutine with an httpx client of its own, sending
one test-split sentence a request and the next as soon as the answer comes, for `--seconds` a
level of `--clients`; the clients take the sentences in one shuffled order of the whole split
(seed 0), so that the few hundred a level reaches are a fair sample, translated again at each
level (translate-serve's answer cache off). Modes: `continuous`
(translate-serve's defaults: requests join the running search between two steps; on the CPU its
engine is CTranslate2), `pytorch` (the same with `--engine pytorch`), `unbatched`
(`--batch-tokens 1`: one sentence in the search at a time) and `libretranslate`: LibreTranslate itself (PyPI, in a virtual environment of its own
made at first use under `--libretranslate-venv` by the tests' `tests/libretranslate_env.py`)
serving the checkpoint's Argos packages offline with the checkpoint's beam; with
`--api libretranslate` every client speaks LibreTranslate's API, and each server's test BLEU is
measured through its own API. translate-cli translates the same sentences as one file with the
same threads (its start-up left out) before every mode and after the last; each mode's "of
translate-cli" is to the mean of the runs around it. Figures: sentences/s, latency p50/p95/p99,
errors, the RSS of the server's processes; from translate-serve's metrics, sentences a batch,
the share of the time its model was translating and its sentences a second while it was. Last,
the model alone (no HTTP) on random batches of `--batch-ceiling` sizes: the most a closed loop of
that many single-sentence clients can get from whole-batch serving.

Probes (`--probe fairness,cancellation,event-loop`, each part on a server of its own with 2
torch threads; `--tree` serves from another checkout, to set two versions side by side):
- fairness: one-sentence requests one after the other while one maximal request runs (`N1`: 256
  lines of 1,000 sentences, the probe that once held everyone; `max`: 1,024 distinct sentences);
  their latencies' p50, p99 and max, and the maximal request's status and time;
- cancellation: 50 clients send 100 sentences at beam 5 each and leave after 2 s; the model
  process's CPU in each tenth of a second after, the time until it is idle, the next request;
- event loop: /health polled every 20 ms (by a process of its own) while eight maximal requests
  of each kind (1,024 sentences, native and HTML; about 1 MB as native JSON, LibreTranslate JSON,
  HTML in one tag, a form) are read and translated; the polls' p99 and max.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
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

from benchmarks.harness import REPO, environment, publish, say, table, test_split, tool_command
from translate.process_group import end_group, start_group
from translate.serve.launch import free_loopback_port, serve_command, wait_until_ready
from translate.serve.schema import NATIVE_TRANSLATE

MODES = {
    "continuous": [],
    "pytorch": ["--engine", "pytorch"],
    "unbatched": ["--batch-tokens", "1"],
    "libretranslate": None,
}
LIBRETRANSLATE = REPO / "tests" / "libretranslate_env.py"
PROBE_TIMEOUT_S = 30.0
BODY_CHARS = 1_000_000


def run(args) -> int:
    if args.random_batches:
        return random_batches(args)
    return probes(args) if args.probe else load_levels(args)


# ---------------------------------------------------------------------------------------------
# load


def start_server(
    args, mode: str, workdir: Path, tree: str | None = None
) -> tuple[subprocess.Popen, str]:
    """The `mode`'s server on a free loopback port, in a process group of its own (its workers
    end with it), once it answers; translate-serve from checkout `tree` where given."""
    port = free_loopback_port()
    if MODES[mode] is None:  # LibreTranslate: exported, installed, then the process becomes it
        workdir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, str(LIBRETRANSLATE), str(args.libretranslate_venv)]
        served = args.libretranslate_checkpoint or args.checkpoint
        command += ["--serve", served, "--port", str(port), "--threads", str(args.threads)]
        command += ["--workdir", str(workdir)]
        with open(workdir / "libretranslate.log", "w") as log:
            server = start_group(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
        ready = "/health"
    else:
        flags = ("--device", args.device, "--max-queued-sentences", "100000")
        # No answer cache: every level starts the same order of sentences, and LibreTranslate
        # translates each one again.
        flags += ("--cache-entries", "0")
        flags += tuple(MODES[mode])
        command = serve_command(
            str(Path(args.checkpoint).resolve()), port, *flags, threads=args.threads
        )
        # `python -m` reads the package of its working directory first.
        server = start_group(command, cwd=tree or REPO)
        ready = "/ready"
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    failure = wait_until_ready(server, f"{base}{ready}", 600)
    if failure:
        end_group(server)
        raise SystemExit(f"the {mode} server {failure}")
    say(f"{mode} ready after {time.perf_counter() - started:.0f} s")
    return server, base


def path_for(api: str) -> str:
    """Where each API translates: LibreTranslate's /translate, the native API's own route."""
    return "/translate" if api == "libretranslate" else NATIVE_TRANSLATE


def path_of(send: dict) -> str:
    """The route a request of `maximal_bodies` goes to: the native API's for a body of lines."""
    return NATIVE_TRANSLATE if "text" in send.get("json", {}) else "/translate"


def request_for(api: str, sentences: list[str], target: str | None = None) -> dict:
    if api == "libretranslate":
        return {"q": sentences, "source": "en", "target": target or "de"}
    return {"text": sentences} if target is None else {"text": sentences, "target_lang": target}


def translations_of(api: str, answer: dict) -> list[str]:
    return answer["translatedText"] if api == "libretranslate" else answer["translations"]


def bleu_through_api(base: str, api: str, sources: list[str], references: list[str]):
    """BLEU and chrF of the server's translations of the test split, asked for 16 at a time."""
    from translate.score.metrics import corpus_scores

    hypotheses = []
    with httpx.Client(base_url=base, timeout=600) as http:
        for start in range(0, len(sources), 16):
            response = http.post(path_for(api), json=request_for(api, sources[start : start + 16]))
            response.raise_for_status()
            hypotheses += translations_of(api, response.json())
    scores = corpus_scores(hypotheses, references)
    return scores.bleu, scores.chrf


@contextlib.contextmanager
def rss_samples(pid: int, every: float):
    """With `every` > 0, the server's RSS printed every `every` seconds while the block runs:
    whether memory levels off or keeps growing, which start and end alone cannot tell."""
    done = threading.Event()

    def sample() -> None:
        started = time.monotonic()
        while not done.wait(every):
            say(f"RSS at {time.monotonic() - started:.0f} s: {rss_mib(pid):.0f} MiB")

    sampler = threading.Thread(target=sample, daemon=True)
    if every > 0:
        sampler.start()
    try:
        yield
    finally:
        done.set()
        if every > 0:
            sampler.join()


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):  # gone meanwhile
            found += [int(child) for child in task.read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        for child in children(frontier.pop()):
            found.append(child)
            frontier.append(child)
    return found


def rss_mib(pid: int) -> float:
    """Resident memory of `pid` and every process below it (a server and its workers)."""
    total = 0.0
    for member in [pid, *descendants(pid)]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
    return total


async def load(
    base: str, sentences: dict[str | None, list[str]], clients: int, seconds: float, api: str
) -> dict:
    """`clients` closed-loop clients for `seconds`, each request one sentence for the next target
    language of `sentences` (its sources by target; None: the server's own) in turn."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    # Shared: one event loop, no lock.
    next_of = {
        target: itertools.cycle(random.Random(0).sample(lines, len(lines))).__next__
        for target, lines in sentences.items()
    }
    next_target = itertools.cycle(sentences).__next__

    async def client() -> None:
        nonlocal errors
        # A connection pool of its own: one pool shared by 128 clients scans all its connections
        # for every request and made the load generator, not the server, the bottleneck.
        async with httpx.AsyncClient(base_url=base, timeout=120) as http:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                try:
                    target = next_target()
                    response = await http.post(
                        path_for(api), json=request_for(api, [next_of[target]()], target)
                    )
                    ok = response.status_code == 200
                    ok = ok and len(translations_of(api, response.json())) == 1
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


def load_sources(args) -> tuple[list[str], list[str]]:
    """The English sentences the clients send, and their German references: the bundled test
    split's, or (`--corpus`) a multi-way corpus's."""
    if args.corpus is None:
        return test_split(args.limit)
    from translate.text.corpus import read_lines

    english = read_lines(args.corpus / "test.en.gz")[: args.limit]
    return english, read_lines(args.corpus / "test.de.gz")[: args.limit]


def sentences_by_target(args, english: list[str], german: list[str]) -> dict[str | None, list[str]]:
    """What the clients send for each target language (`load_sources`' two sides): English,
    and for English the corpus's German; without `--targets`, English for the server's one
    target (None)."""
    if not args.targets:
        return {None: english}
    if "en" in args.targets and args.corpus is None:
        raise SystemExit("error: --targets en needs a multi-way --corpus (German sources)")
    return {target: german if target == "en" else english for target in args.targets}


def counted_so_far(base: str, mode: str) -> tuple[float, float, float, float]:
    """(sentences in batches, batches, seconds in the model, lines translated) as translate-serve's
    metrics count them (with continuous batching, a batch is a turn of the running search and its
    size the most lines it held); LibreTranslate has no such metrics."""
    if MODES[mode] is None:
        return float("nan"), float("nan"), float("nan"), float("nan")
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{base}/metrics", timeout=10).text
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    names = ("batch_sentences_sum", "batch_sentences_count", "model_seconds_total")
    return (*(samples[f"translate_{name}"] for name in names), samples["translate_sentences_total"])


def cli_throughput(args, sentences: list[str]) -> float:
    """translate-cli's sentences/s on the file, its start-up (the time for one line) left out."""

    def seconds(lines: list[str]) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "in.txt"
            source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            command = [sys.executable, "-m", "translate.cli.translate", "--checkpoint"]
            command += [args.checkpoint, "--source", str(source)]
            command += ["--output", str(Path(tmp) / "out.txt"), "--quiet"]
            command += ["--threads", str(args.threads), "--device", args.device]
            started = time.perf_counter()
            subprocess.run(command, check=True)
            return time.perf_counter() - started

    translating = seconds(sentences) - seconds(sentences[:1])
    return len(sentences) / translating if translating > 0 else float("nan")  # too few lines


def random_batches(args) -> int:
    """The model alone, no HTTP: sentences/s on batches of test sentences drawn at random, what
    a closed loop of as many single-sentence clients can get at best (printed as JSON)."""
    import json

    import torch

    from translate.decode.loaded_model import load_model
    from translate.decode.pipeline import translate_lines
    from translate.decode.settings import SearchSettings
    from translate.defaults import BATCH_TOKENS

    torch.set_num_threads(args.threads)
    loaded = load_model(args.checkpoint)
    search = loaded.search_defaults()
    settings = SearchSettings(beam=search.beam, length_penalty=search.length_penalty)
    sentences = test_split(args.limit)[0]
    throughput = {}
    for size in args.random_batches:
        draw = random.Random(0)

        def translate() -> None:
            translate_lines(loaded, draw.sample(sentences, size), settings, BATCH_TOKENS)

        translate()  # warm-up
        count, started = 0, time.perf_counter()
        while count < 480:
            translate()
            count += size
        throughput[size] = count / (time.perf_counter() - started)
    print(json.dumps(throughput))
    return 0


def batch_ceiling(args) -> dict[int, float]:
    """`random_batches` in a process of its own, as the servers and translate-cli run."""
    import json

    command = tool_command("serve", "--checkpoint", args.checkpoint, "--threads", str(args.threads))
    command += ["--random-batches", ",".join(map(str, args.batch_ceiling))]
    command += ["--limit", str(args.limit)] if args.limit else []
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return {int(size): value for size, value in json.loads(done.stdout.splitlines()[-1]).items()}


def load_levels(args) -> int:
    if "libretranslate" in args.modes and args.api != "libretranslate":
        raise SystemExit(
            "error: --modes libretranslate speaks LibreTranslate's API: add --api libretranslate"
        )
    if args.targets and (args.batch_ceiling or args.api == "libretranslate"):
        raise SystemExit(
            "error: --targets asks translate-serve's API for many target languages: "
            "add --batch-ceiling '' and leave --api native"
        )
    if args.corpus and not args.targets:
        raise SystemExit("error: --corpus is for a many-to-many model: add --targets")
    sources, references = load_sources(args)
    by_target = sentences_by_target(args, sources, references)
    say(f"{len(sources)} test sentences; {args.threads} thread(s); {args.seconds:g} s a level")
    if "libretranslate" in args.modes:  # installed before anything is timed
        install = [sys.executable, str(LIBRETRANSLATE), str(args.libretranslate_venv)]
        subprocess.run(install, check=True, stdout=sys.stderr)
    # translate-cli before every mode and after the last: a mode's ratios are to the mean of the
    # two runs around it, minutes apart, since a shared machine's speed drifts within an hour.
    # (Not for many target languages, which translate-cli takes one a run.)
    ceilings = [] if args.targets else [cli_throughput(args, sources)]
    if ceilings:
        say(f"translate-cli, one file: {ceilings[-1]:.1f} sentences/s")
    rows, scores = [], {}
    workdir = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    trees = [None, args.tree] if args.tree else [None]
    runs = [
        (mode, tree)
        for _ in range(args.rounds)
        for mode in args.modes
        for tree in (trees if MODES[mode] is not None else [None])  # LibreTranslate: once
    ]
    for number, (mode, tree) in enumerate(runs):
        server, base = start_server(args, mode, workdir / f"{number}-{mode}", tree)
        label = mode if tree is None else f"{mode} @{Path(tree).name}"
        first = len(rows)
        try:
            for clients in args.clients:
                rss_start, before = rss_mib(server.pid), counted_so_far(base, mode)
                with rss_samples(server.pid, args.rss_every):
                    result = asyncio.run(load(base, by_target, clients, args.seconds, args.api))
                held, batches, model_seconds, translated = (
                    after - start for after, start in zip(counted_so_far(base, mode), before)
                )
                rows.append(
                    {
                        "mode": label,
                        "clients": clients,
                        "rss_start": rss_start,
                        "rss_end": rss_mib(server.pid),
                        "batch": held / max(batches, 1),
                        "model_busy": model_seconds / result["seconds"],
                        "model_rate": translated / model_seconds if model_seconds else float("nan"),
                        **result,
                    }
                )
                say(rows[-1])
            if args.api == "libretranslate":
                scores[label] = bleu_through_api(base, args.api, sources, references)
                say(
                    f"{label}: BLEU {scores[label][0]:.2f}, chrF {scores[label][1]:.2f} through its API"
                )
        finally:
            end_group(server)
        if not ceilings:
            for row in rows[first:]:
                row["ceiling"] = float("nan")
            continue
        ceilings.append(cli_throughput(args, sources))
        say(f"translate-cli, one file: {ceilings[-1]:.1f} sentences/s")
        for row in rows[first:]:
            row["ceiling"] = (ceilings[-2] + ceilings[-1]) / 2
    alone = batch_ceiling(args) if args.batch_ceiling else {}
    text = "\n".join(
        [
            f"{len(sources)} test sentences; {args.threads} thread(s); {args.seconds:g} s a level; "
            f"{args.api} API"
            + (f"; target languages in turn: {', '.join(args.targets)}" if args.targets else ""),
            "",
            levels_table(rows),
            "",
            *ratios(rows, scores, args.tree),
            *(
                [
                    "translate-cli, before each mode and after the last: "
                    + ", ".join(f"{ceiling:.1f}" for ceiling in ceilings)
                    + " sentences/s"
                ]
                if ceilings
                else []
            ),
            *(
                f"the model alone on random batches of {size}: {value:.1f} sentences/s "
                f"({value / statistics.mean(ceilings):.0%} of translate-cli)"
                for size, value in alone.items()
            ),
        ]
    )
    summary = {
        "device": args.device,
        "threads": args.threads,
        "sentences": len(sources),
        "seconds": args.seconds,
        "rows": rows,
        "cli_sentences_per_s": ceilings,
        "model_alone_sentences_per_s": alone,
        "api": args.api,
        "targets": args.targets,
        "tree": args.tree,
        "test_scores": {mode: {"bleu": b, "chrf": c} for mode, (b, c) in scores.items()},
    }
    publish(environment(args.device), text, args.json, **summary)
    return 0


def of_cli(row: dict) -> str:
    """The row's sentences/s as a share of translate-cli's (blank where it was not measured)."""
    ceiling = row["ceiling"]
    return "" if ceiling != ceiling else f"{row['sentences_per_s'] / ceiling:.0%}"


def levels_table(rows: list[dict]) -> str:
    cells = []
    for row in rows:
        known = row["batch"] == row["batch"]  # NaN: LibreTranslate does not say
        model = (
            (f"{row['batch']:.1f}", f"{row['model_busy']:.0%}", f"{row['model_rate']:.1f}")
            if known
            else ("", "", "")
        )
        latency = tuple(f"{1000 * row[q]:,.0f}" for q in ("p50", "p95", "p99"))
        cells.append(
            (row["mode"], row["clients"], f"{row['sentences_per_s']:.1f}")
            + (of_cli(row), *model, *latency, row["errors"])
            + (f"{row['rss_start']:.0f} → {row['rss_end']:.0f}",)
        )
    headers = ("server", "clients", "sent/s", "of translate-cli", "sentences a batch")
    headers += ("model busy", "model sent/s busy", "p50 ms", "p95 ms", "p99 ms", "errors")
    return table(headers + ("RSS MiB start → end",), cells, "l" + "r" * 10 + "l")


def ratios(rows: list[dict], scores: dict, tree: str | None = None) -> list[str]:
    """Test scores, and each level's sentences/s of the default mode to the others' (to the
    same mode of `tree`, where given), over all rounds' rows."""
    lines = [
        f"{mode}: test BLEU {b:.2f}, chrF {c:.2f}, through its own API"
        for mode, (b, c) in scores.items()
    ]

    def rates(name: str) -> dict[int, float]:
        by_level: dict[int, list[float]] = {}
        for row in rows:
            if row["mode"] == name:
                by_level.setdefault(row["clients"], []).append(row["sentences_per_s"])
        return {clients: statistics.mean(values) for clients, values in by_level.items()}

    ours = rates("continuous")
    others = ["unbatched", "libretranslate"]
    others += [f"continuous @{Path(tree).name}"] if tree else []
    for name in others:
        other = rates(name)
        for clients in sorted(set(ours) & set(other)):
            lines.append(
                f"{clients} clients: continuous / {name} {ours[clients] / other[clients]:.2f}x"
            )
    return lines


# ---------------------------------------------------------------------------------------------
# probes


def probe_server(args) -> tuple[subprocess.Popen, str]:
    port = free_loopback_port()
    process = start_group(
        serve_command(str(Path(args.checkpoint).resolve()), port, threads=2),
        cwd=args.tree or REPO,  # `python -m` reads the package of its working directory first
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    why = wait_until_ready(process, f"{base}/ready", 120)
    if why is not None:
        end_group(process)
        raise SystemExit(f"translate-serve {why}")
    return process, base


def model_process(server: subprocess.Popen) -> int:
    """The server's model process: the descendant that multiprocessing spawned (not its
    resource tracker)."""
    for pid in descendants(server.pid):
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"multiprocessing" in command and b"resource_tracker" not in command:
            return pid
    raise SystemExit("no model process found under the server")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def fairness(base: str, name: str, body: dict, seconds: float) -> dict:
    """One-sentence requests one after another while `body` is translated."""
    big: dict = {}

    def send_big() -> None:
        started = time.perf_counter()
        try:
            big["status"] = httpx.post(
                f"{base}{NATIVE_TRANSLATE}", json=body, timeout=900
            ).status_code
        except httpx.HTTPError as fault:
            big["status"] = type(fault).__name__
        big["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=send_big, daemon=True)
    thread.start()
    time.sleep(1.0)
    latencies, timeouts, n = [], 0, 0
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
        while time.monotonic() < deadline:
            n += 1
            started = time.perf_counter()
            try:
                sent = {"text": [f"Click the button number {n}."]}
                client.post(f"{base}{NATIVE_TRANSLATE}", json=sent).raise_for_status()
                latencies.append(time.perf_counter() - started)
            except httpx.HTTPError:
                timeouts += 1
                latencies.append(PROBE_TIMEOUT_S)
    thread.join(timeout=5)  # a request still running then ends with the server
    return {
        "probe": name,
        "big_status": big.get("status", "still running"),
        "big_seconds": round(big["seconds"], 2) if "seconds" in big else None,
        "requests": len(latencies),
        "failed_or_timed_out": timeouts,
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(percentile(latencies, 0.99), 3),
        "max_s": round(max(latencies), 3),
    }


def cancellation(base: str, model_pid: int, clients: int = 50) -> dict:
    """`clients` requests of 100 sentences, each client gone after 2 s; the model's CPU after."""

    def leave(index: int) -> None:
        lines = [f"Select the cells {index} {n} that you want to copy now." for n in range(100)]
        with contextlib.suppress(httpx.HTTPError):  # gone, as planned
            httpx.post(f"{base}{NATIVE_TRANSLATE}", json={"text": lines, "beam": 5}, timeout=2.0)

    threads = [threading.Thread(target=leave, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    left = time.perf_counter()
    windows, idle_after, quiet = [], None, 0
    last = cpu_seconds(model_pid)
    while time.perf_counter() - left < 10:
        time.sleep(0.1)
        now = cpu_seconds(model_pid)
        share, last = (now - last) / 0.1, now
        windows.append(round(share, 2))
        quiet = quiet + 1 if share < 0.1 else 0
        if quiet == 5:
            idle_after = time.perf_counter() - left - 0.5
            break
    started = time.perf_counter()
    httpx.post(f"{base}{NATIVE_TRANSLATE}", json={"text": ["Click OK."]}, timeout=120)
    return {
        "clients": clients,
        "idle_after_s": None if idle_after is None else round(idle_after, 2),
        "cpu_share_first_second": windows[:10],
        "next_request_s": round(time.perf_counter() - started, 3),
    }


def maximal_bodies() -> dict[str, dict]:
    """Requests at the limits, as each API and format takes them: the most sentences a request
    may hold (1,024 short lines), and about 1 MB of text (--max-body-bytes)."""
    line = ("Select the cells that you want to copy and paste them " * 18)[:990]
    lines = [line] * (BODY_CHARS // 1000)
    text = "\n".join(lines)
    call = {"source": "en", "target": "de"}
    cells = [f"Select the cells {n} that you want to copy." for n in range(1024)]
    return {
        "native, 1,024 sentences": {"json": {"text": cells}},
        "HTML, 1,024 sentences": {
            "json": {"q": "".join(f"<p>{cell}</p>" for cell in cells), "format": "html", **call}
        },
        "native, 1 MB": {"json": {"text": lines}},
        "LibreTranslate, 1 MB": {"json": {"q": text, **call}},
        "HTML in one tag, 1 MB": {"json": {"q": f"<p>{text}</p>", "format": "html", **call}},
        "form, 1 MB": {"data": {"q": text, **call}},
    }


def poll_health(base: str, done, results) -> None:
    """/health every 20 ms until `done` is set; the latencies to `results`. Run in a process of
    its own, so that the clients' work (encoding a megabyte) never delays a poll."""
    polls = []
    with httpx.Client(timeout=30) as client:
        while not done.is_set():
            started = time.perf_counter()
            client.get(f"{base}/health")
            polls.append(time.perf_counter() - started)
            time.sleep(0.02)
    results.send(polls)


def health_under(base: str, send: dict, window_s: float) -> dict:
    """/health polled every 20 ms while eight clients send `send` at once, for `window_s` or
    until all are answered."""
    statuses = []

    def post() -> None:
        try:
            statuses.append(httpx.post(f"{base}{path_of(send)}", timeout=600, **send).status_code)
        except httpx.HTTPError as fault:
            statuses.append(type(fault).__name__)

    context = multiprocessing.get_context("spawn")
    done, (results, sent) = context.Event(), context.Pipe(duplex=False)
    poller = context.Process(target=poll_health, args=(base, done, sent))
    poller.start()
    time.sleep(1.0)  # the poller's imports
    senders = [threading.Thread(target=post, daemon=True) for _ in range(8)]
    for sender in senders:
        sender.start()
    deadline = time.monotonic() + window_s
    for sender in senders:
        sender.join(max(0.0, deadline - time.monotonic()))
    done.set()
    polls = results.recv()
    poller.join()
    return {
        "answered": sorted(map(str, statuses)),
        "health_polls": len(polls),
        "health_p99_s": round(percentile(polls, 0.99), 3),
        "health_max_s": round(max(polls), 3),
    }


def probes(args) -> int:
    n1 = {"text": [("Ok. " * 1000)[:3999]] * 256}
    most = {"text": [f"Select the cells {n} that you want to copy." for n in range(1024)]}
    jobs = []  # (part, what the server is sent)
    if "fairness" in args.probe:
        jobs += [("fairness", name, body) for name, body in (("N1", n1), ("max", most))]
    if "cancellation" in args.probe:
        jobs.append(("cancellation", "", {}))
    if "event-loop" in args.probe:
        jobs += [("event_loop", kind, send) for kind, send in maximal_bodies().items()]
    results: dict = {"tree": args.tree or str(REPO), "checkpoint": args.checkpoint}
    lines = []
    for part, name, body in jobs:
        process, base = probe_server(args)
        try:
            if part == "fairness":
                found = fairness(base, name, body, args.seconds)
            elif part == "cancellation":
                found = cancellation(base, model_process(process))
            else:
                found = {"kind": name, **health_under(base, body, 30.0)}
        finally:
            end_group(process)
        results.setdefault(part, []).append(found)
        lines.append(f"{part}: {found}")
        say(lines[-1])
    publish(environment(), "\n".join(lines), args.json, **results)
    return 0
