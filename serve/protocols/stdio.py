"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, the same dispatcher as HTTP."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO

import structlog

from common.json_wire import json_bytes
from common.mcp import INTERNAL, INVALID_REQUEST, PARSE_ERROR, McpError, parse_body, response, stdio_era
from serve.protocols.mcp import Dispatcher
from serve.service import KnowledgeSource
from serve.settings import ServeSettings

log = structlog.get_logger("llmwiki.serve.stdio")


def answer_line(dispatcher: Dispatcher, line: bytes) -> dict[str, Any] | None:
    """The reply to one input line (None for notifications and blank lines)."""
    if not line.strip():
        return None
    try:
        message = parse_body(line)
    except McpError as exc:
        return response(None, error=exc)
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        rid = message.get("id") if isinstance(message, dict) else None
        if isinstance(message, dict) and "method" not in message and (
                "result" in message or "error" in message):
            return None  # a client's reply to a server request; we never send any
        return response(rid if isinstance(rid, str | int) else None,
                        error=McpError(INVALID_REQUEST, "Invalid Request"))
    try:
        return dispatcher.handle(message, stdio_era(message)).body
    except Exception:  # one request's failure must not end the session
        log.exception("stdio_request_failed", method=message.get("method"))
        rid = message.get("id")
        return response(rid if isinstance(rid, str | int) else None,
                        error=McpError(INTERNAL, "Internal error"))


def lines_within(stdin: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """Input lines of at most `limit` bytes; None stands for a longer line, which is skipped
    without holding more than `limit` bytes of it."""
    while True:
        line = stdin.readline(limit + 1)
        if not line:
            return
        if line.endswith(b"\n") or len(line) <= limit:
            yield line
            continue
        while line and not line.endswith(b"\n"):  # drain the rest of the oversized line
            line = stdin.readline(limit + 1)
        yield None


def serve_stdio(dispatcher: Dispatcher, stdin: BinaryIO, stdout: BinaryIO, max_line_bytes: int) -> None:
    for line in lines_within(stdin, max_line_bytes):
        if line is None:
            reply: dict[str, Any] | None = response(None, error=McpError(
                PARSE_ERROR, f"Parse error: a message is longer than {max_line_bytes} bytes"))
        else:
            reply = answer_line(dispatcher, line)
        if reply is None:
            continue
        stdout.write(json_bytes(reply) + b"\n")
        stdout.flush()


def run_stdio(settings: ServeSettings) -> int:
    """`llmwiki-serve mcp ROOT`: serve until stdin closes. Logs go to stderr only. IDE and desktop
    clients start one of these per session, so, as `serve` does, the index is loaded (or built)
    and the restart cache written in a thread beside the first requests, and the cache is
    brought up to date again before the process exits."""
    source = KnowledgeSource(settings)
    warming = threading.Thread(target=source.warm_then_save, name="warm-up", daemon=True)
    try:
        dispatcher = Dispatcher(source)
        warming.start()
        log.info("mcp_stdio_started")
        serve_stdio(dispatcher, sys.stdin.buffer, sys.stdout.buffer, settings.max_body_bytes)
    except (KeyboardInterrupt, BrokenPipeError):
        pass  # the client went away
    finally:
        if warming.is_alive():
            warming.join()
        source.save_cache()
        source.close()
    return 0
