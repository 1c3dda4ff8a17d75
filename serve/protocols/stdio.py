"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, the same dispatcher as HTTP."""

from __future__ import annotations

import json
import sys
from typing import Any, BinaryIO

import structlog

from common.mcp import INVALID_REQUEST, McpError, parse_body, response, stdio_era
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
    return dispatcher.handle(message, stdio_era(message)).body


def serve_stdio(dispatcher: Dispatcher, stdin: BinaryIO, stdout: BinaryIO) -> None:
    for line in stdin:
        reply = answer_line(dispatcher, line)
        if reply is None:
            continue
        stdout.write(json.dumps(reply, ensure_ascii=False).encode("utf-8") + b"\n")
        stdout.flush()


def run_stdio(settings: ServeSettings) -> int:
    """`llmwiki-serve mcp ROOT`: serve until stdin closes. Logs go to stderr only."""
    source = KnowledgeSource(settings)
    try:
        dispatcher = Dispatcher(source)
        log.info("mcp_stdio_started")
        serve_stdio(dispatcher, sys.stdin.buffer, sys.stdout.buffer)
    except (KeyboardInterrupt, BrokenPipeError):
        pass  # the client went away
    finally:
        source.close()
    return 0
