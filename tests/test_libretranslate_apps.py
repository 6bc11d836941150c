"""The requests of the applications that call LibreTranslate, replayed as each sends them (read
from their source: Nextcloud's integration_libretranslate with its jefs42/libretranslate client,
Discourse's translator plugin, Mastodon's TranslationService::LibreTranslate, Weblate's
libretranslate machinery) against a real translate-serve on loopback, with no API key set (as
the apps send it then: empty, or null). Each answer's text is checked against what translate-cli
gives each sentence, put back in its place by hand. The requests themselves are
tests/app_requests.py's, which replays them beside LibreTranslate."""

import html

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("lingua")
from app_requests import (  # noqa: E402
    MASTODON_POSTS,
    NEXTCLOUD_LINES,
    WEBLATE_STRINGS,
    discourse,
    discourse_post,
    mastodon,
    nextcloud,
    replay,
    weblate,
)
from processes import start_server, stop  # noqa: E402

from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.pipeline import translate_lines  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402

SERVER = SearchSettings(beam=5, length_penalty=1.0)  # the checkpoint's defaults: the server's


@pytest.fixture(scope="module")
def loaded(checkpoint_path):
    return load_model(checkpoint_path)


@pytest.fixture(scope="module")
def base(checkpoint_path):
    # The answers are checked against the PyTorch search's (`loaded`), so the server uses it.
    process, url = start_server(checkpoint_path, "--engine", "pytorch")
    yield url
    stop(process)


def cli(loaded, sentences: list[str]) -> list[str]:
    return translate_lines(loaded, sentences, SERVER)


def escaped(loaded, sentences: list[str]) -> list[str]:
    """translate-cli's translations as they stand in HTML (&, < and > escaped)."""
    return [html.escape(text, quote=False) for text in cli(loaded, sentences)]


def test_nextcloud_sends_plain_lines_as_html_multipart_and_gets_every_line_back(base, loaded):
    """Its connection test (POST /, 405, ignored), the settings (no char limit: -1), /languages
    twice (en and de listed, else its provider fails to start), /detect from the query, then the
    lines, each translated, on their lines again, as plain text: Nextcloud shows the answer as it
    comes. Its text holds "<", ">" and "&" bare, and the translations no "<" or "&" that could
    start markup, so the answer is the translations as they are, nothing escaped."""
    assert all(char in "\n".join(NEXTCLOUD_LINES) for char in "<>&")
    answers = replay(base, nextcloud(NEXTCLOUD_LINES))
    assert [answer.status_code for answer in answers] == [405, 200, 200, 200, 200, 200]
    assert answers[1].json()["charLimit"] == -1
    assert answers[2].json() == answers[3].json()
    assert {"en", "de"} <= {item["code"] for item in answers[2].json()}
    assert answers[4].json()[0]["language"] == "en"
    translations = cli(loaded, NEXTCLOUD_LINES)
    assert not any(char in "".join(translations) for char in "<&"), translations
    assert answers[5].json() == {"translatedText": "\n".join(translations)}


def test_discourse_sends_a_5000_character_cooked_post_as_a_form_and_it_is_translated(base, loaded):
    """/detect of the raw text, /languages (en and de), then the 5,000-character cooked post:
    every sentence translated in its place, those after the svg icons of its hashtags and image
    lightboxes as the others (every block of the post), the markup and the code block as they
    were."""
    post, sentences = discourse_post(5000)
    assert len(post) == 5000 and post.count("<svg") >= 8
    answers = replay(base, discourse(post, " ".join(sentences)))
    assert [answer.status_code for answer in answers] == [200, 200, 200], answers[-1].text
    assert answers[0].json()[0]["language"] == "en"
    assert {"en", "de"} <= {item["code"] for item in answers[1].json()}
    unique = [*dict.fromkeys(sentences)]
    translated = dict(zip(unique, escaped(loaded, unique)))
    expected, _ = discourse_post(5000, translated.__getitem__)
    answer = answers[2].json()["translatedText"]
    after_icons = answer[answer.index("<svg") :]
    assert [s for s in unique if " " in s and s in after_icons] == []
    assert answer == expected


def test_mastodon_sends_a_list_of_html_posts_with_source_auto_and_a_null_key(base, loaded):
    """/languages with `targets` (en into de), then the post and its content warning: each text
    node's sentences translated, the line break, the untranslated emoji and the entity kept;
    detectedLanguage a list, one a text."""
    answers = replay(base, mastodon(MASTODON_POSTS))
    assert [answer.status_code for answer in answers] == [200, 200], answers[-1].text
    targets = {item["code"]: set(item["targets"]) - {item["code"]} for item in answers[0].json()}
    assert targets["en"] == {"de"}
    t = escaped(
        loaded,
        [
            "Select the cells that you want to copy.",
            "Click the OK button.",
            "This function is not available in Basic.",
            "Click the OK button & close.",
        ],
    )
    answer = answers[1].json()
    assert answer["translatedText"] == [
        f'<p>{t[0]}<br>{t[1]} <span translate="no">:blobcat:</span></p><p>{t[2]}</p>',
        t[3],
    ]
    assert [found["language"] for found in answer["detectedLanguage"]] == ["en", "en"]
    assert all(0 < found["confidence"] <= 100 for found in answer["detectedLanguage"])


def test_weblate_sends_a_batch_of_strings_with_placeholders_and_no_format(base, loaded):
    """/languages, then the batch: translatedText a list as long as q, each string's sentences
    translated, the placeholders sent through the model as any text."""
    answers = replay(base, weblate(WEBLATE_STRINGS))
    assert [answer.status_code for answer in answers] == [200, 200], answers[-1].text
    assert {"en", "de"} <= {item["code"] for item in answers[0].json()}
    pieces = cli(
        loaded,
        [
            WEBLATE_STRINGS[0],
            "Click the OK button.",
            "Choose Tools - Options.",
            WEBLATE_STRINGS[2],
            WEBLATE_STRINGS[3],
        ],
    )
    assert answers[1].json() == {
        "translatedText": [pieces[0], f"{pieces[1]} {pieces[2]}", pieces[3], pieces[4]]
    }
