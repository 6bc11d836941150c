"""translate-serve's LibreTranslate file API: POST /translate_file and GET /download_file, end to
end with the small model (each file's texts translated as translate-cli translates them), the key,
rate and size limits, hostile and broken files (400, never 500, the server serving on), names
that try to leave the files directory, expiry, and the files directory's life."""

import io
import os
import re
import signal
import threading
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("lingua")
from fastapi.testclient import TestClient  # noqa: E402
from processes import start_server, stop, wait_until  # noqa: E402

from translate.decode.loaded_model import load_model  # noqa: E402
from translate.decode.pipeline import translate_lines, translate_nbest  # noqa: E402
from translate.decode.settings import SearchSettings  # noqa: E402
from translate.documents import plain  # noqa: E402
from translate.documents.formats import EXTENSIONS, FORMATS, RenderOptions, format_of  # noqa: E402
from translate.documents.safe import Limits  # noqa: E402
from translate.documents.translating import translate_texts  # noqa: E402
from translate.serve import files  # noqa: E402
from translate.serve.app import ServeSettings, create_app  # noqa: E402
from translate.serve.files import FileSettings, FileStore, safe_stem  # noqa: E402

SERVER = SearchSettings(beam=5, length_penalty=1.0)  # the checkpoint's defaults: the server's
DOCUMENTS = Path(__file__).parent / "fixtures" / "documents_real"
MODULES = Path(files.__file__).parents[1] / "documents"
URL = re.compile(
    r"http://testserver/download_file/([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
    r"[0-9a-f]{12})\.(.+)"
)
FIELDS = {"source": "en", "target": "de"}


@pytest.fixture(scope="module")
def loaded(checkpoint_path):
    return load_model(checkpoint_path)


@pytest.fixture(scope="module")
def client(loaded, tmp_path_factory):
    """A server translating files into a directory of the test's (kept at exit)."""
    settings = FileSettings(directory=tmp_path_factory.mktemp("files"), max_bytes=200_000)
    with TestClient(create_app(loaded, ServeSettings(), file_settings=settings)) as c:
        yield c


def serving(loaded, settings: ServeSettings | None = None, **file_settings) -> TestClient:
    return TestClient(
        create_app(loaded, settings or ServeSettings(), file_settings=FileSettings(**file_settings))
    )


def cli(loaded, lines: list[str]) -> list[str]:
    """What translate-cli writes for `lines` under the server's search settings."""
    return translate_lines(loaded, lines, SERVER)


def model_translate(loaded):
    """`translate_texts`'s translate with the model as the server searches it."""
    return lambda lines: [best[0] for best in translate_nbest(loaded, lines, SERVER)]


def upload(client, name: str, data: bytes, **fields):
    return client.post("/translate_file", files={"file": (name, data)}, data={**FIELDS, **fields})


def downloaded(client, response) -> bytes:
    assert response.status_code == 200, response.text
    got = client.get(response.json()["translatedFileUrl"])
    assert got.status_code == 200, got.text
    return got.content


def stored_names(store: FileStore) -> list[str]:
    return sorted(path.name for path in store.directory.iterdir())


def multipart(parts: list[tuple[str, str | None, bytes]]) -> dict:
    """A multipart body written by hand: (field, filename or None, bytes) a part."""
    body = b""
    for field, filename, value in parts:
        named = f'; filename="{filename}"' if filename is not None else ""
        body += f'--b\r\nContent-Disposition: form-data; name="{field}"{named}\r\n\r\n'.encode()
        body += value + b"\r\n"
    return {
        "content": body + b"--b--\r\n",
        "headers": {"Content-Type": "multipart/form-data; boundary=b"},
    }


def module_written(fmt) -> bool:
    return (MODULES / f"{fmt.module}.py").is_file()


# --- end to end ---------------------------------------------------------------------------------


