"""CTranslate2 as the search (`--engine ctranslate2`): a batch of source ids in, each sentence's
hypotheses out, what the PyTorch search (`search.Search`) would give, or the sentence handed back
for that search to answer.

How our settings map onto `Translator.translate_batch`, one to one:
- the beam is `beam_size`; beam 1 is its greedy search, as ours;
- the length penalty: CTranslate2 normalizes by `length ** penalty`, not GNMT's
  `((5 + length) / 6) ** alpha`, so it returns its hypotheses' raw log-probabilities (EOS
  included, as ours), which are ranked here by GNMT, each sentence by its own alpha; at an
  alpha above 0 it searches on until `beam * PATIENCE` have ended, as ours searches on while a
  live hypothesis could still win at that alpha;
- the output limit: each sentence's own (`steps.output_limits`); a call decodes up to its
  longest sentence's, and a hypothesis that runs past its sentence's is cut there, where ours
  ends it by EOS (greedy search writes the same tokens up to it);
- ids never produced (PAD, BOS, a many-to-many model's tags, digits outside the sentinels),
  tokens outside `--restrict-target`'s shortlist, and the sentinels no sentence of the call
  holds are `suppress_sequences` of one token (one call a batch and shortlist);
- the target tag a decoder starts from is the call's target prefix (the converted model starts
  from it; `ctranslate2_model.ctranslate2_spec`).

What it cannot hold inside its search is our rule that each sentinel of a source is written
exactly once (`steps.SentinelRule`): every hypothesis is checked after, and the best ones that
keep the rule are taken. Where none does, the best is repaired (`CTranslate2Search._repaired`):
the search goes on from the prefix before its first token the rule forbids, under the rule as
far as one call's settings hold it (the sentinels not owed suppressed; while one is owed, the
end suppressed and the owed ones its end tokens, so that it stops at the first it writes and
goes on from there; once they need every token left, nothing else allowed); for greedy search
that is ours exactly. A sentence still unmended after `REPAIRS` calls, or one of an n-best list
that too few keep, is handed back (`Counts.handed_back`).

Where the answers still differ from ours:
- beam search's stopping rule: CTranslate2 stops a sentence once `beam * PATIENCE` hypotheses
  have ended (at alpha 0 once its best candidate ends, and `beam` have), ours once no live
  hypothesis can beat the `beam`-th finished one at its length penalty;
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


# Beam search at a length penalty: CTranslate2 ends a sentence's search once its best candidate
# ends where its own penalty is 0, which at GNMT's penalty misses the longer translations ours
# finds; at any other penalty it goes on until `beam * PATIENCE` hypotheses have ended, all
# returned to be ranked by GNMT. Its penalty, `_GOING_ON`, divides the scores by
# `length ** _GOING_ON`, undone in `CTranslate2Search._searched`.
PATIENCE = 2
_GOING_ON = 1e-6

# The calls of repair (`CTranslate2Search._repaired`) before a sentence is handed back.
REPAIRS = 8


@dataclass
class Counts:
    """Sentences answered by CTranslate2 (`repaired`: of them, those whose first answer broke the
    sentinel rule, `CTranslate2Search._repaired`), and those handed back to the PyTorch search."""

    answered: int = 0
    repaired: int = 0
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


def load_translator(
    directory: Path, compute_type: str = "float32", threads: int = 1, device: str = "cpu"
):
    """A `ctranslate2.Translator` of the converted model in `directory` on `device`, one batch at
    a time on `threads` threads, with `compute_type` ("float32" or "int8" on the CPU) weights.

    Torch's thread count is left as it was: creating a translator can change the OpenMP thread
    count that torch reads in the thread creating it (a torch set to 1 thread was at 2 after a
    translator on 2 threads), and torch's own work would then run on more threads than asked."""
    import torch

    kept = torch.get_num_threads()
    try:
        return require_ctranslate2().Translator(
            str(directory),
            device=device,
            compute_type=compute_type,
            inter_threads=1,
            intra_threads=threads,
        )
    finally:
        torch.set_num_threads(kept)


