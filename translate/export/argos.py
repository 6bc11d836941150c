"""`export_argos` writes Argos Translate packages (`.argosmodel`), which argostranslate,
argos-translate-lt and LibreTranslate install: one a direction the model was trained on.

A package is a zip with one top directory: `metadata.json`, `sentencepiece.model` (Argos encodes
and decodes with one model, so the vocabulary must be joint), `model/` (the CTranslate2 export,
its vocabulary the SentencePiece pieces), a README, and `spacy/`, a blank spaCy pipeline: with
ARGOS_CHUNK_TYPE=SPACY, Argos splits sentences with it offline (its default splitter, MiniSBD,
downloads a model at first use). A many-to-many model's package starts the decoder with the
direction's tag (CTranslate2's `decoder_start_token`), as the model was trained: Argos's
`target_prefix` would put the tag after BOS and leave it in every sentence's output but the first.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from translate.decode.ctranslate2_model import write_ctranslate2
from translate.decode.loaded_model import LoadedModel, load_model
from translate.export.output import ExportError, prepare_output, staged
from translate.text.corpus import BUNDLED_CORPUS
from translate.text.language_codes import argos_code, language_name
from translate.text.vocab import language_tag

PACKAGE_VERSION = "1.0"
ARGOS_VERSION = "1.9"  # the package format of argostranslate 1.9 and later
ARGOS_MAX_OUTPUT = 256  # CTranslate2's max_decoding_length, which Argos leaves at its default


@dataclass(frozen=True)
class ArgosPackage:
    """One written package: its direction (the model's codes) and its file."""

    source: str
    target: str
    path: Path


def package_name(source: str, target: str) -> str:
    """`translate-en_de-1_0`, as the Argos index names its packages."""
    return (
        f"translate-{argos_code(source)}_{argos_code(target)}-{PACKAGE_VERSION.replace('.', '_')}"
    )


def metadata(source: str, target: str) -> dict:
    return {
        "package_version": PACKAGE_VERSION,
        "argos_version": ARGOS_VERSION,
        "from_code": argos_code(source),
        "from_name": language_name(source),
        "to_code": argos_code(target),
        "to_name": language_name(target),
        "type": "translate",
        "code": package_name(source, target).rsplit("-", 1)[0],
    }


def check_packable(loaded: LoadedModel) -> list[tuple[str, str]]:
    """The directions to package; ExportError where Argos cannot run the model as trained."""
    if not loaded.vocab.joint:
        raise ExportError(
            "an Argos package holds one SentencePiece model for both sides, and this model has "
            "separate source and target vocabularies; train with data.joint_vocab: true"
        )
    directions = list(loaded.data.directions)
    if not directions:
        raise ExportError(
            f"{loaded.path} does not record its languages (data.src_lang and data.tgt_lang), "
            "which an Argos package must name"
        )
    if loaded.multilingual() and loaded.data.lang_tag == "source":
        raise ExportError(
            "this many-to-many model reads its language tag before the source (lang_tag: "
            "source), and Argos adds nothing to the source; train with lang_tag: decoder"
        )
    if loaded.model.cfg.max_positions <= ARGOS_MAX_OUTPUT:
        raise ExportError(
            f"Argos lets CTranslate2 write up to {ARGOS_MAX_OUTPUT} tokens, and this model has "
            f"positions for {loaded.model.cfg.max_positions} (model.max_positions): a long "
            "output would fail; train with max_positions above that"
        )
    names = [package_name(*direction) for direction in directions]
    if len(set(names)) < len(names):
        raise ExportError(
            f"two of the model's directions get one Argos name ({', '.join(names)}): "
            "Argos tells languages apart by ISO 639-1 code only (zh, zt and pb aside)"
        )
    return directions


def readme(loaded: LoadedModel, source: str, target: str) -> str:
    """What a package's README says: the model, how to use the package, its scores, its license."""
    cfg = loaded.model.cfg
    tuned = loaded.search or {}
    lines = [
        f"# {language_name(source)} → {language_name(target)}",
        "",
        f"A Transformer ({cfg.encoder_layers}+{cfg.decoder_layers} layers, d_model {cfg.d_model}, "
        f"tie_embeddings {cfg.tie_embeddings}) exported from {Path(loaded.path or '').name} "
        f"by translate-export --format argos.",
        "",
        "Sentences are split by the blank spaCy pipeline in spacy/: set ARGOS_CHUNK_TYPE=SPACY "
        "(argos-translate-lt's default splitter downloads a model at first use).",
        "",
        "## Scores",
        "",
    ]
    if tuned.get("candidates"):
        best = next(
            (
                row
                for row in tuned["candidates"]
                if row["length_penalty"] == tuned["length_penalty"]
            ),
            None,
        )
        if best:
            lines.append(
                f"- dev, beam {tuned['beam']}, length penalty {tuned['length_penalty']}: "
                f"BLEU {best['bleu']:.2f}, chrF {best['chrf']:.2f} "
                f"({tuned.get('sentences', '?')} sentences)"
            )
        if isinstance(tuned.get("greedy"), dict):
            lines.append(
                f"- dev, greedy: BLEU {tuned['greedy']['bleu']:.2f}, chrF {tuned['greedy']['chrf']:.2f}"
            )
    else:
        lines.append("- not recorded in the checkpoint (translate-tune records dev scores)")
    lines += [
        "- the test split's: translate-eval --checkpoint CKPT",
        "",
        "## License",
        "",
        "The weights are derived from the training data"
        + (
            f" ({loaded.data.corpus})"
            if loaded.data.corpus != BUNDLED_CORPUS
            else " (the bundled corpus)"
        )
        + "; they are distributed under that data's license. "
        "The bundled corpus is LibreOffice's help (The Document Foundation and contributors), "
        "under the Mozilla Public License 2.0.",
        "",
    ]
    return "\n".join(lines)


def spacy_pipeline(directory: Path) -> None:
    try:
        import spacy
    except ImportError:
        raise ExportError(
            "an Argos package carries a blank spaCy pipeline for offline sentence splitting: "
            "pip install spacy"
        ) from None
    spacy.blank("xx").to_disk(directory)  # no sentencizer: Argos adds its own when it loads


def export_argos(
    checkpoint_path: str | Path, out_dir: str | Path, overwrite: bool = False
) -> list[ArgosPackage]:
    """Write one `.argosmodel` a direction into `out_dir` (absent or empty, or `overwrite`)."""
    out_dir = Path(out_dir)
    prepare_output(out_dir, overwrite)
    loaded = load_model(checkpoint_path, pack=False)
    directions = check_packable(loaded)
    packages = []
    with staged(out_dir, overwrite) as tmp:
        build = tmp / "build"
        write_ctranslate2(loaded, build / "model", tokenizers=False)
        spacy_pipeline(build / "spacy")
        for source, target in directions:
            root = build / package_name(source, target)
            shutil.copytree(build / "model", root / "model")
            if loaded.multilingual():
                config = json.loads((root / "model" / "config.json").read_text())
                config["decoder_start_token"] = language_tag(target)
                (root / "model" / "config.json").write_text(json.dumps(config, indent=2))
            shutil.copytree(build / "spacy", root / "spacy")
            (root / "sentencepiece.model").write_bytes(loaded.vocab.source.model_bytes)
            (root / "metadata.json").write_text(json.dumps(metadata(source, target), indent=2))
            (root / "README.md").write_text(readme(loaded, source, target))
            path = tmp / f"{root.name}.argosmodel"
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
                for file in sorted(root.rglob("*")):
                    archive.write(file, file.relative_to(build))
            packages.append(ArgosPackage(source, target, out_dir / path.name))
        shutil.rmtree(build)
    return packages
