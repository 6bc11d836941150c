"""translate-serve: the API in-process, batching across requests, limits, the API key, metrics,
and the real server on a loopback port (concurrent clients, SIGTERM)."""

import asyncio
import contextlib
import json
import math
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

fastapi = pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
hypothesis = pytest.importorskip("hypothesis")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from processes import (  # noqa: E402
    TRAINING_STACK,
    imported_after,
    process_table,
    served_metric,
    start_server,
    stop,
    wait_until,
)
from queued_engine import QueuedEngine  # noqa: E402
from strategies import ANY_TEXT, JSON_VALUES  # noqa: E402

from translate.decode.loaded_model import ModelShape, load_model  # noqa: E402
from translate.decode.pipeline import Part, Segments, translate_lines, translate_nbest  # noqa: E402
from translate.decode.settings import Budget, SearchSettings  # noqa: E402
from translate.decode.steps import Hypothesis  # noqa: E402
from translate.files import file_digest  # noqa: E402
from translate.serve.app import ServeSettings, create_app  # noqa: E402
from translate.serve.batching import ContinuousBatcher, QueueFull  # noqa: E402
from translate.serve.engine_loop import (  # noqa: E402
    Answer,
    Cancel,
    EngineLoop,
    Join,
    run_engine,
)
from translate.serve.launch import (  # noqa: E402
    free_loopback_port,
    wait_until_ready,
)
from translate.serve.metrics import Metrics  # noqa: E402
from translate.serve.service import detokenise, tokenise  # noqa: E402
from translate.serve.supervision import ModelUnavailable  # noqa: E402
from translate.serve.worker import ONEDNN_CACHES  # noqa: E402
from translate.text.protected import lost_spans  # noqa: E402

LINES = ["Click OK.", "", "Choose Tools - Options.", "\t", "Last line of the test."]


@pytest.fixture(scope="module")
def loaded(checkpoint_path):
    return load_model(checkpoint_path)


@pytest.fixture(scope="module")
def served(checkpoint_path):
    """The checkpoint as translate-serve searches it by default (`--engine auto`: CTranslate2 on
    the CPU where it is installed, converted beside the checkpoint as the server converts it)."""
    from translate.decode.engine import choose_engine
    from translate.decode.settings import EngineChoice

    loaded = load_model(checkpoint_path)
    choose_engine(loaded, EngineChoice("auto"), "cpu")
    return loaded


@pytest.fixture(scope="module")
def ct2_loaded(checkpoint_path, tmp_path_factory):
    """The same checkpoint searched by CTranslate2 (`--engine ctranslate2`)."""
    pytest.importorskip("ctranslate2")
    from translate.decode.engine import choose_engine
    from translate.decode.settings import EngineChoice

    loaded = load_model(checkpoint_path)
    cache = str(tmp_path_factory.mktemp("ct2"))
    choose_engine(loaded, EngineChoice("ctranslate2", cache_dir=cache), "cpu")
    return loaded


def client_for(loaded, **settings) -> TestClient:
    return TestClient(create_app(loaded, ServeSettings(**settings)))


def alone(loaded, line: str, beam: int = 5) -> str:
    """What translate-cli gives one line on its own (checkpoint defaults: beam 5, alpha 1)."""
    return translate_lines(loaded, [line], SearchSettings(beam=beam, length_penalty=1.0))[0]


def test_translations_come_back_in_order_one_per_line(loaded):
    with client_for(loaded) as client:
        assert client.get("/ready").json() == {"status": "ready"}
        assert client.get("/health").status_code == 200
        response = client.post("/v1/translate", json={"text": LINES})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["beam"] == 5 and body["target_lang"] is None
        assert body["translations"] == [alone(loaded, line) for line in LINES]
        assert body["translations"][1] == body["translations"][3] == ""
        greedy = client.post("/v1/translate", json={"text": LINES[:1], "beam": 1}).json()
        assert greedy["translations"] == [alone(loaded, LINES[0], beam=1)]


def within_budget(engine: EngineLoop) -> bool:
    """Every running search holds what its budget allows, or one sentence alone."""
    budget = engine.budget
    for running in engine.searches.values():
        held, search = running.search.held, running.search
        over = held.tokens > budget.tokens or (
            budget.cache_bytes is not None and held.cache_bytes > budget.cache_bytes
        )
        if over and len(search) > 1:
            return False
    return True


def held_back(engine: EngineLoop) -> bool:
    """A running search's next waiting line does not fit its budget."""
    for running in engine.searches.values():
        turn = running.next_waiting()
        if turn is not None:
            cost = running.search.cost(len(turn.ids), turn.plan)
            if not running.search.room().take(cost):
                return True
    return False


