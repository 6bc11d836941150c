"""translate-serve's LibreTranslate API: each way its fields come, its answers and errors as
LibreTranslate sends them, HTML, detection, the rate limit, CORS, and real clients (libretranslatepy,
libretranslate-aio, a Mastodon-style batch) against a real server on loopback."""

import asyncio
import html
import json
import socket
import threading
import time
from html.parser import HTMLParser

import pytest

fastapi = pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("lingua")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from processes import start_server, stop  # noqa: E402
from strategies import ANY_TEXT, JSON_VALUES  # noqa: E402

from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.serve import libretranslate  # noqa: E402
from translate.serve.app import ServeSettings, create_app  # noqa: E402
from translate.serve.libretranslate import FORMATS  # noqa: E402
from translate.serve.rate_limit import RateLimiter  # noqa: E402
from translate.serve.schema import CORS_HEADERS, TranslateRequest  # noqa: E402
from translate.text.language_codes import LanguageCodes, argos_code, libretranslate_code  # noqa: E402
from translate.text.markup import MAX_DEPTH, MAX_NODES  # noqa: E402

SERVER = SearchSettings(beam=5, length_penalty=1.0)  # the checkpoint's defaults: the server's
ENGLISH = ["Click the OK button to close the dialog.", "Select the cells that you want to copy."]
GERMAN = "Klicken Sie auf die Schaltfläche, um den Dialog zu schließen."


@pytest.fixture(scope="module")
def loaded(checkpoint_path):
    return load_model(checkpoint_path)


@pytest.fixture(scope="module")
def client(loaded):
    with TestClient(create_app(loaded, ServeSettings(max_sentences=4, char_limit=200))) as c:
        yield c


def cli(loaded, lines, settings=SERVER):
    """What translate-cli writes for `lines` under the server's search settings."""
    return translate_lines(loaded, lines, settings)


@pytest.mark.parametrize(
    "how",
    ["json", "json-list", "form", "form-repeated", "multipart", "query", "query-repeated"],
)
def test_every_way_of_sending_the_fields_gives_translate_clis_translation(client, loaded, how):
    fields = {"source": "en", "target": "de"}
    one, many = ENGLISH[0], ENGLISH
    sent = {
        "json": dict(json={"q": one, **fields}),
        "json-list": dict(json={"q": many, **fields}),
        "form": dict(data={"q": one, **fields}),
        "form-repeated": dict(data={"q": many, **fields}),
        "multipart": dict(files={"q": (None, one), **{k: (None, v) for k, v in fields.items()}}),
        "query": dict(params={"q": one, **fields}),
        "query-repeated": dict(params={"q": many, **fields}),
    }[how]
    response = client.post("/translate", **sent)
    assert response.status_code == 200, response.text
    expected = cli(loaded, many if how.endswith(("list", "repeated")) else [one])
    assert response.json() == {"translatedText": expected if len(expected) > 1 else expected[0]}


def test_a_texts_lines_are_translated_each_and_a_forms_line_breaks_as_libretranslate_reads_them(
    client, loaded
):
    text = f"{ENGLISH[0]}\n\n{ENGLISH[1]}"
    lines = cli(loaded, text.split("\n"))
    answer = client.post("/translate", json={"q": text, "source": "en", "target": "de"}).json()
    assert answer == {"translatedText": "\n".join(lines)} and lines[1] == ""
    form = client.post(
        "/translate",
        data={"q": text.replace("\n", "\r\n") + "\r\n", "source": "en", "target": "de"},
    )
    assert form.json() == answer


def test_alternatives_are_the_beams_other_hypotheses_without_repeats(loaded):
    """n-best lists through either batcher: the first the translation, the others its
    alternatives, less the empty ones, the repeats and the translation itself."""
    with TestClient(create_app(loaded, ServeSettings())) as client:
        answer = client.post(
            "/translate", json={"q": ENGLISH, "source": "en", "target": "de", "alternatives": 3}
        ).json()
        single = client.post(
            "/translate",
            data={"q": ENGLISH[0], "source": "en", "target": "de", "alternatives": "1"},
        ).json()
    nbest = cli(loaded, ENGLISH, SearchSettings(beam=5, length_penalty=1.0, n_best=4))
    for index in range(len(ENGLISH)):
        mine = nbest[index * 4 : (index + 1) * 4]
        assert answer["translatedText"][index] == mine[0]
        expected = []
        for text in mine[1:]:
            if text.strip() and text != mine[0] and text not in expected:
                expected.append(text)
        assert answer["alternatives"][index] == expected
    assert any(answer["alternatives"])  # some hypotheses differ, so the lists are tested
    assert single["translatedText"] == cli(loaded, ENGLISH[:1])[0]
    assert set(single) == {"translatedText", "alternatives"} and len(single["alternatives"]) <= 1


