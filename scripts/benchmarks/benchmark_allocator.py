"""What keeping freed memory (`translate.decode.allocator`, set by translate-cli) gains in decoding.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_allocator.py --checkpoint runs/default/checkpoints/last.ckpt

An allocator setting holds for a whole process, so each measurement is a process of its own:
pairs of processes, one with glibc as it comes and one with `keep_freed_memory()`, in alternating
order, each translating the first `--limit` test sentences as translate-cli does (greedy and beam
5, best of `--repeats` after a warm-up run) and counting the page faults of its timed runs.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from translate.decode.settings import SearchSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def measure(checkpoint: str, limit: int, repeats: int, keep: bool) -> dict:
    """Best seconds and page faults of the timed runs, by beam, in this process."""
    import torch

    from translate.decode.allocator import keep_freed_memory
    from translate.decode.loaded_model import load_model
    from translate.decode.pipeline import translate_nbest
    from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths

    kept = keep_freed_memory() if keep else False
    torch.set_num_threads(1)
    loaded = load_model(checkpoint)
    sources = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0])[:limit]
    result = {"kept": kept}
    for beam in (1, 5):
        translate_nbest(loaded, sources, SearchSettings(beam=beam, length_penalty=0.0))  # warm
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            translate_nbest(loaded, sources, SearchSettings(beam=beam, length_penalty=0.0))
            times.append(time.perf_counter() - start)
        result[f"beam {beam}"] = (
            min(times),
            (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / repeats,
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument(
        "--limit", type=int, default=500, help="the first N test sentences (default: 500)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs in each process (default: 3)"
    )
    parser.add_argument("--pairs", type=int, default=5, help="pairs of processes (default: 5)")
    parser.add_argument("--child", choices=["plain", "kept"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.checkpoint, args.limit, args.repeats, args.child == "kept")))
        return 0
    rows = []
    for pair in range(args.pairs):
        order = ("plain", "kept") if pair % 2 == 0 else ("kept", "plain")
        runs = {}
        for child in order:
            output = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--checkpoint",
                    args.checkpoint,
                    "--limit",
                    str(args.limit),
                    "--repeats",
                    str(args.repeats),
                    "--child",
                    child,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs[child] = json.loads(output.strip().splitlines()[-1])
        if not runs["kept"]["kept"]:
            raise SystemExit(
                "keep_freed_memory() did not apply here (not glibc, or MALLOC_*/GLIBC_TUNABLES set)"
            )
        rows.append(runs)
    print(
        f"{args.limit} test sentences, one thread, {args.pairs} pairs of processes, best of {args.repeats} in each"
    )
    print(
        "| beam | glibc as it comes: s | page faults a run | freed memory kept: s | page faults a run | speed-up |\n"
        "|---:|---:|---:|---:|---:|---:|"
    )
    for beam in ("beam 1", "beam 5"):
        for runs in rows:
            (plain, plain_faults), (kept, kept_faults) = runs["plain"][beam], runs["kept"][beam]
            print(
                f"| {beam[5:]} | {plain:.3f} | {plain_faults:,.0f} | {kept:.3f} | {kept_faults:,.0f} | "
                f"{plain / kept:.3f}x |"
            )
        median = statistics.median(runs["plain"][beam][0] / runs["kept"][beam][0] for runs in rows)
        print(f"| {beam[5:]} | | | | median | {median:.3f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
