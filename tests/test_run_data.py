"""A run's data as one type: the `data:` section read in one place, for training and for every
command that loads a checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import FIXTURE, fixture_lines

from translate.text.corpus import BUNDLED_CORPUS, CorpusError
from translate.text.run_data import EmptySplitError, RunData
from translate.train.data_module import TranslationDataModule

MULTIWAY = Path(__file__).parent / "fixtures" / "libreoffice_multiway"


def test_a_bilingual_run_has_its_one_direction_and_the_split_names_it_gives():
    data = RunData.from_settings(
        {"src_lang": "en", "tgt_lang": "de", "corpus_dir": str(FIXTURE), "test_split": "dev"}
    )
    assert data.languages == ("en", "de") and data.directions == (("en", "de"),)
    assert not data.many_to_many and data.corpus == FIXTURE
    assert (data.split_name(None), data.split_name("dev"), data.split_name("held")) == (
        "dev",
        "dev",
        "held",
    )


def test_languages_give_both_directions_with_the_pivot_and_listed_directions_their_own_corpus():
    languages = RunData.from_settings(
        {"src_lang": "en", "tgt_lang": "de", "languages": ["de", "ja"]}
    )
    assert languages.many_to_many
    assert languages.directions == (("en", "de"), ("de", "en"), ("en", "ja"), ("ja", "en"))
    assert languages.target_languages == ["de", "en", "ja"]
    listed = RunData.from_settings(
        {"directions": [["en", "de", "/data/wmt14"], ["en", "ja"]], "lang_tag": "source"}
    )
    assert listed.directions == (("en", "de"), ("en", "ja")) and listed.lang_tag == "source"
    assert listed.corpus_of(("en", "de")) == Path("/data/wmt14")
    assert listed.corpus_of(("en", "ja")) == BUNDLED_CORPUS
    assert listed.known_languages == ["de", "en", "ja"]


def test_a_checkpoint_s_record_of_the_wrong_type_counts_as_not_recorded():
    data = RunData.from_settings(
        {
            "src_lang": 3,
            "tgt_lang": "de",
            "max_length": "long",
            "protect_spans": True,
            "lang_tag": "sideways",
            "directions": [["en"], "en-de"],
        }
    )
    assert data == RunData()
    assert RunData.from_run_config("data: [not, a, mapping]") == RunData()
    assert RunData.from_run_config("data: {unclosed") == RunData()
    assert RunData.from_run_config(None) == RunData()


def test_the_data_module_and_its_saved_config_read_as_the_same_run_data(tmp_path):
    settings = {
        "corpus_dir": str(MULTIWAY),
        "corpus_format": "multiway",
        "src_lang": "en",
        "tgt_lang": "de",
        "languages": ["de", "ja"],
        "lang_tag": "source",
        "max_length": 40,
        "protect_spans": 0.5,
        "dev_split": "test",
    }
    module = TranslationDataModule(
        **settings, vocab_size=800, character_coverage=0.9995, cache_dir=str(tmp_path)
    )
    saved = RunData.from_run_config(yaml.safe_dump({"data": {**settings, "vocab_size": 800}}))
    assert module.run_data == saved
    assert saved.max_length == 40 and saved.protect_spans == 0.5 and saved.splits["dev"] == "test"


def test_a_split_is_read_whole_and_an_empty_or_missing_one_is_named(tmp_path):
    data = RunData.from_settings({"src_lang": "en", "tgt_lang": "de", "corpus_dir": str(FIXTURE)})
    test = data.read(None, ("en", "de"))
    assert test.sources == fixture_lines("test.en") and test.references == fixture_lines("test.de")
    assert test.description == f"en→de, split 'test' of {FIXTURE}"
    (tmp_path / "test.en").write_text("")
    (tmp_path / "test.de").write_text("")
    empty = RunData.from_settings({"src_lang": "en", "tgt_lang": "de", "corpus_dir": str(tmp_path)})
    with pytest.raises(EmptySplitError) as error:
        empty.read("test", ("en", "de"))
    assert (error.value.corpus, error.value.split) == (tmp_path, "test")
    assert str(error.value) == f"split 'test' of {tmp_path} has no en→de pairs"
    with pytest.raises(CorpusError, match="no such file"):
        empty.read("dev", ("en", "de"))
