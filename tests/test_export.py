"""Exports (transformers, CTranslate2) compute what our model computes: same logits, same greedy output."""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")
# MarianTokenizer recommends sacremoses for a normalizer that it never applies when encoding.
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

from helpers import (  # noqa: E402
    fixture_lines,
    joint_vocab,
    pad_batch,
    random_checkpoint,
    small_config,
    trained_copy_checkpoint,
)
from search_oracle import greedy_search, strip_special  # noqa: E402
from tolerances import assert_within_rounding, transformer_terms  # noqa: E402

from translate.decode.loaded_model import load_model  # noqa: E402
from translate.export.huggingface import export_huggingface  # noqa: E402
from translate.export.output import ExportError  # noqa: E402
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabularies, train_sentencepiece  # noqa: E402


def short_lines(name: str, count: int = 6) -> list[str]:
    return [line for line in fixture_lines(name) if len(line) <= 50][:count]


SENTENCES = short_lines("test.en")


@pytest.fixture(scope="module")
def vocabularies() -> dict[str, Vocabularies]:
    english = fixture_lines("train.en")
    german = fixture_lines("train.de")
    return {
        "joint": joint_vocab(),
        # Different sizes, so a swapped source/target vocabulary cannot go unnoticed.
        "separate": Vocabularies(
            train_sentencepiece(english, 150), train_sentencepiece(german, 180)
        ),
    }


EXPORTABLE = [
    ("post-norm", "none", "joint"),
    ("post-norm", "decoder", "joint"),
    ("post-norm", "src_tgt", "joint"),
    ("post-norm", "all", "joint"),
    ("post-norm", "shared_rows", "joint"),
    ("post-norm", "none", "separate"),
    ("post-norm", "decoder", "separate"),
    ("pre-norm", "all", "joint"),
    ("pre-norm", "src_tgt", "joint"),
]


@pytest.mark.numerical
@pytest.mark.parametrize("norm,tie,vocab_kind", EXPORTABLE)
def test_exported_model_gives_our_logits_and_greedy_output(
    norm, tie, vocab_kind, vocabularies, tmp_path
):
    vocab = vocabularies[vocab_kind]
    model = trained_copy_checkpoint(
        tmp_path / "model.ckpt", small_config(norm == "pre-norm", tie), vocab, train_steps=120
    )
    if len(vocab.source) != len(vocab.target) and int(transformers.__version__.split(".")[0]) < 5:
        # transformers 4 sizes Marian's decoder embedding by the source vocabulary.
        with pytest.raises(ExportError, match=r"need transformers>=5"):
            export_huggingface(tmp_path / "model.ckpt", tmp_path / "hf")
        return
    out = export_huggingface(tmp_path / "model.ckpt", tmp_path / "hf")

    names = {path.name for path in out.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "source.spm",
        "target.spm",
        "vocab.json",
        "tokenizer_config.json",
    } <= names
    assert out.joinpath("source.spm").read_bytes() == vocab.source.model_bytes
    assert out.joinpath("target.spm").read_bytes() == vocab.target.model_bytes
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], (
        "a temporary directory was left"
    )

    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    expected = "MarianMTModel" if norm == "post-norm" else "PegasusForConditionalGeneration"
    assert type(hf_model).__name__ == expected

    # The tokenizer in the directory gives our ids: SentencePiece pieces, then EOS.
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    ours_ids = [ids + [EOS_ID] for ids in vocab.source.encode(SENTENCES)]
    assert tokenizer(SENTENCES)["input_ids"] == ours_ids
    german = short_lines("test.de")
    assert tokenizer(text_target=german)["input_ids"] == [
        ids + [EOS_ID] for ids in vocab.target.encode(german)
    ]

    # (a) teacher-forced logits, with padded sources
    src = pad_batch(ours_ids)
    targets = vocab.target.encode(short_lines("test.de"))
    tgt_in = pad_batch([[BOS_ID] + ids for ids in targets])
    with torch.no_grad():
        ours = copy.deepcopy(model).double()(
            src, tgt_in, pad_id=PAD_ID
        )  # the reference, in float64
        theirs = hf_model(
            input_ids=src, attention_mask=src != PAD_ID, decoder_input_ids=tgt_in
        ).logits
    terms = transformer_terms(model.cfg, max(src.shape[1], tgt_in.shape[1]))
    assert_within_rounding(theirs, ours, torch.float32, terms)  # transformers computes in float32

    # (b) greedy output. Ours stops at 1.5 * source length + 10 tokens with a forced EOS, which
    # generate reproduces sentence by sentence with max_length and forced_eos_token_id.
    hypotheses = greedy_search(model, src)
    limits = [min(int(len(ids) * 1.5 + 10), model.cfg.max_positions) for ids in ours_ids]
    assert len({tuple(h) for h in hypotheses}) > 1, "the comparison would be vacuous"
    assert any(len(h) + 1 < limit for h, limit in zip(hypotheses, limits)), (
        "no hypothesis ended with EOS"
    )
    for ids, hypothesis, limit in zip(ours_ids, hypotheses, limits):
        generated = hf_model.generate(torch.tensor([ids]), max_length=limit + 1)[0].tolist()
        assert generated[0] == BOS_ID and generated[-1] == EOS_ID
        assert generated[1:-1] == hypothesis
    # Batched and padded by the directory's tokenizer, with its own generation settings.
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    generated = hf_model.generate(**batch, max_length=max(limits) + 1).tolist()
    for row, hypothesis, limit in zip(generated, hypotheses, limits):
        row = strip_special(row[1:])
        assert (row if len(hypothesis) + 1 < limit else row[: len(hypothesis)]) == hypothesis
    texts = tokenizer.batch_decode(
        [hypothesis for hypothesis in hypotheses], skip_special_tokens=True
    )
    assert texts == vocab.target.decode(hypotheses)