def test_auto_detects_each_texts_language_and_text_already_in_the_target_comes_back_as_it_is(
    client, loaded
):
    answer = client.post(
        "/translate", json={"q": [ENGLISH[0], GERMAN], "source": "auto", "target": "de"}
    ).json()
    assert answer["translatedText"] == [cli(loaded, ENGLISH[:1])[0], GERMAN]
    assert [found["language"] for found in answer["detectedLanguage"]] == ["en", "de"]
    assert all(0 < found["confidence"] <= 100 for found in answer["detectedLanguage"])
    single = client.post("/translate", json={"q": GERMAN, "source": "auto", "target": "de"}).json()
    assert single["detectedLanguage"]["language"] == "de" and single["translatedText"] == GERMAN


def test_detect_and_the_other_routes_answer_as_libretranslate_does(client):
    ranked = client.post("/detect", data={"q": GERMAN}).json()
    assert ranked[0]["language"] == "de" and ranked[0]["confidence"] > 50
    assert [item["confidence"] for item in ranked] == sorted(
        (item["confidence"] for item in ranked), reverse=True
    )
    assert set(ranked[0]) == {"confidence", "language"}
    expected = [
        {"code": "en", "name": "English", "targets": ["de", "en"]},
        {"code": "de", "name": "German", "targets": ["de"]},
    ]
    assert client.get("/languages").json() == expected == client.post("/languages").json()
    settings = client.get("/frontend/settings").json()
    assert settings["charLimit"] == 200 and settings["keyRequired"] is False
    with TestClient(create_app(client.app.state.service.loaded, ServeSettings())) as open_:
        assert open_.get("/frontend/settings").json()["charLimit"] == -1  # LibreTranslate's none
    assert settings["filesTranslation"] is False and settings["suggestions"] is False
    assert settings["language"] == {
        "source": {"code": "auto", "name": "Auto Detect"},
        "target": {"code": "de", "name": "German"},
    }
    assert client.get("/health").json() == {"status": "ok"}
    for path, message in (
        ("/translate_file", "Files translation are disabled on this server."),
        ("/suggest", "Suggestions are disabled on this server."),
    ):
        response = client.post(path)
        assert (response.status_code, response.json()) == (403, {"error": message})


@pytest.mark.parametrize(
    "fields, status, message",
    [
        ({"source": "en", "target": "de"}, 400, "Invalid request: missing q parameter"),
        ({"q": "", "source": "en", "target": "de"}, 400, "Invalid request: missing q parameter"),
        ({"q": [], "source": "en", "target": "de"}, 400, "Invalid request: missing q parameter"),
        (
            {"text": ["a"]},
            400,
            "Invalid request: missing q parameter (a body of text lines is the native API's: "
            "POST /v1/translate)",
        ),
        ({"q": "a", "target": "de"}, 400, "Invalid request: missing source parameter"),
        ({"q": "a", "source": "en"}, 400, "Invalid request: missing target parameter"),
        ({"q": "a", "source": "fr", "target": "de"}, 400, "fr is not supported"),
        ({"q": "a", "source": "en", "target": "ZZ"}, 400, "zz is not supported"),
        ({"q": "a", "source": "zh-Hans", "target": "de"}, 400, "zh is not supported"),
        ({"q": "a", "source": "en", "target": "pt-BR"}, 400, "pb is not supported"),
        (
            {"q": "a", "source": "de", "target": "en"},
            400,
            "English (en) is not available as a target language from German (de)",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "format": "pdf"},
            400,
            "pdf format is not supported",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "alternatives": "x"},
            400,
            "Invalid request: alternatives parameter is not a number",
        ),
        (
            {"q": "a" * 201, "source": "en", "target": "de"},
            400,
            "Invalid request: request (201) exceeds text limit (200)",
        ),
        (
            {"q": ["a", "b" * 201], "source": "en", "target": "de"},
            400,
            "Invalid request: request (201) exceeds text limit (200)",
        ),
        (
            {"q": ["a", "b\nc", "d\n\ne"], "source": "en", "target": "de"},
            413,
            "the request holds 5 sentences (each line's, and each sentence of a line too long "
            "for the model apart); at most 4 a request (--max-sentences)",
        ),
        (
            {
                "q": "<p>a</p><p>b</p><p>c</p><p>d\ne</p>",
                "source": "en",
                "target": "de",
                "format": "html",
            },
            413,
            "the request holds 5 sentences (each line's, and each sentence of a line too long "
            "for the model apart); at most 4 a request (--max-sentences)",
        ),
        (
            {"q": ["a", 3], "source": "en", "target": "de"},
            400,
            "Invalid request: q must be a string or a list of strings",
        ),
        (
            {"q": "a", "source": ["en"], "target": "de"},
            400,
            "Invalid request: source must be a string",
        ),
        (
            {"q": "a\ud800", "source": "en", "target": "de"},
            400,
            "Invalid request: q holds a lone surrogate at character 1",
        ),
        (
            {"q": ["a", "\udfffb"], "source": "en", "target": "de"},
            400,
            "Invalid request: q[1] holds a lone surrogate at character 0",
        ),
        (
            {"q": "a", "source": "e\ud800", "target": "de"},
            400,
            "Invalid request: source holds a lone surrogate at character 1",
        ),
        (
            {"q": "a", "source": "en", "target": "\ud800"},
            400,
            "Invalid request: target holds a lone surrogate at character 0",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "format": "\ud800"},
            400,
            "Invalid request: format holds a lone surrogate at character 0",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "alternatives": "1\ud800"},
            400,
            "Invalid request: alternatives holds a lone surrogate at character 1",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "api_key": "\ud800"},
            400,
            "Invalid request: api_key holds a lone surrogate at character 0",
        ),
    ],
)
def test_bad_calls_get_libretranslates_400_and_message(client, fields, status, message):
    response = client.post(
        "/translate",
        content=json.dumps(fields).encode(),  # escaped: a lone surrogate too
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, response.json()) == (status, {"error": message})


