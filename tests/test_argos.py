"""translate-export --format argos: the package's layout, and the package installed with the Argos
engine LibreTranslate uses (argos-translate-lt) in a temporary directory, translating offline
what translate-cli translates; and (slow) LibreTranslate itself serving it over its HTTP API."""

import dataclasses
import html
import json
import shlex
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")
pytest.importorskip("spacy")
from argos_check import (  # noqa: E402
    argos_translate,
    compare_greedy,
    compare_libretranslate,
    left_out,
    libretranslate_formatting,
)
from helpers import FIXTURE, fixture_lines, joint_vocab, small_config, trained_copy_checkpoint  # noqa: E402
from libretranslate_env import (  # noqa: E402
    DEFAULT_VENV,
    LIBRETRANSLATE,
    LibreTranslateUnavailable,
    call,
    install_packages,
    installed,
    libretranslate_venv,
    start_libretranslate,
)

from translate.cli.export import main as export_main  # noqa: E402
from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.export.argos import export_argos  # noqa: E402
from translate.export.output import ExportError  # noqa: E402
from translate.model.checkpoint import write_checkpoint  # noqa: E402
from translate.model.transformer import Transformer  # noqa: E402
from translate.process_group import end_group  # noqa: E402
from translate.score.metrics import corpus_scores  # noqa: E402
from translate.text.markup import HtmlFragment  # noqa: E402
from translate.text.vocab import Vocabularies, train_sentencepiece  # noqa: E402

RUN_CONFIG = "data:\n  src_lang: en\n  tgt_lang: de\n"
LIBRETRANSLATE_VENV = DEFAULT_VENV
LIBRETRANSLATE_INSTALL_S = 900


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    pytest.importorskip("argostranslate")
    root = tmp_path_factory.mktemp("argos")
    vocab = joint_vocab()
    config = dataclasses.replace(small_config(True, "all"), max_positions=300)
    model = trained_copy_checkpoint(root / "trained.ckpt", config, vocab, train_steps=150)
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
    loaded = load_model(exported / "model.ckpt")
    assert spm == loaded.vocab.source.model_bytes
    processor = loaded.vocab.source.processor
    assert vocabulary == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def test_the_installed_package_translates_offline_as_translate_cli_does(exported, tmp_path):
    """Greedy: equal line for line, but where Argos's sentence splitting cut the line, or its
    decoding writes an underscore as a space. Beam 5 (Argos's length penalty is not ours):
    BLEU within 0.3."""
    loaded = load_model(exported / "model.ckpt")
    sources = FIXTURE.joinpath("test.en").read_text(encoding="utf-8").splitlines()[:60]
    references = FIXTURE.joinpath("test.de").read_text(encoding="utf-8").splitlines()[:60]
    package = exported / "out" / "translate-en_de-1_0.argosmodel"
    greedy = argos_translate(package, sources, tmp_path / "greedy", beam=1)
    # Argos leaves CTranslate2's output limit at 256 tokens: ours at the same (EOS counted).
    limit = SearchSettings(beam=1, length_penalty=0.0, max_len_a=0.0, max_len_b=257)
    ours = translate_lines(loaded, sources, limit)
    found = compare_greedy(sources, ours, greedy)
    print(
        f"greedy: {len(found['compared'])} lines compared, {len(found['split'])} split into "
        f"sentences by Argos, {len(found['underscores'])} with _"
    )
    compared, different = found["compared"], found["different"]
    assert len(compared) >= len(sources) // 2 and len({ours[i] for i in compared}) > 5
    assert not different, [(sources[i], ours[i], greedy["translations"][i]) for i in different[:3]]

    beam = argos_translate(package, sources, tmp_path / "beam", beam=5)
    ours_beam = translate_lines(loaded, sources, SearchSettings(beam=5, length_penalty=1.0))
    theirs = corpus_scores(beam["translations"], references).bleu
    mine = corpus_scores(ours_beam, references).bleu
    assert abs(theirs - mine) <= 0.3, (theirs, mine)


def model_for(vocab: Vocabularies, positions: int) -> Transformer:
    config = dataclasses.replace(small_config(False, "none"), max_positions=positions)
    return Transformer(config, len(vocab.source), len(vocab.target), shared_vocab=vocab.joint)


def test_what_argos_cannot_run_as_trained_is_refused(tmp_path):
    english = fixture_lines("train.en")
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


