"""The CTranslate2 engine (`--engine ctranslate2`): the same translations as the PyTorch search
where the settings map one to one (greedy search; beam search at alpha 0), every protected span
written once (a sentence CTranslate2 does not keep them in is searched by PyTorch), and the
choice of engine said with its reason."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("ctranslate2")

from helpers import (  # noqa: E402
    fixture_lines,
    joint_vocab,
    protecting_model,
    random_tied_checkpoint,
    small_config,
    trained_copy_checkpoint,
    variant_config,
)

from translate.cli.translate import main as translate_cli  # noqa: E402
from translate.decode import ctranslate2_search, pipeline  # noqa: E402
from translate.decode.ctranslate2_model import converted_ctranslate2  # noqa: E402
from translate.decode.ctranslate2_search import CTranslate2Search, load_translator  # noqa: E402
from translate.decode.engine import choose_engine, load_searching  # noqa: E402
from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.settings import Budget, EngineChoice, SearchSettings  # noqa: E402
from translate.decode.steps import output_limits  # noqa: E402
from translate.errors import UsageError  # noqa: E402
from translate.model.checkpoint import write_checkpoint  # noqa: E402
from translate.model.transformer import Transformer  # noqa: E402

LINES = fixture_lines("test.en")[:40]


@pytest.fixture(scope="module")
def copy_model(tmp_path_factory):
    """A model trained a little on a copy task: outputs that vary and end at their own lengths."""
    path = tmp_path_factory.mktemp("copy") / "model.ckpt"
    trained_copy_checkpoint(path, small_config(True, "all"), joint_vocab(), train_steps=60)
    return path


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    """A random model: outputs that repeat a token to their length limits."""
    return random_tied_checkpoint(tmp_path_factory.mktemp("random") / "model.ckpt", 32, 1)


def both_engines(path, settings, lines=LINES, cache=None):
    """The PyTorch search's translations of `lines`, CTranslate2's, and its `Counts`."""
    loaded = load_model(path)
    ours = pipeline.translate_nbest(loaded, lines, settings)
    why = choose_engine(loaded, EngineChoice("ctranslate2", cache_dir=cache), "cpu")
    assert why.startswith("CTranslate2 (float32")
    theirs = pipeline.translate_nbest(loaded, lines, settings)
    return ours, theirs, loaded.ctranslate2.counts


@pytest.mark.numerical
@pytest.mark.parametrize("model", ["copy_model", "random_model"])
def test_greedy_search_through_ctranslate2_is_the_pytorch_search(model, request, tmp_path):
    ours, theirs, counts = both_engines(
        request.getfixturevalue(model), SearchSettings(beam=1), cache=tmp_path
    )
    assert [t[0].text for t in theirs] == [t[0].text for t in ours]
    # each sentence once (a long line is searched in segments)
    assert counts.answered + counts.handed_back >= len(LINES) and counts.answered
    if model == "copy_model":
        assert len({t[0].text for t in ours}) > 10  # outputs that differ: a real comparison
    else:  # every line cut at its length limit, as ours ends it
        assert counts.handed_back == 0


@pytest.mark.numerical
def test_beam_search_at_alpha_0_is_the_pytorch_search(copy_model, tmp_path):
    settings = SearchSettings(beam=4, length_penalty=0.0)
    ours, theirs, counts = both_engines(copy_model, settings, cache=tmp_path)
    assert [[e.text for e in t] for t in theirs] == [[e.text for e in t] for t in ours]
    for mine, other in zip(ours, theirs):
        # CTranslate2 normalizes over the tokens it may write (not PAD, not BOS), ours over all:
        # its log-probabilities are ours or higher (float32 rounding aside).
        for a, b in zip(mine, other):
            assert a.log_prob - 1e-4 <= b.log_prob <= 0
    assert counts.answered == len(LINES)


def test_lines_whose_spans_ctranslate2_does_not_keep_are_repaired_or_searched_by_pytorch(tmp_path):
    lines = ["Click button 36.", "Rows 1 to 12 of 40.", "Open it.", "Set it to 3.5 cm."]
    ours, theirs, counts = both_engines(protecting_model(tmp_path), SearchSettings(beam=1), lines)
    assert [t[0].text for t in theirs] == [t[0].text for t in ours]
    # a random model does not write the sentinels on its own: repaired, or searched by PyTorch
    assert counts.repaired + counts.handed_back >= 3, counts


class FakeTranslator:
    """`translate_batch` answering each source by its first piece: the first search with the
    hypotheses (pieces, log-prob divided by length ** length_penalty) of `answers`, the search on
    from a longer prefix greedily by `prefers` (its pieces in the order of preference, the first
    the call does not suppress, else the vocabulary's first it does not; stopping at the call's
    end tokens or its maximum length); `score_batch` scores every token -0.5. It records the
    calls' keyword arguments."""

    def __init__(self, vocab, answers, prefers):
        self.vocab, self.calls = vocab, []
        self.answers, self.prefers = answers, prefers

    def translate_batch(self, sources, target_prefix, **options):
        self.calls.append(options)
        if len(target_prefix[0]) == 1:
            return [
                SimpleNamespace(
                    hypotheses=[h for h, _ in self.answers[s[0]]],
                    # normalized as CTranslate2 does at its own length penalty
                    scores=[
                        lp / len(h) ** options["length_penalty"] for h, lp in self.answers[s[0]]
                    ],
                )
                for s in sources
            ]
        return [self._greedy(s[0], prefix, options) for s, prefix in zip(sources, target_prefix)]

    def _greedy(self, first: str, prefix: list[str], options: dict) -> SimpleNamespace:
        suppressed = {piece for [piece] in options.get("suppress_sequences") or []}
        ends = options.get("end_token") or ["</s>"]
        pieces = [self.vocab.target.processor.id_to_piece(i) for i in range(len(self.vocab.target))]
        written = list(prefix[1:])
        while len(written) < options["max_decoding_length"]:
            allowed = [p for p in self.prefers[first] + pieces if p not in suppressed]
            written.append(allowed[0])
            if allowed[0] in ends:
                break
        return SimpleNamespace(hypotheses=[written], scores=[-1.0])

    def score_batch(self, sources, targets):
        return [SimpleNamespace(log_probs=[-0.5] * len(target)) for target in targets]


