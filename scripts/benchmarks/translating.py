"""`bench.py translate`: decoding speed, one mode a question.

systems: the test split translated by
  - ours: `translate_nbest`, what translate-cli runs (tokenize, search, detokenize), in a process
    set up as translate-cli's; ours-ctranslate2: the same with `--engine ctranslate2` (in this
    process, as translate-cli runs it); ours-unpacked: plain `nn.Linear` layers (what packing the
    weights gains); ours-int8: `--quantize int8`; ours-int8-unfused: int8 with each
    feed-forward ReLU a pass of its own (plain `quantize_dynamic`: what the fusion gains);
  - transformers: `generate` on the exported model, `do_sample=False`;
  - student, student-ctranslate2, student-int8: `--student`'s checkpoint as ours,
    ours-ctranslate2 and ours-int8, and student-ctranslate2-int8 (`--engine ctranslate2
    --quantize int8`): a small model against its teacher, in one run;
  - CTranslate2: `translate_batch` with `intra_threads` = torch's threads, float32 (or the
    precision's compute type) and int8 (ctranslate2-int8), each in a process of its own (two
    OpenMP runtimes in one process slow each other on two threads);
  on the same length-sorted batches at each beam, ours joined in one running search as
  translate-cli searches them. The systems are compared at length penalty 0, where all rank by
  the raw sum of log-probabilities (their penalties differ: ours is GNMT's), so their
  translations should agree (the table counts identical lines, and those of them where ours hit
  its per-sentence length limit, which the others apply per batch); ours also at alpha 1, with
  and without `--restrict-target`. On CUDA ours and transformers run under the `--precision`'s
  autocast, CTranslate2 in the matching compute type, the CPU-only rows left out.
step: one greedy step's cost by rows decoded, ours against CTranslate2: a batch of copies of one
  test sentence cut to `--source-tokens`, decoded to `--short` and `--long` tokens (EOS blocked
  until then), the difference over the extra steps, so the encoder and every fixed cost cancel;
  "its products alone" times only the step's linear layers, the floor of ours. With
  `--by-batch`: each of translate-cli's batches decoded alone by both, then joined as
  translate-cli joins them, then each to one token (the encoder and the first step).
profile: torch.profiler over our search, operators by their own CPU time and the share left to
  Python; with `--by-rows`, the encoder's time and the steps' time by rows decoded, and the
  share of the encoder positions cross-attention reads that are padding (`--batch N`: random
  batches of N, a server's, instead of translate-cli's sorted ones).

Every time is the best of `--repeats`, the systems interleaved; tokens/s counts target
SentencePiece tokens of the output (EOS included), re-tokenized alike for every system.
"""

from __future__ import annotations

import multiprocessing
import random
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmarks.harness import (
    best_of,
    decoding_model,
    environment,
    interleaved,
    publish,
    say,
    synchronizer,
    table,
    test_split,
)
from translate.decode.ctranslate2_model import COMPUTE_TYPES
from translate.decode.ctranslate2_search import load_translator
from translate.decode.device import autocast
from translate.decode.engine import choose_engine
from translate.decode.loaded_model import LoadedModel, load_model
from translate.decode.pipeline import BATCH_TOKENS, length_batches, translate_lines, translate_nbest
from translate.decode.settings import EngineChoice, SearchSettings
from translate.model.quantize import linear_bytes
from translate.score.metrics import corpus_scores
from translate.text.vocab import EOS_ID, PAD_ID

SYSTEMS = (
    "ours",
    "ours-ctranslate2",
    "ours-unpacked",
    "transformers",
    "ctranslate2",
    "ours-int8",
    "ours-int8-unfused",
    "ctranslate2-int8",
    "student",
    "student-ctranslate2",
    "student-ctranslate2-int8",
    "student-int8",
)
# Translated by `--student`'s checkpoint (run only with it), loaded with these settings.
STUDENT = {
    "student": {},
    "student-ctranslate2": {},
    "student-ctranslate2-int8": {},
    "student-int8": {"quantize": "int8"},
}
# The systems translate-cli runs with `--engine ctranslate2`, and their `--quantize`.
ON_CTRANSLATE2 = {"ours-ctranslate2": "none", "student-ctranslate2": "none"}
ON_CTRANSLATE2 |= {"student-ctranslate2-int8": "int8"}
CPU_ONLY = {"ours-unpacked", "ours-int8", "ours-int8-unfused", *ON_CTRANSLATE2, "student-int8"}
AUTOCAST = {"ours", "ours-unpacked", "transformers"}  # int8 and CTranslate2 keep their own types


