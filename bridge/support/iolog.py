"""The opt-in I/O debug log: what the bridge received and answered, and what it sent to sources and
the runtime and got back, redacted, as JSON lines (contract 9.2; off unless the operator asks)."""

from __future__ import annotations

import contextvars
import dataclasses
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog

from bridge.support.clock import now_iso
from bridge.support.redaction import redact, redact_text
from common.json_wire import json_bytes

SCHEMA = "llmwiki.agent-bridge.io.v1"
EVENT = "llmwiki.agent_bridge.io"
IO_LOG_MODES = ("off", "file", "logger")
DEFAULT_PATH = Path(".runtime-logs") / "llmwiki-agent-bridge-io.jsonl"
_OPERATION = re.compile(r"[^A-Za-z0-9_.:-]+")
_KEPT_HEADERS = ("accept", "content-type")

log = structlog.get_logger("llmwiki.bridge.support.iolog")


@dataclass(frozen=True)
class IoScope:
    """Who the events of one run belong to: set per request, narrowed per source."""

    request_id: str | None = None
    trace_id: str | None = None
    source: Mapping[str, str] | None = None  # {id, name, protocol}
    headers: Mapping[str, str] | None = None  # the inbound request's, summarised


_NO_SCOPE = IoScope()
_scope: contextvars.ContextVar[IoScope | None] = contextvars.ContextVar("bridge_io_scope", default=None)


def current_scope() -> IoScope:
    return _scope.get() or _NO_SCOPE


@contextmanager
def io_scope(**changes: Any) -> Iterator[None]:
    """Events inside (and in tasks started inside) carry these ids or this source."""
    token = _scope.set(dataclasses.replace(current_scope(), **changes))
    try:
        yield
    finally:
        _scope.reset(token)


def operation_label(text: str) -> str:
    return _OPERATION.sub("-", text)[:120]


def header_summary(headers: Mapping[str, str]) -> dict[str, str]:
    """`accept` and `content-type` as sent; every other header only as `[redacted]`."""
    return {name.lower(): (value if name.lower() in _KEPT_HEADERS else "[redacted]")
            for name, value in headers.items()}


def target(kind: str, operation: str, url: str | None = None) -> dict[str, Any]:
    """Where a call went: the URL's path only, never its host or query string."""
    parts = urlsplit(url or "")
    found: dict[str, Any] = {"kind": kind, "operation": operation_label(operation),
                             "route": redact_text(parts.path or "/"),
                             "queryStringRedacted": bool(parts.query), "urlRedacted": True}
    source = current_scope().source
    if kind == "source" and source is not None:
        found["source"] = dict(source)
    return found


def error_summary(exc: BaseException, *, timeout: bool = False) -> dict[str, Any]:
    summary: dict[str, Any] = {"name": type(exc).__name__,
                               "message": redact_text(str(getattr(exc, "message", "") or exc))[:240]}
    if timeout:
        summary["timeout"] = True
    return summary


class IoCall:
    """One outbound call's events: `<kind>.request` when made, then `<kind>.response` or
    `<kind>.error` with its duration."""

    def __init__(self, io: IoLog, kind: str, operation: str, url: str, request: Any) -> None:
        self.io, self.kind, self.operation = io, kind, operation_label(operation)
        self.target = target(kind, operation, url)
        self.started = time.perf_counter()
        io.emit(f"{kind}.request", "outbound", operation=self.operation, target=self.target, request=request)

    def _ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def answered(self, response: Any) -> None:
        self.io.emit(f"{self.kind}.response", "outbound", operation=self.operation, target=self.target,
                     response=response, duration_ms=self._ms())

    def failed(self, exc: BaseException, *, timeout: bool = False) -> None:
        self.io.emit(f"{self.kind}.error", "outbound", operation=self.operation, target=self.target,
                     error=error_summary(exc, timeout=timeout), duration_ms=self._ms())


class IoLog:
    """One sink: `file` (appended JSON lines, directories created), `logger` (stdout) or `off`.
    Writing never fails a request: a sink error is logged once and the event dropped."""

    def __init__(self, mode: str = "off", path: Path | None = None) -> None:
        self.mode = mode if mode in IO_LOG_MODES else "off"
        self.path = (path or DEFAULT_PATH) if self.mode == "file" else None
        self._lock = threading.Lock()
        self._warned = False

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def emit(self, phase: str, flow: str, **fields: Any) -> None:
        if self.mode == "off":
            return
        scope = current_scope()
        event: dict[str, Any] = {
            "schemaVersion": SCHEMA, "event": EVENT,
            "timestamp": now_iso(), "phase": phase, "flow": flow}
        if scope.request_id is not None:
            event["requestId"] = scope.request_id
        if scope.trace_id is not None:
            event["traceId"] = scope.trace_id
        for key in ("route", "operation", "target"):
            if fields.get(key) is not None:
                event[key] = fields[key]
        for key in ("request", "response"):
            if key in fields:
                event[key] = redact(fields[key])
        if fields.get("error") is not None:
            event["error"] = fields["error"]
        if fields.get("duration_ms") is not None:
            event["durationMs"] = round(fields["duration_ms"], 3)
        event["redacted"] = True
        try:
            line = json_bytes(event) + b"\n"
            with self._lock:
                if self.path is not None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    with self.path.open("ab") as handle:
                        handle.write(line)
                else:
                    sys.stdout.buffer.write(line)
                    sys.stdout.flush()
        except (OSError, ValueError, TypeError):
            if not self._warned:
                self._warned = True
                log.warning("io_log_write_failed", mode=self.mode)
