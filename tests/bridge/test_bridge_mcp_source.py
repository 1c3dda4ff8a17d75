"""`mcp` Knowledge Sources: the bridge against our serve's `/mcp`, the client methods, and failures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.config.policy import SourcePolicy
from bridge.config.registry import SourceDescriptor, normalize_inline
from bridge.sources.base import SourceCallError
from bridge.sources.client import HttpSourceClient, client_for
from bridge.sources.mcp_source import McpSourceClient, mcp_url, tool_value
from bridge.sources.protocols import source_clients
from bridge.sources.transport import SourceTransport, source_http_client
from serve.protocols.http import create_app as create_serve_app
from serve.settings import ServeSettings
from tests.support.bridge_sources import BridgeFactory, Client, expected_citations, observations, source
from tests.support.bridge_sources import expected_detail as shared_detail

QUESTION = "How do we ship a hotfix release?"
TITLE = "Sample Operations Wiki"
Seen = list[tuple[str, str, Any]]


def mcp_source(source_id: str, url: str, **extra: Any) -> dict[str, Any]:
    return source(source_id, url, protocol="mcp", **extra)


async def send(client: Client, body: Any, status: int = 200) -> dict[str, Any]:
    response = await client.post("/message:send", json=body)
    payload: dict[str, Any] = await response.json()
    assert response.status == status, payload
    return payload


def result_of(task: dict[str, Any]) -> dict[str, Any]:
    [artifact] = task["artifacts"]
    data: dict[str, Any] = artifact["parts"][0]["data"]
    return data


async def run(client: Client, sources: list[dict[str, Any]], **data: Any) -> dict[str, Any]:
    return result_of(await send(client, {"data": {"query": QUESTION, "orchestrationMode": "evidence-only",
                                                  "knowledgeSources": sources, **data}}))


def expected_detail(pack: dict[str, Any], title: str = TITLE) -> str:
    return shared_detail(pack, title)


def cited(result: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    return [(c["id"], c["title"], c["path"], c["sourceRefs"]) for c in result["citations"]]


async def direct_tool(url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What serve's `/mcp` answers the test itself, for comparing with what the bridge reports."""
    async with aiohttp.ClientSession() as session:
        body = {"jsonrpc": "2.0", "id": "test", "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        async with session.post(url + "/mcp", json=body) as response:
            envelope = await response.json()
    result: dict[str, Any] = envelope["result"]
    return result


@pytest.fixture
async def recorded_serve(sample_root: Path, tmp_path: Path) -> AsyncIterator[tuple[str, Seen]]:
    """Our serve on the sample wiki, recording (method, path, JSON body) of every request."""
    seen: Seen = []

    @web.middleware
    async def record(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        raw = await request.read()  # aiohttp keeps the body for the handler
        seen.append((request.method, request.path, json.loads(raw) if raw else None))
        return await handler(request)

    app = create_serve_app(ServeSettings(root=sample_root, cache_dir=tmp_path / "recorded-cache"))
    app.middlewares.append(record)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/"), seen
    await server.close()


def tool_calls(seen: Seen) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for method, path, body in seen:
        assert (method, path) == ("POST", "/mcp")
        assert body["jsonrpc"] == "2.0" and body["method"] == "tools/call"
        assert isinstance(body["id"], int)
        calls.append((body["params"]["name"], body["params"]["arguments"]))
    return calls


# ----------------------------------------------------------------------------- runs against our serve

async def test_mcp_source_evidence_only_artifact(bridge_client: BridgeFactory,
                                                 recorded_serve: tuple[str, Seen]) -> None:
    url, seen = recorded_serve
    pack = await direct_tool(url, "llmwiki_context", {"query": QUESTION, "limit": 8})
    seen.clear()
    client = await bridge_client()
    result = await run(client, [mcp_source("wiki", url)])

    # one bundle call, one context call, sent together; no search augmentation for MCP sources
    assert sorted(tool_calls(seen), key=lambda call: call[0]) == [
        ("llmwiki_context", {"query": QUESTION, "limit": 8}), ("llmwiki_source_bundle", {})]
    ids = [body["id"] for _, _, body in seen]
    assert len(set(ids)) == 2  # the process-wide counter gives every call its own id
    assert result["diagnostics"] == []
    assert pack["evidence"] and cited(result) == expected_citations(pack, "wiki")
    assert all(c["sourceId"] == "wiki" and c["connectionId"] == "wiki" for c in result["citations"])
    steps = result["steps"]
    assert [(s["id"], s["status"], s["label"]) for s in steps] == [
        ("bridge-plan", "done", "Plan source calls"),
        ("tool-wiki", "done", "Call Wiki"),
        ("source-manifest-wiki", "done", "Read Wiki source bundle"),
        ("bridge-evidence", "done", "Prepare evidence"),
        ("bridge-evidence-only-answer", "done", "Build evidence-only answer"),
        ("bridge-final-answer", "done", "Return A2A artifact")]
    tool, manifest = steps[1], steps[2]
    assert tool["toolName"] == "llmwiki_context__wiki" and tool["parentId"] == "bridge-plan"
    assert tool["connectionId"] == "wiki"
    assert tool["detail"] == expected_detail(pack)
    assert tool["citationIds"] == [c["id"] for c in result["citations"]]
    assert [r["path"] for r in tool["citationRefs"]] == [e["path"] for e in pack["evidence"][:5]]
    assert manifest["detail"] == "Read safe MCP source bundle metadata."
    assert manifest["parentId"] == "tool-wiki" and manifest["connectionId"] == "wiki"
    [bundle] = result["sourceBundles"]
    assert bundle["connectionId"] == "wiki" and bundle["sourceId"] == "sample-operations-wiki"
    assert bundle["bundleId"].startswith("sample-operations-wiki:sha256:")
    assert "llmwiki_source_bundle" in bundle["capabilities"]
    assert result["graph"]["nodes"] and all(n["id"].startswith("wiki:") for n in result["graph"]["nodes"])
    assert result["answer"].startswith(f"Evidence-only result: the bridge gathered {len(pack['evidence'])} "
                                       "citation(s) from 1 Knowledge Source(s)")


async def test_mcp_url_forms(bridge_client: BridgeFactory, recorded_serve: tuple[str, Seen]) -> None:
    url, seen = recorded_serve
    assert mcp_url("http://h:1/wiki/") == "http://h:1/wiki/mcp"
    assert mcp_url("http://h:1/wiki/mcp/") == "http://h:1/wiki/mcp"
    assert mcp_url("http://h:1/mcp?tenant=a") == "http://h:1/mcp?tenant=a"
    client = await bridge_client()
    results = [await run(client, [mcp_source("wiki", form)]) for form in (url, url + "/", url + "/mcp",
                                                                          url + "/mcp/")]
    assert {(m, p) for m, p, _ in seen} == {("POST", "/mcp")} and len(seen) == 8
    assert all(cited(r) == cited(results[0]) and r["citations"] for r in results)


async def test_bundle_read_follows_descriptor_capabilities(bridge_client: BridgeFactory,
                                                           recorded_serve: tuple[str, Seen]) -> None:
    url, seen = recorded_serve
    client = await bridge_client()
    without = await run(client, [mcp_source("wiki", url, capabilities=["llmwiki_context"])])
    assert [name for name, _ in tool_calls(seen)] == ["llmwiki_context"]
    assert [s["id"] for s in without["steps"]][:3] == ["bridge-plan", "tool-wiki", "bridge-evidence"]
    assert without["sourceBundles"] == [] and without["citations"]
    seen.clear()
    with_tool = await run(client, [mcp_source("wiki", url, capabilities=["llmwiki_source_bundle"])])
    assert sorted(name for name, _ in tool_calls(seen)) == ["llmwiki_context", "llmwiki_source_bundle"]
    assert [b["connectionId"] for b in with_tool["sourceBundles"]] == ["wiki"]


async def test_retrieval_discovery_forces_the_bundle_and_forwards_fields(
        bridge_client: BridgeFactory, recorded_serve: tuple[str, Seen]) -> None:
    url, seen = recorded_serve
    client = await bridge_client()
    retrieval = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
                 "search": {"limit": 5, "snippetChars": 120, "queryVariants": ["hotfix runbook"],
                            "excludePageIds": ["wiki:index", "other:x"]}}
    # The descriptor says there is no bundle tool; discovery reads it anyway (contract 3.10).
    inline = [mcp_source("wiki", url, capabilities=["llmwiki_context"]), source("other", url)]
    result = await run(client, inline, retrieval=retrieval)
    calls = [call for call in tool_calls([s for s in seen if s[1] == "/mcp"])]
    assert calls == [("llmwiki_source_bundle", {}),
                     ("llmwiki_context", {"query": QUESTION, "limit": 5, "mode": "lexical",
                                          "snippet_chars": 120, "exclude_page_ids": ["index"],
                                          "query_variants": ["hotfix runbook"]})]
    assert result["diagnostics"] == []  # serve advertises the lexical and guided capabilities
    assert [s["id"] for s in result["steps"]][1:3] == ["tool-wiki", "source-manifest-wiki"]
    mcp_citations = [c for c in result["citations"] if c["sourceId"] == "wiki"]
    assert 0 < len(mcp_citations) <= 5 and all(c["pageId"] != "index" for c in mcp_citations)
    assert all(len(c["snippet"]) <= 130 for c in mcp_citations)

    # vector is not advertised: with fallback none nothing is called after discovery
    seen.clear()
    refused = await send(client, {"query": QUESTION, "mode": "evidence-only",
                                  "knowledgeSources": [mcp_source("wiki", url)],
                                  "retrieval": {"schemaVersion": "llmwiki.retrieval.v1",
                                                "searchMode": "vector", "fallback": "none"}}, status=400)
    assert refused["error"]["message"].startswith(
        "Retrieval searchMode vector is not supported by selected source(s): wiki (mcp).")
    assert [name for name, _ in tool_calls(seen)] == ["llmwiki_source_bundle"]


# ----------------------------------------------------------------------------- the client methods

@pytest.fixture
async def transport() -> AsyncIterator[SourceTransport]:
    policy = SourcePolicy()
    async with source_http_client(lambda: policy) as http:
        yield SourceTransport(http, policy, 10.0, clients=source_clients())


def descriptor(url: str, protocol: str = "mcp") -> SourceDescriptor:
    [found] = normalize_inline([source("wiki", url, protocol=protocol)])
    return found


async def test_client_methods_match_the_http_client(serve_url: str, transport: SourceTransport) -> None:
    """Every SourceClient method over MCP returns what the same operation over HTTP returns."""
    mcp = client_for(transport, descriptor(serve_url))
    http = client_for(transport, descriptor(serve_url, "llmwiki-http"))
    assert isinstance(mcp, McpSourceClient) and isinstance(http, HttpSourceClient)

    bundle = await mcp.bundle()
    assert bundle.attempted and bundle.endpoint == "llmwiki_source_bundle" and bundle.error is None
    assert bundle.raw is not None and bundle.raw["source_id"] == "sample-operations-wiki"
    http_bundle = await http.bundle()
    assert http_bundle.raw is not None and bundle.raw["bundle_id"] == http_bundle.raw["bundle_id"]

    body = {"query": QUESTION, "limit": 4}
    context = await mcp.context(body)
    assert context["wiki_title"] == TITLE and len(context["evidence"]) == 4
    assert context == await http.context(body)

    search = await mcp.search({"query": "hotfix", "limit": 3})
    assert [r["page_id"] for r in search["results"]][:1] == ["runbooks/hotfix-release"]
    assert search == await http.search({"query": "hotfix", "limit": 3})

    page = await mcp.read("runbooks/hotfix-release")
    assert page["id"] == "runbooks/hotfix-release" and page["title"] == "Hotfix Release"
    assert page == await http.read("runbooks/hotfix-release")

    graph = await mcp.graph(3)
    assert len(graph["nodes"]) == 3
    assert graph == await http.graph(3)

    one = await mcp.neighbors(["runbooks/hotfix-release"], 1, "out", [], 20)
    assert one["seeds"] == ["page:runbooks/hotfix-release"] and one["direction"] == "out"
    assert one == await http.neighbors(["runbooks/hotfix-release"], 1, "out", [], 20)
    two = await mcp.neighbors(["runbooks/hotfix-release", "release-checklist"], 1, "both", ["links_to"], 30)
    assert two["seeds"] == ["page:runbooks/hotfix-release", "page:release-checklist"]
    assert two["relations"] == ["links_to"]
    assert two == await http.neighbors(["runbooks/hotfix-release", "release-checklist"], 1, "both",
                                       ["links_to"], 30)

    probe = await mcp.probe()
    assert probe.endpoint == "llmwiki_source_bundle" and probe.raw is not None
    assert probe.raw["source_id"] == "sample-operations-wiki"


async def test_client_wire_arguments(recorded_serve: tuple[str, Seen], transport: SourceTransport) -> None:
    url, seen = recorded_serve
    first, second = (client_for(transport, descriptor(url)) for _ in range(2))
    await first.read("hot", include_drafts=True)
    await second.graph(7)
    await first.neighbors(["hot"], 2, "in", ["tagged"], 9)
    await second.neighbors(["hot", "index"], 1, "both", [], 5, include_drafts=True)
    assert tool_calls(seen) == [
        ("llmwiki_read", {"page_id": "hot", "include_drafts": True}),
        ("llmwiki_graph", {"limit": 7, "include_drafts": False}),
        ("llmwiki_graph_neighbors", {"seed": "hot", "seeds": ["hot"], "depth": 2, "direction": "in",
                                     "relations": ["tagged"], "limit": 9, "include_drafts": False}),
        ("llmwiki_graph_neighbors", {"seeds": ["hot", "index"], "depth": 1, "direction": "both",
                                     "relations": [], "limit": 5, "include_drafts": True})]
    ids = [body["id"] for _, _, body in seen]
    assert ids == sorted(ids) and len(set(ids)) == 4  # one process-wide counter across clients


def test_tool_value_extraction_order() -> None:
    payload = {"wiki_title": "W"}
    text = json.dumps(payload)
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"structuredContent": {"llmwiki_context": payload, "other": 1}}, payload),
        ({"structuredContent": payload, "data": {"x": 1}}, payload),
        ({"structured_content": payload, "data": {"x": 1}}, payload),
        ({"data": payload, "content": [{"type": "text", "text": "{}"}]}, payload),
        ({"content": [{"type": "text", "text": "not json"}, {"type": "data", "data": payload}]}, payload),
        ({"content": [{"type": "text", "text": "[1]"}, {"type": "text", "text": text}]}, payload),
        ({"content": [{"type": "text", "text": "plain"}], "wiki_title": "raw"},
         {"content": [{"type": "text", "text": "plain"}], "wiki_title": "raw"}),
        (payload, payload),  # serve's bare /mcp: the payload is the result
    ]
    for result, expected in cases:
        assert tool_value(result, "llmwiki_context") == expected, result


