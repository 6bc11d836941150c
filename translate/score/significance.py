"""Systems compared against a baseline on the same references with sacrebleu's paired tests:
bootstrap resampling (each score's 95% interval and a p-value) and approximate randomization
(a second p-value), with sacrebleu's fixed seed ($SACREBLEU_SEED, 12345 unless set)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from translate.score.metrics import DISPLAY_NAMES, LOWER_IS_BETTER, check_references, make_metric

BOOTSTRAP_RESAMPLES = 1000  # sacrebleu's --paired-bs-n default
RANDOMIZATION_TRIALS = 10000  # sacrebleu's --paired-ar-n default


@dataclass(frozen=True)
class Compared:
    """One system's score on one metric; the p-values are against the baseline (None for it)."""

    system: str
    metric: str  # as --metrics spells it
    score: float
    mean: float  # the bootstrap's estimate of the true score
    ci: float  # half the width of the bootstrap's 95% interval: mean ± ci
    p_bootstrap: float | None
    p_randomization: float | None
    # Its output is the baseline's line for line: sacrebleu's tests count no difference as no
    # chance (p at their floor), which says nothing here.
    same_output: bool = False


@dataclass(frozen=True)
class Comparison:
    systems: list[str]  # the first is the baseline
    metrics: tuple[str, ...]
    results: list[Compared]  # system-major
    signatures: list[str]  # one per metric, with the test's seed and sample counts
    bootstrap_resamples: int
    randomization_trials: int

    def result(self, system: str, metric: str) -> Compared:
        return next(r for r in self.results if r.system == system and r.metric == metric)

    def significant(self, system: str, metric: str, level: float = 0.05) -> bool:
        """Both tests reject, at `level`, that the system and the baseline score alike."""
        result = self.result(system, metric)
        if result.same_output:
            return False
        return max(result.p_bootstrap or 1.0, result.p_randomization or 1.0) < level

    def to_json(self) -> str:
        return json.dumps(
            {
                "baseline": self.systems[0],
                "bootstrap_resamples": self.bootstrap_resamples,
                "randomization_trials": self.randomization_trials,
                "signatures": dict(zip(self.metrics, self.signatures, strict=True)),
                "results": [asdict(result) for result in self.results],
            },
            indent=2,
        )

    def table(self) -> str:
        """Markdown: each metric's score, mean ± 95% interval, and both p-values."""
        head = "| system | " + " | ".join(
            f"{DISPLAY_NAMES[name]}{' (lower is better)' if name in LOWER_IS_BETTER else ''} | p (bs) | p (ar)"
            for name in self.metrics
        )
        rule = "|---|" + "---:|---:|---:|" * len(self.metrics)
        rows = [head + " |", rule]
        for index, system in enumerate(self.systems):
            cells = [("baseline: " if index == 0 else "") + system]
            for metric in self.metrics:
                r = self.result(system, metric)
                cells.append(f"{r.score:.2f} ({r.mean:.2f} ± {r.ci:.2f})")
                if r.same_output:
                    cells.extend(("the baseline's output", ""))
                    continue
                cells.extend(
                    "" if p is None else f"{p:.4f}{' *' if p < 0.05 else ''}"
                    for p in (r.p_bootstrap, r.p_randomization)
                )
            rows.append("| " + " | ".join(cells) + " |")
        notes = [
            "",
            f"score (bootstrap mean ± 95% interval, {self.bootstrap_resamples:,} resamples); "
            f"p against the baseline: paired bootstrap (bs) and approximate randomization (ar, "
            f"{self.randomization_trials:,} trials); * p < 0.05.",
            "Signatures: " + ", ".join(f"`{s}`" for s in self.signatures),
        ]
        return "\n".join(rows + notes)


def compare(
    systems: list[tuple[str, list[str]]],
    references: list[list[str]],
    metrics: tuple[str, ...],
    target_lang: str | None = None,
    reference_names: list[str] | None = None,
) -> Comparison:
    """sacrebleu's PairedTest, once with bootstrap resampling and once with approximate
    randomization, over the same systems (named hypotheses, the baseline first)."""
    import logging

    from sacrebleu.significance import PairedTest

    names = reference_names or [f"reference {i + 1}" for i in range(len(references))]
    for name, hypotheses in systems:
        check_references(hypotheses, references, (name, names))
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)
    runs = {}
    signatures = []
    for test, samples in (("bs", BOOTSTRAP_RESAMPLES), ("ar", RANDOMIZATION_TRIALS)):
        metric_objects = {name: make_metric(name, target_lang) for name in metrics}
        test_signatures, scores = PairedTest(
            systems,
            metric_objects,
            references,
            test_type=test,
            n_samples=samples,
            n_ar_confidence=-1,
        )()
        runs[test] = [results for key, results in scores.items() if key != "System"]
        if test == "bs":
            signatures = [str(signature.format()) for signature in test_signatures.values()]
    results = []
    for index, (name, hypotheses) in enumerate(systems):
        for metric, bootstrap_run, randomization_run in zip(
            metrics, runs["bs"], runs["ar"], strict=True
        ):
            bootstrap, randomization = bootstrap_run[index], randomization_run[index]
            results.append(
                Compared(
                    system=name,
                    metric=metric,
                    score=bootstrap.score,
                    mean=float(bootstrap.mean),
                    ci=float(bootstrap.ci),
                    p_bootstrap=bootstrap.p_value,
                    p_randomization=randomization.p_value,
                    same_output=index > 0 and hypotheses == systems[0][1],
                )
            )
    return Comparison(
        systems=[name for name, _ in systems],
        metrics=metrics,
        results=results,
        signatures=signatures,
        bootstrap_resamples=BOOTSTRAP_RESAMPLES,
        randomization_trials=RANDOMIZATION_TRIALS,
    )