def run(args) -> int:
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"error: --device cuda: torch {torch.__version__} sees no CUDA device")
    return {"systems": systems, "step": step, "profile": profile}[args.mode](args)


# ---------------------------------------------------------------------------------------------
# systems


@dataclass(frozen=True)
class Setting:
    system: str
    beam: int
    length_penalty: float
    restrict: bool = False

    @property
    def label(self) -> str:
        extra = " restricted" if self.restrict else ""
        return f"{self.system} beam {self.beam} lp {self.length_penalty:g}{extra}"


@dataclass
class Row:
    system: str
    beam: int
    length_penalty: float
    restrict: bool
    seconds: float
    sentences_per_s: float
    tokens_per_s: float
    bleu: float
    chrf: float
    identical_to_ours: int | None
    differing_at_our_limit: int | None  # of the lines that differ, those where ours hit its limit
    sentences: int


def batch_limit(loaded: LoadedModel, encoded: list[list[int]], batch: list[int]) -> int:
    """The longest output (EOS included) our search allows any sentence of `batch`."""
    config = loaded.training_config
    a, b = config.max_len_a, config.max_len_b
    limit = loaded.model.cfg.max_positions
    return max(min(int((len(encoded[i]) + 1) * a + b), limit) for i in batch)


def ours(loaded: LoadedModel, lines: list[str], setting: Setting, batch_tokens: int) -> list[str]:
    # Every line whole, as the other systems read it (no sentence-by-sentence over-long lines).
    settings = SearchSettings(
        beam=setting.beam,
        max_input_tokens=loaded.model.cfg.max_positions - 1,
        length_penalty=setting.length_penalty,
        restrict_to_target=setting.restrict,
    )
    nbest = translate_nbest(loaded, lines, settings, batch_tokens=batch_tokens)
    return [entries[0].text for entries in nbest]


def transformers_runner(hf_model, loaded: LoadedModel, encoded, batches) -> Callable:
    from translate.model.padding import pad

    device = next(hf_model.parameters()).device

    def translate(setting: Setting) -> list[str]:
        outputs = [""] * len(encoded)
        with torch.inference_mode():
            for batch in batches:
                src = pad([encoded[i] + [EOS_ID] for i in batch]).to(device)
                generated = hf_model.generate(
                    input_ids=src,
                    attention_mask=src != PAD_ID,
                    num_beams=setting.beam,
                    do_sample=False,
                    length_penalty=setting.length_penalty,
                    early_stopping=False,
                    max_new_tokens=batch_limit(loaded, encoded, batch),
                    num_return_sequences=1,
                )
                rows = [[t for t in row if t > EOS_ID] for row in generated[:, 1:].tolist()]
                for index, text in zip(batch, loaded.vocab.target.decode(rows)):
                    outputs[index] = text
        return outputs

    return translate


def ctranslate2_runner(translator, loaded: LoadedModel, encoded, batches) -> Callable:
    source, target = loaded.vocab.source.processor, loaded.vocab.target.processor
    pieces = [[source.id_to_piece(t) for t in ids] for ids in encoded]

    def translate(setting: Setting) -> list[str]:
        outputs = [""] * len(encoded)
        for batch in batches:
            results = translator.translate_batch(
                [pieces[i] for i in batch],
                beam_size=setting.beam,
                length_penalty=setting.length_penalty,
                # CTranslate2 does not count the EOS that our limit counts.
                max_decoding_length=batch_limit(loaded, encoded, batch) - 1,
                max_batch_size=0,
            )
            for index, result in zip(batch, results):
                outputs[index] = target.decode_pieces(result.hypotheses[0])
        return outputs

    return translate


