"""The llmwiki-http source client: manifest fallback, search augmentation, evidence merge."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bridge.config.policy import SourcePolicy
from bridge.config.registry import normalize_inline
from bridge.config.settings import BridgeSettings
from bridge.sources.base import SourceCallError, SourceClient
from bridge.sources.client import client_for
from bridge.sources.http_source import augmentation_queries
from bridge.sources.protocols import source_clients
from bridge.sources.resolver import PolicyResolveError, PolicyResolver
from bridge.sources.transport import SourceTransport, source_http_client
from bridge.support.fanout import task_group
from bridge.web.app import create_app
from tests.support.bridge_sources import BridgeFactory, FakeDns, source


def test_augmentation_queries_follow_the_contract_example() -> None:
    question = ("What decision was recorded about the LLMWiki protocol layer architecture? Answer "
                "briefly and cite the relevant wiki page.")
    assert augmentation_queries(question) == ["llmwiki protocol layer architecture decision",
                                              "decision llmwiki protocol layer architecture"]
    assert augmentation_queries("What is the answer?") == []
    assert augmentation_queries("릴리스 체크리스트 [[Hot|hot page]]") == ["릴리스 체크리스트 hot"]


def fake_source(calls: list[tuple[str, Any]], *, bundle_status: int = 404,
                search_status: int = 200, manifest: bool = True) -> web.Application:
    async def bundle(request: web.Request) -> web.Response:
        calls.append(("GET", request.path))
        if request.path == "/source-bundle":
            return web.json_response({"unrelated": True}, status=bundle_status)
        return web.json_response({"source_id": "fake", "title": "Fake", "root": "/srv/secret-root",
                                  "page_count": 2})

    async def query(request: web.Request) -> web.Response:
        calls.append(("POST /query", await request.json()))
        return web.json_response({"wiki_title": "Fake", "evidence": [
            {"page_id": "a", "title": "A", "path": "a.md", "snippet": "# A\nalpha"}],
            "graph": {"nodes": [{"id": "a", "label": "A"}, {"id": "b"}],
                      "edges": [{"source": "a", "target": "b"}, {"source": "a", "target": "elsewhere"},
                                {"source": "a"}]}})

    async def search(request: web.Request) -> web.Response:
        body = await request.json()
        calls.append(("POST /search", body))
        if search_status != 200:
            return web.Response(status=search_status)
        return web.json_response({"results": [
            {"page_id": "a", "title": "A again", "path": "a.md"},
            {"page_id": f"extra-{body['query'].split()[0]}", "title": "Extra", "path": "extra.md"}]})

    app = web.Application()
    app.router.add_get("/source-bundle", bundle)
    if manifest:
        app.router.add_get("/manifest", bundle)
    app.router.add_post("/query", query)
    app.router.add_post("/search", search)
    return app


async def test_manifest_fallback_and_search_augmentation(bridge_client: BridgeFactory,
                                                         aiohttp_server: Any) -> None:
    calls: list[tuple[str, Any]] = []
    server: TestServer = await aiohttp_server(fake_source(calls, bundle_status=200))
    client = await bridge_client()
    question = "Which release checklist steps need a second reviewer?"
    response = await client.post("/message:send", json={
        "query": question, "mode": "evidence-only",
        "knowledgeSources": [source("fake", str(server.make_url("")))]})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    assert [c for c in calls if c[0] == "GET"] == [("GET", "/source-bundle"), ("GET", "/manifest")]
    assert ("POST /query", {"query": question, "limit": 8}) in calls
    searches = [body for kind, body in calls if kind == "POST /search"]
    assert searches == [{"query": "release checklist steps need second reviewer", "limit": 4}]
    assert [c["id"] for c in result["citations"]] == ["fake:a", "fake:extra-release"]
    assert result["citations"][0]["snippet"] == "A alpha"
    manifest_step = next(s for s in result["steps"] if s["id"] == "source-manifest-fake")
    assert manifest_step["detail"] == "Read safe manifest metadata."
    assert result["sourceBundles"] == [{"connectionId": "fake", "sourceId": "fake", "title": "Fake",
                                        "projection": {"pageCount": 2}}]
    graph = result["graph"]
    assert [n["id"] for n in graph["nodes"]] == ["fake:a", "fake:b"]
    assert [(e["source"], e["target"], e["relation"]) for e in graph["edges"]] == [
        ("fake:a", "fake:b", "related"), ("fake:a", "elsewhere", "related")]
    assert "secret-root" not in str(result)


async def test_failed_search_and_bundle_do_not_fail_the_source(bridge_client: BridgeFactory,
                                                               aiohttp_server: Any) -> None:
    calls: list[tuple[str, Any]] = []
    app = fake_source(calls, search_status=503, manifest=False)
    server: TestServer = await aiohttp_server(app)
    client = await bridge_client()
    response = await client.post("/message:send", json={
        "query": "release checklist", "mode": "evidence-only",
        "knowledgeSources": [source("fake", str(server.make_url("")))]})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    tool = next(s for s in result["steps"] if s["id"] == "tool-fake")
    assert tool["status"] == "done" and tool["citationIds"] == ["fake:a"]
    bundle_step = next(s for s in result["steps"] if s["id"] == "source-manifest-fake")
    assert bundle_step["status"] == "error" and bundle_step["error"] == "Source bundle unavailable."
    [diagnostic] = result["diagnostics"]
    assert diagnostic["phase"] == "source-bundle" and diagnostic["severity"] == "warning"




async def test_dns_rebinding_is_refused_under_public_https(aiohttp_server: Any, config_path: Any,
                                                           network_guard: Any) -> None:
    calls: list[tuple[str, Any]] = []
    server: TestServer = await aiohttp_server(fake_source(calls))
    dns = FakeDns({"rebind.example.com": "127.0.0.1", "lan.example.com": "10.0.0.7"})
    app = create_app(BridgeSettings(source_policy="public-https", config_path=config_path), None, dns)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        inline = [source("rebind", f"https://rebind.example.com:{server.port}"),
                  source("lan", "https://lan.example.com")]
        response = await client.post("/message:send", json={
            "query": "release", "mode": "evidence-only", "knowledgeSources": inline})
        result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    assert "rebind.example.com" in dns.asked and "lan.example.com" in dns.asked
    assert calls == [] and network_guard.violations == []
    for tool in (s for s in result["steps"] if s["id"].startswith("tool-")):
        observations = {o["name"]: o["value"] for o in tool["diagnostic"]["observations"]}
        assert observations["policy"] == "source-url"


async def test_policy_resolver_passes_public_answers() -> None:
    dns = FakeDns({"wiki.example.com": "93.184.216.34", "evil.example.com": "169.254.169.254"})
    resolver = PolicyResolver(dns, lambda: SourcePolicy("public-https"))
    assert (await resolver.resolve("wiki.example.com", 443))[0]["host"] == "93.184.216.34"
    with pytest.raises(PolicyResolveError):
        await resolver.resolve("evil.example.com", 443)
    open_policy = PolicyResolver(dns, lambda: SourcePolicy("private-http"))
    assert (await open_policy.resolve("evil.example.com", 443))[0]["host"] == "169.254.169.254"


async def test_oversized_source_answers_are_failures(bridge_client: BridgeFactory, serve_url: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from bridge.sources import transport

    monkeypatch.setattr(transport, "MAX_RESPONSE_BYTES", 64)
    client = await bridge_client()
    response = await client.post("/message:send", json={
        "query": "release", "mode": "evidence-only", "knowledgeSources": [source("wiki", serve_url)]})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    assert result["citations"] == []
    assert next(s for s in result["steps"] if s["id"] == "tool-wiki")["status"] == "error"


def test_search_results_merge_into_a_payload_whose_evidence_is_not_a_list() -> None:
    from bridge.sources.http_source import merge_search_results

    payload: dict[str, Any] = {"evidence": True}
    merge_search_results(payload, [[{"page_id": "a", "title": "A"}], [{"page_id": "a"}, {"path": "b.md"}]])
    assert payload["evidence"] == [{"page_id": "a", "title": "A"}, {"path": "b.md"}]
    with_citations: dict[str, Any] = {"citations": [{"pageId": "A"}], "evidence": "x"}
    merge_search_results(with_citations, [[{"page_id": "a"}, {"page_id": "c"}]])
    assert with_citations["citations"] == [{"pageId": "A"}, {"page_id": "c"}]


async def test_request_bodies_go_out_as_compact_utf8_json(aiohttp_server: Any) -> None:
    """Bodies are pre-encoded (not aiohttp's `json=`): the same JSON value, UTF-8, typed as JSON; a
    GET carries no body and no content type."""

    from bridge.sources.transport import SourceTransport, call_json, source_http_client

    seen: list[tuple[str, str | None, bytes]] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append((request.method, request.headers.get("Content-Type"), await request.read()))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    server = await aiohttp_server(app)
    url = str(server.make_url("/echo"))
    body = {"query": "릴리스 \"freeze\" \u2028", "limit": 4, "mode": "lexical", "fields": ["title"],
            "score": 1e-05}
    odd = {"query": "a\ud800b"}  # a lone surrogate cannot be UTF-8: ASCII escapes keep the value
    policy = SourcePolicy("private-http")
    async with source_http_client(lambda: policy) as http:
        transport = SourceTransport(http, policy, 5.0, clients=source_clients())
        assert await call_json(transport, "POST", url, "echo", body) == {"ok": True}
        assert await call_json(transport, "POST", url, "echo", odd) == {"ok": True}
        assert await call_json(transport, "GET", url, "echo") == {"ok": True}
    (method, content_type, raw), (_m, odd_type, odd_raw), get = seen
    assert (method, content_type, odd_type) == ("POST", "application/json", "application/json")
    assert raw == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert odd_raw == b'{"query":"a\\ud800b"}' and json.loads(odd_raw) == odd
    assert get == ("GET", None, b"")


QUESTION = "Which release checklist steps need a second reviewer?"


@contextlib.asynccontextmanager
async def client_of(server: TestServer, timeout: float) -> AsyncIterator[SourceClient]:
    """The bridge's llmwiki-http client for the fake source `server`, over a fresh session."""
    descriptor = normalize_inline([source("fake", str(server.make_url("")))])[0]
    async with source_http_client(SourcePolicy) as http:
        yield client_for(SourceTransport(http, SourcePolicy(), timeout, clients=source_clients()), descriptor)


async def test_the_run_context_is_the_query_with_new_search_results_merged(aiohttp_server: Any) -> None:
    calls: list[tuple[str, Any]] = []
    server: TestServer = await aiohttp_server(fake_source(calls))
    async with client_of(server, 5.0) as client, asyncio.TaskGroup() as group:
        answer = await client.run_context(QUESTION, {}, None, group)
    added = answer.added()
    assert [e["page_id"] for e in added] == ["extra-release"]
    assert [e["page_id"] for e in answer.payload["evidence"]] == ["a", "extra-release"]


async def test_the_query_answers_while_its_searches_are_still_out(aiohttp_server: Any) -> None:
    """The searches go in the caller's group: the query's payload is there before they answer."""
    answered = asyncio.Event()

    async def query(request: web.Request) -> web.Response:
        return web.json_response({"evidence": [{"page_id": "a", "title": "A"}]})

    async def search(request: web.Request) -> web.Response:
        await asyncio.wait_for(answered.wait(), 10)  # only once the caller has the query's payload
        return web.json_response({"results": [{"page_id": "b", "title": "B"}]})

    app = web.Application()
    app.router.add_post("/query", query)
    app.router.add_post("/search", search)
    server: TestServer = await aiohttp_server(app)
    async with client_of(server, 30.0) as client, asyncio.TaskGroup() as group:
        answer = await client.run_context(QUESTION, {}, None, group)
        assert [e["page_id"] for e in answer.payload["evidence"]] == ["a"]
        answered.set()
    assert [e["page_id"] for e in answer.added()] == ["b"]
    assert [e["page_id"] for e in answer.payload["evidence"]] == ["a", "b"]


async def test_a_failed_query_is_its_own_error_and_cancels_the_searches(aiohttp_server: Any) -> None:
    """The searches run in the caller's task group: a failed query does not wait for them."""
    searching = asyncio.Event()

    async def query(request: web.Request) -> web.Response:
        await asyncio.wait_for(searching.wait(), 10)  # fail only once a search is out
        return web.Response(status=503)

    async def search(request: web.Request) -> web.Response:
        searching.set()
        await asyncio.Event().wait()  # never answers: only cancellation ends the bridge's wait
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_post("/query", query)
    app.router.add_post("/search", search)
    server: TestServer = await aiohttp_server(app)

    async def run_context(client: SourceClient) -> None:
        async with task_group() as group:
            await client.run_context(QUESTION, {}, None, group)

    async with client_of(server, 30.0) as client:
        with pytest.raises(SourceCallError) as failed:
            await asyncio.wait_for(run_context(client), 10)
    assert failed.value.http_status == 503


async def test_the_run_has_the_query_graph_and_the_merged_search_citations(bridge_client: BridgeFactory,
                                                                           aiohttp_server: Any) -> None:
    calls: list[tuple[str, Any]] = []
    server: TestServer = await aiohttp_server(fake_source(calls))
    client = await bridge_client()
    response = await client.post("/message:send", json={
        "query": "Which release checklist steps need a second reviewer?", "mode": "evidence-only",
        "knowledgeSources": [source("fake", str(server.make_url("")))]})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    assert [c["id"] for c in result["citations"]] == ["fake:a", "fake:extra-release"]
    assert [n["id"] for n in result["graph"]["nodes"]] == ["fake:a", "fake:b"]


async def test_the_bundle_part_is_made_when_the_bundle_answers_not_after_the_searches(
        bridge_client: BridgeFactory, aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The searches answer only once the bundle's step and metadata are made (or after 5 s):
    made after them, as before, the bundle part would see a search answered."""
    from bridge.core import gather

    bundle_made, searched = asyncio.Event(), asyncio.Event()
    seen_search_answered: list[bool] = []
    make_part = gather._bundle_part

    def recording_part(*args: Any) -> Any:
        seen_search_answered.append(searched.is_set())
        bundle_made.set()
        return make_part(*args)

    monkeypatch.setattr(gather, "_bundle_part", recording_part)

    async def bundle(request: web.Request) -> web.Response:
        return web.json_response({"source_id": "fake", "title": "Fake wiki"})

    async def query(request: web.Request) -> web.Response:
        return web.json_response({"evidence": [{"page_id": "a", "title": "A"}]})

    async def search(request: web.Request) -> web.Response:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(bundle_made.wait(), 5)
        searched.set()
        return web.json_response({"results": [{"page_id": "b", "title": "B"}]})

    app = web.Application()
    app.router.add_get("/source-bundle", bundle)
    app.router.add_post("/query", query)
    app.router.add_post("/search", search)
    server: TestServer = await aiohttp_server(app)
    client = await bridge_client()
    response = await client.post("/message:send", json={
        "query": "Which release checklist steps need a second reviewer?", "mode": "evidence-only",
        "knowledgeSources": [source("fake", str(server.make_url("")))]})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    assert seen_search_answered == [False]
    assert [c["id"] for c in result["citations"]] == ["fake:a", "fake:b"]
    assert [b["title"] for b in result["sourceBundles"]] == ["Fake wiki"]