# ----------------------------------------------------------------------------- failures

async def fake_mcp(aiohttp_server: Any, answer: Callable[[str], Awaitable[web.StreamResponse]]) -> str:
    """An MCP endpoint whose answer depends on the tool called."""

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return await answer(body["params"]["name"])

    app = web.Application()
    app.router.add_post("/mcp", handle)
    server: TestServer = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


def rpc(result: Any = None, error: Any = None) -> web.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return web.json_response(body)


async def test_failures_become_redacted_steps(bridge_client: BridgeFactory, aiohttp_server: Any,
                                              dead_url: str) -> None:
    async def http_500(tool: str) -> web.StreamResponse:
        return web.Response(status=500, text="trace at /srv/secret")

    async def not_json(tool: str) -> web.StreamResponse:
        return web.Response(text="<html>secret</html>")

    async def rpc_error(tool: str) -> web.StreamResponse:
        return rpc(error={"code": -32602, "message": "secret detail"})

    async def is_error(tool: str) -> web.StreamResponse:
        return rpc({"content": [{"type": "text", "text": "secret failure"}], "isError": True})

    async def no_result(tool: str) -> web.StreamResponse:
        return web.json_response({"jsonrpc": "2.0", "id": 1, "result": "secret"})

    urls = {"dead": dead_url, "http500": await fake_mcp(aiohttp_server, http_500),
            "notjson": await fake_mcp(aiohttp_server, not_json),
            "rpcerror": await fake_mcp(aiohttp_server, rpc_error),
            "iserror": await fake_mcp(aiohttp_server, is_error),
            "noresult": await fake_mcp(aiohttp_server, no_result)}
    client = await bridge_client()
    result = await run(client, [mcp_source(name, url) for name, url in urls.items()])

    assert [s["id"] for s in result["steps"]] == ["bridge-plan"] + [
        step for name in urls for step in (f"tool-{name}", f"source-manifest-{name}")] + [
        "bridge-evidence", "bridge-evidence-only-answer", "bridge-final-answer"]
    steps = {s["id"]: s for s in result["steps"]}
    for name in urls:
        label = name.title()
        tool, manifest = steps[f"tool-{name}"], steps[f"source-manifest-{name}"]
        assert (tool["status"], tool["error"], tool["detail"]) == (
            "error", "Source query failed.", f"{label} could not be queried by the bridge."), name
        assert (manifest["status"], manifest["error"], manifest["detail"]) == (
            "error", "Source bundle unavailable.",
            f"{label} MCP source bundle metadata could not be read; continuing without it."), name
    # only the query diagnostics remain, one per source, in selected order
    assert [d["subject"] for d in result["diagnostics"]] == list(urls)
    assert all(d["phase"] == "query" and d["protocol"] == "mcp" and d["severity"] == "error"
               for d in result["diagnostics"])
    by_subject = {d["subject"]: d for d in result["diagnostics"]}
    assert by_subject["dead"] == {
        "schemaVersion": "llmwiki.agent-bridge.diagnostic.v1", "severity": "error", "scope": "source",
        "phase": "query", "protocol": "mcp", "subject": "dead", "retryable": True, "redacted": True,
        "observations": [{"name": "sourcePolicy", "value": "private-http"},
                         {"name": "sourceSelected", "value": "true"},
                         {"name": "sourceStatus", "value": "ready"},
                         {"name": "timeoutMs", "value": "120000"},
                         {"name": "redaction", "value": "urls, headers, bodies, queries"}],
        "remediation": "Check that the Knowledge Source is running and reachable, then retry.",
        "message": "Dead could not be queried by the bridge."}
    assert observations(by_subject["http500"])["httpStatus"] == "500"
    assert by_subject["http500"]["retryable"] is True
    assert observations(by_subject["notjson"])["invalidJson"] == "true"
    assert by_subject["notjson"]["retryable"] is False
    assert observations(by_subject["rpcerror"])["jsonRpcError"] == "true"
    assert by_subject["rpcerror"]["retryable"] is False
    for name in ("iserror", "noresult"):
        assert by_subject[name]["retryable"] is False
        assert not {"httpStatus", "invalidJson", "jsonRpcError"} & set(observations(by_subject[name]))
    assert result["citations"] == [] and result["sourceBundles"] == []
    text = json.dumps(result)
    assert "secret" not in text and dead_url not in text and QUESTION not in text


