"""CTranslate2 as the search (`--engine ctranslate2`): a batch of source ids in, each sentence's
hypotheses out, what the PyTorch search (`search.Search`) would give, or the sentence handed back
for that search to answer.

How our settings map onto `Translator.translate_batch`, one to one:
- the beam is `beam_size`; beam 1 is its greedy search, as ours;
- the length penalty: CTranslate2 normalizes by `length ** penalty`, not GNMT's
  `((5 + length) / 6) ** alpha`, so it searches at penalty 0 (raw log-probabilities, EOS
  included, as ours) and returns all `beam` hypotheses, which are ranked here by GNMT, each
  sentence by its own alpha;
- the output limit: each sentence's own (`steps.output_limits`); a call decodes up to its
  longest sentence's, and a hypothesis that runs past its sentence's is cut there, where ours
  ends it by EOS (greedy search writes the same tokens up to it);
- ids never produced (PAD, BOS, a many-to-many model's tags, digits outside the sentinels),
  tokens outside `--restrict-target`'s shortlist, and the sentinels no sentence of the call
  holds are `suppress_sequences` of one token (the sentences that hold sentinels go in a call of
  their own);
- the target tag a decoder starts from is the call's target prefix (the converted model starts
  from it; `ctranslate2_model.ctranslate2_spec`).

What it cannot hold inside its search is our rule that each sentinel of a source is written
exactly once (`steps.SentinelRule`): every hypothesis is checked after, the best ones that keep
the rule are taken, and a sentence with fewer than `n_best` that keep it is handed back
(`Counts.handed_back`).

Where the answers still differ from ours:
- beam search's stopping rule: CTranslate2 stops a sentence once its best candidate ends (and
  `beam` have ended), ours once no live hypothesis can beat the `beam`-th finished one at its
  length penalty; at alpha 0 the two agree;
- scores: CTranslate2's log-probabilities are normalized over the tokens it may write (the
  suppressed ones left out), ours over the whole vocabulary, so its are the same or higher; a
  hypothesis cut at its limit keeps the score of all it wrote.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from translate.decode.settings import SearchPlan
from translate.decode.steps import NEVER_GENERATED, Hypothesis, length_penalty, output_limits
from translate.errors import UsageError
from translate.text.vocab import BOS_ID, EOS_ID, Vocabularies


class CTranslate2Error(UsageError):
    """A model CTranslate2 cannot run as trained, or no ctranslate2 package; the message says
    why and what to do."""


def require_ctranslate2():
    """The ctranslate2 module, or a CTranslate2Error saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise CTranslate2Error(
            "CTranslate2 is not installed: pip install ctranslate2 (it comes with the cpu and serve extras)"
        ) from None
    return ctranslate2


@dataclass
class Counts:
    """Sentences answered by CTranslate2, and those handed back to the PyTorch search (too few of
    their hypotheses wrote each sentinel exactly once)."""

    answered: int = 0
    handed_back: int = 0


@dataclass
class _Sentence:
    position: int  # in the call's sources
    key: Hashable
    source: list[str]  # pieces, without EOS
    start: str  # the decoder's first token: BOS, or a target-language tag
    limit: int  # output tokens at most, EOS included
    plan: SearchPlan
    owed: frozenset = frozenset()  # the sentinels (slots) its source holds


def cpu_translator(directory: Path, compute_type: str = "float32", threads: int = 1):
    """A `ctranslate2.Translator` of the converted model in `directory` on the CPU, one batch at a
    time on `threads` threads, with `compute_type` ("float32" or "int8") weights."""
    return require_ctranslate2().Translator(
        str(directory),
        device="cpu",
        compute_type=compute_type,
        inter_threads=1,
        intra_threads=threads,
    )


