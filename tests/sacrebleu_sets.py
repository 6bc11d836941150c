"""Named test sets without the network: a test set laid out as sacrebleu caches a processed one,
and translate-eval run on it in a process that can download nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from helpers import FIXTURE

from translate.text.corpus import read_lines


def sacrebleu_cache(
    root: Path, name: str = "wmt14", pair: str = "en-de", corpus: Path = FIXTURE
) -> Path:
    """A test set as sacrebleu lays out a processed one, $SACREBLEU/NAME/NAME.PAIR.FIELD, here
    with the lines of `corpus`'s test split."""
    source_lang, target_lang = pair.split("-")
    sources = read_lines(corpus / f"test.{source_lang}")
    fields = {
        "src": sources,
        "ref": read_lines(corpus / f"test.{target_lang}"),
        "docid": ["doc1"] * len(sources),
        "genre": ["news"] * len(sources),
        "origlang": [source_lang] * len(sources),
    }
    (root / name).mkdir(parents=True)
    for field, lines in fields.items():
        path = root / name / f"{name}.{pair}.{field}"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return root


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def eval_process(root: Path, *args: str) -> subprocess.CompletedProcess:
    """translate-eval ARGS in its own process, with $SACREBLEU at `root` and its proxies at a
    closed port."""
    proxy = f"http://127.0.0.1:{closed_port()}"  # nothing listens: no download leaves the machine
    env = {**os.environ, "SACREBLEU": str(root), "https_proxy": proxy, "http_proxy": proxy}
    env.pop("no_proxy", None)
    env.pop("NO_PROXY", None)
    return subprocess.run(
        [sys.executable, "-m", "translate.cli.evaluate", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