class CTranslate2Search:
    """A `ctranslate2.Translator` (`load_translator`) of a model over `vocab` with `max_positions`
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
        # One call a shortlist: the tokens suppressed are the call's.
        groups: dict[tuple, list[_Sentence]] = defaultdict(list)
        for position, (key, ids, plan, start, limit) in enumerate(
            zip(keys, sources, plans, starts, limits.tolist())
        ):
            owed = frozenset(slot_of[i] for i in ids if i in slot_of)
            pieces = [self.source_pieces[i] for i in ids[:-1]]  # CTranslate2 appends EOS
            first = self.target_pieces[BOS_ID if start is None else start]
            sentence = _Sentence(position, key, pieces, first, limit, plan, owed)
            groups[id(plan.allowed_tokens)].append(sentence)
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
        never |= {target for target, slot in self._writes.items() if slot not in owed}
        if plan.allowed_tokens is not None:
            never |= set((~plan.allowed_tokens.cpu()).nonzero()[:, 0].tolist())
        return [[self.target_pieces[i]] for i in sorted(never)]

    def _translate(self, sentences: list[_Sentence]) -> list[list[Hypothesis] | None]:
        """Per sentence (of one lane and shortlist), its `n_best` hypotheses, or None where it is
        handed back (counted)."""
        plan = sentences[0].plan
        owed = frozenset().union(*(s.owed for s in sentences))
        suppressed = self._suppressed(plan, owed) or None
        results = self._searched(sentences, [[] for _ in sentences], suppress_sequences=suppressed)
        found = [self._chosen(s, hypotheses) for s, hypotheses in zip(sentences, results)]
        broken = [i for i, hypotheses in enumerate(found) if hypotheses is None]
        if broken and plan.n_best == 1:
            firsts = [self._best(sentences[i], results[i]) for i in broken]
            for i, hypothesis in zip(
                broken, self._repaired([sentences[i] for i in broken], firsts, suppressed)
            ):
                found[i] = None if hypothesis is None else [hypothesis]
        self.counts.handed_back += sum(hypotheses is None for hypotheses in found)
        return found

    def _searched(
        self, sentences: list[_Sentence], prefixes: list[list[int]], **options
    ) -> list[list[tuple[list[str], float]]]:
        """One `translate_batch` call: each sentence searched from its start and prefix at its
        lane's beam, up to the longest limit, with `options`; each one's hypotheses as (pieces,
        the sum of their log-probabilities)."""
        plan = sentences[0].plan
        beam = {"beam_size": plan.beam, "num_hypotheses": plan.beam, "length_penalty": 0.0}
        if plan.beam > 1 and any(s.plan.length_penalty for s in sentences):
            beam.update(
                length_penalty=_GOING_ON, patience=PATIENCE, num_hypotheses=plan.beam * PATIENCE
            )
        results = self.translator.translate_batch(
            [s.source for s in sentences],
            target_prefix=[
                [s.start] + [self.target_pieces[t] for t in prefix]
                for s, prefix in zip(sentences, prefixes)
            ],
            max_decoding_length=max(s.limit for s in sentences),
            min_decoding_length=0,  # ours may end at once
            return_scores=True,
            return_end_token=True,
            **beam,
            **options,
        )
        exponent = beam["length_penalty"]  # CTranslate2 divided by length ** exponent
        return [
            [
                (pieces, score * len(pieces) ** exponent)
                for pieces, score in zip(r.hypotheses, r.scores)
            ]
            for r in results
        ]

    def _best(self, sentence: _Sentence, hypotheses: list[tuple[list[str], float]]) -> Hypothesis:
        """A call's best hypothesis for `sentence` by GNMT, whatever the sentinel rule."""
        ranked = [self._hypothesis(sentence, pieces, log_prob) for pieces, log_prob in hypotheses]
        return max(ranked, key=lambda h: h.score)

    def _hypothesis(self, sentence: _Sentence, tokens: list[str], log_prob: float) -> Hypothesis:
        """CTranslate2's pieces (an end token included or not) as a hypothesis of `sentence`,
        cut at its limit where it runs past it (what ours writes before the EOS of its limit)."""
        ended = bool(tokens) and tokens[-1] == self.end
        ids = [self.target_ids[p] for p in (tokens[:-1] if ended else tokens)]
        return self._scored(sentence, ids[: sentence.limit - 1], log_prob)

    def _scored(self, sentence: _Sentence, ids: list[int], log_prob: float) -> Hypothesis:
        """`ids` (EOS left out) of `sentence`, whose tokens and EOS sum to `log_prob`, scored by
        GNMT at its plan's alpha."""
        score = log_prob / length_penalty(len(ids) + 1, sentence.plan.length_penalty)
        return Hypothesis(ids, score, log_prob)

    def _chosen(
        self, sentence: _Sentence, hypotheses: list[tuple[list[str], float]]
    ) -> list[Hypothesis] | None:
        """A sentence's `n_best` best hypotheses by GNMT that keep the sentinel rule, each cut at
        its limit where it runs past it (ours ends there), or None where fewer than `n_best`
        keep the rule."""
        ranked = [self._hypothesis(sentence, pieces, log_prob) for pieces, log_prob in hypotheses]
        kept = [h for h in ranked if self._keeps_sentinels(h.tokens, sentence.owed)]
        if len(kept) < sentence.plan.n_best:
            return None
        return sorted(kept, key=lambda h: -h.score)[: sentence.plan.n_best]

    def _repaired(
        self, sentences: list[_Sentence], found: list[Hypothesis], suppressed
    ) -> list[Hypothesis | None]:
        """Greedy search under the sentinel rule, as ours searches, for sentences whose greedy
        output (`found`) breaks it: the search goes on from the prefix before the first token
        the rule forbids (`_continued`), holding the rule up to the next owed sentinel, and on
        from each until none is owed; the rest is checked again, `REPAIRS` calls at most, None
        where they run out. The log-probabilities of those repaired are scored over the whole
        vocabulary, as ours."""
        done: list[Hypothesis | None] = [None] * len(sentences)
        pending = {i: (hypothesis, True) for i, hypothesis in enumerate(found)}
        for round_ in range(REPAIRS + 1):
            going_on = {}
            for i, (hypothesis, ended) in pending.items():
                at = len(hypothesis.tokens)
                if ended:
                    at = self._first_forbidden(sentences[i], hypothesis.tokens)
                    if at is None:
                        done[i] = hypothesis
                if at is not None:
                    going_on[i] = hypothesis.tokens[:at]
            if not going_on or round_ == REPAIRS:
                break
            going = self._continued(
                [sentences[i] for i in going_on], list(going_on.values()), suppressed
            )
            pending = dict(zip(going_on, going))
        repaired = [h is not None and h is not found[i] for i, h in enumerate(done)]
        self.counts.repaired += sum(repaired)
        return self._rescored(sentences, done, repaired)

    def _owed_after(self, sentence: _Sentence, prefix: list[int]) -> tuple[set, int]:
        """The sentinels `sentence` still owes after `prefix`, and the tokens it may write
        before only EOS may follow."""
        written = {self._writes.get(token) for token in prefix}
        return set(sentence.owed) - written, sentence.limit - len(prefix) - 1

    def _continued(
        self, sentences: list[_Sentence], prefixes: list[list[int]], suppressed
    ) -> list[tuple[Hypothesis, bool]]:
        """The search (greedy, or beam search ranked by GNMT) on from each sentence's prefix,
        as the rule lets it: the sentinels it does not owe suppressed, and while it owes one,
        the end suppressed and its owed sentinels the call's end tokens, so that it stops at the
        first it writes; once the owed ones need every token left, nothing else allowed. One
        call for the sentences alike in that. Each hypothesis, and whether it ended (by the end,
        or at its limit) or stopped at an owed sentinel."""
        found: list[tuple[Hypothesis, bool]] = [None] * len(sentences)  # type: ignore[list-item]
        groups: dict[tuple[frozenset, bool], list[int]] = defaultdict(list)
        for i, (sentence, prefix) in enumerate(zip(sentences, prefixes)):
            remaining, left = self._owed_after(sentence, prefix)
            groups[frozenset(remaining), len(remaining) >= left].append(i)
        for (remaining, forced), members in groups.items():
            owed = [t for t, slot in self._writes.items() if slot in remaining]
            if forced:
                allowed = set(owed or [EOS_ID])
                never = [t for t in range(len(self.target_pieces)) if t not in allowed]
            else:
                done_with = [t for t, slot in self._writes.items() if slot not in remaining]
                never = done_with + ([EOS_ID] if remaining else [])
            results = self._searched(
                [sentences[i] for i in members],
                [prefixes[i] for i in members],
                end_token=[self.target_pieces[t] for t in owed] if remaining else None,
                suppress_sequences=(suppressed or []) + [[self.target_pieces[t]] for t in never]
                or None,
            )
            for i, hypotheses in zip(members, results):
                best = self._best(sentences[i], hypotheses)
                stopped = bool(best.tokens) and best.tokens[-1] in owed
                found[i] = (best, not stopped or len(best.tokens) >= sentences[i].limit - 1)
        return found

    def _rescored(
        self, sentences: list[_Sentence], found: list[Hypothesis | None], repaired: list[bool]
    ) -> list[Hypothesis | None]:
        """`found`, the log-probabilities of those `repaired` scored again over the whole
        vocabulary (EOS included), in one call."""
        which = [i for i, hypothesis in enumerate(found) if hypothesis is not None and repaired[i]]
        if not which:
            return found
        scored = self.translator.score_batch(
            [sentences[i].source for i in which],
            [
                [sentences[i].start] + [self.target_pieces[t] for t in found[i].tokens]
                for i in which
            ],
        )
        found = list(found)
        for i, result in zip(which, scored):
            found[i] = self._scored(sentences[i], found[i].tokens, sum(result.log_probs))
        return found

    def _first_forbidden(self, sentence: _Sentence, ids: list[int]) -> int | None:
        """The first position where the sentinel rule (`steps.SentinelRule`) forbids what `ids`
        (then EOS) write, or None."""
        remaining = set(sentence.owed)
        for position, token in enumerate([*ids, EOS_ID]):
            if not self._allows(token, remaining, sentence.limit - position - 1):
                return position
            remaining.discard(self._writes.get(token))
        return None

    def _allows(self, token: int, remaining: set, left: int) -> bool:
        """Whether the sentinel rule lets a hypothesis that still owes the sentinels `remaining`,
        and may write `left` tokens before only EOS may follow, write `token`: not a sentinel the
        source lacks or one written already, not EOS while one is owed, nothing but an owed
        sentinel once the owed ones need every token left; at the limit, EOS alone."""
        if left <= 0:
            return token == EOS_ID
        if token == EOS_ID:
            return not remaining
        slot = self._writes.get(token)
        if slot is not None:
            return slot in remaining
        return len(remaining) < left

    def _keeps_sentinels(self, ids: list[int], owed: frozenset) -> bool:
        """Whether `ids` write each sentinel of `owed` exactly once, and no other."""
        written = Counter(self._writes[i] for i in ids if i in self._writes)
        return written == Counter(owed)