@pytest.mark.parametrize("engine_name", ["pytorch", "ctranslate2"])
@pytest.mark.parametrize(
    "budget",
    # small budgets, so that some lines wait their turn: of source tokens, and of cache bytes
    [Budget(40), Budget(4096, cache_bytes=160_000)],
    ids=["tokens", "cache"],
)
def test_continuous_batching_answers_each_request_as_translate_cli_does_alone(
    request, budget, engine_name
):
    """Requests that arrive while others are being searched join them within the search's
    budget; each is answered with what translate-cli gives its lines (blank lines, over-long lines
    cut, several settings), with either engine."""
    loaded = request.getfixturevalue("loaded" if engine_name == "pytorch" else "ct2_loaded")
    long_line = " ".join(
        ["Choose Tools - Options."] * 12
    )  # over the checkpoint's trained length: cut
    requests = [
        (LINES, SearchSettings(beam=5, length_penalty=1.0)),
        ([long_line, "Click OK."], SearchSettings(beam=5, length_penalty=1.0)),
        (["", "\t"], SearchSettings(beam=5, length_penalty=1.0)),
        (["Last line of the test.", "Click OK."], SearchSettings(beam=1, length_penalty=1.0)),
        (["Line 7."], SearchSettings(beam=3, length_penalty=0.5)),
        # translate-cli's other settings, honoured alike: the length rule, the input limit, the
        # restriction
        (LINES, SearchSettings(beam=1, length_penalty=1.0, max_len_a=0.5, max_len_b=2)),
        (
            [long_line],
            SearchSettings(beam=3, length_penalty=1.0, max_input_tokens=6),
        ),
        (LINES, SearchSettings(beam=3, length_penalty=0.0, n_best=2)),
    ]
    engine = EngineLoop(loaded, budget)
    answers, steps, segments, waited = {}, 0, {}, False
    for request_id, (lines, key) in enumerate(requests):  # two new requests a step
        segments[request_id] = tokenise(loaded, lines, key)
        found = engine.take(Join(request_id, segments[request_id].ids, key))
        if request_id % 2:
            found += engine.step()
            assert within_budget(engine)
        for answer in found:
            assert not answer.error
            answers[answer.request_id] = answer
    while engine.busy:
        answers.update((answer.request_id, answer) for answer in engine.step())
        assert within_budget(engine)
        # PyTorch: a waiting line does not fit beside those searched; CTranslate2: lines were
        # left for the next call.
        waited |= (
            held_back(engine)
            if engine_name == "pytorch"
            else any(running.waiting for running in engine.searches.values())
        )
        steps += 1
        assert steps < 500
    assert waited, "the budget never held a line back"
    for request_id, (lines, key) in enumerate(requests):
        texts = [
            found.text
            for found in detokenise(
                loaded, segments[request_id], answers[request_id].found, key.n_best
            )
        ]
        assert texts == translate_lines(loaded, lines, key), key
    assert not engine.requests and not engine.searches  # idle searches are let go


def test_the_engine_loop_takes_requests_between_steps_and_answers_each(loaded):
    """`run_engine` over a queue, as the model process runs it: requests sent while others are
    searched, a cancel for a request it does not hold, and the end (None), which it answers with
    None before it returns."""
    key = SearchSettings(beam=2, length_penalty=1.0)
    inbox, answers = queue.Queue(), queue.Queue()
    engine = EngineLoop(loaded, Budget(4096))
    thread = threading.Thread(target=run_engine, args=(engine, inbox, answers.put))
    thread.start()
    sent = {request_id: tokenise(loaded, [line], key) for request_id, line in enumerate(LINES)}
    for request_id, segments in sent.items():
        inbox.put(Join(request_id, segments.ids, key))
    inbox.put(Cancel(len(LINES)))  # a request the engine does not hold: nothing happens
    received = [answers.get(timeout=60) for _ in LINES]
    inbox.put(None)  # the end: the loop says so and returns
    assert answers.get(timeout=60) is None
    thread.join(60)
    assert not thread.is_alive() and answers.empty()
    assert sorted(answer.request_id for answer in received) == list(range(len(LINES)))
    for answer in received[:-1]:
        [line] = [LINES[answer.request_id]]
        assert [
            found.text for found in detokenise(loaded, sent[answer.request_id], answer.found, 1)
        ] == [alone(loaded, line, 2)]


def test_continuous_batching_fails_only_the_requests_a_bad_setting_touches(loaded):
    engine = EngineLoop(loaded, Budget(4096))
    good = SearchSettings(beam=5, length_penalty=1.0)
    segments = tokenise(loaded, ["Click OK."], good)
    [failed] = engine.take(Join(1, segments.ids, replace(good, target_lang="fr")))
    assert failed.request_id == 1 and failed.found is None and "fr" in failed.error
    assert engine.take(Join(2, segments.ids, good)) == []
    answers = []
    while engine.busy:
        answers += engine.step()
    [answer] = answers
    [found] = detokenise(loaded, segments, answer.found, 1)
    assert found.text == alone(loaded, "Click OK.") and 0 < found.confidence < 1


