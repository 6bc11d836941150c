"""The sharing variants, the direct-path measures, translate-inspect and the tying study's path."""

import copy
import json
import math
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from helpers import (
    REPO,
    SHARING,
    VARIANT_VOCAB,
    all_variants,
    build_variant,
    variant_config,
    variant_id,
)
from search_oracle import (
    greedy_search,
    uncached_greedy,  # the slow reference: whole prefix re-read every step
)
from tolerances import assert_within_rounding, tolerance, transformer_terms, within_rounding

from translate.cli import inspect as inspect_cli
from translate.decode.cache import SearchCache
from translate.decode.ctranslate2_model import ctranslate2_spec
from translate.decode.ctranslate2_search import CTranslate2Error
from translate.decode.loaded_model import load_model
from translate.export.huggingface import huggingface_architecture
from translate.export.output import ExportError
from translate.model.analysis import (
    asymmetry,
    bigram_mrr,
    direct_path,
    parameter_counts,
    shared_modules,
    shared_tensors,
    target_bigrams,
    unigram_scores,
)
from translate.model.transformer import Transformer
from translate.model.tying import auto_mode
from translate.text.vocab import BOS_ID, EOS_ID, PAD_ID
from translate.train.data_module import TranslationDataModule
from translate.train.lightning_module import TranslationModule


# --- the asymmetry measure ----------------------------------------------------------------
def rounding_asymmetry(dim: int, rows: int) -> float:
    """The asymmetry rounding alone gives a float32 product M = E E^T of a `rows` x `dim` E: an entry and its
    mirror sum the same `dim` products, so ||M - M^T|| <= 2 tol trace(M) <= 2 sqrt(rows) tol ||M||."""
    return 2 * math.sqrt(rows) * tolerance(torch.float32, dim)


def slow_asymmetry(m: list[list[float]]) -> float:
    n = len(m)
    diff = sum((m[i][j] - m[j][i]) ** 2 for i in range(n) for j in range(n)) ** 0.5
    return diff / sum(m[i][j] ** 2 for i in range(n) for j in range(n)) ** 0.5


@pytest.mark.numerical
def test_asymmetry_is_zero_for_a_tied_path_and_positive_for_an_untied_pair():
    torch.manual_seed(0)
    embedding, unembedding = torch.randn(30, 8), torch.randn(30, 8)
    assert asymmetry(embedding @ embedding.T) <= rounding_asymmetry(8, 30)
    untied = embedding @ unembedding.T
    assert asymmetry(untied) > 0.5
    squares = 2 * 30 * 30  # the two norms' sums, each in its own order
    assert asymmetry(untied) == within_rounding(
        slow_asymmetry(untied.tolist()), torch.float64, squares
    )
    antisymmetric = untied - untied.T
    assert asymmetry(antisymmetric) == within_rounding(2.0, torch.float64, squares)


@pytest.mark.numerical
def test_direct_path_of_models_each_entry_by_hand():
    model = build_variant(tie_embeddings="all", embedding_adapter=True)
    assert asymmetry(direct_path(model)) <= rounding_asymmetry(16, VARIANT_VOCAB), (
        "the adapter starts as identity"
    )
    with torch.no_grad():
        model.tgt_embed_adapter.weight.add_(0.3 * torch.randn(16, 16))
    m = direct_path(model)
    e, a = (
        model.tgt_embed.weight.detach().double(),
        model.tgt_embed_adapter.weight.detach().double(),
    )
    entries = [(0, 0), (4, 9), (9, 4), (49, 17)]
    # the decoder input of token `row` is A e_row; its logit for `col` is u_col . (A e_row)
    expected = torch.stack(
        [
            sum(e[col, i] * sum(a[i, j] * e[row, j] for j in range(16)) for i in range(16))
            for row, col in entries
        ]
    )
    rows, cols = zip(*entries)
    assert_within_rounding(
        m[list(rows), list(cols)], expected, torch.float32, 32
    )  # two 16-term products in turn
    assert asymmetry(m) > 0.01
    assert asymmetry(direct_path(build_variant(tie_embeddings="decoder"))) <= rounding_asymmetry(
        16, VARIANT_VOCAB
    )
    assert asymmetry(direct_path(build_variant(tie_embeddings="none"))) > 0.5


