"""A checkpoint's Argos package installed with argos-translate-lt (the engine LibreTranslate runs)
in a temporary directory, translating the test split offline, against translate-cli.

    .venv/bin/python tests/argos_check.py --checkpoint runs/default/checkpoints/last.ckpt

Greedy (ARGOS_BEAM_SIZE=1, our output limit set to Argos's 256 tokens): lines equal, and those
that differ because Argos's sentence splitter cut the line or its decoding wrote an underscore as
a space, counted and shown. Beam (the checkpoint's; Argos's own length penalty): BLEU and chrF of
both. With --libretranslate, greedy also through LibreTranslate's own server (libretranslate_env.py,
installed at first use) and HTTP API: its answers against its re-punctuation and re-capitalisation
(`libretranslate_formatting`) of Argos's translations and of ours. tests/test_argos.py runs these
on a small model.
"""

from __future__ import annotations

import argparse
import html
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from libretranslate_env import (
    DEFAULT_VENV,
    call,
    libretranslate,
    libretranslate_venv,
    offline_env,
)

# Argos in a process of its own: its settings are read at import, from the environment
# (offline_env's: any connection but to this machine fails, so the translation is shown to need
# no network).
ARGOS = r"""
import json, socket, sys
assert socket.socket.connect.__name__ == "_offline", "sitecustomize.py was not loaded"
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
    result = subprocess.run(
        [sys.executable, "-c", ARGOS, str(package), str(home / "lines.json"), *codes],
        capture_output=True,
        text=True,
        env=offline_env(home, beam),
        timeout=3600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"Argos failed: {result.stderr[-3000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def left_out(ours: list[str], sentences: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Lines compared; left out: split into sentences by Argos, holding an underscore."""
    split = [i for i, count in enumerate(sentences) if count > 1]
    underscores = [i for i, text in enumerate(ours) if "_" in text and i not in split]
    compared = [i for i in range(len(ours)) if i not in split and i not in underscores]
    return compared, split, underscores


def compare_greedy(sources: list[str], ours: list[str], theirs: dict) -> dict:
    """Lines equal, different, and left out (split by Argos, or holding an underscore)."""
    compared, split, underscores = left_out(ours, theirs["sentences"])
    # Argos's decoding may leave a space at either end (a lone word-start piece).
    different = [i for i in compared if theirs["translations"][i].strip() != ours[i]]
    return {
        "compared": compared,
        "different": different,
        "split": split,
        "underscores": underscores,
    }


PUNCTUATION = "!?.,;。"


def libretranslate_formatting(source: str, translation: str) -> str:
    """LibreTranslate 1.9.6's answer (format "text") to `source` when Argos translated it as
    `translation`: libretranslate/language.py's improve_translation_formatting, then
    html.unescape (app.py), restated. The source stripped; its last character, if one of
    PUNCTUATION, replaces or follows the translation's last (a different PUNCTUATION character
    is replaced, anything else followed); else a PUNCTUATION character ending the translation
    is dropped. A source of one word under 20 characters whose translation repeats a word (a
    word twice as frequent as there are distinct words) keeps the first word only. Then the
    case: an all-lower-case source gives a lower-cased translation, an all-upper-case one an
    upper-cased one, else the first character's case is the source's."""
    source = source.strip()
    if not source:
        return ""
    if not translation:
        return html.unescape(source)
    if source[-1] in PUNCTUATION:
        if translation[-1] != source[-1]:
            if translation[-1] in PUNCTUATION:
                translation = translation[:-1]
            translation += source[-1]
    elif translation[-1] in PUNCTUATION:
        translation = translation[:-1]
    if len(source) < 20 and " " not in source and " " in translation:
        words = translation.split()
        counts = {word: words.count(word) for word in words}
        if any(count / len(counts) >= 2 for count in counts.values()):
            translation = words[0]
    if source.islower():
        translation = translation.lower()
    elif source.isupper():
        translation = translation.upper()
    elif not translation:
        translation = source
    elif source[0].islower():
        translation = translation[0].lower() + translation[1:]
    elif source[0].isupper():
        translation = translation[0].upper() + translation[1:]
    return html.unescape(translation)


