"""The official MCP client (mcp 2.x) against the running app and the stdio server: every
mode on /mcp/stream, versioned calls on /mcp, and payload parity with the HTTP routes."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # so `tests.support` imports however pytest is launched
    sys.path.insert(0, str(REPO))

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from serve.protocols.http import create_app  # noqa: E402
from serve.settings import ServeSettings  # noqa: E402
from tests.support.folders import copy_fixture  # noqa: E402

TOOLS = ["llmwiki_context", "llmwiki_search", "llmwiki_read", "llmwiki_graph",
         "llmwiki_graph_neighbors", "llmwiki_source_refs", "llmwiki_source_bundle"]
SOURCE_ID = "sample-operations-wiki"
TITLE = "Sample Operations Wiki"

# tool, arguments, HTTP method, HTTP path, HTTP JSON body
PARITY: list[tuple[str, dict[str, Any], str, str, dict[str, Any] | None]] = [
    ("llmwiki_context", {"query": "how do I roll back a release", "limit": 4}, "POST", "/query",
     {"query": "how do I roll back a release", "limit": 4}),
    ("llmwiki_search", {"query": "signing", "mode": "literal", "fields": "page_id,route"}, "POST",
     "/search", {"query": "signing", "mode": "literal", "fields": "page_id,route"}),
    ("llmwiki_search", {"query": "token rotation", "snippet_chars": 0}, "POST", "/search",
     {"query": "token rotation", "snippet_chars": 0}),
    ("llmwiki_read", {"page_id": "runbooks/rollback"}, "GET", "/read/runbooks/rollback", None),
    ("llmwiki_read", {"page_id": "hot", "fields": "id,title"}, "GET", "/read/hot?fields=id,title",
     None),
    ("llmwiki_graph", {"limit": 7}, "GET", "/graph?limit=7", None),
    ("llmwiki_graph_neighbors", {"seed": "release-checklist", "depth": 2, "limit": 10}, "GET",
     "/graph/neighborhood?seed=release-checklist&depth=2&limit=10", None),
    ("llmwiki_source_refs", {}, "GET", "/source-refs", None),
    ("llmwiki_source_bundle", {}, "GET", "/source-bundle", None),
]


@dataclass
class Wire:
    """Every exchange the client made: request method, path, headers, body and response."""

    exchanges: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Server:
    url: str
    root: Path
    wire: Wire
    cache: Path


@pytest.fixture
async def mcp_server(aiohttp_server: Callable[..., Awaitable[Any]], tmp_path: Path) -> Server:
    root = copy_fixture("sample-wiki", tmp_path / "roots")
    cache = tmp_path / "cache"
    app = create_app(ServeSettings(root=root, cache_dir=cache))
    wire = Wire()

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        response = await handler(request)
        wire.exchanges.append({
            "method": request.method, "path": request.path,
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body": json.loads(raw) if raw else None, "status": response.status,
            "response_headers": {k.lower(): v for k, v in response.headers.items()}})
        return response

    app.middlewares.insert(0, record)
    server = await aiohttp_server(app, host="127.0.0.1")
    return Server(f"http://127.0.0.1:{server.port}", root, wire, cache)


async def http_payloads(base: str) -> list[Any]:
    import httpx2

    out = []
    async with httpx2.AsyncClient(base_url=base) as http:
        for _, _, method, path, body in PARITY:
            resp = await (http.post(path, json=body) if method == "POST" else http.get(path))
            assert resp.status_code == 200
            out.append(resp.json())
    return out


async def exercise(client: Client) -> list[Any]:
    """List tools, call every tool, read a resource, get the prompt; return the payloads."""
    tools = await client.list_tools()
    assert [t.name for t in tools.tools] == TOOLS
    for tool in tools.tools:
        assert tool.description and tool.description.startswith(f"[{TITLE} | source_id: ")
        assert tool.input_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
    payloads = []
    for name, arguments, *_ in PARITY:
        result = await client.call_tool(name, arguments)
        assert result.is_error is False, result
        assert result.structured_content is not None
        assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
        payloads.append(result.structured_content)
    resources = await client.list_resources()
    by_name = {r.name: r for r in resources.resources}
    assert {"hot", "index", "runbooks/rollback"} <= set(by_name)
    read = await client.read_resource(by_name["runbooks/rollback"].uri)
    assert read.contents[0].text  # type: ignore[union-attr]
    templates = await client.list_resource_templates()
    assert templates.resource_templates[0].uri_template == "llmwiki://{source_id}/pages/{page_id}"
    prompt = await client.get_prompt("llmwiki_source_grounded_query", {"query": "Rollback?"})
    assert prompt.messages[0].content.text.endswith("Question: Rollback?")  # type: ignore[union-attr]
    failed = await client.call_tool("llmwiki_search", {"query": "x", "mode": "vector"})
    assert failed.is_error is True
    return payloads


@pytest.mark.parametrize("mode", ["auto", "legacy", "2026-07-28"])
async def test_official_client_on_stream(mcp_server: Server, mode: str) -> None:
    expected = await http_payloads(mcp_server.url)
    async with Client(f"{mcp_server.url}/mcp/stream", mode=mode) as client:
        payloads = await exercise(client)
        version = client.session.protocol_version
    assert payloads == expected
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    stream = [e for e in mcp_server.wire.exchanges if e["path"] == "/mcp/stream"]
    assert stream and all(e["method"] == "POST" for e in stream)  # no GET stream, no DELETE
    for exchange in stream:
        assert "mcp-session-id" not in exchange["response_headers"]
        if exchange["body"].get("id") is None:
            assert exchange["status"] == 202
        else:
            assert exchange["response_headers"]["content-type"].startswith("application/json")
            assert exchange["status"] == 200 or exchange["body"]["method"] == "server/discover"
    if mode == "legacy":
        assert stream[0]["body"]["method"] == "initialize"
        assert all(e["headers"].get("mcp-protocol-version") == "2025-11-25" for e in stream[1:])
    else:
        assert all(e["headers"].get("mcp-protocol-version") == "2026-07-28" for e in stream)
        assert "initialize" not in [e["body"]["method"] for e in stream]
    for exchange in stream:
        assert str(mcp_server.root) not in json.dumps(exchange["body"])


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_official_client_on_versioned_mcp(mcp_server: Server, mode: str) -> None:
    expected = await http_payloads(mcp_server.url)
    async with Client(f"{mcp_server.url}/mcp", mode=mode) as client:
        assert await exercise(client) == expected
    posts = [e for e in mcp_server.wire.exchanges if e["path"] == "/mcp"]
    assert all(e["status"] in (200, 202) for e in posts)


@pytest.fixture
async def stdio_params(tmp_path: Path) -> AsyncIterator[tuple[StdioServerParameters, Path]]:
    root = copy_fixture("sample-wiki", tmp_path / "stdio-roots")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "serve.cli", "mcp", str(root), "--cache-dir", str(tmp_path / "stdio-cache"),
              "--log-format", "json"],
        cwd=str(REPO))
    yield params, root


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_official_client_over_stdio(mcp_server: Server, stdio_params: Any,
                                          mode: str) -> None:
    params, _root = stdio_params
    expected = await http_payloads(mcp_server.url)
    async with Client(params, mode=mode) as client:
        payloads = await exercise(client)
    # Same folder content, different copies: the payloads match except nothing (paths are
    # relative, ids derive from content).
    assert payloads == expected


async def test_stdio_framing_and_errors(tmp_path: Path) -> None:
    import asyncio

    root = copy_fixture("sample-wiki", tmp_path / "roots")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "serve.cli", "mcp", str(root), "--cache-dir", str(tmp_path / "c"),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=str(REPO))
    lines = [b"{not json\n", b"\n", b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
             b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
             b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"llmwiki_read",'
             b'"arguments":{"page_id":"hot","fields":["id"]}}}\n',
             b'{"jsonrpc":"2.0","id":3,"method":"no/such"}\n']
    stdout, stderr = await asyncio.wait_for(proc.communicate(b"".join(lines)), 30)
    replies = [json.loads(line) for line in stdout.decode().splitlines()]
    assert [r.get("id") for r in replies] == [None, 1, 2, 3]
    assert replies[0]["error"]["code"] == -32700
    assert replies[1]["result"] == {}
    assert replies[2]["result"]["structuredContent"] == {"id": "hot"}
    assert replies[3]["error"]["code"] == -32601
    assert proc.returncode == 0
    assert str(root) not in stdout.decode()
