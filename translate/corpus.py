"""Reading parallel text, strictly: a bad file stops with its name and line, never a silent loss."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

BUNDLED_CORPUS = Path(__file__).parent / "corpora" / "libreoffice_help_en_de"


class CorpusError(ValueError):
    """Input text that cannot be used as it is; the message names the file and line."""


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (gzip if it ends in .gz), without line ends."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return decode_lines(handle, str(path))


def decode_lines(stream: Iterable[bytes], name: str) -> list[str]:
    """Decode a binary line stream as strict UTF-8; a bad byte is reported with its line."""
    lines = []
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(f"{name}:{number}: invalid UTF-8 at byte {error.start} of the line") from None
        lines.append(line.rstrip("\r\n"))
    return lines


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> list[tuple[str, str]]:
    """Line-aligned pairs from two files; different line counts are an error, never a truncation."""
    sources, targets = read_lines(src_path), read_lines(tgt_path)
    if len(sources) != len(targets):
        raise CorpusError(
            f"parallel files are misaligned: {src_path} has {len(sources)} lines "
            f"but {tgt_path} has {len(targets)}"
        )
    return list(zip(sources, targets))


def read_tsv(path: str | Path) -> list[tuple[str, str]]:
    """`source<TAB>target` a line; any other number of fields is an error at that line."""
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise CorpusError(f"{path}:{number}: expected 2 tab-separated fields, found {len(fields)}")
        pairs.append((fields[0], fields[1]))
    return pairs


def read_jsonl(path: str | Path, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """Hugging Face translation records, `{"translation": {"en": ..., "de": ...}}`, one a line."""
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        try:
            record = json.loads(line)
            translation = record["translation"]
            pairs.append((translation[src_lang], translation[tgt_lang]))
        except json.JSONDecodeError as error:
            raise CorpusError(f"{path}:{number}: not a JSON object ({error.msg})") from None
        except (KeyError, TypeError):
            raise CorpusError(
                f"{path}:{number}: expected {{\"translation\": {{\"{src_lang}\": ..., \"{tgt_lang}\": ...}}}}"
            ) from None
        if not all(isinstance(text, str) for text in pairs[-1]):
            raise CorpusError(f"{path}:{number}: the {src_lang}/{tgt_lang} values must be strings")
    return pairs


def read_hf_dataset(
    name_or_path: str, split: str, src_lang: str, tgt_lang: str,
    config: str | None = None, streaming: bool = False, data_files: str | None = None,
) -> list[tuple[str, str]]:
    """Pairs from a Hugging Face translation dataset: a hub name (`wmt14` with config `de-en`)
    through `load_dataset`, or a directory written by `save_to_disk`."""
    import datasets  # imported here: only this source needs it

    where = f"dataset {name_or_path!r} (config {config!r}, split {split!r})"
    try:
        if Path(name_or_path).is_dir() and not any(Path(name_or_path).glob("*.py")):
            dataset = datasets.load_from_disk(name_or_path)
            dataset = dataset[split] if isinstance(dataset, datasets.DatasetDict) else dataset
        else:
            dataset = datasets.load_dataset(
                name_or_path, config, split=split, streaming=streaming, data_files=data_files
            )
    except Exception as error:  # unknown name, missing split, no network: say what was asked
        raise CorpusError(f"could not load {where}: {type(error).__name__}: {error}") from None
    pairs = []
    for row, record in enumerate(dataset):
        try:
            pairs.append((record["translation"][src_lang], record["translation"][tgt_lang]))
        except (KeyError, TypeError):
            raise CorpusError(
                f"{where}, row {row}: expected {{'translation': {{'{src_lang}': ..., '{tgt_lang}': ...}}}}, "
                f"found keys {sorted(record)}"
            ) from None
    return pairs


CorpusFormat = Literal["text", "tsv", "jsonl", "hf"]


def split_files(
    directory: str | Path, split: str, src_lang: str, tgt_lang: str, format: CorpusFormat = "text"
) -> list[Path]:
    """The file(s) holding one split: `split.src` + `split.tgt`, or `split.tsv`, or `split.jsonl`."""
    if format == "text":
        return list(split_paths(directory, split, src_lang, tgt_lang))
    return [plain_or_gzipped(Path(directory) / f"{split}.{format}")]


def read_split(
    source: str | Path, split: str, src_lang: str, tgt_lang: str, format: CorpusFormat = "text",
    hf_config: str | None = None, hf_streaming: bool = False,
) -> list[tuple[str, str]]:
    """Pairs of one split in any supported format: every format yields the same pairs.

    `source` is a directory, or with `format="hf"` a dataset name or `save_to_disk` directory.
    """
    if format == "hf":
        return read_hf_dataset(str(source), split, src_lang, tgt_lang, config=hf_config, streaming=hf_streaming)
    files = split_files(source, split, src_lang, tgt_lang, format)
    if format == "text":
        return read_parallel(*files)
    if format == "tsv":
        return read_tsv(files[0])
    if format == "jsonl":
        return read_jsonl(files[0], src_lang, tgt_lang)
    raise CorpusError(f"unknown corpus format {format!r}: expected 'text', 'tsv', 'jsonl' or 'hf'")


def split_paths(directory: str | Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """`DIR/split.src` and `DIR/split.tgt`, or their `.gz` forms where those exist."""
    directory = Path(directory)
    return plain_or_gzipped(directory / f"{split}.{src_lang}"), plain_or_gzipped(directory / f"{split}.{tgt_lang}")


def plain_or_gzipped(plain: Path) -> Path:
    """`plain`, or `plain.gz` where only that exists."""
    gzipped = plain.with_name(plain.name + ".gz")
    return gzipped if gzipped.is_file() and not plain.is_file() else plain


@dataclass
class FilterReport:
    """How many pairs each filter removed; printed, never silent."""

    kept: int = 0
    removed: dict[str, int] = field(default_factory=dict)

    def count(self, reason: str) -> None:
        self.removed[reason] = self.removed.get(reason, 0) + 1

    def __str__(self) -> str:
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.removed.items())) or "none"
        return f"kept {self.kept} pairs; removed: {parts}"


def filter_training_pairs(
    ids: list[tuple[list[int], list[int]]], max_length: int, max_ratio: float
) -> tuple[list[int], FilterReport]:
    """Indices of pairs fit for training: non-empty, at most `max_length` tokens a side,
    and a length ratio of at most `max_ratio` (a sign of misalignment beyond it)."""
    report, keep = FilterReport(), []
    for index, (src, tgt) in enumerate(ids):
        if not src or not tgt:
            report.count("empty")
        elif len(src) > max_length or len(tgt) > max_length:
            report.count(f"longer than {max_length} tokens")
        elif max(len(src), len(tgt)) > max_ratio * min(len(src), len(tgt)) and max(len(src), len(tgt)) > 5:
            report.count(f"length ratio above {max_ratio}")
        else:
            keep.append(index)
    report.kept = len(keep)
    return keep, report
