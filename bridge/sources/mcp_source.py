"""The `mcp` source client: serve's `llmwiki_*` tools, one JSON-RPC `tools/call` per operation."""

from __future__ import annotations

import itertools
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bridge.sources.base import BundleRead, SourceCallError
from bridge.sources.client import TransportClient
from bridge.sources.http_source import has_bundle_metadata
from bridge.sources.transport import SourceAnswer, SourceTransport, call_source, decode_json
from common.jsonrpc import INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, SERVER_ERROR
from common.mcp import HEADER_ERROR, UNSUPPORTED_VERSION
from common.version import __version__

BUNDLE_TOOL = "llmwiki_source_bundle"
CONTEXT_TOOL = "llmwiki_context"
SEARCH_TOOL = "llmwiki_search"
READ_TOOL = "llmwiki_read"
GRAPH_TOOL = "llmwiki_graph"
NEIGHBORS_TOOL = "llmwiki_graph_neighbors"
JSON_RPC_ERROR = "MCP tool returned a JSON-RPC error."
NO_RESULT = "MCP tool returned no result object."
TOOL_ERROR = "MCP tool reported an error result."

# One counter for the whole process: ids never repeat across sources or runs (contract 3.8).
_request_ids = itertools.count(1)

LEGACY, MODERN, HANDSHAKE = "legacy", "2026-07-28", "handshake"
MODERN_VERSION = "2026-07-28"
HANDSHAKE_VERSION = "2025-11-25"  # what we offer in `initialize`; the server may answer an older one
STREAM_ACCEPT = "application/json, text/event-stream"
META = "io.modelcontextprotocol/"
# JSON-RPC errors that say "not in this form" rather than "this call failed": parse error, invalid
# request, unknown method, header mismatch (-32020), unsupported version (-32022), and the SDKs'
# "bad request" (-32000, e.g. a missing session).
_FORM_ERRORS = frozenset({PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, HEADER_ERROR, UNSUPPORTED_VERSION,
                          SERVER_ERROR})
_CLIENT_INFO = {"name": "llmwiki-agent-bridge", "version": __version__}


@dataclass(frozen=True)
class Form:
    """How one endpoint is spoken to: legacy bare JSON-RPC (serve's raw-payload `/mcp`), the
    sessionless 2026-07-28 form, or a handshake-era session (`version`, maybe a session id)."""

    kind: str
    version: str = ""
    session: str = ""


class _Forms:
    """What worked last for each endpoint URL, so a run does not negotiate again (bounded)."""

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._known: OrderedDict[str, Form] = OrderedDict()

    def get(self, url: str) -> Form | None:
        form = self._known.get(url)
        if form is not None:
            self._known.move_to_end(url)
        return form

    def put(self, url: str, form: Form) -> None:
        self._known[url] = form
        self._known.move_to_end(url)
        while len(self._known) > self.limit:
            self._known.popitem(last=False)

    def forget(self, url: str) -> None:
        self._known.pop(url, None)


_forms = _Forms()


def mcp_url(base: str) -> str:
    """The endpoint for a source URL: as given when its path ends with `/mcp` or `/mcp/stream`
    (trailing slashes trimmed), else `<base>/mcp`."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    if not (path.endswith("/mcp") or path.endswith("/mcp/stream")):
        path += "/mcp"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def first_forms(url: str) -> tuple[str, ...]:
    """The forms to try, in order: `/mcp` is serve's legacy raw-payload endpoint first; any other
    endpoint is Streamable HTTP, sessionless first (one request), then the handshake."""
    if urlsplit(url).path.endswith("/mcp"):
        return (LEGACY, MODERN, HANDSHAKE)
    return (MODERN, HANDSHAKE)


def tool_value(result: dict[str, Any], tool: str) -> Any:
    """The tool's payload, in the order of contract 3.8: structured content (keyed by the tool name
    first), `data`, the first content part carrying an object, else the result itself. Serve's
    bare `/mcp` answers with the raw payload as the result, which the last rule covers."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and structured.get(tool) is not None:
        return structured[tool]
    for key in ("structuredContent", "structured_content", "data"):
        if result.get(key) is not None:
            return result[key]
    content = result.get("content")
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("data"), dict):
            return part["data"]
        if isinstance(part.get("text"), str):
            try:
                parsed = json.loads(part["text"])
            except ValueError:
                continue
            if isinstance(parsed, dict):
                return parsed
    return result


