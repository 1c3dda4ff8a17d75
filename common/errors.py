"""The HTTP error model: every error has a status and a safe JSON body, rendered in one place."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic_core
from aiohttp import web
from pydantic_core import PydanticSerializationError

# "e-<digit>" is a literal prefix, which the regex engine finds with a fast search.
_NEGATIVE_EXPONENT = re.compile(rb"e-[0-9]")
_NUMBER_BYTES = b"0123456789.-"


def json_bytes(payload: Any) -> bytes:
    """Compact UTF-8 JSON, byte for byte `json.dumps(payload, ensure_ascii=False, separators=(",",
    ":"))` for JSON data (dicts with str keys, lists, str, int, float, bool, None), written by
    pydantic-core (about 4 times faster on a large answer). On such data the two differ only in
    how a float under 1e-4 is written (`0.00001` for `1e-05`): when the output may hold one, the
    stdlib writes it instead."""
    try:
        body = pydantic_core.to_json(payload, inf_nan_mode="constants")
    except PydanticSerializationError:  # a lone surrogate (or a type neither writer knows)
        return _stdlib_json(payload)
    if _may_hold_small_float(body):
        return _stdlib_json(payload)
    return body


def json_body(payload: Any) -> bytes:
    """Compact UTF-8 JSON for an HTTP answer: `json_bytes` without its check for tiny floats, which
    costs a pass over the output (~0.1 ms for a 120 KB answer). A float under 1e-4 may then be
    written as pydantic-core writes it (`0.00001`, `1.5e-7`): the same number to every JSON reader."""
    try:
        return pydantic_core.to_json(payload, inf_nan_mode="constants")
    except PydanticSerializationError:  # a lone surrogate (or a type neither writer knows)
        return _stdlib_json(payload)


def _may_hold_small_float(body: bytes) -> bool:
    """Whether compact JSON output may hold a number under 1e-4: one that starts `0.0000` or `-0.0000`,
    or has a negative exponent (`<digit>e-<digit>`), at the start of the output or after `:`, `,` or
    `[`. The same text inside a string (a UUID's `...-448e-8b3a-...`) is not a number."""
    for match in _NEGATIVE_EXPONENT.finditer(body):
        at = match.start()
        if at > 0 and body[at - 1] in _NUMBER_BYTES and _starts_value(body, at - 1):
            return True
    at = body.find(b"0.0000")
    while at >= 0:
        start = at - 1 if at > 0 and body[at - 1] == 0x2D else at  # a leading "-"
        if start == 0 or body[start - 1] in b":,[":
            return True
        at = body.find(b"0.0000", at + 1)
    return False


def _starts_value(body: bytes, at: int) -> bool:
    """Whether the run of number bytes that holds `body[at]` starts the output or follows `:`, `,`, `[`."""
    while at > 0 and body[at - 1] in _NUMBER_BYTES:
        at -= 1
    return at == 0 or body[at - 1] in b":,["


def _stdlib_json(payload: Any) -> bytes:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (echoed from a client's "\ud800") cannot be UTF-8: fall back to
        # ASCII escapes, which keep the JSON valid and the value faithful.
        return json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """JSON with non-ASCII kept (UTF-8), as both services answer."""
    return web.Response(body=json_body(payload), status=status, content_type="application/json",
                        charset="utf-8", headers=headers)


class HttpError(Exception):
    """Base for errors that become HTTP responses; subclasses fix the body shape."""

    status = 500
    headers: dict[str, str] | None = None

    def body(self) -> dict[str, Any]:
        return {"detail": "Internal Server Error"}

    def response(self) -> web.Response:
        return json_response(self.body(), status=self.status, headers=self.headers)


class DetailError(HttpError):
    """`{"detail": "<safe message>"}` (404 page not found, 400 user errors, 403 origin)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail

    def body(self) -> dict[str, Any]:
        return {"detail": self.detail}


class CodedError(HttpError):
    """`{"error": {"code": ..., "message": ...}}` (root errors and other coded failures)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


class ValidationFailed(HttpError):
    """422 with a FastAPI-compatible `detail` list of issues."""

    status = 422

    def __init__(self, issues: list[dict[str, Any]]) -> None:
        super().__init__("request validation failed")
        self.issues = issues

    def body(self) -> dict[str, Any]:
        return {"detail": self.issues}


def issue(kind: str, loc: list[str | int], msg: str, value: Any,
          ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    """One validation issue in pydantic's shape."""
    item: dict[str, Any] = {"type": kind, "loc": loc, "msg": msg, "input": value}
    if ctx:
        item["ctx"] = ctx
    return item


def from_aiohttp(exc: web.HTTPException) -> HttpError:
    """Map aiohttp's routing and size errors to our bodies."""
    if isinstance(exc, web.HTTPNotFound):
        return DetailError(404, "Not Found")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        error = DetailError(405, "Method Not Allowed")
        error.headers = {"Allow": ", ".join(sorted(exc.allowed_methods))}
        return error
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return DetailError(413, "Request body too large")
    return DetailError(exc.status, exc.reason or "error")


async def render_errors(handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                        request: web.Request) -> web.StreamResponse:
    """Run a handler, turning our errors and aiohttp's into their JSON responses."""
    try:
        return await handler(request)
    except HttpError as exc:
        return exc.response()
    except web.HTTPException as exc:
        return from_aiohttp(exc).response()