class Isolated:
    """A worker in a spawned process of its own, answering each job sent to it. CTranslate2 runs
    so: it brings its own OpenMP runtime, and on two threads two runtimes in one process slowed
    every later run of either."""

    def __init__(self, target: Callable, *args) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=target, daemon=True, args=(child, *args))
        self.process.start()
        child.close()  # the worker's end, held here too, would keep recv() waiting after it died
        if self.receive() != "ready":
            raise SystemExit("the CTranslate2 process did not start")

    def receive(self):
        try:
            return self.connection.recv()
        except EOFError:
            raise SystemExit("the CTranslate2 process ended without answering (above)") from None

    def __call__(self, job):
        self.connection.send(job)
        return self.receive()

    def close(self) -> None:
        self.connection.send(None)
        self.process.join(timeout=30)


def _systems_worker(connection, checkpoint, ct2_dir, device, compute, threads, encoded, batches):
    torch.set_num_threads(1)  # this process's torch only reads the checkpoint
    loaded = load_model(checkpoint, pack=False)
    translate = ctranslate2_runner(
        load_translator(ct2_dir, compute, threads, device), loaded, encoded, batches
    )
    connection.send("ready")
    while (setting := connection.recv()) is not None:
        connection.send(translate(setting))


def int8_unfused(checkpoint: str) -> LoadedModel:
    """The checkpoint with PyTorch's plain dynamic int8 linear layers: no feed-forward ReLU fused."""
    loaded = load_model(checkpoint, pack=False)
    with warnings.catch_warnings():  # torch.ao's notice of its move to torchao
        warnings.simplefilter("ignore")
        loaded.model = torch.ao.quantization.quantize_dynamic(
            loaded.model, {torch.nn.Linear}, dtype=torch.qint8
        )
    return loaded


def other_runners(args, directory: Path, loaded, skip, encoded, batches) -> dict[str, Callable]:
    """The exported transformers model and CTranslate2 (the precision's type and int8), each
    where not skipped; CTranslate2 in processes of its own unless `--ct2-in-process`."""
    from translate.export.ctranslate2 import export_ctranslate2
    from translate.export.huggingface import export_huggingface

    runners: dict[str, Callable] = {}
    if "transformers" not in skip:
        import transformers

        hf_dir = export_huggingface(Path(args.checkpoint), directory / "hf")
        hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(hf_dir)).eval().to(args.device)
        runners["transformers"] = transformers_runner(hf, loaded, encoded, batches)
    computes = {"ctranslate2": COMPUTE_TYPES[args.precision], "ctranslate2-int8": "int8"}
    computes = {name: compute for name, compute in computes.items() if name not in skip}
    if computes:
        ct2_dir = export_ctranslate2(Path(args.checkpoint), directory / "ct2")
        threads = torch.get_num_threads()
        for name, compute in computes.items():
            if args.ct2_in_process:
                translator = load_translator(ct2_dir, compute, threads, args.device)
                runners[name] = ctranslate2_runner(translator, loaded, encoded, batches)
            else:
                worker = (args.checkpoint, str(ct2_dir), args.device, compute, threads)
                runners[name] = Isolated(_systems_worker, *worker, encoded, batches)
    return runners


def settings_for(beams: list[int], skip: set[str]) -> list[Setting]:
    settings = []
    for beam in beams:
        settings += [Setting(system, beam, 0.0) for system in SYSTEMS if system not in skip]
        if beam > 1:
            settings.append(Setting("ours", beam, 1.0))
        settings.append(Setting("ours", beam, 1.0 if beam > 1 else 0.0, restrict=True))
    return settings


