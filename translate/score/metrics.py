"""Corpus and sentence scores with sacrebleu, on detokenized text, with the signatures that make
them comparable: BLEU, chrF2, chrF2++ and TER, against one reference or several; and the share
of protected tokens kept (copy, translate/score/copy_rate.py), which needs the source lines."""

from __future__ import annotations

from dataclasses import dataclass

from translate.errors import UsageError
from translate.text.glossary import Glossary
from translate.text.language_id import base_language

METRICS = ("bleu", "chrf", "chrf++", "ter", "copy", "digits", "terms")  # as --metrics spells them
# Those that read the source lines (translate/score/copy_rate.py, term_use.py): not sacrebleu's,
# no paired test
SOURCE_METRICS = ("copy", "digits", "terms")
DEFAULT_METRICS = ("bleu", "chrf")
LOWER_IS_BETTER = frozenset({"ter"})
# sacrebleu's names; copy: protected tokens kept (translate/score/copy_rate.py)
DISPLAY_NAMES = {
    "bleu": "BLEU",
    "chrf": "chrF2",
    "chrf++": "chrF2++",
    "ter": "TER",
    "copy": "copy",
    "digits": "digits",
    "terms": "terms",
}
SACREBLEU_METRICS = ("bleu", "chrf", "chrf++", "ter")

# sacrebleu's tokenizers for languages written without spaces; 13a for every other language.
BLEU_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}


def bleu_tokenizer(target_lang: str | None) -> str:
    """The BLEU tokenizer for references in `target_lang` (`zh-CN` → zh, ja → ja-mecab, ...)."""
    return BLEU_TOKENIZERS.get(base_language(target_lang or ""), "13a")


def make_metric(name: str, target_lang: str | None, sentence: bool = False):
    """sacrebleu's metric object for `name`, tokenizing as `target_lang` needs; `sentence`:
    BLEU with effective order, as sacrebleu scores a single sentence."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    tokenizer = bleu_tokenizer(target_lang)
    try:
        if name == "bleu":
            return BLEU(tokenize=tokenizer, effective_order=sentence)
    except (ImportError, RuntimeError) as error:
        raise UsageError(
            f"BLEU for {target_lang} uses sacrebleu's {tokenizer} tokenizer, which needs its "
            f"package ({error}): pip install -e '.[multilingual]'"
        ) from None
    if name in ("chrf", "chrf++"):
        return CHRF(word_order=2 if name == "chrf++" else 0)
    if name == "ter":
        return TER(asian_support=base_language(target_lang or "") in BLEU_TOKENIZERS)
    raise UsageError(f"unknown metric {name!r}; choose from {','.join(SACREBLEU_METRICS)}")


def bleu_statistics(metric, hypotheses: list[str], references: list[str]) -> list[int]:
    """sacrebleu's sufficient statistics of corpus BLEU against one reference, from a BLEU
    `metric` of `make_metric` (so tokenized as its language needs): n-gram matches and totals
    of each order, then the hypotheses' and the references' lengths. Summed over parts of a
    corpus (batches, ranks) they give `bleu_of_statistics` the corpus's own BLEU."""
    score = metric.corpus_score(hypotheses, [references])
    return [*score.counts, *score.totals, score.sys_len, score.ref_len]


def bleu_of_statistics(metric, statistics: list[int]) -> float:
    """Corpus BLEU from summed `bleu_statistics`, smoothed as `metric` smooths."""
    order = (len(statistics) - 2) // 2
    return metric.compute_bleu(
        statistics[:order],
        statistics[order : 2 * order],
        statistics[-2],
        statistics[-1],
        smooth_method=metric.smooth_method,
        smooth_value=metric.smooth_value,
        effective_order=metric.effective_order,
        max_ngram_order=order,
    ).score


@dataclass(frozen=True)
class MetricScore:
    metric: str  # as --metrics spells it
    score: float
    signature: str
    detail: str  # sacrebleu's line: BLEU's n-gram precisions and brevity penalty, ...
    brevity_penalty: float | None = None  # BLEU only


def check_references(
    hypotheses: list[str], references: list[list[str]], names: tuple[str, list[str]]
) -> None:
    """Every hypothesis needs a line in every reference, and something must be scored."""
    hypotheses_name, references_names = names
    for reference, name in zip(references, references_names, strict=True):
        if len(hypotheses) != len(reference):
            raise UsageError(
                f"{hypotheses_name} has {len(hypotheses)} lines but {name} has "
                f"{len(reference)}: every line needs one reference"
            )
    if not any(line.strip() for reference in references for line in reference):
        first = references[0] if references else []
        what = "no lines" if not first else f"{len(first)} lines, all of them empty"
        raise UsageError(f"nothing to score: {', '.join(references_names)} has {what}")


