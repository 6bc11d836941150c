"""Data-path benchmark: preprocessing speed, memory, padding efficiency and loader speed.

    .venv/bin/python scripts/benchmarks/benchmark_data.py                       # bundled, 100k, 1M pairs
    .venv/bin/python scripts/benchmarks/benchmark_data.py --sizes bundled,1000000 --workers 4

Larger corpora are the bundled training split repeated (with a line number prepended to each
copy so no two pairs are identical).  Each size runs in a fresh process, so its peak resident
memory is its own; the vocabulary is the bundled corpus's 4k joint model, trained once, so the
figures are about the data path and not SentencePiece training.

Measured per size: encoding pairs/s (read + UTF-8 check + SentencePiece in worker processes +
write to the id cache), peak resident memory (VmHWM) and the anonymous (heap) part of it at the
end, padding efficiency (real tokens / padded positions, source and target) and batches/s of
one full epoch of the training loader with the default config's budget.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def memory_mib() -> dict[str, float]:
    """Peak resident (VmHWM) and current anonymous memory (RssAnon) of this process, in MiB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {key: int(status[key].split()[0]) / 1024 for key in ("VmHWM", "RssAnon")}


def write_repeated_corpus(directory: Path, pairs: int) -> None:
    """`pairs` lines per side, the bundled training split repeated with distinct prefixes."""
    from translate.text.corpus import BUNDLED_CORPUS, iter_parallel, split_paths

    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    with (
        open(directory / "train.en", "w", encoding="utf-8") as en,
        open(directory / "train.de", "w", encoding="utf-8") as de,
    ):
        copy = 0
        while written < pairs:
            for src, tgt in iter_parallel(*split_paths(BUNDLED_CORPUS, "train", "en", "de")):
                prefix = f"{copy} " if copy else ""
                en.write(prefix + src + "\n")
                de.write(prefix + tgt + "\n")
                written += 1
                if written == pairs:
                    break
            copy += 1


def measure_one(
    corpus: Path, vocab_file: Path, cache: Path, workers: int, max_tokens: int, max_length: int
) -> dict:
    import numpy as np
    from torch.utils.data import DataLoader

    from translate.text.corpus import filter_by_length, iter_split
    from translate.text.vocab import PAD_ID, Vocabularies
    from translate.train.data_module import TokenBatchSampler, collate
    from translate.train.encoded import encode_to_directory

    vocab = Vocabularies.from_state({"joint": vocab_file.read_bytes()})
    started = time.perf_counter()
    encoded = encode_to_directory(
        iter_split(corpus, "train", "en", "de"), vocab, cache / "ids", workers=workers
    )
    encode_seconds = time.perf_counter() - started

    started = time.perf_counter()
    keep, report = filter_by_length(encoded.src_lengths(), encoded.tgt_lengths(), max_length, 3.0)
    kept = encoded.select(keep)
    sampler = TokenBatchSampler(
        np.stack([kept.src_lengths() + 1, kept.tgt_lengths() + 1], axis=1),
        max_tokens,
        shuffle=True,
        seed=1,
    )
    index_seconds = time.perf_counter() - started

    loader = DataLoader(kept, batch_sampler=sampler, collate_fn=collate)
    real = padded = batches = 0
    started = time.perf_counter()
    for batch in loader:
        for side in ("src", "tgt_out"):
            real += int((batch[side] != PAD_ID).sum())
            padded += batch[side].numel()
        batches += 1
    epoch_seconds = time.perf_counter() - started
    return {
        "pairs": len(encoded),
        "kept": report.kept,
        "encode_pairs_per_s": len(encoded) / encode_seconds,
        "encode_s": encode_seconds,
        "filter_and_batch_s": index_seconds,
        "batches": batches,
        "loader_batches_per_s": batches / epoch_seconds,
        "padding_efficiency": real / padded,
        "cache_mib": sum(p.stat().st_size for p in (cache / "ids").iterdir()) / 2**20,
        **{f"{key}_mib": value for key, value in memory_mib().items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="bundled,100000,1000000")
    parser.add_argument(
        "--workers", type=int, default=None, help="encoding processes (default: CPUs, at most 8)"
    )
    parser.add_argument(
        "--max-tokens", type=int, default=2000, help="batch budget (configs/default.yaml)"
    )
    parser.add_argument("--max-length", type=int, default=200)
    parser.add_argument(
        "--one", nargs=4, metavar=("CORPUS", "VOCAB", "CACHE", "WORKERS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        corpus, vocab_file, cache, workers = args.one
        workers = None if workers == "default" else int(workers)
        print(
            json.dumps(
                measure_one(
                    Path(corpus),
                    Path(vocab_file),
                    Path(cache),
                    workers,
                    args.max_tokens,
                    args.max_length,
                )
            )
        )
        return

    from translate.text.corpus import BUNDLED_CORPUS, read_split
    from translate.text.vocab import Vocabularies

    with tempfile.TemporaryDirectory(prefix="benchmark-data-") as tmp:
        tmp = Path(tmp)
        started = time.perf_counter()
        vocab = Vocabularies.train(read_split(BUNDLED_CORPUS, "train", "en", "de"), 4000)
        print(
            f"vocabulary: 4000-piece joint unigram on the bundled corpus in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        vocab_file = tmp / "joint.model"
        vocab_file.write_bytes(vocab.state()["joint"])
        rows = []
        for size in args.sizes.split(","):
            corpus = BUNDLED_CORPUS if size == "bundled" else tmp / f"corpus-{size}"
            if size != "bundled":
                write_repeated_corpus(corpus, int(size))
            cache = tmp / f"cache-{size}"
            cache.mkdir()
            result = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--max-tokens",
                    str(args.max_tokens),
                    "--max-length",
                    str(args.max_length),
                    "--one",
                    str(corpus),
                    str(vocab_file),
                    str(cache),
                    str(args.workers or "default"),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr)
    print(
        f"max_tokens {args.max_tokens}, max_length {args.max_length}, workers {args.workers or 'default'}\n"
    )
    print(
        "| pairs | encode pairs/s | peak RSS MiB | heap (RssAnon) MiB | id cache MiB | padding efficiency | loader batches/s | filter+batch s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['pairs']:,} | {row['encode_pairs_per_s']:,.0f} | {row['VmHWM_mib']:.0f} | {row['RssAnon_mib']:.0f} | "
            f"{row['cache_mib']:.1f} | {row['padding_efficiency']:.1%} | {row['loader_batches_per_s']:,.0f} | "
            f"{row['filter_and_batch_s']:.2f} |"
        )


if __name__ == "__main__":
    main()