# --- whether a system's gain over its baseline differs between two test sets ----------------------
@dataclass(frozen=True)
class Contrast:
    """A system and its baseline on one test set (one language), line for line."""

    name: str  # the test set's, e.g. its target language
    baseline: list[str]
    system: list[str]
    references: list[str]
    target_lang: str | None = None


@dataclass(frozen=True)
class Estimate:
    """`observed` with its bootstrap 95% interval [low, high] and the two-sided p of zero."""

    observed: float
    low: float
    high: float
    p: float


@dataclass(frozen=True)
class GainDifference:
    """The first contrast's gain (system minus baseline) minus the second's, in points of the
    metric and relative to each baseline's score."""

    metric: str
    names: tuple[str, str]
    gains: tuple[float, float]
    relative_gains: tuple[float, float]  # each gain over its baseline's score
    absolute: Estimate
    relative: Estimate
    resamples: int


def _resampled_scores(metric, hypotheses: list[str], references: list[str], indices) -> list:
    """The corpus score of each resample (a row of `indices`), from sacrebleu's sufficient
    statistics, as its own paired bootstrap computes them; the full corpus's score first."""
    import numpy as np

    stats = np.array(metric._extract_corpus_statistics(hypotheses, [references]), dtype="float64")
    full = metric._compute_score_from_stats(stats.sum(0)).score
    return [full, *(metric._compute_score_from_stats(stats[row].sum(0)).score for row in indices)]


def _estimate(samples, observed: float) -> Estimate:
    """The percentile interval, and the two-sided p of the resampled statistics shifted to mean
    zero (the null) reaching |observed|: the shift test, stricter than sacrebleu's, which centres
    the resampled |statistic| instead and so gives a smaller p away from zero."""
    import numpy as np

    samples = np.asarray(samples)
    shifted = np.abs(samples - samples.mean())
    p = (int(np.sum(shifted >= abs(observed))) + 1) / (len(samples) + 1)
    low, high = np.percentile(samples, [2.5, 97.5])
    return Estimate(float(observed), float(low), float(high), p)


def gain_difference(
    first: Contrast, second: Contrast, metric: str, resamples: int = BOOTSTRAP_RESAMPLES
) -> GainDifference:
    """Paired bootstrap over lines shared by both test sets (line i of one is line i of the other,
    as in a multi-way corpus): each resample draws the same lines from both, so what the two
    share (a hard source sentence) cancels. Seeded as sacrebleu's tests are."""
    import os

    import numpy as np

    lines = {len(part) for c in (first, second) for part in (c.baseline, c.system, c.references)}
    if len(lines) != 1:
        raise ValueError(
            f"{first.name} and {second.name}: baselines, systems and references must have one "
            f"line count to be paired line by line (got {sorted(lines)})"
        )
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    rng = np.random.default_rng(None if seed.lower() == "none" else int(seed))
    count = lines.pop()
    indices = rng.choice(count, size=(resamples, count), replace=True)
    gains, relative = [], []
    for contrast in (first, second):
        scorer = make_metric(metric, contrast.target_lang)
        base = np.array(_resampled_scores(scorer, contrast.baseline, contrast.references, indices))
        system = np.array(_resampled_scores(scorer, contrast.system, contrast.references, indices))
        gains.append(system - base)
        relative.append((system - base) / base)
    absolute, ratio = gains[0] - gains[1], relative[0] - relative[1]
    return GainDifference(
        metric=metric,
        names=(first.name, second.name),
        gains=(float(gains[0][0]), float(gains[1][0])),
        relative_gains=(float(relative[0][0]), float(relative[1][0])),
        absolute=_estimate(absolute[1:], absolute[0]),
        relative=_estimate(ratio[1:], ratio[0]),
        resamples=resamples,
    )