@pytest.mark.parametrize("tie", ["none", "decoder", "shared_rows"])
def test_pre_norm_without_shared_embeddings_is_refused(tie, vocabularies, tmp_path):
    trained_copy_checkpoint(tmp_path / "model.ckpt", small_config(True, tie), vocabularies["joint"])
    with pytest.raises(
        ExportError, match="Pre-norm models export with tie_embeddings 'all' or 'src_tgt'"
    ):
        export_huggingface(tmp_path / "model.ckpt", tmp_path / "hf")
    assert list(tmp_path.iterdir()) == [tmp_path / "model.ckpt"]


def test_a_wrong_mapping_is_caught_before_anything_is_written(vocabularies, tmp_path, monkeypatch):
    """Without the sin/cos permutation the logits differ: the export stops and leaves nothing."""
    import translate.export.huggingface

    trained_copy_checkpoint(
        tmp_path / "model.ckpt", small_config(False, "all"), vocabularies["joint"]
    )
    monkeypatch.setattr(
        translate.export.huggingface, "residual_permutation", lambda d_model: torch.arange(d_model)
    )
    with pytest.raises(ExportError, match="logits differ from ours"):
        export_huggingface(tmp_path / "model.ckpt", tmp_path / "hf")
    assert list(tmp_path.iterdir()) == [tmp_path / "model.ckpt"]


