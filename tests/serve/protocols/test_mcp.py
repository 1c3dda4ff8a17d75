"""MCP on the wire: POST /mcp (MCP-style JSON-RPC and versioned standard MCP) and the
sessionless Streamable HTTP endpoint /mcp/stream in both eras (contract section 6)."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from common.serve_tools import TOOL_NAMES
from serve.protocols import http
from serve.protocols.mcp import ACCEPTED_HEADER_VERSIONS, Dispatcher
from serve.service import KnowledgeSource
from serve.settings import ServeSettings, SettingsError

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]

SOURCE_ID = "sample-operations-wiki"
TITLE = "Sample Operations Wiki"
PREFIX = f"[{TITLE} | source_id: {SOURCE_ID}] "
ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
MODERN_HEADERS = {"Accept": ACCEPT, "MCP-Protocol-Version": MODERN}

# (tool, arguments, HTTP method, path, JSON body): the same request on every surface.
PARITY: list[tuple[str, dict[str, Any], str, str, dict[str, Any] | None]] = [
    ("llmwiki_context", {"query": "release checklist", "limit": 3}, "POST", "/query",
     {"query": "release checklist", "limit": 3}),
    ("llmwiki_context", {"query": "rollback", "query_variants": ["revert deploy"]}, "POST",
     "/query", {"query": "rollback", "query_variants": ["revert deploy"]}),
    ("llmwiki_search", {"query": "rollback", "mode": "literal", "fields": "page_id,route"},
     "POST", "/search", {"query": "rollback", "mode": "literal", "fields": "page_id,route"}),
    ("llmwiki_search", {"query": "artifact signing", "exclude_page_ids": ["hot"],
                        "snippet_chars": 40}, "POST", "/search",
     {"query": "artifact signing", "exclude_page_ids": ["hot"], "snippet_chars": 40}),
    ("llmwiki_read", {"page_id": "runbooks/rollback"}, "GET", "/read/runbooks/rollback", None),
    ("llmwiki_read", {"page_id": "hot", "fields": "id,title"}, "GET", "/read/hot?fields=id,title",
     None),
    ("llmwiki_graph", {"limit": 5}, "GET", "/graph?limit=5", None),
    ("llmwiki_graph", {}, "GET", "/graph", None),
    ("llmwiki_graph_neighbors", {"seed": "hot", "depth": 1}, "GET",
     "/graph/neighborhood?seed=hot&depth=1", None),
    ("llmwiki_source_refs", {}, "GET", "/source-refs", None),
    ("llmwiki_source_bundle", {}, "GET", "/source-bundle", None),
]


async def rpc(client: Client, method: str, params: Any = None, *, rid: Any = 1,
              path: str = "/mcp", headers: dict[str, str] | None = None) -> tuple[int, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        body["id"] = rid
    if params is not None:
        body["params"] = params
    resp = await client.post(path, json=body, headers=headers or {})
    text = await resp.text()
    return resp.status, json.loads(text) if text else None


async def call(client: Client, name: str, arguments: Any = None) -> tuple[int, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return await rpc(client, "tools/call", params)


async def stream(client: Client, method: str, params: dict[str, Any] | None = None, *,
                 version: str | None = "2025-11-25", rid: Any = 1,
                 extra: dict[str, str] | None = None, bare: bool = False) -> tuple[int, Any, Any]:
    """One POST to the stream. A 2026-07-28 request carries what that era requires (Mcp-Method,
    Mcp-Name, `_meta`) as a current client sends it, unless `bare` (or the test's own values)."""
    headers = {"Accept": ACCEPT}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    if version == MODERN and not bare:
        headers["Mcp-Method"] = method
        name = (params or {}).get("uri" if method == "resources/read" else "name")
        if isinstance(name, str) and method in ("tools/call", "prompts/get", "resources/read"):
            headers["Mcp-Name"] = name
        if rid is not None and isinstance((params or {}).get("_meta", {}), dict):
            params = dict(params or {})
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                               "io.modelcontextprotocol/clientCapabilities": {},
                               **(params.get("_meta") if isinstance(params.get("_meta"), dict) else {})}
    headers.update(extra or {})
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        body["id"] = rid
    if params is not None:
        body["params"] = params
    resp = await client.post("/mcp/stream", data=json.dumps(body), headers=headers)
    text = await resp.text()
    return resp.status, json.loads(text) if text else None, resp.headers


