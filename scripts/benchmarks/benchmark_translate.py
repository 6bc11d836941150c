"""Decoding benchmark: our search against `transformers` `generate` and CTranslate2, one CPU or GPU.

    .venv/bin/python scripts/benchmarks/benchmark_translate.py --checkpoint runs/default/checkpoints/last.ckpt
    .venv/bin/python scripts/benchmarks/benchmark_translate.py --limit 200 --repeats 1     # a quick look
    python scripts/benchmarks/benchmark_translate.py --device cuda --precision bf16-mixed --skip ctranslate2,ctranslate2-int8

The checkpoint is exported to a temporary Hugging Face directory and a CTranslate2 directory
(`translate.export`), then the bundled test split is translated by
  - ours: `translate_nbest`, what translate-cli runs (tokenize, search, detokenize), in a process
    set up as translate-cli's (`translate.decode.allocator`);
  - ours-unpacked: the same with plain `nn.Linear` layers (`load_model(pack=False)`),
    which shows what packing the weights (`translate/model/packing.py`) gains;
  - ours-int8: the same with int8 linear layers (`translate-cli --quantize int8`);
  - ours-int8-unfused: int8 with each feed-forward ReLU a pass of its own (plain
    `quantize_dynamic`), which shows what fusing it into the int8 product (`translate/model/quantize.py`) gains;
  - transformers: `generate` on the exported model, `do_sample=False`;
  - CTranslate2: `Translator.translate_batch` with `intra_threads` = torch's threads, in
    float32 and (ctranslate2-int8) with `compute_type="int8"`, each in a process of its own
    (`IsolatedCTranslate2`: two OpenMP runtimes in one process slow each other on two threads),
all on the same batches (`pipeline.length_batches`), at each beam size: the others one after
another, ours joined in one running search as translate-cli searches them (`continuous.search_joined`).
With `--device cuda` ours and transformers run on the GPU under the autocast `--precision`
asks for (translate-cli's `--precision`), CTranslate2 with the matching compute type; the
CPU-only rows (unpacked, int8) are left out.

The systems' length penalties differ (ours is GNMT's `((5 + n) / 6) ** alpha`; transformers
and CTranslate2 divide by `n ** alpha`), so they are compared at length penalty 0, where all
rank by the raw sum of log-probabilities: the same objective, so the translations, and their
BLEU, should agree (the table counts identical lines against ours).  Ours is also measured at
the GNMT default (alpha 1), with and without `--restrict-target`.  The length limit is ours,
`a * source_length + b` per sentence; transformers and CTranslate2 take one limit per batch,
its longest sentence's (sentences are sorted by length, so a batch's limits differ little).

Each timing is the best of `--repeats` runs, the systems interleaved so that a slow spell of
a shared machine hits all of them alike.  Tokens/s counts target SentencePiece tokens of the
output (EOS included), re-tokenized the same way for every system.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from translate.decode.device import autocast, prepare_decoding  # noqa: E402
from translate.decode.loaded_model import LoadedModel, load_model  # noqa: E402
from translate.decode.pipeline import BATCH_TOKENS, length_batches, translate_nbest  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.export.ctranslate2 import COMPUTE_TYPES  # noqa: E402
from translate.model.padding import pad  # noqa: E402
from translate.model.quantize import linear_bytes  # noqa: E402
from translate.score.metrics import corpus_scores  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402
from translate.text.vocab import EOS_ID, PAD_ID  # noqa: E402


@dataclass
class Setting:
    system: str  # ours, ours-unpacked, ours-int8, ours-int8-unfused, transformers, ctranslate2 or ctranslate2-int8
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
    differing_at_our_limit: (
        int | None
    )  # of the lines that differ, those where ours hit its length limit
    sentences: int


def batch_limits(loaded: LoadedModel, encoded: list[list[int]], batch: list[int]) -> int:
    """The longest output (EOS included) our search allows any sentence of `batch`."""
    config = loaded.training_config
    a, b = config.get("max_len_a", 1.5), config.get("max_len_b", 10)
    limit = loaded.model.cfg.max_positions
    return max(min(int((len(encoded[i]) + 1) * a + b), limit) for i in batch)


def ours(loaded: LoadedModel, lines: list[str], setting: Setting, batch_tokens: int) -> list[str]:
    # Every line whole, as the other systems read it (no sentence-by-sentence over-long lines).
    nbest = translate_nbest(
        loaded,
        lines,
        SearchSettings(
            beam=setting.beam,
            max_input_tokens=loaded.model.cfg.max_positions - 1,
            length_penalty=setting.length_penalty,
            restrict_to_target=setting.restrict,
        ),
        batch_tokens=batch_tokens,
    )
    return [entries[0].text for entries in nbest]


def transformers_runner(hf_model, loaded: LoadedModel, encoded, batches) -> Callable:
    device = next(hf_model.parameters()).device

    def run(setting: Setting) -> list[str]:
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
                    max_new_tokens=batch_limits(loaded, encoded, batch),
                    num_return_sequences=1,
                )
                rows = [[t for t in row if t > EOS_ID] for row in generated[:, 1:].tolist()]
                for index, text in zip(batch, loaded.vocab.target.decode(rows)):
                    outputs[index] = text
        return outputs

    return run


def ctranslate2_runner(ct2_translator, loaded: LoadedModel, encoded, batches) -> Callable:
    source, target = loaded.vocab.source.processor, loaded.vocab.target.processor
    pieces = [[source.id_to_piece(t) for t in ids] for ids in encoded]

    def run(setting: Setting) -> list[str]:
        outputs = [""] * len(encoded)
        for batch in batches:
            results = ct2_translator.translate_batch(
                [pieces[i] for i in batch],
                beam_size=setting.beam,
                length_penalty=setting.length_penalty,
                # CTranslate2 does not count the EOS that our limit counts.
                max_decoding_length=batch_limits(loaded, encoded, batch) - 1,
                max_batch_size=0,
            )
            for index, result in zip(batch, results):
                outputs[index] = target.decode_pieces(result.hypotheses[0])
        return outputs

    return run


AUTOCAST_SYSTEMS = (
    "ours",
    "ours-unpacked",
    "transformers",
)  # int8 and CTranslate2 keep their own types


def export_both(
    checkpoint: Path,
    directory: Path,
    device: str,
    precision: str,
    skip: set[str],
    loaded: LoadedModel,
    encoded: list[list[int]],
    batches: list[list[int]],
    in_process: bool = False,
):
    """The exported transformers model and CTranslate2 runners (fp32 or the precision's type,
    and on the CPU int8), each only where not skipped; CTranslate2 in processes of its own unless
    `in_process`."""
    import transformers

    from translate.export.ctranslate2 import export_ctranslate2
    from translate.export.huggingface import export_huggingface

    hf_model, ct2 = None, {}
    if "transformers" not in skip:
        hf_dir = export_huggingface(checkpoint, directory / "hf")
        hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(hf_dir)).eval().to(device)
    computes = {
        name: compute
        for name, compute in (
            ("ctranslate2", COMPUTE_TYPES[precision]),
            ("ctranslate2-int8", "int8"),
        )
        if name not in skip
    }
    if computes:
        ct2_dir = export_ctranslate2(checkpoint, directory / "ct2")
        for name, compute in computes.items():
            if in_process:
                ct2[name] = ctranslate2_runner(
                    ctranslate2_translator(ct2_dir, device, compute, torch.get_num_threads()),
                    loaded,
                    encoded,
                    batches,
                )
            else:
                ct2[name] = IsolatedCTranslate2(
                    checkpoint, ct2_dir, device, compute, torch.get_num_threads(), encoded, batches
                )
    return hf_model, ct2


def ctranslate2_translator(ct2_dir: Path | str, device: str, compute: str, threads: int):
    import ctranslate2

    return ctranslate2.Translator(
        str(ct2_dir), device=device, inter_threads=1, compute_type=compute, intra_threads=threads
    )


class IsolatedCTranslate2:
    """CTranslate2 in a process of its own. It brings its own OpenMP runtime, and on two threads
    the two runtimes in one process slowed every later run of either (docs/benchmarks.md)."""

    def __init__(
        self,
        checkpoint: Path,
        ct2_dir: Path,
        device: str,
        compute: str,
        threads: int,
        encoded: list[list[int]],
        batches: list[list[int]],
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(
            target=_ctranslate2_worker,
            daemon=True,
            args=(child, str(checkpoint), str(ct2_dir), device, compute, threads, encoded, batches),
        )
        self.process.start()
        child.close()  # the worker's end, held here too, would keep recv() waiting after the worker died
        self.compute = compute
        if self.receive() != "ready":
            raise SystemExit(f"CTranslate2 ({compute}) did not start")

    def receive(self):
        try:
            return self.connection.recv()
        except EOFError:
            raise SystemExit(
                f"CTranslate2 ({self.compute}) ended without answering (its error is above)"
            ) from None

    def __call__(self, setting: Setting) -> list[str]:
        self.connection.send(setting)
        return self.receive()

    def close(self) -> None:
        self.connection.send(None)
        self.process.join(timeout=30)


def _ctranslate2_worker(
    connection,
    checkpoint: str,
    ct2_dir: str,
    device: str,
    compute: str,
    threads: int,
    encoded: list[list[int]],
    batches: list[list[int]],
) -> None:
    torch.set_num_threads(
        1
    )  # this process's torch only reads the checkpoint: no thread pool of its own
    loaded = load_model(checkpoint, pack=False)
    run = ctranslate2_runner(
        ctranslate2_translator(ct2_dir, device, compute, threads), loaded, encoded, batches
    )
    connection.send("ready")
    while (setting := connection.recv()) is not None:
        connection.send(run(setting))


def int8_unfused(checkpoint: str):
    """The checkpoint with PyTorch's plain dynamic int8 linear layers: no feed-forward ReLU fused."""
    loaded = load_model(checkpoint, pack=False)
    with warnings.catch_warnings():  # torch.ao's notice of its move to torchao
        warnings.simplefilter("ignore")
        loaded.model = torch.ao.quantization.quantize_dynamic(
            loaded.model, {torch.nn.Linear}, dtype=torch.qint8
        )
    return loaded