def compare_libretranslate(
    sources: list[str], ours: list[str], answers: list[str], theirs: dict
) -> dict:
    """As compare_greedy, LibreTranslate's `answers` against libretranslate_formatting of ours,
    given the spaces Argos's decoding left at either end of its translation (`theirs`,
    argos_translate's), which LibreTranslate's rule sees: "Symbol " after a source ending in "."
    becomes "Symbol ."."""
    compared, split, underscores = left_out(ours, theirs["sentences"])
    different = []
    for i in compared:
        argos = theirs["translations"][i]
        ends = argos[: len(argos) - len(argos.lstrip())], argos[len(argos.rstrip()) :]
        if answers[i] != libretranslate_formatting(sources[i], ends[0] + ours[i] + ends[1]):
            different.append(i)
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
    parser.add_argument(
        "--libretranslate",
        action="store_true",
        help="also greedy through LibreTranslate's own server and API (libretranslate_env.py)",
    )
    parser.add_argument("--libretranslate-venv", type=Path, default=DEFAULT_VENV)
    args = parser.parse_args(argv)

    import torch

    from translate.decode.loaded_model import load_model
    from translate.decode.pipeline import translate_lines
    from translate.decode.settings import SearchSettings
    from translate.export.argos import export_argos
    from translate.score.metrics import corpus_scores
    from translate.text.language_codes import argos_code

    torch.set_num_threads(1)
    loaded = load_model(args.checkpoint)
    (source, target), *_ = loaded.data.directions
    test = loaded.data.read("test", (source, target))
    sources, references = test.sources[: args.limit], test.references[: args.limit]
    described = test.description
    defaults = loaded.search_defaults()
    with tempfile.TemporaryDirectory() as tmp:
        package = export_argos(args.checkpoint, Path(tmp) / "out")[0].path
        codes = (argos_code(source), argos_code(target))
        print(f"{described}: {len(sources)} lines; {package.name}", flush=True)
        greedy = argos_translate(package, sources, Path(tmp) / "greedy", 1, codes)
        limit = SearchSettings(beam=1, length_penalty=0.0, max_len_a=0.0, max_len_b=257)
        ours = translate_lines(loaded, sources, limit)
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
        if args.libretranslate:
            venv = libretranslate_venv(args.libretranslate_venv)
            answers = []
            with libretranslate(venv, [package], Path(tmp) / "libretranslate", 1) as base:
                for start in range(0, len(sources), 64):
                    body = {
                        "q": sources[start : start + 64],
                        "source": codes[0],
                        "target": codes[1],
                    }
                    answers += call(base, "/translate", body)["translatedText"]
            argos = [
                libretranslate_formatting(source, text)
                for source, text in zip(sources, greedy["translations"])
            ]
            exact = sum(answer == mine for answer, mine in zip(answers, argos))
            found = compare_libretranslate(sources, ours, answers, greedy)
            print(
                f"LibreTranslate, greedy: {exact} of {len(sources)} answers are its formatting "
                f"of Argos's translation; {len(found['compared']) - len(found['different'])} of "
                f"{len(found['compared'])} lines compared are its formatting of translate-cli's",
                flush=True,
            )
            for i in found["different"][:5]:
                print(
                    f"  line {i + 1}: {sources[i]!r}\n    ours:  {ours[i]!r}\n    LT: {answers[i]!r}"
                )
        beam = argos_translate(package, sources, Path(tmp) / "beam", defaults.beam, codes)
    ours_beam = translate_lines(
        loaded,
        sources,
        SearchSettings(beam=defaults.beam, length_penalty=defaults.length_penalty),
    )
    for name, hypotheses in (("translate-cli", ours_beam), ("Argos", beam["translations"])):
        scores = corpus_scores(hypotheses, references)
        print(f"beam {defaults.beam}, {name}: BLEU {scores.bleu:.2f}, chrF {scores.chrf:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