def test_a_txt_file_comes_back_with_each_sentence_translated_and_its_bytes_kept(client, loaded):
    """Each line's sentences translated as translate-cli translates them; the byte-order mark,
    the CRLF line breaks, the blank line and the spaces between sentences as they were; the
    file named as LibreTranslate names it, an attachment of the text format's type."""
    first, second, third = (
        "Click the OK button.",
        "Select the cells that you want to copy.",
        "Choose Edit - Copy.",
    )
    data = f"\ufeff{first}\r\n\r\n  {second}  {third}\r\n".encode()
    response = upload(client, "My notes.txt", data)
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"translatedFileUrl"}
    found = URL.fullmatch(response.json()["translatedFileUrl"])
    assert found and found.group(2) == "My_notes_de.txt"
    one, two, three = cli(loaded, [first, second, third])
    expected = f"\ufeff{one}\r\n\r\n  {two}  {three}\r\n".encode()
    got = client.get(response.json()["translatedFileUrl"])
    assert got.status_code == 200 and got.content == expected
    assert got.headers["content-disposition"] == 'attachment; filename="My_notes_de.txt"'
    assert got.headers["content-type"] == "text/plain"
    store = client.app.state.files
    assert f"{found.group(1)}.My_notes_de.txt" in stored_names(store)
    # the same text through /translate: one translation, either way
    text = data.decode("utf-8-sig").replace("\r\n", "\n")
    answer = client.post("/translate", json={"q": text, **FIELDS}).json()["translatedText"]
    assert answer == expected.decode("utf-8-sig").replace("\r\n", "\n")


def test_a_files_sentences_reach_the_model_as_one_request(loaded):
    """Every text's sentences in one submission to the cross-client batches, not a text at a
    time; a sentence the file repeats is searched once."""
    with serving(loaded) as client:
        batcher = client.app.state.service.batcher
        submitted = []
        submit = batcher.submit

        async def counting(lines, key, segments):
            submitted.append(list(lines))
            return await submit(lines, key, segments)

        batcher.submit = counting
        data = b"Click OK. Save it.\nClose the dialog.\nClick OK.\nOpen the file.\n"
        assert upload(client, "a.txt", data).status_code == 200
    assert submitted == [["Click OK.", "Save it.", "Close the dialog.", "Open the file."]]


DOCUMENT_FIXTURES = sorted(
    path.name
    for path in DOCUMENTS.iterdir()
    if path.suffix in EXTENSIONS and path.name != "README.md" and not path.name.endswith(".de.po")
)


@pytest.mark.parametrize("name", DOCUMENT_FIXTURES)
def test_real_documents_come_back_as_the_format_module_writes_them_translated(loaded, name):
    """A real document (html, docx, odt, ods, xlsx, pot) uploaded and downloaded is what its
    format module writes with each text translated by the model as the server searches it."""
    fmt = format_of(name)
    if not module_written(fmt):
        pytest.skip(f"translate/documents/{fmt.module}.py is not written yet")
    data = (DOCUMENTS / name).read_bytes()
    with serving(loaded, ServeSettings(max_sentences=4096), max_bytes=1 << 20) as client:
        settings = client.get("/frontend/settings").json()
        assert set(fmt.extensions) <= set(settings["supportedFilesFormat"])
        got = downloaded(client, upload(client, name, data))
    document = fmt.read(data, name, Limits())
    translated = translate_texts(document.texts(), model_translate(loaded), 4000)
    assert got == document.render(translated, RenderOptions("en", "de"))
    assert len(fmt.read(got, name, Limits()).texts()) == len(document.texts())


def test_a_file_in_the_target_language_comes_back_as_it_was_with_source_auto(client, loaded):
    german = "Klicken Sie auf die Schaltfläche, um den Dialog zu schließen.\n".encode()
    assert downloaded(client, upload(client, "de.txt", german, source="auto")) == german
    english = b"Click the OK button to close the dialog.\n"
    auto = downloaded(client, upload(client, "en.txt", english, source="auto"))
    assert auto == downloaded(client, upload(client, "en.txt", english))
    assert auto == (cli(loaded, [english.decode().strip()])[0] + "\n").encode()
    digits = b"123 456\n"  # no language can be told: kept, as /translate keeps such a text
    assert downloaded(client, upload(client, "n.txt", digits, source="auto")) == digits


# --- the settings, the key, the rate and the limits -------------------------------------------


def test_frontend_settings_offer_the_extensions_of_the_formats_written(client, loaded):
    settings = client.get("/frontend/settings").json()
    assert settings["filesTranslation"] is True
    expected = [ext for fmt in FORMATS if module_written(fmt) for ext in fmt.extensions]
    assert settings["supportedFilesFormat"] == expected and ".txt" in expected
    assert set(expected) <= set(EXTENSIONS)
    with TestClient(create_app(loaded, ServeSettings())) as disabled:
        off = disabled.get("/frontend/settings").json()
        assert (off["filesTranslation"], off["supportedFilesFormat"]) == (False, [])
        refused = upload(disabled, "a.txt", b"Click OK.")
        assert (refused.status_code, refused.json()) == (
            403,
            {"error": "Files translation are disabled on this server."},
        )
        name = "00000000-0000-4000-8000-000000000000.a_de.txt"
        gone = disabled.get(f"/download_file/{name}")
        assert gone.status_code == 400 and "disabled" in gone.json()["error"]


