"""The bridge's `POST /mcp` as raw JSON-RPC against our serve: every method, every tool, every error."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.web.mcp_descriptors import TOOL_NAMES
from serve.protocols.http import create_app as create_serve_app
from serve.settings import ServeSettings
from tests.support.bridge_sources import BridgeFactory, Client, source

ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
RETRIEVAL = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical"}
SERVE_ID = "sample-operations-wiki"
SELECTION = {"sourceId", "source_id", "knowledgeSources", "knowledge_sources"}
RESULT_KEYS = {"llmwiki_list_sources": "llmwiki_sources", "llmwiki_agent_run": "llmwiki_agent_result"}


@dataclass
class Upstream:
    """Our serve on the sample wiki, recording every request the bridge makes to it."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)

    def calls(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == path or r["path"].startswith(path + "/")]


@pytest.fixture
async def upstream(sample_root: Path, tmp_path: Path) -> Any:
    app = create_serve_app(ServeSettings(root=sample_root, cache_dir=tmp_path / "cache"))
    seen = Upstream("")

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        seen.requests.append({"method": request.method, "path": request.path,
                              "query": list(request.query.items()),
                              "body": json.loads(raw) if raw else None})
        return await handler(request)

    app.middlewares.insert(0, record)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    seen.url = str(server.make_url("")).rstrip("/")
    yield seen
    await server.close()


async def rpc(client: Client, method: str, params: Any = None, *, rid: Any = 1,
              headers: dict[str, str] | None = None) -> tuple[int, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        body["id"] = rid
    if params is not None:
        body["params"] = params
    response = await client.post("/mcp", json=body, headers=headers or {})
    text = await response.text()
    return response.status, json.loads(text) if text else None


async def call(client: Client, name: str, arguments: Any = None, **kwargs: Any) -> tuple[int, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return await rpc(client, "tools/call", params, **kwargs)


async def ok(client: Client, name: str, arguments: dict[str, Any]) -> tuple[Any, str]:
    """A successful tool call: its structured value under the tool's key, and its text."""
    status, body = await call(client, name, arguments)
    assert status == 200, body
    result = body["result"]
    assert result["isError"] is False, result
    [content] = result["content"]
    assert content["type"] == "text"
    [(key, value)] = result["structuredContent"].items()
    assert key == RESULT_KEYS.get(name, name)
    return value, content["text"]


async def invalid(client: Client, name: str, arguments: Any, message: str) -> None:
    """A -32602 whose message contains `message`, answered with HTTP 200 (upstream shape)."""
    status, body = await call(client, name, arguments)
    assert status == 200, body
    assert body["error"]["code"] == -32602, body
    assert message in body["error"]["message"], body["error"]["message"]
    assert "result" not in body


def inline(url: str, *ids: str, **extra: Any) -> dict[str, Any]:
    return {"knowledgeSources": [source(i, url, **extra) for i in ids or ("ops",)]}


# ----------------------------------------------------------------------------- lifecycle


@pytest.mark.parametrize(("requested", "answered"), [
    ("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"), ("2025-11-25", "2025-11-25"),
    ("2025-03-26", "2025-03-26"), ("1999-01-01", "2025-06-18"), (None, "2025-06-18")])
async def test_initialize_negotiates_a_version(bridge_client: BridgeFactory, requested: str | None,
                                               answered: str) -> None:
    client = await bridge_client()
    params = {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    if requested is not None:
        params["protocolVersion"] = requested
    status, body = await rpc(client, "initialize", params, rid="init-1")
    assert status == 200
    assert body["id"] == "init-1"
    result = body["result"]
    assert result["protocolVersion"] == answered
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "llmwiki-agent-bridge" and result["serverInfo"]["version"]
    assert "llmwiki_list_sources" in result["instructions"]


async def test_notifications_are_accepted_with_202_and_no_body(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    for rid in (None, 5):
        response = await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized",
                                                   **({"id": rid} if rid is not None else {})})
        assert response.status == 202 and await response.read() == b""
    response = await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                               "params": {"requestId": 1}})
    assert response.status == 202 and await response.read() == b""


async def test_ping_and_unknown_methods(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    assert await rpc(client, "ping", rid=7) == (200, {"jsonrpc": "2.0", "id": 7, "result": {}})
    for method in ("resources/list", "server/discover", "nope"):
        status, body = await rpc(client, method)
        assert status == 200
        assert body["error"] == {"code": -32601, "message": f"Method not found: {method}"}


@pytest.mark.parametrize(("payload", "rid"), [
    ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], None),  # batches are not supported
    ({"jsonrpc": "1.0", "id": 3, "method": "ping"}, 3),
    ({"id": "x", "method": "ping"}, "x"),
    ({"jsonrpc": "2.0", "id": 2.5, "method": 7}, 2.5),
    ({"jsonrpc": "2.0", "id": {"no": 1}, "method": None}, None),
    ("ping", None),
    ({}, None),
])
async def test_invalid_requests(bridge_client: BridgeFactory, payload: Any, rid: Any) -> None:
    client = await bridge_client()
    response = await client.post("/mcp", json=payload)
    assert response.status == 200
    assert await response.json() == {"jsonrpc": "2.0", "id": rid,
                                     "error": {"code": -32600, "message": "Invalid JSON-RPC request."}}