class FakeEngine(QueuedEngine):
    """An engine loop for the batcher alone: answers each line's characters upper-cased, fails a
    request of "boom", holds its answers until `release` is set, and is gone after "die"; what it
    was sent is kept (`sent`)."""

    def __init__(self, started: list, release: threading.Event) -> None:
        super().__init__()
        self.release, self.sent = release, []
        started.append(self)
        self.start()

    def _run(self) -> None:
        while (message := self.messages.get()) is not None:
            if isinstance(message, Cancel):
                continue
            self.release.wait(5)
            texts = ["".join(map(chr, ids)) for ids in message.segments]
            if texts == ["die"]:
                self.answers.put(EOFError)
                return
            found = [[Hypothesis(list(map(ord, text.upper())), 0.0, 0.0)] for text in texts]
            error = "RuntimeError: the search broke" if texts == ["boom"] else ""
            self.answers.put(Answer(message.request_id, None if error else found, error, 0.0, 1))
        self.answers.put(None)

    def send(self, message) -> None:
        self.sent.append(message)
        super().send(message)


def segments_of(lines: list[str]) -> Segments:
    """Lines as segments for the batchers alone: a line each, its characters as its ids."""
    return Segments(
        [list(map(ord, line)) for line in lines],
        list(range(len(lines))),
        [Part(i) for i in range(len(lines))],
    )


class FakeBatcher(ContinuousBatcher):
    """The continuous batcher over `FakeEngine`, submitting lines as `segments_of` cuts them and
    reading each answer's best hypotheses as text."""

    async def submit(self, lines, key):
        found = await super().submit(lines, key, segments_of(lines))
        return ["".join(map(chr, hypotheses[0].tokens)) for hypotheses in found]


def fake_batcher(started: list, release: threading.Event, max_queued_sentences: int = 100):
    return FakeBatcher(lambda: FakeEngine(started, release), max_queued_sentences)


def test_the_continuous_batcher_fails_a_failed_request_alone_and_replaces_an_engine_gone():
    """An answer that failed fails its request; an engine gone (its process killed) fails the
    requests it held and is started again for the next."""
    started, release = [], threading.Event()
    release.set()

    async def scenario():
        batcher = fake_batcher(started, release)
        batcher.start()
        key = SearchSettings(beam=1, length_penalty=0.0)
        try:
            first = await asyncio.gather(
                batcher.submit(["a"], key), batcher.submit(["b", "c"], key)
            )
            with pytest.raises(RuntimeError, match="the search broke"):
                await batcher.submit(["boom"], key)
            with pytest.raises(ModelUnavailable):
                await batcher.submit(["die"], key)
            return first, await batcher.submit(["d"], key), batcher.queued_sentences
        finally:
            await batcher.stop()

    first, after, queued = asyncio.run(scenario())
    assert first == [["A"], ["B", "C"]] and after == ["D"] and queued == 0
    assert len(started) == 2


def test_lines_the_engine_holds_count_against_the_queue_bound_until_answered_or_left():
    """Sent at once, lines wait in the engine: memory stays bounded only if they count; a
    client that leaves gives its lines back (and the engine is told)."""
    started, release = [], threading.Event()

    async def scenario():
        batcher = fake_batcher(started, release, max_queued_sentences=3)
        batcher.start()
        key = SearchSettings(beam=1, length_penalty=0.0)
        try:
            held = asyncio.ensure_future(batcher.submit(["a", "b"], key))
            await asyncio.sleep(0)  # sent
            with pytest.raises(QueueFull):
                await batcher.submit(["c", "d"], key)
            leaving = asyncio.ensure_future(batcher.submit(["e"], key))
            await asyncio.sleep(0)
            leaving.cancel()
            await asyncio.gather(leaving, return_exceptions=True)
            after_leaving = batcher.queued_sentences
            release.set()
            return await held, after_leaving, batcher.queued_sentences
        finally:
            release.set()
            await batcher.stop()

    assert asyncio.run(scenario()) == (["A", "B"], 2, 0)
    assert Cancel(2) in started[0].sent


