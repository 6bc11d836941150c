"""Corpus BLEU and chrF with sacrebleu, on detokenized text, with the signatures that make them comparable."""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from translate.errors import UsageError


@dataclass
class Scores:
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


# sacrebleu's tokenizers for languages written without spaces; 13a for every other language.
BLEU_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}


def bleu_tokenizer(target_lang: str | None) -> str:
    """The BLEU tokenizer for references in `target_lang` (`zh-CN` → zh, ja → ja-mecab, ...)."""
    return BLEU_TOKENIZERS.get((target_lang or "").split("-")[0].lower(), "13a")


def corpus_scores(
    hypotheses: list[str],
    references: list[str],
    names: tuple[str, str] = ("the hypotheses", "the references"),
    target_lang: str | None = None,
) -> Scores:
    """sacrebleu's corpus BLEU and chrF2; `names` (of the hypotheses and the references, e.g.
    their files) are what an error about them says. BLEU tokenizes as `target_lang` needs
    (`bleu_tokenizer`); ja-mecab and ko-mecab need their PyPI packages (the multilingual extra)."""
    hypotheses_name, references_name = names
    if len(hypotheses) != len(references):
        raise UsageError(
            f"{hypotheses_name} has {len(hypotheses)} lines but {references_name} has "
            f"{len(references)}: every line needs one reference"
        )
    if not any(reference.strip() for reference in references):
        what = "no lines" if not references else f"{len(references)} lines, all of them empty"
        raise UsageError(f"nothing to score: {references_name} has {what}")
    tokenizer = bleu_tokenizer(target_lang)
    try:
        bleu, chrf = BLEU(tokenize=tokenizer), CHRF()
    except (ImportError, RuntimeError) as error:
        raise UsageError(
            f"BLEU for {target_lang} uses sacrebleu's {tokenizer} tokenizer, which needs its "
            f"package ({error}): pip install -e '.[multilingual]'"
        ) from None
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return Scores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_detail=str(bleu_score),
        brevity_penalty=bleu_score.bp,
    )