@pytest.fixture
async def client(serve_client: ClientFactory, sample_root: Path) -> Client:
    return await serve_client(sample_root)


async def http_payload(client: Client, method: str, path: str, body: Any) -> Any:
    resp = await (client.post(path, json=body) if method == "POST" else client.get(path))
    assert resp.status == 200, await resp.text()
    return await resp.json()


# -- /mcp: MCP-style JSON-RPC -----------------------------------------------------------


async def test_jsonrpc_tools_list_names_descriptions_and_schemas(client: Client) -> None:
    status, body = await rpc(client, "tools/list")
    assert status == 200 and body["id"] == 1
    tools = body["result"]["tools"]
    assert [t["name"] for t in tools] == list(TOOL_NAMES)
    for tool in tools:
        assert tool["description"].startswith(PREFIX)
        assert tool["inputSchema"]["type"] == "object"
        assert "outputSchema" not in tool
    context = tools[0]["description"]
    for text in ("retrieval_guidance", "untrusted source evidence",
                 "query-ranked citation evidence", "Default limit: 8 evidence item(s)"):
        assert text in context
    assert "call llmwiki_context first" in tools[1]["description"]
    assert "Default limit: 100 node(s)" in tools[3]["description"]
    assert tools[0]["inputSchema"]["properties"]["query_variants"]["maxItems"] == 2
    assert tools[2]["inputSchema"]["required"] == ["page_id"]


@pytest.mark.parametrize("tool,arguments,method,path,body", PARITY,
                         ids=[f"{p[0]}-{i}" for i, p in enumerate(PARITY)])
async def test_jsonrpc_and_stream_payloads_equal_http(client: Client, tool: str,
                                                     arguments: dict[str, Any], method: str,
                                                     path: str, body: Any) -> None:
    expected = await http_payload(client, method, path, body)
    status, reply = await call(client, tool, arguments)
    assert status == 200 and reply["result"] == expected
    for version in ("2025-11-25", MODERN):
        status, reply, _ = await stream(client, "tools/call",
                                        {"name": tool, "arguments": arguments}, version=version)
        result = reply["result"]
        assert status == 200 and result["isError"] is False
        assert result["structuredContent"] == expected
        assert json.loads(result["content"][0]["text"]) == expected
    # A versioned request on /mcp answers exactly as the stream does.
    status, reply = await rpc(client, "tools/call", {"name": tool, "arguments": arguments},
                              headers={"Accept": ACCEPT, "MCP-Protocol-Version": "2025-06-18"})
    assert status == 200 and reply["result"]["structuredContent"] == expected


async def test_jsonrpc_errors_are_fixed_and_never_echo(client: Client) -> None:
    for method in ("initialize/../../etc/passwd", "/tmp/secret", "resources/list"):
        status, body = await rpc(client, method)
        assert status == 200
        assert body["error"] == {"code": -32601, "message": "Unsupported MCP-style method."}
    for params in ({"name": "/etc/passwd"}, {}, {"name": 7}):
        status, body = await rpc(client, "tools/call", params)
        assert body["error"] == {"code": -32602, "message": "Unknown MCP-style tool."}
    cases = [
        ({"query": "x", "mode": "Fuzzy"},
         "unknown search mode: expected lexical, literal, vector, or hybrid"),
        ({"query": "x", "min_score": True}, "min_score must be a non-negative number"),
        ({"query": "x", "min_score": -1}, "min_score must be a non-negative number"),
        ({"query": "x", "min_score": "nan"}, "min_score must be a non-negative number"),
        ({"query": "x", "query_variants": None},
         "query_variants must be an array of strings; omit it instead of null"),
        ({"query": "x", "query_variants": ["a", "b", "c"]},
         "query_variants accepts at most 2 supplied variants"),
        ({"query": "x", "query_variants": ["a"], "mode": "literal"},
         "query_variants is supported only with mode=lexical"),
    ]
    for arguments, message in cases:
        status, body = await call(client, "llmwiki_search", arguments)
        assert status == 200 and body["error"] == {"code": -32602, "message": message}, arguments
    status, body = await call(client, "llmwiki_context", {"query": "x", "mode": "vector"})
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith("Vector search is not enabled")