@pytest.mark.parametrize("repairs", [ctranslate2_search.REPAIRS, 1])
def test_the_best_hypothesis_that_keeps_each_sentinel_once_is_taken_or_repaired(
    tmp_path, monkeypatch, repairs
):
    monkeypatch.setattr(ctranslate2_search, "REPAIRS", repairs)
    loaded = load_model(protecting_model(tmp_path))
    vocab = loaded.vocab
    plan = pipeline.search_plan(
        loaded, SearchSettings(beam=3, length_penalty=0.0), pipeline.target_tags_for(loaded, None)
    )
    one, two = "⦅1⦆", "⦅2⦆"
    x, y = (vocab.target.processor.id_to_piece(i) for i in (100, 101))
    a, b, c, d = (vocab.source.processor.id_to_piece(i) for i in (100, 101, 102, 103))
    fake = FakeTranslator(
        vocab,
        {
            a: [([x, one, one, "</s>"], -1.0), ([y, one, "</s>"], -2.0)],  # repeats
            b: [([x, "</s>"], -1.0), ([y, "</s>"], -2.0)],  # drops it: repaired
            c: [([x] * 30 + [one], -0.5), ([y, one, "</s>"], -2.0)],  # best runs past its limit
            d: [([x, "</s>"], -1.0)],  # drops it, and writes it only when nothing else may follow
        },
        # after [x]: the end first (forbidden while ⦅1⦆ is owed), ⦅2⦆ (not owed), then ⦅1⦆
        {b: ["</s>", two, one], d: ["</s>", two, x]},
    )
    engine = CTranslate2Search(fake, vocab, loaded.model.cfg.max_positions)
    source = vocab.source.processor
    sources = [[source.piece_to_id(p) for p in (word, one, "</s>")] for word in (a, b, c, d)]
    answers, back = engine.search(["a", "b", "c", "d"], sources, [plan] * 4, [None] * 4)
    ids = {piece: vocab.target.processor.piece_to_id(piece) for piece in (x, y, one)}
    [limit] = output_limits([3], [plan], loaded.model.cfg.max_positions).tolist()
    # a: its best repeats the sentinel; c: its best, cut at its limit, loses it; b: on from [x]
    # to ⦅1⦆, then to the end, scored again (3 tokens with EOS); d: x up to its limit, then ⦅1⦆
    # where the rule allows nothing else
    chosen = [("a", [ids[y], ids[one]], -2.0), ("c", [ids[y], ids[one]], -2.0)]
    d_tokens = [ids[x]] * (limit - 2) + [ids[one]]
    repaired = [("b", [ids[x], ids[one]], -1.5), ("d", d_tokens, -0.5 * limit)]
    found = sorted((key, best.tokens, best.log_prob) for key, [best] in answers)
    counts = engine.counts
    if repairs == 1:  # b and d need two calls
        assert found == chosen and back == [1, 3]
        assert (counts.answered, counts.repaired, counts.handed_back) == (2, 0, 2)
        return
    assert found == sorted(chosen + repaired) and back == []
    assert (counts.answered, counts.repaired, counts.handed_back) == (4, 2, 0)
    first = fake.calls[0]  # one call: the four sentences owe the same sentinel
    suppressed = {piece for [piece] in first["suppress_sequences"]}
    assert two in suppressed and one not in suppressed and "<s>" in suppressed
    assert {"1", "2"} <= suppressed  # digits are written through sentinels only
    assert first["length_penalty"] == 0.0 and first["num_hypotheses"] == 3
    going_on = fake.calls[1]  # b and d from [x], owing ⦅1⦆: its pieces end them
    assert one in going_on["end_token"] and "</s>" not in going_on["end_token"]
    assert {"</s>", two} <= {piece for [piece] in going_on["suppress_sequences"]}