class SourcesNeededError(UsageError):
    """A metric (`metric`) that reads the source lines, asked for where there are none."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        super().__init__(
            f"{metric} looks for the source's protected tokens or digits in the translation: give "
            "the source lines"
        )


def needs_sources(
    metrics: tuple[str, ...], sources: list[str] | None, glossary: Glossary | None = None
) -> None:
    for metric in SOURCE_METRICS:
        if metric in metrics and sources is None:
            raise SourcesNeededError(metric)
    if "terms" in metrics and glossary is None:
        raise UsageError("--metrics terms counts a glossary's terms: give --glossary FILE")


def score_corpus(
    hypotheses: list[str],
    references: list[list[str]],
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    target_lang: str | None = None,
    names: tuple[str, list[str]] = ("the hypotheses", ["the references"]),
    sources: list[str] | None = None,
    glossary: Glossary | None = None,
) -> list[MetricScore]:
    """Each metric's corpus score against every reference (one list of lines per reference);
    copy and digits need the `sources`, terms the `glossary` too."""
    check_references(hypotheses, references, names)
    needs_sources(metrics, sources, glossary)
    scores = []
    for name in metrics:
        if name == "terms":
            from translate.score.term_use import SIGNATURE as TERMS_SIGNATURE
            from translate.score.term_use import term_use

            used = term_use(glossary, sources, hypotheses)
            scores.append(MetricScore(name, used.score, TERMS_SIGNATURE, used.detail()))
            continue
        if name == "copy":
            from translate.score.copy_rate import SIGNATURE, copy_score

            kept = copy_score(sources, hypotheses, references)
            scores.append(MetricScore(name, kept.score, SIGNATURE, kept.detail()))
            continue
        if name == "digits":
            from translate.score.copy_rate import DIGITS_SIGNATURE, digit_score

            runs = digit_score(sources, hypotheses)
            scores.append(MetricScore(name, runs.score, DIGITS_SIGNATURE, runs.detail()))
            continue
        metric = make_metric(name, target_lang)
        score = metric.corpus_score(hypotheses, references)
        scores.append(
            MetricScore(
                metric=name,
                score=score.score,
                signature=str(metric.get_signature()),
                detail=str(score),
                brevity_penalty=getattr(score, "bp", None),
            )
        )
    return scores


def sentence_scores(
    hypotheses: list[str],
    references: list[list[str]],
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    target_lang: str | None = None,
    sources: list[str] | None = None,
    glossary: Glossary | None = None,
) -> dict[str, list]:
    """Each metric's score of every sentence alone (sacrebleu's sentence_score); for copy, each
    line's `LineCopy` (its score None where nothing counts), and alike for digits and terms."""
    needs_sources(metrics, sources, glossary)
    scores = {}
    for name in metrics:
        if name == "terms":
            from translate.score.term_use import line_terms

            scores[name] = [
                line_terms(glossary, s, h) for s, h in zip(sources, hypotheses, strict=True)
            ]
            continue
        if name == "copy":
            from translate.score.copy_rate import line_copy

            scores[name] = [
                line_copy(source, hypothesis, [reference[i] for reference in references])
                for i, (source, hypothesis) in enumerate(zip(sources, hypotheses, strict=True))
            ]
            continue
        if name == "digits":
            from translate.score.copy_rate import line_digits

            scores[name] = [line_digits(s, h) for s, h in zip(sources, hypotheses, strict=True)]
            continue
        metric = make_metric(name, target_lang, sentence=True)
        scores[name] = [
            metric.sentence_score(hypothesis, [reference[i] for reference in references]).score
            for i, hypothesis in enumerate(hypotheses)
        ]
    return scores


@dataclass
class Scores:
    """Corpus BLEU and chrF2, what training, tuning and the benchmarks report."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_detail: str
    brevity_penalty: float = 1.0

    def report(self) -> str:
        return (
            f"BLEU {self.bleu:.2f}  ({self.bleu_detail})\n"
            f"  signature: {self.bleu_signature}\n"
            f"chrF2 {self.chrf:.2f}\n"
            f"  signature: {self.chrf_signature}"
        )


def corpus_scores(
    hypotheses: list[str],
    references: list[str],
    names: tuple[str, str] = ("the hypotheses", "the references"),
    target_lang: str | None = None,
) -> Scores:
    """sacrebleu's corpus BLEU and chrF2 against one reference; `names` (of the hypotheses and
    the references, e.g. their files) are what an error about them says. ja-mecab and
    ko-mecab need their PyPI packages (the multilingual extra)."""
    bleu, chrf = score_corpus(
        hypotheses, [references], ("bleu", "chrf"), target_lang, (names[0], [names[1]])
    )
    return Scores(
        bleu=bleu.score,
        chrf=chrf.score,
        bleu_signature=bleu.signature,
        chrf_signature=chrf.signature,
        bleu_detail=bleu.detail,
        brevity_penalty=bleu.brevity_penalty,
    )
