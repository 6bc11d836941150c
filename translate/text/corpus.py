"""Reading parallel text, strictly: a bad file stops with its name and line, never a silent loss."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np

from translate.errors import UsageError

BUNDLED_CORPUS = Path(__file__).resolve().parent.parent / "corpora" / "libreoffice_help_en_de"


class CorpusError(UsageError):
    """Input text that cannot be used as it is; the message names the file and line."""


_LINE_END = re.compile(rb"\r\n|\n|\r")
BLOCK = 1 << 16  # bytes read at a time


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (gzip if it ends in .gz), without line ends (each line
    ends at LF, CRLF or CR)."""
    return list(iter_lines(path))


def split_lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a byte stream given in blocks of any size, each with its end (`\n`, `\r\n`
    or `\r`; a last line without one as it is). A `\r` that ends a block ends its line at once,
    so a live stream is not kept waiting for the next block; a `\n` opening that next block is
    the rest of the `\r\n` and is dropped."""
    pending = bytearray()
    after_cr = False
    for block in blocks:
        if not block:
            continue
        start = 1 if after_cr and block.startswith(b"\n") else 0
        for match in _LINE_END.finditer(block, start):
            pending += block[start : match.end()]
            yield bytes(pending)
            pending.clear()
            start = match.end()
        pending += block[start:]
        after_cr = block.endswith(b"\r")
    if pending:
        yield bytes(pending)


def read_blocks(handle: BinaryIO, live: bool) -> Iterator[bytes]:
    """`handle`'s bytes, a block at a time; `live` (a terminal or pipe): what has arrived, so a
    line is answered as soon as it comes."""
    read = handle.read1 if live else handle.read
    while block := read(BLOCK):
        yield block


def text_lines(handle: BinaryIO, name: str, live: bool) -> Iterator[str]:
    """The lines of an open binary stream (standard input: `sys.stdin.buffer`), decoded, without
    their ends; `name` is what an error calls the stream."""
    return iter_decoded(split_lines(read_blocks(handle, live)), name)


def iter_lines(path: str | Path, live: bool = False) -> Iterator[str]:
    """Stream the lines of a UTF-8 text file (gzip if its name ends in .gz), nothing held in
    memory (`text_lines`; `live`: a pipe, each line as it comes): a missing file, a directory,
    or a truncated or unreadable one stops with the file's name."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file")
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory, not a text file")
    return _file_lines(path, live)


def _file_lines(path: Path, live: bool) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        lines = text_lines(handle, str(path), live)
        number = 0
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except (EOFError, OSError, zlib.error) as error:
                raise CorpusError(
                    f"{path}: unreadable after line {number} ({error}); is the file truncated?"
                ) from None
            number += 1
            yield line


def decode_lines(stream: Iterable[bytes], name: str) -> list[str]:
    """Decode a binary line stream as strict UTF-8; a bad byte is reported with its line."""
    return list(iter_decoded(stream, name))