@pytest.mark.numerical
def test_adapter_starts_as_the_plain_tied_model_and_then_changes_its_output():
    adapted = build_variant(seed=4, embedding_adapter=True).eval()
    plain = build_variant(seed=9).eval()
    plain.load_state_dict({k: v for k, v in adapted.state_dict().items() if "adapter" not in k})
    src, tgt = torch.randint(4, VARIANT_VOCAB, (2, 6)), torch.randint(4, VARIANT_VOCAB, (2, 5))
    with torch.no_grad():
        assert torch.equal(
            adapted(src, tgt, PAD_ID), plain(src, tgt, PAD_ID)
        )  # the identity map is exact
        adapted.tgt_embed_adapter.weight.mul_(0.5)
        changed, before = adapted(src, tgt, PAD_ID), plain(src, tgt, PAD_ID)
    rounding = tolerance(torch.float32, transformer_terms(plain.cfg, 6)) * before.abs().max()
    assert (changed - before).abs().max() > rounding, "changed by no more than rounding could"


# --- the bigram ranking ---------------------------------------------------------------------
def slow_bigram_mrr(scores: torch.Tensor, sentences: list[list[int]]) -> float:
    following: dict[int, Counter] = {}
    for ids in sentences:
        seq = [BOS_ID, *ids, EOS_ID]
        for a, b in zip(seq, seq[1:]):
            following.setdefault(a, Counter())[b] += 1
    total, weight = 0.0, 0
    for a, counter in following.items():
        best = max(sorted(counter), key=lambda b: counter[b])  # most frequent, smallest id on ties
        row = scores[a] if scores.shape[0] > 1 else scores[0]
        candidates = [b for b in range(scores.shape[1]) if b not in (PAD_ID, BOS_ID)]
        rank = 1 + sum(1 for b in candidates if row[b] > row[best])
        rank += sum(0.5 for b in candidates if b != best and row[b] == row[best])
        occurrences = sum(counter.values())
        total += occurrences / rank
        weight += occurrences
    return total / weight


@pytest.mark.numerical
def test_bigram_mrr_equals_a_loop_reference_and_rewards_the_true_order():
    torch.manual_seed(3)
    vocab = 12
    sentences = [
        [int(t) for t in torch.randint(4, vocab, (int(n),))] for n in torch.randint(1, 9, (40,))
    ]
    bigrams = target_bigrams(sentences, vocab)
    scores = torch.randn(vocab, vocab)
    # float64 sums over at most `vocab` previous tokens (and a division), in different orders; ranks are exact
    terms = 2 * (vocab + 2)
    assert bigram_mrr(scores, bigrams) == within_rounding(
        slow_bigram_mrr(scores, sentences), torch.float64, terms
    )
    unigram = unigram_scores(bigrams)
    assert bigram_mrr(unigram, bigrams) == within_rounding(
        slow_bigram_mrr(unigram, sentences), torch.float64, terms
    )

    ordered = [[4, 5, 6, 7]] * 10  # every token has one successor: a perfect M ranks it first
    bigrams = target_bigrams(ordered, 8)
    perfect = torch.zeros(8, 8)
    for a, b in [(BOS_ID, 4), (4, 5), (5, 6), (6, 7), (7, EOS_ID)]:
        perfect[a, b] = 1.0
    assert bigram_mrr(perfect, bigrams) == 1.0  # sums of whole counts: exact
    assert bigram_mrr(perfect.T, bigrams) < 0.5, "the reversed order must rank worse"
    assert bigram_mrr(torch.zeros(8, 8), bigrams) == within_rounding(
        1 / 3.5, torch.float64, 8 + 3
    ), "ties are not wins"


def test_bigrams_refuse_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match="outside the vocabulary of 8"):
        target_bigrams([[4, 9]], 8)


# --- parameter counts and storage -------------------------------------------------------------
def expected_parameters(changes: dict, vocab: int = VARIANT_VOCAB) -> int:
    """Counted by hand from what each option claims to share, not from the module tree."""
    cfg = variant_config(**changes)
    d, f, le, ld = cfg.d_model, cfg.ffn_dim, cfg.encoder_layers, cfg.decoder_layers
    attention, ffn, layer_norm = 4 * (d * d + d), d * f + f + f * d + d, 2 * d
    albert, enc_dec = cfg.share_layer_attention, cfg.share_encoder_decoder_layers
    paired = (
        min(le, ld) if enc_dec else 0
    )  # decoder layers whose self-attention and FFN are the encoder's
    encoder_attention = min(le, 1) if albert else le
    if albert and paired:
        decoder_self = 0  # the decoder's one self-attention is the encoder's one
    elif albert:
        decoder_self = min(ld, 1)
    else:
        decoder_self = ld - paired
    decoder_cross = min(ld, 1) if albert else ld
    embeddings = {"none": 3, "decoder": 2, "src_tgt": 2, "all": 1}[cfg.tie_embeddings] * vocab * d
    return (
        attention * (encoder_attention + decoder_self + decoder_cross)
        + ffn * (le + ld - paired)
        + layer_norm * (2 * le + 3 * ld + (2 if cfg.norm_first else 0))
        + embeddings
        + (d * d if cfg.embedding_adapter else 0)
    )


