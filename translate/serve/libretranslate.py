"""translate-serve's second API: LibreTranslate's, so that its clients (Mastodon, Discourse,
Nextcloud, Weblate, browser extensions, libretranslatepy) use this server as they use LibreTranslate.

Fields come as LibreTranslate reads them: a JSON body, or the query string then a urlencoded or
multipart form; unlike LibreTranslate, a repeated form field `q` is a list (as libretranslate-aio
sends one). Answers and errors have LibreTranslate's shapes and messages. A text is translated a
sentence at a time, line by line (with format html, in each text node: `translate.text.markup`),
everything between the sentences given back as written; the sentences join the same cross-client
batches as the native API's lines, searched with the server's settings. Its file API
(`POST /translate_file`, `GET /download_file`) is `translate.serve.files`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import cached_property
from itertools import islice

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import FormData, UploadFile
from starlette.types import Message, Scope

from translate.serve.detection import Detected
from translate.serve.schema import NATIVE_TRANSLATE, invalid_unicode, parse_json
from translate.serve.service import Service, Work
from translate.text.language_codes import as_libretranslate_reads, language_name
from translate.text.markup import HtmlFragment, MarkupTooLarge
from translate.text.sentences import SplitText, lines_of, split_text

router = APIRouter()

FIELDS = frozenset({"q", "source", "target", "format", "alternatives", "api_key"})
FORMATS = ("text", "html")


@dataclass(frozen=True, kw_only=True)
class LibreRequest:
    """The fields of one call, however they came; not yet checked beyond their types."""

    q: str | list[str] | None = None
    source: str | None = None
    target: str | None = None
    format: str | None = None
    alternatives: str | int | None = None
    api_key: str | None = None

    @classmethod
    def from_json(cls, parsed: object) -> LibreRequest:
        if not isinstance(parsed, dict):
            raise HTTPException(400, "Invalid JSON format")
        if "q" not in parsed and "text" in parsed:
            raise HTTPException(
                400,
                f"Invalid request: missing q parameter (a body of text lines is the native API's: "
                f"POST {NATIVE_TRANSLATE})",
            )
        q = parsed.get("q")
        if not (q is None or isinstance(q, str) or _strings(q)):
            raise HTTPException(400, "Invalid request: q must be a string or a list of strings")
        given = {}
        for name in ("source", "target", "format", "api_key"):
            value = parsed.get(name)
            if value is not None and not isinstance(value, str):
                raise HTTPException(400, f"Invalid request: {name} must be a string")
            given[name] = value
        alternatives = parsed.get("alternatives")
        if isinstance(alternatives, bool) or not (
            alternatives is None or isinstance(alternatives, (int, str))
        ):
            raise HTTPException(400, "Invalid request: alternatives parameter is not a number")
        return cls(q=q, alternatives=alternatives, **given).checked()

    @classmethod
    async def from_form(cls, request: Request) -> LibreRequest:
        """The query string's fields, then the form's (urlencoded or multipart), as LibreTranslate
        reads them; a form's line breaks as LibreTranslate leaves them (LF, no final one)."""
        service: Service = request.app.state.service
        body = await request.body()
        try:  # off the event loop: a megabyte of form takes a while to read
            form = await service.off_loop(read_form, request.scope, body)
        except (UnicodeError, LookupError):  # a charset such as punycode that fails on any text
            raise HTTPException(
                400, "Invalid request: the form's charset cannot be read; send UTF-8"
            ) from None
        given: dict[str, list[str]] = {}
        for source in (request.query_params, form):
            for name in FIELDS:
                values = source.getlist(name)
                if values and name not in given:
                    if any(isinstance(value, UploadFile) for value in values):
                        raise HTTPException(
                            400, f"Invalid request: {name} must be text, not a file"
                        )
                    given[name] = values
        q = given.pop("q", None)
        if q is not None:
            q = [_form_line_breaks(text) for text in q]
            q = q[0] if len(q) == 1 else q
        return cls(q=q, **{name: values[0] for name, values in given.items()}).checked()

    def checked(self) -> LibreRequest:
        """The call itself, once every text field is Unicode text: a lone surrogate (which JSON
        can escape and a form's charset can make) is a 400 naming the field."""
        if isinstance(self.q, str):
            fields = [("q", self.q)]
        else:
            fields = [(f"q[{index}]", text) for index, text in enumerate(self.q or ())]
        named = ("source", "target", "format", "alternatives", "api_key")
        fields += [(name, getattr(self, name)) for name in named]
        for field, value in fields:
            if isinstance(value, str) and (position := invalid_unicode(value)) is not None:
                raise HTTPException(
                    400,
                    f"Invalid request: {field} holds a lone surrogate at character {position}",
                )
        return self


