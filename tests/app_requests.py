"""The requests of the applications that call LibreTranslate, exactly as each sends them, and the
probes of hostile clients, replayed against a running server: translate-serve, and beside it, where
asked, LibreTranslate itself serving the same checkpoint's Argos package.

    .venv/bin/python tests/app_requests.py --url http://127.0.0.1:8000
    .venv/bin/python tests/app_requests.py --checkpoint CKPT [--libretranslate]

Each app's sequence was read from its source: Nextcloud's integration_libretranslate (v1.1.1,
with the jefs42/libretranslate client it bundles: PHP curl, so an empty urlencoded body on every
request, GETs included, and multipart for /translate, always format html, its answer shown as
plain text), Discourse's translator plugin (Excon forms, the cooked HTML, where each hashtag and
image lightbox holds svg icons, cut at max_characters_per_translation, 5,000 by default), Mastodon's
TranslationService::LibreTranslate (JSON, q a list of HTML texts, api_key null when unset) and
Weblate's libretranslate machinery (python-requests JSON, no format, placeholders as [X<n>X]).
tests/test_libretranslate_apps.py replays the same sequences and checks every answer's text.
With --checkpoint, translate-serve (and LibreTranslate with --libretranslate, installed by
libretranslate_env.py) are started on loopback; the table shows each request's status, time
and answer.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import libretranslate_env

from translate.process_group import end_group, start_group
from translate.serve.launch import free_loopback_port, serve_command, wait_until_ready

REPO = Path(__file__).resolve().parents[1]

EMPTY_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@dataclass(frozen=True)
class Exchange:
    """One request as an app sends it: `send` holds httpx's request arguments (params, content,
    data, files, headers) that make its bytes."""

    app: str
    what: str
    method: str
    path: str
    send: dict = field(default_factory=dict)


NEXTCLOUD_LINES = [
    "Click the OK button.",
    "The value must be < 10 and > 2.",
    "Save & close the dialog.",
    "This function is not available in Basic.",
]


def nextcloud(lines: list[str], api_key: str = "") -> list[Exchange]:
    """integration_libretranslate: on every use POST / (its connection test, answer ignored), the
    settings and /languages twice, each with an empty urlencoded body (PHP curl sends one with a
    GET too); /detect with the text in the query and an empty body; then multipart /translate
    (q, format html always, the detected source, target, api_key: sent empty when unset)."""
    empty = {"content": b"", "headers": EMPTY_FORM}
    text = "\n".join(lines)
    parts = {"q": text, "format": "html", "source": "en", "target": "de", "api_key": api_key}
    return [
        Exchange("Nextcloud", "connection test", "POST", "/", empty),
        Exchange("Nextcloud", "settings", "GET", "/frontend/settings", empty),
        Exchange("Nextcloud", "languages", "GET", "/languages", empty),
        Exchange("Nextcloud", "languages again", "GET", "/languages", empty),
        Exchange(
            "Nextcloud",
            "detect",
            "POST",
            "/detect",
            {"params": {"q": text, "api_key": api_key}, **empty},
        ),
        Exchange(
            "Nextcloud",
            "translate",
            "POST",
            "/translate",
            {"files": {name: (None, value) for name, value in parts.items()}},
        ),
    ]


DISCOURSE_PAIRS = [
    ("Click the OK button.", "The dialog closes."),
    ("Select the cells that you want to copy.", "Choose Edit - Copy."),
    ("This function is not available in Basic.", "Use the API instead."),
]
DISCOURSE_LINK = "Open the help."
DISCOURSE_ASK = "Ask in the category:"
DISCOURSE_AFTER = "The screenshot shows the dialog."


def icon(name: str, classes: str = "", attributes: str = "") -> str:
    """An icon as Discourse writes it: an svg using a symbol of its sprite."""
    svg = f'<svg class="fa d-icon d-icon-{name} svg-icon{classes}"{attributes}>'
    return f'{svg}<use href="#{name}"></use></svg>'


@dataclass(frozen=True)
class Sentence:
    """A text of a cooked post that translate-serve translates as one piece."""

    text: str


def hashtag(slug: str) -> list[str | Sentence]:
    """A category hashtag as Discourse cooks it: an icon placeholder holding an svg, the slug."""
    return [
        f'<a class="hashtag-cooked" href="/c/{slug}/5" data-type="category" data-slug="{slug}">'
        f'<span class="hashtag-icon-placeholder">{icon("square-full", " svg-node")}</span><span>',
        Sentence(slug),
        "</span></a>",
    ]


def lightbox(name: str, size: str) -> list[str | Sentence]:
    """An uploaded image as Discourse cooks it, in a paragraph: its lightbox, whose meta holds
    an svg before the file name and size and one after."""
    hidden = ' aria-hidden="true"'
    expand = icon("discourse-expand", attributes=hidden)
    return [
        '<p><div class="lightbox-wrapper"><a class="lightbox" href="/uploads/default/original/1X/'
        f'{name}.png" data-download-href="/uploads/default/{name}" title="image">'
        f'<img src="/uploads/default/optimized/1X/{name}_2_690x388.png" alt="image" width="690" '
        f'height="388"><div class="meta">{icon("far-image", attributes=hidden)}'
        '<span class="filename">',
        Sentence("image"),
        '</span><span class="informations">',
        Sentence(size),
        f"</span>{expand}</div></a></div></p>\n",
    ]


def discourse_round() -> list[str | Sentence]:
    """Paragraphs of two sentences, one ending in a category hashtag, a list of links, an image
    and a paragraph after it."""
    parts: list[str | Sentence] = []
    for first, second in DISCOURSE_PAIRS:
        parts += ["<p>", Sentence(first), " ", Sentence(second), "</p>\n"]
    parts += ["<p>", Sentence(DISCOURSE_ASK), " ", *hashtag("help"), "</p>\n"]
    parts += ['<ul>\n<li><a href="https://example.org/help" rel="noopener nofollow ugc">']
    parts += [Sentence(DISCOURSE_LINK), "</a></li>\n</ul>\n"]
    parts += lightbox("a1b2c3", "1920×1080 123 KB")
    return parts + ["<p>", Sentence(DISCOURSE_AFTER), "</p>\n"]


def discourse_post(
    characters: int, translation: Callable[[str], str] | None = None
) -> tuple[str, list[str]]:
    """Cooked HTML of exactly `characters` characters as Discourse renders a post (rounds of
    `discourse_round`, a code block filling the rest), and its sentences in order; with
    `translation`, each sentence written as its translation, the markup as it was."""
    opening, closing = '<pre><code class="lang-auto">', "</code></pre>"

    def length(parts: list[str | Sentence]) -> int:
        return sum(len(part) if isinstance(part, str) else len(part.text) for part in parts)

    parts, one = [], discourse_round()
    while length(parts) + length(one) + len(opening) + len(closing) <= characters:
        parts += one
    parts.append(opening + "x" * (characters - length(parts) - len(opening) - len(closing)))
    parts.append(closing)
    write = translation or str
    post = "".join(part if isinstance(part, str) else write(part.text) for part in parts)
    return post, [part.text for part in parts if isinstance(part, Sentence)]


def discourse(post: str, raw: str, api_key: str = "") -> list[Exchange]:
    """discourse-loaded: /detect (a form: the raw text cut to 1,000 characters, then its tags
    stripped; api_key sent empty when unset), /languages, then /translate as a form: the cooked
    HTML (cut at 5,000 characters by default), the detected source, format html."""
    form = {"headers": {**EMPTY_FORM, "User-Agent": "excon/1.2.5"}}
    cut = raw if len(raw) <= 1000 else raw[:997] + "..."
    fields = {"q": post, "source": "en", "target": "de", "format": "html", "api_key": api_key}
    return [
        Exchange(
            "Discourse",
            "detect",
            "POST",
            "/detect",
            {"data": {"q": cut, "api_key": api_key}, **form},
        ),
        Exchange("Discourse", "languages", "GET", "/languages"),
        Exchange("Discourse", "translate", "POST", "/translate", {"data": fields, **form}),
    ]


MASTODON_POSTS = [
    "<p>Select the cells that you want to copy.<br>Click the OK button. "
    '<span translate="no">:blobcat:</span></p><p>This function is not available in Basic.</p>',
    "Click the OK button &amp; close.",
]


def mastodon(posts: list[str], api_key: str | None = None) -> list[Exchange]:
    """Mastodon: GET /languages with a JSON content type (it reads `targets`), then one JSON
    /translate of a post's HTML and its content warning (escaped text), source auto for a post
    without a language, format html, api_key null when unset; its Host has no port."""
    headers = {
        "Host": "127.0.0.1",
        "User-Agent": "Mastodon/4.3.0 (http.rb/5.2.0; +https://m.example/)",
        "Content-Type": "application/json",
    }
    body = {"q": posts, "source": "auto", "target": "de", "format": "html", "api_key": api_key}
    compact = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return [
        Exchange("Mastodon", "languages", "GET", "/languages", {"headers": headers}),
        Exchange(
            "Mastodon", "translate", "POST", "/translate", {"content": compact, "headers": headers}
        ),
    ]


WEBLATE_STRINGS = [
    "Select the cells that you want to copy.",
    "Click the OK button. Choose Tools - Options.",
    "Hello, [X7X]!",
    "Grüße aus [X10X].",
]


def weblate(strings: list[str], api_key: str = "") -> list[Exchange]:
    """Weblate's machinery: /languages, then JSON {"api_key", "q": [...], "source", "target"} as
    python-requests writes it (non-ASCII escaped), no format (so text)."""
    headers = {
        "User-Agent": "Weblate/5.9",
        "Accept": "application/json; charset=utf-8",
        "Referer": "https://weblate.example/",
    }
    body = {"api_key": api_key, "q": strings, "source": "en", "target": "de"}
    sent = {
        "content": json.dumps(body).encode(),
        "headers": {**headers, "Content-Type": "application/json"},
    }
    return [
        Exchange("Weblate", "languages", "GET", "/languages", {"headers": headers}),
        Exchange("Weblate", "translate", "POST", "/translate", sent),
    ]


def app_exchanges() -> list[Exchange]:
    post, sentences = discourse_post(5000)
    return [
        *nextcloud(NEXTCLOUD_LINES),
        *discourse(post, " ".join(sentences)),
        *mastodon(MASTODON_POSTS),
        *weblate(WEBLATE_STRINGS),
    ]


def replay(base: str, exchanges: list[Exchange], timeout_s: float = 120) -> list[httpx.Response]:
    """Each exchange sent in order to the server at `base`, its own bytes and headers."""
    with httpx.Client(base_url=base, timeout=timeout_s) as http:
        return [http.request(item.method, item.path, **item.send) for item in exchanges]


# --- hostile clients ----------------------------------------------------------------------------


def json_call(q: object, **fields: object) -> dict:
    body = {"q": q, "source": "en", "target": "de", **fields}
    return {"content": json.dumps(body).encode(), "headers": {"Content-Type": "application/json"}}


def multipart(charset: str, q: str) -> dict:
    parts = {"q": q, "source": "en", "target": "de"}
    body = (
        "".join(
            f'--b\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
            for name, value in parts.items()
        )
        + "--b--\r\n"
    )
    return {
        "content": body.encode(),
        "headers": {"Content-Type": f"multipart/form-data; boundary=b; charset={charset}"},
    }


def probes() -> list[Exchange]:
    """The requests that found the defects of LibreTranslate's API as apps and hostile clients
    use it, one a defect (`what` names it)."""
    post = "<p>" + " ".join(["Click the OK button to close the dialog."] * 110) + "</p>"
    html = {"format": "html"}
    return [
        Exchange(
            "lines",
            "html with two lines",
            "POST",
            "/translate",
            json_call("Click OK.\nSave the file.", **html),
        ),
        Exchange(
            "length",
            "a 4,500-character post",
            "POST",
            "/translate",
            {"data": {"q": post, "source": "en", "target": "de", "format": "html"}},
        ),
        Exchange(
            "json",
            "invalid JSON",
            "POST",
            "/translate",
            {"content": b'{"q": "a",', "headers": {"Content-Type": "application/json"}},
        ),
        Exchange(
            "alternatives",
            "alternatives 20",
            "POST",
            "/translate",
            json_call("Click OK.", alternatives=20),
        ),
        Exchange("blank", "whitespace-only q", "POST", "/translate", json_call("   ")),
        Exchange(
            "codes",
            "source zh-Hans",
            "POST",
            "/translate",
            {
                **json_call("a"),
                "content": json.dumps({"q": "a", "source": "zh-Hans", "target": "de"}).encode(),
            },
        ),
        Exchange(
            "letters",
            "emoji and numbers, auto",
            "POST",
            "/translate",
            {
                **json_call("x"),
                "content": json.dumps({"q": "😀 123", "source": "auto", "target": "de"}).encode(),
            },
        ),
        Exchange(
            "D1",
            "duplicate onerror",
            "POST",
            "/translate",
            json_call('<img src="ok.png" onerror="" onerror="alert(1)">', **html),
        ),
        Exchange(
            "D1",
            "duplicate href",
            "POST",
            "/translate",
            json_call('<a href="https://example.com/ok" href="javascript:alert(1)">ok</a>', **html),
        ),
        Exchange(
            "D2",
            "1 MB of nested whitespace",
            "POST",
            "/translate",
            json_call("<b> " * 250_000, **html),
        ),
        Exchange(
            "D3",
            "surrogate in source",
            "POST",
            "/translate",
            {
                "content": b'{"q": "a", "source": "\\ud800", "target": "de"}',
                "headers": {"Content-Type": "application/json"},
            },
        ),
        Exchange(
            "D3",
            "surrogate in format",
            "POST",
            "/translate",
            {
                "content": b'{"q": "a", "source": "en", "target": "de", "format": "\\ud800"}',
                "headers": {"Content-Type": "application/json"},
            },
        ),
        Exchange(
            "D3",
            "surrogate in /detect's q",
            "POST",
            "/detect",
            {"content": b'{"q": "a\\ud800"}', "headers": {"Content-Type": "application/json"}},
        ),
        Exchange(
            "D4",
            "multipart charset punycode",
            "POST",
            "/translate",
            multipart("punycode", "Click OK."),
        ),
        Exchange(
            "D4", "multipart charset idna", "POST", "/translate", multipart("idna", "Click OK.")
        ),
        Exchange(
            "D4",
            "multipart charset unicode_escape",
            "POST",
            "/translate",
            multipart("unicode_escape", "Click \\ud800"),
        ),
        Exchange(
            "D5",
            "3 texts of 2,000 lines",
            "POST",
            "/translate",
            json_call(["Click OK.\n" * 2000] * 3),
        ),
        Exchange(
            "D5",
            "4,800 HTML text nodes",
            "POST",
            "/translate",
            json_call("<p>a</p>" * 4800, **html),
        ),
        Exchange("D6", "one request of 4,000 lines", "POST", "/translate", json_call("a\n" * 4000)),
        Exchange(
            "D8",
            "comment closed by --!>",
            "POST",
            "/translate",
            json_call("<!-- a --!>Click OK.", **html),
        ),
        Exchange(
            "D8",
            "empty comment <!-->",
            "POST",
            "/translate",
            json_call("<!-->Click OK.-->", **html),
        ),
    ]


def cut_short(base: str) -> None:
    """D7: a request whose client leaves after a few bytes of its announced body."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(
            b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"q": "Click'
        )


