"""A distilled student against its teacher: `configs/student.yaml` (6 encoder layers, 1 decoder
layer, the default's width) trained at `make train`'s budget on the teacher's translations of
the bundled corpus (scripts/distill_corpus.py) and on the original targets, three seeds each.

    python scripts/studies/student_study.py --teacher runs/default/checkpoints/last.ckpt

Every model is scored on the bundled test split with its own tuned search (beam 5), with
paired tests (sacrebleu's paired bootstrap and approximate randomization) against the teacher,
and each distilled student against the student of the same seed trained on the original
targets. Runs, translations and the distilled corpus already in --out are reused, so a stopped
study continues where it stopped. Writes OUT/report.md and prints it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from study_runs import REPO, train, translated, write_report

from translate.score.significance import compare
from translate.text.corpus import BUNDLED_CORPUS, read_lines

CONFIGS = ["--config", str(REPO / "configs" / "default.yaml")]
CONFIGS += ["--config", str(REPO / "configs" / "student.yaml")]


def scores(comparison, name: str) -> tuple[float, float]:
    return tuple(comparison.result(name, metric).score for metric in ("bleu", "chrf"))


def spread(values: tuple[float, ...]) -> str:
    """Mean (sample standard deviation)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ({sd:.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("runs/student-study"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    distilled = args.out / "distilled"
    if not (distilled / "train.de.gz").is_file():
        distill = [sys.executable, str(REPO / "scripts" / "distill_corpus.py")]
        distill += ["--teacher", str(args.teacher), "--out", str(distilled), "--", "--quiet"]
        subprocess.run(distill, check=True)
    corpora = {"distilled": distilled, "original": BUNDLED_CORPUS}
    systems = {"teacher": args.teacher}
    for seed in args.seeds:
        for targets, corpus in corpora.items():
            systems[f"student, {targets}, seed {seed}"] = train(
                args.out / f"{targets}-{seed}",
                [*CONFIGS, "--data.corpus_dir", str(corpus), "--seed_everything", str(seed),
                 "--data.seed", str(seed)],
            )  # fmt: skip
    references = [read_lines(BUNDLED_CORPUS / "test.de.gz")]
    hypotheses = {
        name: translated(path, BUNDLED_CORPUS, args.out / f"{name.replace(', ', '-').replace(' ', '')}.de")
        for name, path in systems.items()
    }  # fmt: skip
    against_teacher = compare(list(hypotheses.items()), references, ("bleu", "chrf"), "de")
    report = [
        f"Teacher: `{args.teacher}`. Students: configs/default.yaml + configs/student.yaml, "
        f"seeds {', '.join(map(str, args.seeds))}; bundled test split, {len(references[0]):,} lines.",
        "",
        "### Against the teacher",
        "",
        against_teacher.table(),
        "",
        "### Distilled against original targets, seed by seed",
    ]
    for seed in args.seeds:
        pair = [
            (name, hypotheses[name])
            for name in (f"student, original, seed {seed}", f"student, distilled, seed {seed}")
        ]
        report += ["", compare(pair, references, ("bleu", "chrf"), "de").table()]
    report += ["", "| students | BLEU mean (sd) | chrF2 mean (sd) |", "|---|---:|---:|"]
    for targets in corpora:
        got = [scores(against_teacher, f"student, {targets}, seed {seed}") for seed in args.seeds]
        bleu, chrf = zip(*got)
        report.append(f"| {targets} targets | {spread(bleu)} | {spread(chrf)} |")
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
