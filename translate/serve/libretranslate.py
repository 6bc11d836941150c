"""translate-serve's second API: LibreTranslate's, so that its clients (Mastodon, Discourse,
Nextcloud, Weblate, browser extensions, libretranslatepy) use this server as they use LibreTranslate.

Fields come as LibreTranslate reads them: a JSON body, or the query string then a urlencoded or
multipart form; unlike LibreTranslate, a repeated form field `q` is a list (as libretranslate-aio
sends one). Answers and errors have LibreTranslate's shapes and messages. Texts join the same
cross-client batches as the native API's lines, searched with the server's settings.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from translate.serve.detection import Detected
from translate.serve.schema import text_fault
from translate.serve.service import Service
from translate.text.language_codes import language_name
from translate.text.markup import HtmlFragment

router = APIRouter()

FIELDS = frozenset({"q", "source", "target", "format", "alternatives", "api_key"})
FORMATS = ("text", "html")


def is_libretranslate(parsed: object) -> bool:
    """A JSON body is LibreTranslate's when it has q, or fields of LibreTranslate's and no text
    (the native API's); any other body is the native API's, and so are its errors."""
    if not isinstance(parsed, dict):
        return False
    return "q" in parsed or ("text" not in parsed and bool(FIELDS & parsed.keys()))


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
        return cls(q=q, alternatives=alternatives, **given)

    @classmethod
    async def from_form(cls, request: Request) -> LibreRequest:
        """The query string's fields, then the form's (urlencoded or multipart), as LibreTranslate
        reads them; a form's line breaks as LibreTranslate leaves them (LF, no final one)."""
        form = await request.form()
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
            q = ["\n".join(text.splitlines()) for text in q]
            q = q[0] if len(q) == 1 else q
        return cls(q=q, **{name: values[0] for name, values in given.items()})


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def is_json(request: Request) -> bool:
    return "json" in request.headers.get("content-type", "")


async def read_request(request: Request) -> LibreRequest:
    """The call's fields from its JSON body, else from its query and form."""
    if not is_json(request):
        return await LibreRequest.from_form(request)
    try:
        parsed = json.loads(await request.body())
    except (ValueError, RecursionError):
        raise HTTPException(400, "Invalid request: the body is not valid JSON") from None
    return LibreRequest.from_json(parsed)


class TextItem:
    """A text of `q` in format text: each line translated."""

    def __init__(self, text: str) -> None:
        self.text, self.pieces = text, text.split("\n")

    def render(self, translations: list[str]) -> str:
        return "\n".join(translations)

    def words(self) -> str:
        return self.text


class HtmlItem:
    """A text of `q` in format html: each text node translated, the markup kept."""

    def __init__(self, text: str) -> None:
        self.text, self.fragment = text, HtmlFragment.parse(text)
        self.pieces = self.fragment.texts()

    def render(self, translations: list[str]) -> str:
        return self.fragment.render(translations)

    def words(self) -> str:
        return " ".join(self.pieces)


async def translate(service: Service, request: Request, call: LibreRequest) -> JSONResponse:
    """POST /translate with LibreTranslate's fields, checked in LibreTranslate's order."""
    check_key(service, request, call.api_key)
    texts = [call.q] if isinstance(call.q, str) else call.q
    service.check_rate(call.api_key, client_address(request), len(texts or ()) or 1)
    if not call.q:
        raise HTTPException(400, "Invalid request: missing q parameter")
    for name in ("source", "target"):
        if not getattr(call, name):
            raise HTTPException(400, f"Invalid request: missing {name} parameter")
    alternatives = _alternatives(service, call.alternatives)
    check_texts(service, texts)
    auto = call.source.strip().lower() == "auto"
    source = None if auto else _language(service, call.source)
    target = _language(service, call.target)
    text_format = call.format or "text"
    if text_format not in FORMATS:
        raise HTTPException(400, f"{text_format} format is not supported")
    html = text_format == "html"
    items = [HtmlItem(text) if html else TextItem(text) for text in texts]
    if auto:
        detected = await asyncio.to_thread(
            lambda: [service.detector.ranked(item.words())[0] for item in items]
        )
    else:
        detected = [Detected(source, 100.0) for _ in items]
    for found in detected:
        check_direction(service, found.language, target)
    n_best = 1 if html else alternatives + 1
    outputs = await _translate_items(service, items, detected, target, n_best)
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


def check_texts(service: Service, texts: list[str]) -> None:
    """LibreTranslate's limits (--max-lines texts, --max-line-chars a text), and Unicode text."""
    limits = service.settings
    fault = text_fault(texts, limits.max_lines, limits.max_line_chars)
    if fault is None:
        return
    if fault.kind == "surrogate":
        raise HTTPException(
            400,
            f"Invalid request: q[{fault.index}] holds a lone surrogate at character {fault.value}",
        )
    limit = limits.max_lines if fault.kind == "count" else limits.max_line_chars
    raise HTTPException(
        400, f"Invalid request: request ({fault.value}) exceeds text limit ({limit})"
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


async def _translate_items(
    service: Service, items: list, detected: list[Detected], target: str, n_best: int
) -> list[list[list[str]] | None]:
    """Each item's translations (n_best lists of one text a piece), or None for an item that
    comes back as it was: in the target language already, or in no language lingua can tell.
    Items are grouped by source language, each group's pieces one call of the batcher."""
    groups: dict[str, list[int]] = {}
    for index, found in enumerate(detected):
        if found.language != target and found.confidence > 0:
            groups.setdefault(found.language, []).append(index)
    calls = [
        service.submit(
            [piece for index in members for piece in items[index].pieces],
            service.libre_settings(source, target, n_best),
        )
        for source, members in groups.items()
    ]
    outputs: list[list[list[str]] | None] = [None] * len(items)
    for members, flat in zip(groups.values(), await asyncio.gather(*calls)):
        start = 0
        for index in members:
            chunk = flat[start * n_best : (start + len(items[index].pieces)) * n_best]
            outputs[index] = [chunk[k::n_best] for k in range(n_best)]
            start += len(items[index].pieces)
    return outputs


def _unique_alternatives(item: TextItem, outputs: list[list[str]]) -> list[str]:
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
    if given is None or given == "":
        return 0
    try:
        count = max(0, int(given))
    except ValueError:
        raise HTTPException(
            400, "Invalid request: alternatives parameter is not a number"
        ) from None
    most = service.settings.max_beam - 1
    if count > most:
        raise HTTPException(400, f"Invalid request: alternatives parameter must be <= {most}")
    return count


def _language(service: Service, code: str) -> str:
    found = service.codes.to_model(code)
    if found is None:
        raise HTTPException(400, f"{code.strip().lower()} is not supported")
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
    if any(len(text) > service.settings.max_line_chars for text in texts):
        longest = max(map(len, texts))
        raise HTTPException(
            400,
            f"Invalid request: request ({longest}) exceeds text limit "
            f"({service.settings.max_line_chars})",
        )
    found = await asyncio.to_thread(service.detector.detect_all, texts)
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
    return JSONResponse(
        {
            "charLimit": service.settings.max_line_chars,
            "frontendTimeout": 500,
            "apiKeys": keyed,
            "keyRequired": keyed,
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {
                    "code": service.codes.libre.get(target, ""),
                    "name": language_name(target) if target else "",
                },
            },
        }
    )


@router.post("/translate_file")
async def translate_file() -> JSONResponse:
    raise HTTPException(403, "Files translation are disabled on this server.")


@router.post("/suggest")
async def suggest() -> JSONResponse:
    raise HTTPException(403, "Suggestions are disabled on this server.")
