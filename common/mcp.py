"""MCP protocol plumbing shared by serve and bridge: JSON-RPC framing, eras, and pure request validation."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from common.json_read import JsonRejected, loads_bounded
from common.jsonrpc import INTERNAL_ERROR as INTERNAL_ERROR
from common.jsonrpc import INVALID_PARAMS as INVALID_PARAMS
from common.jsonrpc import INVALID_REQUEST as INVALID_REQUEST
from common.jsonrpc import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from common.jsonrpc import PARSE_ERROR as PARSE_ERROR
from common.jsonrpc import SERVER_ERROR

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSION = "2026-07-28"
LATEST_HANDSHAKE = "2025-11-25"
DEFAULT_HEADER_VERSION = "2025-03-26"  # handshake-era requests that carry no version header
# The one list of versions we speak: server/discover and the unsupported-version error name it alike.
SUPPORTED_VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ACCEPTED_HEADER_VERSIONS = SUPPORTED_VERSIONS
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
VERSION_HEADER = "MCP-Protocol-Version"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

# MCP's own error codes (the JSON-RPC ones live in common.jsonrpc).
INTERNAL = SERVER_ERROR
HEADER_ERROR = -32020
UNSUPPORTED_VERSION = -32022

Era = Literal["compat", "handshake", "modern"]


class McpError(Exception):
    """A JSON-RPC error: code, safe message, optional data. The only error type adapters see."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


# -- JSON-RPC framing ----------------------------------------------------------------------


