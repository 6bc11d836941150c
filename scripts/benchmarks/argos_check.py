"""A checkpoint's Argos package installed with argos-translate-lt (the engine LibreTranslate runs)
in a temporary directory, translating the test split offline, against translate-cli.

    .venv/bin/python scripts/benchmarks/argos_check.py --checkpoint runs/default/checkpoints/last.ckpt

Greedy (ARGOS_BEAM_SIZE=1, our output limit set to Argos's 256 tokens): lines equal, and those
that differ because Argos's sentence splitter cut the line or its decoding wrote an underscore as
a space, counted and shown. Beam (the checkpoint's; Argos's own length penalty): BLEU and chrF of
both. tests/test_argos.py runs `argos_translate` on a small model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# Argos in a process of its own: its settings are read at import, from the environment. Any
# connection but to this machine fails, so the translation is shown to need no network.
ARGOS = r"""
import json, socket, sys
connect = socket.socket.connect
def offline(self, address):
    if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
        raise OSError(f"offline: a connection to {address} was attempted")
    return connect(self, address)
socket.socket.connect = offline
from argostranslate import package, translate
package.install_from_path(sys.argv[1])
source, target = sys.argv[3], sys.argv[4]
translation = translate.get_translation_from_codes(source, target)
lines = json.load(open(sys.argv[2], encoding="utf-8"))
splitter = translation.underlying.sentencizer
print(json.dumps({
    "translations": [translation.translate(line) for line in lines],
    "sentences": [len(splitter.split_sentences(line)) for line in lines],
}))
"""


def argos_translate(
    package: Path, lines: list[str], home: Path, beam: int, codes: tuple[str, str] = ("en", "de")
) -> dict:
    """{"translations", "sentences" (how many Argos split each line into)} from `package`
    installed under `home` (a fresh directory), offline, with beam `beam`."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "lines.json").write_text(json.dumps(lines), encoding="utf-8")
    cache = home / "cache"
    (cache / "argos-translate" / "spacy" / "senter" / "model").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(cache),
        "XDG_CONFIG_HOME": str(home / "config"),
        "ARGOS_PACKAGES_DIR": str(home / "packages"),
        "ARGOS_CHUNK_TYPE": "SPACY",
        "ARGOS_BEAM_SIZE": str(beam),
        "ARGOS_DEVICE_TYPE": "cpu",
        "ARGOS_INTRA_THREADS": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", ARGOS, str(package), str(home / "lines.json"), *codes],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"Argos failed: {result.stderr[-3000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def compare_greedy(sources: list[str], ours: list[str], theirs: dict) -> dict:
    """Lines equal, different, and left out (split by Argos, or holding an underscore)."""
    split = [i for i, count in enumerate(theirs["sentences"]) if count > 1]
    underscores = [i for i, text in enumerate(ours) if "_" in text and i not in split]
    compared = [i for i in range(len(sources)) if i not in split and i not in underscores]
    # Argos's decoding may leave a space at either end (a lone word-start piece).
    different = [i for i in compared if theirs["translations"][i].strip() != ours[i]]
    return {
        "compared": compared,
        "different": different,
        "split": split,
        "underscores": underscores,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument("--limit", type=int, default=None, help="only the first N test lines")
    args = parser.parse_args(argv)

    import torch

    from translate.decode.pipeline import translate_lines
    from translate.decode.settings import SearchSettings
    from translate.decode.translator import load_translator
    from translate.export.argos import export_argos
    from translate.score.metrics import corpus_scores
    from translate.text.language_codes import argos_code

    torch.set_num_threads(1)
    translator = load_translator(args.checkpoint)
    (source, target), *_ = translator.directions()
    sources, references, described = translator.corpus_split("test", (source, target))
    sources, references = sources[: args.limit], references[: args.limit]
    defaults = translator.search_defaults()
    with tempfile.TemporaryDirectory() as tmp:
        package = export_argos(args.checkpoint, Path(tmp) / "out")[0].path
        codes = (argos_code(source), argos_code(target))
        print(f"{described}: {len(sources)} lines; {package.name}", flush=True)
        greedy = argos_translate(package, sources, Path(tmp) / "greedy", 1, codes)
        limit = SearchSettings(beam=1, length_penalty=0.0, max_len_a=0.0, max_len_b=257)
        ours = translate_lines(translator, sources, limit)
        found = compare_greedy(sources, ours, greedy)
        print(
            f"greedy: {len(found['compared']) - len(found['different'])} of {len(found['compared'])} "
            f"lines compared are equal; left out: {len(found['split'])} split into sentences by "
            f"Argos, {len(found['underscores'])} with an underscore",
            flush=True,
        )
        for i in found["different"][:5] + found["split"][:3]:
            print(
                f"  line {i + 1}: {sources[i]!r}\n    ours:  {ours[i]!r}\n    Argos: {greedy['translations'][i]!r}"
            )
        beam = argos_translate(package, sources, Path(tmp) / "beam", defaults["beam"], codes)
    ours_beam = translate_lines(
        translator,
        sources,
        SearchSettings(beam=defaults["beam"], length_penalty=defaults["length_penalty"]),
    )
    for name, hypotheses in (("translate-cli", ours_beam), ("Argos", beam["translations"])):
        scores = corpus_scores(hypotheses, references)
        print(f"beam {defaults['beam']}, {name}: BLEU {scores.bleu:.2f}, chrF {scores.chrf:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
