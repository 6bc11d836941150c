"""Public test sets by name (sacrebleu's `-t wmt14 -l en-de`): sacrebleu downloads them once into
its cache (`$SACREBLEU`, else ~/.sacrebleu) and reads them from there after."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from translate.errors import UsageError
from translate.text.language_id import base_language


@dataclass(frozen=True)
class TestSet:
    name: str
    pair: str  # as sacrebleu writes it: en-de
    sources: list[str]
    references: list[list[str]]  # one list of lines per reference
    reference_files: list[str]

    __test__ = False  # not a pytest class

    @property
    def target_lang(self) -> str:
        return self.pair.split("-", 1)[1]

    def description(self) -> str:
        refs = f", {len(self.references)} references" if len(self.references) > 1 else ""
        return f"sacrebleu's {self.name} {self.pair}{refs}"


def sacrebleu_pair(source_lang: str, target_lang: str) -> str:
    """A checkpoint's languages as sacrebleu names pairs: zh-CN → zh, pt-BR → pt."""
    return f"{base_language(source_lang)}-{base_language(target_lang)}"


def fetch_hint(name: str, pair: str) -> str:
    from sacrebleu.utils import SACREBLEU_DIR

    return (
        f"on a connected machine run `sacrebleu -t {name} -l {pair} --echo src > /dev/null` "
        f"and copy its ~/.sacrebleu/{name} to {SACREBLEU_DIR}/ (or point SACREBLEU at a copy)"
    )


class TestSetError(UsageError):
    """A test set that cannot be had: `field` says which part of the request is at fault
    ("name": sacrebleu knows no such set, "pair": not one of its pairs, "cache": not cached and
    not downloadable); `detail` is why, and what to do."""

    def __init__(self, name: str, pair: str, field: str, detail: str) -> None:
        self.name, self.pair, self.field, self.detail = name, pair, field, detail
        if field == "cache":
            super().__init__(f"test set {name} {pair} {detail}")
        else:
            what = f"language pair {pair}" if field == "pair" else f"test set {name}"
            super().__init__(f"{what}: {detail}")


def load_test_set(name: str, pair: str) -> TestSet:
    """The set's source and reference lines, downloaded into sacrebleu's cache when missing."""
    import logging

    from sacrebleu.dataset import DATASETS
    from sacrebleu.utils import SACREBLEU_DIR, smart_open

    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        detail = f"sacrebleu knows no test set of that name{hint}; `sacrebleu --list` lists them"
        raise TestSetError(name, pair, "name", detail)
    dataset = DATASETS[name]
    if pair not in dataset.langpairs:
        raise TestSetError(name, pair, "pair", f"{name} has {', '.join(sorted(dataset.langpairs))}")
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # one line of ours, not its log
    try:
        source_file = dataset.get_source_file(pair)
        reference_files = dataset.get_reference_files(pair)
    except (OSError, SystemExit) as error:  # URLError is an OSError; sacrebleu exits on SSL errors
        reason = getattr(error, "reason", None) or error
        detail = (
            f"is not in sacrebleu's cache {SACREBLEU_DIR} and could not be downloaded "
            f"({reason}): {fetch_hint(name, pair)}"
        )
        raise TestSetError(name, pair, "cache", detail) from None

    def lines(path: str) -> list[str]:
        with smart_open(path) as handle:
            return [line.rstrip() for line in handle]  # as sacrebleu's command line reads them

    sources = lines(source_file)
    references = [lines(path) for path in reference_files]
    for path, reference in zip(reference_files, references, strict=True):
        if len(reference) != len(sources):
            raise UsageError(
                f"{path} has {len(reference)} lines but {source_file} has {len(sources)}: "
                f"the cached {name} is incomplete; delete {dataset._outdir} and fetch it again "
                f"({fetch_hint(name, pair)})"
            )
    return TestSet(name, pair, sources, references, reference_files)