def test_invalid_json_is_a_400_saying_where(client):
    for path in ("/translate", "/detect"):
        response = client.post(
            path, content=b'{"q": "a",', headers={"content-type": "application/json"}
        )
        assert response.status_code == 400
        assert response.json()["error"].startswith("the body is not valid JSON (at character 10")


def test_the_key_comes_from_the_field_missing_is_400_and_wrong_is_403(loaded):
    with TestClient(create_app(loaded, ServeSettings(api_key="s3cret"))) as keyed:
        call = {"q": "a", "source": "en", "target": "de"}
        missing = keyed.post("/translate", json=call)
        assert (missing.status_code, missing.json()) == (
            400,
            {"error": "Please contact the server operator to get an API key"},
        )
        wrong = keyed.post("/translate", data={**call, "api_key": "s3cre"})
        assert (wrong.status_code, wrong.json()) == (403, {"error": "Invalid API key"})
        assert keyed.post("/detect", json={"q": "a", "api_key": ""}).status_code == 400
        for sent in (
            dict(json={**call, "api_key": "s3cret"}),
            dict(params={**call, "api_key": "s3cret"}),
        ):
            assert keyed.post("/translate", **sent).status_code == 200
        assert (
            keyed.post("/translate", json=call, headers={"X-API-Key": "s3cret"}).status_code == 200
        )
        assert keyed.get("/frontend/settings").json()["keyRequired"] is True
        assert keyed.get("/languages").status_code == 200  # open, as LibreTranslate's
    with TestClient(create_app(loaded, ServeSettings())) as open_server:
        for key in ("", None, "anything"):
            assert open_server.post("/translate", json={**call, "api_key": key}).status_code == 200


def test_the_rate_is_counted_per_key_or_address_in_texts_and_refused_with_429(loaded):
    with TestClient(create_app(loaded, ServeSettings(req_limit=3))) as limited:
        call = {"q": ["a", "b"], "source": "en", "target": "de"}
        assert limited.post("/translate", json=call).status_code == 200
        refused = limited.post("/translate", json=call)
        assert (refused.status_code, refused.json()) == (429, {"error": "Slowdown: 3 per 1 minute"})
        assert limited.post("/detect", json={"q": "a"}).status_code == 200  # the third
        assert (
            limited.post("/v1/translate", json={"text": ["a"]}).status_code == 429
        )  # the native too
        assert limited.get("/languages").status_code == 200  # not counted, as LibreTranslate's


def test_the_rate_limiter_forgets_what_left_its_window():
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0])
    assert limiter.allow("a") and limiter.allow("a") and not limiter.allow("a")
    assert limiter.allow("b", 2) and not limiter.allow("c", 3)
    now[0] = 59.9
    assert not limiter.allow("a")
    now[0] = 60.1
    assert limiter.allow("a", 2)
    now[0] = 200.0
    limiter.allow("d")
    assert set(limiter.spent) == {"d"}  # idle clients forgotten