@pytest.mark.parametrize("changes", all_variants(), ids=variant_id)
def test_variants_have_the_parameter_count_of_the_formula(changes):
    model = build_variant(**changes)
    counts = parameter_counts(model)
    assert counts["total"] == expected_parameters(changes)
    assert sum(p.numel() for p in model.parameters()) == expected_parameters(changes)
    assert counts["adapters"] == (16 * 16 if changes["embedding_adapter"] else 0)


def ptr(model: Transformer, name: str) -> int:
    return dict(model.named_parameters(remove_duplicate=False))[name].data_ptr()


def test_shared_attention_is_one_tensor_per_stack():
    model = build_variant(share_layer_attention=True)
    for name in ("q_proj.weight", "out_proj.bias"):
        assert ptr(model, f"encoder_layers.0.self_attn.{name}") == ptr(
            model, f"encoder_layers.1.self_attn.{name}"
        )
        decoder = {ptr(model, f"decoder_layers.{i}.self_attn.{name}") for i in range(3)}
        cross = {ptr(model, f"decoder_layers.{i}.cross_attn.{name}") for i in range(3)}
        assert len(decoder) == 1 and len(cross) == 1 and decoder != cross
        assert ptr(model, f"encoder_layers.0.self_attn.{name}") not in decoder
    assert ptr(model, "encoder_layers.0.ffn.linear1.weight") != ptr(
        model, "encoder_layers.1.ffn.linear1.weight"
    )
    assert ptr(model, "decoder_layers.0.self_block.norm.weight") != ptr(
        model, "decoder_layers.1.self_block.norm.weight"
    )


def test_encoder_decoder_sharing_pairs_layer_i_with_layer_i():
    model = build_variant(share_encoder_decoder_layers=True)  # 2 encoder, 3 decoder layers
    for i in range(2):
        for name in ("self_attn.k_proj.weight", "ffn.linear1.weight", "ffn.linear2.bias"):
            assert ptr(model, f"encoder_layers.{i}.{name}") == ptr(
                model, f"decoder_layers.{i}.{name}"
            )
        assert ptr(model, f"encoder_layers.{i}.attn_block.norm.weight") != ptr(
            model, f"decoder_layers.{i}.self_block.norm.weight"
        )
    assert ptr(model, "encoder_layers.0.self_attn.q_proj.weight") != ptr(
        model, "encoder_layers.1.self_attn.q_proj.weight"
    )
    assert ptr(model, "decoder_layers.2.ffn.linear1.weight") not in {
        ptr(model, f"encoder_layers.{i}.ffn.linear1.weight") for i in range(2)
    }


@pytest.mark.parametrize(
    "changes", [c for c in all_variants() if c["tie_embeddings"] == "all"], ids=variant_id
)
def test_sharing_survives_loading_and_an_optimizer_step(changes):
    model = build_variant(seed=1, **changes)
    groups = sorted(map(sorted, shared_tensors(model)))
    reloaded = build_variant(seed=2, **changes)
    reloaded.load_state_dict(model.state_dict(), strict=True)
    assert sorted(map(sorted, shared_tensors(reloaded))) == groups
    optimizer = torch.optim.Adam(reloaded.parameters(), lr=0.05)
    reloaded(
        torch.randint(4, VARIANT_VOCAB, (2, 6)),
        torch.randint(4, VARIANT_VOCAB, (2, 5)),
        pad_id=PAD_ID,
    ).sum().backward()
    optimizer.step()
    assert sorted(map(sorted, shared_tensors(reloaded))) == groups
    weights = dict(reloaded.named_parameters(remove_duplicate=False))
    for names in groups:
        assert all(torch.equal(weights[names[0]], weights[n]) for n in names)