def test_beam_search_at_a_length_penalty_searches_on_and_ranks_every_ended_one_by_gnmt(tmp_path):
    loaded = load_model(protecting_model(tmp_path))
    vocab = loaded.vocab
    plan = pipeline.search_plan(
        loaded, SearchSettings(beam=3, length_penalty=1.0), pipeline.target_tags_for(loaded, None)
    )
    x, y = (vocab.target.processor.id_to_piece(i) for i in (100, 101))
    a = vocab.source.processor.id_to_piece(100)
    # raw log-probabilities -3.0 and -3.5: GNMT at alpha 1 prefers the longer, -3.5 / (10 / 6)
    fake = FakeTranslator(vocab, {a: [([x, "</s>"], -3.0), ([y, x, x, x, "</s>"], -3.5)]}, {})
    engine = CTranslate2Search(fake, vocab, loaded.model.cfg.max_positions)
    source = [vocab.source.processor.piece_to_id(a), vocab.source.processor.piece_to_id("</s>")]
    [(_, [best])], back = engine.search(["a"], [source], [plan], [None])
    assert back == [] and best.tokens == [101, 100, 100, 100]
    assert best.log_prob == pytest.approx(-3.5, rel=1e-5)
    assert best.score == pytest.approx(-3.5 / (10 / 6), rel=1e-5)
    [options] = fake.calls
    assert options["length_penalty"] != 0 and options["patience"] == ctranslate2_search.PATIENCE
    assert options["num_hypotheses"] == 3 * ctranslate2_search.PATIENCE


def test_the_engine_gets_the_threads_and_torch_keeps_them_where_it_searches(copy_model, tmp_path):
    cache = str(tmp_path)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        loaded = load_searching(copy_model, "cpu", EngineChoice("ctranslate2", cache_dir=cache))
        assert loaded.engine.startswith("CTranslate2 (float32, 2 threads")
        # torch, which searches only what CTranslate2 hands back, stays on one thread, though
        # creating the translator may set the thread count torch reads
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        fallback = load_searching(copy_model, "cpu", EngineChoice("auto"), "bf16-mixed")
        assert fallback.ctranslate2 is None and torch.get_num_threads() == 2
        with pytest.raises(UsageError):  # a model loaded on one thread, refused: torch's back
            load_searching(copy_model, "cpu", EngineChoice("ctranslate2"), "bf16-mixed")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_a_translator_leaves_torch_threads_as_they_were(copy_model, tmp_path):
    directory = converted_ctranslate2(load_model(copy_model), tmp_path)
    threads = torch.get_num_threads()
    try:
        for torch_threads, translator_threads in ((2, 1), (1, 2)):
            torch.set_num_threads(torch_threads)
            load_translator(directory, threads=translator_threads)
            assert torch.get_num_threads() == torch_threads
    finally:
        torch.set_num_threads(threads)


