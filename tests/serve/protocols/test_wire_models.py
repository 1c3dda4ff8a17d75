"""What serve answers is what the common/ wire models describe: every route's live answers are
validated against its model with unknown keys refused, so a key added or dropped on either side
fails here (and the OpenAPI document, built from the same models, stays true)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import BaseModel

from common import schemas
from serve.protocols.http import SOURCE_KEY, create_app
from serve.routes import ROUTES
from serve.settings import ServeSettings
from tests.support.folders import copy_fixture

Client = TestClient[web.Request, web.Application]
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}

# Each route's requests and the model of a 200 answer. Items of search results and context packs
# are SearchResults unless `fields` projects them.
REST: dict[str, tuple[type[BaseModel], list[tuple[str, str, Any]]]] = {
    "health": (schemas.HealthResponse, [("GET", "/health", None)]),
    "manifest": (schemas.WikiManifest, [("GET", "/manifest", None)]),
    "source_bundle": (schemas.SourceBundleManifest, [
        ("GET", "/source-bundle", None), ("GET", "/source-bundle?include_drafts=true", None)]),
    "source_refs": (schemas.SourceRefsResponse, [
        ("GET", "/source-refs", None), ("GET", "/source-refs?include_drafts=true", None)]),
    "query": (schemas.ContextPack, [
        ("POST", "/query", {"query": "release checklist"}),
        ("POST", "/query", {"query": "release", "query_variants": ["ship", "cut"]}),
        ("POST", "/query", {"query": "token", "mode": "literal", "include_drafts": True}),
        ("POST", "/query", {"query": "zzzz-nothing-matches"})]),
    "search": (schemas.SearchResponse, [
        ("POST", "/search", {"query": "release"}),
        ("POST", "/search", {"query": "rollback", "mode": "literal", "limit": 3})]),
    "read": (schemas.WikiPage, [("GET", "/read/index", None),
                                ("GET", "/read/runbooks/rollback.md", None)]),
    "graph": (schemas.GraphResponse, [("GET", "/graph", None), ("GET", "/graph?limit=3", None),
                                      ("GET", "/graph?include_drafts=true", None)]),
    "graph_neighborhood": (schemas.GraphNeighborhoodResponse, [
        ("GET", "/graph/neighborhood?seed=index&depth=2", None),
        ("GET", "/graph/neighborhood?seed=nothing&direction=out", None)]),
    "projection_store": (schemas.ProjectionStoreDiagnostics, [
        ("GET", "/diagnostics/projection-store", None)]),
}
# Answered by documents or protocols whose shapes are not serve's wire models.
NOT_MODELLED = {
    "openapi": "the OpenAPI document itself",
    "docs": "an HTML page",
    "mcp_jsonrpc": "JSON-RPC framing; its tool results are checked against the models below",
    "mcp_streamable_http": "JSON-RPC framing; its tool results are checked against the models below",
    "a2a_agent_card": "A2A's own card shape (common/a2a.py)",
    "a2a_message_send": "A2A's task shapes (common/a2a.py); the artifact carries a ContextPack",
    "a2a_jsonrpc": "A2A's JSON-RPC shapes (common/a2a.py)",
    "a2a_jsonrpc_slash": "the same endpoint as a2a_jsonrpc",
    "a2a_message_stream": "A2A's stream events (common/a2a_stream.py); e2e test_a2a_streaming",
    "a2a_list_tasks": "A2A's task shapes (common/a2a_tasks.py); e2e test_a2a_conformance",
    "a2a_get_task": "A2A's task shapes (common/a2a_tasks.py); e2e test_a2a_conformance",
    "a2a_task_action": "A2A's task and error shapes (common/a2a.py); e2e test_a2a_conformance",
    "a2a_create_push_config": "always A2A's PushNotificationNotSupported error (common/a2a.py)",
    "a2a_list_push_configs": "always A2A's PushNotificationNotSupported error (common/a2a.py)",
    "a2a_get_push_config": "always A2A's PushNotificationNotSupported error (common/a2a.py)",
    "a2a_delete_push_config": "always A2A's PushNotificationNotSupported error (common/a2a.py)",
    "a2a_extended_card": "always A2A's UnsupportedOperation error (common/a2a.py)",
}
TOOLS: dict[str, tuple[type[BaseModel], dict[str, Any]]] = {
    "llmwiki_context": (schemas.ContextPack, {"query": "release"}),
    "llmwiki_search": (schemas.SearchResponse, {"query": "release"}),
    "llmwiki_read": (schemas.WikiPage, {"page_id": "index"}),
    "llmwiki_graph": (schemas.GraphResponse, {"limit": 5}),
    "llmwiki_graph_neighbors": (schemas.GraphNeighborhoodResponse, {"seed": "index"}),
    "llmwiki_source_refs": (schemas.SourceRefsResponse, {}),
    "llmwiki_source_bundle": (schemas.SourceBundleManifest, {}),
}


def check(model: type[BaseModel], body: Any) -> None:
    """Validate strictly (every wire model refuses unknown keys), then the items inside."""
    assert model.model_config.get("extra") == "forbid", model
    parsed = model.model_validate(body)
    items: list[Any] = []
    if isinstance(parsed, schemas.ContextPack):
        items = [*parsed.orientation, *parsed.evidence]
    elif isinstance(parsed, schemas.SearchResponse):
        items = parsed.results
    for item in items:
        schemas.SearchResult.model_validate(item)


def test_every_route_is_checked_or_says_why_not() -> None:
    assert {route.name for route in ROUTES} == set(REST) | set(NOT_MODELLED)


@pytest.fixture(params=["sample-wiki", "shapes/okf-bundle"])
async def client(request: pytest.FixtureRequest, aiohttp_client: Any, tmp_path: Path) -> Client:
    root = copy_fixture(request.param, tmp_path / "roots")
    settings = ServeSettings(root=root, cache_dir=tmp_path / "cache", allow_drafts=True,
                             enable_a2a=True)
    served: Client = await aiohttp_client(create_app(settings))
    warmed = served.app[SOURCE_KEY].warmed  # ready: searches answer 200, not 503
    assert await asyncio.get_running_loop().run_in_executor(None, warmed.wait, 120)
    return served


async def test_live_answers_of_every_route_validate_against_their_models(client: Client) -> None:
    checked: set[str] = set()
    for name, (model, requests) in REST.items():
        for method, path, body in requests:
            response = await client.request(method, path, json=body)
            if response.status == 404 and path.startswith("/read/"):
                continue  # a page the OKF bundle does not have; another read covers the route
            assert response.status == 200, (path, await response.text())
            check(model, await response.json())
            checked.add(name)
    assert checked == set(REST)


async def test_tool_results_validate_against_the_same_models(client: Client) -> None:
    for name, (model, arguments) in TOOLS.items():
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        compat = await (await client.post("/mcp", json=call)).json()
        standard = await (await client.post("/mcp", json=call, headers=MCP_HEADERS)).json()
        if compat["result"] == {"found": False}:
            schemas.PageMissing.model_validate(compat["result"])
            continue
        check(model, compat["result"])
        check(model, standard["result"]["structuredContent"])


async def test_error_answers_validate_against_their_models(client: Client) -> None:
    missing = await client.get("/read/no-such-page")
    assert missing.status == 404
    check(schemas.HttpDetailResponse, await missing.json())
    for response in (await client.get("/graph?limit=lots"),
                     await client.post("/query", json={"query": "x", "limit": 99}),
                     await client.post("/query", data=b"{not json")):
        assert response.status == 422
        check(schemas.HTTPValidationError, await response.json())


def test_a_drift_fails_the_check() -> None:
    """The check refuses an answer with a key the model lacks, or without one it requires."""
    body = {"backend": "InMemoryProjectionStore", "backend_kind": "memory", "endpoint": None,
            "namespace": "default", "cache_source_id": "x", "available": True, "last_error": ""}
    check(schemas.ProjectionStoreDiagnostics, body)
    with pytest.raises(ValueError):
        check(schemas.ProjectionStoreDiagnostics, {**body, "extra": 1})
    with pytest.raises(ValueError):
        check(schemas.ProjectionStoreDiagnostics, {k: v for k, v in body.items() if k != "cache_source_id"})
    pack = {"query": "q", "wiki_title": "t", "page_count": 0, "approved_page_count": 0,
            "answerable": False, "orientation": [], "evidence": [{"page_id": "p"}], "limitations": [],
            "graph": {"nodes": [], "edges": []}, "retrieval_guidance": None}
    with pytest.raises(ValueError):
        check(schemas.ContextPack, pack)
