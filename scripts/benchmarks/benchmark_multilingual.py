"""Many-to-many data path: multi-way corpus build time per language, and the encoding of every
direction's training split (pairs/s, memory) as the corpus grows.

    .venv/bin/python scripts/benchmarks/benchmark_multilingual.py --build de fr ja zh-CN ru ko
    .venv/bin/python scripts/benchmarks/benchmark_multilingual.py --corpus data/libreoffice_help --languages de fr ja zh-CN ru --copies 1,4,16

Build: `scripts/build_corpus.py`'s multi-way build of one language at a time (apt-get download,
dpkg-deb extraction, parsing and aligning English and that language), wall time each.
Encoding: the corpus's rows repeated N times (a copy number prepended, so no two rows are equal),
then the data module of an English-centric many-to-many model over `--languages` set up in a
fresh process: vocabulary from the 1-copy corpus (trained once, so the figures are about the
data path), every direction encoded into the id cache by worker processes, filtered, and one
epoch of temperature-drawn batches read. Peak resident memory (VmHWM) and heap (RssAnon) at the
end; the ids live in memory-mapped cache files, so the heap should grow only with the index
arrays, about 64 bytes a pair.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from benchmark_data import memory_mib  # noqa: E402


def build_times(langs: list[str]) -> list[tuple[str, float]]:
    import build_corpus

    times = []
    for lang in langs:
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            build_corpus.build_multiway(None, [lang], Path(out))
            times.append((lang, time.perf_counter() - started))
    return times


def repeated(corpus: Path, languages: list[str], copies: int, out: Path) -> None:
    """The multi-way corpus with every row repeated `copies` times (blank lines stay blank)."""
    out.mkdir(parents=True)
    for path in sorted(corpus.glob("*.gz")):
        split, lang = path.name[:-3].split(".", 1)
        if lang not in ["en", *languages]:
            continue
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:-1]
        times = copies if split == "train" else 1
        with open(out / f"{split}.{lang}", "w", encoding="utf-8") as handle:
            for copy in range(times):
                prefix = f"{copy} " if copy else ""
                handle.writelines((prefix + line if line.strip() else "") + "\n" for line in lines)


def data_settings(languages: list[str]) -> dict:
    return dict(
        corpus_format="multiway",
        languages=languages,
        vocab_size=12000,
        character_coverage=0.9995,
        max_tokens=2000,
        max_length=200,
        dev_max_sentences=100,
    )


def train_vocabulary(corpus: Path, languages: list[str], vocab_cache: Path) -> None:
    """Into the cache, before any measured process (its trainer's memory is not the data path's)."""
    from translate.train.data_module import TranslationDataModule

    TranslationDataModule(
        corpus_dir=str(corpus), cache_dir=str(vocab_cache), **data_settings(languages)
    )


def measure_one(corpus: Path, languages: list[str], cache: Path, vocab_cache: Path) -> dict:
    from translate.train.data_module import TranslationDataModule

    settings = data_settings(languages)
    vocab = TranslationDataModule(
        corpus_dir=str(corpus.parent / "copies-1"), cache_dir=str(vocab_cache), **settings
    ).vocab
    # The same vocabulary for every size, never trained on the larger copies: SentencePiece's
    # trainer holds its sample in memory, and the figures are about the data path.
    TranslationDataModule._load_or_train_vocab = lambda self: vocab
    data = TranslationDataModule(corpus_dir=str(corpus), cache_dir=str(cache), **settings)
    started = time.perf_counter()
    data.setup("fit")
    setup_seconds = time.perf_counter() - started
    pairs = sum(len(part) for part in data.datasets["train"].parts)
    started = time.perf_counter()
    batches = sum(1 for _ in data.train_dataloader())
    epoch_seconds = time.perf_counter() - started
    return {
        "pairs": pairs,
        "directions": len(data.directions),
        "setup_s": setup_seconds,
        "pairs_per_s": pairs / setup_seconds,
        "batches": batches,
        "batches_per_s": batches / epoch_seconds,
        "cache_mib": sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) / 2**20,
        **{f"{key}_mib": value for key, value in memory_mib().items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--build", nargs="+", metavar="LANG", help="time the multi-way build of each language"
    )
    parser.add_argument("--corpus", type=Path, default=REPO / "data" / "libreoffice_help")
    parser.add_argument("--languages", nargs="+", default=["de", "fr", "ja", "zh-CN", "ru"])
    parser.add_argument("--copies", default="1,4,16")
    parser.add_argument(
        "--one", nargs=3, metavar=("CORPUS", "CACHE", "VOCAB_CACHE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        corpus, cache, vocab_cache = map(Path, args.one)
        print(json.dumps(measure_one(corpus, args.languages, cache, vocab_cache)))
        return
    if args.build:
        times = build_times(args.build)
        print("| language | build s (download, extract, align) |\n|---|---:|")
        for lang, seconds in times:
            print(f"| {lang} | {seconds:.1f} |")
        return
    with tempfile.TemporaryDirectory(prefix="benchmark-multilingual-") as tmp:
        tmp = Path(tmp)
        rows = []
        counts = [int(c) for c in args.copies.split(",")]
        for copies in sorted(set([1, *counts])):
            repeated(args.corpus, args.languages, copies, tmp / f"copies-{copies}")
        train_vocabulary(tmp / "copies-1", args.languages, tmp / "vocab")
        for copies in counts:
            result = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--languages",
                    *args.languages,
                    "--one",
                    str(tmp / f"copies-{copies}"),
                    str(tmp / f"cache-{copies}"),
                    str(tmp / "vocab"),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append({"copies": copies, **json.loads(result.stdout.strip().splitlines()[-1])})
            print(json.dumps(rows[-1]), file=sys.stderr)
            shutil.rmtree(tmp / f"cache-{copies}", ignore_errors=True)
    print(
        f"en <-> {', '.join(args.languages)} ({rows[0]['directions']} directions), max_tokens 2000, max_length 200\n"
    )
    print(
        "| copies | training pairs (all directions) | setup s | pairs/s | peak RSS MiB | heap MiB | id cache MiB | epoch batches | batches/s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['copies']} | {row['pairs']:,} | {row['setup_s']:.1f} | {row['pairs_per_s']:,.0f} | "
            f"{row['VmHWM_mib']:.0f} | {row['RssAnon_mib']:.0f} | {row['cache_mib']:.1f} | {row['batches']:,} | "
            f"{row['batches_per_s']:,.0f} |"
        )


if __name__ == "__main__":
    main()
