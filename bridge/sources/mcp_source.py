"""The `mcp` source client: serve's `llmwiki_*` tools, one JSON-RPC `tools/call` per operation."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bridge.sources.client import SourceClient
from bridge.sources.http_source import BundleRead, has_bundle_metadata
from bridge.sources.transport import SourceCallError, SourceTransport, call_json

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


def mcp_url(base: str) -> str:
    """`<base>/mcp`, or the base itself when its path already ends with `/mcp`."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    if not path.endswith("/mcp"):
        path += "/mcp"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


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


async def call_tool(transport: SourceTransport, url: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One sessionless `tools/call` (serve's `/mcp` needs no `initialize` first)."""
    body = {"jsonrpc": "2.0", "id": next(_request_ids), "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}
    envelope = await call_json(transport, "POST", url, f"mcp {tool}", body)
    if not isinstance(envelope, dict):
        raise SourceCallError(f"mcp {tool} returned invalid JSON", invalid_json=True)
    if envelope.get("error") is not None:
        raise SourceCallError(JSON_RPC_ERROR, json_rpc_error=True)
    result = envelope.get("result")
    if not isinstance(result, dict):
        raise SourceCallError(NO_RESULT, upstream_error=True)
    if result.get("isError") is True:
        raise SourceCallError(TOOL_ERROR, upstream_error=True)
    return tool_value(result, tool)


class McpSourceClient(SourceClient):
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
