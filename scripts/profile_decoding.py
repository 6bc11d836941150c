"""Where decoding spends its time: torch.profiler over our search on the test split, operators
by their own CPU time, plus the share left to Python outside any operator.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/profile_decoding.py --checkpoint runs/default/checkpoints/last.ckpt --beam 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from translate.checkpoint import load_translator  # noqa: E402
from translate.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402
from translate.pipeline import translate_lines  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--length-penalty", type=float, default=0.0)
    parser.add_argument("--limit", type=int, default=500, help="the first N test sentences (default: 500)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", type=int, default=15, help="operators listed (default: 15)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    translator = load_translator(args.checkpoint, torch.device("cpu"))
    sources = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0])[: args.limit]

    def run() -> float:
        started = time.perf_counter()
        translate_lines(translator, sources, beam=args.beam, length_penalty=args.length_penalty)
        return time.perf_counter() - started

    plain = min(run(), run())  # warm, and the time without the profiler's own cost
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled = run()
    events = prof.key_averages()
    operators = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"{len(sources)} sentences, beam {args.beam}, {args.threads} thread(s): {plain:.2f} s unprofiled, "
          f"{profiled:.2f} s profiled; operators {operators:.2f} s ({operators / profiled:.0%}), "
          f"the rest (Python between operators) {profiled - operators:.2f} s ({1 - operators / profiled:.0%})\n")
    print("| operator | calls | self CPU s | share of the profiled time |\n|---|---:|---:|---:|")
    for event in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[: args.rows]:
        print(f"| {event.key} | {event.count:,} | {event.self_cpu_time_total / 1e6:.2f} | "
              f"{event.self_cpu_time_total / 1e6 / profiled:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
