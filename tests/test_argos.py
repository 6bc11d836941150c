"""translate-export --format argos: the package's layout, and the package installed with the Argos
engine LibreTranslate uses (argos-translate-lt) in a temporary directory, translating offline
what translate-cli translates."""

import dataclasses
import json
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")
pytest.importorskip("spacy")
from test_export import FIXTURE, save_checkpoint, small_config  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "benchmarks"))
from argos_check import argos_translate, compare_greedy  # noqa: E402
from test_translate_cli import write_checkpoint  # noqa: E402

from translate.cli.export import main as export_main  # noqa: E402
from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.decode.translator import load_translator  # noqa: E402
from translate.export.argos import export_argos  # noqa: E402
from translate.export.output import ExportError  # noqa: E402
from translate.model.transformer import Transformer  # noqa: E402
from translate.score.metrics import corpus_scores  # noqa: E402
from translate.text.vocab import Vocabularies, train_sentencepiece  # noqa: E402

RUN_CONFIG = "data:\n  src_lang: en\n  tgt_lang: de\n"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    pytest.importorskip("argostranslate")
    root = tmp_path_factory.mktemp("argos")
    english = FIXTURE.joinpath("train.en").read_text(encoding="utf-8").splitlines()
    german = FIXTURE.joinpath("train.de").read_text(encoding="utf-8").splitlines()
    joint = train_sentencepiece(english + german, 200)
    vocab = Vocabularies(joint, joint)
    config = dataclasses.replace(small_config(True, "all"), max_positions=300)
    model = save_checkpoint(root / "trained.ckpt", config, vocab, train_steps=150)
    write_checkpoint(root / "model.ckpt", model, vocab, run_config=RUN_CONFIG)
    assert (
        export_main(
            [
                "--checkpoint",
                str(root / "model.ckpt"),
                "--output",
                str(root / "out"),
                "--format",
                "argos",
            ]
        )
        == 0
    )
    return root


def test_one_package_a_direction_laid_out_as_argos_reads_it(exported):
    packages = sorted((exported / "out").iterdir())
    assert [path.name for path in packages] == ["translate-en_de-1_0.argosmodel"]
    with zipfile.ZipFile(packages[0]) as archive:
        names = archive.namelist()
        assert {name.split("/")[0] for name in names} == {"translate-en_de-1_0"}
        top = "translate-en_de-1_0/"
        for required in (
            "metadata.json",
            "sentencepiece.model",
            "README.md",
            "model/model.bin",
            "model/config.json",
            "spacy/config.cfg",
        ):
            assert top + required in names, required
        metadata = json.loads(archive.read(top + "metadata.json"))
        readme = archive.read(top + "README.md").decode()
        spm = archive.read(top + "sentencepiece.model")
        vocabulary = json.loads(archive.read(top + "model/shared_vocabulary.json"))
    assert metadata == {
        "package_version": "1.0",
        "argos_version": "1.9",
        "from_code": "en",
        "from_name": "English",
        "to_code": "de",
        "to_name": "German",
        "type": "translate",
        "code": "translate-en_de",
    }
    assert "License" in readme and "ARGOS_CHUNK_TYPE=SPACY" in readme
    translator = load_translator(exported / "model.ckpt")
    assert spm == translator.vocab.source.model_bytes
    processor = translator.vocab.source.processor
    assert vocabulary == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def test_the_installed_package_translates_offline_as_translate_cli_does(exported, tmp_path):
    """Greedy: equal line for line, but where Argos's sentence splitting cut the line, or its
    decoding writes an underscore as a space. Beam 5 (Argos's length penalty is not ours):
    BLEU within 0.3."""
    translator = load_translator(exported / "model.ckpt")
    sources = FIXTURE.joinpath("test.en").read_text(encoding="utf-8").splitlines()[:60]
    references = FIXTURE.joinpath("test.de").read_text(encoding="utf-8").splitlines()[:60]
    package = exported / "out" / "translate-en_de-1_0.argosmodel"
    greedy = argos_translate(package, sources, tmp_path / "greedy", beam=1)
    # Argos leaves CTranslate2's output limit at 256 tokens: ours at the same (EOS counted).
    limit = SearchSettings(beam=1, length_penalty=0.0, max_len_a=0.0, max_len_b=257)
    ours = translate_lines(translator, sources, limit)
    found = compare_greedy(sources, ours, greedy)
    print(
        f"greedy: {len(found['compared'])} lines compared, {len(found['split'])} split into "
        f"sentences by Argos, {len(found['underscores'])} with _"
    )
    compared, different = found["compared"], found["different"]
    assert len(compared) >= len(sources) // 2 and len({ours[i] for i in compared}) > 5
    assert not different, [(sources[i], ours[i], greedy["translations"][i]) for i in different[:3]]

    beam = argos_translate(package, sources, tmp_path / "beam", beam=5)
    ours_beam = translate_lines(translator, sources, SearchSettings(beam=5, length_penalty=1.0))
    theirs = corpus_scores(beam["translations"], references).bleu
    mine = corpus_scores(ours_beam, references).bleu
    assert abs(theirs - mine) <= 0.3, (theirs, mine)


def model_for(vocab: Vocabularies, positions: int) -> Transformer:
    config = dataclasses.replace(small_config(False, "none"), max_positions=positions)
    return Transformer(config, len(vocab.source), len(vocab.target), shared_vocab=vocab.joint)


def test_what_argos_cannot_run_as_trained_is_refused(tmp_path):
    english = FIXTURE.joinpath("train.en").read_text(encoding="utf-8").splitlines()
    vocab = Vocabularies(train_sentencepiece(english, 150), train_sentencepiece(english, 160))
    write_checkpoint(
        tmp_path / "separate.ckpt", model_for(vocab, 300), vocab, run_config=RUN_CONFIG
    )
    with pytest.raises(ExportError, match="one SentencePiece model for both sides"):
        export_argos(tmp_path / "separate.ckpt", tmp_path / "out")
    joint = Vocabularies(vocab.source, vocab.source)
    write_checkpoint(tmp_path / "short.ckpt", model_for(joint, 128), joint, run_config=RUN_CONFIG)
    with pytest.raises(ExportError, match="up to 256 tokens.*positions for 128"):
        export_argos(tmp_path / "short.ckpt", tmp_path / "out")
    assert not (tmp_path / "out").exists()