# --- decoding with the variants -----------------------------------------------------------------
def perturbed(changes: dict) -> Transformer:
    model = build_variant(seed=5, **changes).eval()
    if model.tgt_embed_adapter is not None:
        with torch.no_grad():
            model.tgt_embed_adapter.weight.add_(0.2 * torch.randn(16, 16))
    return model


@pytest.mark.numerical
@pytest.mark.parametrize("changes", all_variants(), ids=variant_id)
def test_cached_decoding_equals_uncached_with_the_variants(changes):
    model = perturbed(changes)
    src, tgt = torch.randint(4, VARIANT_VOCAB, (2, 6)), torch.randint(4, VARIANT_VOCAB, (2, 5))
    reference = copy.deepcopy(model).double()  # full decoding in float64, ties and sharing kept
    with torch.no_grad():
        mask = model.source_mask(src, PAD_ID)
        memory = model.encode(src, mask)
        full = reference.decode(tgt, reference.encode(src, mask), mask)
        cache = SearchCache.for_batch(model, memory, mask, src.shape[0])
        steps = [model.decode(tgt[:, i : i + 1], memory, mask, cache, offset=i) for i in range(5)]
        assert_within_rounding(
            torch.cat(steps, dim=1), full, torch.float32, transformer_terms(model.cfg, 6)
        )

        src = torch.randint(4, VARIANT_VOCAB, (3, 5))
        assert greedy_search(model, src, max_len_a=0.0, max_len_b=7) == uncached_greedy(
            model, src, 0.0, 7
        )


# --- export refuses what it cannot express --------------------------------------------------------
@pytest.mark.parametrize("option", SHARING)
def test_export_refuses_the_sharing_variants(option):
    model = build_variant(**{option: True})
    with pytest.raises(ExportError, match=option):
        huggingface_architecture(model)
    with pytest.raises(CTranslate2Error, match=option):
        ctranslate2_spec(model, None)


# --- translate-inspect --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    fixture = REPO / "tests" / "fixtures" / "libreoffice_small"
    cache = tmp_path_factory.mktemp("vocab")
    return TranslationDataModule(
        corpus_dir=str(fixture), vocab_size=300, cache_dir=str(cache)
    ).vocab


def save_checkpoint(path: Path, vocab, **changes) -> TranslationModule:
    torch.manual_seed(0)
    module = TranslationModule(vocab, variant_config(**changes))
    module.run_config = "data:\n  src_lang: en\n  tgt_lang: de\n"
    module.target_tokens = [4, 5, 6, 9]
    state = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(state)
    torch.save(state, path)
    return module


def storage_groups_in_file(path: Path) -> set[frozenset[str]]:
    """Ties as torch.save stored them: state-dict entries that are one storage in the file."""
    state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    groups: dict[tuple, set[str]] = {}
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        groups.setdefault(key, set()).add(name.removeprefix("model."))
    return {frozenset(names) for names in groups.values() if len(names) > 1}


EMBEDDING_TIES = {
    "none": set(),
    "decoder": {frozenset({"tgt_embed.weight", "output.weight"})},
    "src_tgt": {frozenset({"src_embed.weight", "tgt_embed.weight"})},
    "all": {frozenset({"src_embed.weight", "tgt_embed.weight", "output.weight"})},
}


