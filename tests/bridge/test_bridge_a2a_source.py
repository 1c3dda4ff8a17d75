"""`a2a` Knowledge Sources: the card, the message URL, the context artifact, policy and failures."""

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
from bridge.config.registry import normalize_inline
from bridge.sources.a2a_source import A2aSourceClient, agent_card_url, message_url
from bridge.sources.base import SourceCallError
from bridge.sources.client import client_for
from bridge.sources.protocols import source_clients
from bridge.sources.transport import SourceTransport, source_http_client
from serve.protocols.http import create_app as create_serve_app
from serve.settings import ServeSettings
from tests.support.bridge_sources import BridgeFactory, Client, expected_citations, observations, source
from tests.support.bridge_sources import expected_detail as shared_detail

QUESTION = "How do we ship a hotfix release?"
TITLE = "Sample Operations Wiki"
Seen = list[tuple[str, str, Any]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def a2a_source(source_id: str, url: str, **extra: Any) -> dict[str, Any]:
    return source(source_id, url, protocol="a2a", **extra)


async def send(client: Client, body: Any, status: int = 200) -> dict[str, Any]:
    response = await client.post("/message:send", json=body)
    payload: dict[str, Any] = await response.json()
    assert response.status == status, payload
    return payload


async def run(client: Client, sources: list[dict[str, Any]], **data: Any) -> dict[str, Any]:
    task = await send(client, {"data": {"query": QUESTION, "orchestrationMode": "evidence-only",
                                        "knowledgeSources": sources, **data}})
    result: dict[str, Any] = task["artifacts"][0]["parts"][0]["data"]
    return result


def expected_detail(pack: dict[str, Any], title: str = TITLE) -> str:
    return shared_detail(pack, title)


def cited(result: dict[str, Any], source_id: str) -> list[tuple[str, str, str, list[str]]]:
    return [(c["id"], c["title"], c["path"], c["sourceRefs"]) for c in result["citations"]
            if c["sourceId"] == source_id]


def recorder(seen: Seen) -> Any:
    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        raw = await request.read()
        seen.append((request.method, request.path, json.loads(raw) if raw else None))
        return await handler(request)
    return record


@pytest.fixture
async def a2a_serve(sample_root: Path, tmp_path: Path) -> AsyncIterator[tuple[str, Seen]]:
    """Our serve with A2A on (it also has HTTP and /mcp), recording every request."""
    seen: Seen = []
    app = create_serve_app(ServeSettings(root=sample_root, cache_dir=tmp_path / "a2a-cache",
                                         enable_a2a=True))
    app.middlewares.append(recorder(seen))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/"), seen
    await server.close()


async def serve_pack(url: str) -> dict[str, Any]:
    """The context pack serve's A2A answers the question with, asked by the test itself."""
    async with aiohttp.ClientSession() as session, \
            session.post(url + "/message:send", json={"data": {"query": QUESTION}}) as response:
        body = await response.json()
    [artifact] = body["artifacts"]
    assert artifact["name"] == "llmwiki_context"
    pack: dict[str, Any] = artifact["parts"][0]["data"]
    return pack


async def fake_server(aiohttp_server: Any, routes: list[web.RouteDef], seen: Seen | None = None) -> str:
    app = web.Application(middlewares=[recorder(seen)] if seen is not None else [])
    app.router.add_routes(routes)
    server: TestServer = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


def base_of(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def page_pack(name: str) -> dict[str, Any]:
    return {"wiki_title": f"{name} wiki", "evidence": [
        {"page_id": f"{name}-page", "title": f"{name} page", "path": f"{name}.md", "snippet": "text"}]}


# ----------------------------------------------------------------------------- our serve

async def test_a2a_source_against_serve(bridge_client: BridgeFactory, a2a_serve: tuple[str, Seen]) -> None:
    url, seen = a2a_serve
    pack = await serve_pack(url)
    seen.clear()
    client = await bridge_client()
    result = await run(client, [a2a_source("wiki", url)])

    # serve's card `url` is its JSON-RPC endpoint; its HTTP+JSON interface takes the A2A-style body
    assert seen == [("GET", "/.well-known/agent-card.json", None),
                    ("POST", "/message:send", {"data": {"query": QUESTION}})]
    assert pack["evidence"] and cited(result, "wiki") == expected_citations(pack, "wiki")
    assert len(result["citations"]) == len(pack["evidence"])
    assert [(s["id"], s["status"]) for s in result["steps"]] == [
        ("bridge-plan", "done"), ("tool-wiki", "done"), ("bridge-evidence", "done"),
        ("bridge-evidence-only-answer", "done"), ("bridge-final-answer", "done")]
    tool = result["steps"][1]
    assert tool["label"] == "Call Wiki" and tool["toolName"] == "llmwiki_context__wiki"
    assert tool["detail"] == expected_detail(pack)
    assert tool["citationIds"] == [c["id"] for c in result["citations"]]
    assert result["sourceBundles"] == [] and result["diagnostics"] == []
    assert result["graph"]["nodes"] and all(n["id"].startswith("wiki:") for n in result["graph"]["nodes"])


async def test_all_three_protocols_in_one_run(bridge_client: BridgeFactory, a2a_serve: tuple[str, Seen],
                                              dead_url: str) -> None:
    url, seen = a2a_serve
    pack = await serve_pack(url)
    inline = [a2a_source("agent", url), source("web", url), a2a_source("gone", dead_url),
              source("tools", url, protocol="mcp")]
    client = await bridge_client()
    # The three serve the same pages: in relevance order they merge (alsoIn); the reference's
    # array keeps every source's own citations.
    result = await run(client, inline, citationOrder="source")
    assert [s["id"] for s in result["steps"]] == [
        "bridge-plan", "tool-agent", "tool-web", "source-manifest-web", "tool-gone", "tool-tools",
        "source-manifest-tools", "bridge-evidence", "bridge-evidence-only-answer", "bridge-final-answer"]
    statuses = {s["id"]: s["status"] for s in result["steps"]}
    assert statuses["tool-gone"] == "error" and statuses["tool-agent"] == statuses["tool-tools"] == "done"
    # citations keep the selected order, whatever order the calls finished in
    owners = [c["sourceId"] for c in result["citations"]]
    fused = (await run(client, inline))["citations"]
    assert {c["sourceId"] for c in fused} == {"agent"}  # each page once, naming the others
    assert {a["sourceId"] for c in fused for a in c.get("alsoIn", [])} == {"web", "tools"}
    assert owners == sorted(owners, key=["agent", "web", "tools"].index)
    assert set(owners) == {"agent", "web", "tools"}
    assert cited(result, "agent") == expected_citations(pack, "agent")
    # A2A used serve's default limit; MCP and HTTP asked for 8 (HTTP adds search results)
    assert [c[0].split(":", 1)[1] for c in cited(result, "tools")] == [
        e["page_id"] for e in pack["evidence"]][:8]
    assert [b["connectionId"] for b in result["sourceBundles"]] == ["web", "tools"]
    [diagnostic] = result["diagnostics"]
    assert (diagnostic["subject"], diagnostic["protocol"], diagnostic["phase"]) == ("gone", "a2a", "query")
    assert "from 3 Knowledge Source(s)" in result["answer"]
    assert {(m, p) for m, p, _ in seen} >= {("GET", "/.well-known/agent-card.json"),
                                            ("POST", "/message:send"), ("POST", "/mcp"),
                                            ("POST", "/query"), ("GET", "/source-bundle")}


# ----------------------------------------------------------------------------- cards and message URLs

def test_card_and_message_url_resolution() -> None:
    card = "http://h:1/agents/wiki/.well-known/agent-card.json"
    assert agent_card_url("http://h:1/agents/wiki/") == card
    assert agent_card_url(card) == card
    assert message_url(card, {}) == "http://h:1/message:send"
    assert message_url(card, {"url": "/send"}) == "http://h:1/send"
    assert message_url(card, {"url": "send"}) == "http://h:1/agents/wiki/send"
    assert message_url(card, {"url": "message:send"}) == "http://h:1/agents/wiki/message:send"
    assert message_url(card, {"url": "https://other:2/x"}) == "https://other:2/x"
    assert message_url(card, {"url": "ftp://other/x"}) == "ftp://other/x"  # refused later by the policy
    rest = {"url": "http://h:1/a2a/jsonrpc", "supportedInterfaces": [
        {"url": "http://h:1/a2a/jsonrpc", "protocolBinding": "JSONRPC"},
        {"url": "http://h:1/rest/", "protocolBinding": "HTTP+JSON"}]}
    assert message_url(card, rest) == "http://h:1/rest/message:send"


async def test_card_url_forms_and_response_shapes(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    seen: Seen = []

    def card_for(name: str, base: str) -> dict[str, Any]:
        cards: dict[str, dict[str, Any]] = {
            "default": {"name": "default"},
            "rooted": {"url": "/rooted-send"},
            "relative": {"url": "send"},
            "absolute": {"url": f"{base}/absolute-send"},
            "rest": {"url": f"{base}/jsonrpc", "supportedInterfaces": [
                {"url": f"{base}/jsonrpc", "protocolBinding": "JSONRPC"},
                {"url": f"{base}/rest", "protocolBinding": "HTTP+JSON"}]}}
        return cards[name]

    def answer_for(path: str) -> dict[str, Any]:
        name = {"/message:send": "default", "/rooted-send": "rooted", "/relative/send": "relative",
                "/absolute-send": "absolute", "/rest/message:send": "rest"}[path]
        pack = page_pack(name)
        if name == "default":  # the documented A2A-style response
            return {"status": "completed", "artifacts": [
                {"name": "llmwiki_context", "parts": [{"kind": "data", "data": pack}]}]}
        if name == "rooted":  # a JSON-RPC result
            return {"jsonrpc": "2.0", "id": 1, "result": {"status": {"state": "completed"}, "artifacts": [
                {"name": "other", "parts": [{"kind": "data", "data": page_pack("wrong")}]},
                {"name": "llmwiki_context", "parts": [{"kind": "text", "text": "summary"},
                                                      {"kind": "data", "data": pack}]}]}}
        if name == "relative":  # an A2A 1.0 task with 1.0 parts
            return {"task": {"status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": [
                {"name": "llmwiki_context", "parts": [{"data": pack, "mediaType": "application/json"}]}]}}
        if name == "absolute":  # the pack as JSON text
            return {"artifacts": [{"name": "llmwiki_context", "parts": [{"text": json.dumps(pack)}]}]}
        return {"artifacts": [{"name": "llmwiki_context", "data": pack}]}

    async def card(request: web.Request) -> web.Response:
        return web.json_response(card_for(request.match_info["name"], base_of(request)))

    async def message(request: web.Request) -> web.Response:
        return web.json_response(answer_for(request.path))

    base = await fake_server(aiohttp_server, [web.get("/{name}/.well-known/agent-card.json", card),
                                              web.post("/{tail:.*}", message)], seen)
    names = ["default", "rooted", "relative", "absolute", "rest"]
    inline = [a2a_source(name, f"{base}/{name}") for name in names]
    inline.append(a2a_source("cardurl", f"{base}/relative/.well-known/agent-card.json"))
    client = await bridge_client()
    # cardurl and relative are one agent: the reference's array names both pages
    result = await run(client, inline, citationOrder="source")
    assert [c["id"] for c in result["citations"]] == [f"{n}:{n}-page" for n in names] + [
        "cardurl:relative-page"]
    posts = [(path, body) for method, path, body in seen if method == "POST"]
    assert posts == [(p, {"data": {"query": QUESTION}}) for p in (
        "/message:send", "/rooted-send", "/relative/send", "/absolute-send", "/rest/message:send",
        "/relative/send")]
    assert [p for m, p, _ in seen if m == "GET"] == [f"/{n}/.well-known/agent-card.json"
                                                     for n in [*names, "relative"]]
    assert result["diagnostics"] == [] and result["sourceBundles"] == []


async def test_answer_without_context_artifact(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    async def card(request: web.Request) -> web.Response:
        return web.json_response({"name": "Plain agent", "url": "/send"})

    async def reply(request: web.Request) -> web.Response:
        return web.json_response({"status": {"state": "completed", "message": {
            "role": "agent", "parts": [{"kind": "text", "text": "I only chat."}]}},
            "artifacts": [{"name": "summary", "parts": [{"kind": "text", "text": "x"}]}]})

    async def silent(request: web.Request) -> web.Response:
        return web.json_response({"status": "completed"})

    chatty = await fake_server(aiohttp_server, [web.get("/.well-known/agent-card.json", card),
                                                web.post("/send", reply)])
    quiet = await fake_server(aiohttp_server, [web.get("/.well-known/agent-card.json", card),
                                               web.post("/send", silent)])
    client = await bridge_client()
    result = await run(client, [a2a_source("chatty-agent", chatty), a2a_source("quiet", quiet)])
    steps = {s["id"]: s for s in result["steps"]}
    assert steps["tool-chatty_agent"]["status"] == "done"
    assert steps["tool-chatty_agent"]["detail"] == (
        "Read 0 citation(s) from Chatty Agent. Orientation: A2A message.")
    assert steps["tool-quiet"]["detail"] == "Read 0 citation(s) from Quiet."
    assert result["citations"] == [] and result["diagnostics"] == []
    assert "from 2 Knowledge Source(s)" in result["answer"]

    policy = SourcePolicy()
    async with source_http_client(lambda: policy) as http:
        transport = SourceTransport(http, policy, 5.0, clients=source_clients())
        [descriptor] = normalize_inline([a2a_source("chatty-agent", chatty)])
        agent = client_for(transport, descriptor)
        assert isinstance(agent, A2aSourceClient)
        assert await agent.context({"query": QUESTION, "limit": 3}) == {
            "wiki_title": "Chatty Agent",
            "orientation": [{"title": "A2A message", "role": "message", "snippet": "I only chat."}],
            "evidence": [],
            "limitations": ["A2A response did not include a llmwiki_context data artifact. "
                            "Message: I only chat."]}
        [descriptor] = normalize_inline([a2a_source("quiet", quiet)])
        assert (await client_for(transport, descriptor).context({"query": QUESTION}))["limitations"] == [
            "A2A response did not include a llmwiki_context data artifact."]
        # context is the only operation an A2A source has
        with pytest.raises(SourceCallError, match="a2a Knowledge Sources do not support read"):
            await agent.read("hot")


# ----------------------------------------------------------------------------- failures

async def test_failures_become_redacted_steps(bridge_client: BridgeFactory, aiohttp_server: Any,
                                              dead_url: str) -> None:
    answers: dict[str, Callable[[], web.Response]] = {
        "error": lambda: web.json_response({"error": {"code": -32600, "message": "secret"}}),
        "failed": lambda: web.json_response({"status": {"state": "failed"}, "artifacts": []}),
        "rejected": lambda: web.json_response({"task": {"status": {"state": "TASK_STATE_REJECTED"}}}),
        "canceled": lambda: web.json_response({"result": {"status": {"state": "canceled"}}}),
        "http500": lambda: web.Response(status=500, text="secret stack"),
        "notjson": lambda: web.Response(text="secret <html>"),
    }

    async def card(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "badcard":
            return web.Response(status=503)
        if name == "textcard":
            return web.Response(text="not a card")
        return web.json_response({"url": "send"})

    async def message(request: web.Request) -> web.Response:
        return answers[request.match_info["name"]]()

    base = await fake_server(aiohttp_server, [web.get("/{name}/.well-known/agent-card.json", card),
                                              web.post("/{name}/send", message)])
    names = [*answers, "badcard", "textcard"]
    client = await bridge_client()
    result = await run(client, [a2a_source(n, f"{base}/{n}") for n in names] + [a2a_source("dead", dead_url)])
    names.append("dead")
    assert [s["id"] for s in result["steps"]] == ["bridge-plan", *(f"tool-{n}" for n in names),
                                                  "bridge-evidence", "bridge-evidence-only-answer",
                                                  "bridge-final-answer"]
    for step in result["steps"][1:-3]:
        name = step["id"].removeprefix("tool-")
        assert (step["status"], step["error"], step["detail"]) == (
            "error", "Source query failed.", f"{name.title()} could not be queried by the bridge."), name
    assert [d["subject"] for d in result["diagnostics"]] == names
    diagnostics = {d["subject"]: d for d in result["diagnostics"]}
    assert all(d["protocol"] == "a2a" and d["phase"] == "query" for d in diagnostics.values())
    for name in ("error", "failed", "rejected", "canceled", "notjson", "textcard"):
        assert diagnostics[name]["retryable"] is False, name
    for name in ("http500", "badcard", "dead"):
        assert diagnostics[name]["retryable"] is True, name
    assert observations(diagnostics["http500"])["httpStatus"] == "500"
    assert observations(diagnostics["badcard"])["httpStatus"] == "503"
    assert observations(diagnostics["notjson"])["invalidJson"] == "true"
    assert observations(diagnostics["textcard"])["invalidJson"] == "true"
    assert observations(diagnostics["dead"]) == {
        "sourcePolicy": "private-http", "sourceSelected": "true", "sourceStatus": "ready",
        "timeoutMs": "120000", "redaction": "urls, headers, bodies, queries"}
    assert result["citations"] == []
    assert "secret" not in json.dumps(result) and QUESTION not in json.dumps(result)


async def test_hung_a2a_source_times_out(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    release = asyncio.Event()

    async def card(request: web.Request) -> web.Response:
        return web.json_response({"url": "/send"})

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    url = await fake_server(aiohttp_server, [web.get("/.well-known/agent-card.json", card),
                                             web.post("/send", hang)])
    client = await bridge_client(request_timeout_ms=200)
    try:
        result = await run(client, [a2a_source("slow", url)])
    finally:
        release.set()
    [diagnostic] = result["diagnostics"]
    assert (diagnostic["subject"], diagnostic["retryable"]) == ("slow", True)
    assert observations(diagnostic)["timeout"] == "true" and observations(diagnostic)["timeoutMs"] == "200"
    assert result["steps"][1]["status"] == "error"


@pytest.mark.parametrize("policy", ["public-https", "allowlist"])
async def test_card_message_url_is_policy_checked_before_connecting(
        policy: str, bridge_client: BridgeFactory, aiohttp_server: Any, network_guard: Any) -> None:
    """The card is on an allowed (loopback or allowlisted) origin; the URL it names is not."""
    seen: Seen = []
    targets = {"lan": "http://10.20.30.40/message:send", "meta": "http://169.254.169.254/latest",
               "private": "https://192.168.7.7:9443/send", "user": "http://user:pw@127.0.0.1:1/send",
               "ftp": "ftp://127.0.0.1/send"}

    async def card(request: web.Request) -> web.Response:
        return web.json_response({"url": targets[request.match_info["name"]]})

    async def message(request: web.Request) -> web.Response:
        return web.json_response({})

    base = await fake_server(aiohttp_server, [web.get("/{name}/.well-known/agent-card.json", card),
                                              web.post("/{tail:.*}", message)], seen)
    client = await bridge_client(source_policy=policy, allowed_source_origins=(base,))
    result = await run(client, [a2a_source(name, f"{base}/{name}") for name in targets])
    assert network_guard.violations == []
    assert [m for m, _, _ in seen] == ["GET"] * len(targets)  # cards read, no message sent anywhere
    tools = [s for s in result["steps"] if s["id"].startswith("tool-")]
    assert [t["status"] for t in tools] == ["error"] * len(targets)
    for tool in tools:
        assert observations(tool["diagnostic"])["policy"] == "source-url"
        assert observations(tool["diagnostic"])["sourcePolicy"] == policy
        assert tool["diagnostic"]["retryable"] is False
    text = json.dumps(result)
    assert "10.20.30.40" not in text and "192.168" not in text and "pw" not in text


async def test_blocked_message_url_error_text(aiohttp_server: Any) -> None:
    async def card(request: web.Request) -> web.Response:
        return web.json_response({"url": "http://10.0.0.9/send"})

    base = await fake_server(aiohttp_server, [web.get("/.well-known/agent-card.json", card)])
    policy = SourcePolicy("public-https")
    async with source_http_client(lambda: policy) as http:
        transport = SourceTransport(http, policy, 5.0, clients=source_clients())
        [descriptor] = normalize_inline([a2a_source("agent", base)])
        with pytest.raises(SourceCallError) as caught:
            await client_for(transport, descriptor).context({"query": QUESTION})
    assert caught.value.message == "A2A source agent card message URL is not allowed."
    assert caught.value.policy is True


# ----------------------------------------------------------------------------- retrieval discovery

async def test_retrieval_uses_card_capabilities(bridge_client: BridgeFactory, aiohttp_server: Any,
                                                a2a_serve: tuple[str, Seen]) -> None:
    seen: Seen = []
    capable = ["llmwiki_retrieval_v1", "llmwiki_search_mode_lexical", "llmwiki_agent_guided_lexical_v1"]

    async def card(request: web.Request) -> web.Response:
        cards = {"capable": {"url": "send", "metadata": {"llmwiki": {"capabilities": capable}}},
                 "listed": {"url": "send",
                            "capabilities": ["llmwiki_retrieval_v1", "LLMWIKI_SEARCH_MODE_LEXICAL"]}}
        return web.json_response(cards[request.match_info["name"]])

    async def message(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return web.json_response({"artifacts": [{"name": "llmwiki_context", "data": page_pack(name)}]})

    base = await fake_server(aiohttp_server, [web.get("/{name}/.well-known/agent-card.json", card),
                                              web.post("/{name}/send", message)], seen)
    serve_url, serve_seen = a2a_serve
    retrieval = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
                 "search": {"limit": 4, "snippetChars": 90, "fields": ["title", "path"],
                            "queryVariants": ["hotfix runbook"],
                            "excludePageIds": ["capable:p1", "listed:p2", "shared"]}}
    inline = [a2a_source("capable", f"{base}/capable"), a2a_source("listed", f"{base}/listed"),
              a2a_source("serve", serve_url)]
    client = await bridge_client()
    result = await run(client, inline, retrieval=retrieval)

    posts = {path: body for method, path, body in seen if method == "POST"}
    assert posts == {
        "/capable/send": {"data": {"query": QUESTION, "retrieval": {
            "schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical", "fallback": "lexical",
            "search": {"limit": 4, "snippetChars": 90, "fields": ["title", "path"],
                       "excludePageIds": ["p1", "shared"], "queryVariants": ["hotfix runbook"]}}}},
        "/listed/send": {"data": {"query": QUESTION}}}
    # each card was read once: discovery's card is reused by the gather
    assert sorted(p for m, p, _ in seen if m == "GET") == ["/capable/.well-known/agent-card.json",
                                                           "/listed/.well-known/agent-card.json"]
    assert [p for m, p, _ in serve_seen] == ["/.well-known/agent-card.json", "/message:send"]
    assert serve_seen[1][2] == {"data": {"query": QUESTION}}
    notes = [(d["subject"], observations(d)) for d in result["diagnostics"]]
    # the capable card advertises guided lexical retrieval, so a pack without guidance is noted
    assert [(s, o.get("guidance")) for s, o in notes] == [("capable", "absent"), ("listed", None),
                                                          ("serve", None)]
    fallbacks = dict(notes[1:])
    assert fallbacks["listed"]["capabilityStatus"] == "missing_search_mode"  # upper case does not count
    assert fallbacks["serve"]["capabilityStatus"] == "unknown"  # serve's card has no capability list
    assert all(o["capabilityMetadataSource"] == "fresh" and o["appliedMode"] == "legacy"
               for o in fallbacks.values())
    assert [s["id"] for s in result["steps"]][:4] == ["bridge-plan", "tool-capable", "tool-listed",
                                                      "tool-serve"]
    assert {c["sourceId"] for c in result["citations"]} == {"capable", "listed", "serve"}


# ----------------------------------------------------------------------------- live probe

async def test_probe_reads_the_card(bridge_client: BridgeFactory, a2a_serve: tuple[str, Seen],
                                    aiohttp_server: Any, dead_url: str) -> None:
    async def card(request: web.Request) -> web.Response:
        return web.json_response({"name": "Agent", "metadata": {
            "bundle_id": "agent:sha256:abc", "page_count": 3, "projection": {"approved_page_count": 2}}})

    described = await fake_server(aiohttp_server, [web.get("/.well-known/agent-card.json", card)])
    url, _ = a2a_serve
    client = await bridge_client()
    response = await client.put("/settings/sources.json", json=[
        a2a_source("wiki", url), a2a_source("described", described), a2a_source("down", dead_url)])
    assert response.status == 200, await response.text()
    view = await (await client.get("/sources?probe=1")).json()
    wiki, agent, down = view["sources"]
    assert (wiki["health"]["ok"], wiki["health"]["endpoint"]) == (True, "agent-card")
    assert (agent["health"]["ok"], agent["health"]["endpoint"]) == (True, "agent-card")
    assert (agent["bundleId"], agent["pageCount"], agent["approvedPageCount"]) == ("agent:sha256:abc", 3, 2)
    assert down["health"]["ok"] is False and down["health"]["reason"] == "probe_failed"
    assert view["readyCount"] == 2