class CTranslate2Search:
    """A `ctranslate2.Translator` (`cpu_translator`) of a model over `vocab` with `max_positions`
    positions, searching as `plan`s ask (`search`); `counts` counts what it answered and handed
    back."""

    def __init__(self, translator, vocab: Vocabularies, max_positions: int) -> None:
        self.translator = translator
        self.max_positions = max_positions
        source, target = vocab.source.processor, vocab.target.processor
        self.source_pieces = [source.id_to_piece(i) for i in range(len(vocab.source))]
        self.target_pieces = [target.id_to_piece(i) for i in range(len(vocab.target))]
        self.target_ids = {piece: i for i, piece in enumerate(self.target_pieces)}
        self.end = self.target_pieces[EOS_ID]
        self.counts = Counts()
        self._writes: dict[int, int] = {}  # the current plan's: sentinel target id -> its slot

    def search(
        self,
        keys: Sequence[Hashable],
        sources: Sequence[Sequence[int]],
        plans: Sequence[SearchPlan],
        starts: Sequence[int | None],
    ) -> tuple[list[tuple[Hashable, list[Hypothesis]]], list[int]]:
        """Each sentence (source ids with EOS and any source tag) searched as its plan asks, from
        its start (the decoder's first token in place of BOS; None: BOS); the plans share one lane
        (`SearchPlan.lane`). The answers, (key, the `n_best` best hypotheses), and the positions
        in `sources` of the sentences handed back."""
        lane = plans[0]
        limits = output_limits([len(ids) for ids in sources], plans, self.max_positions)
        slot_of, self._writes = {}, {}
        if lane.sentinels is not None:
            slot_of = dict(zip(lane.sentinels.source, range(len(lane.sentinels.source))))
            self._writes = dict(zip(lane.sentinels.target, lane.sentinels.target_slot))
        # One call for the sentences that owe no sentinel and one for those that do, a shortlist
        # each: the tokens suppressed are the call's.
        groups: dict[tuple, list[_Sentence]] = defaultdict(list)
        for position, (key, ids, plan, start, limit) in enumerate(
            zip(keys, sources, plans, starts, limits.tolist())
        ):
            owed = frozenset(slot_of[i] for i in ids if i in slot_of)
            pieces = [self.source_pieces[i] for i in ids[:-1]]  # CTranslate2 appends EOS
            first = self.target_pieces[BOS_ID if start is None else start]
            sentence = _Sentence(position, key, pieces, first, limit, plan, owed)
            groups[bool(owed), id(plan.allowed_tokens)].append(sentence)
        answers, handed_back = [], []
        for group in groups.values():
            for sentence, hypotheses in zip(group, self._translate(group)):
                if hypotheses is None:
                    handed_back.append(sentence.position)
                else:
                    answers.append((sentence.key, hypotheses))
        self.counts.answered += len(answers)
        return answers, sorted(handed_back)

    def _suppressed(self, plan: SearchPlan, owed: frozenset) -> list[list[str]]:
        """The one-token sequences CTranslate2 must never write for sentences owing at most the
        sentinels `owed`."""
        never = set(NEVER_GENERATED) | set(plan.never)
        if plan.sentinels is not None:
            never |= {
                target
                for target, slot in zip(plan.sentinels.target, plan.sentinels.target_slot)
                if slot not in owed
            }
        if plan.allowed_tokens is not None:
            never |= set((~plan.allowed_tokens.cpu()).nonzero()[:, 0].tolist())
        return [[self.target_pieces[i]] for i in sorted(never)]

    def _translate(self, sentences: list[_Sentence]) -> list[list[Hypothesis] | None]:
        """Per sentence (of one lane and shortlist), its `n_best` hypotheses, or None where it is
        handed back."""
        plan = sentences[0].plan
        owed = frozenset().union(*(s.owed for s in sentences))
        results = self.translator.translate_batch(
            [s.source for s in sentences],
            target_prefix=[[s.start] for s in sentences],
            beam_size=plan.beam,
            num_hypotheses=plan.beam,
            length_penalty=0.0,
            max_decoding_length=max(s.limit for s in sentences),
            return_scores=True,
            return_end_token=True,
            suppress_sequences=self._suppressed(plan, owed) or None,
        )
        return [self._chosen(s, r.hypotheses, r.scores) for s, r in zip(sentences, results)]

    def _chosen(
        self, sentence: _Sentence, pieces: list[list[str]], scores: list[float]
    ) -> list[Hypothesis] | None:
        """A sentence's `n_best` best hypotheses by GNMT that keep the sentinel rule, each cut at
        its limit where it runs past it (ours ends there), or None, counted, where fewer than
        `n_best` keep the rule."""
        plan = sentence.plan
        ranked = []
        for tokens, log_prob in zip(pieces, scores):
            ended = bool(tokens) and tokens[-1] == self.end
            ids = [self.target_ids[p] for p in (tokens[:-1] if ended else tokens)]
            ids = ids[: sentence.limit - 1]  # what ours writes before the EOS of its limit
            score = log_prob / length_penalty(len(ids) + 1, plan.length_penalty)
            ranked.append(Hypothesis(ids, score, log_prob))
        kept = [h for h in ranked if self._keeps_sentinels(h.tokens, sentence.owed)]
        if len(kept) < plan.n_best:
            self.counts.handed_back += 1
            return None
        return sorted(kept, key=lambda h: -h.score)[: plan.n_best]

    def _keeps_sentinels(self, ids: list[int], owed: frozenset) -> bool:
        """Whether `ids` write each sentinel of `owed` exactly once, and no other."""
        written = Counter(self._writes[i] for i in ids if i in self._writes)
        return written == Counter(owed)