def test_every_answer_carries_libretranslates_cors_headers_and_a_preflight_needs_no_key(loaded):
    with TestClient(create_app(loaded, ServeSettings(api_key="k"))) as keyed:
        preflight = keyed.options(
            "/translate",
            headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"},
        )
        answers = [preflight, keyed.get("/languages"), keyed.post("/translate", json={"q": "a"})]
        for response in answers:
            for name, value in CORS_HEADERS.items():
                assert response.headers[name] == value, (response.status_code, name)
        assert preflight.status_code == 200 and preflight.content == b""


def test_both_apis_lines_share_one_search_setting_so_they_are_batched_together(client):
    service = client.app.state.service
    native = service.search_settings(TranslateRequest(text=[]))
    assert service.libre_settings("en", "de") == native


def test_html_keeps_the_markup_and_translates_every_text_node(client, loaded):
    post = '<p>Click <b>OK</b> to close.<br>Tom &amp; Jerry &lt;3 <code>x = 1</code></p><script>var a = "b";</script>'
    answer = client.post(
        "/translate", json={"q": post, "source": "en", "target": "de", "format": "html"}
    ).json()["translatedText"]
    texts = cli(loaded, ["Click", "OK", "to close.", "Tom & Jerry <3"])
    escaped = [t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for t in texts]
    assert answer == (
        f"<p>{escaped[0]} <b>{escaped[1]}</b> {escaped[2]}<br>{escaped[3]} <code>x = 1</code></p>"
        '<script>var a = "b";</script>'
    )


def escaped(texts: list[str]) -> list[str]:
    return [html.escape(text, quote=False) for text in texts]


def test_each_line_and_sentence_is_translated_apart_and_the_whitespace_between_is_kept(
    client, loaded
):
    """format text and html alike: a text's lines and each sentence of a line are translated
    each; line breaks, blank lines, indentation and the spaces between sentences come back as
    written (a text of only whitespace comes back as it is)."""
    sentences = ["Click OK.", "Save the file.", "Select the cells that you want to copy.", "Done!"]
    t = cli(loaded, sentences)
    text = f"  {sentences[0]}  {sentences[1]}\n\n\t{sentences[2]}  \r\n{sentences[3]}\n"
    call = {"source": "en", "target": "de"}
    answer = client.post("/translate", json={"q": text, **call}).json()
    assert answer == {"translatedText": f"  {t[0]}  {t[1]}\n\n\t{t[2]}  \r\n{t[3]}\n"}
    markup = f"<p>{sentences[0]}\n  {sentences[1]}</p>\n<p>\n{sentences[3]}</p>"
    e = escaped(t)
    answer = client.post("/translate", json={"q": markup, "format": "html", **call}).json()
    assert answer == {"translatedText": f"<p>{e[0]}\n  {e[1]}</p>\n<p>\n{e[3]}</p>"}
    for blank in ("   ", "\n\t\n", " \u3000 "):
        for text_format in FORMATS:
            answer = client.post(
                "/translate", json={"q": [blank, "Click OK."], "format": text_format, **call}
            ).json()
            assert answer["translatedText"][0] == blank


