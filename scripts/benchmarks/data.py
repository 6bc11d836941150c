"""`bench.py data`: the data path's speed and memory as the corpus grows.

Pairs (the default): the bundled training split, and corpora of `--sizes` pairs made of it
repeated (a copy number prepended, so that no two pairs are equal); each size measured in a fresh
process, so that its peak resident memory is its own, with the bundled corpus's 4k joint
vocabulary trained once beforehand (the figures are the data path's, not SentencePiece
training's): encoding pairs/s (read, UTF-8 check, SentencePiece in worker processes, the id
cache written), peak resident memory (VmHWM) and its anonymous (heap) part at the end, padding
efficiency (real tokens over padded positions, both sides), and batches/s of one epoch of the
training loader with `--max-tokens`.

`--multiway CORPUS`: the many-to-many path, English to and from `--languages`: the multi-way
corpus with every row repeated `--copies` times, the data module set up in a fresh process a
size (every direction encoded by workers, filtered) and one epoch of temperature-drawn batches
read, the vocabulary trained once on one copy beforehand. `--build LANG ...`: the multi-way
build of each language alone (`scripts/build_corpus.py`: download, extraction, alignment).
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import REPO, environment, publish, say, table, tool_command


def run(args) -> int:
    if args.measure:
        kind, *settings = json.loads(args.measure)
        print(json.dumps((measure_pairs if kind == "pairs" else measure_multiway)(*settings)))
        return 0
    if args.build:
        return build_times(args)
    return multiway(args) if args.multiway else pairs(args)


def memory_mib() -> dict[str, float]:
    """Peak resident (VmHWM) and current anonymous memory (RssAnon) of this process, in MiB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {f"{key}_mib": int(status[key].split()[0]) / 1024 for key in ("VmHWM", "RssAnon")}


def in_fresh_process(kind: str, *settings) -> dict:
    """One measurement in a process of its own (its peak memory its own); its figures."""
    command = tool_command("data", "--measure", json.dumps([kind, *settings]))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: the {kind} measurement failed:\n{done.stderr[-3000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    say(json.dumps(figures))
    return figures


def repeated_pairs(directory: Path, pairs: int) -> None:
    """`pairs` lines a side, the bundled training split repeated with distinct prefixes."""
    from translate.text.corpus import BUNDLED_CORPUS, iter_parallel, split_paths

    directory.mkdir(parents=True, exist_ok=True)
    written, copy = 0, 0
    with (
        open(directory / "train.en", "w", encoding="utf-8") as en,
        open(directory / "train.de", "w", encoding="utf-8") as de,
    ):
        while written < pairs:
            for src, tgt in iter_parallel(*split_paths(BUNDLED_CORPUS, "train", "en", "de")):
                prefix = f"{copy} " if copy else ""
                en.write(prefix + src + "\n")
                de.write(prefix + tgt + "\n")
                written += 1
                if written == pairs:
                    break
            copy += 1


def measure_pairs(corpus, vocab_file, cache, workers, max_tokens, max_length) -> dict:
    import numpy as np
    from torch.utils.data import DataLoader

    from translate.text.corpus import filter_by_length, iter_split
    from translate.text.vocab import PAD_ID, Vocabularies
    from translate.train.data_module import TokenBatchSampler, collate
    from translate.train.encoded import encode_to_directory

    cache = Path(cache)
    vocab = Vocabularies.from_state({"joint": Path(vocab_file).read_bytes()})
    started = time.perf_counter()
    pairs = iter_split(corpus, "train", "en", "de")
    encoded = encode_to_directory(pairs, vocab, cache / "ids", workers=workers)
    encode_seconds = time.perf_counter() - started
    started = time.perf_counter()
    keep, report = filter_by_length(encoded.src_lengths(), encoded.tgt_lengths(), max_length, 3.0)
    kept = encoded.select(keep)
    lengths = np.stack([kept.src_lengths() + 1, kept.tgt_lengths() + 1], axis=1)
    sampler = TokenBatchSampler(lengths, max_tokens, shuffle=True, seed=1)
    index_seconds = time.perf_counter() - started
    real = padded = batches = 0
    started = time.perf_counter()
    for batch in DataLoader(kept, batch_sampler=sampler, collate_fn=collate):
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
        **memory_mib(),
    }


def pairs(args) -> int:
    from translate.text.corpus import BUNDLED_CORPUS, read_split
    from translate.text.vocab import Vocabularies

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-data-") as tmp:
        tmp = Path(tmp)
        started = time.perf_counter()
        vocab = Vocabularies.train(read_split(BUNDLED_CORPUS, "train", "en", "de"), 4000)
        say(f"vocabulary: 4000-piece joint unigram in {time.perf_counter() - started:.1f} s")
        vocab_file = tmp / "joint.model"
        vocab_file.write_bytes(vocab.state()["joint"])
        for size in args.sizes:
            corpus = BUNDLED_CORPUS if size == "bundled" else tmp / f"corpus-{size}"
            if size != "bundled":
                repeated_pairs(corpus, int(size))
            cache = tmp / f"cache-{size}"
            cache.mkdir()
            settings = (str(corpus), str(vocab_file), str(cache), args.workers)
            rows.append(in_fresh_process("pairs", *settings, args.max_tokens, args.max_length))
    cells = [
        (f"{r['pairs']:,}", f"{r['encode_pairs_per_s']:,.0f}", f"{r['VmHWM_mib']:.0f}")
        + (f"{r['RssAnon_mib']:.0f}", f"{r['cache_mib']:.1f}", f"{r['padding_efficiency']:.1%}")
        + (f"{r['loader_batches_per_s']:,.0f}", f"{r['filter_and_batch_s']:.2f}")
        for r in rows
    ]
    headers = ("pairs", "encode pairs/s", "peak RSS MiB", "heap (RssAnon) MiB", "id cache MiB")
    headers += ("padding efficiency", "loader batches/s", "filter+batch s")
    text = f"max_tokens {args.max_tokens}, max_length {args.max_length}, workers "
    text += f"{args.workers or 'default'}\n\n{table(headers, cells, 'l' * len(headers))}"
    publish(environment(), text, args.json, rows=rows)
    return 0


def repeated_rows(corpus: Path, languages: list[str], copies: int, out: Path) -> None:
    """The multi-way corpus with every training row repeated `copies` times (blank lines stay
    blank, a copy number prepended to the others)."""
    out.mkdir(parents=True)
    for path in sorted(corpus.glob("*.gz")):
        split, lang = path.name[:-3].split(".", 1)
        if lang not in ["en", *languages]:
            continue
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:-1]
        with open(out / f"{split}.{lang}", "w", encoding="utf-8") as handle:
            for copy in range(copies if split == "train" else 1):
                prefix = f"{copy} " if copy else ""
                handle.writelines((prefix + line if line.strip() else "") + "\n" for line in lines)