def systems(args) -> int:
    torch.set_num_interop_threads(1)
    sources, references = test_split(args.limit, args.split)
    loaded = decoding_model(args.checkpoint, args.device, args.threads)
    batch_tokens = args.batch_tokens or BATCH_TOKENS
    encoded = loaded.vocab.source.encode(sources)
    batches = length_batches([len(ids) for ids in encoded], batch_tokens)
    skip = set(filter(None, args.skip.split(","))) | (CPU_ONLY if args.device == "cuda" else set())
    skip |= set() if args.student else set(STUDENT)
    models = {"ours": loaded}
    for name in set(STUDENT) - skip:
        models[name] = decoding_model(args.student, args.device, args.threads, **STUDENT[name])
    if "ours-unpacked" not in skip:
        models["ours-unpacked"] = load_model(args.checkpoint, pack=False)
    if "ours-int8" not in skip:
        models["ours-int8"] = load_model(args.checkpoint, quantize="int8")
    if "ours-int8-unfused" not in skip:
        models["ours-int8-unfused"] = int8_unfused(args.checkpoint)
    settings = settings_for(args.beams, skip)
    with tempfile.TemporaryDirectory(prefix="bench-translate.") as tmp:
        if "ours-ctranslate2" not in skip:
            models["ours-ctranslate2"] = load_model(args.checkpoint)
        for name in set(ON_CTRANSLATE2) & set(models):
            choice = EngineChoice("ctranslate2", ON_CTRANSLATE2[name], cache_dir=tmp)
            choose_engine(models[name], choice, args.device)
        runners: dict[str, Callable] = {
            name: (lambda setting, model=model: ours(model, sources, setting, batch_tokens))
            for name, model in models.items()
        }
        if {"transformers", "ctranslate2", "ctranslate2-int8"} - skip:
            runners.update(other_runners(args, Path(tmp), loaded, skip, encoded, batches))

        def translate(setting: Setting) -> Callable[[], list[str]]:
            precision = args.precision if setting.system in AUTOCAST else "32-true"

            def go() -> list[str]:
                with autocast(args.device, precision):
                    return runners[setting.system](setting)

            return go

        def progress(index: int, rounds) -> None:
            for label, seconds in rounds.seconds.items():
                say(f"run {index + 1}/{args.repeats}: {label}: {seconds[-1]:.2f} s")

        cases = {setting.label: translate(setting) for setting in settings}
        timed = interleaved(cases, args.repeats, synchronizer(args.device), after_round=progress)
        for runner in runners.values():
            if isinstance(runner, Isolated):
                runner.close()
    rows = system_rows(loaded, settings, timed, encoded, references)
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{args.threads} thread(s)"
    scores_signature = corpus_scores(timed.last(settings[0].label), references).bleu_signature
    memory = f"model in memory: float32 {linear_bytes(loaded.model) / 2**20:.1f} MiB"
    if "ours-int8" in models:
        memory += f", int8 {linear_bytes(models['ours-int8'].model) / 2**20:.1f} MiB"
    memory += f"; checkpoint on disk {Path(args.checkpoint).stat().st_size / 2**20:.1f} MiB"
    text = "\n".join(
        [
            f"{len(sources)} sentences of the {args.split} split, {where}, {args.precision}, "
            f"batches of {batch_tokens} source tokens, best of {args.repeats}",
            "",
            systems_table(rows),
            "",
            f"BLEU signature: {scores_signature}",
            memory,
        ]
    )
    publish(environment(args.device), text, args.json, rows=[asdict(row) for row in rows])
    return 0


def system_rows(loaded, settings: list[Setting], timed, encoded, references) -> list[Row]:
    limits = [batch_limit(loaded, encoded, [i]) for i in range(len(encoded))]
    rows = []
    for setting in settings:
        texts = timed.last(setting.label)
        tokens = sum(len(ids) + 1 for ids in loaded.vocab.target.encode(texts))
        scores = corpus_scores(texts, references)
        mine = timed.last(Setting("ours", setting.beam, setting.length_penalty).label)
        same = at_limit = None
        if setting.system != "ours" or setting.restrict:
            same = sum(a == b for a, b in zip(texts, mine))
            at_limit = sum(
                a != b and len(ids) + 1 >= limit
                for a, b, ids, limit in zip(texts, mine, loaded.vocab.target.encode(mine), limits)
            )
        seconds = timed.best(setting.label)
        rows.append(
            Row(
                setting.system,
                setting.beam,
                setting.length_penalty,
                setting.restrict,
                seconds,
                len(texts) / seconds,
                tokens / seconds,
                scores.bleu,
                scores.chrf,
                same,
                at_limit,
                len(texts),
            )
        )
    return rows