def test_libretranslate_formatting_restates_its_rule():
    """LibreTranslate's own code, libretranslate/language.py improve_translation_formatting:
    the slow test below checks the restatement against the server."""
    assert libretranslate_formatting("Click OK.", "Klicken Sie auf OK") == "Klicken Sie auf OK."
    assert libretranslate_formatting("Save?", "Speichern.") == "Speichern?"
    assert libretranslate_formatting("Open the file", "Öffnen Sie die Datei.") == (
        "Öffnen Sie die Datei"
    )
    assert libretranslate_formatting("Open the file", "Öffnen Sie die Datei:") == (
        "Öffnen Sie die Datei:"
    )
    assert libretranslate_formatting("click here", "Klicken Sie hier") == "klicken sie hier"
    assert libretranslate_formatting("CANCEL", "Abbrechen") == "ABBRECHEN"
    assert libretranslate_formatting("File", "datei") == "Datei"
    assert libretranslate_formatting("Hello", "hallo hallo hallo") == "Hallo"
    assert libretranslate_formatting("Tom & Jerry", "Tom &amp; Jerry") == "Tom & Jerry"
    assert libretranslate_formatting(" Done. ", "") == "Done."
    assert libretranslate_formatting("Done", ".") == "Done"


def test_the_docs_install_libretranslate_as_the_tests_do():
    docs = Path(__file__).resolve().parent.parent.joinpath("docs", "export.md").read_text()
    assert f"lt/bin/pip install {shlex.join(LIBRETRANSLATE)}\n" in docs
    block = docs[docs.index(f"lt/bin/pip install {shlex.join(LIBRETRANSLATE)}\n") :]
    block = block[: block.index("```")]
    for line in (
        'mkdir -p "${XDG_CACHE_HOME:-$HOME/.local/cache}/argos-translate/spacy/senter/model"',
        "export ARGOS_CHUNK_TYPE=SPACY ARGOS_PACKAGE_INDEX=http://127.0.0.1:9/",
        'lt/bin/python -c "import argostranslate.package as p; p.install_from_path(',
        "lt/bin/libretranslate --host 127.0.0.1 --port 5000 --disable-web-ui\n",
    ):
        assert line in block, line


