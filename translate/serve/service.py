"""translate-serve's one state object: the model (in a worker process or a thread), the batcher,
readiness and the drain, and what a request needs checked before it joins a batch."""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from functools import cached_property, partial
from importlib import resources
from itertools import islice
from typing import TypeVar

from fastapi import HTTPException
from starlette.datastructures import Headers

from translate.decode import pipeline
from translate.decode.loaded_model import LoadedModel
from translate.decode.settings import SearchSettings
from translate.defaults import LENGTH_PENALTY_RANGE
from translate.errors import UsageError
from translate.serve import worker
from translate.serve.answer_cache import AnswerCache, Answered
from translate.serve.batching import ContinuousBatcher, QueueFull, ShuttingDown
from translate.serve.detection import Detector
from translate.serve.metrics import Metrics
from translate.serve.rate_limit import RateLimiter
from translate.serve.schema import (
    MAX_REQUEST_TERMS,
    MAX_TERM_CHARS,
    LostToken,
    ServeSettings,
    TranslateRequest,
    TranslateResponse,
    invalid_unicode,
)
from translate.serve.supervision import ModelUnavailable
from translate.text.glossary import Glossary
from translate.text.language_codes import LanguageCodes
from translate.text.protected import lost_spans
from translate.text.sentences import is_blank, join_lines, lines_of

T = TypeVar("T")

WARM_UP_LINE = "Hello."

_TAB_OR_BREAK = re.compile(r"[\t\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")  # what a term must not hold


log = logging.getLogger("translate.serve")


@dataclass
class Work:
    """Lines of one search setting on their way through the server: the cache's answers (None
    where it had none), the lines it lacked (each once), and their segments, which the model
    searches (None where it lacked none)."""

    lines: list[str]
    key: SearchSettings
    answered: list[Answered | None]
    missing: list[str]
    segments: pipeline.Segments | None

    @cached_property
    def missing_sentences(self) -> list[int]:
        """Per missing line, the sentences the model searches for it (its segments)."""
        return self.segments.sentences_of_lines() if self.segments is not None else []

    @property
    def sentences(self) -> int:
        """What the request costs: its sentences, as the model would search them (a line's
        segments), those the cache answers included."""
        fresh = dict(zip(self.missing, self.missing_sentences))
        return sum(
            fresh[line] if found is None else found.sentences
            for line, found in zip(self.lines, self.answered)
        )


def header_key(headers: Headers) -> str:
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


def answered_items(
    split: list[tuple[list[str], list[str]]], found: list[pipeline.Translation]
) -> tuple[list[str], list[list[LostToken]], list[float]]:
    """Each item's translation (its lines' joined by its own line breaks), the protected tokens
    of its source that the translation lacks, and the model's confidence in it (its lines'
    together, `pipeline.joint_confidence`)."""
    flat = iter(found)
    per_item = [list(islice(flat, len(lines))) for lines, _ in split]
    texts = [[line.text for line in item] for item in per_item]
    translations = [join_lines(outputs, breaks) for outputs, (_, breaks) in zip(texts, split)]
    lost = [
        [
            LostToken(kind=span.kind, text=span.text)
            for source, output in zip(lines, outputs)
            for span in lost_spans(source, output)
        ]
        for outputs, (lines, _) in zip(texts, split)
    ]
    return translations, lost, [pipeline.joint_confidence(item) for item in per_item]


def tokenise(loaded: LoadedModel, lines: list[str], key: SearchSettings) -> pipeline.Segments:
    """A request's lines cut, tagged and tokenised as translate-cli does
    (`pipeline.source_segments`), once, in the server (the model's process never sees text)."""
    target = pipeline.target_tags_for(loaded, key.target_lang, key.source_lang)
    return pipeline.source_segments(
        loaded, lines, target, key.max_input_tokens, glossary=key.glossary
    )


def detokenise(
    loaded: LoadedModel, segments: pipeline.Segments, found: list, n_best: int
) -> list[pipeline.Translation]:
    """An answer's hypotheses as translations: each line's n-best list, one line's after
    another's."""
    nbest = pipeline.join_segments(loaded, segments, found, n_best)
    return [entry for entries in nbest for entry in entries]


