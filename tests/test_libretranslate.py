"""translate-serve's LibreTranslate API: each way its fields come, its answers and errors as
LibreTranslate sends them, HTML, detection, the rate limit, CORS, and real clients (libretranslatepy,
libretranslate-aio, a Mastodon-style batch) against a real server on loopback."""

import asyncio
import json

import pytest

fastapi = pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("lingua")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_serve import ANY_TEXT, JSON_VALUES, en_de_checkpoint, start_server, stop  # noqa: E402

from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.decode.translator import load_translator  # noqa: E402
from translate.serve.app import ServeSettings, create_app  # noqa: E402
from translate.serve.rate_limit import RateLimiter  # noqa: E402
from translate.serve.schema import CORS_HEADERS, TranslateRequest  # noqa: E402
from translate.text.language_codes import LanguageCodes, argos_code, libretranslate_code  # noqa: E402

SERVER = SearchSettings(beam=5, length_penalty=1.0)  # the checkpoint's defaults: the server's
ENGLISH = ["Click the OK button to close the dialog.", "Select the cells that you want to copy."]
GERMAN = "Klicken Sie auf die Schaltfläche, um den Dialog zu schließen."


@pytest.fixture(scope="module")
def checkpoint_path(tmp_path_factory):
    return en_de_checkpoint(tmp_path_factory.mktemp("libretranslate"))


@pytest.fixture(scope="module")
def translator(checkpoint_path):
    return load_translator(checkpoint_path)


@pytest.fixture(scope="module")
def client(translator):
    with TestClient(create_app(translator, ServeSettings(max_lines=4, max_line_chars=200))) as c:
        yield c


def cli(translator, lines, settings=SERVER):
    """What translate-cli writes for `lines` under the server's search settings."""
    return translate_lines(translator, lines, settings)


@pytest.mark.parametrize(
    "how",
    ["json", "json-list", "form", "form-repeated", "multipart", "query", "query-repeated"],
)
def test_every_way_of_sending_the_fields_gives_translate_clis_translation(client, translator, how):
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
    expected = cli(translator, many if how.endswith(("list", "repeated")) else [one])
    assert response.json() == {"translatedText": expected if len(expected) > 1 else expected[0]}


def test_a_texts_lines_are_translated_each_and_a_forms_line_breaks_as_libretranslate_reads_them(
    client, translator
):
    text = f"{ENGLISH[0]}\n\n{ENGLISH[1]}"
    lines = cli(translator, text.split("\n"))
    answer = client.post("/translate", json={"q": text, "source": "en", "target": "de"}).json()
    assert answer == {"translatedText": "\n".join(lines)} and lines[1] == ""
    form = client.post(
        "/translate",
        data={"q": text.replace("\n", "\r\n") + "\r\n", "source": "en", "target": "de"},
    )
    assert form.json() == answer


@pytest.mark.parametrize("batching", ["continuous", "batch"])
def test_alternatives_are_the_beams_other_hypotheses_without_repeats(translator, batching):
    """n-best lists through either batcher: the first the translation, the others its
    alternatives, less the empty ones, the repeats and the translation itself."""
    with TestClient(create_app(translator, ServeSettings(batching=batching))) as client:
        answer = client.post(
            "/translate", json={"q": ENGLISH, "source": "en", "target": "de", "alternatives": 3}
        ).json()
        single = client.post(
            "/translate",
            data={"q": ENGLISH[0], "source": "en", "target": "de", "alternatives": "1"},
        ).json()
    nbest = cli(translator, ENGLISH, SearchSettings(beam=5, length_penalty=1.0, n_best=4))
    for index in range(len(ENGLISH)):
        mine = nbest[index * 4 : (index + 1) * 4]
        assert answer["translatedText"][index] == mine[0]
        expected = []
        for text in mine[1:]:
            if text.strip() and text != mine[0] and text not in expected:
                expected.append(text)
        assert answer["alternatives"][index] == expected
    assert any(answer["alternatives"])  # some hypotheses differ, so the lists are tested
    assert single["translatedText"] == cli(translator, ENGLISH[:1])[0]
    assert set(single) == {"translatedText", "alternatives"} and len(single["alternatives"]) <= 1