@pytest.mark.parametrize(
    "body, status, words",
    [
        ('{"text": ["a", "a", "a", "a"]}', 413, "at most 3 a request (--max-sentences)"),
        ('{"text": ["' + "x" * 51 + '"]}', 413, "text[0] has 51 characters"),
        ('{"text": ["a", 3]}', 422, "text[1]: Input should be a valid string"),
        ('{"text": "a"}', 422, "text: Input should be a valid list"),
        ('{"lines": ["a"]}', 422, "lines: Extra inputs are not permitted"),
        ('["a"]', 422, "the body: Input should be a valid dictionary"),
        ('{"text": ["a"], "beam": 0}', 422, "beam: Input should be greater than or equal to 1"),
        ('{"text": ["a"], "beam": true}', 422, "beam: Input should be a valid integer"),
        ('{"text": ["a"], "beam": 2.5}', 422, "beam: Input should be a valid integer"),
        ('{"text": ["a"], "beam": 17}', 422, "--max-beam"),
        (
            '{"text": ["a"], "length_penalty": NaN}',
            422,
            "length_penalty: Input should be a finite number",
        ),
        (
            '{"text": ["a"], "length_penalty": Infinity}',
            422,
            "length_penalty: Input should be a finite number",
        ),
        (
            '{"text": ["a"], "length_penalty": -Infinity}',
            422,
            "length_penalty: Input should be a finite number",
        ),
        (
            '{"text": ["a"], "length_penalty": 1e308}',
            422,
            "length_penalty: Input should be less than or equal to 5",
        ),
        (
            '{"text": ["a"], "length_penalty": -0.5}',
            422,
            "length_penalty: Input should be greater than or equal to 0",
        ),
        (
            '{"text": ["a"], "length_penalty": "1"}',
            422,
            "length_penalty: Input should be a valid number",
        ),
        (
            '{"text": ["a"], "target_lang": "fr"}',
            422,
            "target_lang 'fr': this model translates into de",
        ),
        (
            '{"text": ["a"], "source_lang": "xx"}',
            422,
            "source_lang 'xx': this model translates from en",
        ),
        ('{"text": ["a", "\\ud800b"]}', 422, "text[1] holds a lone surrogate at character 0"),
        ('{"text": ["a"], "beam": 1, "beam": 0}', 422, "beam"),
        ("{not json", 400, "the body is not valid JSON (at character 1"),
        ('{"text": ["a\\nb", "c\\r\\nd"]}', 413, "the request holds 4 sentences"),
        ('{"text": ["ok\\n' + "x" * 51 + '"]}', 413, "text[0] has 51 characters in one of its"),
    ],
)
def test_bad_requests_are_refused_in_one_shape_naming_the_field_or_limit(
    loaded, checkpoint_path, body, status, words
):
    with client_for(loaded, max_sentences=3, max_line_chars=50) as client:
        response = client.post(
            "/v1/translate", content=body.encode(), headers={"content-type": "application/json"}
        )
        assert response.status_code == status
        assert list(response.json()) == ["error"] and words in response.json()["error"]
        assert str(checkpoint_path.parent) not in response.text  # no path of the server's


def test_a_length_penalty_in_range_and_a_known_source_language_are_taken(loaded):
    with client_for(loaded) as client:
        body = {"text": LINES[:1], "length_penalty": 5, "source_lang": "en"}
        response = client.post("/v1/translate", json=body)
        assert response.status_code == 200 and response.json()["length_penalty"] == 5.0
        assert response.json()["translations"] == translate_lines(
            loaded, LINES[:1], SearchSettings(beam=5, length_penalty=5.0)
        )


def test_errors_of_every_route_come_in_one_shape_and_every_status_is_counted(loaded):
    with client_for(loaded, max_body_bytes=100) as client:
        assert client.get("/nowhere").json() == {"error": "Not Found"}
        assert client.get("/v1/translate").json() == {"error": "Method Not Allowed"}
        response = client.post("/v1/translate", json={"text": ["a" * 200]})
        assert response.status_code == 413 and "--max-body-bytes" in response.json()["error"]
        metrics = client.get("/metrics").text
    for path, status in (("other", 404), ("/v1/translate", 405), ("/v1/translate", 413)):
        assert f'translate_requests_total{{path="{path}",status="{status}"}} 1.0' in metrics


def test_an_unexpected_fault_is_a_counted_500_in_the_one_shape_without_its_traceback(
    loaded, monkeypatch
):
    with client_for(loaded) as client:
        service = client.app.state.service
        monkeypatch.setattr(service, "check_lines", lambda text: 1 / 0)
        response = client.post("/v1/translate", json={"text": ["a"]})
        assert response.status_code == 500
        assert response.json() == {"error": "internal error: the server's log says more"}
        assert (
            'translate_requests_total{path="/v1/translate",status="500"} 1.0'
            in client.get("/metrics").text
        )


FIELDS = ("beam", "length_penalty", "target_lang", "source_lang")
# Fields of the right types with any values reach the search; values of any type, any JSON and
# any bytes test the parsing and the validation.
WELL_TYPED = st.fixed_dictionaries(
    {"text": st.lists(ANY_TEXT, max_size=5)},
    optional={
        "beam": st.integers(-2, 20),
        "length_penalty": st.floats() | st.integers(-10, 10),
        "target_lang": st.sampled_from(["de", "en", "fr", ""]),
        "source_lang": st.sampled_from(["en", "de", "xx"]),
    },
)
ANY_TYPE = st.fixed_dictionaries(
    {"text": JSON_VALUES}, optional={field: JSON_VALUES for field in FIELDS}
)
BODIES = (
    (WELL_TYPED | ANY_TYPE).map(json.dumps) | JSON_VALUES.map(json.dumps) | st.binary(max_size=60)
)


def test_no_request_body_gets_a_5xx_but_503(loaded):
    """Arbitrary JSON (NaN, huge numbers, lone surrogates, wrong types, deep lists) and bytes at
    /translate: a 2xx or 4xx in the one error shape, or 503; never another 5xx."""
    with client_for(loaded, max_sentences=5, max_line_chars=30, max_beam=8) as client:

        @hypothesis.settings(
            max_examples=200,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=[hypothesis.HealthCheck.too_slow],
        )
        @hypothesis.given(BODIES)
        def no_server_error(body):
            content = body if isinstance(body, bytes) else body.encode()
            response = client.post(
                "/v1/translate", content=content, headers={"content-type": "application/json"}
            )
            assert response.status_code < 500 or response.status_code == 503, (body, response.text)
            if response.status_code == 200:
                assert len(response.json()["translations"]) == len(json.loads(body)["text"])
            else:
                assert list(response.json()) == ["error"], response.text

        no_server_error()


