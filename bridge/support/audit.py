"""The opt-in safe request audit log: one JSON line per request on an audited route, counts and
flags only, never a body, query, URL, id of a source or citation, or credential (contract 9.1)."""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Collection, Mapping
from typing import Any

import structlog

from bridge.support.clock import now_iso
from bridge.support.routes import AUDITED_ROUTES as AUDITED_ROUTES
from common.json_wire import json_bytes

SCHEMA = "llmwiki.agent-bridge.support.audit.v1"
EVENT = "llmwiki.agent_bridge.request"
KNOWN_MCP_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "server/discover",
                               "notifications/initialized"})
# What handlers may add to the line; anything else they note is ignored.
NOTED_FIELDS = (
    "traceId", "orchestrationMode", "runtimeCalled", "selectedSourceCount", "selectedReadySourceCount",
    "citationCount", "sourceBundleCount", "graphNodeCount", "artifactCount", "diagnosticCount",
    "conversationMessageCount", "conversationHistoryLength", "conversationContextProvided", "mcpMethod",
    "mcpToolName", "mcpError", "mcpErrorCode")
_FLAGS = {"redacted": True, "routePatternOnly": True, "queryStringLogged": False, "requestBodyLogged": False,
          "responseBodyLogged": False, "credentialsLogged": False, "sourceUrlsLogged": False}

_facts: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("bridge_audit_facts",
                                                                             default=None)
log = structlog.get_logger("llmwiki.bridge.support.audit")


def begin() -> tuple[dict[str, Any], contextvars.Token[dict[str, Any] | None]]:
    """Start collecting facts for the current request (the handler runs in this context)."""
    facts: dict[str, Any] = {}
    return facts, _facts.set(facts)


def end(token: contextvars.Token[dict[str, Any] | None]) -> None:
    _facts.reset(token)


def note(**fields: Any) -> None:
    """Record facts about the request being handled; a no-op outside one."""
    facts = _facts.get()
    if facts is not None:
        facts.update(fields)


def mcp_names(method: Any, tool: Any, tools: Collection[str]) -> dict[str, str]:
    """Method and tool names only when they are ones the bridge knows; never the caller's text."""
    names = {"mcpMethod": method if method in KNOWN_MCP_METHODS else "[unknown]"}
    if method == "tools/call":
        names["mcpToolName"] = tool if tool in tools else "[unknown]"
    return names


def audit_line(*, request_id: str, method: str, route: str, status: int, duration_ms: float,
               source_policy: str, facts: Mapping[str, Any], error_code: str | None,
               authorized: bool | None, origin_allowed: bool | None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "schemaVersion": SCHEMA, "event": EVENT, "timestamp": now_iso(),
        "requestId": request_id, "method": method, "route": route, "statusCode": status,
        "durationMs": round(duration_ms, 3), "sourcePolicy": source_policy}
    line.update({key: facts[key] for key in NOTED_FIELDS if facts.get(key) is not None})
    if error_code is not None:
        line["errorCode"] = error_code
    if authorized is not None:
        line["authorized"] = authorized
    if origin_allowed is not None:
        line["originAllowed"] = origin_allowed
    line.update(_FLAGS)
    return line


def write(line: Mapping[str, Any]) -> None:
    """To stdout, one line; a failure to write never fails the request."""
    try:
        sys.stdout.buffer.write(json_bytes(line) + b"\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        log.warning("audit_log_write_failed")