def test_auto_detects_each_texts_language_and_text_already_in_the_target_comes_back_as_it_is(
    client, translator
):
    answer = client.post(
        "/translate", json={"q": [ENGLISH[0], GERMAN], "source": "auto", "target": "de"}
    ).json()
    assert answer["translatedText"] == [cli(translator, ENGLISH[:1])[0], GERMAN]
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
    "fields, message",
    [
        ({"source": "en", "target": "de"}, "Invalid request: missing q parameter"),
        ({"q": "", "source": "en", "target": "de"}, "Invalid request: missing q parameter"),
        ({"q": [], "source": "en", "target": "de"}, "Invalid request: missing q parameter"),
        ({"q": "a", "target": "de"}, "Invalid request: missing source parameter"),
        ({"q": "a", "source": "en"}, "Invalid request: missing target parameter"),
        ({"q": "a", "source": "fr", "target": "de"}, "fr is not supported"),
        ({"q": "a", "source": "en", "target": "ZZ"}, "zz is not supported"),
        (
            {"q": "a", "source": "de", "target": "en"},
            "English (en) is not available as a target language from German (de)",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "format": "pdf"},
            "pdf format is not supported",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "alternatives": "x"},
            "Invalid request: alternatives parameter is not a number",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "alternatives": 16},
            "Invalid request: alternatives parameter must be <= 15",
        ),
        (
            {"q": ["a"] * 5, "source": "en", "target": "de"},
            "Invalid request: request (5) exceeds text limit (4)",
        ),
        (
            {"q": "a" * 201, "source": "en", "target": "de"},
            "Invalid request: request (201) exceeds text limit (200)",
        ),
        (
            {"q": ["a", 3], "source": "en", "target": "de"},
            "Invalid request: q must be a string or a list of strings",
        ),
        ({"q": "a", "source": ["en"], "target": "de"}, "Invalid request: source must be a string"),
        (
            {"q": "a\ud800", "source": "en", "target": "de"},
            "Invalid request: q[0] holds a lone surrogate at character 1",
        ),
    ],
)
def test_bad_calls_get_libretranslates_400_and_message(client, fields, message):
    response = client.post(
        "/translate",
        content=json.dumps(fields).encode(),  # escaped: a lone surrogate too
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, response.json()) == (400, {"error": message})


def test_the_key_comes_from_the_field_missing_is_400_and_wrong_is_403(translator):
    with TestClient(create_app(translator, ServeSettings(api_key="s3cret"))) as keyed:
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
    with TestClient(create_app(translator, ServeSettings())) as open_server:
        for key in ("", None, "anything"):
            assert open_server.post("/translate", json={**call, "api_key": key}).status_code == 200


def test_the_rate_is_counted_per_key_or_address_in_texts_and_refused_with_429(translator):
    with TestClient(create_app(translator, ServeSettings(req_limit=3))) as limited:
        call = {"q": ["a", "b"], "source": "en", "target": "de"}
        assert limited.post("/translate", json=call).status_code == 200
        refused = limited.post("/translate", json=call)
        assert (refused.status_code, refused.json()) == (429, {"error": "Slowdown: 3 per 1 minute"})
        assert limited.post("/detect", json={"q": "a"}).status_code == 200  # the third
        assert limited.post("/translate", json={"text": ["a"]}).status_code == 429  # the native too
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


def test_every_answer_carries_libretranslates_cors_headers_and_a_preflight_needs_no_key(translator):
    with TestClient(create_app(translator, ServeSettings(api_key="k"))) as keyed:
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


