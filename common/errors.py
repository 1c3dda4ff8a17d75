"""The HTTP error model: every error has a status and a safe JSON body, rendered in one place."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

# Re-exported: the HTTP layers import the JSON writer with the response helpers.
from common.json_wire import json_bytes as json_bytes


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """JSON (data or a wire model) with non-ASCII kept (UTF-8), as both services answer."""
    return web.Response(body=json_bytes(payload, exact_floats=False), status=status,
                        content_type="application/json", charset="utf-8", headers=headers)


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