class Service:
    """What the routes share: the model's loaded, the settings, the metrics, the batcher,
    and where the server is in its life (loading, ready, draining)."""

    def __init__(
        self,
        loaded: LoadedModel,
        settings: ServeSettings,
        model_process: worker.ModelSettings | None,
    ) -> None:
        self.loaded, self.settings = loaded, settings
        self.model_process = model_process
        page = resources.files("translate.serve").joinpath("web", "index.html").read_text("utf-8")
        self.page = page.replace("__API_KEY_REQUIRED__", "true" if settings.api_key else "false")
        self.metrics = Metrics()
        self.defaults = loaded.search_defaults()
        # The checkpoint's languages, read once: requests are checked against them.
        self.multilingual = loaded.multilingual()
        self.targets = loaded.data.target_languages
        directions = loaded.data.directions
        self.sources = sorted({source for source, _ in directions})
        # Directions asked for that the model was not trained on, said once each in the log.
        self.zero_shot_said: set[tuple[str | None, str | None]] = set()
        # LibreTranslate's API: the languages under its codes, detection among them, the rate.
        self.directions = set(directions)
        # In the checkpoint's order (not the set's, which varies between runs): the first language
        # is detection's answer where none can be told, and the first of two keeps a shared code.
        languages = list(dict.fromkeys(code for pair in directions for code in pair))
        self.codes = LanguageCodes.of(languages)
        self.detector = Detector(languages)
        self.limiter = RateLimiter(settings.req_limit) if settings.req_limit else None
        self.cache = AnswerCache(settings.cache_entries)
        self.metrics.cache_entries.set_function(lambda: len(self.cache))
        # Reading requests (sentence splitting, HTML, detection, tokenising) and writing answers
        # run here, off the event loop: in one thread, so that the event loop waits for the
        # interpreter lock behind one thread at most, not behind one a request.
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="translate-read")
        self.batcher: ContinuousBatcher | None = None
        self.ready = False
        self.draining = False

    async def start(self) -> None:
        """The batcher and its model (in a process of its own, or without `model_process` in a
        thread of this one) started, and a warm-up line translated: then ready. The model
        process is watched from then on (`model_down`)."""
        model, settings = self.model_process, self.settings
        self.batcher = ContinuousBatcher(
            (
                partial(worker.start_engine, model)
                if model
                else partial(worker.EngineThread, self.loaded, settings.budget)
            ),
            settings.max_queued_sentences,
            on_batch=self.metrics.batch,
            timeout=settings.model_timeout,
        )
        self.batcher.start()
        self.metrics.queue_depth.set_function(lambda: self.batcher.queued_sentences)
        first_target = self.targets[0] if self.multilingual else None
        await self.translated(
            [WARM_UP_LINE],
            self.search_settings(TranslateRequest(text=[], target_lang=first_target)),
        )
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        if self.batcher is not None:
            await self.batcher.stop()
        self.reader.shutdown(wait=False, cancel_futures=True)

    async def off_loop(self, work: Callable[..., T], *args) -> T:
        """`work(*args)` run in the reader thread, the event loop free meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self.reader, partial(work, *args))

    @property
    def model_down(self) -> str | None:
        """Why the model cannot translate now (/ready answers 503 with it): its process is
        loading again, down, given up or not answering; None while it can (or runs in a thread
        of this process)."""
        return self.batcher.down if self.batcher is not None else None

    def begin_drain(self) -> None:
        """On SIGTERM: no new translations, and those in flight get `drain_seconds`; whatever is
        still unanswered then gets 503 with Retry-After (uvicorn would cancel it: a 500)."""
        if self.draining or self.batcher is None:
            return
        self.draining, self.ready = True, False
        message = (
            f"the server is shutting down and did not finish this request within its drain time of "
            f"{self.settings.drain_seconds:g} s (--drain-seconds); retry"
        )
        asyncio.get_running_loop().call_later(
            self.settings.drain_seconds, self.batcher.fail_all, ShuttingDown(message)
        )

    def key_accepted(self, headers: Headers) -> bool:
        """Whether the headers (X-API-Key or Authorization: Bearer) hold the key, or none is set."""
        if self.settings.api_key is None:
            return True
        return self.key_matches(header_key(headers))

    def key_matches(self, given: str) -> bool:
        # compare_digest: the time taken does not reveal how much of the key was right
        return self.settings.api_key is not None and hmac.compare_digest(
            given.encode(), self.settings.api_key.encode()
        )

    def search_settings(self, body: TranslateRequest) -> SearchSettings:
        """The request's search settings, its languages checked against the model's; HTTPException
        (422) naming the field at fault."""
        if body.beam is not None and body.beam > self.settings.max_beam:
            raise HTTPException(
                422,
                f"beam {body.beam} is over this server's limit of {self.settings.max_beam} "
                "(--max-beam)",
            )
        targets, sources = self.targets, self.sources
        if body.target_lang is not None and targets and body.target_lang not in targets:
            raise HTTPException(
                422,
                f"target_lang {body.target_lang!r}: this model translates into "
                f"{', '.join(targets)}",
            )
        if body.source_lang is not None and sources and body.source_lang not in sources:
            raise HTTPException(
                422,
                f"source_lang {body.source_lang!r}: this model translates from "
                f"{', '.join(sources)}",
            )
        if body.target_lang is None and self.multilingual and len(targets) > 1:
            raise HTTPException(
                422,
                f"target_lang is required: this many-to-many model translates into "
                f"{', '.join(targets)}",
            )
        try:
            target = pipeline.target_tags_for(self.loaded, body.target_lang, body.source_lang)
        except pipeline.TargetLanguageError as fault:  # the checks above should leave none
            field = "target_lang" if fault.asked is None else f"target_lang {fault.asked!r}"
            raise HTTPException(422, f"{field}: {fault.reason('this model')}") from None
        if target.zero_shot:
            self.note_zero_shot(body.source_lang, target.target_lang)
        beam, length_penalty = self.defaults.fill(body.beam, body.length_penalty)
        return replace(
            self.settings.search,
            beam=beam,
            length_penalty=length_penalty,
            target_lang=target.target_lang,
            source_lang=body.source_lang,
            glossary=self.request_glossary(body.glossary),
        )

    def request_glossary(self, terms: dict[str, str] | None) -> Glossary | None:
        """The server's glossary (`--glossary`) with a request's own `terms` added, theirs
        winning; HTTPException (422) naming a term that breaks the limits, or where the model
        cannot keep terms."""
        server = self.settings.search.glossary
        if not terms:
            return server
        if len(terms) > MAX_REQUEST_TERMS:
            raise HTTPException(
                422, f"glossary: {len(terms):,} terms, over the limit of {MAX_REQUEST_TERMS:,}"
            )
        pairs = dict(server.pairs if server else ())
        for source, target in terms.items():
            for term in (source, target):
                if not term.strip() or len(term) > MAX_TERM_CHARS or _TAB_OR_BREAK.search(term):
                    raise HTTPException(
                        422,
                        f"glossary: the term {term[:MAX_TERM_CHARS]!r} must hold a character "
                        f"other than a space, and at most {MAX_TERM_CHARS} with no tab or "
                        "line break",
                    )
            pairs[source.strip()] = target.strip()
        glossary = Glossary(tuple(pairs.items()), "glossary")
        try:
            pipeline.check_glossary(self.loaded, glossary)
        except UsageError as fault:
            raise HTTPException(422, str(fault)) from None
        return glossary

    def check_lines(self, text: list[str]) -> list[tuple[list[str], list[str]]]:
        """Each item's lines and the line breaks between them (`lines_of`), within the limits
        that need no tokenising: HTTPException 413 naming the limit, or 422 for an item that is
        not Unicode text."""
        limits = self.settings
        for index, item in enumerate(text):
            position = invalid_unicode(item)
            if position is not None:
                raise HTTPException(
                    422,
                    f"text[{index}] holds a lone surrogate at character {position}, "
                    "which is not Unicode text",
                )
        split = [lines_of(item) for item in text]
        for index, (lines, _) in enumerate(split):
            longest = max(map(len, lines))
            if longest > limits.max_line_chars:
                what = "characters" if len(lines) == 1 else "characters in one of its lines"
                raise HTTPException(
                    413,
                    f"text[{index}] has {longest} {what}; at most {limits.max_line_chars} a line "
                    "(--max-line-chars)",
                )
        # Each line that is not blank is at least one sentence: a request over the limit by its
        # lines alone is refused before it is tokenised.
        self.check_sentences(sum(not is_blank(line) for lines, _ in split for line in lines))
        return split

    def check_sentences(self, sentences: int) -> None:
        """413 for a request of more sentences than it may ever hold: over `--max-sentences`, or
        more than the model's queue holds (`--max-queued-sentences`) or the client may spend in a
        minute (`--req-limit`), which it could never pass, however long it waited."""
        settings = self.settings
        limits = [(settings.max_sentences, "a request (--max-sentences)")]
        limits.append((settings.max_queued_sentences, "queued at once (--max-queued-sentences)"))
        if settings.req_limit:
            limits.append((settings.req_limit, "a minute per client (--req-limit)"))
        for limit, what in limits:
            if sentences > limit:
                raise HTTPException(
                    413,
                    f"the request holds {sentences} sentences (each line's, and each sentence of a "
                    f"line too long for the model apart); at most {limit} {what}",
                )

    def check_rate(self, key: str | None, address: str, cost: int) -> None:
        """429 where the client has spent its rate (--req-limit: sentences a minute): counted by
        its API key where that is the server's, else by its address."""
        client = key if key and self.key_matches(key) else address
        if self.limiter is not None and not self.limiter.allow(client, cost):
            raise HTTPException(429, self.limiter.message())

    def admit(self, works: list[Work], api_key: str | None, address: str) -> None:
        """A request's work within the limits, and charged to its client: 413 or 429."""
        sentences = sum(work.sentences for work in works)
        self.check_sentences(sentences)
        self.check_rate(api_key, address, max(sentences, 1))

    def note_zero_shot(self, source: str | None, target: str | None) -> None:
        """In the log, once a direction: a request for one the model was not trained on."""
        if (source, target) not in self.zero_shot_said:
            self.zero_shot_said.add((source, target))
            log.warning("the model was not trained on %s→%s: translating zero-shot", source, target)

    def libre_settings(self, source: str, target: str, n_best: int = 1) -> SearchSettings:
        """The server's search settings for a LibreTranslate call (clients never choose the beam
        or the length penalty; alternatives widen the beam to hold them). A bilingual model's
        settings are the native API's, so both APIs' lines share one running search."""
        languages = {"target_lang": target, "source_lang": source} if self.multilingual else {}
        if self.multilingual and (source, target) not in self.directions:
            self.note_zero_shot(source, target)
        return replace(
            self.settings.search,
            beam=max(self.defaults.beam, n_best),
            length_penalty=self.defaults.length_penalty,
            n_best=n_best,
            **languages,
        )

    async def translate(
        self, body: TranslateRequest, api_key: str | None, address: str
    ) -> TranslateResponse:
        """Each item's lines translated as translate-cli translates lines, joined again by the
        item's own line breaks; the client (`api_key`, else `address`) charged one a sentence."""
        started = time.perf_counter()
        split = self.check_lines(body.text)
        key = self.search_settings(body)
        work = await self.prepare([line for lines, _ in split for line in lines], key)
        self.admit([work], api_key, address)
        found = await self.run(work)
        # Off the event loop too: the protected spans of a long request take a while to check.
        translations, lost, confidences = await self.off_loop(answered_items, split, found)
        return TranslateResponse(
            translations=translations,
            lost=lost,
            confidences=confidences,
            beam=key.beam,
            length_penalty=key.length_penalty,
            target_lang=key.target_lang,
            seconds=time.perf_counter() - started,
        )

    async def prepare(self, lines: list[str], key: SearchSettings) -> Work:
        """`lines`' work: the answers the cache holds, and the other lines tokenised and cut
        into the model's segments, off the event loop (a long request takes a while)."""
        answered = [self.cache.get(line, key) for line in lines]
        hits = sum(found is not None for found in answered)
        self.metrics.looked_up(hits, len(lines) - hits)
        missing = list(dict.fromkeys(line for line, a in zip(lines, answered) if a is None))
        segments = await self.off_loop(tokenise, self.loaded, missing, key) if missing else None
        return Work(lines, key, answered, missing, segments)

    async def translated(self, lines: list[str], key: SearchSettings) -> list[pipeline.Translation]:
        """`lines` translated by the model, past the cache and charged to no client: the
        server's own warm-up, which must reach the model."""
        segments = await self.off_loop(tokenise, self.loaded, lines, key)
        return await self._search(Work(lines, key, [None] * len(lines), lines, segments))

    async def run(self, work: Work) -> list[pipeline.Translation]:
        """The translations of `work`'s lines, in order (`key.n_best` a line, as
        `translate_lines` gives their texts): the cache's, and the others' from the
        cross-client batches, kept in the cache for the next time. The batcher's refusals are
        HTTP errors (503 with Retry-After: the server is busy now)."""
        each = work.key.n_best
        fresh: dict[str, tuple[pipeline.Translation, ...]] = {}
        if work.segments is not None:
            found = await self._search(work)
            for index, (line, sentences) in enumerate(zip(work.missing, work.missing_sentences)):
                fresh[line] = tuple(found[index * each : (index + 1) * each])
                self.cache.put(line, work.key, Answered(fresh[line], sentences))
        return [
            found
            for line, cached in zip(work.lines, work.answered)
            for found in (cached.translations if cached is not None else fresh[line])
        ]

    async def _search(self, work: Work) -> list[pipeline.Translation]:
        """The missing lines translated by the model: at once in the engine loop, whose queue is
        fair between requests; the batcher's refusals as HTTP errors."""
        lines, key, segments = work.missing, work.key, work.segments
        try:
            found = await self.batcher.submit(lines, key, segments)
        except QueueFull as fault:
            raise HTTPException(
                503, f"the server is busy: {fault}; retry shortly", headers={"Retry-After": "1"}
            ) from None
        except ShuttingDown as fault:
            raise HTTPException(503, str(fault), headers={"Retry-After": "5"}) from None
        except ModelUnavailable as fault:  # the model process stopped, stalled or is down
            raise HTTPException(
                503, str(fault), headers={"Retry-After": str(fault.retry_after)}
            ) from None
        return await self.off_loop(detokenise, self.loaded, segments, found, key.n_best)

    def info(self) -> dict:
        loaded, settings = self.loaded, self.settings
        cfg = loaded.model.cfg
        return {
            "checkpoint": (loaded.path or "")
            .replace("\\", "/")
            .rsplit("/", 1)[-1],  # its name, not where it is
            "checkpoint_sha256": settings.checkpoint_digest,
            "directions": [list(d) for d in loaded.data.directions],
            "target_languages": self.targets
            if self.multilingual
            else ([loaded.data.languages[1]] if loaded.data.languages else []),
            "multilingual": self.multilingual,
            "tie_embeddings": cfg.tie_embeddings,
            "d_model": cfg.d_model,
            "source_vocab_size": len(loaded.vocab.source),
            "target_vocab_size": len(loaded.vocab.target),
            "joint_vocab": loaded.vocab.joint,
            # whether numbers, placeholders and the like are translated as sentinels
            "protects_spans": bool(loaded.data.protect_spans),
            "search_defaults": asdict(self.defaults),
            "limits": {
                "max_sentences": settings.max_sentences,
                "max_queued_sentences": settings.max_queued_sentences,
                "max_line_chars": settings.max_line_chars,
                "char_limit": settings.char_limit,
                "max_body_bytes": settings.max_body_bytes,
                "max_beam": settings.max_beam,
                "length_penalty": list(LENGTH_PENALTY_RANGE),
                "drain_seconds": settings.drain_seconds,
                "req_limit": settings.req_limit,
                "cache_entries": settings.cache_entries,
            },
        }
