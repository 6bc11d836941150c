"""Domain adaptation on LibreOffice's user interface: a trained checkpoint fine-tuned on the
in-domain corpus (`translate/corpora/libreoffice_ui_en_de`, built by scripts/build_ui_corpus.py),
plain and mixed with a share of its original corpus, against training from scratch on the
in-domain corpus for the same number of updates, and against the same fine-tuning on the
original corpus (how much of a gain is only more training).

    python scripts/studies/finetune_study.py --checkpoint runs/default/checkpoints/last.ckpt

Each system is scored on the in-domain test split and on the bundled corpus's test split
(forgetting), with paired tests against the starting checkpoint (sacrebleu's paired bootstrap
and approximate randomization). Runs and translations already in --out are reused, so a
stopped study continues where it stopped. Writes OUT/report.md and prints it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study_runs import REPO, train, translated, write_report

from translate.score.significance import compare
from translate.text.corpus import BUNDLED_CORPUS, read_lines

IN_DOMAIN = REPO / "translate" / "corpora" / "libreoffice_ui_en_de"
TEST_SETS = {"UI strings (in-domain)": IN_DOMAIN, "help pages (bundled)": BUNDLED_CORPUS}


def run(name: str, args: argparse.Namespace, extra: list[str], corpus: Path = IN_DOMAIN) -> Path:
    """One run of the study, `args.steps` updates on `corpus`."""
    return train(
        args.out / name,
        [
            "--config", str(REPO / "configs" / "default.yaml"),
            "--data.corpus_dir", str(corpus),
            "--trainer.max_steps", str(args.steps),
            "--trainer.val_check_interval", str(args.steps),
            *extra,
        ],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the model to start from")
    parser.add_argument("--out", type=Path, default=Path("runs/finetune-study"))
    parser.add_argument("--steps", type=int, default=500, help="updates of every run")
    parser.add_argument("--lr", type=float, default=5e-4, help="fine-tuning's peak learning rate")
    parser.add_argument("--warmup", type=int, default=50, help="fine-tuning's warm-up updates")
    parser.add_argument("--mix-share", type=float, default=0.3, help="of the original corpus")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tuning = ["--model.lr", str(args.lr), "--model.warmup_steps", str(args.warmup),
              "--model.lr_schedule", "linear", "--init_from", args.checkpoint]  # fmt: skip
    systems = {"start": Path(args.checkpoint)}
    systems["fine-tuned"] = run("plain", args, tuning)
    systems[f"fine-tuned, mixed {args.mix_share}"] = run(
        "mixed", args, [*tuning, "--data.mix_share", str(args.mix_share)]
    )
    systems["from scratch"] = run("scratch", args, [])
    # How much of a gain is only more training: the same updates on the original corpus (the
    # last system: the fine-tunings are tested against it too).
    systems["continued on the original corpus"] = run("continued", args, tuning, BUNDLED_CORPUS)
    report = [
        f"Start: `{args.checkpoint}`; {args.steps} updates a run; fine-tuning at peak "
        f"learning rate {args.lr} ({args.warmup} warm-up updates, linear decay); from scratch "
        "as configs/default.yaml.",
    ]
    for test_name, corpus in TEST_SETS.items():
        references = [read_lines(corpus / "test.de.gz")]
        hypotheses = [
            (name, translated(path, corpus, args.out / f"{name.replace(' ', '_').replace(',', '')}"
                              f".{corpus.name}.de"))
            for name, path in systems.items()
        ]  # fmt: skip
        comparison = compare(hypotheses, references, ("bleu", "chrf"), target_lang="de")
        report += ["", f"### {test_name}: {len(references[0]):,} lines", "", comparison.table()]
        # The fine-tunings against the same updates on the original corpus.
        control = [hypotheses[-1], *hypotheses[1:3]]
        report += ["", compare(control, references, ("bleu", "chrf"), target_lang="de").table()]
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