async def test_bundle_failure_alone_is_a_warning(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    pack = {"wiki_title": "Fake Wiki", "evidence": [
        {"page_id": "p1", "title": "One", "path": "one.md", "snippet": "# One\nfirst", "source_refs": ["R1"],
         "handle": "llmwiki://fake-wiki/pages/p1?token=x#top"},
        {"page_id": "p2", "title": "Two", "path": "two.md", "snippet": "second", "score": 0.5,
         "uri": "https://fake.example/p2"}]}

    async def answer(tool: str) -> web.StreamResponse:
        if tool == "llmwiki_source_bundle":
            return rpc(error={"code": -32602, "message": "disabled"})
        return rpc({"content": [{"type": "text", "text": json.dumps(pack)}], "structuredContent": pack,
                    "isError": False})

    client = await bridge_client()
    result = await run(client, [mcp_source("fake", await fake_mcp(aiohttp_server, answer))])
    [diagnostic] = result["diagnostics"]
    assert (diagnostic["severity"], diagnostic["phase"], diagnostic["protocol"]) == (
        "warning", "source-bundle", "mcp")
    assert observations(diagnostic) == {"jsonRpcError": "true", "sourcePolicy": "private-http",
                                        "timeoutMs": "120000", "redaction": "urls, headers, bodies, queries"}
    steps = {s["id"]: s for s in result["steps"]}
    assert steps["source-manifest-fake"]["status"] == "error"
    assert steps["source-manifest-fake"]["diagnostic"] == diagnostic
    assert steps["tool-fake"]["status"] == "done"
    assert steps["tool-fake"]["detail"] == (
        "Read 2 citation(s) from Fake Wiki. Evidence: one.md (One); two.md (Two).")
    # the source's own llmwiki:// handle is carried (query and fragment dropped); other URIs are not
    assert result["citations"] == [
        {"id": "fake:p1", "sourceId": "fake", "pageId": "p1", "title": "One", "path": "one.md",
         "snippet": "One first", "connectionId": "fake", "sourceRefs": ["R1"],
         "handle": "llmwiki://fake-wiki/pages/p1"},
        {"id": "fake:p2", "sourceId": "fake", "pageId": "p2", "title": "Two", "path": "two.md",
         "score": 0.5, "snippet": "second", "connectionId": "fake", "sourceRefs": []}]


async def test_hung_mcp_source_times_out(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    release = asyncio.Event()

    async def hang(tool: str) -> web.StreamResponse:
        await release.wait()
        return rpc({})

    url = await fake_mcp(aiohttp_server, hang)
    client = await bridge_client(request_timeout_ms=200)
    try:
        result = await run(client, [mcp_source("slow", url)])
    finally:
        release.set()
    [diagnostic] = result["diagnostics"]
    assert diagnostic["phase"] == "query" and diagnostic["retryable"] is True
    assert observations(diagnostic)["timeout"] == "true" and observations(diagnostic)["timeoutMs"] == "200"
    steps = {s["id"]: s for s in result["steps"]}
    assert steps["tool-slow"]["status"] == "error" and steps["source-manifest-slow"]["status"] == "error"


async def test_policy_blocks_mcp_sources_before_connecting(bridge_client: BridgeFactory, serve_url: str,
                                                           network_guard: Any) -> None:
    client = await bridge_client(source_policy="public-https")
    result = await run(client, [mcp_source("lan", "http://10.2.3.4:8765"), mcp_source("local", serve_url)])
    assert network_guard.violations == []
    tools = [s for s in result["steps"] if s["id"].startswith("tool-")]
    assert [t["status"] for t in tools] == ["error", "done"]
    assert observations(tools[0]["diagnostic"])["policy"] == "source-url"
    assert tools[0]["diagnostic"]["retryable"] is False
    assert not any(s["id"] == "source-manifest-lan" for s in result["steps"])
    assert {c["sourceId"] for c in result["citations"]} == {"local"}


# ----------------------------------------------------------------------------- live probe

async def test_probe_reports_mcp_sources(bridge_client: BridgeFactory, serve_url: str, dead_url: str) -> None:
    client = await bridge_client()
    response = await client.put("/settings/sources.json", json=[mcp_source("wiki", serve_url),
                                                                mcp_source("down", dead_url)])
    assert response.status == 200, await response.text()
    view = await (await client.get("/sources?probe=1")).json()
    assert view["healthBasis"] == "live_probe"
    wiki, down = view["sources"]
    health = wiki["health"]
    assert (health["ok"], health["basis"], health["endpoint"]) == (
        True, "live_probe", "llmwiki_source_bundle")
    assert wiki["bundleId"].startswith("sample-operations-wiki:sha256:") and wiki["pageCount"] == 14
    assert down["health"]["ok"] is False and down["health"]["reason"] == "probe_failed"
    assert down["health"]["retryable"] is True and down["health"]["redacted"] is True
    assert view["readyCount"] == 1


# ----------------------------------------------------------------------------- Streamable HTTP forms

async def test_stream_endpoint_is_spoken_sessionless_first(recorded_serve: tuple[str, Seen],
                                                           transport: SourceTransport) -> None:
    """`/mcp/stream` gets standard MCP at 2026-07-28 (headers and `_meta`), one request a call."""
    url, seen = recorded_serve
    for form in (url + "/mcp/stream", url + "/mcp/stream/"):
        client = client_for(transport, descriptor(form))
        assert mcp_url(form) == url + "/mcp/stream"
        page = await client.read("runbooks/hotfix-release")
        assert page["id"] == "runbooks/hotfix-release"
    assert [(m, p) for m, p, _ in seen] == [("POST", "/mcp/stream")] * 2
    body = seen[0][2]
    assert body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


def handshake_server(seen: list[tuple[str, dict[str, str], Any]]) -> web.Application:
    """A handshake-era server that mints a session, answers in event streams and refuses the
    sessionless form, as SDK servers of the 2025 era do."""
    session = "session-7"

    async def endpoint(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append((body.get("method"), dict(request.headers), body))
        if "text/event-stream" not in request.headers.get("Accept", ""):
            return web.json_response({"jsonrpc": "2.0", "id": body.get("id"),
                                      "error": {"code": -32600, "message": "Not Acceptable"}}, status=406)
        if body["method"] == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "old", "version": "1"}}
            return _sse({"jsonrpc": "2.0", "id": body["id"], "result": result}, {"Mcp-Session-Id": session})
        if request.headers.get("Mcp-Session-Id") != session:
            return web.json_response({"jsonrpc": "2.0", "id": body.get("id"),
                                      "error": {"code": -32000, "message": "Bad Request: No valid session"}},
                                     status=400)
        if body["method"] == "notifications/initialized":
            return web.Response(status=202)
        payload = {"id": body["params"]["arguments"]["page_id"], "title": "Old Server Page"}
        return _sse({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}},
                    {}, then={"jsonrpc": "2.0", "id": body["id"],
                              "result": {"content": [{"type": "text", "text": json.dumps(payload)}],
                                         "structuredContent": payload, "isError": False}})

    app = web.Application()
    app.router.add_post("/mcp/stream", endpoint)
    return app