def systems_table(rows: list[Row]) -> str:
    by_key = {(r.system, r.beam, r.length_penalty, r.restrict): r for r in rows}
    cells = []
    for r in rows:
        counterpart = (
            "ours-int8" if r.system in ("ctranslate2-int8", "ours-int8-unfused") else "ours"
        )
        reference = by_key.get((counterpart, r.beam, r.length_penalty, False))
        ratio = (
            ""
            if r.system in ("ours", "ours-int8") or reference is None
            else f"{reference.sentences_per_s / r.sentences_per_s:.2f}x"
        )
        same = "" if r.identical_to_ours is None else f"{r.identical_to_ours}/{r.sentences}"
        if r.differing_at_our_limit:
            same += f" ({r.differing_at_our_limit} at our limit)"
        gnmt = " (GNMT)" if r.system == "ours" and r.length_penalty else ""
        cells.append(
            (r.system, r.beam, f"{r.length_penalty:g}{gnmt}", "yes" if r.restrict else "no")
            + (f"{r.sentences_per_s:.1f}", f"{r.tokens_per_s:.0f}", f"{r.bleu:.2f}")
            + (f"{r.chrf:.2f}", same, ratio)
        )
    headers = ("system", "beam", "length penalty", "restrict", "sent/s", "tok/s", "BLEU", "chrF")
    headers += ("same as ours", "ours / this (int8: ours-int8 / this)")
    return table(headers, cells, "lrrlrrrrrr")


# ---------------------------------------------------------------------------------------------
# step


def greedy_search(
    model, max_len_a: float, max_len_b: int, never: tuple[int, ...] = (), batch_tokens=None
):
    """The product's search at beam 1 (greedy) under this length rule (and token budget)."""
    from translate.decode.search import Search
    from translate.decode.settings import Budget, SearchPlan

    plan = SearchPlan(1, 1.0, 1, max_len_a, max_len_b, never=never)
    return Search(model, plan, Budget(batch_tokens) if batch_tokens else None)


def source_tokens(loaded, count: int) -> list[int]:
    """The first test sentence of at least `count` tokens, cut to `count`."""
    for line in test_split()[0]:
        ids = loaded.vocab.source.encode([line])[0]
        if len(ids) >= count:
            return ids[:count]
    raise SystemExit(f"--source-tokens {count}: no test sentence is that long")


def ours_step_ms(loaded, ids: list[int], rows: int, short: int, long: int, repeats: int) -> float:
    from translate.decode.search import search_batch

    src = [ids + [EOS_ID]] * rows

    def to(steps: int) -> Callable[[], object]:
        # EOS never chosen: every row decodes `steps` steps, the last one forced to EOS
        search = greedy_search(loaded.model, 0.0, steps, never=(EOS_ID,))
        return lambda: search_batch(search, src)

    return (best_of(repeats, to(long)) - best_of(repeats, to(short))) / (long - short) * 1e3


def products_ms(loaded, rows: int, repeats: int, passes: int = 50) -> float:
    """One step's linear layers alone (each decoder layer's self-attention products, the query
    and output of cross-attention, the feed-forward pair, then the output projection) on `rows`
    rows, as decoding calls them: the floor of our step."""
    model = loaded.model
    layers = [
        module
        for layer in model.decoder_layers
        for module in (
            *(getattr(layer.self_attn, name) for name in ("q_proj", "k_proj", "v_proj")),
            layer.self_attn.out_proj,
            layer.cross_attn.q_proj,
            layer.cross_attn.out_proj,
            layer.ffn.linear1,
            layer.ffn.linear2,
        )
    ] + [model.output]
    inputs = [torch.randn(rows, 1, layer.in_features) for layer in layers]

    @torch.inference_mode()
    def products() -> None:
        for _ in range(passes):
            for layer, x in zip(layers, inputs):
                layer(x)

    return best_of(repeats, products) / passes * 1e3