def test_existing_directory_is_kept_unless_overwrite(vocabularies, tmp_path):
    trained_copy_checkpoint(
        tmp_path / "model.ckpt", small_config(False, "all"), vocabularies["joint"]
    )
    out = tmp_path / "hf"
    out.mkdir()
    out.joinpath("keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        export_huggingface(tmp_path / "model.ckpt", out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    export_huggingface(tmp_path / "model.ckpt", out, overwrite=True)
    assert not out.joinpath("keep.txt").exists() and out.joinpath("config.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "model.ckpt"]


def test_cli(vocabularies, tmp_path, capsys):
    from translate.cli.export import main

    trained_copy_checkpoint(
        tmp_path / "model.ckpt", small_config(True, "all"), vocabularies["joint"]
    )
    assert (
        main(["--checkpoint", str(tmp_path / "model.ckpt"), "--output", str(tmp_path / "hf")]) == 0
    )
    assert "PegasusForConditionalGeneration" in capsys.readouterr().out
    assert (
        main(["--checkpoint", str(tmp_path / "model.ckpt"), "--output", str(tmp_path / "hf")]) == 2
    )
    assert "not empty" in capsys.readouterr().err
    assert (
        main(
            [
                "--checkpoint",
                str(tmp_path / "model.ckpt"),
                "--output",
                str(tmp_path / "hf"),
                "--overwrite",
            ]
        )
        == 0
    )
    assert (
        main(["--checkpoint", str(tmp_path / "absent.ckpt"), "--output", str(tmp_path / "other")])
        == 2
    )
    assert "no such checkpoint file" in capsys.readouterr().err
    assert (
        main(
            [
                "--checkpoint",
                str(tmp_path / "model.ckpt"),
                "--output",
                str(tmp_path / "other"),
                "--quantization",
                "int8",
            ]
        )
        == 2
    )
    assert "--format ctranslate2 only" in capsys.readouterr().err

    trained_copy_checkpoint(
        tmp_path / "decoder.ckpt", small_config(True, "decoder"), vocabularies["joint"]
    )
    assert (
        main(
            ["--checkpoint", str(tmp_path / "decoder.ckpt"), "--output", str(tmp_path / "refused")]
        )
        == 2
    )
    assert "export with tie_embeddings 'all' or 'src_tgt' only" in capsys.readouterr().err
    if __import__("importlib").util.find_spec("ctranslate2"):  # what it refuses, CTranslate2 takes
        argv = [
            "--checkpoint",
            str(tmp_path / "decoder.ckpt"),
            "--output",
            str(tmp_path / "ct2"),
            "--format",
            "ctranslate2",
        ]
        assert main([*argv, "--quantization", "int8"]) == 0
        assert "CTranslate2 model" in capsys.readouterr().out
        assert (tmp_path / "ct2" / "model.bin").is_file()


def test_missing_transformers_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    with pytest.raises(ExportError, match=r"pip install transformers safetensors"):
        export_huggingface(tmp_path / "model.ckpt", tmp_path / "hf")


CT2_CASES = [
    ("post-norm", "all", "joint"),
    ("pre-norm", "shared_rows", "joint"),
    ("post-norm", "decoder", "separate"),
    ("pre-norm", "all", "joint"),
    ("pre-norm", "none", "separate"),
    ("pre-norm", "src_tgt", "joint"),
]


@pytest.mark.numerical
@pytest.mark.parametrize("norm,tie,vocab_kind", CT2_CASES)
def test_ctranslate2_export_gives_our_scores_and_greedy_output(
    norm, tie, vocab_kind, vocabularies, tmp_path
):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from translate.export.ctranslate2 import export_ctranslate2

    vocab = vocabularies[vocab_kind]
    model = trained_copy_checkpoint(
        tmp_path / "model.ckpt", small_config(norm == "pre-norm", tie), vocab, train_steps=120
    )
    out = export_ctranslate2(tmp_path / "model.ckpt", tmp_path / "ct2")
    assert out.joinpath("source.spm").read_bytes() == vocab.source.model_bytes
    assert out.joinpath("target.spm").read_bytes() == vocab.target.model_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2", "model.ckpt"]
    ct2 = ctranslate2.Translator(str(out), device="cpu")

    source_pieces = [vocab.source.pieces(line) for line in SENTENCES]  # EOS is added by the model
    src = pad_batch([ids + [EOS_ID] for ids in vocab.source.encode(SENTENCES)])

    # (a) log-probabilities of given targets (teacher forcing), EOS included
    targets = vocab.target.encode(short_lines("test.de"))
    tgt_in = pad_batch([[BOS_ID] + ids for ids in targets])
    with torch.no_grad():  # the reference, in float64
        log_probs = copy.deepcopy(model).double()(src, tgt_in, PAD_ID).log_softmax(-1)
    scored = ct2.score_batch(
        source_pieces, [[vocab.target.processor.id_to_piece(i) for i in ids] for ids in targets]
    )
    terms = transformer_terms(model.cfg, max(src.shape[1], tgt_in.shape[1]), len(vocab.target))
    for row, ids, result in zip(log_probs, targets, scored):
        expected = row[torch.arange(len(ids) + 1), torch.tensor(ids + [EOS_ID])]
        assert_within_rounding(torch.tensor(result.log_probs), expected, torch.float32, terms)

    # (b) greedy output: our forced EOS at 1.5 * source length + 10 is CTranslate2's
    # max_decoding_length one token earlier.
    hypotheses = greedy_search(model, src)
    assert len({tuple(h) for h in hypotheses}) > 1
    for pieces, hypothesis, length in zip(
        source_pieces, hypotheses, (src != PAD_ID).sum(1).tolist()
    ):
        limit = min(int(length * 1.5 + 10), model.cfg.max_positions)
        result = ct2.translate_batch([pieces], beam_size=1, max_decoding_length=limit - 1)
        assert [
            vocab.target.processor.piece_to_id(p) for p in result[0].hypotheses[0]
        ] == hypothesis
    batched = ct2.translate_batch(source_pieces, beam_size=1, max_decoding_length=20)
    for result, hypothesis in zip(batched, hypotheses):
        assert [vocab.target.processor.piece_to_id(p) for p in result.hypotheses[0]] == hypothesis[
            :20
        ]


def test_ctranslate2_missing_is_a_clear_error(monkeypatch, tmp_path):
    from translate.export.ctranslate2 import export_ctranslate2

    monkeypatch.setitem(__import__("sys").modules, "ctranslate2", None)
    with pytest.raises(ExportError, match="pip install ctranslate2"):
        export_ctranslate2(tmp_path / "model.ckpt", tmp_path / "ct2")


def test_a_checkpoint_converts_to_ctranslate2_once_and_again_when_it_changes(
    vocabularies, tmp_path, monkeypatch
):
    pytest.importorskip("ctranslate2")
    from translate.decode import ctranslate2_model

    checkpoint = tmp_path / "model.ckpt"
    random_checkpoint(checkpoint, vocabularies["joint"], None)
    first = ctranslate2_model.converted_ctranslate2(load_model(checkpoint), tmp_path / "cache")
    assert (first / "model.bin").is_file() and (first / "source.spm").is_file()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.name]  # nothing else left

    calls = []
    write = ctranslate2_model.write_ctranslate2
    monkeypatch.setattr(
        ctranslate2_model, "write_ctranslate2", lambda *a, **k: calls.append(a) or write(*a, **k)
    )
    again = load_model(checkpoint)
    assert ctranslate2_model.converted_ctranslate2(again, tmp_path / "cache") == first
    assert calls == []  # found, not converted again
    random_checkpoint(checkpoint, vocabularies["joint"], [5, 6])  # the checkpoint changed
    changed = ctranslate2_model.converted_ctranslate2(load_model(checkpoint), tmp_path / "cache")
    assert changed != first and len(calls) == 1
    beside = ctranslate2_model.converted_ctranslate2(load_model(checkpoint))  # by default
    assert beside.parent == tmp_path and len(calls) == 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