def test_a_full_queue_answers_503_with_retry_after(loaded):
    """503 only where the queue holds other requests' lines now: a request that fits an idle
    server is never told to retry for its size."""
    with client_for(loaded, max_queued_sentences=4, max_sentences=4) as client:
        batcher = client.app.state.service.batcher
        batcher.queued_sentences = 3  # other requests' lines, waiting
        response = client.post("/v1/translate", json={"text": ["a", "b"]})
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        batcher.queued_sentences = 0
        assert client.post("/v1/translate", json={"text": ["a", "b", "c", "d"]}).status_code == 200


def test_an_items_lines_are_translated_each_and_its_line_breaks_kept(loaded):
    """An item with line breaks is translated line by line as translate-cli translates lines,
    its breaks (LF, CRLF, blank lines) back where they were; each line that is not blank counts
    against the rate (a sentence the model searches)."""
    lines = ["Click OK.", "Choose Tools - Options.", "", "Last line of the test."]
    item = f"{lines[0]}\r\n{lines[1]}\n{lines[2]}\n{lines[3]}"
    expected = translate_lines(loaded, lines, SearchSettings(beam=5, length_penalty=1.0))
    with client_for(loaded, req_limit=4) as client:
        response = client.post("/v1/translate", json={"text": [item, "Click OK."]})
        assert response.status_code == 200, response.text
        assert response.json()["translations"] == [
            f"{expected[0]}\r\n{expected[1]}\n\n{expected[3]}",
            expected[0],
        ]
        assert expected[2] == ""
        assert client.post("/v1/translate", json={"text": ["a"]}).status_code == 429  # 4 spent