def _step_worker(connection, ct2_dir: str, compute: str, threads: int) -> None:
    """Answers ("step", pieces, rows, short, long, repeats) with ms a step and ("batch", the
    sentences' pieces, longest output, repeats) with seconds, as ours are measured."""
    ct2 = load_translator(ct2_dir, compute, threads)
    connection.send("ready")
    while (job := connection.recv()) is not None:
        if job[0] == "batch":
            _, sentences, longest, repeats = job  # its lengths leave out the EOS ours count
            connection.send(
                best_of(
                    repeats,
                    lambda: ct2.translate_batch(
                        sentences, beam_size=1, max_decoding_length=longest - 1, max_batch_size=0
                    ),
                )
            )
            continue
        _, pieces, rows, short, long, repeats = job

        def to(steps: int) -> Callable[[], object]:
            return lambda: ct2.translate_batch(
                [pieces] * rows,
                beam_size=1,
                min_decoding_length=steps - 1,
                max_decoding_length=steps - 1,
                max_batch_size=0,
            )

        steps_ms = (best_of(repeats, to(long)) - best_of(repeats, to(short))) / (long - short)
        connection.send(steps_ms * 1e3)


def step(args) -> int:
    if not 0 < args.short < args.long:
        raise SystemExit("error: --short must be positive and below --long")
    loaded = decoding_model(args.checkpoint, "cpu", args.threads, quantize=args.quantize)
    if args.long > loaded.model.cfg.max_positions:
        raise SystemExit(
            f"error: --long {args.long}: the model covers {loaded.model.cfg.max_positions} positions"
        )
    compute = "int8" if args.quantize == "int8" else "float32"
    from translate.export.ctranslate2 import export_ctranslate2

    with tempfile.TemporaryDirectory(prefix="bench-step.") as tmp:
        ct2_dir = export_ctranslate2(Path(args.checkpoint), Path(tmp) / "ct2")
        ct2 = Isolated(_step_worker, str(ct2_dir), compute, args.threads)
        try:
            if args.by_batch:
                text, rows = by_batch(loaded, ct2, args.limit, args.repeats)
            else:
                text, rows = by_rows_step(loaded, ct2, args)
        finally:
            ct2.close()
    caption = f"greedy, {args.threads} thread(s), {compute}, best of {args.repeats}"
    publish(environment(), f"{caption}; {text}", args.json, rows=rows)
    return 0


def by_rows_step(loaded, ct2: Isolated, args) -> tuple[str, list[dict]]:
    ids = source_tokens(loaded, args.source_tokens)
    pieces = [loaded.vocab.source.processor.id_to_piece(token) for token in ids]
    rows = []
    for count in args.rows:
        mine = ours_step_ms(loaded, ids, count, args.short, args.long, args.repeats)
        floor = products_ms(loaded, count, args.repeats)
        theirs = ct2(("step", pieces, count, args.short, args.long, args.repeats))
        rows.append(
            {"rows": count, "ours_ms": mine, "products_ms": floor, "ctranslate2_ms": theirs}
        )
        say(rows[-1])
    headers = ("rows", "ours ms/step", "its products alone", "CTranslate2 ms/step")
    headers += ("ours / CTranslate2 (speed)",)
    cells = [
        (r["rows"], f"{r['ours_ms']:.3f}", f"{r['products_ms']:.3f}", f"{r['ctranslate2_ms']:.3f}")
        + (f"{r['ctranslate2_ms'] / r['ours_ms']:.2f}x",)
        for r in rows
    ]
    caption = f"{args.source_tokens} source tokens, steps {args.short} to {args.long}"
    return f"{caption}\n\n{table(headers, cells)}", rows