def poll_health(base: str, done: threading.Event, seconds: list[float]) -> None:
    """GET /health every 0.1 s until `done`, each answer's time appended to `seconds`."""
    while not done.is_set():
        started = time.perf_counter()
        try:
            httpx.get(f"{base}/health", timeout=60)
        except httpx.HTTPError:
            pass
        seconds.append(time.perf_counter() - started)
        time.sleep(0.1)


def health_during(base: str, work: Callable[[], object]) -> tuple[object, float]:
    """`work()`'s result, and the longest /health took while it ran (the poll under way when it
    ended included)."""
    done, seconds = threading.Event(), []
    poller = threading.Thread(target=poll_health, args=(base, done, seconds), daemon=True)
    poller.start()
    try:
        result = work()
    finally:
        done.set()
        poller.join()
    return result, max(seconds, default=0.0)


@dataclass(frozen=True)
class Row:
    group: str
    what: str
    status: int
    seconds: float
    answer: str


def shown(response: httpx.Response, width: int) -> str:
    text = response.text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def run(base: str, exchanges: list[Exchange], width: int) -> list[Row]:
    rows = []
    with httpx.Client(base_url=base, timeout=300) as http:
        for item in exchanges:
            started = time.perf_counter()
            if item.app == "D2":  # the event loop's share: does /health still answer?
                response, longest = health_during(
                    base, lambda item=item: http.request(item.method, item.path, **item.send)
                )
                extra = f" (longest /health meanwhile {longest:.2f} s)"
            else:
                response, extra = http.request(item.method, item.path, **item.send), ""
            seconds = time.perf_counter() - started
            rows.append(
                Row(
                    item.app,
                    item.what + extra,
                    response.status_code,
                    seconds,
                    shown(response, width),
                )
            )
    return rows