def test_a_long_text_is_translated_sentence_by_sentence_and_each_sentence_counted(loaded):
    """No text limit by default (as LibreTranslate's): a one-line text of many sentences is
    translated a sentence at a time, each counted against --max-sentences; a sentence over
    --max-line-chars is cut at a space, each piece a sentence of its own."""
    sentences = [f"Select cell {n}." for n in range(40)]
    long_sentence = "Click " + " ".join(["the button"] * 6) + " now."
    with TestClient(
        create_app(
            loaded, ServeSettings(max_sentences=40, max_queued_sentences=40, max_line_chars=40)
        )
    ) as small:
        answer = small.post(
            "/translate", json={"q": " ".join(sentences), "source": "en", "target": "de"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedText"] == " ".join(cli(loaded, sentences))
        over = small.post(
            "/translate",
            json={"q": " ".join(sentences + ["Save."]), "source": "en", "target": "de"},
        )
        assert over.status_code == 413 and "41 sentences" in over.json()["error"]
        cut = small.post("/translate", json={"q": long_sentence, "source": "en", "target": "de"})
        pieces = ["Click the button the button the button", "the button the button the button now."]
        assert all(len(piece) <= 40 for piece in pieces)
        assert cut.json()["translatedText"] == " ".join(cli(loaded, pieces))
    post = "<p>" + " ".join(["Click the OK button to close the dialog."] * 110) + "</p>"
    assert len(post) > 4500
    with TestClient(create_app(loaded, ServeSettings())) as defaults:
        answer = defaults.post(
            "/translate", data={"q": post, "source": "en", "target": "de", "format": "html"}
        )
        assert answer.status_code == 200, answer.text


def test_alternatives_over_the_beam_are_fewer_not_refused(client, loaded):
    answer = client.post(
        "/translate", json={"q": ENGLISH[0], "source": "en", "target": "de", "alternatives": 20}
    )
    assert answer.status_code == 200, answer.text
    widest = SearchSettings(beam=16, length_penalty=1.0, n_best=16)  # --max-beam's
    assert answer.json()["translatedText"] == cli(loaded, ENGLISH[:1], widest)[0]
    assert len(answer.json()["alternatives"]) <= 15


def test_a_text_without_letters_is_in_the_source_language_and_comes_back_as_it_is(client):
    """lingua gives every language 0 for emoji and numbers: such a text is said to be in the
    model's source language with confidence 0, as /detect says, never in the target."""
    for text in ("123", "😀 🎉", "3.14 + 2 = 5.14"):
        answer = client.post("/translate", json={"q": text, "source": "auto", "target": "de"})
        assert answer.json() == {
            "translatedText": text,
            "detectedLanguage": {"confidence": 0.0, "language": "en"},
        }
        assert client.post("/detect", json={"q": text}).json() == [
            {"confidence": 0.0, "language": "en"}
        ]


class Attributes(HTMLParser):
    """Each start tag's attributes as the standard library's parser lists them: in order,
    duplicates included (a browser keeps the first of a name)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[list[tuple[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append(attrs)


def first(markup: str, name: str) -> str | None:
    reader = Attributes()
    reader.feed(markup)
    return next(value for key, value in reader.found[0] if key == name)


def test_duplicate_attributes_and_comments_are_read_as_browsers_read_them(client, loaded):
    """Markup comes back as it was written, only its text translated: of duplicate attributes a
    browser still reads the first (the last would make inert markup active), and a comment
    still ends where a browser ends it (at --!>; <!--> is an empty one)."""
    call = {"source": "en", "target": "de", "format": "html"}
    for markup, name, inert in (
        ('<img src="ok.png" onerror="" onerror="alert(1)">', "onerror", ""),
        (
            '<a href="https://example.com/ok" href="javascript:alert(1)">x</a>',
            "href",
            "https://example.com/ok",
        ),
    ):
        answer = client.post("/translate", json={"q": markup, **call}).json()["translatedText"]
        assert first(answer, name) == inert, answer
    word = escaped(cli(loaded, ["Click OK."]))[0]
    answer = client.post("/translate", json={"q": "<!-- a --!>Click OK.", **call}).json()
    assert answer["translatedText"] == f"<!-- a --!>{word}"
    shown = escaped(cli(loaded, ["Click OK.-->"]))[0]
    answer = client.post("/translate", json={"q": "<!-->Click OK.-->", **call}).json()
    assert answer["translatedText"] == f"<!-->{shown}"


def test_html_is_parsed_off_the_event_loop_within_stated_caps(loaded, monkeypatch):
    """Markup is read in a worker thread (the event loop keeps answering meanwhile), and markup
    past a cap is a 413 naming it: 1 MB of nested elements stops at the depth cap."""
    seen = []
    read_items = libretranslate.read_items

    def recording(*args):
        seen.append(threading.current_thread() is threading.main_thread())
        return read_items(*args)

    monkeypatch.setattr(libretranslate, "read_items", recording)
    call = {"source": "en", "target": "de", "format": "html"}
    with TestClient(create_app(loaded, ServeSettings())) as client:
        assert client.post("/translate", json={"q": "<p>a</p>", **call}).status_code == 200
        assert seen == [False]
        deep = client.post("/translate", json={"q": "<b> " * 250_000, **call})
        wide = client.post("/translate", json={"q": "<br>" * (MAX_NODES + 1), **call})
    assert deep.status_code == 413
    assert deep.json() == {
        "error": f"Invalid request: the HTML is over this server's limit of {MAX_DEPTH} "
        "nesting depth"
    }
    assert wide.status_code == 413 and str(MAX_NODES) in wide.json()["error"]


def test_a_request_that_can_never_fit_is_a_413_naming_the_limit_never_503(loaded):
    """The sentences of texts' lines and HTML text nodes count against --max-sentences: 3 texts
    of 2,000 lines, 4,800 text nodes, or one line of 200,000 sentences, are refused for what they
    are, not told to retry."""
    with TestClient(create_app(loaded, ServeSettings())) as defaults:
        call = {"source": "en", "target": "de"}
        lines = defaults.post("/translate", json={"q": ["Click OK.\n" * 2000] * 3, **call})
        nodes = defaults.post("/translate", json={"q": "<p>a</p>" * 4800, "format": "html", **call})
        line = defaults.post("/translate", json={"q": "Ok. " * 200_000, **call})
    for response, count in ((lines, 6000), (nodes, 4800), (line, 200_000)):
        assert response.status_code == 413 and "retry-after" not in response.headers
        assert response.json() == {
            "error": f"the request holds {count} sentences (each line's, and each sentence of a "
            "line too long for the model apart); at most 1024 a request (--max-sentences)"
        }


def test_a_request_over_the_rate_itself_is_a_413_never_a_429_forever(loaded):
    """A request of more sentences than --req-limit could never pass: 413 naming the flag, and
    nothing charged (the client's next small request passes)."""
    with TestClient(create_app(loaded, ServeSettings(req_limit=3))) as limited:
        call = {"source": "en", "target": "de"}
        refused = limited.post("/translate", json={"q": "Click OK. Save it. Close. Open.", **call})
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"].endswith("at most 3 a minute per client (--req-limit)")
        native = limited.post("/v1/translate", json={"text": ["Click OK.\nSave.\nClose.\nOpen."]})
        assert native.status_code == 413 and "(--req-limit)" in native.json()["error"]
        assert (
            limited.post("/translate", json={"q": "Click OK. Save it.", **call}).status_code == 200
        )


def test_lines_and_text_nodes_are_charged_against_the_rate(loaded):
    with TestClient(create_app(loaded, ServeSettings(req_limit=60))) as limited:
        call = {"source": "en", "target": "de"}
        assert limited.post("/translate", json={"q": "a.\n" * 51, **call}).status_code == 200
        html_call = {"q": "<p>a</p>" * 9, "format": "html", **call}
        assert limited.post("/translate", json=html_call).status_code == 200  # 60 spent
        refused = limited.post("/translate", json={"q": "a", **call})
        assert (refused.status_code, refused.json()) == (
            429,
            {"error": "Slowdown: 60 per 1 minute"},
        )
    with TestClient(create_app(loaded, ServeSettings(req_limit=60))) as native:
        assert (
            native.post("/v1/translate", json={"text": ["\n".join(["a"] * 60)]}).status_code == 200
        )
        assert native.post("/v1/translate", json={"text": ["a"]}).status_code == 429


@pytest.mark.parametrize("charset", ["punycode", "idna", "unicode_escape", "utf-7", "nonsense"])
def test_a_forms_charset_never_gives_a_500(client, charset):
    """Multipart parts are decoded by the form's charset: one that fails on any text is a 400,
    and one that makes a lone surrogate (unicode_escape) is the 400 of a lone surrogate."""
    boundary = "b0undary"
    parts = [("q", "Click OK. \\ud800"), ("source", "en"), ("target", "de")]
    body = (
        "".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
            for name, value in parts
        )
        + f"--{boundary}--\r\n"
    )
    response = client.post(
        "/translate",
        content=body.encode(),
        headers={"content-type": f"multipart/form-data; boundary={boundary}; charset={charset}"},
    )
    assert response.status_code in (200, 400), response.text
    if charset == "unicode_escape":
        assert response.json() == {
            "error": "Invalid request: q holds a lone surrogate at character 10"
        }
    elif response.status_code == 400:
        assert list(response.json()) == ["error"]


ODD_TEXT = st.sampled_from(["\ud800", "en\udfff", "zh-Hans", "AUTO", " ", "\x00"])
LIBRE_BODIES = st.fixed_dictionaries(
    {"q": JSON_VALUES | st.lists(ODD_TEXT, max_size=3)},
    optional={
        "source": st.sampled_from(["en", "auto", "de", "", "xx"]) | ODD_TEXT | JSON_VALUES,
        "target": st.sampled_from(["de", "en", "zh-Hans"]) | ODD_TEXT | JSON_VALUES,
        "format": st.sampled_from(["text", "html", "pdf"]) | ODD_TEXT | JSON_VALUES,
        "alternatives": st.integers(-2, 20) | ODD_TEXT | JSON_VALUES,
        "api_key": ODD_TEXT | JSON_VALUES,
    },
)
MARKUP = st.lists(
    st.sampled_from(
        [
            "<b>",
            "</b>",
            "<p",
            ">",
            "<br>",
            "&amp;",
            "&",
            "<!--",
            "-->",
            "<!-->",
            "<!--->",
            "--!>",
            "<?",
            "</ ",
            "</>",
            "<!x>",
            "<script>",
            "x y",
            "Click OK. ",
            "\n",
            "\r\n",
            '<a href="a" href="b">',
            '<img onerror="" ONERROR="x">',
            '<p translate="no">',
        ]
    )
    | ANY_TEXT,
    max_size=12,
).map("".join)
CHARSETS = st.sampled_from(
    [
        "utf-8",
        "punycode",
        "idna",
        "unicode_escape",
        "raw_unicode_escape",
        "utf-7",
        "utf-16",
        "rot13",
        "base64",
        "nonsense",
        "",
    ]
)


def multipart(fields: dict[str, str], charset: str) -> tuple[bytes, str]:
    parts = "".join(
        f'--x\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields.items()
    )
    body = (parts + "--x--\r\n").encode("utf-8", "surrogatepass")
    return body, f"multipart/form-data; boundary=x; charset={charset}"


REQUESTS = st.one_of(
    LIBRE_BODIES.map(lambda b: (json.dumps(b).encode(), "application/json")),
    st.builds(
        lambda q: (
            json.dumps({"q": q, "source": "auto", "target": "de", "format": "html"}).encode(),
            "application/json",
        ),
        MARKUP,
    ),
    st.binary(max_size=40).map(lambda b: (b"q=" + b, "application/x-www-form-urlencoded")),
    st.builds(
        lambda q, source, charset: multipart({"q": q, "source": source, "target": "de"}, charset),
        MARKUP | ANY_TEXT | st.sampled_from(["\\ud800", "+AGEAYg-", "xn--bcher-kva"]),
        st.sampled_from(["en", "auto"]) | ODD_TEXT,
        CHARSETS,
    ),
)


def test_no_libretranslate_call_gets_a_5xx_but_503(client):
    """Any fields of any type, lone surrogates in any field, HTML of any shape, forms in any
    charset, any bytes, at /translate and /detect: a 2xx or 4xx in one shape, or 503."""

    @hypothesis.settings(
        max_examples=200,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
    @hypothesis.given(REQUESTS, st.sampled_from(["/translate", "/detect"]))
    def no_server_error(request, path):
        body, content_type = request
        response = client.post(path, content=body, headers={"content-type": content_type})
        assert response.status_code < 500 or response.status_code == 503, (body, response.text)
        if response.status_code != 200:
            assert list(response.json()) == ["error"], response.text

    no_server_error()


def test_language_codes_as_libretranslate_and_argos_write_them():
    assert [libretranslate_code(c) for c in ("zh-CN", "zh-TW", "zh", "pt-BR", "pt", "de-AT", "ja")] == [
        "zh-Hans", "zh-Hant", "zh-Hans", "pt-BR", "pt", "de", "ja",
    ]  # fmt: skip
    assert [argos_code(c) for c in ("zh-CN", "zh-TW", "pt-BR", "de")] == ["zh", "zt", "pb", "de"]
    codes = LanguageCodes.of(["en", "zh-CN", "pt", "pt-PT"])
    assert codes.libre == {"en": "en", "zh-CN": "zh-Hans", "pt": "pt", "pt-PT": "pt-PT"}
    for spelling in ("zh-Hans", "ZH-hans", "zh", "zh-CN"):
        assert codes.to_model(spelling) == "zh-CN"
    assert codes.to_model("pt-pt") == "pt-PT" and codes.to_model("fr") is None


# --- real clients against a real server on loopback -------------------------------------------


@pytest.fixture(scope="module")
def server(checkpoint_path):
    # The answers are checked against the PyTorch search's (`loaded`), so the server uses it.
    process, base = start_server(
        checkpoint_path,
        "--engine",
        "pytorch",
        "--api-key-env",
        "LT_TEST_KEY",
        env={"LT_TEST_KEY": "k3y"},
    )
    yield base
    stop(process)


def test_libretranslatepy_translates_detects_and_lists_languages(server, loaded):
    libretranslatepy = pytest.importorskip("libretranslatepy")
    api = libretranslatepy.LibreTranslateAPI(server, api_key="k3y")
    assert api.translate(ENGLISH[0], "en", "de") == cli(loaded, ENGLISH[:1])[0]
    assert api.detect(GERMAN)[0]["language"] == "de"
    assert [language["code"] for language in api.languages()] == ["en", "de"]


def test_libretranslate_aio_sync_and_async_batches(server, loaded):
    aio = pytest.importorskip("libretranslate_aio")
    with aio.LibreTranslate(server, api_key="k3y") as api:
        result = api.translate(ENGLISH, "en", "de")
        assert result.translated_text == cli(loaded, ENGLISH)
        assert api.frontend_settings().key_required is True
        assert api.health()

    async def batch():
        async with aio.AsyncLibreTranslate(server, api_key="k3y") as api:
            return await api.translate(ENGLISH[0], "auto", "de", alternatives=2)

    result = asyncio.run(batch())
    assert result.translated_text == cli(loaded, ENGLISH[:1])[0]
    assert result.detected_language.language == "en"
    with aio.LibreTranslate(server, api_key="wrong") as api, pytest.raises(aio.ForbiddenError):
        api.translate("a", "en", "de")


def test_a_mastodon_style_batch_of_html_posts_with_source_auto(server, loaded):
    """Mastodon's LibreTranslate client: JSON, q a list of HTML posts, source auto, format html,
    the key in the body; it reads translatedText[i] and detectedLanguage[i].language."""
    posts = [
        "<p>Select the cells that you want to copy. "
        '<a href="https://example.org/@a" class="u-url mention">@<span>a</span></a></p>',
        "<p>Click the OK button.</p><p>This function is not available in Basic.</p>",
    ]
    languages = httpx.get(f"{server}/languages", headers={"Content-Type": "application/json"})
    assert {item["code"]: item["targets"] for item in languages.json()}["en"] == ["de", "en"]
    response = httpx.post(
        f"{server}/translate",
        json={"q": posts, "source": "auto", "target": "de", "format": "html", "api_key": "k3y"},
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert [found["language"] for found in answer["detectedLanguage"]] == ["en", "en"]
    texts = cli(
        loaded,
        [
            "Select the cells that you want to copy.",
            "@",
            "a",
            "Click the OK button.",
            "This function is not available in Basic.",
        ],
    )
    escaped = [t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for t in texts]
    assert answer["translatedText"] == [
        f'<p>{escaped[0]} <a href="https://example.org/@a" class="u-url mention">'
        f"{escaped[1]}<span>{escaped[2]}</span></a></p>",
        f"<p>{escaped[3]}</p><p>{escaped[4]}</p>",
    ]


def test_the_keyed_servers_fields_with_lone_surrogates_are_400s_naming_them(server):
    """A key holding a lone surrogate, and /detect's q, on a server with a key."""
    for path, body, field in (
        (
            "/translate",
            '{"q": "a", "source": "en", "target": "de", "api_key": "k\\ud800"}',
            "api_key",
        ),
        ("/detect", '{"q": "a\\udfff", "api_key": "k3y"}', "q"),
    ):
        response = httpx.post(
            f"{server}{path}", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith(f"Invalid request: {field} holds a lone")


def metric(base: str, status: int) -> float:
    """translate_requests_total of /translate with `status`, from the server's /metrics."""
    text = httpx.get(f"{base}/metrics").text
    line = f'translate_requests_total{{path="/translate",status="{status}"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


def test_hostile_clients_of_a_real_server_a_body_cut_short_and_forged_forwarding(
    checkpoint_path,
):
    """A client that leaves mid-body is counted as 499, in one log line, not a 500 with a
    traceback; X-Forwarded-For is not trusted unless --forwarded-allow-ips names the proxy."""
    process, base = start_server(checkpoint_path, "--req-limit", "2")
    try:
        starts = {
            "application/json": b'{"q": "Click OK.',
            "application/x-www-form-urlencoded": b"q=Click+OK.",
            "multipart/form-data; boundary=x": b'--x\r\nContent-Disposition: form-data; name="q"'
            b"\r\n\r\nClick OK.",
        }
        for content_type, start in starts.items():
            with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as raw:
                raw.sendall(
                    b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + f"Content-Type: {content_type}\r\nContent-Length: 1000\r\n\r\n".encode()
                    + start
                )
        for _ in range(100):  # the server sees the disconnect once it reads the body
            if metric(base, 499) == len(starts):
                break
            time.sleep(0.1)
        assert metric(base, 499) == len(starts) and metric(base, 500) == 0
        answers = [
            httpx.post(
                f"{base}/v1/translate", json={"text": ["a"]}, headers={"X-Forwarded-For": address}
            ).status_code
            for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3")
        ]
        assert answers == [200, 200, 429]  # one client, whatever the header says
    finally:
        stop(process)
    log = process.stderr.read()
    assert "Traceback" not in log and "failed" not in log, log
    process, base = start_server(
        checkpoint_path, "--req-limit", "1", "--forwarded-allow-ips", "127.0.0.1"
    )
    try:
        answers = [
            httpx.post(
                f"{base}/v1/translate", json={"text": ["a"]}, headers={"X-Forwarded-For": address}
            ).status_code
            for address in ("10.0.0.1", "10.0.0.2", "10.0.0.1")
        ]
        assert answers == [200, 200, 429]  # the clients the trusted proxy names
    finally:
        stop(process)