def read_form(scope: Scope, body: bytes) -> FormData:
    """The form of a request whose `body` has arrived, read as Starlette reads it (urlencoded or
    multipart), by an event loop of its own: run in a worker thread."""

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def read() -> FormData:
        return await Request(scope, receive).form()

    return asyncio.run(read())


def _form_line_breaks(text: str) -> str:
    """A form's text with its line breaks (CRLF, CR or LF) as LF and no final one, as
    LibreTranslate reads a form; every other character (form feed, U+2028, U+001C, ...) kept, as
    in a JSON body."""
    lines, _ = lines_of(text)
    if len(lines) > 1 and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def is_json(request: Request) -> bool:
    return "json" in request.headers.get("content-type", "")


async def read_request(request: Request) -> LibreRequest:
    """The call's fields from its JSON body, else from its query and form."""
    if not is_json(request):
        return await LibreRequest.from_form(request)
    return LibreRequest.from_json(parse_json(await request.body()))


@dataclass(frozen=True)
class Item:
    """One text of `q` as it is translated: its pieces (each line's sentences; with format html,
    those of each text node), and how to put their translations back in their places."""

    text: str
    parts: tuple[SplitText, ...]  # the text's, or one a text node
    fragment: HtmlFragment | None  # format html: the parsed markup

    @classmethod
    def read(cls, text: str, html: bool, max_chars: int) -> Item:
        """MarkupTooLarge for markup over the caps of `translate.text.markup`."""
        if not html:
            return cls(text, (split_text(text, max_chars=max_chars),), None)
        fragment = HtmlFragment.parse(text)
        return cls(
            text,
            tuple(split_text(node, max_chars=max_chars) for node in fragment.texts()),
            fragment,
        )

    @cached_property
    def pieces(self) -> list[str]:
        """What to translate, in order: every part's pieces."""
        return [piece for part in self.parts for piece in part.pieces]

    def render(self, translations: list[str]) -> str:
        """The text with each piece replaced by its translation (one a piece, in order), every
        other character as it was."""
        each = iter(translations)
        texts = [part.join(list(islice(each, len(part.pieces)))) for part in self.parts]
        return self.fragment.render(texts) if self.fragment is not None else texts[0]

    def words(self) -> str:
        """What detection reads: the pieces, markup left out."""
        return " ".join(self.pieces)


def read_items(texts: list[str], html: bool, max_chars: int) -> list[Item]:
    """Each text of `q` read (its markup parsed); HTTPException 413 for markup over a cap."""
    try:
        return [Item.read(text, html, max_chars) for text in texts]
    except MarkupTooLarge as fault:
        what = {"nodes": "HTML nodes", "depth": "nesting depth"}[fault.what]
        raise HTTPException(
            413, f"Invalid request: the HTML is over this server's limit of {fault.limit} {what}"
        ) from None