def disconnects_counted(base: str) -> str:
    """D7: a client that leaves mid-body, and the statuses /metrics counted for /translate."""
    cut_short(base)
    time.sleep(1)
    metrics = httpx.get(f"{base}/metrics", timeout=30).text
    counted = re.findall(
        r'translate_requests_total\{path="/translate",status="(\d+)"\} (\S+)', metrics
    )
    return ", ".join(f"{status}: {float(count):g}" for status, count in counted)


def table(rows: list[Row], title: str) -> str:
    lines = [f"### {title}", "", "| | request | status | s | answer |", "|---|---|---:|---:|---|"]
    lines += [f"| {r.group} | {r.what} | {r.status} | {r.seconds:.2f} | {r.answer} |" for r in rows]
    return "\n".join(lines) + "\n"


def start_translate_serve(checkpoint: str, flags: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_loopback_port()
    server = start_group(serve_command(checkpoint, port, *flags), cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    failure = wait_until_ready(server, f"{base}/ready", 120)
    if failure:
        end_group(server)
        raise SystemExit(f"translate-serve {failure}")
    return server, base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--url", help="a translate-serve (or LibreTranslate) already running, with no API key"
    )
    where.add_argument(
        "--checkpoint", help="start translate-serve on this checkpoint (on loopback)"
    )
    parser.add_argument(
        "--libretranslate",
        action="store_true",
        help="with --checkpoint: replay the apps' requests at LibreTranslate too, serving the "
        "checkpoint's Argos package",
    )
    parser.add_argument("--no-probes", action="store_true", help="the apps' requests only")
    parser.add_argument("--width", type=int, default=110, help="characters of each answer shown")
    args = parser.parse_args(argv)
    if args.libretranslate and not args.checkpoint:
        parser.error(
            "--libretranslate starts LibreTranslate on --checkpoint's package: give --checkpoint"
        )
    servers = []
    try:
        bases = {"translate-serve": args.url}
        if args.checkpoint:
            server, bases["translate-serve"] = start_translate_serve(args.checkpoint, [])
            servers.append(server)
            if args.libretranslate:
                workdir = Path(tempfile.mkdtemp(prefix="app-requests-"))
                venv = libretranslate_env.libretranslate_venv()
                env = libretranslate_env.install_checkpoint(args.checkpoint, venv, workdir)
                server, bases["LibreTranslate"] = libretranslate_env.start_libretranslate(
                    venv, env, workdir
                )
                servers.append(server)
        for name, base in bases.items():
            print(table(run(base, app_exchanges(), args.width), f"The apps' requests: {name}"))
        if not args.no_probes:
            base = bases["translate-serve"]
            print(table(run(base, probes(), args.width), "Probes: translate-serve"))
            print(
                f"D7, a client leaving mid-body: /translate counted as {disconnects_counted(base)}"
            )
    finally:
        for server in servers:
            end_group(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
