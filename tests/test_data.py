"""The encoded-id cache and the loaders: same ids as SentencePiece, cached once, every pair once."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import REPO
from processes import descendants, running

from translate.errors import UsageError
from translate.text.corpus import read_parallel
from translate.text.protected import SENTINEL_PIECES, hash_share, mask_pair
from translate.text.vocab import EOS_ID, PAD_ID, Vocabularies
from translate.train.data_module import TranslationDataModule
from translate.train.encoded import (
    EncodedPairs,
    available_cpus,
    cached_encoding,
    default_workers,
    encode_to_directory,
)


@pytest.fixture(scope="module")
def fixture_pairs(fixture_dir):
    return read_parallel(fixture_dir / "train.en", fixture_dir / "train.de")


@pytest.fixture(scope="module")
def vocab(fixture_pairs):
    return Vocabularies.train(fixture_pairs, vocab_size=300)


def as_lists(encoded: EncodedPairs) -> list[tuple[list[int], list[int]]]:
    return [(src.tolist(), tgt.tolist()) for src, tgt, _ in encoded]


def test_parallel_encoding_equals_sentencepiece_and_is_memory_mapped(
    tmp_path, fixture_pairs, vocab
):
    expected = list(
        zip(
            vocab.source.encode([s for s, _ in fixture_pairs]),
            vocab.target.encode([t for _, t in fixture_pairs]),
        )
    )
    serial = encode_to_directory(
        iter(fixture_pairs), vocab, tmp_path / "serial", workers=1, chunk_size=37
    )
    parallel = encode_to_directory(
        iter(fixture_pairs), vocab, tmp_path / "parallel", workers=2, chunk_size=37
    )
    assert as_lists(serial) == as_lists(parallel) == expected
    assert isinstance(parallel.src_tokens, np.memmap) and parallel.src_tokens.dtype == np.uint16
    assert parallel.src_lengths().tolist() == [len(s) for s, _ in expected]


def test_an_interrupted_encoding_leaves_no_cache(tmp_path, fixture_pairs, vocab):
    def broken():
        yield from fixture_pairs[:50]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached_encoding("k", broken(), vocab, tmp_path, workers=1)
    assert not any(path.is_dir() for path in tmp_path.iterdir()), list(tmp_path.iterdir())
    encoded = cached_encoding("k", iter(fixture_pairs), vocab, tmp_path, workers=1)
    assert len(encoded) == len(fixture_pairs)


def ids_directories(cache):
    return sorted(p.name for p in cache.iterdir() if p.is_dir() and p.name.startswith("ids-"))


def test_cache_is_reused_and_a_changed_corpus_or_vocabulary_invalidates_it(tmp_path, fixture_dir):
    corpus, cache = tmp_path / "corpus", tmp_path / "cache"
    shutil.copytree(fixture_dir, corpus)
    first = TranslationDataModule(corpus_dir=str(corpus), vocab_size=300, cache_dir=str(cache))
    first.setup("fit")
    (directory,) = ids_directories(cache)
    stamp = (cache / directory / "src.tokens").stat().st_mtime_ns

    again = TranslationDataModule(corpus_dir=str(corpus), vocab_size=300, cache_dir=str(cache))
    again.setup("fit")
    assert ids_directories(cache) == [directory]
    assert (cache / directory / "src.tokens").stat().st_mtime_ns == stamp, "the cache was rewritten"
    assert as_lists(again.datasets["train"]) == as_lists(first.datasets["train"])

    TranslationDataModule(corpus_dir=str(corpus), vocab_size=250, cache_dir=str(cache)).setup("fit")
    assert len(ids_directories(cache)) == 2, "another vocabulary must not reuse the ids"

    for lang, line in (("en", "One more line."), ("de", "Noch eine Zeile.")):
        with open(corpus / f"train.{lang}", "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    changed = TranslationDataModule(corpus_dir=str(corpus), vocab_size=300, cache_dir=str(cache))
    changed.setup("fit")
    assert len(ids_directories(cache)) == 3, "a changed corpus must not reuse the ids"


def batch_pairs(batch) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(source ids, target ids) of each row, with padding and the added EOS removed."""
    pairs = []
    for src, tgt in zip(batch["src"].tolist(), batch["tgt_out"].tolist()):
        src, tgt = [t for t in src if t != PAD_ID], [t for t in tgt if t != PAD_ID]
        assert src[-1] == EOS_ID and tgt[-1] == EOS_ID
        pairs.append((tuple(src[:-1]), tuple(tgt[:-1])))
    return pairs


