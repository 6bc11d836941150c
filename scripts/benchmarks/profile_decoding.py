"""Where decoding spends its time: torch.profiler over our search on the test split, operators
by their own CPU time, plus the share left to Python outside any operator.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/profile_decoding.py --checkpoint runs/default/checkpoints/last.ckpt --beam 1

With --by-rows, instead: the encoder's time and the decoding steps' time by how many rows a
step decodes (what a batch's last, longest sentences cost), without the profiler, and how many
of the encoder positions that cross-attention reads are padding; with
--batch N, in batches of N sentences drawn at random (a server's batches) instead of
translate-cli's length-sorted ones.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.model.transformer import MultiHeadAttention  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--length-penalty", type=float, default=0.0)
    parser.add_argument(
        "--limit", type=int, default=500, help="the first N test sentences (default: 500)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", type=int, default=15, help="operators listed (default: 15)")
    parser.add_argument(
        "--by-rows", action="store_true", help="time the steps by rows decoded instead"
    )
    parser.add_argument(
        "--batch", type=int, default=0, help="with --by-rows: random batches of N sentences"
    )
    parser.add_argument(
        "--quantize", choices=["none", "int8"], default="none", help="as translate-cli's --quantize"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    loaded = load_model(args.checkpoint, torch.device("cpu"), quantize=args.quantize)
    sources = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0])[: args.limit]
    if args.by_rows:
        return by_rows(loaded, sources, args)

    def run() -> float:
        started = time.perf_counter()
        translate_lines(
            loaded, sources, SearchSettings(beam=args.beam, length_penalty=args.length_penalty)
        )
        return time.perf_counter() - started

    plain = min(run(), run())  # warm, and the time without the profiler's own cost
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled = run()
    events = prof.key_averages()
    operators = sum(e.self_cpu_time_total for e in events) / 1e6
    print(
        f"{len(sources)} sentences, beam {args.beam}, {args.threads} thread(s): {plain:.2f} s unprofiled, "
        f"{profiled:.2f} s profiled; operators {operators:.2f} s ({operators / profiled:.0%}), "
        f"the rest (Python between operators) {profiled - operators:.2f} s ({1 - operators / profiled:.0%})\n"
    )
    print("| operator | calls | self CPU s | share of the profiled time |\n|---|---:|---:|---:|")
    for event in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[: args.rows]:
        print(
            f"| {event.key} | {event.count:,} | {event.self_cpu_time_total / 1e6:.2f} | "
            f"{event.self_cpu_time_total / 1e6 / profiled:.1%} |"
        )
    return 0


def by_rows(loaded, sources: list[str], args) -> int:
    """Encoder seconds, and decoding steps and seconds by rows decoded (buckets of 16)."""
    if args.batch:
        sources = random.Random(0).sample(sources, len(sources))
    chunks = (
        [sources[i : i + args.batch] for i in range(0, len(sources), args.batch)]
        if args.batch
        else [sources]
    )
    model = loaded.model
    plain_decode, plain_encode = model.decode, model.encode
    plain_blocks = MultiHeadAttention._attend_blocks
    steps: dict[int, list] = defaultdict(lambda: [0, 0.0])  # bucket of 16 rows: [steps, seconds]
    encoder_seconds = 0.0
    cross = [0, 0]  # encoder positions cross-attention read, and how many of them were padding

    def attend_blocks(attention, q, query, blocks, static_kv):
        for block in blocks if static_kv else ():
            positions = block.k.shape[0] * block.k.shape[2]
            mask = block.mask
            cross[0] += positions
            cross[1] += (
                0
                if mask is None
                else positions - int(mask.expand(block.k.shape[0], -1, -1, -1).sum())
            )
        return plain_blocks(attention, q, query, blocks, static_kv)

    def decode(tgt_ids, *rest, **kwargs):
        started = time.perf_counter()
        out = plain_decode(tgt_ids, *rest, **kwargs)
        bucket = steps[tgt_ids.shape[0] // 16]
        bucket[0], bucket[1] = bucket[0] + 1, bucket[1] + time.perf_counter() - started
        return out

    def encode(*call_args):
        nonlocal encoder_seconds
        started = time.perf_counter()
        out = plain_encode(*call_args)
        encoder_seconds += time.perf_counter() - started
        return out

    def translate_all() -> float:
        started = time.perf_counter()
        for chunk in chunks:
            translate_lines(
                loaded,
                chunk,
                SearchSettings(beam=args.beam, length_penalty=args.length_penalty),
            )
        return time.perf_counter() - started

    translate_all()  # warm
    model.decode, model.encode, MultiHeadAttention._attend_blocks = (
        decode,
        encode,
        attend_blocks,
    )
    total = translate_all()
    model.decode, model.encode, MultiHeadAttention._attend_blocks = (
        plain_decode,
        plain_encode,
        plain_blocks,
    )
    decoding = sum(seconds for _, seconds in steps.values())
    batches = f"random batches of {args.batch}" if args.batch else "length-sorted batches"
    print(
        f"{len(sources)} sentences, beam {args.beam}, {args.threads} thread(s), {batches}: {total:.2f} s, "
        f"encoder {encoder_seconds:.2f} s, decoding steps {decoding:.2f} s, the rest {total - encoder_seconds - decoding:.2f} s; "
        f"cross-attention read {cross[0]:,} encoder positions (per layer, summed over steps), "
        f"{cross[1] / max(cross[0], 1):.0%} of them padding\n"
    )
    print("| rows a step | steps | seconds | ms a step |\n|---|---:|---:|---:|")
    for bucket in sorted(steps):
        count, seconds = steps[bucket]
        print(
            f"| {bucket * 16}-{bucket * 16 + 15} | {count:,} | {seconds:.3f} | {seconds / count * 1e3:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