class _WrongForm(Exception):
    """The endpoint did not take the request in this form; another form may work."""

    def __init__(self, error: SourceCallError) -> None:
        super().__init__(error.message)
        self.error = error


def _message(answer: SourceAnswer, request_id: int | None, label: str) -> dict[str, Any]:
    """The JSON-RPC message of an answer: the body itself, or the event-stream event that answers
    `request_id` (servers may send notifications first)."""
    if answer.content_type == "text/event-stream":
        for data in _event_data(answer.body):
            message = decode_json(data, label)
            if isinstance(message, dict) and message.get("id") == request_id and request_id is not None:
                return message
        raise SourceCallError(f"{label} returned no answer in its event stream", invalid_json=True)
    message = decode_json(answer.body, label)
    if not isinstance(message, dict):
        raise SourceCallError(f"{label} returned invalid JSON", invalid_json=True)
    return message


def _event_data(body: bytes) -> list[bytes]:
    """The `data` of each server-sent event (multi-line data joined with newlines)."""
    events: list[bytes] = []
    lines: list[bytes] = []
    for raw in body.replace(b"\r\n", b"\n").split(b"\n") + [b""]:
        if not raw:
            if lines:
                events.append(b"\n".join(lines))
                lines = []
        elif raw.startswith(b"data:"):
            lines.append(raw[5:].removeprefix(b" "))
    return events


async def _rpc(transport: SourceTransport, url: str, form: Form, method: str, params: dict[str, Any],
               label: str, *, notification: bool = False) -> tuple[dict[str, Any], SourceAnswer]:
    """One JSON-RPC request in `form`; a rejection of the form raises `_WrongForm`."""
    request_id = None if notification else next(_request_ids)
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        body["id"] = request_id
    headers: dict[str, str] = {}
    if form.kind != LEGACY:
        headers["Accept"] = STREAM_ACCEPT
        headers["MCP-Protocol-Version"] = form.version or HANDSHAKE_VERSION
    if form.kind == MODERN:
        headers["Mcp-Method"] = method
        if isinstance(params.get("name"), str):
            headers["Mcp-Name"] = params["name"]
    if form.session:
        headers["Mcp-Session-Id"] = form.session
    answer = await call_source(transport, "POST", url, label, body, headers)
    if notification:
        if not answer.ok:
            raise _WrongForm(SourceCallError(f"{label} returned HTTP {answer.status}",
                                             http_status=answer.status))
        return {}, answer
    try:
        message = _message(answer, request_id, label)
    except SourceCallError as exc:
        unreadable = exc if answer.ok else SourceCallError(f"{label} returned HTTP {answer.status}",
                                                           http_status=answer.status)
        raise (_WrongForm(unreadable) if 400 <= answer.status < 500 else unreadable) from None
    error = message.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        failure = SourceCallError(JSON_RPC_ERROR, json_rpc_error=True,
                                  http_status=None if answer.ok else answer.status)
        raise _WrongForm(failure) if code in _FORM_ERRORS or not answer.ok else failure
    if not answer.ok:
        raise _WrongForm(SourceCallError(f"{label} returned HTTP {answer.status}", http_status=answer.status))
    return message, answer


def _meta() -> dict[str, Any]:
    return {f"{META}protocolVersion": MODERN_VERSION, f"{META}clientCapabilities": {},
            f"{META}clientInfo": _CLIENT_INFO}


async def _handshake(transport: SourceTransport, url: str, label: str) -> Form:
    """`initialize`, then `notifications/initialized`, in the version the server chose."""
    offer = Form(HANDSHAKE, HANDSHAKE_VERSION)
    message, answer = await _rpc(transport, url, offer, "initialize",
                                 {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {},
                                  "clientInfo": _CLIENT_INFO}, label)
    result = message.get("result")
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    form = Form(HANDSHAKE, version if isinstance(version, str) and version else HANDSHAKE_VERSION,
                answer.headers.get("mcp-session-id", ""))
    await _rpc(transport, url, form, "notifications/initialized", {}, label, notification=True)
    return form