def markdown(rows: list[Row]) -> str:
    by_key = {(r.system, r.beam, r.length_penalty, r.restrict): r for r in rows}
    lines = [
        "| system | beam | length penalty | restrict | sent/s | tok/s | BLEU | chrF | same as ours | ours / this "
        "(int8: ours-int8 / this) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
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
        penalty = f"{r.length_penalty:g}" + (
            " (GNMT)" if r.system == "ours" and r.length_penalty else ""
        )
        lines.append(
            f"| {r.system} | {r.beam} | {penalty} | {'yes' if r.restrict else 'no'} | "
            f"{r.sentences_per_s:.1f} | {r.tokens_per_s:.0f} | {r.bleu:.2f} | {r.chrf:.2f} | {same} | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument("--split", default="test", help="bundled corpus split (default: test)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    parser.add_argument("--beams", default="1,5", help="comma-separated beam sizes (default: 1,5)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per setting; the best counts"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="CPU threads for all systems (default: 1)"
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=None,
        help="source tokens per batch (default: translate-cli's)",
    )
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated systems not to run: "
        "ours-unpacked,ours-int8,ours-int8-unfused,transformers,ctranslate2,ctranslate2-int8",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--precision",
        choices=list(COMPUTE_TYPES),
        default="32-true",
        help="as translate-cli's --precision: autocast for ours and transformers, CTranslate2's "
        "compute type to match (default 32-true)",
    )
    parser.add_argument(
        "--ct2-in-process",
        action="store_true",
        help="CTranslate2 in this process, beside ours (as before 2026-11-25): shows how two OpenMP "
        "runtimes in one process slow each other",
    )
    parser.add_argument("--json", default=None, help="also write the rows here as JSON")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    if args.precision == "16-mixed" and args.device == "cpu":
        parser.error("--precision 16-mixed needs --device cuda")

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    prepare_decoding(
        args.device
    )  # as translate-cli does (CTranslate2's processes have their own allocator)
    src_path, ref_path = split_paths(BUNDLED_CORPUS, args.split, "en", "de")
    sources, references = read_lines(src_path), read_lines(ref_path)
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    loaded = load_model(args.checkpoint, args.device)
    batch_tokens = args.batch_tokens or BATCH_TOKENS
    encoded = loaded.vocab.source.encode(sources)
    batches = length_batches([len(ids) for ids in encoded], batch_tokens)
    beams = [int(b) for b in args.beams.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    if args.device == "cuda":  # packing and int8 are CPU paths
        skip |= {"ours-unpacked", "ours-int8", "ours-int8-unfused"}
    unpacked = None if "ours-unpacked" in skip else load_model(args.checkpoint, pack=False)
    int8 = None if "ours-int8" in skip else load_model(args.checkpoint, quantize="int8")
    unfused = None if "ours-int8-unfused" in skip else int8_unfused(args.checkpoint)

    settings = []
    for beam in beams:
        settings.append(Setting("ours", beam, 0.0))
        if "ours-unpacked" not in skip:
            settings.append(Setting("ours-unpacked", beam, 0.0))
        if "transformers" not in skip:
            settings.append(Setting("transformers", beam, 0.0))
        if "ctranslate2" not in skip:
            settings.append(Setting("ctranslate2", beam, 0.0))
        if "ours-int8" not in skip:
            settings.append(Setting("ours-int8", beam, 0.0))
        if "ours-int8-unfused" not in skip:
            settings.append(Setting("ours-int8-unfused", beam, 0.0))
        if "ctranslate2-int8" not in skip:
            settings.append(Setting("ctranslate2-int8", beam, 0.0))
        if beam > 1:
            settings.append(Setting("ours", beam, 1.0))
        settings.append(Setting("ours", beam, 1.0 if beam > 1 else 0.0, restrict=True))

    with tempfile.TemporaryDirectory(prefix="benchmark_translate.") as tmp:
        runners: dict[str, Callable[[Setting], list[str]]] = {
            "ours": lambda setting: ours(loaded, sources, setting, batch_tokens),
            "ours-unpacked": lambda setting: ours(unpacked, sources, setting, batch_tokens),
            "ours-int8": lambda setting: ours(int8, sources, setting, batch_tokens),
            "ours-int8-unfused": lambda setting: ours(unfused, sources, setting, batch_tokens),
        }
        ct2 = {}
        if {"transformers", "ctranslate2", "ctranslate2-int8"} - skip:
            hf_model, ct2 = export_both(
                Path(args.checkpoint),
                Path(tmp),
                args.device,
                args.precision,
                skip,
                loaded,
                encoded,
                batches,
                args.ct2_in_process,
            )
            if hf_model is not None:
                runners["transformers"] = transformers_runner(hf_model, loaded, encoded, batches)
            runners.update(ct2)
        best: dict[str, float] = {}
        outputs: dict[str, list[str]] = {}
        for repeat in range(args.repeats):
            for setting in settings:
                if args.device == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                with autocast(
                    args.device, args.precision if setting.system in AUTOCAST_SYSTEMS else "32-true"
                ):
                    texts = runners[setting.system](setting)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                elapsed = time.perf_counter() - start
                best[setting.label] = min(elapsed, best.get(setting.label, float("inf")))
                outputs[setting.label] = texts
                print(
                    f"run {repeat + 1}/{args.repeats}: {setting.label}: {elapsed:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
        for worker in ct2.values():
            if isinstance(worker, IsolatedCTranslate2):
                worker.close()

    limits = [batch_limits(loaded, encoded, [i]) for i in range(len(encoded))]
    rows = []
    for setting in settings:
        texts = outputs[setting.label]
        tokens = sum(len(ids) + 1 for ids in loaded.vocab.target.encode(texts))
        scores = corpus_scores(texts, references)
        mine = outputs[Setting("ours", setting.beam, setting.length_penalty).label]
        compared = not (setting.system == "ours" and not setting.restrict)
        same = sum(a == b for a, b in zip(texts, mine)) if compared else None
        at_limit = (
            sum(
                a != b and len(ids) + 1 >= limit
                for a, b, ids, limit in zip(texts, mine, loaded.vocab.target.encode(mine), limits)
            )
            if compared
            else None
        )
        seconds = best[setting.label]
        rows.append(
            Row(
                setting.system,
                setting.beam,
                setting.length_penalty,
                setting.restrict,
                seconds,
                len(sources) / seconds,
                tokens / seconds,
                scores.bleu,
                scores.chrf,
                same,
                at_limit,
                len(sources),
            )
        )
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{args.threads} thread(s)"
    print(
        f"{len(sources)} sentences of the {args.split} split, {where}, {args.precision}, "
        f"batches of {batch_tokens} source tokens, best of {args.repeats}; {torch.__version__} torch"
    )
    print(markdown(rows))
    print(f"BLEU signature: {scores.bleu_signature}")
    print(
        f"model in memory: float32 {linear_bytes(loaded.model) / 2**20:.1f} MiB"
        + ("" if int8 is None else f", int8 {linear_bytes(int8.model) / 2**20:.1f} MiB")
        + f"; checkpoint on disk {Path(args.checkpoint).stat().st_size / 2**20:.1f} MiB"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
