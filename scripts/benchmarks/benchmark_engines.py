"""The two search engines side by side (translate/decode/engine.py), on one device, same lines:
sentences/s of each, whether their translations are the same, and, on CUDA, the host syncs of
the slot engine's steps between two reads (`torch.cuda.set_sync_debug_mode`).

    .venv/bin/python scripts/benchmarks/benchmark_engines.py --checkpoint runs/default/checkpoints/last.ckpt
    python3 scripts/benchmarks/benchmark_engines.py --checkpoint CKPT --device cuda --precision bf16-mixed

The engines alternate within each repeat (cohorts, slots, cohorts, slots, ...), so that a
machine's drift hits both alike; the figure is each engine's best repeat.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from translate.decode import pipeline  # noqa: E402
from translate.decode.device import autocast, prepare_decoding  # noqa: E402
from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.decode.slots import SlotSearch  # noqa: E402
from translate.text.vocab import EOS_ID  # noqa: E402

TEST = REPO / "translate" / "corpora" / "libreoffice_help_en_de" / "test.en.gz"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="32-true", choices=["32-true", "bf16-mixed"])
    parser.add_argument("--lines", type=int, default=0, help="first N test lines (0: all)")
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-tokens", type=int, default=16384)
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args()


def timed(loaded, lines: list[str], settings: SearchSettings, batch_tokens: int):
    sync = torch.cuda.synchronize if loaded.model.output.weight.is_cuda else (lambda: None)
    sync()
    started = time.perf_counter()
    out = pipeline.translate_lines(loaded, lines, settings, batch_tokens)
    sync()
    return time.perf_counter() - started, out


def syncs_per_step(loaded, lines: list[str], beam: int, steps: int = 24) -> dict:
    """Steps of a full slot table with no read in between, under sync debug mode 'warn' counted
    by a handler: how many host syncs the steps make."""
    import warnings

    target = pipeline.target_tags_for(loaded, None)
    plan = pipeline.search_plan(loaded, SearchSettings(beam=beam), target)
    search = SlotSearch(loaded.model, plan, poll_every=10**6)
    sources = [target.prefix + ids + [EOS_ID] for ids in loaded.vocab.source.encode(lines[:64])]
    search.add(range(len(sources)), sources)
    search._fill()  # the join (not counted)
    in_use = max(i for i, o in enumerate(search.occupants) if o is not None) + 1
    cuda = loaded.model.output.weight.is_cuda
    if cuda:
        torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if cuda:
            torch.cuda.set_sync_debug_mode("warn")
        try:
            for step in range(steps):
                search._step(in_use, step + 1)
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode("default")
        # (the mode's own notice that it is a prototype is not a sync)
        syncs = [w for w in caught if "called a synchronizing" in str(w.message)]
        counted = len(syncs) if cuda else None
    where = sorted({str(w.message)[:120] for w in syncs})[:5] if cuda else []
    return {"beam": beam, "steps": steps, "syncs": counted, "examples": where}


def main() -> int:
    args = parse_args()
    prepare_decoding(args.device)
    loaded = load_model(args.checkpoint, args.device)
    with gzip.open(TEST, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    if args.lines:
        lines = lines[: args.lines]
    rows, report = [], {"device": args.device, "precision": args.precision, "lines": len(lines)}
    if args.device == "cuda":
        report["gpu"] = torch.cuda.get_device_name()
    with autocast(args.device, args.precision):
        for beam in [int(b) for b in args.beams.split(",")]:
            base = SearchSettings(beam=beam, length_penalty=1.0)
            best, outputs = {}, {}
            timed(loaded, lines[:64], replace(base, engine="slots"), args.batch_tokens)
            timed(loaded, lines[:64], replace(base, engine="cohorts"), args.batch_tokens)
            for _ in range(args.repeats):
                for engine in ("cohorts", "slots"):
                    seconds, out = timed(
                        loaded, lines, replace(base, engine=engine), args.batch_tokens
                    )
                    best[engine] = min(best.get(engine, float("inf")), seconds)
                    outputs[engine] = out
            same = sum(a == b for a, b in zip(outputs["cohorts"], outputs["slots"]))
            row = {
                "beam": beam,
                "cohorts_sent_per_s": len(lines) / best["cohorts"],
                "slots_sent_per_s": len(lines) / best["slots"],
                "slots_vs_cohorts": best["cohorts"] / best["slots"],
                "identical": same,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        if args.device == "cuda" or args.lines:  # on the CPU only as a check of the path
            report["syncs"] = [syncs_per_step(loaded, lines, beam) for beam in (1, 5)]
            print(json.dumps(report["syncs"]), flush=True)
    report["rows"] = rows
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