def by_batch(loaded, ct2: Isolated, limit: int | None, repeats: int) -> tuple[str, list[dict]]:
    """Each of translate-cli's length-sorted batches of the first `limit` test sentences decoded
    greedily alone by ours and by CTranslate2 (one length limit a batch); then ours over the same
    batches joined, as translate-cli; then each batch to one output token."""
    from translate.decode.search import search_batch, search_joined

    config = loaded.training_config
    a, b = config.max_len_a, config.max_len_b
    lines = test_split(limit)[0]
    encoded = loaded.vocab.source.encode(lines)
    piece = loaded.vocab.source.processor.id_to_piece
    batches = length_batches([len(ids) for ids in encoded], BATCH_TOKENS)
    rows = []

    def both(batch: list[int], search: Callable, longest: int) -> tuple[float, float]:
        src = [encoded[i] + [EOS_ID] for i in batch]
        mine = best_of(repeats, lambda: search_batch(search(), src))
        pieces = [[piece(t) for t in encoded[i]] for i in batch]
        return mine, ct2(("batch", pieces, longest, repeats))

    def greedy():
        return greedy_search(loaded.model, a, b)

    def one_step():
        return greedy_search(loaded.model, 0.0, 1)

    for number, batch in enumerate(batches, 1):
        mine, theirs = both(batch, greedy, batch_limit(loaded, encoded, batch))
        longest = max(len(encoded[i]) for i in batch)
        rows.append({"batch": number, "sentences": len(batch), "longest_source": longest})
        rows[-1].update(ours_s=mine, ctranslate2_s=theirs)
        say(rows[-1])

    def joined() -> None:  # as translate-cli searches them: one running search, longest first
        search = greedy_search(loaded.model, a, b, batch_tokens=BATCH_TOKENS)
        sources = ((batch, [encoded[i] + [EOS_ID] for i in batch]) for batch in reversed(batches))
        for _ in search_joined(search, sources):
            pass

    theirs = sum(row["ctranslate2_s"] for row in rows)
    totals = [("all", sum(row["ours_s"] for row in rows), theirs)]
    totals.append(("joined, as translate-cli", best_of(repeats, joined), theirs))
    first = [both(batch, one_step, 2) for batch in batches]  # the encoder and one step
    totals.append(("the encoder and one step", *map(sum, zip(*first))))
    cells = [
        (r["batch"], r["sentences"], r["longest_source"], f"{r['ours_s']:.3f}")
        + (f"{r['ctranslate2_s']:.3f}", f"{r['ctranslate2_s'] / r['ours_s']:.2f}x")
        for r in rows
    ]
    cells += [
        (name, len(lines), "", f"{mine:.3f}", f"{theirs:.3f}", f"{theirs / mine:.2f}x")
        for name, mine, theirs in totals
    ]
    headers = ("batch", "sentences", "longest source", "ours s", "CTranslate2 s")
    headers += ("ours / CTranslate2 (speed)",)
    caption = f"the first {len(lines)} test sentences in translate-cli's batches"
    rows += [
        {"batch": name, "ours_s": mine, "ctranslate2_s": theirs} for name, mine, theirs in totals
    ]
    return f"{caption}\n\n{table(headers, cells)}", rows


# ---------------------------------------------------------------------------------------------
# profile


def profile(args) -> int:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    loaded = decoding_model(args.checkpoint, "cpu", args.threads, quantize=args.quantize)
    sources = test_split(args.limit)[0]
    settings = SearchSettings(beam=args.beams[0], length_penalty=args.length_penalty)
    if args.by_rows:
        return profile_by_rows(loaded, sources, settings, args)

    def translate() -> None:
        translate_lines(loaded, sources, settings)

    plain = best_of(1, translate)  # warm, and the time without the profiler's own cost
    with profiler(activities=[ProfilerActivity.CPU]) as prof:
        profiled = best_of(1, translate, warm=False)
    events = prof.key_averages()
    operators = sum(e.self_cpu_time_total for e in events) / 1e6
    python = profiled - operators
    caption = (
        f"{len(sources)} sentences, beam {settings.beam}, {args.threads} thread(s): "
        f"{plain:.2f} s unprofiled, {profiled:.2f} s profiled; operators {operators:.2f} s "
        f"({operators / profiled:.0%}), the rest (Python between operators) {python:.2f} s "
        f"({python / profiled:.0%})"
    )
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[: args.top]
    cells = [
        (e.key, f"{e.count:,}", f"{e.self_cpu_time_total / 1e6:.2f}")
        + (f"{e.self_cpu_time_total / 1e6 / profiled:.1%}",)
        for e in top
    ]
    headers = ("operator", "calls", "self CPU s", "share of the profiled time")
    rows = [dict(zip(("operator", "calls", "self_cpu_s", "share"), c)) for c in cells]
    publish(environment(), f"{caption}\n\n{table(headers, cells)}", args.json, rows=rows)
    return 0


