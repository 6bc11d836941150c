"""What translate-serve's requests and answers look like: the settings, the request and
response models, and errors in one shape `{"error": message}` with a one-line message."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from translate.decode.settings import Budget, SearchSettings
from translate.defaults import BATCH_TOKENS, LENGTH_PENALTY_RANGE

# The native API's route; LibreTranslate's keeps /translate, which its clients hard-code.
NATIVE_TRANSLATE = "/v1/translate"
TRANSLATE_ROUTES = (NATIVE_TRANSLATE, "/translate")
# These need the API key where one is set.
PROTECTED = (*TRANSLATE_ROUTES, "/detect", "/info", "/metrics")
KEY_REQUIRED = "a valid API key is required (header X-API-Key or Authorization: Bearer)"
# LibreTranslate's clients send the key in the body: without a key header, these routes read the
# body (up to --max-body-bytes) before they check it.
KEY_IN_BODY = ("/translate", "/detect")

ROUTES = (
    "/",
    NATIVE_TRANSLATE,
    "/translate",
    "/health",
    "/ready",
    "/info",
    "/metrics",
    "/docs",
    "/openapi.json",
    "/languages",
    "/detect",
    "/frontend/settings",
    "/translate_file",
    "/suggest",
)

# What LibreTranslate adds to every answer, so that pages on other sites may call the API.
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Headers": "Authorization, Content-Type",
    "Access-Control-Expose-Headers": "Authorization",
    "Access-Control-Allow-Methods": "GET, POST",
    "Access-Control-Allow-Credentials": "true",
    "Access-Control-Max-Age": "1728000",
}


MAX_ERRORS_LISTED = 5  # of a request's validation errors, in its one-line message


@dataclass
class ServeSettings:
    budget: Budget = Budget(BATCH_TOKENS)  # what a running search holds
    # A request's sentences: what the model searches (each line, each sentence of a
    # LibreTranslate text or HTML text node, and each sentence of a line too long for the model).
    max_sentences: int = 1024
    max_line_chars: int = 4000  # the native API refuses a longer line; LibreTranslate's cuts it
    char_limit: int | None = None  # LibreTranslate's --char-limit: characters a text of a call
    max_body_bytes: int = 1 << 20
    max_queued_sentences: int = 4096  # sent to the model and not answered, of every request
    max_beam: int = 16
    api_key: str | None = None
    req_limit: int | None = None  # sentences a minute per API key or client address
    cache_entries: int = 10_000  # lines whose answers are kept for when they come again; 0: none
    checkpoint_digest: str = ""
    drain_seconds: float = 30.0  # after SIGTERM, for the requests in flight; then 503
    # The server's own search settings (length rule, input limit, restriction, engine), which
    # each request's beam, length penalty and languages complete.
    search: SearchSettings = field(default_factory=SearchSettings)
    # Seconds the model process may hold requests and send nothing (it sends a heartbeat a
    # second while it works) before it is taken for stalled: killed, its requests 503.
    model_timeout: float = 30.0


# A request's own glossary: bounded, so that one request cannot make every line's search for
# terms slow.
MAX_REQUEST_TERMS = 1000
MAX_TERM_CHARS = 200


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: list[StrictStr] = Field(
        description="lines to translate; one translation comes back for each, in order"
    )
    beam: StrictInt | None = Field(None, ge=1, description="beam size (default: the checkpoint's)")
    length_penalty: StrictFloat | None = Field(
        None,
        ge=LENGTH_PENALTY_RANGE[0],
        le=LENGTH_PENALTY_RANGE[1],
        allow_inf_nan=False,
        description="GNMT alpha (default: the checkpoint's)",
    )
    target_lang: StrictStr | None = Field(
        None, description="output language of a many-to-many model"
    )
    source_lang: StrictStr | None = Field(None, description="the input's language, where known")
    glossary: dict[StrictStr, StrictStr] | None = Field(
        None,
        description="source terms and the target terms to write for them, added to the "
        "server's --glossary (a source term in both takes this one's): each found as written "
        f"and as whole words comes out as its target term, once; at most {MAX_REQUEST_TERMS:,} "
        f"terms of at most {MAX_TERM_CHARS} characters, without tabs or line breaks",
    )


class LostToken(BaseModel):
    kind: str = Field(
        description="reserved, url, email, path, placeholder, mention, hashtag, key, number or code"
    )
    text: str


class TranslateResponse(BaseModel):
    translations: list[str]
    beam: int
    length_penalty: float
    target_lang: str | None
    seconds: float
    lost: list[list[LostToken]] = Field(
        description="for each text, the protected tokens of its source (numbers, placeholders, "
        "URLs, ...) that its translation lacks; empty where it kept them all"
    )
    confidences: list[float] = Field(
        description="for each text, the model's confidence in its translation, from 0 to 1: the "
        "geometric mean of its tokens' probabilities (1 for a blank text)"
    )


class ErrorResponse(BaseModel):
    error: str


def error(status: int, message: str, **headers: str) -> JSONResponse:
    """Every error the server sends has this one shape: {"error": message}. A lone surrogate that
    a message quotes from the request is written escaped (`\\ud800`): JSON's UTF-8 cannot hold it."""
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def parse_json(body: bytes) -> object:
    """The body's JSON, or HTTPException 400 saying where it is not JSON (as LibreTranslate
    answers it with 400; the native API too, as they share the route)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as fault:
        where = (
            f"at character {fault.pos}: {fault.msg}"
            if isinstance(fault, json.JSONDecodeError)
            else str(fault)
        )
        raise HTTPException(400, f"the body is not valid JSON ({where})") from None


def validation_message(exc: RequestValidationError | ValidationError) -> str:
    """FastAPI's or pydantic's list of faults as one line: `beam: Input should be a valid
    integer; ...`."""
    faults = []
    for fault in exc.errors():
        place = [part for part in fault["loc"] if part != "body"]
        if fault["type"] == "json_invalid":
            faults.append(
                f"the body is not valid JSON (at character {place[0] if place else 0}: "
                f"{fault.get('ctx', {}).get('error', fault['msg'])})"
            )
            continue
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in place
        ).lstrip(".")
        faults.append(f"{where or 'the body'}: {fault['msg']}")
    more = len(faults) - MAX_ERRORS_LISTED
    return "; ".join(faults[:MAX_ERRORS_LISTED]) + (f" (and {more} more)" if more > 0 else "")


def invalid_unicode(line: str) -> int | None:
    """The index of a lone surrogate (JSON can escape one; no text encoding can hold it), or None."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as fault:
        return fault.start
    return None