async def test_jsonrpc_internal_error_is_safe(serve_client: ClientFactory,
                                              sample_root: Path) -> None:
    client = await serve_client(sample_root)
    shutil.rmtree(sample_root)
    for tool in TOOL_NAMES:
        status, body = await call(client, tool, {"query": "release", "page_id": "hot"})
        assert status == 200
        assert body["error"] == {"code": -32000, "message": "Internal MCP-style error."}
        assert str(sample_root) not in json.dumps(body)
        status, body, _ = await stream(client, "tools/call",
                                       {"name": tool, "arguments": {"page_id": "hot"}})
        assert body["result"]["isError"] is True
        assert body["result"]["content"][0]["text"].endswith("Internal MCP-style error.")
    status, body, _ = await stream(client, "resources/list")
    assert body["result"]["resources"] == []


async def test_jsonrpc_request_shape_errors_are_422(client: Client) -> None:
    for raw in ('{"jsonrpc":"2.0","id":1}', '{"method":"tools/list","params":[]}', "{not json",
                "[]", '{"method": 5}'):
        resp = await client.post("/mcp", data=raw, headers={"Content-Type": "application/json"})
        assert resp.status == 422, raw
        assert isinstance((await resp.json())["detail"], list)


async def test_jsonrpc_null_id_is_omitted_and_still_processed(client: Client) -> None:
    status, body = await rpc(client, "tools/list", rid=None)
    assert status == 200 and "id" not in body and len(body["result"]["tools"]) == 7
    status, body = await rpc(client, "tools/call", {"name": "nope"}, rid="abc")
    assert body["id"] == "abc" and "result" not in body


async def test_jsonrpc_lenient_coercion_and_clamping(client: Client) -> None:
    _, body = await call(client, "llmwiki_search", {"query": "release", "limit": "nonsense"})
    assert 0 < len(body["result"]["results"]) <= 8
    _, body = await call(client, "llmwiki_search", {"query": "release", "limit": 999,
                                                    "snippet_chars": 99999})
    assert len(body["result"]["results"]) <= 30
    assert all(len(r["snippet"]) <= 2000 for r in body["result"]["results"])
    _, body = await call(client, "llmwiki_search", {"query": "release", "limit": "2",
                                                    "fields": ["title", " route ", "", "title"]})
    assert len(body["result"]["results"]) == 2
    assert all(set(r) == {"page_id", "title", "route"} for r in body["result"]["results"])
    _, body = await call(client, "llmwiki_graph", {"limit": -5})
    assert len(body["result"]["nodes"]) == 1
    _, body = await call(client, "llmwiki_graph_neighbors",
                         {"seeds": "hot, index", "direction": "sideways", "depth": 99,
                          "limit": "x", "relation": []})
    result = body["result"]
    assert result["direction"] == "both" and result["depth"] == 4
    assert result["seeds"] == ["page:hot", "page:index"]
    _, body = await call(client, "llmwiki_read", {"id": "hot", "fields": "id,title"})
    assert body["result"] == {"id": "hot", "title": "Current Focus"}
    _, body = await call(client, "llmwiki_read", {"page_id": "no/such/page"})
    assert body["result"] == {"found": False}
    _, body = await call(client, "llmwiki_read", {"page_id": "runbooks/incident-comms",
                                                  "include_drafts": "yes"})
    assert body["result"] == {"found": False, "reason": "not approved for serving"}
    _, body = await rpc(client, "tools/call", {"name": "llmwiki_source_refs", "arguments": [1]})
    assert body["result"]["source_id"] == SOURCE_ID


async def test_jsonrpc_initialize_ping_and_notifications(client: Client) -> None:
    status, body = await rpc(client, "initialize", {"protocolVersion": "2025-06-18"})
    assert status == 200
    assert body["result"]["protocolVersion"] == "2025-06-18"
    assert body["result"]["serverInfo"]["name"] == f"{TITLE} - LLMWiki Serve"
    status, body = await rpc(client, "ping")
    assert body == {"jsonrpc": "2.0", "id": 1, "result": {}}
    resp = await client.post("/mcp", json={"jsonrpc": "2.0",
                                           "method": "notifications/initialized"})
    assert resp.status == 202 and await resp.read() == b""


# -- /mcp/stream: transport --------------------------------------------------------------


