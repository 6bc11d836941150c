"""translate-serve's Prometheus metrics: requests by path and status, batches, model time."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from translate.serve.schema import ROUTES, TRANSLATE_ROUTES


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()  # one per app: tests build several apps in one process
        self.requests = Counter(
            "translate_requests",
            "HTTP requests by path and status",
            ["path", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "translate_request_seconds",
            "request latency, /translate",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.sentences = Counter(
            "translate_sentences", "sentences translated by the model", registry=self.registry
        )
        self.tokens = Counter(
            "translate_source_tokens", "source tokens translated", registry=self.registry
        )
        self.batch_size = Histogram(
            "translate_batch_sentences",
            "sentences per batch",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "translate_queued_sentences",
            "sentences sent to the model and not yet answered",
            registry=self.registry,
        )
        self.cache_lookups = Counter(
            "translate_cache_lookups",
            "lines looked up in the answer cache (--cache-entries), by result: hit or miss",
            ["result"],
            registry=self.registry,
        )
        self.cache_entries = Gauge(
            "translate_cache_entries", "lines the answer cache holds", registry=self.registry
        )
        # Its rate is the model's utilisation: how much of the time it had a batch to translate.
        self.model_seconds = Counter(
            "translate_model_seconds",
            "seconds the model spent translating batches",
            registry=self.registry,
        )

    def looked_up(self, hits: int, misses: int) -> None:
        """Lines looked up in the answer cache: `hits` answered from it, `misses` not."""
        self.cache_lookups.labels("hit").inc(hits)
        self.cache_lookups.labels("miss").inc(misses)

    def batch(
        self, sentences: int, tokens: int, seconds: float, searching: int | None = None
    ) -> None:
        """A batch translated; with continuous batching, a request of `sentences` lines answered,
        `searching` the most lines the running searches held since the answer before (the batch
        size; 0, not observed, for the answers after the first of one step) and `seconds` the
        model's work since then."""
        self.sentences.inc(sentences)
        self.tokens.inc(tokens)
        if searching is None:
            self.batch_size.observe(sentences)
        elif searching:
            self.batch_size.observe(searching)
        self.model_seconds.inc(seconds)

    def request(self, path: str, status: int, seconds: float) -> None:
        # Bounded label values: an unknown path counts as "other".
        self.requests.labels(path if path in ROUTES else "other", str(status)).inc()
        if path in TRANSLATE_ROUTES:
            self.latency.observe(seconds)
