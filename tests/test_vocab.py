"""Joint and separate SentencePiece vocabularies; their checkpoint form; the data module's cache."""

import pytest

from translate.model.transformer import ModelConfig
from translate.text.corpus import CorpusError, read_parallel
from translate.text.vocab import BATCH_CALL_LINES, BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocabularies
from translate.train.data_module import TranslationDataModule
from translate.train.lightning_module import TranslationModule


@pytest.fixture(scope="module")
def pairs(request):
    fixture = request.config.rootpath / "tests" / "fixtures" / "libreoffice_small"
    return read_parallel(fixture / "train.en", fixture / "train.de")


def test_joint_vocabulary_covers_both_languages_and_round_trips(pairs):
    vocab = Vocabularies.train(pairs, vocab_size=500)
    assert vocab.joint and vocab.source is vocab.target
    pieces = {
        p for src, tgt in pairs[:50] for p in vocab.source.pieces(src) + vocab.source.pieces(tgt)
    }
    assert "▁die" in pieces and "▁the" in pieces  # German and English pieces in one model
    texts = [side for pair in pairs for side in pair]  # identity normalization: exact round trip
    assert any("…" in text for text in texts) and any("ü" in text for text in texts)
    assert vocab.target.decode(vocab.target.encode(texts)) == texts
    specials = [vocab.source.processor.id_to_piece(i) for i in (PAD_ID, UNK_ID, BOS_ID, EOS_ID)]
    assert specials == ["<pad>", "<unk>", "<s>", "</s>"]


def test_a_few_lines_are_encoded_and_decoded_as_a_long_list_is(pairs):
    vocab = Vocabularies.train(pairs, vocab_size=500)
    texts = ["", *(side for pair in pairs[:40] for side in pair)]  # an empty line among them
    assert len(texts) >= BATCH_CALL_LINES
    ids = vocab.source.encode(texts)  # SentencePiece's list call
    assert [vocab.source.encode([text])[0] for text in texts] == ids  # one call a line
    assert vocab.source.encode(texts[:3]) == ids[:3]
    assert vocab.source.decode(ids[:3]) == vocab.source.decode(ids)[:3] == texts[:3]
    assert vocab.source.decode([[]]) == [""]


def test_vocabulary_state_is_plain_bytes_and_restores(pairs):
    joint = Vocabularies.train(pairs, vocab_size=400)
    state = joint.state()
    assert set(state) == {"joint"} and isinstance(state["joint"], bytes)
    restored = Vocabularies.from_state(state)
    assert restored.joint and restored.source.encode(["Zellen"]) == joint.source.encode(["Zellen"])

    separate = Vocabularies.train(pairs, vocab_size=300, joint=False)
    assert not separate.joint and set(separate.state()) == {"source", "target"}
    assert not Vocabularies.from_state(separate.state()).joint


def test_training_is_deterministic(pairs):
    assert Vocabularies.train(pairs, 300).state() == Vocabularies.train(pairs, 300).state()


def test_data_module_caches_the_vocabulary(tmp_path, fixture_dir):
    kwargs = dict(corpus_dir=str(fixture_dir), vocab_size=300, cache_dir=str(tmp_path))
    first = TranslationDataModule(**kwargs)
    cached = sorted(p.name for p in tmp_path.glob("*.model"))
    assert len(cached) == 1
    second = TranslationDataModule(**kwargs)
    assert second.vocab.state() == first.vocab.state()
    TranslationDataModule(**{**kwargs, "vocab_size": 310})  # other settings, another entry
    assert len(list(tmp_path.glob("*.model"))) == 2


@pytest.mark.parametrize("tie", ["all", "src_tgt"])
def test_separate_vocabularies_refuse_sharing_ties_at_module_level(tmp_path, fixture_dir, tie):
    data = TranslationDataModule(
        corpus_dir=str(fixture_dir), vocab_size=300, joint_vocab=False, cache_dir=str(tmp_path)
    )
    with pytest.raises(ValueError, match="needs one joint vocabulary"):
        TranslationModule(
            data.vocab,
            ModelConfig(
                d_model=32,
                heads=2,
                encoder_layers=1,
                decoder_layers=1,
                ffn_dim=32,
                tie_embeddings=tie,
            ),
        )
    module = TranslationModule(
        data.vocab,
        ModelConfig(
            d_model=32,
            heads=2,
            encoder_layers=1,
            decoder_layers=1,
            ffn_dim=32,
            tie_embeddings="decoder",
        ),
    )
    assert module.model.output.weight is module.model.tgt_embed.weight


def test_data_module_names_a_missing_training_file(tmp_path):
    from translate.text.corpus import CorpusError

    with pytest.raises(CorpusError, match=r"train\.en: no such file"):
        TranslationDataModule(corpus_dir=str(tmp_path), cache_dir=str(tmp_path / "cache"))


def test_a_bad_line_met_while_training_the_vocabulary_is_reported_as_it_is(tmp_path):
    """SentencePiece wraps an error raised by its input in `RuntimeError: INTERNAL: ...`; the data
    module reports the corpus error itself, with its file and line."""
    (tmp_path / "train.tsv").write_text("a b\tc d\n" * 50 + "only one field\n", encoding="utf-8")
    with pytest.raises(CorpusError) as error:
        TranslationDataModule(
            corpus_dir=str(tmp_path),
            corpus_format="tsv",
            vocab_size=30,
            cache_dir=str(tmp_path / "c"),
        )
    assert (
        str(error.value) == f"{tmp_path / 'train.tsv'}:51: expected 2 tab-separated fields, found 1"
    )


@pytest.mark.parametrize("content", ["", "\n \n\t\n"])
def test_an_empty_training_split_names_its_files(tmp_path, content):
    for lang in ("en", "de"):
        (tmp_path / f"train.{lang}").write_text(content, encoding="utf-8")
    with pytest.raises(CorpusError) as error:
        TranslationDataModule(
            corpus_dir=str(tmp_path), vocab_size=30, cache_dir=str(tmp_path / "c")
        )
    assert str(error.value) == (
        f"{tmp_path / 'train.en'} and {tmp_path / 'train.de'}: no text to train the "
        "SentencePiece vocabulary on: the train split is empty"
    )