async def test_stream_transport_statuses(client: Client) -> None:
    for path in ("/mcp/stream", "/mcp/stream/"):
        resp = await client.get(path, headers={"Accept": "text/event-stream"})
        assert resp.status == 405 and resp.headers["Allow"] == "POST"
        resp = await client.delete(path)
        assert resp.status == 405
        assert (await resp.json())["error"]["code"] == -32600
    status, body, headers = await stream(client, "notifications/initialized", rid=None)
    assert status == 202 and body is None
    resp = await client.post("/mcp/stream", data="{oops", headers={"Accept": ACCEPT})
    assert resp.status == 400
    body = await resp.json()
    assert body["id"] is None and body["error"]["code"] == -32700
    resp = await client.post("/mcp/stream", data="[]", headers={"Accept": ACCEPT})
    assert resp.status == 400 and (await resp.json())["error"]["code"] == -32602
    status, body, headers = await stream(client, "tools/list")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert "Mcp-Session-Id" not in headers
    resp = await client.post("/mcp/stream", data=b"x" * (5 * 1024 * 1024),
                             headers={"Accept": ACCEPT})
    assert resp.status == 413


async def test_stream_host_and_origin_guards(client: Client) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": "2025-11-25"}
    resp = await client.post("/mcp/stream", data=body, headers={**headers, "Host": "127.0.0.1"})
    assert resp.status == 421
    resp = await client.post("/mcp/stream", data=body,
                             headers={**headers, "Host": "evil.example:80"})
    assert resp.status == 421
    resp = await client.post("/mcp/stream", data=body,
                             headers={**headers, "Origin": "http://evil.example"})
    assert resp.status == 403
    resp = await client.post("/mcp", data=body, headers={**headers, "Origin": "http://evil.example"})
    assert resp.status == 403
    resp = await client.post("/mcp/stream", data=body,
                             headers={**headers, "Origin": "http://localhost:3000"})
    assert resp.status == 200