@pytest.mark.numerical
@pytest.mark.parametrize("tie", sorted(EMBEDDING_TIES))
def test_inspect_reports_the_embedding_ties_of_each_mode(tie, vocab, tmp_path, capsys):
    path = tmp_path / f"{tie}.ckpt"
    save_checkpoint(path, vocab, tie_embeddings=tie)
    assert inspect_cli.main(["--checkpoint", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    reported = {frozenset(names) for names in info["shared_tensors"]}
    assert reported == EMBEDDING_TIES[tie]
    assert reported == storage_groups_in_file(path)
    assert info["parameters"]["total"] == expected_parameters({"tie_embeddings": tie}, vocab=300)
    assert (
        info["parameters"]["in_embeddings"]
        == {"none": 3, "decoder": 2, "src_tgt": 2, "all": 1}[tie] * 300 * 16
    )
    assert info["vocabulary"]["tokens_used"]["de"]["used"] == 4
    assert info["vocabulary"]["source_size"] == 300
    assert info["model_config"]["tie_embeddings"] == tie
    assert (info["direct_path_asymmetry"] <= rounding_asymmetry(16, 300)) == (
        tie in ("decoder", "all")
    )


def test_inspect_reports_shared_layers_in_text_and_json(vocab, tmp_path, capsys):
    path = tmp_path / "shared.ckpt"
    save_checkpoint(
        path,
        vocab,
        share_layer_attention=True,
        share_encoder_decoder_layers=True,
        embedding_adapter=True,
    )
    loaded = load_model(path)
    assert loaded.model.decoder_layers[2].self_attn is loaded.model.encoder_layers[0].self_attn
    assert inspect_cli.main(["--checkpoint", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {frozenset(n) for n in info["shared_tensors"]} == storage_groups_in_file(path)
    self_attention = {f"encoder_layers.{i}.self_attn" for i in range(2)} | {
        f"decoder_layers.{i}.self_attn" for i in range(3)
    }
    assert self_attention in [set(group) for group in info["shared_modules"]]
    assert {f"decoder_layers.{i}.cross_attn" for i in range(3)} in [
        set(g) for g in info["shared_modules"]
    ]
    assert {"encoder_layers.1.ffn", "decoder_layers.1.ffn"} in [
        set(g) for g in info["shared_modules"]
    ]
    assert info["parameters"]["adapters"] == 16 * 16

    source = tmp_path / "source.en"
    source.write_text("Click OK.\nClick Cancel.\n", encoding="utf-8")
    assert inspect_cli.main(["--checkpoint", str(path), "--source", str(source)]) == 0
    text = capsys.readouterr().out
    assert "src_embed = tgt_embed = output" in text
    assert "encoder_layers.0.ffn = decoder_layers.0.ffn" in text
    assert "tokens used by de: 4 of 300 (recorded training targets)" in text
    used = len({i for ids in vocab.source.encode(["Click OK.", "Click Cancel."]) for i in ids})
    assert f"tokens used by en: {used} of 300 ({source})" in text
    assert "share_layer_attention: True" in text


def test_inspect_names_a_missing_checkpoint(tmp_path, capsys):
    assert inspect_cli.main(["--checkpoint", str(tmp_path / "absent.ckpt")]) == 2
    assert "absent.ckpt: no such checkpoint file" in capsys.readouterr().err


def test_shared_modules_lists_a_tensor_tie_outside_whole_modules():
    model = build_variant(tie_embeddings="all")
    assert shared_modules(model) == [["src_embed", "tgt_embed", "output"]]
    assert shared_modules(build_variant(tie_embeddings="none")) == []


# --- the study --------------------------------------------------------------------------------
@pytest.mark.numerical
@pytest.mark.slow  # seven trainings
def test_tying_study_smoke_writes_the_table_and_plot(tmp_path, bundled_corpus_cache):
    out = tmp_path / "study"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "studies" / "tying_study.py"),
            "--smoke",
            "--out",
            str(out),
            "--test-sentences",
            "12",
            "--updates",
            "3",
            "--cache-dir",
            str(bundled_corpus_cache),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = (out / "results.md").read_text()
    rows = [
        line
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| run")
    ]
    names = [
        "none",
        "decoder",
        "src_tgt",
        "all",
        "all+shared-attention",
        "all+shared-enc-dec",
        "all+adapter",
    ]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == names
    cells = [row.split(" | ") for row in rows]
    assert cells[0][6] == cells[0][8] == "–"  # no test of the baseline against itself
    assert all("(p " in row[6] and "(p " in row[8] for row in cells[1:])  # the others against it
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in table
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "results.json").read_text())
    runs = {run["name"]: run for run in summary["runs"]}
    assert runs["all"]["embedding_parameters"] * 3 == runs["none"]["embedding_parameters"]
    assert (
        runs["all+shared-attention"]["parameters"]
        < runs["all"]["parameters"]
        < runs["all+adapter"]["parameters"]
    )
    rounding = rounding_asymmetry(
        32, runs["all"]["embedding_parameters"] // 32
    )  # the smoke scale's d_model: 32
    assert runs["all"]["asymmetry"] <= rounding < runs["none"]["asymmetry"]
    assert all(
        run["updates"] == 3 and run["test_sentences"] == 12 for run in runs.values()
    )  # --updates
    for name in names:
        assert (out / name / "checkpoints" / "last.ckpt").is_file()
        assert len((out / name / "test.hyp").read_text().splitlines()) == 12


@pytest.mark.slow  # twelve trainings
def test_distant_pair_study_smoke_writes_the_table_and_plot(tmp_path):
    out = tmp_path / "distant"
    result_args = [
        sys.executable,
        str(REPO / "scripts" / "studies" / "distant_study.py"),
        "--smoke",
        "--out",
        str(out),
        "--seeds",
        "1",
        "2",
        "--corpus",
        str(REPO / "tests" / "fixtures" / "libreoffice_multiway"),
        "--langs",
        "de",
        "ja",
        "--cells",
        "none",
        "all",
        "separate-decoder",
        "src_tgt",
        "multilingual",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    result = subprocess.run(result_args, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads((out / "results.json").read_text())
    assert sorted({(r["lang"], r["cell"]) for r in rows}) == [
        (lang, cell)
        for lang in ("de", "ja")
        for cell in ("all", "multilingual", "none", "separate-decoder", "src_tgt")
    ]
    assert len(rows) == 20, "two seeds of every cell"
    by = {(r["lang"], r["cell"], r["seed"]): r for r in rows}
    assert (
        by[("ja", "all", 1)]["foreign_share"] > by[("ja", "separate-decoder", 1)]["foreign_share"]
    )
    assert by[("ja", "all", 1)]["bleu_signature"].split("|tok:")[1].startswith("ja-mecab")
    assert by[("de", "multilingual", 1)]["updates"] == 2 * by[("de", "all", 1)]["updates"]
    table = (out / "results.md").read_text()
    assert "| ja | separate-decoder | 2 |" in table and " ± " in table
    assert "| ja | separate-decoder | 1, 2 | " in table, "the remedy against none and all"
    for lang in ("de", "ja"):  # auto's row: the bilingual runs' shared mass and the rule's tie
        (mass,) = {
            r["shared_mass"] for r in rows if r["lang"] == lang and r["cell"] in ("none", "all")
        }
        assert f"| {lang} | {mass:.3f} | {auto_mode(mass)} | 1, 2 | " in table
    # the pooled interval and test: both seeds' outputs scored as one corpus
    from sacrebleu.metrics import BLEU

    references = (out / "data" / "test.ja").read_text(encoding="utf-8").splitlines()[:40] * 2
    pooled = [
        line
        for seed in (1, 2)
        for line in (out / f"all-ja-seed{seed}" / "test.ja.hyp").read_text("utf-8").splitlines()
    ]
    expected = BLEU(tokenize="ja-mecab").corpus_score(pooled, [references]).score
    row = next(line for line in table.splitlines() if line.startswith("| ja | all |")).split(" | ")
    assert row[5].startswith(f"{expected:.2f} [") and "(p " in row[6]
    none = next(line for line in table.splitlines() if line.startswith("| ja | none |"))
    assert none.split(" | ")[6] == "–"
    # the tie's gain into ja against its gain into de, on both seeds pooled
    untied = [
        line
        for seed in (1, 2)
        for line in (out / f"none-ja-seed{seed}" / "test.ja.hyp").read_text("utf-8").splitlines()
    ]
    gain = expected - BLEU(tokenize="ja-mecab").corpus_score(untied, [references]).score
    row = next(line for line in table.splitlines() if line.startswith("| ja | 1, 2 | BLEU |"))
    assert row.split(" | ")[3] == f"{gain:+.2f}" and ", p " in row
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a run that stopped at its time cap before its updates is not counted
    cut = out / "none-de-seed2" / "result.json"
    result = json.loads(cut.read_text())
    for stopped in result["rows"]:
        stopped["updates"] = 1
    cut.write_text(json.dumps(result))
    again = subprocess.run(
        [*result_args, "--resume", "--report-only"], cwd=REPO, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "none-de-seed2 stopped at 1 of 2 updates (trainer.max_time): not counted" in again.stderr
    runs = {r["run"] for r in json.loads((out / "results.json").read_text())}
    assert "none-de-seed2" not in runs and "none-de-seed1" in runs
    # the runs' results and outputs alone, copied to another directory, make the same report
    # there with another cache
    moved = tmp_path / "moved"
    for run in runs:
        (moved / run).mkdir(parents=True)
        for name in ["result.json", *(f"test.{lang}.hyp" for lang in ("de", "ja"))]:
            if (out / run / name).is_file():
                shutil.copy(out / run / name, moved / run / name)
    there = [*result_args[: result_args.index("--out") + 1], str(moved)]
    there += result_args[result_args.index("--out") + 2 : result_args.index("--cache-dir")]
    there += ["--cache-dir", str(tmp_path / "another-cache")]
    copied = subprocess.run(
        [*there, "--resume", "--report-only"], cwd=REPO, capture_output=True, text=True
    )
    assert copied.returncode == 0, copied.stderr[-3000:]
    assert (moved / "results.md").read_text() == (out / "results.md").read_text()


# --- shared_rows and tie_embeddings auto ------------------------------------------------------
TARGET_ONLY = [5, 9, 17, 30, 44]


def shared_rows_model(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(
        variant_config(tie_embeddings="shared_rows"),
        VARIANT_VOCAB,
        VARIANT_VOCAB,
        True,
        target_only_ids=TARGET_ONLY,
    )
    with torch.no_grad():  # rows apart that differ from the shared ones they replace
        for module in (model.tgt_embed, model.output):
            module.parametrizations["weight"][0].rows.normal_(0.0, 1.0)
    return model.eval()


def untied_equivalent(model: Transformer) -> Transformer:
    """An untied model holding, row by row, the matrices `shared_rows` means: the encoder's the
    shared one, the decoder input's and the output's the shared one with the target-only rows
    replaced by their own (written one row at a time, not through `TargetRows`)."""
    plain = Transformer(
        variant_config(tie_embeddings="none"), VARIANT_VOCAB, VARIANT_VOCAB, True
    ).eval()
    state = {
        name: value for name, value in model.state_dict().items() if "parametrizations" not in name
    }
    shared = model.src_embed.weight.detach()
    state["src_embed.weight"] = shared.clone()
    for name, module in (("tgt_embed.weight", model.tgt_embed), ("output.weight", model.output)):
        own = module.parametrizations["weight"][0].rows.detach()
        matrix = shared.clone()
        for k, piece in enumerate(TARGET_ONLY):
            matrix[piece] = own[k]
        state[name] = matrix
    plain.load_state_dict(state, strict=True)
    return plain


@pytest.mark.numerical
def test_shared_rows_computes_what_its_untied_equivalent_computes():
    model = shared_rows_model()
    plain = untied_equivalent(model)
    src = torch.randint(4, VARIANT_VOCAB, (3, 7))
    tgt = torch.tensor(
        [TARGET_ONLY + [6, 7], [5, 6, 9, 10, 11, 30, 12], [20, 21, 44, 22, 23, 24, 25]]
    )
    expected = plain(src, tgt, PAD_ID)
    assert torch.equal(model(src, tgt, PAD_ID), expected)
    encoder_rows = model.src_embed.weight.detach().clone()
    model.fold_target_rows()  # inference's plain matrices: the same values, the encoder's kept
    assert torch.equal(model(src, tgt, PAD_ID), expected)
    assert torch.equal(model.src_embed.weight, encoder_rows)
    assert model.tgt_embed.weight.data_ptr() != model.src_embed.weight.data_ptr()


def test_shared_rows_keeps_one_shared_matrix_through_loading_and_a_step():
    model = shared_rows_model()
    state = model.state_dict()
    assert torch.equal(Transformer.target_only_ids_of(state), torch.tensor(TARGET_ONLY))
    reloaded = Transformer(
        model.cfg,
        VARIANT_VOCAB,
        VARIANT_VOCAB,
        True,
        target_only_ids=Transformer.target_only_ids_of(state),
    )
    reloaded.load_state_dict(state, strict=True)
    shared = reloaded.src_embed.weight
    for module in (reloaded.tgt_embed, reloaded.output):
        assert module.parametrizations["weight"].original is shared
    optimizer = torch.optim.Adam(reloaded.parameters(), lr=0.1)
    src = torch.tensor([[4, 6, 7, 8, 3]])  # no target-only piece on the source side
    tgt = torch.tensor([[2, 5, 9, 6]])
    reloaded.train()(src, tgt, PAD_ID).logsumexp(-1).sum().backward()
    # target-only pieces reach the shared matrix only through the encoder, which never read them
    assert torch.count_nonzero(shared.grad[TARGET_ONLY]) == 0
    assert torch.count_nonzero(shared.grad[[4, 6, 7, 8]]) > 0
    for module in (reloaded.tgt_embed, reloaded.output):
        assert torch.count_nonzero(module.parametrizations["weight"][0].rows.grad) > 0
    optimizer.step()
    assert reloaded.tgt_embed.parametrizations["weight"].original is reloaded.src_embed.weight
    assert (
        parameter_counts(reloaded)["in_embeddings"] == (VARIANT_VOCAB + 2 * len(TARGET_ONLY)) * 16
    )


def test_shared_rows_needs_its_target_only_pieces():
    with pytest.raises(ValueError, match="needs the ids of the pieces only the target side uses"):
        Transformer(
            variant_config(tie_embeddings="shared_rows"), VARIANT_VOCAB, VARIANT_VOCAB, True
        )
    with pytest.raises(ValueError, match="must be resolved"):
        Transformer(variant_config(tie_embeddings="auto"), VARIANT_VOCAB, VARIANT_VOCAB, True)


def test_piece_use_against_counting_by_hand():
    from translate.text.vocab_overlap import PieceClass, PieceUse

    pairs = [([4, 5, 5, 6], [6, 7, 7, 7]), ([5, 8], [9, 6, 3]), ([1, 4], [4, 2])]
    use = PieceUse.count(pairs, 12, ignored=[1, 2, 3])
    source = Counter(i for s, _ in pairs for i in s if i > 3)
    target = Counter(i for _, t in pairs for i in t if i > 3)
    s_total, t_total = sum(source.values()), sum(target.values())
    by_hand = sum(min(source[i] / s_total, target[i] / t_total) for i in range(12))
    assert math.isclose(use.shared_mass(), by_hand, rel_tol=1e-12)
    assert use.target_only_ids().tolist() == [7, 9]
    assert [PieceClass(c) for c in use.classes()[4:10]] == [
        PieceClass.BOTH,
        PieceClass.SOURCE_ONLY,
        PieceClass.BOTH,
        PieceClass.TARGET_ONLY,
        PieceClass.SOURCE_ONLY,
        PieceClass.TARGET_ONLY,
    ]
    source_share, target_share = use.mass_on(PieceClass.BOTH)
    assert math.isclose(source_share, (source[4] + source[6]) / s_total)
    assert math.isclose(target_share, (target[4] + target[6]) / t_total)


def other_script(line: str) -> str:
    """The line's letters written in a script no Latin text uses (CJK ideographs, one per
    letter), without spaces, as Chinese and Japanese are written; digits and punctuation kept."""
    return "".join(chr(0x4E00 + ord(c)) if c.isalpha() else c for c in line if c != " ")


@pytest.mark.parametrize("script", ["latin", "disjoint"])
def test_auto_ties_three_ways_where_the_sides_share_pieces_and_not_where_they_do_not(script):
    from translate.model.tying import BELOW_THRESHOLD, SHARED_MASS_THRESHOLD, choose_tie
    from translate.text.vocab import train_sentencepiece
    from translate.text.vocab_overlap import PieceUse, ignored_pieces

    fixture = REPO / "tests" / "fixtures" / "libreoffice_small"
    english = fixture.joinpath("train.en").read_text(encoding="utf-8").splitlines()
    german = fixture.joinpath("train.de").read_text(encoding="utf-8").splitlines()
    target = german if script == "latin" else [other_script(line) for line in german]
    joint = train_sentencepiece(english + target, 400)
    use = PieceUse.count(
        zip(joint.encode(english), joint.encode(target)), len(joint), ignored_pieces(joint)
    )
    choice = choose_tie("auto", use)
    assert choice.shared_mass == use.shared_mass()
    if script == "latin":
        assert choice.shared_mass >= SHARED_MASS_THRESHOLD and choice.mode == "all"
    else:
        assert choice.shared_mass < SHARED_MASS_THRESHOLD and choice.mode == BELOW_THRESHOLD
    assert f"{choice.shared_mass:.3f}" in choice.describe()
    assert choose_tie("auto", None).mode == "none"  # separate vocabularies
    assert choose_tie("decoder", use).mode == "decoder"


def test_self_preference_against_a_loop_and_for_a_tied_path():
    from translate.model.analysis import self_preference

    torch.manual_seed(3)
    matrix = torch.randn(30, 30)
    matrix[[2, 7, 11], [2, 7, 11]] = 100.0  # three rows that prefer themselves for certain
    by_loop = sum(max(range(30), key=lambda b: matrix[a, b]) == a for a in range(30)) / 30
    assert self_preference(matrix) == by_loop
    rows = torch.tensor([2, 7, 11, 12])
    chosen = sum(max(range(30), key=lambda b: matrix[a, b]) == a for a in rows.tolist()) / 4
    assert self_preference(matrix, rows) == chosen
    # a tied direct path W_E W_E^T with rows of one length: every token prefers itself
    embedding = torch.nn.functional.normalize(torch.randn(40, 16), dim=1)
    assert self_preference(embedding @ embedding.T) == 1.0