def iter_decoded(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """Strict UTF-8 lines without their line ends; a byte-order mark opening the first line
    (Windows editors write one) is dropped, or it would reach the model as text."""
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(
                f"{name}:{number}: invalid UTF-8 at byte {error.start} of the line"
            ) from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        yield line.rstrip("\r\n")


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> list[tuple[str, str]]:
    """Line-aligned pairs from two files; different line counts are an error, never a truncation."""
    return list(iter_parallel(src_path, tgt_path))


def iter_parallel(src_path: str | Path, tgt_path: str | Path) -> Iterator[tuple[str, str]]:
    """Stream line-aligned pairs; where one file ends first, both files' line counts are reported."""
    sources, targets = iter_lines(src_path), iter_lines(tgt_path)
    count = 0
    for source, target in zip_longest(sources, targets):
        if source is None or target is None:
            n_src = count + (source is not None) + sum(1 for _ in sources)
            n_tgt = count + (target is not None) + sum(1 for _ in targets)
            raise CorpusError(
                f"parallel files are misaligned: {src_path} has {n_src} lines "
                f"but {tgt_path} has {n_tgt}"
            )
        count += 1
        yield source, target


def read_tsv(path: str | Path) -> list[tuple[str, str]]:
    """`source<TAB>target` a line; any other number of fields is an error at that line."""
    return list(iter_tsv(path))


def iter_tsv(path: str | Path) -> Iterator[tuple[str, str]]:
    for number, line in enumerate(iter_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise CorpusError(
                f"{path}:{number}: expected 2 tab-separated fields, found {len(fields)}"
            )
        yield fields[0], fields[1]


def read_jsonl(path: str | Path, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """Hugging Face translation records, `{"translation": {"en": ..., "de": ...}}`, one a line."""
    return list(iter_jsonl(path, src_lang, tgt_lang))


def iter_jsonl(path: str | Path, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
    for number, line in enumerate(iter_lines(path), start=1):
        try:
            translation = json.loads(line)["translation"]
            pair = (translation[src_lang], translation[tgt_lang])
        except json.JSONDecodeError as error:
            raise CorpusError(f"{path}:{number}: not a JSON object ({error.msg})") from None
        except (KeyError, TypeError):
            raise CorpusError(
                f'{path}:{number}: expected {{"translation": {{"{src_lang}": ..., "{tgt_lang}": ...}}}}'
            ) from None
        if not all(isinstance(text, str) for text in pair):
            raise CorpusError(f"{path}:{number}: the {src_lang}/{tgt_lang} values must be strings")
        yield pair


def load_hf_dataset(
    name_or_path: str,
    split: str,
    config: str | None = None,
    streaming: bool = False,
    data_files: str | None = None,
):
    """A Hugging Face dataset split: a hub name (`wmt14` with config `de-en`) through
    `load_dataset` (streaming for corpora larger than memory), or a `save_to_disk` directory."""
    import datasets  # imported here: only this source needs it

    try:
        if Path(name_or_path).is_dir() and not any(Path(name_or_path).glob("*.py")):
            dataset = datasets.load_from_disk(name_or_path)
            return dataset[split] if isinstance(dataset, datasets.DatasetDict) else dataset
        return datasets.load_dataset(
            name_or_path, config, split=split, streaming=streaming, data_files=data_files
        )
    except Exception as error:  # unknown name, missing split, no network: say what was asked
        raise CorpusError(
            f"could not load dataset {name_or_path!r} (config {config!r}, split {split!r}): "
            f"{type(error).__name__}: {error}; expected a Hugging Face hub dataset name with its "
            "config and split (e.g. 'wmt14', 'de-en', 'train') or a directory written by save_to_disk"
        ) from None


def read_hf_dataset(
    name_or_path: str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    config: str | None = None,
    streaming: bool = False,
    data_files: str | None = None,
) -> list[tuple[str, str]]:
    """Pairs from a Hugging Face translation dataset (see `load_hf_dataset`)."""
    return list(
        iter_hf_dataset(name_or_path, split, src_lang, tgt_lang, config, streaming, data_files)
    )


def iter_hf_dataset(
    name_or_path: str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    config: str | None = None,
    streaming: bool = False,
    data_files: str | None = None,
) -> Iterator[tuple[str, str]]:
    dataset = load_hf_dataset(name_or_path, split, config, streaming, data_files)
    where = f"dataset {name_or_path!r} (config {config!r}, split {split!r})"
    for row, record in enumerate(dataset):
        try:
            yield record["translation"][src_lang], record["translation"][tgt_lang]
        except (KeyError, TypeError):
            raise CorpusError(
                f"{where}, row {row}: expected {{'translation': {{'{src_lang}': ..., '{tgt_lang}': ...}}}}, "
                f"found keys {sorted(record)}"
            ) from None


# text: {split}.{lang} file pairs; multiway: the same, one file per language of a multi-way
# corpus, where a blank line means that language lacks the sentence (the pair is skipped).
CorpusFormat = Literal["text", "multiway", "tsv", "jsonl", "hf"]


def split_files(
    directory: str | Path, split: str, src_lang: str, tgt_lang: str, format: CorpusFormat = "text"
) -> list[Path]:
    """The file(s) holding one split: `split.src` + `split.tgt`, or `split.tsv`, or `split.jsonl`.
    A missing one is an error that says what the directory holds for that split instead."""
    if format in ("text", "multiway"):
        files = list(split_paths(directory, split, src_lang, tgt_lang))
    else:
        files = [plain_or_gzipped(Path(directory) / f"{split}.{format}")]
    for path in files:
        if not path.is_file():
            raise CorpusError(
                f"{path}: no such file{_what_is_there(Path(directory), split, format)}"
            )
    return files


def _what_is_there(directory: Path, split: str, format: str) -> str:
    """A hint for a missing split file: the directory's other files of that split, and the corpus
    format or languages they would need."""
    if not directory.is_dir():
        return f" ({directory} is not a directory)"
    names = sorted(p.name for p in directory.glob(f"{split}.*") if p.is_file())
    if not names:
        return f" ({directory} holds no {split}.* files)"
    stems = {name.removesuffix(".gz") for name in names}
    langs = sorted(stem.split(".", 1)[1] for stem in stems - {f"{split}.tsv", f"{split}.jsonl"})
    hints = [
        (
            format in ("text", "multiway") and len(langs) >= 2,
            f"languages among {', '.join(langs)} (--data.src_lang, --data.tgt_lang)",
        ),
        (f"{split}.tsv" in stems, "corpus format 'tsv' (--data.corpus_format tsv)"),
        (f"{split}.jsonl" in stems, "corpus format 'jsonl' (--data.corpus_format jsonl)"),
        (
            len(langs) >= 2,
            f"corpus format 'text' (--data.corpus_format text) with languages among {', '.join(langs)}",
        ),
    ]
    need = next((hint for applies, hint in hints if applies), None)
    if need is None:
        return f"; {directory} holds {', '.join(names)}"
    return f"; {directory} holds {', '.join(names)}: that needs {need}"


def read_split(
    source: str | Path,
    split: str,
    src_lang: str,
    tgt_lang: str,
    format: CorpusFormat = "text",
    hf_config: str | None = None,
    hf_streaming: bool = False,
) -> list[tuple[str, str]]:
    """Pairs of one split in any supported format: every format yields the same pairs.

    `source` is a directory, or with `format="hf"` a dataset name or `save_to_disk` directory.
    """
    return list(iter_split(source, split, src_lang, tgt_lang, format, hf_config, hf_streaming))


def iter_split(
    source: str | Path,
    split: str,
    src_lang: str,
    tgt_lang: str,
    format: CorpusFormat = "text",
    hf_config: str | None = None,
    hf_streaming: bool = False,
) -> Iterator[tuple[str, str]]:
    """`read_split` as a stream, for corpora that should never sit in memory whole."""
    if format == "hf":
        return iter_hf_dataset(
            str(source), split, src_lang, tgt_lang, config=hf_config, streaming=hf_streaming
        )
    files = split_files(source, split, src_lang, tgt_lang, format)
    if format == "text":
        return iter_parallel(*files)
    if format == "multiway":
        return ((src, tgt) for src, tgt in iter_parallel(*files) if src.strip() and tgt.strip())
    if format == "tsv":
        return iter_tsv(files[0])
    if format == "jsonl":
        return iter_jsonl(files[0], src_lang, tgt_lang)
    raise CorpusError(
        f"unknown corpus format {format!r}: expected 'text', 'multiway', 'tsv', 'jsonl' or 'hf'"
    )


def split_paths(
    directory: str | Path, split: str, src_lang: str, tgt_lang: str
) -> tuple[Path, Path]:
    """`DIR/split.src` and `DIR/split.tgt`, or their `.gz` forms where those exist."""
    directory = Path(directory)
    return plain_or_gzipped(directory / f"{split}.{src_lang}"), plain_or_gzipped(
        directory / f"{split}.{tgt_lang}"
    )


def plain_or_gzipped(plain: Path) -> Path:
    """`plain`, or `plain.gz` where only that exists."""
    gzipped = plain.with_name(plain.name + ".gz")
    return gzipped if gzipped.is_file() and not plain.is_file() else plain


@dataclass
class FilterReport:
    """How many pairs each filter removed; printed, never silent."""

    kept: int = 0
    removed: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.removed.items())) or "none"
        return f"kept {self.kept} pairs; removed: {parts}"


def filter_by_length(
    src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_length: int, max_ratio: float
) -> tuple[np.ndarray, FilterReport]:
    """Indices of pairs fit for training: non-empty, at most `max_length` tokens a side, and
    a length ratio of at most `max_ratio` (a sign of misalignment beyond it; pairs of at most
    5 tokens are exempt).  Vectorised, so millions of pairs filter in well under a second."""
    src, tgt = np.asarray(src_lengths, dtype=np.int64), np.asarray(tgt_lengths, dtype=np.int64)
    longer, shorter = np.maximum(src, tgt), np.minimum(src, tgt)
    empty = shorter == 0
    too_long = ~empty & (longer > max_length)
    skewed = ~empty & ~too_long & (longer > max_ratio * shorter) & (longer > 5)
    report = FilterReport()
    for reason, mask in (
        ("empty", empty),
        (f"longer than {max_length} tokens", too_long),
        (f"length ratio above {max_ratio}", skewed),
    ):
        if mask.any():
            report.removed[reason] = int(mask.sum())
    keep = np.flatnonzero(~(empty | too_long | skewed))
    report.kept = len(keep)
    return keep, report
