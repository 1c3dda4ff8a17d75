"""structlog set-up, the per-request context middleware (request id, access log, 500s) and the
event loop's error reports."""

from __future__ import annotations

import asyncio
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
    # Records of the standard library's loggers (asyncio, aiohttp) are written in the same format,
    # so a JSON log stays one JSON object per line.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name,
                           structlog.processors.TimeStamper(fmt="iso", utc=True)],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    *(json_processors() if use_json else [structlog.dev.ConsoleRenderer(colors=False)])]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def json_processors() -> list[Any]:
    """The JSON tail: `exc_info` becomes a structured `exception` (type, message, frames) instead of
    `"exc_info": true`. Frame locals are left out: they may hold page text, queries or keys."""
    tracebacks = structlog.processors.ExceptionRenderer(
        structlog.tracebacks.ExceptionDictTransformer(show_locals=False))
    return [tracebacks, structlog.processors.JSONRenderer()]


# asyncio reports each failed accept (descriptors exhausted) with a traceback, and retries every
# second per listening socket: without a limit a flood of connections floods the log.
ACCEPT_FAILED = "socket.accept() out of system resource"
LOOP_REPORT_INTERVAL = 10.0


class LoopErrors:
    """The event loop's exception handler: failed accepts logged once per interval (with how many
    were left out), anything else logged as an error with its exception."""

    def __init__(self, service: str, interval: float = LOOP_REPORT_INTERVAL) -> None:
        self.log = structlog.get_logger(f"llmwiki.{service}.loop")
        self.interval = interval
        self.last = float("-inf")
        self.left_out = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        error = context.get("exception")
        if message.startswith(ACCEPT_FAILED):
            now = time.monotonic()
            if now - self.last < self.interval:
                self.left_out += 1
                return
            self.log.warning("accept_failed", error=str(error), left_out=self.left_out,
                             next_report_after_seconds=self.interval)
            self.last, self.left_out = now, 0
            return
        self.log.error("event_loop_error", message=message,
                       exc_info=error if isinstance(error, BaseException) else None)


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
            except Exception as exc:
                if isinstance(exc, ConnectionResetError) and (
                        request.transport is None or request.transport.is_closing()):
                    # The client closed its connection (mid-body, say): no answer can reach
                    # it, and it is no fault of ours; aiohttp drops the connection.
                    log.info("client_gone", method=request.method, path=request.path,
                             duration_ms=round((time.perf_counter() - started) * 1000, 3))
                    raise
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

    async def install_loop_errors(_: web.Application) -> None:
        asyncio.get_running_loop().set_exception_handler(LoopErrors(service))

    app.on_startup.append(install_loop_errors)