@pytest.fixture(scope="module")
def libretranslate(tmp_path_factory):
    """LibreTranslate's virtual environment: .cache/libretranslate-venv if installed
    (`.venv/bin/python tests/libretranslate_env.py`; tests write nothing into
    .cache/), else installed from PyPI into a temporary directory, removed afterwards."""
    if installed(LIBRETRANSLATE_VENV):
        yield LIBRETRANSLATE_VENV
        return
    path = tmp_path_factory.mktemp("libretranslate") / "venv"
    try:
        yield libretranslate_venv(path, LIBRETRANSLATE_INSTALL_S)
    except LibreTranslateUnavailable as error:
        pytest.skip(f"LibreTranslate could not be installed: {error}")
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_libretranslate_serves_the_package_offline_as_translate_cli_translates(
    libretranslate, exported, tmp_path
):
    """LibreTranslate's own `libretranslate` on the package, greedy, offline, through its HTTP
    API on 127.0.0.1: each answer is its re-punctuation and re-capitalisation
    (libretranslate_formatting) of Argos's translation, and so of translate-cli's, but where
    Argos's sentence splitting cut the line or an output holds an underscore; format=html answers
    keep Argos's translation of each text node as it is."""
    venv = libretranslate
    loaded = load_model(exported / "model.ckpt")
    sources = FIXTURE.joinpath("test.en").read_text(encoding="utf-8").splitlines()[:60]
    package = exported / "out" / "translate-en_de-1_0.argosmodel"
    greedy = argos_translate(package, sources, tmp_path / "argos", beam=1)
    limit = SearchSettings(beam=1, length_penalty=0.0, max_len_a=0.0, max_len_b=257)
    ours = translate_lines(loaded, sources, limit)

    env = install_packages(venv, [package], tmp_path / "libretranslate", beam=1)
    probe = subprocess.run(
        [
            venv / "bin" / "python",
            "-c",
            "import socket; socket.create_connection(('192.0.2.1', 80), timeout=5)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "offline: a connection to ('192.0.2.1', 80) was attempted" in probe.stderr, probe.stderr
    compared = left_out(ours, greedy["sentences"])[0]
    first, second = [i for i in compared if greedy["translations"][i] == ours[i]][:2]
    page = f"<p>{html.escape(sources[first])}</p><p><b>{html.escape(sources[second])}</b></p>"
    started = time.monotonic()
    server, base = start_libretranslate(venv, env, tmp_path / "libretranslate")
    ready_s = time.monotonic() - started
    try:
        languages = call(base, "/languages")
        answers = call(base, "/translate", {"q": sources, "source": "en", "target": "de"})
        html_answer = call(
            base, "/translate", {"q": page, "source": "en", "target": "de", "format": "html"}
        )
    finally:
        end_group(server)

    # Argos gives every installed language an identity translation: a target of its own.
    assert languages == [
        {"code": "en", "name": "English", "targets": ["de", "en"]},
        {"code": "de", "name": "German", "targets": ["de"]},
    ]
    answers = answers["translatedText"]
    assert len(answers) == len(sources)
    argos = [libretranslate_formatting(s, t) for s, t in zip(sources, greedy["translations"])]
    wrong = [i for i in range(len(sources)) if answers[i] != argos[i]]
    assert not wrong, [(sources[i], greedy["translations"][i], answers[i]) for i in wrong[:3]]
    found = compare_libretranslate(sources, ours, answers, greedy)
    compared, different = found["compared"], found["different"]
    changed = [i for i in compared if answers[i] != ours[i]]
    spaced = [i for i in compared if greedy["translations"][i] != ours[i]]
    print(
        f"LibreTranslate, ready after {ready_s:.1f} s: {len(compared)} lines compared, "
        f"{len(changed)} of them re-punctuated or re-capitalised, {len(spaced)} with a space "
        f"Argos left at an end; "
        f"{len(found['split'])} split by Argos, {len(found['underscores'])} with _"
    )
    assert len(compared) >= len(sources) // 2 and changed
    assert not different, [(sources[i], ours[i], answers[i]) for i in different[:3]]
    assert html_answer["translatedText"] == f"<p>{ours[first]}</p><p><b>{ours[second]}</b></p>"


# The statuses of the apps' exchanges (app_requests.app_exchanges): Nextcloud's (its connection
# test, a POST of /, is refused as LibreTranslate refuses it), Discourse's, Mastodon's, Weblate's.
APP_STATUSES = [405, 200, 200, 200, 200, 200] + [200, 200, 200] + [200, 200] + [200, 200]


def untranslated_blocks(fields: dict, answer: object) -> list[str]:
    """The blocks of a /translate request left in the answer as they came: each line of several
    words of its texts (with format html, of their text nodes), found in the answer's text
    (references decoded, as LibreTranslate writes it)."""
    texts = fields["q"] if isinstance(fields["q"], list) else [fields["q"]]
    nodes = [
        node
        for text in texts
        for node in (HtmlFragment.parse(text).texts() if fields.get("format") == "html" else [text])
    ]
    blocks = [line.strip() for node in nodes for line in node.splitlines() if " " in line.strip()]
    written = html.unescape(json.dumps(answer, ensure_ascii=False))
    return [block for block in blocks if block in written]


def sent_fields(exchange) -> dict:
    """A /translate exchange's fields, as its app sends them (multipart, a form or JSON)."""
    send = exchange.send
    if "files" in send:
        return {name: value for name, (_, value) in send["files"].items()}
    return send["data"] if "data" in send else json.loads(send["content"])


@pytest.mark.slow
def test_libretranslate_and_translate_serve_answer_the_apps_requests_alike(
    libretranslate, exported, tmp_path
):
    """The apps' requests as each sends them (tests/app_requests.py, whose answers
    from translate-serve tests/test_libretranslate_apps.py checks word for word), replayed at
    LibreTranslate serving the package and at translate-serve serving its checkpoint: the same
    statuses from both, and in every /translate answer of both, every block translated (the
    Discourse post's after its svg icons too): none left as it came. Their texts differ:
    LibreTranslate re-punctuates and reads HTML with its own parser."""
    pytest.importorskip("httpx")
    from app_requests import app_exchanges, replay
    from processes import start_server, stop

    exchanges = app_exchanges()
    package = exported / "out" / "translate-en_de-1_0.argosmodel"
    env = install_packages(libretranslate, [package], tmp_path / "libretranslate", beam=1)
    server, base = start_libretranslate(libretranslate, env, tmp_path / "libretranslate")
    try:
        theirs = replay(base, exchanges)
    finally:
        end_group(server)
    process, url = start_server(exported / "model.ckpt")
    try:
        ours = replay(url, exchanges)
    finally:
        stop(process)

    for name, answers in (("LibreTranslate", theirs), ("translate-serve", ours)):
        assert [answer.status_code for answer in answers] == APP_STATUSES, name
        left = {
            exchange.app: untranslated_blocks(
                sent_fields(exchange), answer.json()["translatedText"]
            )
            for exchange, answer in zip(exchanges, answers)
            if exchange.path == "/translate"
        }
        assert left == dict.fromkeys(left, []), (name, left)
    icons = [sent_fields(exchanges[8])["q"].count("<svg")]
    icons += [answers[8].json()["translatedText"].count("<svg") for answers in (theirs, ours)]
    assert icons[0] > 0 and icons == icons[:1] * 3