async def test_stream_legacy_initialize(client: Client) -> None:
    for params, extra in (
        ({"protocolVersion": "2025-11-25", "capabilities": {}}, {}),
        ({"protocolVersion": "2025-11-25", "_meta": {}}, {"Mcp-Method": "initialize"}),
        ({"protocolVersion": "2025-03-26", "_meta": {"progressToken": 3}}, {}),
    ):
        status, body, headers = await stream(client, "initialize", params, version=None,
                                             extra=extra)
        assert status == 200, body
        result = body["result"]
        assert result["protocolVersion"] == params["protocolVersion"]
        assert result["serverInfo"] == {"name": f"{TITLE} - LLMWiki Serve",
                                        "version": result["serverInfo"]["version"]}
        assert f"source_id={SOURCE_ID}" in result["instructions"]
        assert result["capabilities"]["tools"] == {"listChanged": False}
        assert "Mcp-Session-Id" not in headers
    status, body, _ = await stream(client, "initialize", {"protocolVersion": "1999-01-01"},
                                   version=None)
    assert body["result"]["protocolVersion"] == "2025-11-25"
    status, body, _ = await stream(client, "initialize",
                                   {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
                                   version=None)
    assert status == 400 and body["error"] == {"code": -32020,
                                               "message": "MCP-Protocol-Version header is required"}
    status, body, _ = await stream(client, "initialize", {}, version=None,
                                   extra={"Mcp-Method": "tools/list"})
    assert status == 400 and body["error"]["code"] == -32020
    status, body, _ = await stream(client, "initialize", {"_meta": "x"}, version=None)
    assert status == 400 and body["error"]["code"] == -32020
    status, body, _ = await stream(client, "ping", version="2025-06-18")
    assert status == 200 and body["result"] == {}


async def test_stream_header_validation(client: Client) -> None:
    meta_version = "io.modelcontextprotocol/protocolVersion"
    resp = await client.post("/mcp/stream", headers={"Accept": "application/json",
                                                     "MCP-Protocol-Version": MODERN},
                             data=json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
    assert resp.status == 400
    assert await resp.json() == {"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32020, "message": "Accept header must include application/json and text/event-stream"}}
    status, body, _ = await stream(client, "tools/list", version="1999-01-01")
    assert status == 400 and body["error"] == {
        "code": -32022, "message": "Unsupported protocol version",
        "data": {"supported": list(ACCEPTED_HEADER_VERSIONS), "requested": "1999-01-01"}}
    bad: list[tuple[str, dict[str, Any], dict[str, str], str]] = [
        ("tools/list", {}, {"Mcp-Method": "prompts/list"},
         "Mcp-Method header does not match the request body method"),
        ("tools/call", {"name": "llmwiki_graph"}, {"Mcp-Name": "llmwiki_read"},
         "Mcp-Name header does not match the request body name"),
        ("tools/list", {"_meta": {meta_version: "2025-06-18"}}, {},
         "MCP-Protocol-Version header does not match request params._meta protocolVersion"),
        ("tools/list", {"_meta": {meta_version: ""}}, {},
         f"request params._meta.{meta_version} is malformed"),
        ("tools/list", {"_meta": {"io.modelcontextprotocol/clientInfo": "me"}}, {},
         "request params._meta.io.modelcontextprotocol/clientInfo is malformed"),
        ("tools/list", {"_meta": []}, {}, "request params._meta must be an object"),
    ]
    for method, params, extra, message in bad:
        status, body, _ = await stream(client, method, params, version=MODERN, extra=extra)
        assert status == 400 and body["error"] == {"code": -32020, "message": message}, message
    status, body, _ = await stream(client, "tools/list", version="2025-11\t-25")
    assert status == 400 and body["error"]["message"] == "MCP-Protocol-Version header is malformed"
    # 2026-07-28 requires `_meta` (version and client capabilities), Mcp-Method and Mcp-Name, as
    # the official SDK's inbound ladder and the conformance suite check; clientInfo stays optional.
    caps = "io.modelcontextprotocol/clientCapabilities"
    full = {"Mcp-Method": "tools/call", "Mcp-Name": "llmwiki_graph"}
    for params, extra, code, message in (
        ({"name": "llmwiki_graph"}, full, -32602,
         f"params._meta is missing the required key(s): {meta_version}, {caps}"),
        ({"name": "llmwiki_graph", "_meta": {meta_version: MODERN}}, full, -32602,
         f"params._meta is missing the required key(s): {caps}"),
        ({"name": "llmwiki_graph", "_meta": {meta_version: MODERN, caps: {}}},
         {"Mcp-Name": "llmwiki_graph"}, -32020, "Mcp-Method header is required"),
        ({"name": "llmwiki_graph", "_meta": {meta_version: MODERN, caps: {}}},
         {"Mcp-Method": "tools/call"}, -32020, "Mcp-Name header is required"),
    ):
        status, body, _ = await stream(client, "tools/call", params, version=MODERN, extra=extra,
                                       bare=True)
        assert status == 400 and body["error"] == {"code": code, "message": message}, message
    encoded = "=?base64?" + base64.b64encode(b"llmwiki_graph").decode() + "?="
    for params, extra, version in (
        ({"name": "llmwiki_graph"}, {"Mcp-Name": encoded}, MODERN),  # base64 Mcp-Name, no clientInfo
        ({"name": "llmwiki_graph"}, {}, "2025-06-18"),
        ({"name": "llmwiki_graph"}, {}, "2024-11-05"),
    ):
        status, body, _ = await stream(client, "tools/call", params, version=version, extra=extra)
        assert status == 200 and body["result"]["isError"] is False, (params, body)


async def test_stream_modern_envelopes(client: Client) -> None:
    status, body, headers = await stream(client, "server/discover", version=MODERN)
    result = body["result"]
    assert status == 200 and "Mcp-Session-Id" not in headers
    assert result["resultType"] == "complete"
    # One list: what discovery names is what the unsupported-version error names.
    assert result["supportedVersions"] == list(ACCEPTED_HEADER_VERSIONS)
    assert MODERN in result["supportedVersions"]
    assert result["ttlMs"] == 0 and result["cacheScope"] == "private"
    assert result["capabilities"] == {"prompts": {"listChanged": False},
                                      "resources": {"listChanged": False, "subscribe": False},
                                      "tools": {"listChanged": False}}
    assert TITLE in result["instructions"]
    server_info = result["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert server_info["name"] == f"{TITLE} - LLMWiki Serve" and server_info["version"]
    for method in ("tools/list", "resources/list", "resources/templates/list", "prompts/list"):
        status, body, _ = await stream(client, method, version=MODERN)
        assert body["result"]["resultType"] == "complete" and body["result"]["ttlMs"] == 0
        assert body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == server_info
    _, body, _ = await stream(client, "tools/list", version=MODERN)
    for tool in body["result"]["tools"]:
        assert tool["annotations"] == {"readOnlyHint": True, "destructiveHint": False,
                                       "openWorldHint": False}
        assert tool["outputSchema"] == {"type": "object", "additionalProperties": True,
                                        "title": f"{tool['name']}DictOutput"}
        assert tool["inputSchema"]["title"] == f"{tool['name']}Arguments"
    _, body, _ = await stream(client, "tools/call", {"name": "llmwiki_source_refs"},
                              version=MODERN)
    assert body["result"]["resultType"] == "complete" and "ttlMs" not in body["result"]
    for method in ("ping", "initialize", "completion/complete", "no/such"):
        status, body, _ = await stream(client, method, version=MODERN)
        assert status == 404 and body["error"]["code"] == -32601, method
    status, body, _ = await stream(client, "no/such", version="2025-11-25")
    assert status == 200 and body["error"]["code"] == -32601
    status, body, _ = await stream(client, "resources/read", {"uri": "llmwiki://other/pages/hot"},
                                   version=MODERN)
    assert status == 400 and body["error"] == {"code": -32602, "message": "Unknown resource",
                                               "data": {"uri": "llmwiki://other/pages/hot"}}
    status, body, _ = await stream(client, "resources/read", {"uri": "file:///etc/passwd"})
    assert status == 200 and body["error"]["code"] == -32602


async def test_stream_tool_errors_are_results(client: Client) -> None:
    cases = [
        ("nope", {}, "Unknown tool: nope"),
        ("llmwiki_context", {"query": "x", "query_variants": ["a", "b", "c"]},
         "Error executing tool llmwiki_context: "),
        ("llmwiki_search", {"query": "x", "mode": "vector"},
         "Error executing tool llmwiki_search: Vector search is not enabled"),
        ("llmwiki_graph_neighbors", {"direction": "sideways"},
         "Error executing tool llmwiki_graph_neighbors: "),
        ("llmwiki_read", {}, "Error executing tool llmwiki_read: "),
    ]
    for name, arguments, text in cases:
        status, body, _ = await stream(client, "tools/call", {"name": name, "arguments": arguments})
        result = body["result"]
        assert status == 200 and result["isError"] is True, name
        assert result["content"][0]["text"].startswith(text), result
    _, body, _ = await stream(client, "tools/call",
                              {"name": "llmwiki_read", "arguments": {"page_id": "missing"}})
    assert body["result"]["isError"] is False
    assert body["result"]["structuredContent"] == {"found": False}


async def test_stream_resources_and_prompt(client: Client, sample_root: Path) -> None:
    _, body, _ = await stream(client, "resources/list")
    resources = body["result"]["resources"]
    names = [r["name"] for r in resources]
    assert "hot" in names and "runbooks/incident-comms" not in names
    by_name = {r["name"]: r for r in resources}
    assert by_name["hot"]["annotations"] == {"audience": ["assistant"], "priority": 1.0}
    assert by_name["index"]["annotations"]["priority"] == 0.95
    assert by_name["runbooks/rollback"]["annotations"]["priority"] == 0.55
    rollback = by_name["runbooks/rollback"]
    assert rollback["uri"] == f"llmwiki://{SOURCE_ID}/pages/runbooks%2Frollback"
    assert rollback["mimeType"] == "text/markdown"
    assert rollback["_meta"] == {"io.llmwiki/sourceId": SOURCE_ID,
                                 "io.llmwiki/pageId": "runbooks/rollback",
                                 "io.llmwiki/pageRole": rollback["_meta"]["io.llmwiki/pageRole"]}
    _, body, _ = await stream(client, "resources/read", {"uri": rollback["uri"]})
    content = body["result"]["contents"][0]
    assert content["uri"] == rollback["uri"] and content["mimeType"] == "text/markdown"
    assert content["text"]
    draft_uri = f"llmwiki://{SOURCE_ID}/pages/runbooks%2Fincident-comms"
    _, body, _ = await stream(client, "resources/read", {"uri": draft_uri})
    assert body["error"]["message"] == "Unknown resource"
    _, body, _ = await stream(client, "resources/templates/list")
    assert body["result"]["resourceTemplates"][0]["uriTemplate"] == (
        "llmwiki://{source_id}/pages/{page_id}")
    _, body, _ = await stream(client, "prompts/list")
    prompt = body["result"]["prompts"][0]
    assert prompt["name"] == "llmwiki_source_grounded_query"
    assert prompt["arguments"][0]["name"] == "query" and prompt["arguments"][0]["required"]
    _, body, _ = await stream(client, "prompts/get", {"name": prompt["name"],
                                                      "arguments": {"query": "How to roll back?"}})
    text = body["result"]["messages"][0]["content"]["text"]
    assert f'"{TITLE}" (llmwiki://{SOURCE_ID})' in text and "llmwiki_context" in text
    assert text.endswith("Question: How to roll back?") and "untrusted" in text
    assert str(sample_root) not in json.dumps(body)
    _, body, _ = await stream(client, "prompts/get", {"name": prompt["name"], "arguments": {}})
    assert body["error"]["code"] == -32602


# -- names, descriptions, selection ---------------------------------------------------------


async def test_overrides_and_configured_defaults(serve_client: ClientFactory,
                                                 sample_root: Path) -> None:
    client = await serve_client(sample_root, mcp_server_name="  Packaging   Ops MCP ",
                                mcp_instructions="Only packaging.", context_default_limit=3,
                                graph_default_limit=9)
    _, body = await rpc(client, "tools/list")
    descriptions = [t["description"] for t in body["result"]["tools"]]
    assert descriptions[1].startswith(f"[Packaging Ops MCP | source_id: {SOURCE_ID}] Search "
                                      "approved LLMWiki pages.")
    assert "Default limit: 3 evidence item(s)" in descriptions[0]
    assert "Default limit: 9 node(s)" in descriptions[3]
    _, body, _ = await stream(client, "server/discover", version=MODERN)
    assert body["result"]["instructions"] == "Only packaging."
    assert body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == (
        "Packaging Ops MCP")
    client = await serve_client(sample_root, mcp_tool_description_prefix="[Packaging Ops MCP]")
    _, body = await rpc(client, "tools/list")
    assert body["result"]["tools"][1]["description"].startswith(
        "[Packaging Ops MCP] Search approved LLMWiki pages.")
    client = await serve_client(sample_root, mcp_tool_description_prefix="")
    _, body = await rpc(client, "tools/list")
    assert body["result"]["tools"][1]["description"].startswith("Search approved")


async def test_tool_selection_filters_and_blocks(serve_client: ClientFactory,
                                                 sample_root: Path) -> None:
    client = await serve_client(sample_root, mcp_tools=("llmwiki_search,llmwiki_read",
                                                        "llmwiki_context"),
                                mcp_exclude_tools=("llmwiki_context",))
    _, body = await rpc(client, "tools/list")
    assert [t["name"] for t in body["result"]["tools"]] == ["llmwiki_search", "llmwiki_read"]
    assert "llmwiki_context first" not in body["result"]["tools"][0]["description"]
    _, body, _ = await stream(client, "tools/list", version=MODERN)
    assert [t["name"] for t in body["result"]["tools"]] == ["llmwiki_search", "llmwiki_read"]
    message = ("MCP tool 'llmwiki_context' is disabled on this server "
               "(see --mcp-tools / --mcp-exclude-tools).")
    _, body = await call(client, "llmwiki_context", {"query": "x"})
    assert body["error"] == {"code": -32602, "message": message}
    _, body, _ = await stream(client, "tools/call", {"name": "llmwiki_context"})
    assert body["result"]["isError"] is True and message in body["result"]["content"][0]["text"]
    _, body = await call(client, "llmwiki_search", {"query": "release"})
    assert body["result"]["results"]


def test_tool_selection_validation(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="Unknown MCP tool name"):
        ServeSettings(root=tmp_path, mcp_tools=("llmwiki_everything",))
    with pytest.raises(SettingsError, match="leaves no tools enabled"):
        ServeSettings(root=tmp_path, mcp_exclude_tools=TOOL_NAMES)


def test_server_name_without_manifest(tmp_path: Path) -> None:
    source = KnowledgeSource(ServeSettings(root=tmp_path / "missing", page_cache=False))
    dispatcher = Dispatcher(source)
    assert dispatcher.server_name() == "LLMWiki Serve"
    assert dispatcher.description_prefix() == ""
    assert dispatcher.instructions()
    source.close()


async def test_no_local_path_in_any_mcp_response(client: Client, sample_root: Path) -> None:
    texts = []
    for tool, arguments, *_ in PARITY:
        _, body = await call(client, tool, arguments)
        texts.append(json.dumps(body))
        _, body, _ = await stream(client, "tools/call", {"name": tool, "arguments": arguments},
                                  version=MODERN)
        texts.append(json.dumps(body))
    for method in ("tools/list", "resources/list", "prompts/list", "server/discover"):
        _, body, _ = await stream(client, method, version=MODERN)
        texts.append(json.dumps(body))
    for text in texts:
        assert str(sample_root) not in text and str(sample_root.parent) not in text


def test_mcp_settings_from_options_and_environment(tmp_path: Path) -> None:
    from serve.cli import build_parser
    from serve.settings import resolve_settings

    args = build_parser().parse_args(["mcp", str(tmp_path), "--mcp-title", "Ops",
                                      "--mcp-tools", "llmwiki_context,llmwiki_read",
                                      "--mcp-exclude-tools", "llmwiki_read"])
    cli = {k: v for k, v in vars(args).items() if k not in ("command", "root")}
    settings = resolve_settings(tmp_path, cli, {})
    assert settings.mcp_server_name == "Ops"
    assert Dispatcher(KnowledgeSource(settings)).enabled == ("llmwiki_context",)
    env = {"LLMWIKI_MCP_TITLE": "Old Name", "LLMWIKI_MCP_INSTRUCTIONS": "Be brief.",
           "LLMWIKI_MCP_TOOL_DESCRIPTION_PREFIX": "[X]",
           "LLMWIKI_MCP_EXCLUDE_TOOLS": "llmwiki_graph, llmwiki_graph_neighbors"}
    settings = resolve_settings(tmp_path, {}, env)
    assert (settings.mcp_server_name, settings.mcp_instructions,
            settings.mcp_tool_description_prefix) == ("Old Name", "Be brief.", "[X]")
    assert settings.mcp_exclude_tools == ("llmwiki_graph", "llmwiki_graph_neighbors")
    settings = resolve_settings(tmp_path, {}, {**env, "LLMWIKI_MCP_SERVER_NAME": "New"})
    assert settings.mcp_server_name == "New"
    with pytest.raises(SettingsError, match="Unknown MCP tool name"):
        resolve_settings(tmp_path, {}, {"LLMWIKI_MCP_TOOLS": "bogus"})


def test_cli_rejects_bad_tool_selection_cleanly(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from serve.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["mcp", str(tmp_path), "--mcp-tools", "llmwiki_everything"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Unknown MCP tool name(s): llmwiki_everything" in err and "Traceback" not in err


async def test_jsonrpc_oversize_body_is_413(client: Client) -> None:
    resp = await client.post("/mcp", data=b"{" + b" " * (5 * 1024 * 1024) + b"}",
                             headers={"Content-Type": "application/json"})
    assert resp.status == 413


@pytest.mark.parametrize("path", ["/mcp", "/mcp/stream"])
async def test_literal_tool_calls_do_not_hold_the_event_loop(
        client: Client, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """A literal search may read many page texts: over MCP it runs in a worker thread, so the
    server keeps answering while it works; lexical calls stay on the loop."""
    source = client.app[http.SOURCE_KEY]
    await client.post("/search", json={"query": "warm"})  # the index exists
    search = source.search
    started, release = threading.Event(), threading.Event()
    threads: list[bool] = []

    def gated(req: Any) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        if req.mode == "literal":
            started.set()
            assert release.wait(10), "the test never released the search"
        return search(req)

    monkeypatch.setattr(source, "search", gated)
    headers = {"Host": f"127.0.0.1:{client.server.port}"}
    if path == "/mcp/stream":
        headers.update({"MCP-Protocol-Version": "2025-06-18", "Accept": ACCEPT})
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "llmwiki_search", "arguments": {"query": "release", "mode": "literal"}}}
    pending = asyncio.ensure_future(client.post(path, json=call, headers=headers))
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
    health = await client.get("/health")  # answered while the literal search is still running
    assert health.status == 200 and not pending.done()
    release.set()
    answer = await (await pending).json()
    payload = answer["result"].get("structuredContent", answer["result"])
    assert payload["results"], answer
    lexical = {**call, "params": {"name": "llmwiki_search", "arguments": {"query": "release"}}}
    assert (await client.post(path, json=lexical, headers=headers)).status == 200
    assert threads == [False, True]