async def _call_in(transport: SourceTransport, url: str, form: Form, tool: str,
                   arguments: dict[str, Any], label: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if form.kind == MODERN:
        params["_meta"] = _meta()
    message, _ = await _rpc(transport, url, form, "tools/call", params, label)
    return message


async def call_tool(transport: SourceTransport, url: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One `tools/call` in the form this endpoint takes: the one that worked last, else each form
    of `first_forms` in turn until one is accepted. The first form's failure is the one reported."""
    label = f"mcp {tool}"
    known = _forms.get(url)
    kinds = ((known.kind,) if known is not None else ()) + tuple(
        k for k in first_forms(url) if known is None or k != known.kind)
    first: SourceCallError | None = None
    for kind in kinds:
        try:
            if known is not None and kind == known.kind:
                form = known
            else:
                form = await _handshake(transport, url, label) if kind == HANDSHAKE else Form(
                    kind, MODERN_VERSION if kind == MODERN else "")
            envelope = await _call_in(transport, url, form, tool, arguments, label)
        except _WrongForm as wrong:
            first = first or wrong.error
            if known is not None and kind == known.kind:
                _forms.forget(url)
            continue
        _forms.put(url, form)
        break
    else:
        raise first or SourceCallError(NO_RESULT, upstream_error=True)
    result = envelope.get("result")
    if not isinstance(result, dict):
        raise SourceCallError(NO_RESULT, upstream_error=True)
    if result.get("isError") is True:
        raise SourceCallError(TOOL_ERROR, upstream_error=True)
    return tool_value(result, tool)


class McpSourceClient(TransportClient):
    """`mcp`: a Knowledge Source reached through its MCP tools."""

    protocol = "mcp"
    bundle_kind = " MCP"

    @property
    def url(self) -> str:
        return mcp_url(self.source.url)

    def reads_bundle(self) -> bool:
        """Skipped when the descriptor lists capabilities without the bundle tool (contract 3.8)."""
        return not self.source.capabilities or BUNDLE_TOOL in self.source.capabilities

    async def discover(self) -> BundleRead | None:
        return await self.bundle()  # read even when not advertised: discovery needs fresh facts

    async def _object(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        value = await call_tool(self.transport, self.url, tool, arguments)
        if not isinstance(value, dict):
            raise SourceCallError(f"mcp {tool} returned invalid JSON", invalid_json=True)
        return value

    async def bundle(self) -> BundleRead:
        # Mirrors the HTTP client: a URL the policy refuses means no bundle step at all.
        if not self.transport.policy.allows(self.url):
            return BundleRead(attempted=False)
        try:
            value = await call_tool(self.transport, self.url, BUNDLE_TOOL, {})
        except SourceCallError as exc:
            return BundleRead(attempted=True, error=exc)
        if not has_bundle_metadata(value):
            return BundleRead(attempted=True, error=SourceCallError(
                f"{self.label} MCP source bundle has no source bundle metadata"))
        return BundleRead(attempted=True, raw=value, endpoint=BUNDLE_TOOL)

    async def probe(self) -> BundleRead:
        """Any successful `llmwiki_source_bundle` call counts; metadata from its bundle object."""
        try:
            value = await call_tool(self.transport, self.url, BUNDLE_TOOL, {})
        except SourceCallError as exc:
            return BundleRead(attempted=True, error=exc)
        raw = value if isinstance(value, dict) else {}
        nested = raw.get("sourceBundle", raw.get("source_bundle"))
        return BundleRead(attempted=True, raw=nested if isinstance(nested, dict) else raw,
                          endpoint=BUNDLE_TOOL)

    async def context(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._object(CONTEXT_TOOL, body)

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._object(SEARCH_TOOL, body)

    async def read(self, page_id: str, include_drafts: bool = False) -> dict[str, Any]:
        return await self._object(READ_TOOL, {"page_id": page_id, "include_drafts": include_drafts})

    async def graph(self, limit: int, include_drafts: bool = False) -> dict[str, Any]:
        return await self._object(GRAPH_TOOL, {"limit": limit, "include_drafts": include_drafts})

    async def neighbors(self, seeds: Sequence[str], depth: int, direction: str,
                        relations: Sequence[str], limit: int,
                        include_drafts: bool = False) -> dict[str, Any]:
        arguments: dict[str, Any] = {}
        if len(seeds) == 1:  # older servers read only `seed`
            arguments["seed"] = seeds[0]
        arguments.update(seeds=list(seeds), depth=depth, direction=direction, relations=list(relations),
                         limit=limit, include_drafts=include_drafts)
        return await self._object(NEIGHBORS_TOOL, arguments)
