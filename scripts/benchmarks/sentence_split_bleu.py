"""A test split translated line by line (translate-cli) and sentence by sentence (what
translate-serve's LibreTranslate API does: `translate/text/sentences.py`, the text between the
sentences kept as written), both with the checkpoint's search settings, then compared with
translate-eval's paired tests.

    .venv/bin/python scripts/benchmarks/sentence_split_bleu.py --checkpoint runs/default/checkpoints/last.ckpt

Writes OUT/lines.hyp and OUT/sentences.hyp and prints translate-eval --compare's table.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from itertools import islice
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402
from translate.text.sentences import split_text  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument(
        "--corpus",
        default=str(BUNDLED_CORPUS),
        help="a corpus directory (default: the bundled one)",
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", default="runs/sentence-split", help="where the hypotheses go")
    args = parser.parse_args(argv)
    loaded = load_model(args.checkpoint)
    defaults = loaded.search_defaults()
    settings = SearchSettings(beam=defaults["beam"], length_penalty=defaults["length_penalty"])
    source_path, reference_path = split_paths(Path(args.corpus), args.split, *loaded.data.languages)
    sources = read_lines(source_path)
    splits = [split_text(line) for line in sources]
    pieces = [piece for split in splits for piece in split.pieces]
    print(
        f"{len(sources)} lines, {sum(len(s.pieces) > 1 for s in splits)} of several sentences, "
        f"{len(pieces)} sentences",
        flush=True,
    )
    translated = iter(translate_lines(loaded, pieces, settings))
    joined = [split.join(list(islice(translated, len(split.pieces)))) for split in splits]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    whole = translate_lines(loaded, sources, settings)
    for name, lines in (("lines", whole), ("sentences", joined)):
        (out / f"{name}.hyp").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.evaluate",
            "--compare",
            str(out / "lines.hyp"),
            str(out / "sentences.hyp"),
            "--reference",
            str(reference_path),
        ]  # fmt: skip
    ).returncode


if __name__ == "__main__":
    sys.exit(main())