async def test_transport_errors_use_the_bridge_error_body(bridge_client: BridgeFactory) -> None:
    client = await bridge_client(bearer_token="bridge-secret", max_body_bytes=4096)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    auth = {"Authorization": "Bearer bridge-secret"}
    response = await client.post("/mcp", json=ping)
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "bridge_unauthorized"
    response = await client.post("/mcp", data=b"{not json", headers=auth)
    assert response.status == 400
    assert await response.json() == {"error": {"code": "invalid_json",
                                               "message": "Request body must be valid JSON."}}
    response = await client.post("/mcp", data=b"x" * 5000, headers=auth)
    assert response.status == 413
    response = await client.post("/mcp", json=ping, headers={**auth, "Origin": "https://evil.example"})
    assert response.status == 403
    response = await client.post("/mcp", json=ping, headers={**auth, "Origin": "http://localhost:3000"})
    assert response.status == 200
    assert response.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    assert (await client.get("/mcp", headers=auth)).status == 404  # sessionless: no GET stream


# ----------------------------------------------------------------------------- tools/list


async def test_tools_list_has_the_eight_tools_in_order(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    status, body = await rpc(client, "tools/list")
    assert status == 200
    result = body["result"]
    assert result["serverInfo"] == {"name": "llmwiki-agent-bridge", "settingsUrl": "/settings"}
    tools = result["tools"]
    assert [t["name"] for t in tools] == list(TOOL_NAMES) == [
        "llmwiki_agent_run", "llmwiki_list_sources", "llmwiki_context", "llmwiki_search",
        "llmwiki_read", "llmwiki_graph", "llmwiki_graph_neighbors", "llmwiki_source_bundle"]
    by_name = {t["name"]: t for t in tools}
    for tool in tools:
        assert set(tool) == {"name", "description", "inputSchema"}  # upstream's shape on bare /mcp
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert tool["description"]
        if tool["name"] != "llmwiki_agent_run":
            assert set(schema["properties"]) >= SELECTION
            assert "never" in tool["description"] and "runtime" in tool["description"]
    run = by_name["llmwiki_agent_run"]["inputSchema"]
    assert run["required"] == ["query"] and run["properties"]["query"]["minLength"] == 1
    assert run["properties"]["mode"]["default"] == "delegated-runtime"
    assert run["properties"]["retrievalGuidance"]["additionalProperties"] is False
    for name in ("llmwiki_context", "llmwiki_search"):
        props = by_name[name]["inputSchema"]["properties"]
        assert by_name[name]["inputSchema"]["required"] == ["query"]
        assert props["limit"] == {"type": "integer", "minimum": 1, "maximum": 50, "default": 8}
        assert props["retrieval"]["required"] == ["schemaVersion", "searchMode"]
        assert "retrievalGuidance" not in props
    assert "retrieval" not in by_name["llmwiki_read"]["inputSchema"]["properties"]
    assert by_name["llmwiki_read"]["inputSchema"]["anyOf"] == [{"required": ["pageId"]},
                                                              {"required": ["page_id"]}]
    assert by_name["llmwiki_graph"]["inputSchema"]["properties"]["limit"]["maximum"] == 500
    neighbors = by_name["llmwiki_graph_neighbors"]["inputSchema"]
    assert neighbors["properties"]["depth"] == {"type": "integer", "minimum": 1, "maximum": 4, "default": 1}
    assert len(neighbors["anyOf"]) == 4
    described = by_name["llmwiki_list_sources"]["description"]
    assert "list_sources -> context -> search -> read" in described


# ----------------------------------------------------------------------------- tools/call errors


async def test_tools_call_envelope_errors(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    for params in (None, {}, {"name": ""}, {"name": 5}):
        status, body = await rpc(client, "tools/call", params)
        assert status == 200
        assert body["error"] == {"code": -32602, "message": "MCP tools/call params.name is required."}
    status, body = await call(client, "llmwiki_nope", {})
    assert body["error"] == {"code": -32602, "message": "Unknown MCP tool: llmwiki_nope."}
    # Arguments that are not an object count as none, as the reference reads them.
    status, body = await call(client, "llmwiki_list_sources", ["not", "an", "object"])
    assert body["result"]["structuredContent"]["llmwiki_sources"]["totalSourceCount"] == 0


async def test_source_selection_errors(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    one, two = inline(upstream.url), inline(upstream.url, "a", "b")
    await invalid(client, "llmwiki_context", {**one, "query": "x", "sourceId": "zzz"},
                  "No ready selected Knowledge Source found for sourceId: zzz.")
    await invalid(client, "llmwiki_context", {**two, "query": "x"},
                  "llmwiki_context requires sourceId when more than one ready Knowledge Source is available.")
    await invalid(client, "llmwiki_search", {"query": "x"},
                  "No ready selected Knowledge Source is available.")
    not_ready = {"knowledgeSources": [{"id": "u", "protocol": "llmwiki-http", "url": upstream.url}]}
    await invalid(client, "llmwiki_graph", not_ready, "No ready selected Knowledge Source is available.")
    deselected = inline(upstream.url, selected=False)
    await invalid(client, "llmwiki_source_bundle", deselected,
                  "No ready selected Knowledge Source is available.")
    a2a = {"knowledgeSources": [{**source("agent", upstream.url), "protocol": "a2a"}]}
    for tool in ("llmwiki_search", "llmwiki_graph", "llmwiki_source_bundle"):
        await invalid(client, tool, {**a2a, "query": "x"},
                      f"{tool} does not support a2a Knowledge Sources.")
    await invalid(client, "llmwiki_read", {**a2a, "pageId": "hot"},
                  "llmwiki_read does not support a2a Knowledge Sources.")
    await invalid(client, "llmwiki_context", {"knowledgeSources": {"id": "x"}, "query": "x"},
                  "knowledgeSources must be an array")
    await invalid(client, "llmwiki_context", {**one, "query": "x", "sourceId": 12}, "sourceId must be")
    assert upstream.requests == []  # every refusal happened before any source call


async def test_missing_and_wrong_arguments_are_invalid_params(bridge_client: BridgeFactory,
                                                              upstream: Upstream) -> None:
    client = await bridge_client()
    one = inline(upstream.url)
    for tool in ("llmwiki_context", "llmwiki_search"):
        for query in (None, "", "   ", ["q"]):  # a number is a query: read as text
            args = {**one} if query is None else {**one, "query": query}
            await invalid(client, tool, args, f"{tool} arguments.query is required.")
    for page in (None, "", {"id": 7}):
        args = {**one} if page is None else {**one, "pageId": page}
        await invalid(client, "llmwiki_read", args, "llmwiki_read arguments.pageId is required.")
    await invalid(client, "llmwiki_graph_neighbors", one, "arguments.nodeId or nodeIds is required.")
    await invalid(client, "llmwiki_graph_neighbors", {**one, "nodeIds": [1, 2]}, "nodeIds must be")
    await invalid(client, "llmwiki_graph_neighbors", {**one, "nodeId": "x", "relations": {"a": 1}},
                  "relations must be")
    await invalid(client, "llmwiki_context", {**one, "query": "x", "retrieval": None}, "retrieval")
    await invalid(client, "llmwiki_search", {**one, "query": "x", "retrieval": {**RETRIEVAL, "guidance": 1}},
                  "retrieval.guidance is not a supported retrieval field.")
    await invalid(client, "llmwiki_search",
                  {**one, "query": "x", "retrieval": {**RETRIEVAL, "searchMode": "vector",
                                                      "search": {"queryVariants": ["y"]}}},
                  "queryVariants require searchMode lexical")
    await invalid(client, "llmwiki_search",
                  {**one, "query": "x",
                   "retrieval": {**RETRIEVAL, "search": {"excludePageIds": ["other:p"]}}},
                  "source-prefixed page id for an unselected source")
    for name in ("llmwiki_agent_run",):
        await invalid(client, name, {}, "llmwiki_agent_run arguments.query is required")
        await invalid(client, name, {"query": "x", "orchestrationMode": "solo"},
                      "orchestrationMode must be one of: evidence-only, delegated-runtime, hybrid.")
        await invalid(client, name, {"query": "x", "retrieval": {"schemaVersion": "v0"}}, "retrieval")
        await invalid(client, name, {"query": "x", "retrievalGuidance": {"pageCards": 1}},
                      "data.retrievalGuidance")


async def test_odd_arguments_never_cause_a_server_error(bridge_client: BridgeFactory,
                                                        upstream: Upstream) -> None:
    client = await bridge_client()
    one = inline(upstream.url)
    odd: list[Any] = [None, True, -1, 1e300, "abc", [], {}, [None], "page:hot"]
    keys = ("query", "limit", "pageId", "page_id", "nodeId", "nodeIds", "depth", "direction", "relation",
            "relations", "retrieval", "includeDrafts", "sourceId", "knowledge_sources")
    for name in TOOL_NAMES:
        if name == "llmwiki_agent_run":
            continue  # its runtime may legitimately answer 502
        for key in keys:
            for value in odd:
                status, body = await call(client, name, {**one, "query": "release", "pageId": "hot",
                                                          "nodeId": "hot", key: value})
                assert status == 200, (name, key, value, body)
                assert ("result" in body) != ("error" in body)
                if "error" in body:
                    assert body["error"]["code"] == -32602, (name, key, value, body)


# ----------------------------------------------------------------------------- the source tools


async def test_list_sources_registered_and_inline(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client(source_policy="allowlist", allowed_source_origins=(upstream.url,))
    registered = [source("ops", upstream.url + "/?token=abc", root="/home/me/wiki"),
                  source("off", "http://127.0.0.1:9", selected=False, bundleId="b"),
                  source("blocked", "https://example.invalid", bundleId="b")]
    assert (await client.put("/settings/sources.json", json=registered)).status == 200
    value, text = await ok(client, "llmwiki_list_sources", {})
    assert value["totalSourceCount"] == 3 and value["selectedSourceCount"] == 2
    assert value["readySourceCount"] == 1 and value["unavailableSourceCount"] == 2
    assert value["warningCount"] == 1 and value["warnings"][0]["code"] == "duplicate_bundle_id"
    ops, off, blocked = value["sources"]
    assert ops["url"] == upstream.url + "/?token=abc"  # raw URLs, so a workbench can send them back
    assert ops["readiness"] == {"ready": True, "basis": "last_known_status_bridge_policy"}
    assert ops["rootLabel"] == "wiki" and ops["rootRedacted"] is True and "root" not in ops
    assert off["readiness"] == {"ready": False, "basis": "selection", "reason": "not_selected"}
    assert blocked["readiness"]["reason"] == "source_policy_blocked"
    assert text.splitlines() == [
        "Registered Knowledge Sources: 3.",
        "- ops: Ops (llmwiki-http, ready, ready)",
        "- off: Off (llmwiki-http, ready, unavailable: not_selected, not selected)",
        "- blocked: Blocked (llmwiki-http, ready, unavailable: source_policy_blocked)"]
    assert "127.0.0.1" not in text and "example.invalid" not in text and "/home/me" not in json.dumps(value)
    value, text = await ok(client, "llmwiki_list_sources", inline(upstream.url, "inline-a"))
    assert [s["id"] for s in value["sources"]] == ["inline-a"]
    value, text = await ok(client, "llmwiki_list_sources", {"knowledge_sources": []})
    assert value["totalSourceCount"] == 0 and text == "No Knowledge Sources are registered."
    assert upstream.requests == []  # listing calls no source


async def test_context_shape_and_upstream_body(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    value, text = await ok(client, "llmwiki_context", {**inline(upstream.url), "query": "release checklist",
                                                       "limit": 3.9, "include_drafts": True})
    [sent] = upstream.calls("/query")
    assert sent["body"] == {"query": "release checklist", "limit": 3, "include_drafts": True}
    assert set(value) == {"source", "query", "wikiTitle", "description", "adapter", "implementation",
                          "pageCount", "approvedPageCount", "orientation", "citations", "limitations",
                          "retrievalGuidance", "graph"}
    assert value["source"]["id"] == "ops" and value["query"] == "release checklist"
    assert value["wikiTitle"] == "Sample Operations Wiki" and value["pageCount"] == 14
    assert value["adapter"] == "llmwiki-markdown"
    first = value["orientation"][0]
    assert set(first) == {"id", "title", "path", "snippet", "role", "sourceRefs"}
    assert first["id"] == "hot" and not first["snippet"].startswith("#")
    citations = value["citations"]
    assert 0 < len(citations) <= 3
    assert all(c["id"] == f"ops:{c['pageId']}" and c["connectionId"] == "ops" for c in citations)
    assert {"id", "title", "path", "snippet", "connectionId", "sourceRefs"} <= set(citations[0])
    assert all(n["id"].startswith("ops:") for n in value["graph"]["nodes"])
    guidance = value["retrievalGuidance"]
    assert guidance["schemaVersion"] == "llmwiki.retrieval_guidance.v1"
    assert set(guidance) == {"schemaVersion", "orientationSource", "contentTrust", "maxQueryVariants",
                             "characterBudget", "folderCards", "pageCards", "suggestedTerms",
                             "exactIdentifiers", "fallbackModes"}
    assert "_" not in json.dumps(list(guidance)) and "page_id" not in json.dumps(guidance)
    assert text == (f"Context from Ops: {len(citations)} citation(s), {len(value['orientation'])} "
                    f"orientation item(s).\nGraph: {len(value['graph']['nodes'])} node(s), "
                    f"{len(value['graph']['edges'])} edge(s).")


@pytest.mark.parametrize(("given", "sent"), [(None, 8), (0, 1), (-5, 1), (999, 50), ("12", 8), (True, 8),
                                             (7.8, 7)])
async def test_search_limit_is_clamped(bridge_client: BridgeFactory, upstream: Upstream, given: Any,
                                       sent: int) -> None:
    client = await bridge_client()
    args = {**inline(upstream.url), "query": "rollback"}
    if given is not None:
        args["limit"] = given
    status, body = await call(client, "llmwiki_search", args)
    assert status == 200 and "result" in body
    [call_made] = upstream.calls("/search")
    assert call_made["body"] == {"query": "rollback", "limit": sent, "include_drafts": False}


async def test_search_shape_and_read_by_prefixed_id(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    value, text = await ok(client, "llmwiki_search", {**inline(upstream.url), "query": "rollback"})
    assert set(value) == {"source", "query", "results"}
    results = value["results"]
    assert text == f'Search Ops: {len(results)} result(s) for "rollback".'
    top = results[0]
    assert set(top) == {"id", "pageId", "title", "path", "snippet", "score", "sourceRefs"}
    assert top["id"] == "ops:runbooks/rollback" and top["pageId"] == "runbooks/rollback"
    # The prefixed id goes straight back into llmwiki_read, which routes and strips it.
    value, text = await ok(client, "llmwiki_read", {**inline(upstream.url), "pageId": top["id"]})
    assert upstream.calls("/read")[-1]["path"] == "/read/runbooks/rollback"
    assert value["pageId"] == "ops:runbooks/rollback" and value["source"]["id"] == "ops"
    assert value["page"]["id"] == "runbooks/rollback" and value["page"]["text"]
    assert text == "Page read from Ops: Rollback."


async def test_read_routing_between_sources(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    both = inline(upstream.url, "ops", "ops-archive")
    value, _ = await ok(client, "llmwiki_read", {**both, "page_id": "ops-archive:hot"})
    assert value["source"]["id"] == "ops-archive"  # the longest matching prefix wins
    assert upstream.calls("/read")[-1]["query"] == [("include_drafts", "false")]
    await invalid(client, "llmwiki_read", {**both, "pageId": "ops:hot", "sourceId": "ops-archive"},
                  "llmwiki_read pageId source prefix ops does not match sourceId: ops-archive.")
    await invalid(client, "llmwiki_read", {**both, "pageId": "hot"},
                  "llmwiki_read requires sourceId when more than one ready Knowledge Source is available.")
    value, _ = await ok(client, "llmwiki_read", {**both, "pageId": "hot", "sourceId": "ops"})
    assert value["page"]["id"] == "hot"
    value, text = await ok(client, "llmwiki_read", {**both, "pageId": "ops:no-such-page"})
    assert value["page"] == {"found": False, "id": "no-such-page"}
    assert text == "Page not found from Ops: no-such-page."
    assert len(upstream.calls("/read")) == 3


async def test_graph_shape_and_limit(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    value, text = await ok(client, "llmwiki_graph", {**inline(upstream.url), "limit": 5000})
    assert upstream.calls("/graph")[-1]["query"] == [("limit", "500"), ("include_drafts", "false")]
    assert set(value) == {"source", "limit", "graph"} and value["limit"] == 500
    nodes, edges = value["graph"]["nodes"], value["graph"]["edges"]
    assert nodes and all(n["id"].startswith("ops:") and n["metadata"]["connectionId"] == "ops" for n in nodes)
    assert text == f"Graph from Ops: {len(nodes)} node(s), {len(edges)} edge(s)."
    await ok(client, "llmwiki_graph", inline(upstream.url))
    assert upstream.calls("/graph")[-1]["query"] == [("limit", "120"), ("include_drafts", "false")]


async def test_graph_neighbors_over_several_sources(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    both = inline(upstream.url, "ops", "copy")
    value, text = await ok(client, "llmwiki_graph_neighbors", {
        **both, "nodeId": "ops:page:hot", "nodeIds": ["copy:page:index", "ops:page:hot"],
        "direction": "sideways", "relation": "links_to", "relations": ["contains", "links_to"],
        "depth": 9, "limit": 0})
    calls = upstream.calls("/graph/neighborhood")
    assert [c["query"] for c in calls] == [
        [("seed", "page:hot"), ("depth", "4"), ("direction", "both"), ("relation", "links_to"),
         ("relation", "contains"), ("limit", "1"), ("include_drafts", "false")],
        [("seed", "page:index"), ("depth", "4"), ("direction", "both"), ("relation", "links_to"),
         ("relation", "contains"), ("limit", "1"), ("include_drafts", "false")]]
    assert set(value) == {"sources", "nodeIds", "depth", "direction", "relations", "limit",
                          "neighborhoods", "graph", "citations"}
    assert value["nodeIds"] == ["ops:page:hot", "copy:page:index"]
    assert (value["depth"], value["direction"], value["limit"]) == (4, "both", 1)
    assert value["relations"] == ["links_to", "contains"]
    assert [s["id"] for s in value["sources"]] == ["ops", "copy"]
    first, second = value["neighborhoods"]
    assert first["nodeIds"] == ["ops:page:hot"] and second["nodeIds"] == ["copy:page:index"]
    assert set(first) == {"source", "nodeIds", "depth", "direction", "relations", "limit", "graph",
                          "citations"}
    merged = value["graph"]["nodes"]
    assert {n["id"].split(":", 1)[0] for n in merged} == {"ops", "copy"}
    assert text == (f"Graph neighborhoods from 2 source(s): {len(merged)} node(s), "
                    f"{len(value['graph']['edges'])} edge(s), 0 citation(s).")
    # An unprefixed id goes to every source; with sourceId only to that one.
    upstream.requests.clear()
    await ok(client, "llmwiki_graph_neighbors", {**both, "node_id": "hot"})
    assert len(upstream.calls("/graph/neighborhood")) == 2
    upstream.requests.clear()
    value, _ = await ok(client, "llmwiki_graph_neighbors", {**both, "node_ids": ["hot"], "sourceId": "copy"})
    assert [n["source"]["id"] for n in value["neighborhoods"]] == ["copy"]
    assert len(upstream.calls("/graph/neighborhood")) == 1
    await invalid(client, "llmwiki_graph_neighbors", {**both, "nodeId": "ops:page:hot", "sourceId": "copy"},
                  "No selected Knowledge Source matched the requested graph node ids.")


async def test_source_bundle_shape(bridge_client: BridgeFactory, upstream: Upstream, dead_url: str) -> None:
    client = await bridge_client()
    value, text = await ok(client, "llmwiki_source_bundle", inline(upstream.url))
    assert set(value) == {"source", "sourceBundle", "steps", "diagnostics"}
    bundle = value["sourceBundle"]
    assert bundle["connectionId"] == "ops" and bundle["sourceId"] == SERVE_ID
    assert bundle["bundleId"].startswith(f"{SERVE_ID}:sha256:")
    assert "linked_pages" not in json.dumps(bundle)
    [step] = value["steps"]
    assert step["id"] == "source-manifest-ops" and step["parentId"] == "mcp-source-bundle"
    assert step["status"] == "done" and step["detail"] == "Read safe source bundle metadata."
    assert value["diagnostics"] == []
    assert text == "Source bundle from Ops: Sample Operations Wiki."
    value, text = await ok(client, "llmwiki_source_bundle", inline(dead_url))
    assert value["sourceBundle"] is None
    [step] = value["steps"]
    assert step["status"] == "error" and step["error"] == "Source bundle unavailable."
    [diagnostic] = value["diagnostics"]
    assert diagnostic["phase"] == "source-bundle" and diagnostic["severity"] == "warning"
    assert text == "No source bundle metadata was available from Ops."
    assert dead_url not in json.dumps(value["steps"]) + json.dumps(value["diagnostics"])


async def test_upstream_failures_are_tool_errors(bridge_client: BridgeFactory, upstream: Upstream,
                                                 dead_url: str) -> None:
    client = await bridge_client()
    for name, extra in (("llmwiki_context", {"query": "x"}), ("llmwiki_search", {"query": "x"}),
                        ("llmwiki_read", {"pageId": "hot"}), ("llmwiki_graph", {}),
                        ("llmwiki_graph_neighbors", {"nodeId": "hot"})):
        status, body = await call(client, name, {**inline(dead_url), **extra})
        assert status == 200
        result = body["result"]
        assert result["isError"] is True
        error = result["structuredContent"]["llmwiki_source_error"]
        assert error["tool"] == name and error["message"] == result["content"][0]["text"]
        assert "could not be reached" in error["message"]
        assert dead_url not in json.dumps(body) and "127.0.0.1" not in json.dumps(body)
    # Policy: an allowlist without origins blocks every source, before any connection.
    strict = await bridge_client(source_policy="allowlist")
    status, body = await call(strict, "llmwiki_search", {**inline(upstream.url), "query": "x"})
    assert body["result"]["isError"] is True
    assert body["result"]["structuredContent"]["llmwiki_source_error"] == {
        "tool": "llmwiki_search",
        "message": "Knowledge Source URL is not allowed by this bridge source policy."}
    assert upstream.requests == []


async def test_upstream_http_errors_are_reported_without_bodies(bridge_client: BridgeFactory,
                                                                upstream: Upstream) -> None:
    client = await bridge_client()
    status, body = await call(client, "llmwiki_search", {**inline(upstream.url + "/missing"), "query": "x"})
    assert body["result"]["isError"] is True
    assert body["result"]["content"][0]["text"] == "llmwiki-http search returned HTTP 404"


# ----------------------------------------------------------------------------- retrieval


async def test_retrieval_forwarding_with_guided_variants(bridge_client: BridgeFactory,
                                                         upstream: Upstream) -> None:
    client = await bridge_client()
    retrieval = {**RETRIEVAL, "search": {"limit": 4, "snippetChars": 120, "fields": [" title ", "path"],
                                         "excludePageIds": ["ops:index", "hot"],
                                         "queryVariants": ["Rollback", "revert deploy"]}}
    value, _ = await ok(client, "llmwiki_search", {**inline(upstream.url), "query": "rollback",
                                                   "retrieval": retrieval})
    [bundle_read] = upstream.calls("/source-bundle")  # fresh capabilities decide what is forwarded
    assert bundle_read["method"] == "GET"
    [sent] = upstream.calls("/search")
    assert sent["body"] == {"query": "rollback", "limit": 4, "include_drafts": False, "mode": "lexical",
                            "snippet_chars": 120, "fields": ["title", "path"],
                            "exclude_page_ids": ["index", "hot"],
                            "query_variants": ["revert deploy"]}  # the query's own spelling dropped
    assert "diagnostics" not in value


async def test_retrieval_fallback_and_refusal(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    vector = {**RETRIEVAL, "searchMode": "vector"}
    value, _ = await ok(client, "llmwiki_context", {**inline(upstream.url), "query": "rollback",
                                                    "retrieval": vector})
    [sent] = upstream.calls("/query")
    assert sent["body"] == {"query": "rollback", "limit": 8, "include_drafts": False}  # legacy shape
    [diagnostic] = value["diagnostics"]
    assert diagnostic["phase"] == "retrieval" and diagnostic["severity"] == "warning"
    observations = {o["name"]: o["value"] for o in diagnostic["observations"]}
    assert observations["capabilityStatus"] == "missing_search_mode"
    assert observations["capabilityMetadataSource"] == "fresh"
    assert "retrievalGuidance" in value  # guidance still comes back in camelCase
    upstream.requests.clear()
    await invalid(client, "llmwiki_search", {**inline(upstream.url), "query": "rollback",
                                             "retrieval": {**vector, "fallback": "none"}},
                  "Retrieval searchMode vector is not supported by selected source(s): ops (llmwiki-http).")
    assert upstream.calls("/search") == []  # refused before any query
    described = {**inline(upstream.url, capabilities=["llmwiki_retrieval_v1", "llmwiki_search_mode_lexical"])}
    upstream.requests.clear()
    # The descriptor lists no guided capability, but the fresh bundle does: fresh wins.
    await ok(client, "llmwiki_search", {**described, "query": "rollback",
                                        "retrieval": {**RETRIEVAL, "fallback": "none",
                                                      "search": {"queryVariants": ["revert"]}}})
    assert upstream.calls("/search")[0]["body"]["query_variants"] == ["revert"]


async def test_guidance_absent_from_a_guided_source_is_diagnosed(bridge_client: BridgeFactory) -> None:
    """A source that advertises guided lexical retrieval but sends no guidance gets a warning."""

    async def query(request: web.Request) -> web.Response:
        return web.json_response({"wiki_title": "Tiny", "evidence": [{"page_id": "a", "title": "A"}],
                                  "capabilities": ["llmwiki_agent_guided_lexical_v1"]})

    async def bad_guidance(request: web.Request) -> web.Response:
        return web.json_response({"wiki_title": "Tiny", "evidence": [],
                                  "retrieval_guidance": {"schema_version": "nope"}})

    app = web.Application()
    app.router.add_post("/query", query)
    app.router.add_post("/bad/query", bad_guidance)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        client = await bridge_client()
        url = str(server.make_url("")).rstrip("/")
        value, text = await ok(client, "llmwiki_context", {**inline(url), "query": "a"})
        assert "retrievalGuidance" not in value
        [note] = value["diagnostics"]
        assert {"name": "guidance", "value": "absent"} in note["observations"]
        assert value["citations"][0]["id"] == "ops:a" and value["wikiTitle"] == "Tiny"
        assert text.startswith("Context from Ops: 1 citation(s), 0 orientation item(s).")
        value, _ = await ok(client, "llmwiki_context", {**inline(url + "/bad"), "query": "a"})
        assert "retrievalGuidance" not in value
        [note] = value["diagnostics"]
        assert {"name": "guidance", "value": "omitted"} in note["observations"]
    finally:
        await server.close()


# ----------------------------------------------------------------------------- llmwiki_agent_run


async def test_agent_run_evidence_only(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    args = {**inline(upstream.url), "query": "How do we roll back a release?", "mode": "evidence-only"}
    value, text = await ok(client, "llmwiki_agent_run", args)
    assert set(value) == {"requestId", "traceId", "answer", "orchestrationMode", "citations", "graph",
                          "steps", "sourceBundles", "diagnostics"}
    assert text == value["answer"] and text.startswith("Evidence-only result:")
    assert value["orchestrationMode"] == "evidence-only"
    assert any(c["id"] == "ops:runbooks/rollback" for c in value["citations"])
    # The `data` envelope form and the caller's ids reach the run too.
    status, body = await call(client, "llmwiki_agent_run", {"data": args},
                              headers={"X-Request-Id": "req-mcp", "X-Trace-Id": "trace-mcp"})
    result = body["result"]["structuredContent"]["llmwiki_agent_result"]
    assert (result["requestId"], result["traceId"]) == ("req-mcp", "trace-mcp")


async def test_agent_run_runtime_failure_is_an_http_502(bridge_client: BridgeFactory, upstream: Upstream,
                                                        dead_url: str) -> None:
    client = await bridge_client(base_url=f"{dead_url}/v1")
    status, body = await call(client, "llmwiki_agent_run", {**inline(upstream.url), "query": "rollback"},
                              headers={"X-Trace-Id": "trace-502"})
    assert status == 502, body
    assert "jsonrpc" not in body
    assert body["error"]["code"] in ("chat_completions_failed", "runtime_adapter_failed")
    assert body["traceId"] == "trace-502" and body["requestId"]
    assert body["steps"] and body["diagnostics"]


# ----------------------------------------------------------------------------- versioned MCP


def modern(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return {**headers, **extra}


META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}


async def test_modern_discover_list_and_call(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    status, body = await rpc(client, "server/discover", {"_meta": META}, headers=modern("server/discover"))
    assert status == 200
    result = body["result"]
    assert result["supportedVersions"][0] == MODERN and "2025-11-25" in result["supportedVersions"]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 0, "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "llmwiki-agent-bridge"
    status, body = await rpc(client, "tools/list", {"_meta": META}, headers=modern("tools/list"))
    tools = body["result"]["tools"]
    assert [t["name"] for t in tools] == list(TOOL_NAMES)
    assert tools[1]["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
    assert tools[0]["annotations"]["openWorldHint"] is True
    assert body["result"]["resultType"] == "complete" and body["result"]["cacheScope"] == "private"
    arguments = {**inline(upstream.url), "query": "rollback"}
    status, body = await rpc(client, "tools/call", {"name": "llmwiki_search", "_meta": META,
                                                    "arguments": arguments},
                             headers=modern("tools/call", "llmwiki_search"))
    assert status == 200
    result = body["result"]
    assert result["isError"] is False and result["resultType"] == "complete" and "ttlMs" not in result
    assert result["structuredContent"]["llmwiki_search"]["results"][0]["id"] == "ops:runbooks/rollback"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "llmwiki-agent-bridge"
    # Without _meta the request is refused, as the era requires (clientInfo alone may be left out).
    status, body = await rpc(client, "tools/list", headers=modern("tools/list"))
    assert status == 400 and body["error"]["code"] == -32602
    bare = {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientInfo"}
    status, body = await rpc(client, "tools/list", {"_meta": bare}, headers=modern("tools/list"))
    assert status == 200 and body["result"]["tools"]


async def test_modern_errors_use_mcp_statuses(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    status, body = await rpc(client, "initialize", {"_meta": META}, headers=modern("initialize"))
    assert status == 404 and body["error"]["code"] == -32601
    status, body = await rpc(client, "tools/call", {"name": "llmwiki_context", "arguments": {"query": ""}},
                             headers=modern("tools/call", "llmwiki_context"))
    assert status == 400 and body["error"]["code"] == -32602
    status, body = await rpc(client, "tools/list", headers=modern("tools/call"))
    assert status == 400 and body["error"]["code"] == -32020
    status, body = await rpc(client, "tools/call", {"name": "llmwiki_graph"},
                             headers=modern("tools/call", "llmwiki_search"))
    assert status == 400 and body["error"]["code"] == -32020
    future = modern("tools/list", **{"MCP-Protocol-Version": "2099-01-01"})
    status, body = await rpc(client, "tools/list", headers=future)
    assert status == 400 and body["error"]["code"] == -32022
    assert body["error"]["data"]["requested"] == "2099-01-01" and MODERN in body["error"]["data"]["supported"]
    wrong_meta = {**META, "io.modelcontextprotocol/protocolVersion": "2025-06-18"}
    status, body = await rpc(client, "tools/list", {"_meta": wrong_meta}, headers=modern("tools/list"))
    assert status == 400 and body["error"]["code"] == -32020
    status, body = await rpc(client, "tools/list", headers={"MCP-Protocol-Version": MODERN})
    assert status == 400 and "Accept" in body["error"]["message"]
    response = await client.post("/mcp", data=b"{nope", headers=modern("tools/list"))
    assert response.status == 400 and (await response.json())["error"]["code"] == -32700
    # Non-ASCII names travel base64-encoded in Mcp-Name; a match is accepted (and the tool is unknown).
    name = "llmwiki_검색"
    encoded = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    status, body = await rpc(client, "tools/call", {"name": name, "_meta": META},
                             headers=modern("tools/call", encoded))
    assert status == 400 and body["error"]["message"] == f"Unknown MCP tool: {name}."
    # The era's required pieces: `_meta` (-32602), Mcp-Method and Mcp-Name (-32020).
    status, body = await rpc(client, "tools/call", {"name": "llmwiki_list_sources"},
                             headers=modern("tools/call", "llmwiki_list_sources"))
    assert status == 400 and body["error"]["code"] == -32602 and "_meta" in body["error"]["message"]
    status, body = await rpc(client, "tools/call", {"name": "llmwiki_list_sources", "_meta": META},
                             headers=modern("tools/call"))
    assert status == 400 and body["error"] == {"code": -32020, "message": "Mcp-Name header is required"}
    no_method = {k: v for k, v in modern("tools/list").items() if k != "Mcp-Method"}
    status, body = await rpc(client, "tools/list", {"_meta": META}, headers=no_method)
    assert status == 400 and body["error"] == {"code": -32020, "message": "Mcp-Method header is required"}


async def test_handshake_era_with_version_header(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    client = await bridge_client()
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": "2025-11-25"}
    status, body = await rpc(client, "ping", headers=headers)
    assert (status, body["result"]) == (200, {})
    status, body = await rpc(client, "tools/list", headers=headers)
    assert "resultType" not in body["result"] and body["result"]["tools"][2]["annotations"]["readOnlyHint"]
    status, body = await call(client, "llmwiki_graph", {**inline(upstream.url), "limit": 3}, headers=headers)
    assert status == 200 and body["result"]["structuredContent"]["llmwiki_graph"]["limit"] == 3
    status, body = await rpc(client, "server/discover", headers=headers)
    assert (status, body["error"]["code"]) == (200, -32601)  # discovery belongs to the modern era
    response = await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 headers=headers)
    assert response.status == 202 and await response.read() == b""


async def test_registered_sources_are_used_without_inline_ones(bridge_client: BridgeFactory,
                                                               upstream: Upstream) -> None:
    client = await bridge_client(sources=None)
    registered = [source("ops", upstream.url), source("spare", upstream.url, status="offline")]
    assert (await client.put("/settings/sources.json", json=registered)).status == 200
    value, _ = await ok(client, "llmwiki_context", {"query": "rollback"})  # one ready: no sourceId needed
    assert value["source"]["id"] == "ops"
    value, _ = await ok(client, "llmwiki_context", {"query": "rollback", "source_id": "ops"})
    assert value["citations"]
    await invalid(client, "llmwiki_context", {"query": "rollback", "sourceId": "spare"},
                  "No ready selected Knowledge Source found for sourceId: spare.")


# ----------------------------------------------------------------------------- other source protocols


async def test_source_tools_over_an_mcp_source(bridge_client: BridgeFactory, upstream: Upstream) -> None:
    """The same tools through our serve's MCP endpoint: same prefixed ids, same shapes."""
    client = await bridge_client()
    via_mcp = {"knowledgeSources": [{**source("mcp-ops", upstream.url + "/mcp"), "protocol": "mcp"}]}
    value, text = await ok(client, "llmwiki_context", {**via_mcp, "query": "release checklist", "limit": 2})
    assert value["wikiTitle"] == "Sample Operations Wiki" and value["retrievalGuidance"]
    assert all(c["id"].startswith("mcp-ops:") for c in value["citations"])
    assert text.startswith("Context from Mcp Ops: ")
    value, _ = await ok(client, "llmwiki_search", {**via_mcp, "query": "rollback"})
    top = value["results"][0]["id"]
    assert top == "mcp-ops:runbooks/rollback"
    value, text = await ok(client, "llmwiki_read", {**via_mcp, "pageId": top})
    assert value["page"]["id"] == "runbooks/rollback" and text == "Page read from Mcp Ops: Rollback."
    value, _ = await ok(client, "llmwiki_graph", {**via_mcp, "limit": 4})
    assert len(value["graph"]["nodes"]) == 4
    value, _ = await ok(client, "llmwiki_graph_neighbors", {**via_mcp, "nodeId": "mcp-ops:page:hot"})
    assert value["neighborhoods"][0]["nodeIds"] == ["mcp-ops:page:hot"] and value["graph"]["nodes"]
    value, text = await ok(client, "llmwiki_source_bundle", via_mcp)
    assert value["steps"][0]["detail"] == "Read safe MCP source bundle metadata."
    assert value["sourceBundle"]["sourceId"] == SERVE_ID
    calls = [r["body"]["params"]["name"] for r in upstream.calls("/mcp")]
    assert calls == ["llmwiki_context", "llmwiki_search", "llmwiki_read", "llmwiki_graph",
                     "llmwiki_graph_neighbors", "llmwiki_source_bundle"]


async def test_context_over_an_a2a_source(bridge_client: BridgeFactory, sample_root: Path,
                                          tmp_path: Path) -> None:
    server = TestServer(create_serve_app(ServeSettings(root=sample_root, cache_dir=tmp_path / "a2a-cache",
                                                       enable_a2a=True)), host="127.0.0.1")
    await server.start_server()
    try:
        client = await bridge_client()
        url = str(server.make_url("")).rstrip("/")
        agent = {"knowledgeSources": [{**source("agent", url), "protocol": "a2a"}]}
        value, text = await ok(client, "llmwiki_context", {**agent, "query": "release checklist"})
        assert value["source"]["protocol"] == "a2a"
        assert value["citations"] and all(c["id"].startswith("agent:") for c in value["citations"])
        assert text.startswith("Context from Agent: ")
    finally:
        await server.close()


async def test_read_resolves_the_section_handle_a_citation_carries(bridge_client: BridgeFactory,
                                                                    upstream: Upstream) -> None:
    client = await bridge_client()
    value, _ = await ok(client, "llmwiki_context", {**inline(upstream.url), "query": "rollback"})
    cited = value["citations"][0]
    origin = cited["origin"]
    assert origin["path"] == cited["path"] and 1 <= origin["lineStart"] <= origin["lineEnd"]
    handle = origin["handle"]
    assert handle.startswith("llmwiki://") and "#" in handle
    value, text = await ok(client, "llmwiki_read", {**inline(upstream.url), "pageId": handle})
    section = value["page"]
    assert section["handle"] == handle and section["heading_path"] == origin["headingPath"]
    assert (section["origin"]["line_start"], section["origin"]["line_end"]) == (
        origin["lineStart"], origin["lineEnd"])
    assert text == f"Page read from Ops: {section['title']}."
    value, text = await ok(client, "llmwiki_read", {**inline(upstream.url),
                                                    "pageId": handle + "-no-such-anchor"})
    assert value["page"]["found"] is False and "not found" in text