def test_html_keeps_the_markup_and_translates_every_text_node(client, translator):
    post = '<p>Click <b>OK</b> to close.<br>Tom &amp; Jerry &lt;3 <code>x = 1</code></p><script>var a = "b";</script>'
    answer = client.post(
        "/translate", json={"q": post, "source": "en", "target": "de", "format": "html"}
    ).json()["translatedText"]
    texts = cli(translator, ["Click", "OK", "to close.", "Tom & Jerry <3"])
    escaped = [t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for t in texts]
    assert answer == (
        f"<p>{escaped[0]} <b>{escaped[1]}</b> {escaped[2]}<br>{escaped[3]} <code>x = 1</code></p>"
        '<script>var a = "b";</script>'
    )


LIBRE_BODIES = st.fixed_dictionaries(
    {"q": JSON_VALUES},
    optional={
        "source": st.sampled_from(["en", "auto", "de", "", "xx"]) | JSON_VALUES,
        "target": st.sampled_from(["de", "en", "zh-Hans"]) | JSON_VALUES,
        "format": st.sampled_from(["text", "html", "pdf"]) | JSON_VALUES,
        "alternatives": st.integers(-2, 20) | JSON_VALUES,
        "api_key": JSON_VALUES,
    },
)
MARKUP = st.lists(
    st.sampled_from(
        ["<b>", "</b>", "<p", ">", "<br>", "&amp;", "&", "<!--", "-->", "<script>", "x y", "\n"]
    )
    | ANY_TEXT,
    max_size=12,
).map("".join)


def test_no_libretranslate_call_gets_a_5xx_but_503(client):
    """Any fields of any type, HTML of any shape, any bytes: a 2xx or 4xx in one shape."""

    @hypothesis.settings(
        max_examples=150,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
    @hypothesis.given(
        LIBRE_BODIES.map(json.dumps)
        | st.builds(
            lambda q: json.dumps({"q": q, "source": "auto", "target": "de", "format": "html"}),
            MARKUP,
        )
        | st.binary(max_size=40).map(lambda b: b"q=" + b)
    )
    def no_server_error(body):
        json_body = body.startswith("{") if isinstance(body, str) else False
        response = client.post(
            "/translate",
            content=body.encode() if isinstance(body, str) else body,
            headers={
                "content-type": "application/json"
                if json_body
                else "application/x-www-form-urlencoded"
            },
        )
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
    process, base = start_server(
        checkpoint_path, "--api-key-env", "LT_TEST_KEY", env={"LT_TEST_KEY": "k3y"}
    )
    yield base
    stop(process)


def test_libretranslatepy_translates_detects_and_lists_languages(server, translator):
    libretranslatepy = pytest.importorskip("libretranslatepy")
    api = libretranslatepy.LibreTranslateAPI(server, api_key="k3y")
    assert api.translate(ENGLISH[0], "en", "de") == cli(translator, ENGLISH[:1])[0]
    assert api.detect(GERMAN)[0]["language"] == "de"
    assert [language["code"] for language in api.languages()] == ["en", "de"]


def test_libretranslate_aio_sync_and_async_batches(server, translator):
    aio = pytest.importorskip("libretranslate_aio")
    with aio.LibreTranslate(server, api_key="k3y") as api:
        result = api.translate(ENGLISH, "en", "de")
        assert result.translated_text == cli(translator, ENGLISH)
        assert api.frontend_settings().key_required is True
        assert api.health()

    async def batch():
        async with aio.AsyncLibreTranslate(server, api_key="k3y") as api:
            return await api.translate(ENGLISH[0], "auto", "de", alternatives=2)

    result = asyncio.run(batch())
    assert result.translated_text == cli(translator, ENGLISH[:1])[0]
    assert result.detected_language.language == "en"
    with aio.LibreTranslate(server, api_key="wrong") as api, pytest.raises(aio.ForbiddenError):
        api.translate("a", "en", "de")


def test_a_mastodon_style_batch_of_html_posts_with_source_auto(server, translator):
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
        translator,
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