def multiway_settings(languages: list[str]) -> dict:
    return dict(
        corpus_format="multiway",
        languages=languages,
        vocab_size=12000,
        character_coverage=0.9995,
        max_tokens=2000,
        max_length=200,
        dev_max_sentences=100,
    )


def measure_multiway(corpus, languages, cache, vocab_cache) -> dict:
    from translate.train.data_module import TranslationDataModule
    from translate.train.prepared import PreparedData

    settings = multiway_settings(languages)
    one_copy = str(Path(corpus).parent / "copies-1")
    vocab = TranslationDataModule(corpus_dir=one_copy, cache_dir=vocab_cache, **settings).vocab
    # The same vocabulary for every size, never trained on the larger copies: SentencePiece's
    # trainer holds its sample in memory, and the figures are about the data path.
    PreparedData._load_or_train_vocab = lambda self: vocab
    data = TranslationDataModule(corpus_dir=corpus, cache_dir=cache, **settings)
    started = time.perf_counter()
    data.setup("fit")
    setup_seconds = time.perf_counter() - started
    pairs = sum(len(part) for part in data.datasets["train"].parts)
    started = time.perf_counter()
    batches = sum(1 for _ in data.train_dataloader())
    epoch_seconds = time.perf_counter() - started
    return {
        "pairs": pairs,
        "directions": len(data.run_data.directions),
        "setup_s": setup_seconds,
        "pairs_per_s": pairs / setup_seconds,
        "batches": batches,
        "batches_per_s": batches / epoch_seconds,
        "cache_mib": sum(p.stat().st_size for p in Path(cache).rglob("*") if p.is_file()) / 2**20,
        **memory_mib(),
    }


def multiway(args) -> int:
    from translate.train.data_module import TranslationDataModule

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-multiway-") as tmp:
        tmp = Path(tmp)
        for copies in sorted({1, *args.copies}):
            repeated_rows(args.multiway, args.languages, copies, tmp / f"copies-{copies}")
        # The vocabulary into the cache before any measured process: its trainer's memory is
        # not the data path's.
        settings = multiway_settings(args.languages)
        TranslationDataModule(
            corpus_dir=str(tmp / "copies-1"), cache_dir=str(tmp / "vocab"), **settings
        )
        for copies in args.copies:
            corpus, cache = str(tmp / f"copies-{copies}"), str(tmp / f"cache-{copies}")
            figures = in_fresh_process(
                "multiway", corpus, args.languages, cache, str(tmp / "vocab")
            )
            rows.append({"copies": copies, **figures})
            shutil.rmtree(cache, ignore_errors=True)
    cells = [
        (r["copies"], f"{r['pairs']:,}", f"{r['setup_s']:.1f}", f"{r['pairs_per_s']:,.0f}")
        + (f"{r['VmHWM_mib']:.0f}", f"{r['RssAnon_mib']:.0f}", f"{r['cache_mib']:.1f}")
        + (f"{r['batches']:,}", f"{r['batches_per_s']:,.0f}")
        for r in rows
    ]
    headers = ("copies", "training pairs (all directions)", "setup s", "pairs/s", "peak RSS MiB")
    headers += ("heap MiB", "id cache MiB", "epoch batches", "batches/s")
    text = f"en <-> {', '.join(args.languages)} ({rows[0]['directions']} directions), "
    text += f"max_tokens 2000, max_length 200\n\n{table(headers, cells)}"
    publish(environment(), text, args.json, rows=rows)
    return 0


def build_times(args) -> int:
    rows = []
    for lang in args.build:
        with tempfile.TemporaryDirectory() as out:
            command = [sys.executable, str(REPO / "scripts" / "build_corpus.py")]
            started = time.perf_counter()
            subprocess.run([*command, "--langs", lang, "--out", out], check=True)
            rows.append({"language": lang, "seconds": time.perf_counter() - started})
    cells = [(row["language"], f"{row['seconds']:.1f}") for row in rows]
    text = table(("language", "build s (download, extract, align)"), cells)
    publish(environment(), text, args.json, rows=rows)
    return 0
