"""What a user types comes back as typed, in every front end (translate-cli, the native API,
LibreTranslate's API in text and in html): the sentinels' own brackets, a line of more spans than
sentinels, dates, times, prices, hex and phone numbers, URLs with brackets, Weblate's masks. A
random model trained with nothing can still lose nothing: what it must keep is masked, and its
search writes each sentinel once and no digit of its own."""

from collections import Counter

import pytest
from helpers import fixture_lines, seeded_checkpoint

from translate.cli.translate import main as cli_main
from translate.decode.loaded_model import load_model
from translate.text.protected import SENTINEL_PIECES, digit_runs, find_spans, lost_spans
from translate.text.vocab import Vocabularies

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from translate.serve.app import ServeSettings, create_app  # noqa: E402

PROBES = [
    "Press ⦅1⦆ to continue.",
    "Use ⦅21⦆ and ⦅999⦆ here, then press 7.",
    "A lone ⦅ and a ⦆, and ⦅1,⦆ too.",
    "The date 2026-11-28 at 10:30",
    "Call +1 (555) 123-4567, pay $5.99, write 0x1F, connect to 192.168.0.1:8080.",
    "X.509 uses 16x16 icons at 1920×1080, days (1-31), the 4th and 21st time, 12pt and v2.",
    "See https://en.wikipedia.org/wiki/Foo_(bar) now.",
    "Hello, [X7X]! You have [X12X] messages.",
    *(
        "Columns: " + ", ".join(f"%{n}" for n in range(1, count + 1)) + "."
        for count in (21, 75, 200)
    ),
]


def kept_as_typed(source: str, translation: str) -> None:
    """Every digit run of `source` in `translation` as often and none of its own; every
    protected span kept; the sentinels' brackets exactly as typed."""
    assert Counter(digit_runs(translation)) == Counter(digit_runs(source)), translation
    assert lost_spans(source, translation) == [], translation
    assert [translation.count(c) for c in "⦅⦆"] == [source.count(c) for c in "⦅⦆"], translation


@pytest.fixture(scope="module")
def protected_checkpoint(tmp_path_factory):
    """A random model trained with nothing, over a vocabulary with sentinels, that protects spans."""
    pairs = list(zip(fixture_lines("train.en"), fixture_lines("train.de"), strict=True))
    vocab = Vocabularies.train(pairs, 200, sentinels=SENTINEL_PIECES, split_digits=True)
    return seeded_checkpoint(
        tmp_path_factory.mktemp("protected") / "model.ckpt",
        vocab,
        32,
        1,
        64,
        "all",
        run_config="data:\n  src_lang: en\n  tgt_lang: de\n  protect_spans: 0.5\n",
    )


@pytest.fixture(scope="module")
def client(protected_checkpoint):
    with TestClient(create_app(load_model(protected_checkpoint), ServeSettings())) as client:
        yield client


def test_the_probes_hold_what_they_test():
    """Each probe holds something masking once lost: the brackets, more spans than
    sentinels, or a digit run no class of the earlier rules took."""
    assert all(find_spans(probe) for probe in PROBES)
    assert max(len(find_spans(probe)) for probe in PROBES) == 200


def test_translate_cli_writes_back_what_was_typed(protected_checkpoint, tmp_path):
    source, output = tmp_path / "probes.en", tmp_path / "probes.de"
    source.write_text("\n".join(PROBES) + "\n", encoding="utf-8")
    arguments = ["--checkpoint", str(protected_checkpoint), "--source", str(source)]
    assert cli_main([*arguments, "--output", str(output), "--quiet"]) == 0
    translations = output.read_text(encoding="utf-8").splitlines()
    assert len(translations) == len(PROBES)
    for probe, translation in zip(PROBES, translations, strict=True):
        kept_as_typed(probe, translation)


def test_the_native_api_writes_back_what_was_typed_and_reports_nothing_lost(client):
    answer = client.post("/v1/translate", json={"text": PROBES})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    for probe, translation in zip(PROBES, body["translations"], strict=True):
        kept_as_typed(probe, translation)
    assert body["lost"] == [[] for _ in PROBES]


@pytest.mark.parametrize("text_format", ["text", "html"])
def test_libretranslates_api_writes_back_what_was_typed(client, text_format):
    texts = [f"<p>{probe}</p>" for probe in PROBES] if text_format == "html" else PROBES
    answer = client.post(
        "/translate", json={"q": texts, "source": "en", "target": "de", "format": text_format}
    )
    assert answer.status_code == 200, answer.text
    for probe, translation in zip(PROBES, answer.json()["translatedText"], strict=True):
        if text_format == "html":
            assert translation.startswith("<p>") and translation.endswith("</p>")
            translation = translation[3:-4]
        kept_as_typed(probe, translation)