def test_the_api_key_is_required_where_set(loaded):
    with client_for(loaded, api_key="s3cret") as client:
        assert client.post("/v1/translate", json={"text": ["a"]}).status_code == 401
        assert (
            client.post(
                "/v1/translate", json={"text": ["a"]}, headers={"X-API-Key": "s3cre"}
            ).status_code
            == 401
        )
        assert client.get("/metrics").status_code == 401
        assert (
            client.post(
                "/v1/translate", json={"text": ["a"]}, headers={"X-API-Key": "s3cret"}
            ).status_code
            == 200
        )
        assert client.get("/info", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/health").status_code == 200 and client.get("/ready").status_code == 200
        assert "keyRequired = true" in client.get("/").text


def test_info_metrics_and_the_page(loaded, checkpoint_path):
    with client_for(loaded, checkpoint_digest=file_digest(checkpoint_path)) as client:
        info = client.get("/info").json()
        assert (
            info["tie_embeddings"] == "all"
            and info["joint_vocab"] is True
            and info["protects_spans"] is False
        )
        assert info["checkpoint_sha256"] == file_digest(checkpoint_path)
        defaults = loaded.search_defaults()
        assert list(info["search_defaults"].items()) == [
            ("beam", defaults.beam),
            ("length_penalty", defaults.length_penalty),
        ]
        first = client.post("/v1/translate", json={"text": LINES}).json()["translations"]
        again = client.post("/v1/translate", json={"text": LINES}).json()["translations"]
        client.post("/v1/translate", json={"text": ["a"], "beam": 0})
        metrics = client.get("/metrics").text
        # the warm-up line and the three lines of the request that hold words, searched once: the
        # second request's five lines are the answer cache's
        assert again == first
        assert "translate_sentences_total 4.0" in metrics
        assert 'translate_cache_lookups_total{result="miss"} 5.0' in metrics
        assert 'translate_cache_lookups_total{result="hit"} 5.0' in metrics
        assert "translate_cache_entries 5.0" in metrics
        assert 'translate_requests_total{path="/v1/translate",status="200"} 2.0' in metrics
        assert 'translate_requests_total{path="/v1/translate",status="422"} 1.0' in metrics
        assert (
            "translate_batch_sentences_bucket" in metrics
            and "translate_queued_sentences 0.0" in metrics
        )
        busy = [
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("translate_model_seconds_total")
        ]
        assert busy and busy[0] > 0  # two batches (warm-up, request) took time in the model
        page = client.get("/")
        assert (
            page.status_code == 200
            and 'id="translate"' in page.text
            and "keyRequired = false" in page.text
        )
        assert client.get("/docs").status_code == 200


def test_the_api_page_loads_its_assets_from_the_server(loaded):
    with client_for(loaded) as client:
        page = client.get("/docs")
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert page.status_code == 200 and len(assets) >= 2
        for asset in assets:
            assert asset.startswith("/"), f"{asset} is not served by this server"
            response = client.get(asset)
            assert response.status_code == 200 and len(response.content) > 1000, asset
        assert client.get("/openapi.json").json()["paths"]["/v1/translate"]


def test_serving_does_not_load_the_training_stack():
    _, loaded = imported_after("import translate.serve.app, translate.cli.serve", TRAINING_STACK)
    assert loaded == []


def test_the_real_server_batches_concurrent_clients_and_drains_on_sigterm(checkpoint_path, loaded):
    server, base = start_server(
        checkpoint_path,
        "--engine",
        "pytorch",
        "--api-key-env",
        "SERVE_TEST_KEY",
        env={"SERVE_TEST_KEY": "k"},
    )
    try:
        results: dict[int, list[str]] = {}

        def client(index: int) -> None:
            lines = LINES[index % len(LINES) :] + [f"Line {index}."]
            response = httpx.post(
                f"{base}/v1/translate", json={"text": lines}, headers={"X-API-Key": "k"}, timeout=60
            )
            results[index] = (lines, response.json()["translations"])

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(results) == 8
        for lines, translations in results.values():
            assert translations == [alone(loaded, line) for line in lines]
        metrics = httpx.get(f"{base}/metrics", headers={"X-API-Key": "k"}).text
        # Lines of several clients were searched at once: some turn held more than the 4 non-blank
        # lines a request has at most.
        held = {
            line.split('"')[1]: float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("translate_batch_sentences_bucket")
        }
        assert held["4.0"] < held["+Inf"]

        # a request in flight when SIGTERM comes is still answered; then the server exits
        slow_lines = [f"Sentence number {i} of a long request." for i in range(200)]
        results.clear()

        def long_request() -> None:
            response = httpx.post(
                f"{base}/v1/translate",
                json={"text": slow_lines, "beam": 16},
                headers={"X-API-Key": "k"},
                timeout=120,
            )
            results[0] = (response.status_code, len(response.json()["translations"]))

        slow = threading.Thread(target=long_request)
        slow.start()
        wait_until(
            lambda: (
                served_metric(base, "translate_queued_sentences", {"X-API-Key": "k"}) > 0
                or 0 in results
            ),
            "the long request reaching the server",
        )
        server.send_signal(signal.SIGTERM)
        slow.join(120)
        assert results[0] == (200, 200)
        assert server.wait(60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once drained
    finally:
        stop(server)


def peak_memory_kib(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def stream_chunked(
    base: str, headers: dict[str, str], total: int, chunk: int = 1 << 16
) -> tuple[int, bytes]:
    """POST /translate a chunked body of up to `total` bytes, reading the answer as it comes;
    the bytes sent before the server stopped reading (it closes the connection), and the answer."""
    host, port = base.removeprefix("http://").split(":")
    answer = bytearray()
    with socket.create_connection((host, int(port)), timeout=10) as connection:

        def read() -> None:
            with contextlib.suppress(OSError):
                while data := connection.recv(1 << 16):
                    answer.extend(data)

        reader = threading.Thread(target=read)
        reader.start()
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        connection.sendall(
            f"POST /translate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Transfer-Encoding: chunked\r\n{head}\r\n".encode()
        )
        sent, payload = 0, b"%x\r\n" % chunk + b" " * chunk + b"\r\n"
        with contextlib.suppress(OSError):  # reset or timed out: the server stopped reading
            while sent < total:
                connection.sendall(payload)
                sent += chunk
        reader.join(10)
    return sent, bytes(answer)


@pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads the server's peak memory in /proc"
)
def test_an_over_limit_chunked_body_is_refused_as_it_arrives_and_a_wrong_key_before_any_of_it(
    checkpoint_path,
):
    """A chunked body declares no length: the limit counts its bytes as they arrive, and the
    server stops reading there. With a wrong key header, not a byte of it is read; without one,
    the body may hold the key (LibreTranslate's clients send it there), so it is read up to the
    limit."""
    server, base = start_server(
        checkpoint_path, "--api-key-env", "SERVE_TEST_KEY", env={"SERVE_TEST_KEY": "k"}
    )
    try:
        before = peak_memory_kib(server.pid)
        total = 64 << 20  # 64 MiB against the 1 MiB limit (--max-body-bytes)
        sent, answer = stream_chunked(base, {"X-API-Key": "wrong"}, total)
        assert answer.startswith(b"HTTP/1.1 401") and b'"error"' in answer, answer[:300]
        assert sent < total // 4
        sent, answer = stream_chunked(base, {}, total)
        assert answer.startswith(b"HTTP/1.1 413") and b"--max-body-bytes" in answer, answer[:300]
        assert sent < total // 4
        sent, answer = stream_chunked(base, {"X-API-Key": "k"}, total)
        assert answer.startswith(b"HTTP/1.1 413") and b"--max-body-bytes" in answer, answer[:300]
        assert sent < total // 4
        grown = peak_memory_kib(server.pid) - before
        assert grown < 16 << 10, f"the server's peak memory grew by {grown} KiB"
        assert (
            httpx.post(
                f"{base}/v1/translate", json={"text": ["a"]}, headers={"X-API-Key": "k"}
            ).status_code
            == 200
        )
    finally:
        stop(server)


def test_sigterm_answers_in_flight_requests_within_the_drain_and_the_rest_with_503(checkpoint_path):
    """Requests in flight when SIGTERM comes are answered while --drain-seconds last, those
    left then get 503 with Retry-After; none gets a 500, and the server exits soon after."""
    server, base = start_server(checkpoint_path, "--drain-seconds", "0.5")
    try:
        answers: dict[int, httpx.Response] = {}
        words = "Choose Tools - Options - LibreOffice Writer - Formatting Aids and mark the box"

        def client(index: int) -> None:
            body = {"text": [f"{words} {index} {line}." for line in range(48)], "beam": 16}
            answers[index] = httpx.post(f"{base}/v1/translate", json=body, timeout=60)

        threads = [threading.Thread(target=client, args=(index,)) for index in range(16)]
        for thread in threads:
            thread.start()
        # Every request's lines reached the server: waiting, searched or answered.
        wait_until(
            lambda: (
                served_metric(base, "translate_queued_sentences")
                + served_metric(base, "translate_sentences_total")
                >= 16 * 48
            ),
            "all 16 requests reaching the server",
        )
        server.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(60)
        assert server.wait(30) in (0, -signal.SIGTERM)
        statuses = sorted(response.status_code for response in answers.values())
        assert len(statuses) == 16 and set(statuses) <= {200, 503}, statuses
        assert 503 in statuses, "every request finished within the drain: give them more work"
        for response in answers.values():
            if response.status_code == 503:
                assert (
                    response.headers["retry-after"]
                    and "--drain-seconds" in response.json()["error"]
                )
            else:
                assert len(response.json()["translations"]) == 48
        with pytest.raises(httpx.ConnectError):  # no new connections once the drain has begun
            httpx.get(f"{base}/health", timeout=5)
    finally:
        stop(server)


def model_processes(server: subprocess.Popen) -> list[int]:
    """The server's model process (its spawned child), from /proc."""
    return [
        pid
        for pid, (parent, _, command) in process_table().items()
        if parent == server.pid and b"spawn_main" in command
    ]


@pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads the model process's environment in /proc"
)
def test_the_model_process_starts_with_onednn_caches_bounded(checkpoint_path, monkeypatch):
    """Its packed products would otherwise keep memory for every batch shape a server meets."""
    for name in ONEDNN_CACHES:
        monkeypatch.delenv(name, raising=False)
    server, _ = start_server(checkpoint_path)
    try:
        [worker] = model_processes(server)
        environment = set(Path(f"/proc/{worker}/environ").read_bytes().split(b"\0"))
    finally:
        stop(server)
    assert {f"{name}={value}".encode() for name, value in ONEDNN_CACHES.items()} <= environment


@pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds the model process through /proc"
)
def test_a_killed_model_process_is_replaced_and_a_killed_server_leaves_none(
    checkpoint_path, served
):
    """By default (`--engine auto`) the model process searches with CTranslate2 on the CPU, and
    a new one does too."""
    server, base = start_server(checkpoint_path)
    try:
        [worker] = model_processes(server)
        os.kill(worker, signal.SIGKILL)
        # Found gone at once (its answers' pipe closes), the process is started again: a request
        # held at that moment gets 503 with Retry-After (a test of the batcher checks it), the
        # next is translated by the new process.
        for _ in range(100):
            answered = httpx.post(
                f"{base}/v1/translate", json={"text": LINES[:1], "beam": 1}, timeout=60
            )
            if answered.status_code != 503:
                break
            assert answered.headers["retry-after"] == "5"
            assert "model process stopped" in answered.json()["error"]
        assert answered.status_code == 200
        assert answered.json()["translations"] == [alone(served, LINES[0], beam=1)]
        [replacement] = model_processes(server)
        assert replacement != worker
    finally:
        stop(server)
    said = server.stderr.read()
    assert said.count("searches with CTranslate2 (float32") == 2, said  # both model processes
    # The server killed outright (SIGKILL) cannot stop its model process: it must go by itself.
    for _ in range(100):
        if not Path(f"/proc/{replacement}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{replacement}").exists(), "the model process outlived its server"


