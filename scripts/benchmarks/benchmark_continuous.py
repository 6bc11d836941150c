"""Continuous batching's model side alone (no HTTP): closed-loop clients simulated in-process, each
sending its next test sentence the moment its last is answered, against translate-cli on the same
sentences as one file, for several cohort limits and join fractions; and how many translations
are the same as translate-cli's.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_continuous.py --checkpoint runs/default/checkpoints/last.ckpt

The sentences are the test split's in one shuffled order (seed 0), as scripts/benchmarks/benchmark_serve.py
sends them; the search settings are the checkpoint's. Each configuration runs once after
translate-cli, in one process, so the ratios are taken minutes apart at most.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from translate.decode import continuous  # noqa: E402
from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.serve import continuous as serve_continuous  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402


def closed_loop(
    loaded, lines: list[str], key: SearchSettings, clients: int
) -> tuple[float, float, list[str]]:
    """Seconds to answer every line with `clients` in flight, the mean lines a step searched, and
    the translations: the engine loop of translate-serve's model process, stepped here, each
    answer followed at once by that client's next line."""
    engine = serve_continuous.EngineLoop(loaded, batch_tokens=4096)
    waiting, in_flight, steps, held, answers, segments = list(range(len(lines))), 0, 0, 0, {}, {}
    started = time.perf_counter()
    while waiting or in_flight:
        while waiting and in_flight < clients:
            index = waiting.pop()
            segments[index] = serve_continuous.prepare(loaded, [lines[index]], key)
            engine.take(serve_continuous.Join(index, segments[index].ids, key))
            in_flight += 1
        for answer in engine.step():
            in_flight -= 1
            answers[answer.request_id] = serve_continuous.finish(
                loaded, segments[answer.request_id], answer.found, key.n_best
            )[0]
        steps, held = (
            steps + 1,
            held + sum(len(running.search) for running in engine.searches.values()),
        )
    return time.perf_counter() - started, held / steps, [answers[i] for i in range(len(lines))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument(
        "--sentences", type=int, default=500, help="test sentences, shuffled (default: 500)"
    )
    parser.add_argument("--clients", default="32,128", help="simulated clients (default: 32,128)")
    parser.add_argument(
        "--cohorts", default="4,8,12,16", help="MAX_COHORTS values (default: 4,8,12,16)"
    )
    parser.add_argument("--join", default="8", help="JOIN_FRACTION values (default: 8)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    loaded = load_model(args.checkpoint, torch.device("cpu"))
    lines = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0])
    random.Random(0).shuffle(lines)
    lines = lines[: args.sentences]
    defaults = loaded.search_defaults()
    key = SearchSettings(beam=defaults["beam"], length_penalty=defaults["length_penalty"])
    translate_lines(
        loaded, lines[:50], SearchSettings(beam=key.beam, length_penalty=key.length_penalty)
    )  # warm
    started = time.perf_counter()
    expected = translate_lines(
        loaded, lines, SearchSettings(beam=key.beam, length_penalty=key.length_penalty)
    )
    cli = time.perf_counter() - started
    print(
        f"{len(lines)} shuffled test sentences, beam {key.beam}, alpha {key.length_penalty}, one thread; "
        f"translate-cli {len(lines) / cli:.1f} sentences/s"
    )
    print(
        "\n| clients | cohorts at most | join at | sent/s | of translate-cli | lines a step | same as translate-cli |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for clients in map(int, args.clients.split(",")):
        for cohorts in map(int, args.cohorts.split(",")):
            for join in map(int, args.join.split(",")):
                continuous.MAX_COHORTS, serve_continuous.JOIN_FRACTION = cohorts, join
                seconds, held, outputs = closed_loop(loaded, lines, key, clients)
                same = sum(output == reference for output, reference in zip(outputs, expected))
                print(
                    f"| {clients} | {cohorts} | 1/{join} | {len(lines) / seconds:.1f} | {cli / seconds:.2f}x | "
                    f"{held:.1f} | {same}/{len(lines)} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