def response(request_id: Any, result: Any = None, error: McpError | None = None, *,
             omit_null_id: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if not (omit_null_id and request_id is None):
        body["id"] = request_id
    if error is not None:
        body["error"] = error.body()
    else:
        body["result"] = result
    return body


@dataclass(frozen=True)
class Reply:
    """What a transport sends back: an HTTP-ish status and a JSON body (None = no body)."""

    status: int
    body: dict[str, Any] | None


@dataclass(frozen=True)
class Routed:
    """A validated request: the message (with synthesized _meta) and its era."""

    message: dict[str, Any]
    era: Era
    version: str


@dataclass(frozen=True)
class Rejection:
    status: int
    body: dict[str, Any]


def request_id_of(message: Mapping[str, Any]) -> Any:
    rid = message.get("id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _reject(status: int, message: Mapping[str, Any] | None, error: McpError) -> Rejection:
    return Rejection(status, response(request_id_of(message or {}), error=error))


def decode_header(value: str) -> str:
    """`=?base64?...?=` carries non-ASCII Mcp-Method / Mcp-Name values."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value


def _accepts_both(accept: str) -> bool:
    types = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    return "application/json" in types and "text/event-stream" in types


def parse_body(raw: bytes) -> Any:
    """Raises McpError(-32700) when the body is not JSON."""
    try:
        return loads_bounded(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, JsonRejected) as exc:
        reason = (exc.msg if isinstance(exc, json.JSONDecodeError)
                  else str(exc) if isinstance(exc, JsonRejected) else "body is not UTF-8")
        raise McpError(PARSE_ERROR, f"Parse error: {reason}") from None


def route_stream(headers: Mapping[str, str], raw: bytes) -> Routed | Rejection:
    """Validate one Streamable HTTP POST (contract 6.2.3) without I/O: the routed request or
    the rejection to send."""
    try:
        message = parse_body(raw)
    except McpError as exc:
        return _reject(400, None, exc)
    if isinstance(message, list):
        return _reject(400, None, McpError(INVALID_PARAMS,
                                           "Validation error: batch requests are not supported"))
    if not isinstance(message, dict):
        return _reject(400, None, McpError(INVALID_REQUEST,
                                           "Invalid Request: expected a JSON-RPC object"))
    if not _accepts_both(headers.get("Accept", "")):
        return _reject(400, message, McpError(
            HEADER_ERROR, "Accept header must include application/json and text/event-stream"))
    method = message.get("method")
    if not isinstance(method, str) or not method:
        return _reject(400, message, McpError(INVALID_REQUEST,
                                              "Invalid Request: method must be a non-empty string"))
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return _reject(400, message, McpError(INVALID_REQUEST,
                                              "Invalid Request: params must be an object"))
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(params, dict) and "_meta" in params and not isinstance(meta, dict):
        return _reject(400, message, McpError(HEADER_ERROR, "request params._meta must be an object"))
    version = headers.get("MCP-Protocol-Version")
    mcp_method = headers.get("Mcp-Method")
    if version is None:
        modern_signs = mcp_method is not None and decode_header(mcp_method) != method
        modern_signs = modern_signs or (isinstance(meta, dict) and META_VERSION in meta)
        if method == "initialize" and not modern_signs:
            return Routed(message, "handshake", DEFAULT_HEADER_VERSION)
        if modern_signs or mcp_method is not None or method == "server/discover":
            return _reject(400, message, McpError(HEADER_ERROR,
                                                  "MCP-Protocol-Version header is required"))
        # A handshake-era client that omits the header after initialize (protocols.md).
        return Routed(message, "handshake", DEFAULT_HEADER_VERSION)
    if not version or any(ord(c) < 0x20 or ord(c) > 0x7E for c in version):
        return _reject(400, message, McpError(HEADER_ERROR, "MCP-Protocol-Version header is malformed"))
    if version not in ACCEPTED_HEADER_VERSIONS:
        return _reject(400, message, McpError(
            UNSUPPORTED_VERSION, "Unsupported protocol version",
            {"supported": list(ACCEPTED_HEADER_VERSIONS), "requested": version}))
    if mcp_method is not None and decode_header(mcp_method) != method:
        return _reject(400, message, McpError(
            HEADER_ERROR, "Mcp-Method header does not match the request body method"))
    if isinstance(meta, dict):
        if META_VERSION in meta:
            claimed = meta[META_VERSION]
            if not isinstance(claimed, str) or not claimed:
                return _reject(400, message, McpError(
                    HEADER_ERROR, f"request params._meta.{META_VERSION} is malformed"))
            if claimed != version:
                return _reject(400, message, McpError(
                    HEADER_ERROR,
                    "MCP-Protocol-Version header does not match request params._meta protocolVersion"))
        for key in (META_CLIENT_INFO, META_CLIENT_CAPS):
            if key in meta and not isinstance(meta[key], dict):
                return _reject(400, message, McpError(HEADER_ERROR,
                                                      f"request params._meta.{key} is malformed"))
    name_header = headers.get("Mcp-Name")
    if name_header is not None and isinstance(params, dict):
        target_key = NAME_BEARING.get(method)
        if target_key is not None and decode_header(name_header) != params.get(target_key):
            return _reject(400, message, McpError(
                HEADER_ERROR, "Mcp-Name header does not match the request body name"))
    if version == MODERN_VERSION:
        missing = _modern_missing(message, method, params, meta, headers)
        if missing is not None:
            return _reject(400, message, missing)
        params = dict(params or {})
        # clientInfo is a SHOULD: a request without it reads as an unnamed client.
        synthesized = {META_CLIENT_INFO: {"name": "current-mcp-client", "version": "unknown"}}
        params["_meta"] = {**synthesized, **(meta or {})}
        message = {**message, "params": params}
        return Routed(message, "modern", version)
    return Routed(message, "handshake", version)


def _modern_missing(message: Mapping[str, Any], method: str, params: Any, meta: Any,
                    headers: Mapping[str, str]) -> McpError | None:
    """What a 2026-07-28 request lacks: a request's `_meta` must carry the protocol version and
    the client's capabilities (-32602); every message names its method in `Mcp-Method`, and a
    call naming a tool, prompt or resource names it in `Mcp-Name` too (-32020)."""
    if "id" in message:
        keys = meta if isinstance(meta, dict) else {}
        absent = [key for key in (META_VERSION, META_CLIENT_CAPS) if key not in keys]
        if absent:
            return McpError(INVALID_PARAMS, "params._meta is missing the required key(s): "
                            + ", ".join(absent))
    if headers.get("Mcp-Method") is None:
        return McpError(HEADER_ERROR, "Mcp-Method header is required")
    target_key = NAME_BEARING.get(method)
    if target_key is not None and isinstance(params, dict) and params.get(target_key) is not None \
            and headers.get("Mcp-Name") is None:
        return McpError(HEADER_ERROR, "Mcp-Name header is required")
    return None


def stdio_era(message: Mapping[str, Any]) -> Era:
    """Over stdio the era is carried by the message itself."""
    if message.get("method") == "server/discover":
        return "modern"
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and meta.get(META_VERSION) == MODERN_VERSION:
        return "modern"
    return "handshake"


def error_status(code: int, era: Era) -> int:
    """The HTTP status of a JSON-RPC error reply: modern-era clients read 404/400, older ones 200."""
    if era == "modern":
        return {METHOD_NOT_FOUND: 404, INVALID_PARAMS: 400}.get(code, 200)
    return 200


def complete_result(result: Mapping[str, Any], cacheable: bool,
                    server_info: Mapping[str, str]) -> dict[str, Any]:
    """A modern-era result: `resultType`, cache hints on list/read results, and the server's identity
    under `_meta`."""
    out = {**result, "resultType": "complete"}
    if cacheable:
        out.update(ttlMs=0, cacheScope="private")
    meta = dict(out.get("_meta") or {})
    meta[META_SERVER_INFO] = dict(server_info)
    out["_meta"] = meta
    return out