CHROMIUM = next(
    (path for path in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if os.path.exists(path)),
    None,
)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)")
def test_the_page_translates_in_a_real_browser(checkpoint_path, loaded, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    server, base = start_server(checkpoint_path, "--engine", "pytorch")
    try:
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.goto(base + "/")
                page.wait_for_function(
                    "document.getElementById('model').textContent.includes('tie_embeddings')"
                )
                page.fill("#source", "Click OK.\nChoose Tools - Options.")
                page.click("#translate")
                page.wait_for_function(
                    "/ s$/.test(document.getElementById('status').textContent)", timeout=30_000
                )
                page.screenshot(path=str(tmp_path / "page.png"))
                output = page.inner_text("#output")
                # The API page renders from this server alone: no CDN (this machine has no internet).
                requested: list[str] = []
                page.on("request", lambda request: requested.append(request.url))
                page.goto(base + "/docs")
                page.wait_for_selector("text=/translate", timeout=30_000)
                operations = page.locator(".opblock-summary-path").all_inner_texts()
            finally:
                browser.close()
        assert output.split("\n") == [
            alone(loaded, "Click OK."),
            alone(loaded, "Choose Tools - Options."),
        ]
        assert (tmp_path / "page.png").stat().st_size > 0
        assert "/v1/translate" in operations and requested
        assert all(url.startswith(base + "/") or url.startswith("data:") for url in requested), (
            requested
        )
    finally:
        stop(server)


def test_waiting_for_a_server_says_whether_it_died_or_never_answered():
    url = f"http://127.0.0.1:{free_loopback_port()}/ready"  # nothing listens there
    died = subprocess.Popen([sys.executable, "-c", "pass"])
    assert wait_until_ready(died, url, 30) == "exited before it was ready"
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert wait_until_ready(silent, url, 0.5) == "was not ready after 0.5 s"
    finally:
        stop(silent)


def test_a_restriction_the_checkpoint_cannot_make_is_refused_at_start(checkpoint_path):
    """translate-serve --restrict-target on a checkpoint without its target-side ids stops at
    once with one line, rather than failing every request."""
    result = subprocess.run(
        [sys.executable, "-m", "translate.cli.serve", "--checkpoint", str(checkpoint_path)]
        + ["--restrict-target", "--port", "0", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "restrict" in result.stderr, result.stderr


def test_the_server_s_own_copy_of_the_checkpoint_holds_no_weights(checkpoint_path, loaded):
    """translate-serve's process reads the vocabulary and the run's settings; the model process
    holds the one copy of the weights."""
    bare = load_model(checkpoint_path, weights=False)
    assert isinstance(bare.model, ModelShape) and not hasattr(bare.model, "parameters")
    assert bare.vocab.source.encode(["Click OK."]) == loaded.vocab.source.encode(["Click OK."])
    assert (bare.data.languages, bare.data.directions, bare.search_defaults()) == (
        loaded.data.languages,
        loaded.data.directions,
        loaded.search_defaults(),
    )
    assert bare.model.cfg == loaded.model.cfg
    assert bare.model.tgt_vocab_size == loaded.model.tgt_vocab_size
    assert bare.data.max_length == loaded.data.max_length


def test_the_native_api_names_the_protected_tokens_each_translation_lacks(loaded):
    texts = ["Click button 36.", "Open the file.", "Press Ctrl+S.\nSelect cell 15."]
    with client_for(loaded) as client:
        body = client.post("/v1/translate", json={"text": texts}).json()
    expected = []
    for text, translation in zip(texts, body["translations"]):
        pairs = zip(text.split("\n"), translation.split("\n"), strict=True)
        expected.append(
            [
                {"kind": span.kind, "text": span.text}
                for line, output in pairs
                for span in lost_spans(line, output)
            ]
        )
    assert body["lost"] == expected and expected[1] == []
    assert {"kind": "number", "text": "36"} in expected[0]  # a random model keeps none


def test_the_native_api_gives_each_text_the_confidence_translate_cli_gives_its_lines(loaded):
    texts = ["Click OK.", "", "Open the file.\nSave it."]
    with client_for(loaded) as client:
        body = client.post("/v1/translate", json={"text": texts}).json()
    settings = SearchSettings(beam=5, length_penalty=1.0)  # the checkpoint's defaults
    [[one]], [[first], [second]] = (
        translate_nbest(loaded, lines, settings) for lines in (["Click OK."], texts[2].split("\n"))
    )
    together = math.exp((first.log_prob + second.log_prob) / (first.tokens + second.tokens))
    assert body["confidences"] == pytest.approx([one.confidence, 1.0, together], rel=1e-4)
    assert 0 < together < 1 and together != pytest.approx(first.confidence, rel=1e-4)


@pytest.mark.parametrize(
    "flags, error",
    [
        (["--batch-tokens", "0"], "--batch-tokens must be at least 1, got 0"),
        (["--max-cache-mib", "0"], "--max-cache-mib must be at least 1, got 0"),
        (["--max-cache-mib", "64"], None),
    ],
)
def test_the_search_budget_s_flags_are_checked_before_the_model_loads(flags, error):
    from translate.cli.serve import build_parser, settings_error

    args = build_parser().parse_args(["--checkpoint", "model.ckpt", *flags])
    assert settings_error(args) == error


def test_the_batch_histogram_holds_one_size_a_step():
    metrics = Metrics()
    # one step answered three requests: the first carries what the search held, the others 0
    for searching in (5, 0, 0):
        metrics.batch(1, 10, 0.1, searching)
    metrics.batch(3, 30, 0.2)  # whole batches: the request's own lines
    sizes = {s.name: s.value for s in metrics.batch_size.collect()[0].samples}
    assert sizes["translate_batch_sentences_count"] == 2
    assert sizes["translate_batch_sentences_sum"] == 8
