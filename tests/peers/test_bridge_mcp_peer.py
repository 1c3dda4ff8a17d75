"""The official MCP client (mcp 2.x) against the bridge's `POST /mcp`, backed by our serve: every
mode (auto, legacy, 2026-07-28) lists and calls every bridge tool over real loopback sockets."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # so `tests.support` imports however pytest is launched
    sys.path.insert(0, str(REPO))

from mcp.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from bridge.config.registry import normalize_registered  # noqa: E402
from bridge.config.settings import BridgeSettings  # noqa: E402
from bridge.web.app import create_app as create_bridge_app  # noqa: E402
from serve.protocols.http import create_app as create_serve_app  # noqa: E402
from serve.settings import ServeSettings  # noqa: E402
from tests.support.folders import copy_fixture  # noqa: E402

TOKEN = "peer-secret"
TOOLS = ["llmwiki_agent_run", "llmwiki_list_sources", "llmwiki_context", "llmwiki_search", "llmwiki_read",
         "llmwiki_graph", "llmwiki_graph_neighbors", "llmwiki_source_bundle"]
# tool, arguments, structured key, expected text start
CALLS: list[tuple[str, dict[str, Any], str, str]] = [
    ("llmwiki_list_sources", {}, "llmwiki_sources", "Registered Knowledge Sources: 2."),
    ("llmwiki_context", {"query": "release checklist", "sourceId": "ops"}, "llmwiki_context",
     "Context from Ops Wiki:"),
    ("llmwiki_search", {"query": "rollback", "sourceId": "ops", "limit": 3}, "llmwiki_search",
     'Search Ops Wiki: '),
    ("llmwiki_read", {"pageId": "ops:runbooks/rollback"}, "llmwiki_read",
     "Page read from Ops Wiki: Rollback."),
    ("llmwiki_graph", {"sourceId": "ops", "limit": 10}, "llmwiki_graph", "Graph from Ops Wiki: 10 node(s)"),
    ("llmwiki_graph_neighbors", {"nodeIds": ["ops:page:hot", "spare:page:index"], "limit": 5},
     "llmwiki_graph_neighbors", "Graph neighborhoods from 2 source(s):"),
    ("llmwiki_source_bundle", {"sourceId": "spare"}, "llmwiki_source_bundle",
     "Source bundle from Spare Wiki: Sample Operations Wiki."),
    ("llmwiki_agent_run", {"query": "How do we roll back a release?", "orchestrationMode": "evidence-only"},
     "llmwiki_agent_result", "Evidence-only result:"),
]


@dataclass
class Bridge:
    url: str
    exchanges: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
async def bridge(aiohttp_server: Any, tmp_path: Path) -> Any:
    """Our serve on the sample wiki, and the bridge (bearer token on) with two sources pointing at it."""
    root = copy_fixture("sample-wiki", tmp_path / "roots")
    serve = TestServer(create_serve_app(ServeSettings(root=root, cache_dir=tmp_path / "cache")),
                       host="127.0.0.1")
    await serve.start_server()
    serve_url = str(serve.make_url("")).rstrip("/")
    sources = normalize_registered([
        {"id": "ops", "name": "Ops Wiki", "protocol": "llmwiki-http", "url": serve_url},
        {"id": "spare", "name": "Spare Wiki", "protocol": "llmwiki-http", "url": serve_url}])
    app = create_bridge_app(BridgeSettings(bearer_token=TOKEN), sources)
    seen = Bridge("")

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        response = await handler(request)
        seen.exchanges.append({"method": request.method, "path": request.path,
                               "headers": {k.lower(): v for k, v in request.headers.items()},
                               "body": json.loads(raw) if raw else None, "status": response.status})
        return response

    app.middlewares.insert(0, record)
    server = await aiohttp_server(app, host="127.0.0.1")
    seen.url = f"http://127.0.0.1:{server.port}/mcp"
    yield seen
    await serve.close()


def connect(url: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy", "2026-07-28"])
async def test_official_client_lists_and_calls_every_tool(bridge: Bridge, mode: str) -> None:
    async with connect(bridge.url, mode) as client:
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == TOOLS
        for tool in tools.tools:
            assert tool.description and tool.input_schema["type"] == "object"
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
        for name, arguments, key, text in CALLS:
            result = await client.call_tool(name, arguments)
            assert result.is_error is False, (name, result)
            assert result.structured_content is not None and list(result.structured_content) == [key]
            assert result.content[0].text.startswith(text), (name, result.content)  # type: ignore[union-attr]
        assert not [t.name for t in tools.tools if t.name not in TOOLS]
        version = client.session.protocol_version
        # Bad arguments are a tool result with isError, in the tool's words (MCP's advice).
        bad = await client.call_tool("llmwiki_context", {"query": "x"})
        assert bad.is_error and "requires sourceId" in bad.content[0].text
        # An upstream failure is a tool result with isError, not an exception.
        dead = {"knowledgeSources": [{"id": "dead", "protocol": "llmwiki-http", "status": "ready",
                                      "url": "http://127.0.0.1:9"}], "query": "x"}
        failed = await client.call_tool("llmwiki_search", dead)
        assert failed.is_error is True
        assert failed.structured_content == {"llmwiki_source_error": {
            "tool": "llmwiki_search", "message": failed.content[0].text}}  # type: ignore[union-attr]
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    posts = [e for e in bridge.exchanges if e["path"] == "/mcp"]
    assert posts and all(e["method"] == "POST" for e in posts)  # sessionless: no GET stream, no DELETE
    assert all(e["headers"].get("authorization") == f"Bearer {TOKEN}" for e in posts)
    methods = [e["body"]["method"] for e in posts]
    if mode == "legacy":
        assert methods[:2] == ["initialize", "notifications/initialized"]
        assert all(e["headers"].get("mcp-protocol-version") == "2025-11-25" for e in posts[1:])
    else:
        assert "initialize" not in methods
        assert (methods[0] == "server/discover") == (mode == "auto")  # the explicit mode skips the probe
        assert all(e["headers"].get("mcp-protocol-version") == "2026-07-28" for e in posts)
    for exchange in posts:
        if exchange["body"].get("id") is None:
            assert exchange["status"] == 202
        elif (exchange["body"].get("params") or {}).get("arguments") != {"query": "x"}:  # not the -32602
            assert exchange["status"] == 200, exchange


async def test_official_client_is_refused_without_the_token(bridge: Bridge) -> None:
    http = httpx2.AsyncClient(timeout=30)
    with pytest.raises(Exception):  # noqa: B017 - the client surfaces a 401 as its own error type
        async with Client(streamable_http_client(bridge.url, http_client=http), mode="legacy") as client:
            await client.list_tools()
    assert {e["status"] for e in bridge.exchanges} == {401}