def test_the_api_key_is_checked_as_translate_checks_it(loaded):
    with serving(loaded, ServeSettings(api_key="s3cret")) as keyed:
        assert keyed.get("/frontend/settings").json()["keyRequired"] is True
        missing = upload(keyed, "a.txt", b"Click OK.")
        assert (missing.status_code, missing.json()) == (
            400,
            {"error": "Please contact the server operator to get an API key"},
        )
        wrong = upload(keyed, "a.txt", b"Click OK.", api_key="guess")
        assert (wrong.status_code, wrong.json()) == (403, {"error": "Invalid API key"})
        assert upload(keyed, "a.txt", b"Click OK.", api_key="s3cret").status_code == 200
        header = keyed.post(
            "/translate_file",
            files={"file": ("a.txt", b"Click OK.")},
            data=FIELDS,
            headers={"X-API-Key": "s3cret"},
        )
        assert header.status_code == 200
        # the key is checked before the file is looked at
        assert upload(keyed, "a.pdf", b"%PDF-1.4").json()["error"].startswith("Please contact")


def test_a_files_sentences_are_charged_against_the_rate_and_the_sentence_limit(loaded):
    with serving(loaded, ServeSettings(req_limit=4)) as limited:
        three = b"Click OK. Save it.\nClose the dialog.\n"
        assert upload(limited, "a.txt", three).status_code == 200  # 3 of 4 spent
        refused = upload(limited, "a.txt", b"Click OK.\nSave it.\n")
        assert (refused.status_code, refused.json()) == (
            429,
            {"error": "Slowdown: 4 per 1 minute"},
        )
        assert upload(limited, "a.txt", b"Open it.\n").status_code == 200  # the fourth
    with serving(loaded, ServeSettings(max_sentences=2)) as small:
        over = upload(small, "a.txt", b"Click OK. Save it.\nClose the dialog.\n")
        assert over.status_code == 413
        assert over.json()["error"].endswith("at most 2 a request (--max-sentences)")


def test_a_files_characters_count_against_the_char_limit_together(loaded):
    with serving(loaded, ServeSettings(char_limit=20)) as limited:
        assert upload(limited, "a.txt", b"Click OK.\nSave it.\n").status_code == 200  # 17
        refused = upload(limited, "a.txt", b"Click OK.\nSave it.\nClose.\n")
        assert (refused.status_code, refused.json()) == (
            400,
            {"error": "Invalid request: request (23) exceeds text limit (20)"},
        )


def test_the_file_limit_is_the_uploads_own_and_other_bodies_keep_theirs(loaded):
    """--file-max-bytes bounds a file (413 naming it), its form 64 KiB more (the body refused
    by its length before it is read), and --max-body-bytes every other route."""
    with serving(loaded, ServeSettings(max_body_bytes=2000), max_bytes=10_000) as client:
        lines = b"Click OK.\n" * 500  # 5,000 bytes: over the body limit, within the file limit
        assert upload(client, "a.txt", lines).status_code == 200
        over = upload(client, "b.txt", b"Click OK.\n" * 1001)
        assert (over.status_code, over.json()) == (
            413,
            {
                "error": "Invalid request: b.txt has 10,010 bytes, more than the 10,000 a file "
                "may hold (--file-max-bytes)"
            },
        )
        huge = upload(client, "c.txt", b"x" * 100_000)
        assert huge.status_code == 413
        assert re.fullmatch(
            r"the request body of \d+ bytes is over the limit of 75536 bytes "
            r"\(--file-max-bytes\)",
            huge.json()["error"],
        )
        text = client.post("/translate", json={"q": "Click OK. " * 300, **FIELDS})
        assert text.status_code == 413 and "(--max-body-bytes)" in text.json()["error"]


# --- bad requests and hostile files -------------------------------------------------------------