def profile_by_rows(loaded, sources: list[str], settings: SearchSettings, args) -> int:
    """Encoder seconds, and decoding steps and seconds by rows decoded (buckets of 16)."""
    from translate.decode import cache as cache_module

    if args.batch:
        sources = random.Random(0).sample(sources, len(sources))
    size = args.batch or len(sources)
    chunks = [sources[i : i + size] for i in range(0, len(sources), size)]
    model = loaded.model
    plain_decode, plain_encode = model.decode, model.encode
    plain_blocks = cache_module.attend_blocks
    steps: dict[int, list] = defaultdict(lambda: [0, 0.0])  # bucket of 16 rows: [steps, seconds]
    encoder = [0.0]
    cross = [0, 0]  # encoder positions cross-attention read, and how many of them were padding

    def attend_blocks(attention, q, query, blocks, static_kv):
        for block in blocks if static_kv else ():
            positions = block.k.shape[0] * block.k.shape[2]
            mask = block.mask
            cross[0] += positions
            if mask is not None:
                cross[1] += positions - int(mask.expand(block.k.shape[0], -1, -1, -1).sum())
        return plain_blocks(attention, q, query, blocks, static_kv)

    def decode(tgt_ids, *rest, **kwargs):
        started = time.perf_counter()
        out = plain_decode(tgt_ids, *rest, **kwargs)
        bucket = steps[tgt_ids.shape[0] // 16]
        bucket[0], bucket[1] = bucket[0] + 1, bucket[1] + time.perf_counter() - started
        return out

    def encode(*call_args):
        started = time.perf_counter()
        out = plain_encode(*call_args)
        encoder[0] += time.perf_counter() - started
        return out

    def translate_all() -> None:
        for chunk in chunks:
            translate_lines(loaded, chunk, settings)

    translate_all()  # warm
    model.decode, model.encode, cache_module.attend_blocks = decode, encode, attend_blocks
    try:
        total = best_of(1, translate_all, warm=False)
    finally:
        model.decode, model.encode = plain_decode, plain_encode
        cache_module.attend_blocks = plain_blocks
    decoding = sum(seconds for _, seconds in steps.values())
    batches = f"random batches of {args.batch}" if args.batch else "length-sorted batches"
    caption = (
        f"{len(sources)} sentences, beam {settings.beam}, {args.threads} thread(s), {batches}: "
        f"{total:.2f} s, encoder {encoder[0]:.2f} s, decoding steps {decoding:.2f} s, the rest "
        f"{total - encoder[0] - decoding:.2f} s; cross-attention read {cross[0]:,} encoder "
        f"positions (per layer, summed over steps), {cross[1] / max(cross[0], 1):.0%} of them padding"
    )
    rows = [
        {"rows": f"{b * 16}-{b * 16 + 15}", "steps": n, "seconds": s}
        for b, (n, s) in sorted(steps.items())
    ]
    cells = [
        (
            r["rows"],
            f"{r['steps']:,}",
            f"{r['seconds']:.3f}",
            f"{r['seconds'] / r['steps'] * 1e3:.2f}",
        )
        for r in rows
    ]
    headers = ("rows a step", "steps", "seconds", "ms a step")
    publish(environment(), f"{caption}\n\n{table(headers, cells)}", args.json, rows=rows)
    return 0
