"""Bad input stops with the file and line; good input is read exactly."""

import gzip

import pytest

from translate.text.corpus import (
    BUNDLED_CORPUS,
    CorpusError,
    filter_by_length,
    read_hf_dataset,
    read_jsonl,
    read_lines,
    read_parallel,
    read_split,
    read_tsv,
    split_files,
    split_paths,
)


def test_misaligned_files_name_both_files_and_counts(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "a.de").write_text("eins\nzwei\n")
    with pytest.raises(CorpusError) as error:
        read_parallel(tmp_path / "a.en", tmp_path / "a.de")
    message = str(error.value)
    assert "a.en has 3 lines" in message and "a.de has 2" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.de"
    path.write_bytes(b"gut\nauch gut\n" + b"kaputt \xff\xfe\n")
    with pytest.raises(CorpusError, match=r"bad\.de:3: invalid UTF-8"):
        read_lines(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(CorpusError, match=r"missing\.en: no such file"):
        read_lines(tmp_path / "missing.en")


def test_gzip_and_plain_read_the_same(tmp_path):
    text = "Grüße\n\nzweite Zeile\r\n"
    (tmp_path / "t.de").write_text(text, encoding="utf-8", newline="")
    with gzip.open(tmp_path / "u.de.gz", "wt", encoding="utf-8", newline="") as handle:
        handle.write(text)
    assert (
        read_lines(tmp_path / "t.de")
        == read_lines(tmp_path / "u.de.gz")
        == ["Grüße", "", "zweite Zeile"]
    )


def test_split_paths_prefer_plain_then_gzip(tmp_path):
    (tmp_path / "train.en").write_text("x\n")
    (tmp_path / "train.de.gz").write_bytes(gzip.compress(b"y\n"))
    src, tgt = split_paths(tmp_path, "train", "en", "de")
    assert src.name == "train.en" and tgt.name == "train.de.gz"


def test_filter_counts_every_reason():
    pairs = [
        ([5, 6], [7]),
        ([], [1]),
        ([1] * 9, [2] * 9),
        ([1] * 8, [2]),
        ([1, 2], [3, 4]),
        ([1], []),
    ]
    keep, report = filter_by_length(
        [len(s) for s, _ in pairs], [len(t) for _, t in pairs], max_length=8, max_ratio=3.0
    )
    assert keep.tolist() == [0, 4]
    assert report.removed == {"empty": 2, "longer than 8 tokens": 1, "length ratio above 3.0": 1}
    assert report.kept == 2


def test_bundled_corpus_splits_are_disjoint_by_english_side():
    train = {src for src, _ in read_parallel(*split_paths(BUNDLED_CORPUS, "train", "en", "de"))}
    test = [src for src, _ in read_parallel(*split_paths(BUNDLED_CORPUS, "test", "en", "de"))]
    dev = [src for src, _ in read_parallel(*split_paths(BUNDLED_CORPUS, "dev", "en", "de"))]
    assert len(train) > 25_000 and 800 < len(dev) < 2_000 and 1_000 < len(test) < 2_500
    assert not train.intersection(test)
    assert not train.intersection(dev)


def write_formats(directory, pairs):
    """The same pairs as text file pairs, TSV and JSONL (gzipped for TSV)."""
    import json

    (directory / "train.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (directory / "train.de").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    (directory / "train.tsv.gz").write_bytes(
        gzip.compress("".join(f"{s}\t{t}\n" for s, t in pairs).encode())
    )
    (directory / "train.jsonl").write_text(
        "".join(
            json.dumps({"translation": {"en": s, "de": t}}, ensure_ascii=False) + "\n"
            for s, t in pairs
        ),
        encoding="utf-8",
    )


def test_every_format_yields_the_same_pairs(tmp_path, fixture_dir):
    pairs = read_parallel(fixture_dir / "train.en", fixture_dir / "train.de")
    write_formats(tmp_path, pairs)
    for format in ("text", "tsv", "jsonl"):
        assert read_split(tmp_path, "train", "en", "de", format) == pairs, format
    assert split_files(tmp_path, "train", "en", "de", "tsv") == [tmp_path / "train.tsv.gz"]


def test_tsv_with_wrong_field_count_names_the_line(tmp_path):
    (tmp_path / "train.tsv").write_text("a\tb\nc\td\te\n", encoding="utf-8")
    with pytest.raises(
        CorpusError, match=r"train\.tsv:2: expected 2 tab-separated fields, found 3"
    ):
        read_tsv(tmp_path / "train.tsv")


def test_jsonl_missing_language_key_says_what_was_expected(tmp_path):
    (tmp_path / "train.jsonl").write_text(
        '{"translation": {"en": "a", "de": "b"}}\n{"translation": {"en": "c", "fr": "d"}}\n',
        encoding="utf-8",
    )
    with pytest.raises(
        CorpusError,
        match=r'train\.jsonl:2: expected \{"translation": \{"en": \.\.\., "de": \.\.\.\}\}',
    ):
        read_jsonl(tmp_path / "train.jsonl", "en", "de")
    (tmp_path / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:1: not a JSON object"):
        read_jsonl(tmp_path / "bad.jsonl", "en", "de")


def test_hf_dataset_sources_yield_the_same_pairs(tmp_path, fixture_dir):
    """load_dataset("json", …), streaming or not, and save_to_disk/load_from_disk: offline, local data."""
    import datasets

    pairs = read_parallel(fixture_dir / "train.en", fixture_dir / "train.de")
    write_formats(tmp_path, pairs)
    for streaming in (False, True):
        assert (
            read_hf_dataset(
                "json",
                "train",
                "en",
                "de",
                data_files=str(tmp_path / "train.jsonl"),
                streaming=streaming,
            )
            == pairs
        )
    records = [{"translation": {"en": s, "de": t}} for s, t in pairs]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(records)}).save_to_disk(
        str(tmp_path / "saved")
    )
    assert read_hf_dataset(str(tmp_path / "saved"), "train", "en", "de") == pairs

    with pytest.raises(CorpusError, match=r"could not load dataset .*split 'validation'"):
        read_hf_dataset(str(tmp_path / "saved"), "validation", "en", "de")
    with pytest.raises(CorpusError, match=r"row 0: expected \{'translation': \{'en': \.\.\., 'fr'"):
        read_hf_dataset(str(tmp_path / "saved"), "train", "en", "fr")


