"""translate-serve is fair to every client: a request's sentences are the unit of its limits and
of the model's queue (taken in turn between requests), a client that leaves is cancelled, the
work of reading a request runs off the event loop, and repeated texts are answered from the
answer cache."""

import asyncio
import json
import threading

import pytest

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.settings import Budget, SearchSettings  # noqa: E402
from translate.serve import service as service_module  # noqa: E402
from translate.serve.app import ServeSettings, create_app  # noqa: E402
from translate.serve.engine_loop import Cancel, EngineLoop, Join  # noqa: E402
from translate.serve.service import tokenise  # noqa: E402

SERVER = SearchSettings(beam=5, length_penalty=1.0)  # the checkpoint's defaults: the server's
MANY = [f"Select the cells {n} that you want to copy." for n in range(60)]


@pytest.fixture(scope="module")
def loaded(checkpoint_path):
    return load_model(checkpoint_path)


def steps_until_answered(engine: EngineLoop, request_id: int, limit: int = 5000) -> int:
    for step in range(1, limit + 1):
        if any(answer.request_id == request_id for answer in engine.step()):
            return step
    raise AssertionError(f"request {request_id} not answered in {limit} steps")


def test_a_request_of_many_sentences_holds_another_one_behind_one_turn(loaded):
    """Sentences join the running search in turn, one a request: a one-sentence request sent
    after one of 60 is searched while most of the 60 still wait, not after all of them."""
    engine = EngineLoop(loaded, Budget(64))  # room for a few sentences at a time
    engine.take(Join(1, tokenise(loaded, MANY, SERVER).ids, SERVER))
    engine.step()
    engine.take(Join(2, tokenise(loaded, ["Click OK."], SERVER).ids, SERVER))
    steps_until_answered(engine, 2)
    left = engine.requests[1].left  # the long request's sentences not yet answered
    assert left > len(MANY) // 2, left


def test_a_cancelled_request_leaves_the_search_at_once_and_the_others_are_answered(loaded):
    """Cancel (its client left): its sentences waiting are dropped and those being searched leave
    the search, so the model goes idle; another request searched beside it is answered as it
    would be alone."""
    engine = EngineLoop(loaded, Budget(4096))
    engine.take(Join(1, tokenise(loaded, MANY, SERVER).ids, SERVER))
    other = tokenise(loaded, ["Click OK."], SERVER)
    engine.take(Join(2, other.ids, SERVER))
    for _ in range(3):
        engine.step()
    [running] = engine.searches.values()  # one lane
    assert len(running.search) == len(MANY) + 1
    engine.take(Cancel(1))
    assert len(running.search) == 1 and running.waiting_count == 0
    found = None
    for _ in range(500):
        answers = engine.step()
        assert all(answer.request_id == 2 for answer in answers)
        if answers:
            found = answers[0].found
            break
    alone = EngineLoop(loaded, Budget(4096))
    alone.take(Join(2, other.ids, SERVER))
    expected = None
    for _ in range(500):
        if answers := alone.step():
            expected = answers[0].found
            break
    assert found is not None and [hyp.tokens for hyp in found[0]] == [
        hyp.tokens for hyp in expected[0]
    ]
    assert not engine.busy


def http_scope(body: bytes) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/translate",
        "raw_path": b"/v1/translate",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def test_a_client_that_disconnects_is_cancelled_and_its_sentences_leave_the_queue(loaded):
    """The server watches for `http.disconnect` while it translates: a client that leaves gets no
    answer, its request is counted as 499, and its sentences no longer hold the queue."""

    async def scenario():
        app = create_app(loaded, ServeSettings())
        service = app.state.service
        await service.start()
        body = json.dumps({"text": MANY, "beam": 16}).encode()
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        left, sent = asyncio.Event(), []

        async def receive():
            if messages:
                return messages.pop(0)
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        try:
            call = asyncio.ensure_future(app(http_scope(body), receive, send))
            for _ in range(2000):  # until its sentences are in the model's hands
                if service.batcher.queued_sentences:
                    break
                await asyncio.sleep(0.005)
            held = service.batcher.queued_sentences
            left.set()
            await asyncio.wait_for(call, 30)
            return held, service.batcher.queued_sentences, sent, service.metrics
        finally:
            await service.stop()

    held, after, sent, metrics = asyncio.run(scenario())
    assert held == len(MANY) and after == 0 and sent == []
    left = metrics.requests.labels("/v1/translate", "499")._value.get()
    assert left == 1


def test_tokenising_a_request_runs_off_the_event_loop(loaded, monkeypatch):
    """The model's segments of a request (tokenising, cutting long lines) are made in a worker
    thread, for both APIs: a long request never stops the server answering others."""
    threads = []
    real = service_module.tokenise

    def recorded(*args):
        threads.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(service_module, "tokenise", recorded)
    with TestClient(create_app(loaded, ServeSettings())) as client:
        threads.clear()  # the warm-up's
        native = client.post("/v1/translate", json={"text": ["Click OK."]})
        libre = client.post("/translate", json={"q": "Save it.", "source": "en", "target": "de"})
        loop_thread = client.portal.call(lambda: threading.current_thread())
    assert native.status_code == libre.status_code == 200
    assert len(threads) == 2 and loop_thread not in threads


def test_a_forms_q_keeps_its_control_characters_as_json_does(loaded):
    """A form's q (Nextcloud, Discourse send forms) reads as the same text in a JSON body: its
    line breaks are line breaks, and a form feed, U+2028 or U+001C stay what they are."""
    text = "Click OK.\fSave it.\u2028Close the dialog.\x1cOpen a file.\r\nChoose Tools."
    call = {"source": "en", "target": "de"}
    with TestClient(create_app(loaded, ServeSettings(cache_entries=0))) as client:
        as_json = client.post("/translate", json={"q": text, **call})
        as_form = client.post("/translate", data={"q": text, **call})
    assert as_json.status_code == as_form.status_code == 200
    assert as_form.json() == {
        "translatedText": as_json.json()["translatedText"].replace("\r\n", "\n")
    }
    assert as_form.json()["translatedText"].count("\n") == 1


def test_repeated_texts_are_answered_from_the_cache_unless_it_is_off(loaded):
    """A text sent again with the same settings costs the model nothing (none of its sentences is
    searched again); another beam is another question; --cache-entries 0 keeps nothing."""

    def searched(client) -> float:
        metrics = client.get("/metrics").text
        return next(
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("translate_sentences_total")
        )

    for entries, again in ((100, 0), (0, 2)):
        with TestClient(create_app(loaded, ServeSettings(cache_entries=entries))) as client:
            body = {"text": ["Click OK.", "Save it."]}
            first = client.post("/v1/translate", json=body).json()["translations"]
            before = searched(client)
            second = client.post("/v1/translate", json=body).json()["translations"]
            assert second == first and searched(client) - before == again
            other = client.post("/v1/translate", json={**body, "beam": 2})
            assert other.status_code == 200 and searched(client) - before == again + 2