def test_loader_gives_every_kept_pair_once_per_epoch_within_the_budget(tmp_path, fixture_dir):
    data = TranslationDataModule(
        corpus_dir=str(fixture_dir),
        vocab_size=300,
        max_tokens=300,
        max_length=40,
        cache_dir=str(tmp_path),
    )
    data.setup("fit")
    kept = Counter((tuple(s.tolist()), tuple(t.tolist())) for s, t, _ in data.datasets["train"])
    assert 200 < sum(kept.values()) < 400, "the length filter should remove some fixture pairs"
    loader = data.train_dataloader()
    epochs = []
    for epoch in (0, 1):
        loader.batch_sampler.set_epoch(epoch)
        seen = []
        for batch in loader:
            assert batch["src"].numel() <= 300 and batch["tgt_out"].numel() <= 300
            seen.extend(batch_pairs(batch))
        assert Counter(seen) == kept
        epochs.append(seen)
    assert epochs[0] != epochs[1], "epochs should be reshuffled"


def test_ddp_ranks_get_disjoint_equal_shares_of_the_corpus(tmp_path, fixture_dir):
    data = TranslationDataModule(
        corpus_dir=str(fixture_dir), vocab_size=300, max_tokens=500, cache_dir=str(tmp_path)
    )
    data.setup("fit")
    everything = Counter(
        (tuple(s.tolist()), tuple(t.tolist())) for s, t, _ in data.datasets["train"]
    )
    shares = []
    for rank in range(2):
        data.trainer = SimpleNamespace(global_rank=rank, world_size=2)
        shares.append([batch_pairs(batch) for batch in data.train_dataloader()])
    assert len(shares[0]) == len(shares[1]) > 1
    flat = [Counter(pair for batch in share for pair in batch) for share in shares]
    assert flat[0] + flat[1] == everything
    assert sum(flat[0].values()) + sum(flat[1].values()) == sum(everything.values())


def test_target_tokens_are_those_of_the_training_targets(tmp_path, fixture_dir, fixture_pairs):
    data = TranslationDataModule(
        corpus_dir=str(fixture_dir), vocab_size=300, cache_dir=str(tmp_path)
    )
    expected = sorted(
        {t for ids in data.vocab.target.encode([t for _, t in fixture_pairs]) for t in ids}
    )
    assert data.target_tokens() == expected
    assert len(expected) < len(data.vocab.target)


def test_target_tokens_leave_out_pairs_the_length_filter_removed(tmp_path, fixture_dir):
    """A character that occurs only in a pair too long to train on is not a training target."""
    corpus = tmp_path / "corpus"
    shutil.copytree(fixture_dir, corpus)
    with (
        open(corpus / "train.en", "a", encoding="utf-8") as en,
        open(corpus / "train.de", "a", encoding="utf-8") as de,
    ):
        en.write("word " * 60 + "\n")
        de.write("Ω " * 60 + "\n")
    data = TranslationDataModule(
        corpus_dir=str(corpus), vocab_size=300, max_length=50, cache_dir=str(tmp_path / "cache")
    )
    [omega] = [
        i
        for i in data.vocab.target.encode(["Ω"])[0]
        if data.vocab.target.processor.id_to_piece(i).strip("▁")
    ]
    data.setup("fit")
    assert len(data.datasets["train"]) < 401, "the long pair must be filtered out"
    assert omega not in data.target_tokens()
    kept = {t for _, tgt, _ in data.datasets["train"] for t in tgt.tolist()}
    assert data.target_tokens() == sorted(kept)
    assert np.bincount(np.asarray(data.datasets["train"].tgt_tokens))[omega] == 60, (
        "the cache still holds the pair"
    )


def test_a_killed_encodings_leftovers_are_removed_once_its_process_is_gone(
    tmp_path, fixture_pairs, vocab
):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    stale = tmp_path / f"ids-k.partial-{host}-{gone.pid}"
    alive = tmp_path / f"ids-k.partial-{host}-{os.getppid()}"  # still running: left alone
    elsewhere = tmp_path / "ids-k.partial-another-host-1"  # cannot be checked from here
    for directory in (stale, alive, elsewhere):
        directory.mkdir()
        (directory / "src.tokens").write_bytes(b"half")
    cached_encoding("k", iter(fixture_pairs), vocab, tmp_path, workers=1)
    assert not stale.exists() and alive.exists() and elsewhere.exists()
    assert (tmp_path / "ids-k" / "meta.json").is_file()