async def translate(service: Service, request: Request, call: LibreRequest) -> JSONResponse:
    """POST /translate with LibreTranslate's fields, checked in LibreTranslate's order."""
    check_key(service, request, call.api_key)
    if not call.q:
        raise HTTPException(400, "Invalid request: missing q parameter")
    texts = [call.q] if isinstance(call.q, str) else call.q
    for name in ("source", "target"):
        if not getattr(call, name):
            raise HTTPException(400, f"Invalid request: missing {name} parameter")
    check_char_limit(service, texts)
    alternatives = _alternatives(service, call.alternatives)
    text_format = call.format or "text"
    if text_format not in FORMATS:
        raise HTTPException(400, f"{text_format} format is not supported")
    html = text_format == "html"
    auto = call.source.strip().lower() == "auto"
    source = None if auto else model_language(service, call.source)
    target = model_language(service, call.target)
    # Off the event loop: markup is read in time linear in its size, up to its caps.
    items = await service.off_loop(read_items, texts, html, service.settings.max_line_chars)
    # Each piece is at least one sentence: a request over the limit by its pieces alone is
    # refused before detection and tokenising.
    service.check_sentences(sum(len(item.pieces) for item in items))
    if auto:
        detected = await service.off_loop(
            lambda: [service.detector.ranked(item.words())[0] for item in items]
        )
    else:
        detected = [Detected(source, 100.0) for _ in items]
    for found in detected:
        check_direction(service, found.language, target)
    n_best = 1 if html else alternatives + 1
    groups = _source_groups(items, detected, target)
    works = [
        await service.prepare(
            [piece for index in members for piece in items[index].pieces],
            service.libre_settings(source, target, n_best),
        )
        for source, members in groups.items()
    ]
    service.admit(works, call.api_key, client_address(request))
    outputs = await _translate_items(service, items, groups, works, n_best)
    content: dict = {
        "translatedText": [
            item.text if out is None else item.render(out[0]) for item, out in zip(items, outputs)
        ]
    }
    if alternatives:
        content["alternatives"] = [
            [] if html or out is None else _unique_alternatives(item, out)
            for item, out in zip(items, outputs)
        ]
    if auto:
        content["detectedLanguage"] = [
            {"confidence": found.confidence, "language": service.codes.libre[found.language]}
            for found in detected
        ]
    if isinstance(call.q, str):
        content = {name: value[0] for name, value in content.items()}
    return JSONResponse(content)


def check_char_limit(service: Service, texts: list[str]) -> None:
    """LibreTranslate's --char-limit: the characters of each text, markup included (none by
    default, as LibreTranslate's)."""
    limit = service.settings.char_limit
    longest = max(map(len, texts), default=0)
    if limit is not None and longest > limit:
        raise HTTPException(
            400, f"Invalid request: request ({longest}) exceeds text limit ({limit})"
        )


def check_direction(service: Service, source: str, target: str) -> None:
    """A direction the model was trained on (or a text already in the target), else 400."""
    if source != target and (source, target) not in service.directions:
        libre = service.codes.libre
        raise HTTPException(
            400,
            f"{language_name(target)} ({libre[target]}) is not available as a target language "
            f"from {language_name(source)} ({libre[source]})",
        )


def _source_groups(
    items: list[Item], detected: list[Detected], target: str
) -> dict[str, list[int]]:
    """The items to translate, by source language: all but those that come back as they were
    (in the target language already, in no language lingua can tell, or with nothing to
    translate)."""
    groups: dict[str, list[int]] = {}
    for index, found in enumerate(detected):
        if found.language != target and found.confidence > 0 and items[index].pieces:
            groups.setdefault(found.language, []).append(index)
    return groups


async def _translate_items(
    service: Service,
    items: list[Item],
    groups: dict[str, list[int]],
    works: list[Work],
    n_best: int,
) -> list[list[list[str]] | None]:
    """Each item's translations (n_best lists of one text a piece), or None for an item left
    out of `groups`; each group's pieces (its `Work`) translated together."""
    outputs: list[list[list[str]] | None] = [None] * len(items)
    done = await asyncio.gather(*(service.run(work) for work in works))
    for members, found in zip(groups.values(), done):
        flat = [translation.text for translation in found]
        start = 0
        for index in members:
            chunk = flat[start * n_best : (start + len(items[index].pieces)) * n_best]
            outputs[index] = [chunk[k::n_best] for k in range(n_best)]
            start += len(items[index].pieces)
    return outputs


