"""What one greedy decoding step costs, by rows decoded: ours against CTranslate2 on the same model.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_step.py --checkpoint runs/default/checkpoints/last.ckpt
    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_step.py --quantize int8     # ours int8 against its int8
    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmarks/benchmark_step.py --batches 500       # each of translate-cli's batches

A batch of `rows` copies of one test sentence cut to `--source-tokens` tokens is translated greedily
twice, to a forced length of `--short` and of `--long` output tokens (ours: EOS blocked until the
length limit; CTranslate2: `min_decoding_length` = `max_decoding_length`); the difference over the
extra steps is the cost of one step at that many rows, with the encoder and every fixed cost
cancelled, and the self-attention cache between `--short` and `--long` steps long. "Its products
alone" times only the step's linear layers on that many rows, the floor of ours. CTranslate2 runs
in a process of its own (scripts/benchmarks/benchmark_translate.py says why). Each time is the best of
`--repeats`, ours and CTranslate2 alternating. With `--batches N`, each of translate-cli's
length-sorted batches of the first N test sentences is decoded greedily alone by both instead:
where in a run the time is lost; then all of them as translate-cli now searches them, each batch
joining one running search (`continuous.search_joined`); last, each batch to one output token
(the encoder and the first step alone).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from translate.decode.continuous import ContinuousGreedySearch, search_batch  # noqa: E402
from translate.decode.device import prepare_decoding  # noqa: E402
from translate.decode.loaded_model import load_model  # noqa: E402
from translate.text.corpus import BUNDLED_CORPUS, read_lines, split_paths  # noqa: E402
from translate.text.vocab import EOS_ID  # noqa: E402


def source_tokens(loaded, count: int) -> list[int]:
    """The first test sentence of at least `count` tokens, cut to `count`."""
    for line in read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0]):
        ids = loaded.vocab.source.encode([line])[0]
        if len(ids) >= count:
            return ids[:count]
    raise SystemExit(f"--source-tokens {count}: no test sentence is that long")


def best_of(repeats: int, run) -> float:
    run()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def ours_step_ms(loaded, ids: list[int], rows: int, short: int, long: int, repeats: int) -> float:
    src = [ids + [EOS_ID]] * rows

    def run(
        steps: int,
    ):  # EOS is never chosen: every row decodes `steps` steps, the last one forced to EOS
        search = ContinuousGreedySearch(loaded.model, 0.0, steps, never=[EOS_ID])
        return lambda: search_batch(search, src)

    return (best_of(repeats, run(long)) - best_of(repeats, run(short))) / (long - short) * 1e3


def products_ms(loaded, rows: int, repeats: int, passes: int = 50) -> float:
    """One step's linear layers alone (each decoder layer's query, key, value and output products of
    self-attention, query and output of cross-attention, the feed-forward pair, then the output
    projection), called as decoding calls them on `rows` rows: the floor of our step."""
    model = loaded.model
    layers = [
        module
        for layer in model.decoder_layers
        for module in (
            layer.self_attn.q_proj,
            layer.self_attn.k_proj,
            layer.self_attn.v_proj,
            layer.self_attn.out_proj,
            layer.cross_attn.q_proj,
            layer.cross_attn.out_proj,
            layer.ffn.linear1,
            layer.ffn.linear2,
        )
    ] + [model.output]
    inputs = [torch.randn(rows, 1, layer.in_features) for layer in layers]

    @torch.inference_mode()
    def run():
        for _ in range(passes):
            for layer, x in zip(layers, inputs):
                layer(x)

    return best_of(repeats, run) / passes * 1e3


def ctranslate2_worker(connection, ct2_dir: str, compute: str, threads: int) -> None:
    """Answers ("step", pieces, rows, short, long, repeats) with ms a step and ("batch", sentences'
    pieces, longest output, repeats) with seconds, as ours are measured."""
    from benchmark_translate import ctranslate2_translator

    ct2 = ctranslate2_translator(ct2_dir, "cpu", compute, threads)
    while (job := connection.recv()) is not None:
        if job[0] == "batch":
            _, sentences, longest, repeats = job  # its lengths leave out the EOS that ours count
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

        def run(steps: int):
            return lambda: ct2.translate_batch(
                [pieces] * rows,
                beam_size=1,
                min_decoding_length=steps - 1,
                max_decoding_length=steps - 1,
                max_batch_size=0,
            )

        connection.send(
            (best_of(repeats, run(long)) - best_of(repeats, run(short))) / (long - short) * 1e3
        )


def by_batch(loaded, connection, sentences: int, repeats: int) -> None:
    """Each of translate-cli's length-sorted batches of the first `sentences` test sentences,
    decoded greedily alone by ours and by CTranslate2 (one length limit a batch, as in
    scripts/benchmarks/benchmark_translate.py); then ours over the same batches joined, as translate-cli."""
    from benchmark_translate import batch_limits

    from translate.decode.continuous import ContinuousGreedySearch, search_joined
    from translate.decode.pipeline import length_batches
    from translate.defaults import BATCH_TOKENS

    config = loaded.training_config
    a, b = config.get("max_len_a", 1.5), config.get("max_len_b", 10)
    lines = read_lines(split_paths(BUNDLED_CORPUS, "test", "en", "de")[0])[:sentences]
    encoded = loaded.vocab.source.encode(lines)
    piece = loaded.vocab.source.processor.id_to_piece
    print(
        "| batch | sentences | longest source | ours s | CTranslate2 s | ours / CTranslate2 (speed) |\n"
        "|---:|---:|---:|---:|---:|---:|"
    )
    totals = [0.0, 0.0]
    for number, batch in enumerate(length_batches([len(ids) for ids in encoded], BATCH_TOKENS), 1):
        src = [encoded[i] + [EOS_ID] for i in batch]
        mine = best_of(
            repeats, lambda: search_batch(ContinuousGreedySearch(loaded.model, a, b), src)
        )
        connection.send(
            (
                "batch",
                [[piece(t) for t in encoded[i]] for i in batch],
                batch_limits(loaded, encoded, batch),
                repeats,
            )
        )
        theirs = connection.recv()
        totals = [totals[0] + mine, totals[1] + theirs]
        print(
            f"| {number} | {len(batch)} | {max(len(encoded[i]) for i in batch)} | {mine:.3f} | {theirs:.3f} | "
            f"{theirs / mine:.2f}x |",
            flush=True,
        )
    print(
        f"| all | {len(lines)} | | {totals[0]:.3f} | {totals[1]:.3f} | {totals[1] / totals[0]:.2f}x |"
    )
    batches = length_batches([len(ids) for ids in encoded], BATCH_TOKENS)

    def joined():  # as translate-cli searches them: one running search, longest first
        search = ContinuousGreedySearch(loaded.model, a, b)
        sources = ((batch, [encoded[i] + [EOS_ID] for i in batch]) for batch in reversed(batches))
        for _ in search_joined(search, sources, BATCH_TOKENS):
            pass

    mine = best_of(repeats, joined)
    print(
        f"| joined, as translate-cli | {len(lines)} | | {mine:.3f} | {totals[1]:.3f} | {totals[1] / mine:.2f}x |"
    )
    totals = [0.0, 0.0]  # the encoder and the first step: each batch to one output token
    for batch in batches:
        src = [encoded[i] + [EOS_ID] for i in batch]
        totals[0] += best_of(
            repeats, lambda: search_batch(ContinuousGreedySearch(loaded.model, 0.0, 1), src)
        )
        connection.send(("batch", [[piece(t) for t in encoded[i]] for i in batch], 2, repeats))
        totals[1] += connection.recv()
    print(
        f"| the encoder and one step | {len(lines)} | | {totals[0]:.3f} | {totals[1]:.3f} | "
        f"{totals[1] / totals[0]:.2f}x |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", default="runs/default/checkpoints/last.ckpt")
    parser.add_argument(
        "--rows", default="1,5,40,136", help="comma-separated rows per step (default: 1,5,40,136)"
    )
    parser.add_argument("--source-tokens", type=int, default=40, help="source length (default: 40)")
    parser.add_argument(
        "--short", type=int, default=20, help="output tokens of the short run (default: 20)"
    )
    parser.add_argument(
        "--long", type=int, default=100, help="output tokens of the long run (default: 100)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs of each; the best counts (default: 3)"
    )
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for both (default: 1)")
    parser.add_argument(
        "--quantize",
        choices=["none", "int8"],
        default="none",
        help="ours as translate-cli's --quantize, CTranslate2 with the matching compute type",
    )
    parser.add_argument(
        "--batches",
        type=int,
        default=0,
        metavar="N",
        help="instead: time each of translate-cli's batches of the first N test sentences",
    )
    args = parser.parse_args(argv)
    if not 0 < args.short < args.long:
        parser.error("--short must be positive and below --long")
    torch.set_num_threads(args.threads)
    prepare_decoding("cpu")  # as translate-cli does
    loaded = load_model(args.checkpoint, quantize=args.quantize)
    if args.long > loaded.model.cfg.max_positions:
        parser.error(
            f"--long {args.long}: the model covers {loaded.model.cfg.max_positions} positions"
        )
    compute = "int8" if args.quantize == "int8" else "float32"

    from translate.export.ctranslate2 import export_ctranslate2

    with tempfile.TemporaryDirectory(prefix="benchmark_step.") as tmp:
        ct2_dir = export_ctranslate2(Path(args.checkpoint), Path(tmp) / "ct2")
        context = multiprocessing.get_context("spawn")
        connection, child = context.Pipe()
        worker = context.Process(
            target=ctranslate2_worker,
            daemon=True,
            args=(child, str(ct2_dir), compute, args.threads),
        )
        worker.start()
        if args.batches:
            print(
                f"the first {args.batches} test sentences in translate-cli's batches, greedy, {args.threads} "
                f"thread(s), {compute}, best of {args.repeats}; torch {torch.__version__}"
            )
            by_batch(loaded, connection, args.batches, args.repeats)
        else:
            ids = source_tokens(loaded, args.source_tokens)
            pieces = [loaded.vocab.source.processor.id_to_piece(token) for token in ids]
            print(
                f"{args.source_tokens} source tokens, steps {args.short} to {args.long}, {args.threads} thread(s), "
                f"{compute}, best of {args.repeats}; torch {torch.__version__}"
            )
            print(
                "| rows | ours ms/step | its products alone | CTranslate2 ms/step | ours / CTranslate2 (speed) |\n"
                "|---:|---:|---:|---:|---:|"
            )
            for rows in (int(r) for r in args.rows.split(",")):
                mine = ours_step_ms(loaded, ids, rows, args.short, args.long, args.repeats)
                floor = products_ms(loaded, rows, args.repeats)
                connection.send(("step", pieces, rows, args.short, args.long, args.repeats))
                theirs = connection.recv()
                print(
                    f"| {rows} | {mine:.3f} | {floor:.3f} | {theirs:.3f} | {theirs / mine:.2f}x |",
                    flush=True,
                )
        connection.send(None)
        worker.join(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