def test_encoding_needs_neither_fcntl_nor_cpu_affinity(tmp_path, fixture_dir, monkeypatch):
    """macOS has no os.sched_getaffinity and Windows no fcntl: the data path runs without them."""
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert available_cpus() == (os.cpu_count() or 1) and default_workers() >= 1
    script = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import os; del os.sched_getaffinity\n"
        "from translate.train.data_module import TranslationDataModule\n"
        "import translate.cli.translate, translate.cli.evaluate, translate.cli.export, translate.cli.inspect\n"
        f"data = TranslationDataModule(corpus_dir={str(fixture_dir)!r}, vocab_size=300, "
        f"cache_dir={str(tmp_path)!r}, encode_workers=2)\n"
        "data.setup('fit')\n"
        "print(len(data.datasets['train']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.split()[-1]) > 300


class _UnloadableModels:
    """A vocabulary whose SentencePiece models cannot be loaded: every encoding worker fails to start."""

    def __init__(self, vocab: Vocabularies) -> None:
        self.source = self.target = self
        self.model_bytes, self._size = b"not a SentencePiece model", len(vocab.target)

    def __len__(self) -> int:
        return self._size


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path, fixture_pairs, vocab):
    def hang(signum, frame):
        raise TimeoutError("the encoding hung after its worker died")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(120)
    try:
        with pytest.raises(RuntimeError, match="worker process encoding the corpus died"):
            encode_to_directory(
                iter(fixture_pairs),
                _UnloadableModels(vocab),
                tmp_path / "ids",
                workers=2,
                chunk_size=37,
            )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert list(tmp_path.iterdir()) == [], "a failed encoding must leave nothing behind"


@pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="follows the processes through /proc"
)
def test_a_training_killed_while_encoding_leaves_no_process_behind(tmp_path, fixture_dir):
    """SIGKILL runs no clean-up: the encoding workers (and the resource tracker they hold open)
    must notice their parent is gone by themselves."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in fixture_dir.iterdir():
        split, lang = path.name.split(".")
        text = path.read_text(encoding="utf-8") * (
            60 if split == "train" else 1
        )  # 24,000 pairs: 3 chunks
        (corpus / f"{split}.{'xx' if lang == 'en' else 'yy'}").write_text(text, encoding="utf-8")
    training = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "translate.cli.train",
            "fit",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            "--data.corpus_dir",
            str(corpus),
            "--data.src_lang",
            "xx",
            "--data.tgt_lang",
            "yy",
            "--data.vocab_size",
            "300",
            "--data.encode_workers",
            "2",
            "--data.cache_dir",
            str(tmp_path / "cache"),
            "--run_dir",
            str(tmp_path / "run"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while (
            len(
                [
                    pid
                    for pid, command in descendants(training.pid).items()
                    if b"spawn_main" in command
                ]
            )
            < 2
        ):
            assert training.poll() is None, training.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the encoding workers never started"
            time.sleep(0.02)
        children = descendants(training.pid)
        training.kill()
        training.wait()
        for _ in range(100):
            if not running(children):
                break
            time.sleep(0.1)
        left = {pid: children[pid].replace(b"\0", b" ")[:120] for pid in running(children)}
        assert not left, f"still running 10 s after the training was killed: {left}"
    finally:
        training.kill()
        training.wait()


def test_protect_spans_masks_that_share_of_the_training_pairs_and_keys_its_own_caches(
    tmp_path, fixture_dir, fixture_pairs
):
    """Pairs chosen by a hash of the source get sentinels for the spans both sides keep, the rest
    stay as written; the vocabulary holds the sentinels and splits digits; neither cache is shared
    with a run without protection."""
    cache = tmp_path / "cache"
    plain = TranslationDataModule(corpus_dir=str(fixture_dir), vocab_size=300, cache_dir=str(cache))
    data = TranslationDataModule(
        corpus_dir=str(fixture_dir),
        vocab_size=300,
        cache_dir=str(cache),
        protect_spans=0.5,
        split_digits=True,
    )
    expected = [
        mask_pair(src, tgt) if hash_share(src) < 0.5 else (src, tgt) for src, tgt in fixture_pairs
    ]
    assert list(data.prepared.training_pairs()) == expected
    masked = sum(pair != original for pair, original in zip(expected, fixture_pairs))
    assert masked and masked < len(fixture_pairs)
    assert all(data.vocab.source.processor.piece_to_id(s) > 3 for s in SENTINEL_PIECES)
    assert data.vocab.state() != plain.vocab.state()
    data.setup("fit")
    plain.setup("fit")
    assert len(ids_directories(cache)) == 2
    with pytest.raises(UsageError, match="data.protect_spans must be a share from 0 to 1"):
        TranslationDataModule(corpus_dir=str(fixture_dir), cache_dir=str(cache), protect_spans=2)