def test_auto_says_which_engine_and_why(tmp_path, copy_model, monkeypatch):
    loaded = load_model(copy_model)
    choice = EngineChoice("auto", cache_dir=str(tmp_path))
    assert choose_engine(loaded, choice, "cpu").startswith("CTranslate2 (float32")
    assert loaded.ctranslate2 is not None
    assert "on cuda" in choose_engine(loaded, choice, "cuda") and loaded.ctranslate2 is None
    assert "bf16-mixed" in choose_engine(loaded, choice, "cpu", "bf16-mixed")
    assert "PyTorch" in choose_engine(loaded, EngineChoice("pytorch"), "cpu")
    int8 = choose_engine(loaded, EngineChoice("auto", "int8", str(tmp_path)), "cpu")
    assert int8.startswith("CTranslate2 (int8")
    shared = tmp_path / "shared.ckpt"
    model = Transformer(variant_config(share_layer_attention=True), 200, 200, shared_vocab=True)
    write_checkpoint(shared, model, joint_vocab())
    why = choose_engine(load_model(shared), choice, "cpu")
    assert why.startswith("the PyTorch search") and "share_layer_attention" in why
    with pytest.raises(UsageError, match="share_layer_attention.*--engine pytorch"):
        choose_engine(load_model(shared), EngineChoice("ctranslate2"), "cpu")
    # where no conversion can be written: auto says so and takes PyTorch; asked for, an error
    unwritable = tmp_path / "a-file"
    unwritable.write_text("")
    fresh = load_model(copy_model)
    why = choose_engine(fresh, EngineChoice("auto", cache_dir=str(unwritable / "cache")), "cpu")
    assert why.startswith("the PyTorch search") and "--engine-cache" in why
    with pytest.raises(UsageError, match="--engine-cache"):
        choose_engine(fresh, EngineChoice("ctranslate2", cache_dir=str(unwritable / "c")), "cpu")
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    assert "pip install ctranslate2" in choose_engine(loaded, choice, "cpu")
    with pytest.raises(UsageError, match="pip install ctranslate2"):
        choose_engine(loaded, EngineChoice("ctranslate2"), "cpu")


def test_translate_cli_with_either_engine_writes_the_same_lines(copy_model, tmp_path, capsys):
    source = tmp_path / "in.en"
    source.write_text("\n".join(LINES) + "\n")
    outputs = {}
    for engine in ("pytorch", "ctranslate2"):
        out = tmp_path / f"{engine}.de"
        argv = ["--checkpoint", str(copy_model), "--source", str(source), "--output", str(out)]
        argv += ["--beam", "1", "--engine", engine, "--engine-cache", str(tmp_path / "cache")]
        assert translate_cli(argv) == 0
        outputs[engine] = out.read_text()
        said = capsys.readouterr().err
        assert ("searching with CTranslate2" in said) == (engine == "ctranslate2")
    assert outputs["ctranslate2"] == outputs["pytorch"] and outputs["pytorch"].count("\n") == 40
    assert [p.name for p in (tmp_path / "cache").iterdir()][0].startswith("model.ckpt.ctranslate2-")


class CountingTranslator:
    """A translator's calls counted, with the sentences each held."""

    def __init__(self, translator):
        self.translator, self.calls = translator, []

    def translate_batch(self, sources, **options):
        self.calls.append(len(sources))
        return self.translator.translate_batch(sources, **options)


def test_translate_serve_s_engine_loop_searches_the_requests_of_a_step_in_one_call(
    copy_model, tmp_path
):
    from translate.serve.engine_loop import Cancel, EngineLoop, Join
    from translate.serve.service import detokenise, tokenise

    loaded = load_model(copy_model)
    choose_engine(loaded, EngineChoice("ctranslate2", cache_dir=str(tmp_path)), "cpu")
    counting = CountingTranslator(loaded.ctranslate2.translator)
    loaded.ctranslate2.translator = counting
    engine = EngineLoop(loaded, Budget(4096))
    key = SearchSettings(beam=2, length_penalty=1.0)
    sent = {r: tokenise(loaded, [line], key) for r, line in enumerate(LINES[:6])}
    for request_id, segments in sent.items():  # six clients' requests between two steps
        assert engine.take(Join(request_id, segments.ids, key)) == []
    engine.take(Cancel(5))  # the sixth client left: its line is not searched
    answers = engine.step()
    assert counting.calls == [5] and sorted(a.request_id for a in answers) == [0, 1, 2, 3, 4]
    for answer in answers:
        line = LINES[answer.request_id]
        texts = [
            found.text for found in detokenise(loaded, sent[answer.request_id], answer.found, 1)
        ]
        assert texts == pipeline.translate_lines(loaded, [line], key)
    assert not engine.busy and not engine.searches