@pytest.mark.parametrize(
    "send, message",
    [
        (dict(data=FIELDS), "Invalid request: missing file parameter"),
        (dict(json={"file": "a", **FIELDS}), "Invalid request: missing file parameter"),
        (
            dict(files={"file": ("a.txt", b"Click OK.")}, data={"target": "de"}),
            "Invalid request: missing source parameter",
        ),
        (
            dict(files={"file": ("a.txt", b"Click OK.")}, data={"source": "en", "target": ""}),
            "Invalid request: missing target parameter",
        ),
        (
            multipart([("file", None, b"Click OK."), ("source", None, b"en")]),
            "Invalid request: file must be a file, not text",
        ),
        (
            multipart(
                [("file", "", b"Click OK."), ("source", None, b"en"), ("target", None, b"de")]
            ),
            "Invalid request: empty file",
        ),
        (
            multipart([("file", "a.txt", b""), ("source", None, b"en"), ("target", None, b"de")]),
            "Invalid request: a.txt is empty (0 bytes)",
        ),
        (
            multipart(
                [("file", "a.txt", b"a"), ("source", "en.txt", b"en"), ("target", None, b"de")]
            ),
            "Invalid request: source must be text, not a file",
        ),
        (
            dict(files={"file": ("report.pdf", b"%PDF-1.4")}, data=FIELDS),
            "Invalid request: file format not supported: .pdf (the formats are ",
        ),
        (
            dict(files={"file": ("README", b"Click OK.")}, data=FIELDS),
            "Invalid request: file format not supported: (none) (the formats are ",
        ),
        (
            dict(files={"file": ("a.txt", b"a")}, data={"source": "fr", "target": "de"}),
            "fr is not supported",
        ),
        (
            dict(files={"file": ("a.txt", b"a")}, data={"source": "de", "target": "en"}),
            "English (en) is not available as a target language from German (de)",
        ),
        (
            dict(files={"file": ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")}, data=FIELDS),
            "Invalid request: image.txt line 1: not UTF-8 text",
        ),
        (
            dict(files={"file": ("cut.txt", "Grüße\n".encode()[:3])}, data=FIELDS),
            "Invalid request: cut.txt line 1: not UTF-8 text",
        ),
        (
            multipart(
                [
                    ("file", "../../etc/a\x07b.txt", b"\xff"),
                    ("source", None, b"en"),
                    ("target", None, b"de"),
                ]
            ),
            "Invalid request: a?b.txt line 1: not UTF-8 text",
        ),
    ],
)
def test_bad_requests_are_a_400_with_one_line_saying_why(client, send, message):
    response = client.post("/translate_file", **send)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith(message) if message.endswith(" ") else error == message
    assert "\n" not in error


def zip_of(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for name, data in entries.items():
            package.writestr(name, data)
    return out.getvalue()


W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def docx_of(document: bytes) -> bytes:
    """A real docx (LibreOffice's) with its word/document.xml replaced by `document`."""
    with zipfile.ZipFile(DOCUMENTS / "create_dialog.docx") as real:
        entries = {info.filename: real.read(info) for info in real.infolist()}
    return zip_of({**entries, "word/document.xml": document})


def billion_laughs() -> bytes:
    """A docx whose document declares entities that expand to 10^9 laughs."""
    entities = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{k} "{f"&lol{k - 1};" * 10}">' for k in range(1, 10)
    )
    return docx_of(
        f'<?xml version="1.0"?><!DOCTYPE w:document [{entities}]>'.encode()
        + b"<w:document "
        + W
        + b"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"
    )


def zip_bomb() -> bytes:
    """A docx whose document.xml unpacks 64 MiB from some 64 KiB."""
    document = b"<w:document " + W + b"><w:body>" + b" " * (64 << 20) + b"</w:body></w:document>"
    return docx_of(document)


def encrypted() -> bytes:
    """A docx whose entries say they are encrypted (the flag of a password-protected zip)."""
    data = bytearray(docx_of(b"<w:document " + W + b"><w:body/></w:document>"))
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        while at != -1:
            data[at + offset] |= 0x1
            at = data.find(signature, at + 4)
    return bytes(data)


def truncated() -> bytes:
    whole = docx_of(
        b"<w:document " + W + b"><w:body><w:p><w:r><w:t>Click OK.</w:t></w:r></w:p></w:body>"
        b"</w:document>"
    )
    return whole[: len(whole) // 2]


def xliff_laughs() -> bytes:
    """An XLIFF file whose DTD declares entities that expand to 10^9 laughs."""
    entities = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{k} "{f"&lol{k - 1};" * 10}">' for k in range(1, 10)
    )
    return (
        f'<?xml version="1.0"?><!DOCTYPE xliff [{entities}]>'
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        '<file original="a" source-language="en" datatype="plaintext"><body>'
        '<trans-unit id="1"><source>&lol9;</source></trans-unit></body></file></xliff>'
    ).encode()


HOSTILE = {
    "zip bomb": ("hostile.docx", zip_bomb, "^Invalid request: hostile.docx.* unpacks "),
    "billion laughs": (
        "hostile.docx",
        billion_laughs,
        "^Invalid request: hostile.docx.*word/document.xml: .*(DTD|entity)",
    ),
    "encrypted": ("hostile.docx", encrypted, "^Invalid request: hostile.docx.* encrypted"),
    "truncated": ("hostile.docx", truncated, "^Invalid request: hostile.docx.* zip"),
    "not a zip": ("hostile.docx", lambda: b"Click OK.\n", "^Invalid request: hostile.docx.* zip"),
    "xliff laughs": ("hostile.xlf", xliff_laughs, "^Invalid request: hostile.xlf.*(DTD|entity)"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_and_broken_files_are_a_400_and_the_server_serves_on(client, loaded, case):
    name, make, said = HOSTILE[case]
    fmt = format_of(name)
    if not module_written(fmt):
        pytest.skip(f"translate/documents/{fmt.module}.py is not written yet")
    data = make()
    assert len(data) < 200_000  # what reaches the server is small: the harm is inside
    response = upload(client, name, data)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "\n" not in error and re.search(said, error), error
    assert client.get("/health").status_code == 200
    answer = client.post("/translate", json={"q": "Click OK.", **FIELDS})
    assert answer.json() == {"translatedText": cli(loaded, ["Click OK."])[0]}


def test_a_format_modules_unexpected_fault_is_a_400_not_a_500(client, monkeypatch):
    def broken(data, name, limits):
        raise KeyError("w:t")

    monkeypatch.setattr(plain, "read", broken)
    response = upload(client, "odd.txt", b"Click OK.")
    assert (response.status_code, response.json()) == (
        400,
        {"error": "Invalid request: odd.txt: cannot be read as txt (KeyError)"},
    )


def test_the_server_answers_other_requests_while_a_file_is_read(client, loaded, monkeypatch):
    """A file is read in a thread of its own: meanwhile /translate and /health are answered."""
    reading, release, seen = threading.Event(), threading.Event(), []
    read_document = files.read_document

    def slow(*args):
        seen.append(threading.current_thread().name)
        reading.set()
        assert release.wait(30)
        return read_document(*args)

    monkeypatch.setattr(files, "read_document", slow)
    answers = []
    worker = threading.Thread(
        target=lambda: answers.append(upload(client, "slow.txt", b"Click OK.\n"))
    )
    worker.start()
    try:
        assert reading.wait(30)
        assert client.get("/health").status_code == 200
        answer = client.post("/translate", json={"q": "Save it.", **FIELDS})
        assert answer.json() == {"translatedText": cli(loaded, ["Save it."])[0]}
        assert not answers  # the file is still being read
    finally:
        release.set()
        worker.join(30)
    assert answers[0].status_code == 200 and seen[0].startswith("translate-files")


# --- downloads, expiry and the files directory ---------------------------------------------------


def test_a_download_names_only_a_file_the_server_wrote_in_its_directory(client, tmp_path):
    store: FileStore = client.app.state.files
    url = upload(client, "a.txt", b"Click OK.").json()["translatedFileUrl"]
    stored = URL.fullmatch(url).group(1) + ".a_de.txt"
    outside = store.directory.parent / "secret.txt"
    outside.write_text("secret")
    fake = "00000000-0000-4000-8000-000000000000.secret_de.txt"
    (store.directory / fake).symlink_to(outside)
    for name, status in [
        ("..%2Fsecret.txt", 404),  # a slash, however written, leaves no route to match
        ("%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", 404),
        ("secret.txt", 400),
        ("%2E%2E", 400),
        (f"{stored}%00", 400),
        (f"{stored}.", 400),
        (stored.upper(), 400),
        (fake, 400),  # a link out of the directory, named as the store names files
        ("00000000-0000-4000-8000-000000000000.a_de.txt", 404),
    ]:
        response = client.get(f"/download_file/{name}")
        assert response.status_code == status, (name, response.text)
        assert "secret" != response.text and "error" in response.json()
    assert client.get(f"/download_file/{stored}").status_code == 200
    for name in ["../secret.txt", "..", "a/b", "..\\secret.txt", f"{stored}/../../secret.txt"]:
        with pytest.raises(files.HTTPException) as refused:
            store.load(name)
        assert refused.value.status_code == 400


def test_stored_names_keep_nothing_of_the_uploaded_name_but_safe_characters():
    assert safe_stem('C:\\Users\\me\\Über "plan" v2.txt') == "Uber_plan_v2"
    assert safe_stem("../../etc/passwd") == "passwd"
    assert safe_stem("日本語.txt") == "file" and safe_stem(".txt") == "txt"
    assert safe_stem("a" * 300 + ".txt") == "a" * 100


def test_an_expired_file_is_gone_at_its_download_and_swept_from_the_directory(client, tmp_path):
    store: FileStore = client.app.state.files
    kept = upload(client, "kept.txt", b"Click OK.").json()["translatedFileUrl"]
    url = upload(client, "old.txt", b"Click OK.").json()["translatedFileUrl"]
    name = url.rsplit("/", 1)[1]
    old = time.time() - store.settings.expiry_seconds - 1
    os.utime(store.directory / name, (old, old))
    response = client.get(url)
    assert response.status_code == 404 and response.json()["error"] == (
        f"{name}: no such file (never made, or removed: translated files are kept 1800 s)"
    )
    assert name not in stored_names(store)
    again = upload(client, "old.txt", b"Click OK.").json()["translatedFileUrl"].rsplit("/", 1)[1]
    os.utime(store.directory / again, (old, old))
    (store.directory / "notes.txt").write_text("not the server's")  # in a directory given
    os.utime(store.directory / "notes.txt", (old, old))
    assert store.sweep() == 1
    assert again not in stored_names(store) and "notes.txt" in stored_names(store)
    assert client.get(kept).status_code == 200


def test_files_are_swept_once_expired_and_a_temporary_directory_removed_at_exit(loaded):
    with serving(loaded, expiry_seconds=2) as client:
        store: FileStore = client.app.state.files
        directory = store.directory
        assert directory.is_dir() and directory.name.startswith("translate-serve-files-")
        assert upload(client, "a.txt", b"Click OK.").status_code == 200
        assert len(stored_names(store)) == 1
        wait_until(lambda: not stored_names(store), "the expired file swept")
    assert not directory.exists()


def test_a_directory_given_is_made_and_kept_at_exit(loaded, tmp_path):
    directory = tmp_path / "made" / "files"
    with serving(loaded, directory=directory) as client:
        assert upload(client, "a.txt", b"Click OK.").status_code == 200
    assert len(list(directory.iterdir())) == 1


# --- translate-serve ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, error",
    [
        (["--file-max-bytes", "0"], "--file-max-bytes must be at least 1, got 0"),
        (
            ["--file-expiry-seconds", "0"],
            "--file-expiry-seconds must be more than 0 (and finite), got 0.0",
        ),
        (
            ["--file-expiry-seconds", "inf"],
            "--file-expiry-seconds must be more than 0 (and finite), got inf",
        ),
        (["--files-dir", "x", "--file-max-bytes", "5", "--file-expiry-seconds", "1"], None),
        (["--files-dir", __file__], f"--files-dir {__file__}: not a directory"),
    ],
)
def test_the_file_flags_are_checked_before_the_model_loads(flags, error):
    from translate.cli.serve import build_parser, settings_error

    args = build_parser().parse_args(["--checkpoint", "model.ckpt", *flags])
    assert settings_error(args) == error


def test_translate_serve_translates_files_on_loopback_and_removes_them_at_exit(
    checkpoint_path, tmp_path
):
    """The real server: a file up and down over loopback, --file-max-bytes its limit, the
    temporary files directory (under TMPDIR) gone once SIGTERM has stopped the server."""
    import httpx

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    server, base = start_server(
        checkpoint_path, "--file-max-bytes", "4096", env={"TMPDIR": str(temporary)}
    )
    try:
        assert base.startswith("http://127.0.0.1:")
        (directory,) = temporary.glob("translate-serve-files-*")
        assert directory.is_dir()
        sent = httpx.post(
            f"{base}/translate_file",
            files={"file": ("a.txt", b"Click OK.\n")},
            data=FIELDS,
            timeout=60,
        )
        assert sent.status_code == 200, sent.text
        url = sent.json()["translatedFileUrl"]
        assert url.startswith(f"{base}/download_file/")
        got = httpx.get(url, timeout=60)
        assert got.status_code == 200 and got.content.endswith(b"\n")
        big = httpx.post(
            f"{base}/translate_file",
            files={"file": ("b.txt", b"x" * 5000)},
            data=FIELDS,
            timeout=60,
        )
        assert big.status_code == 413 and "(--file-max-bytes)" in big.json()["error"]
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    finally:
        stop(server)
    assert not directory.exists()