def _unique_alternatives(item: Item, outputs: list[list[str]]) -> list[str]:
    """The other hypotheses, as LibreTranslate gives them: none empty, none repeated, none
    equal to the translation (so fewer than asked for may come back)."""
    best = item.render(outputs[0])
    found = []
    for hypothesis in outputs[1:]:
        text = item.render(hypothesis)
        if text.strip() and text != best and text not in found:
            found.append(text)
    return found


def _alternatives(service: Service, given: str | int | None) -> int:
    """How many alternatives to search for: as asked, but at most the beam's other hypotheses
    (`--max-beam` less one); fewer come back, as LibreTranslate's own may."""
    if given is None or given == "":
        return 0
    try:
        count = max(0, int(given))
    except ValueError:
        raise HTTPException(
            400, "Invalid request: alternatives parameter is not a number"
        ) from None
    return min(count, service.settings.max_beam - 1)


def model_language(service: Service, code: str) -> str:
    found = service.codes.to_model(code)
    if found is None:
        raise HTTPException(400, f"{as_libretranslate_reads(code)} is not supported")
    return found


def check_key(service: Service, request: Request, given: str | None) -> None:
    """The API key of field api_key, where the server has one: missing is 400 and wrong is 403,
    as LibreTranslate answers them; without one, any key (an empty one included) is accepted.
    A key in the native API's header, checked before the body was read, serves as well."""
    if service.key_accepted(request.headers):
        return
    if not given:
        raise HTTPException(400, "Please contact the server operator to get an API key")
    if not service.key_matches(given):
        raise HTTPException(403, "Invalid API key")


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.get("/languages")
@router.post("/languages")
async def languages(request: Request) -> JSONResponse:
    """Each of the model's languages with the targets it translates into (its own code among
    them: a text already in the target comes back as it is), English first, then by name."""
    service: Service = request.app.state.service
    codes = service.codes.libre
    order = sorted(codes, key=lambda code: (codes[code] != "en", language_name(code)))
    return JSONResponse(
        [
            {
                "code": codes[code],
                "name": language_name(code),
                "targets": sorted(
                    {codes[code]} | {codes[tgt] for src, tgt in service.directions if src == code}
                ),
            }
            for code in order
        ]
    )


@router.post("/detect")
async def detect(request: Request) -> JSONResponse:
    service: Service = request.app.state.service
    call = await read_request(request)
    check_key(service, request, call.api_key)
    texts = [call.q] if isinstance(call.q, str) else call.q
    service.check_rate(call.api_key, client_address(request), len(texts or ()) or 1)
    if not call.q:
        raise HTTPException(400, "Invalid request: missing q parameter")
    check_char_limit(service, texts)
    found = await service.off_loop(service.detector.detect_all, texts)
    return JSONResponse(
        [
            {"confidence": item.confidence, "language": service.codes.libre[item.language]}
            for item in found
        ]
    )


@router.get("/frontend/settings")
async def frontend_settings(request: Request) -> JSONResponse:
    """What LibreTranslate's web page and the clients that read it need to know."""
    service: Service = request.app.state.service
    target = service.targets[0] if service.targets else None
    keyed = service.settings.api_key is not None
    files = request.app.state.files  # translate.serve.files.FileStore, None where disabled
    return JSONResponse(
        {
            "charLimit": -1 if service.settings.char_limit is None else service.settings.char_limit,
            "frontendTimeout": 500,
            "apiKeys": keyed,
            "keyRequired": keyed,
            "suggestions": False,
            "filesTranslation": files is not None,
            "supportedFilesFormat": list(files.extensions) if files is not None else [],
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {
                    "code": service.codes.libre.get(target, ""),
                    "name": language_name(target) if target else "",
                },
            },
        }
    )


@router.post("/suggest")
async def suggest() -> JSONResponse:
    raise HTTPException(403, "Suggestions are disabled on this server.")
