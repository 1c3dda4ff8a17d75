"""structlog set-up and the per-request context middleware (request id, access log, 500s)."""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from common.errors import HttpError, render_errors

REQUEST_ID_HEADER = "X-Request-Id"
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
REQUEST_ID = web.RequestKey("request_id", str)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """Key-value events to stderr: JSON lines unless stderr is a terminal (or fmt says)."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *json_processors(),
        ] if use_json else [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),  # renders exc_info as a traceback itself
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def json_processors() -> list[Any]:
    """The JSON tail: `exc_info` becomes a structured `exception` (type, message, frames) instead of
    `"exc_info": true`. Frame locals are left out: they may hold page text, queries or keys."""
    tracebacks = structlog.processors.ExceptionRenderer(
        structlog.tracebacks.ExceptionDictTransformer(show_locals=False))
    return [tracebacks, structlog.processors.JSONRenderer()]


def request_id_for(request: web.Request) -> str:
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if _SAFE_REQUEST_ID.match(given) else uuid.uuid4().hex


def setup_request_context(app: web.Application, service: str) -> None:
    """Outermost middleware: binds a request id, logs one access event, and turns any
    exception that escaped the inner layers into a safe response."""
    log = structlog.get_logger(f"llmwiki.{service}.http")

    @web.middleware
    async def request_context(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = request_id_for(request)
        request[REQUEST_ID] = request_id
        structlog.contextvars.bind_contextvars(request_id=request_id)
        started = time.perf_counter()
        try:
            try:
                response = await render_errors(handler, request)
            except Exception:
                # The traceback stays in our log; the client gets a fixed body.
                log.exception("unhandled_exception", method=request.method, path=request.path)
                response = HttpError().response()
            if not response.prepared:
                response.headers[REQUEST_ID_HEADER] = request_id
            log.info("request", method=request.method, path=request.path, status=response.status,
                     duration_ms=round((time.perf_counter() - started) * 1000, 3))
            return response
        finally:
            structlog.contextvars.unbind_contextvars("request_id")

    app.middlewares.append(request_context)