def test_data_module_trains_from_a_saved_hf_dataset(tmp_path, fixture_dir):
    import datasets

    from translate.train.data_module import TranslationDataModule

    splits = {}
    for split in ("train", "dev", "test"):
        pairs = read_parallel(fixture_dir / f"{split}.en", fixture_dir / f"{split}.de")
        splits[split] = datasets.Dataset.from_list(
            [{"translation": {"en": s, "de": t}} for s, t in pairs]
        )
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "saved"))
    from_hf = TranslationDataModule(
        corpus_dir=str(tmp_path / "saved"),
        corpus_format="hf",
        vocab_size=300,
        cache_dir=str(tmp_path / "cache"),
    )
    from_text = TranslationDataModule(
        corpus_dir=str(fixture_dir), vocab_size=300, cache_dir=str(tmp_path / "cache2")
    )
    assert from_hf.vocab.state() == from_text.vocab.state()
    from_hf.setup("fit")
    from_text.setup("fit")
    for split in ("train", "dev"):
        hf_items = [(s.tolist(), t.tolist(), r) for s, t, r in from_hf.datasets[split]]
        text_items = [(s.tolist(), t.tolist(), r) for s, t, r in from_text.datasets[split]]
        assert hf_items == text_items and len(hf_items) > 30


def test_unknown_hf_dataset_name_says_what_was_expected(monkeypatch):
    """Offline (as in CI), an unknown hub name fails at once with what was asked and expected."""
    import datasets
    import huggingface_hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        CorpusError,
        match=r"could not load dataset 'no-such-owner/no-such-corpus' "
        r"\(config 'de-en', split 'train'\).*expected a Hugging Face hub dataset",
    ):
        read_hf_dataset("no-such-owner/no-such-corpus", "train", "en", "de", config="de-en")


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_lines_end_at_lf_crlf_or_cr_in_plain_and_gzip_files(tmp_path, end):
    """Every command reads its files through read_lines or iter_lines: a file of old Mac line
    ends (CR) is as many lines as its LF twin, in parallel files too, never one long line."""
    lines = ["Click OK.", "", "Save it.", "Close."]
    data = end.join(line.encode() for line in lines) + end
    (tmp_path / "a.en").write_bytes(data)
    with gzip.open(tmp_path / "a.de.gz", "wb") as handle:
        handle.write(data)
    assert read_lines(tmp_path / "a.en") == lines
    assert read_lines(tmp_path / "a.de.gz") == lines
    assert read_parallel(tmp_path / "a.en", tmp_path / "a.de.gz") == list(zip(lines, lines))
