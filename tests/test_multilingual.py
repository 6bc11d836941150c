"""Many-to-many models: language tags, temperature sampling over directions, translating and
scoring any direction, the off-target rate, and what bad input gets."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import REPO, seeded_checkpoint
from sacrebleu_sets import eval_process, sacrebleu_cache
from tolerances import within_rounding

from translate.cli.evaluate import main as eval_main
from translate.cli.train import main as train_main
from translate.cli.translate import main as translate_main
from translate.decode.loaded_model import load_model
from translate.decode.pipeline import translate_lines
from translate.decode.settings import Budget, SearchSettings
from translate.score.metrics import bleu_tokenizer, corpus_scores
from translate.serve.engine_loop import EngineLoop, Join
from translate.serve.service import detokenise, tokenise
from translate.text.corpus import CorpusError
from translate.text.language_id import off_target_rate
from translate.text.languages import english_centric, parse_direction
from translate.text.vocab import BOS_ID, EOS_ID
from translate.train.collate import collate
from translate.train.data_module import TranslationDataModule
from translate.train.directions import TemperatureBatchSampler, sampling_probabilities

MULTIWAY = Path(__file__).parent / "fixtures" / "libreoffice_multiway"
JAPANESE = set(range(0x3040, 0x3100)) | set(range(0x4E00, 0xA000))  # kana and CJK ideographs


def japanese_share(text: str) -> float:
    letters = [c for c in text if not c.isspace()]
    return sum(ord(c) in JAPANESE for c in letters) / max(len(letters), 1)


# --- directions and sampling ---------------------------------------------------------------------
def test_directions_are_parsed_even_where_codes_hold_hyphens():
    assert parse_direction("en-zh-CN", ["en", "zh-CN", "de"]) == ("en", "zh-CN")
    assert parse_direction("zh-CN-de", ["en", "zh-CN", "de"]) == ("zh-CN", "de")
    with pytest.raises(ValueError, match="not SRC-TGT of two languages among de, en, zh-CN"):
        parse_direction("en-fr", ["en", "zh-CN", "de"])
    assert english_centric("en", ["de", "ja"]) == [
        ("en", "de"),
        ("de", "en"),
        ("en", "ja"),
        ("ja", "en"),
    ]


@pytest.mark.numerical
def test_temperature_flattens_the_mixture():
    sizes = [9000, 900, 100]
    terms = (
        len(sizes) + 3
    )  # float64: size / total, its power, the sum over the directions, the division
    assert sampling_probabilities(sizes, 1.0) == within_rounding(
        [0.9, 0.09, 0.01], torch.float64, terms
    )
    five = sampling_probabilities(sizes, 5.0)
    expected = np.array([0.9, 0.09, 0.01]) ** 0.2
    assert five == within_rounding(expected / expected.sum(), torch.float64, 2 * terms)
    # Not rounding: each (size / total) ** (1 / T) is within ln(total / size) / T of 1, and so each share of 1/3
    spread = math.log(sum(sizes) / min(sizes)) / 1e9
    assert sampling_probabilities(sizes, 1e9) == pytest.approx([1 / 3] * 3, abs=spread)


def sampler_of(sizes, rank=0, world=1, temperature=5.0, seed=3):
    parts = [np.full((size, 2), 4) for size in sizes]  # every example 4 tokens: 5 to a batch of 20
    return TemperatureBatchSampler(
        parts, max_tokens=20, temperature=temperature, seed=seed, rank=rank, world_size=world
    )


def test_batches_are_drawn_by_temperature_one_direction_each():
    sizes = [1000, 100, 10]
    sampler = sampler_of(sizes)
    offsets = np.cumsum([0] + sizes)
    counts = Counter()
    for epoch in range(20):
        sampler.set_epoch(epoch)
        for batch in sampler:
            parts = {int(np.searchsorted(offsets, i, side="right")) - 1 for i in batch}
            assert len(parts) == 1, "a batch mixes directions"
            counts[parts.pop()] += 1
    total = sum(counts.values())
    observed = np.array([counts[d] for d in range(3)]) / total
    # Not a rounding tolerance: the frequencies of a seeded sampler's draws (the same on every CPU)
    assert observed == pytest.approx(sampling_probabilities(sizes, 5.0), abs=0.02)


def test_a_direction_cycles_through_all_its_batches_before_repeating_one():
    sampler = sampler_of([50, 50], temperature=1.0)
    seen: list[tuple[int, ...]] = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        seen += [tuple(batch) for batch in sampler if batch[0] < 50]
    first_pass = seen[:10]
    assert len(set(first_pass)) == 10, (
        "the first 10 batches of a direction of 10 batches are all different"
    )


def test_temperature_sampling_resumes_mid_epoch_and_shards_ranks():
    sizes = [300, 40, 25]
    whole = sampler_of(sizes)
    whole.set_epoch(2)
    order = list(whole)
    resumed = sampler_of(sizes)
    resumed.set_epoch(2)
    resumed.load_state_dict(whole.state_dict(consumed=7) | {"epoch": 2, "consumed": 7})
    assert list(resumed) == order[7:]
    ranks = [sampler_of(sizes, rank=r, world=2) for r in (0, 1)]
    for sampler in ranks:
        sampler.set_epoch(2)
    shares = [list(sampler) for sampler in ranks]
    everything = [batch.tolist() for batch in ranks[0].epoch_batches(2)]
    assert len(shares[0]) == len(shares[1]) == len(everything) // 2
    assert [b for pair in zip(*shares) for b in pair] == everything


def test_collate_puts_the_tag_before_the_source_or_first_in_the_decoder():
    examples = [
        (np.array([11, 12]), np.array([21]), None, 7),
        (np.array([13]), np.array([22, 23]), None, 8),
    ]
    source = collate(examples, "source")
    assert source["src"].tolist() == [[7, 11, 12, EOS_ID], [8, 13, EOS_ID, 0]]
    assert source["tgt_in"].tolist() == [[BOS_ID, 21, 0], [BOS_ID, 22, 23]]
    decoder = collate(examples, "decoder")
    assert decoder["src"].tolist() == [[11, 12, EOS_ID], [13, EOS_ID, 0]]
    assert decoder["tgt_in"].tolist() == [[7, 21, 0], [8, 22, 23]]
    assert (
        decoder["tgt_out"].tolist()
        == source["tgt_out"].tolist()
        == [[21, EOS_ID, 0], [22, 23, EOS_ID]]
    )


# --- the data module ------------------------------------------------------------------------------
def test_the_joint_vocabulary_holds_one_piece_per_tag_and_the_split_every_direction(tmp_path):
    data = TranslationDataModule(
        corpus_dir=str(MULTIWAY),
        corpus_format="multiway",
        languages=["de", "ja"],
        vocab_size=800,
        character_coverage=0.9995,
        cache_dir=str(tmp_path),
    )
    tags = data.prepared.tags()
    assert set(tags) == {"de", "en", "ja"}
    assert all(f"<2{lang}>" in data.vocab.target.pieces(f"<2{lang}> x") for lang in tags)
    data.setup("fit")
    assert [len(part) for part in data.datasets["dev"].parts] == [40] * 4
    by_language = data.target_tokens_by_language()
    assert set(by_language) == {"de", "en", "ja"}
    kana = data.vocab.target.encode(["クリック"])[0][-1]
    assert kana in by_language["ja"] and kana not in by_language["de"]


@pytest.mark.parametrize(
    "directions, message",
    [
        ([("en", "ko")], "train.ko: no such file"),
        ([("en", "de")], None),
    ],
)
def test_a_language_missing_from_the_corpus_is_named(tmp_path, directions, message):
    if message is None:
        TranslationDataModule(
            corpus_dir=str(MULTIWAY),
            corpus_format="multiway",
            directions=directions,
            vocab_size=300,
            cache_dir=str(tmp_path),
        )
        return
    with pytest.raises(CorpusError, match=message) as error:
        TranslationDataModule(
            corpus_dir=str(MULTIWAY),
            corpus_format="multiway",
            directions=directions,
            vocab_size=300,
            cache_dir=str(tmp_path),
        )
    assert "languages among de, en, fr, ja" in str(error.value)


def test_languages_that_do_not_line_up_are_an_error(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in MULTIWAY.glob("*.*"):
        (corpus / path.name).write_bytes(path.read_bytes())
    (corpus / "train.ja").write_text(
        "".join(line + "\n" for line in (MULTIWAY / "train.ja").read_text().splitlines()[:-3])
    )
    with pytest.raises(
        CorpusError, match=r"misaligned: .*train.en has 600 lines but .*train.ja has 597"
    ):
        TranslationDataModule(
            corpus_dir=str(corpus),
            corpus_format="multiway",
            languages=["de", "ja"],
            vocab_size=300,
            cache_dir=str(tmp_path / "cache"),
        )


def test_a_vocabulary_too_small_for_the_characters_says_so(tmp_path):
    with pytest.raises(
        Exception,
        match=r"data.vocab_size 300 is smaller than the \d+ characters .* raise data.vocab_size",
    ):
        TranslationDataModule(
            corpus_dir=str(MULTIWAY),
            corpus_format="multiway",
            languages=["ja"],
            vocab_size=300,
            cache_dir=str(tmp_path),
        )


def test_a_many_to_many_model_needs_a_joint_vocabulary(tmp_path):
    with pytest.raises(Exception, match="needs one joint vocabulary"):
        TranslationDataModule(
            corpus_dir=str(MULTIWAY),
            corpus_format="multiway",
            languages=["de"],
            joint_vocab=False,
            cache_dir=str(tmp_path),
        )


# --- a many-to-many model's data around random weights --------------------------------------------
MANY_TO_MANY = {
    "corpus_dir": str(MULTIWAY),
    "corpus_format": "multiway",
    "src_lang": "en",
    "tgt_lang": "de",
    "languages": ["de", "ja"],
    "vocab_size": 800,
    "character_coverage": 0.9995,
    "max_length": 48,
}


@pytest.fixture(scope="module", params=["source", "decoder"])
def untrained(request, tmp_path_factory) -> Path:
    """English <-> German and Japanese as a training run records them (vocabulary with tags,
    languages, tag position, target-side tokens) around random weights: for the tests of
    choosing, translating and scoring directions, where nothing learnt is under test."""
    root = tmp_path_factory.mktemp(f"untrained_{request.param}")
    data = {**MANY_TO_MANY, "lang_tag": request.param}
    module = TranslationDataModule(**data, cache_dir=str(root / "cache"), encode_workers=1)
    return seeded_checkpoint(
        root / "model.ckpt",
        module.vocab,
        32,
        1,
        32,
        "all",
        run_config=yaml.safe_dump({"data": data}),
        target_tokens=module.target_tokens(),
        target_tokens_by_language=module.target_tokens_by_language(),
    )


@pytest.mark.parametrize("lang_tag", ["source", "decoder"])
def test_validation_bleu_tokenizes_each_row_as_its_tag_s_language(tmp_path, lang_tag):
    """Validation reads each dev row's target language from its tag, wherever the tag sits:
    every direction's dev sentences are counted under their own target language, and the
    Japanese rows are those whose references are written in Japanese."""
    from translate.model.transformer import ModelConfig
    from translate.train.lightning_module import TranslationModule

    data = {**MANY_TO_MANY, "lang_tag": lang_tag, "dev_max_sentences": 6}
    datamodule = TranslationDataModule(**data, cache_dir=str(tmp_path), encode_workers=1)
    datamodule.setup("validate")
    module = TranslationModule(
        datamodule.vocab, ModelConfig(d_model=16, ffn_dim=32, encoder_layers=1, decoder_layers=1)
    )
    languages, references = [], []
    for batch in datamodule.val_dataloader():
        languages += module._target_languages(batch)
        references += batch["references"]
    expected = Counter(target for _, target in datamodule.run_data.directions)
    assert Counter(languages) == {lang: 6 * count for lang, count in expected.items()}
    assert set(languages) == {"en", "de", "ja"}
    for language, reference in zip(languages, references, strict=True):
        assert (japanese_share(reference) > 0) == (language == "ja"), (language, reference)


# --- a trained many-to-many model -----------------------------------------------------------------
@pytest.fixture(scope="module", params=["source", "decoder"])
def trained(request, tmp_path_factory) -> Path:
    """English <-> German and Japanese, long enough that the tag decides the script written."""
    root = tmp_path_factory.mktemp(f"many_{request.param}")
    code = train_main(
        [
            "fit",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            "--run_dir",
            str(root / "run"),
            "--data.corpus_dir",
            str(MULTIWAY),
            "--data.corpus_format",
            "multiway",
            "--data.languages",
            "[de, ja]",
            "--data.lang_tag",
            request.param,
            "--data.vocab_size",
            "800",
            "--data.character_coverage",
            "0.9995",
            "--data.cache_dir",
            str(root / "cache"),
            "--data.max_tokens",
            "1200",
            "--data.dev_max_sentences",
            "8",
            "--model.model.d_model",
            "64",
            "--model.model.ffn_dim",
            "128",
            "--model.model.dropout",
            "0.0",
            "--model.lr",
            "0.003",
            "--model.warmup_steps",
            "50",
            "--trainer.max_steps",
            "1000",
            "--trainer.val_check_interval",
            "1000",
            "--tune_search",
            "false",
        ]
    )
    assert code == 0
    return root / "run" / "checkpoints" / "last.ckpt"


@pytest.mark.slow  # the two models of `trained`: some 20 s each
def test_the_tag_chooses_the_output_language(trained, capsys, tmp_path):
    sources = (MULTIWAY / "test.en").read_text().splitlines()[:20]
    (tmp_path / "in.en").write_text("\n".join(sources) + "\n")
    outputs = {}
    for lang in ("de", "ja"):
        assert (
            translate_main(
                [
                    "--checkpoint",
                    str(trained),
                    "--source",
                    str(tmp_path / "in.en"),
                    "--quiet",
                    "--beam",
                    "1",
                    "--target-lang",
                    lang,
                ]
            )
            == 0
        )
        outputs[lang] = capsys.readouterr().out.splitlines()
        assert len(outputs[lang]) == 20
    assert np.mean([japanese_share(t) for t in outputs["ja"]]) > 0.5
    assert np.mean([japanese_share(t) for t in outputs["de"]]) < 0.1
    assert not any("<2" in text for texts in outputs.values() for text in texts), (
        "a tag was written out"
    )


def test_every_direction_is_scored_with_its_tokenizer_and_off_target_rate(untrained, capsys):
    assert eval_main(["--checkpoint", str(untrained), "--beam", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["direction"] for row in rows] == ["en-de", "de-en", "en-ja", "ja-en"]
    assert all(
        row["trained"] and row["lines"] == 40 and 0 <= row["off_target"] <= 1 for row in rows
    )
    tokenizers = {
        row["direction"]: row["bleu_signature"].split("|tok:")[1].split("|")[0] for row in rows
    }
    assert tokenizers["en-ja"].startswith("ja-mecab") and tokenizers["en-de"] == "13a"


def test_a_named_test_set_is_scored_in_the_model_s_direction(untrained, capsys, tmp_path):
    root = sacrebleu_cache(tmp_path / "sacrebleu", "wmt20", "en-ja", MULTIWAY)
    named = eval_process(
        root,
        "--checkpoint",
        str(untrained),
        "--beam",
        "1",
        "--test-set",
        "wmt20",
        "--language-pair",
        "en-ja",
        "--json",
    )
    assert named.returncode == 0, named.stderr
    assert (
        eval_main(
            ["--checkpoint", str(untrained), "--beam", "1", "--directions", "en-ja", "--json"]
        )
        == 0
    )
    own = json.loads(capsys.readouterr().out)
    row = json.loads(named.stdout)
    assert row["direction"] == own["direction"] == "en-ja" and row["trained"]
    assert (row["bleu"], row["chrf"], row["off_target"]) == (
        own["bleu"],
        own["chrf"],
        own["off_target"],
    )
    assert row["bleu_signature"].split("|tok:")[1].startswith("ja-mecab")
    out = tmp_path / "out.txt"
    assert eval_main(["--checkpoint", str(untrained), "--output", str(out)]) == 2
    assert "--output is for one direction" in capsys.readouterr().err and not out.exists()


def test_a_direction_not_trained_on_is_translated_zero_shot_and_said(untrained, capsys):
    assert (
        eval_main(
            ["--checkpoint", str(untrained), "--beam", "1", "--directions", "de-ja", "--json"]
        )
        == 0
    )
    captured = capsys.readouterr()
    row = json.loads(captured.out)
    assert row["direction"] == "de-ja" and row["trained"] is False
    assert "was not trained on de→ja: translating zero-shot" in captured.err
    assert eval_main(["--checkpoint", str(untrained), "--directions", "de-ko"]) == 2
    assert (
        "--directions: 'de-ko' is not SRC-TGT of two languages among de, en, ja"
        in capsys.readouterr().err
    )


def test_unknown_or_missing_target_languages_are_refused_with_the_known_ones(untrained, capsys):
    source = str(MULTIWAY / "test.en")
    assert translate_main(["--checkpoint", str(untrained), "--source", source, "--quiet"]) == 2
    assert (
        "is a many-to-many model: choose the output language with --target-lang (one of de, en, ja)"
        in capsys.readouterr().err
    )
    assert (
        translate_main(
            ["--checkpoint", str(untrained), "--source", source, "--quiet", "--target-lang", "fr"]
        )
        == 2
    )
    assert (
        "--target-lang fr: " in (err := capsys.readouterr().err)
        and "knows the target languages de, en, ja" in err
    )


def test_restricting_to_a_languages_targets(untrained):
    loaded = load_model(untrained)
    japanese, german = loaded.target_token_mask("ja"), loaded.target_token_mask("de")
    kana = loaded.vocab.target.encode(["クリック"])[0][-1]
    assert japanese[kana] and not german[kana]
    assert not any(japanese[i] for i in loaded.vocab.target.tag_ids().values())


# --- scoring ---------------------------------------------------------------------------------------
def test_bleu_tokenizes_as_the_target_language_needs():
    assert [bleu_tokenizer(lang) for lang in ("zh-CN", "ja", "ko", "de", None)] == [
        "zh",
        "ja-mecab",
        "ko-mecab",
        "13a",
        "13a",
    ]
    hypothesis, reference = "今日は良い天気ですね", "今日は良い天気です"
    unsegmented = corpus_scores([hypothesis], [reference]).bleu  # 13a: one "word" each, no match
    assert (
        unsegmented == 0.0 and corpus_scores([hypothesis], [reference], target_lang="ja").bleu > 50
    )


def test_the_off_target_rate_uses_a_real_language_identifier():
    outputs = [
        "Klicken Sie auf die Schaltfläche OK.",
        "Click the OK button to close the dialog.",
        "Wählen Sie die Zellen aus, die Sie kopieren möchten.",
        "",
    ]
    assert off_target_rate(outputs, "de", ["en", "ja"]) == 1 / 3  # one correctly rounded division
    assert off_target_rate(["OKボタンをクリックします。"], "ja", ["en", "de"]) == 0.0


def test_bilingual_corpora_combine_into_one_model(tmp_path):
    """Each direction may name its own corpus: here the bundled-style en-de fixture and an en-ja one."""
    en_ja = tmp_path / "en-ja"
    en_ja.mkdir()
    for split in ("train", "dev", "test"):
        for lang in ("en", "ja"):
            (en_ja / f"{split}.{lang}").write_bytes((MULTIWAY / f"{split}.{lang}").read_bytes())
    en_de = Path(__file__).parent / "fixtures" / "libreoffice_small"
    data = TranslationDataModule(
        directions=[("en", "de", str(en_de)), ("en", "ja", str(en_ja))],
        vocab_size=800,
        character_coverage=0.9995,
        cache_dir=str(tmp_path / "cache"),
    )
    data.setup("fit")
    assert [len(part) for part in data.datasets["dev"].parts] == [40, 40]
    assert data.datasets["dev"].parts[0][0][2] == (en_de / "dev.de").read_text().splitlines()[0]
    assert data.datasets["dev"].parts[1][0][2] == (en_ja / "dev.ja").read_text().splitlines()[0]


@pytest.mark.slow  # the two models of `trained`: some 20 s each
def test_continuous_batching_writes_each_request_s_language(trained):
    """translate-serve's one running search of a beam size holds requests for each output
    language, length penalty and restriction, joining step by step: each request gets what
    translate-cli gives its lines in that language under its settings (tag at the source or as
    the decoder's first token)."""
    loaded = load_model(trained)
    sources = (MULTIWAY / "test.en").read_text().splitlines()[:6]
    requests = [
        (
            sources[i : i + 2],
            SearchSettings(
                beam=2,
                length_penalty=1.0 if i == 2 else 0.6,
                restrict_to_target=i == 4,
                target_lang=lang,
            ),
        )
        for i in (0, 2, 4)
        for lang in ("de", "ja")
    ]
    engine = EngineLoop(loaded, Budget(4096))
    answers, segments = {}, {}
    for request_id, (lines, key) in enumerate(requests):  # two new requests a step
        segments[request_id] = tokenise(loaded, lines, key)
        found = engine.take(Join(request_id, segments[request_id].ids, key))
        found += engine.step() if request_id % 2 else []
        assert len(engine.searches) <= 1  # one lane: one search steps them all
        answers.update((answer.request_id, answer) for answer in found)
    for _ in range(1000):
        if not engine.busy:
            break
        answers.update((answer.request_id, answer) for answer in engine.step())
    answers = {
        request_id: [
            found.text for found in detokenise(loaded, segments[request_id], answer.found, 1)
        ]
        for request_id, answer in answers.items()
    }
    for request_id, (lines, key) in enumerate(requests):
        assert answers[request_id] == translate_lines(loaded, lines, key)


@pytest.mark.slow  # the two models of `trained`: some 20 s each
def test_the_server_writes_the_language_each_request_asks_for(trained):
    """Through translate-serve's HTTP app: `target_lang` reaches the search (each request gets
    what translate-cli gives its lines in that language), and the answer names it."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from translate.serve.app import ServeSettings, create_app

    loaded = load_model(trained)
    lines = (MULTIWAY / "test.en").read_text().splitlines()[:3]
    with TestClient(create_app(loaded, ServeSettings())) as client:
        for lang in ("de", "ja"):
            response = client.post(
                "/v1/translate", json={"text": lines, "target_lang": lang, "beam": 2}
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["target_lang"] == lang
            defaults = loaded.search_defaults()
            settings = SearchSettings(
                beam=2, length_penalty=defaults.length_penalty, target_lang=lang
            )
            assert body["translations"] == translate_lines(loaded, lines, settings)