def _sse(message: dict[str, Any], headers: dict[str, str],
         then: dict[str, Any] | None = None) -> web.Response:
    events = "".join(f"event: message\r\ndata: {json.dumps(m)}\r\n\r\n" for m in (message, then) if m)
    return web.Response(text=events, content_type="text/event-stream", headers=headers)


async def test_handshake_era_server_with_sessions_and_event_streams(aiohttp_server: Any,
                                                                    transport: SourceTransport) -> None:
    seen: list[tuple[str, dict[str, str], Any]] = []
    server = await aiohttp_server(handshake_server(seen))
    url = str(server.make_url("/mcp/stream"))
    client = client_for(transport, descriptor(url))
    assert (await client.read("a"))["title"] == "Old Server Page"
    assert (await client.read("b"))["id"] == "b"  # the negotiated session is kept, no new handshake
    methods = [method for method, _, _ in seen]
    assert methods == ["tools/call", "initialize", "notifications/initialized", "tools/call", "tools/call"]
    calls = [headers for method, headers, _ in seen[3:]]
    assert all(h["Mcp-Session-Id"] == "session-7" for h in calls)
    assert all(h["MCP-Protocol-Version"] == "2025-06-18" for h in calls)
    assert "_meta" not in seen[3][2]["params"]


async def test_a_failing_tool_is_not_renegotiated(aiohttp_server: Any, transport: SourceTransport) -> None:
    """A tool's own error (isError, or a JSON-RPC error that is not about the form) is that call's
    failure: no second form is tried."""
    seen: list[str] = []

    async def endpoint(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body["method"])
        return web.json_response({"jsonrpc": "2.0", "id": body["id"],
                                  "error": {"code": -32602, "message": "bad page id"}})

    app = web.Application()
    app.router.add_post("/mcp", endpoint)
    server = await aiohttp_server(app)
    client = client_for(transport, descriptor(str(server.make_url(""))))
    with pytest.raises(SourceCallError) as failed:
        await client.read("nope")
    assert failed.value.json_rpc_error and seen == ["tools/call"]


def test_the_protocol_table_covers_every_protocol_the_registry_accepts() -> None:
    from bridge.config.registry import SUPPORTED_PROTOCOLS
    from bridge.sources.a2a_source import A2aSourceClient

    table = source_clients()
    assert set(table) == set(SUPPORTED_PROTOCOLS)
    assert table["mcp"] is McpSourceClient and table["a2a"] is A2aSourceClient
    assert table["llmwiki-http"] is HttpSourceClient
