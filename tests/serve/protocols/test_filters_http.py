"""`filters` over HTTP and MCP (issue 27): honoured on /query, /search and the search tools, a
bad one refused with its key named (HTTP 400, JSON-RPC invalid params, a tool error), never
ignored and never a trace; advertised in the capabilities and documented in OpenAPI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from common.filters import FILTERS_CAPABILITY
from tests.serve.protocols.test_mcp import Client, ClientFactory, call, stream

RUNBOOKS = {"runbooks/hotfix-release", "runbooks/rollback", "runbooks/token-rotation"}
BAD: list[tuple[Any, str]] = [
    ({"tag": ["runbook"]}, "filters has an unknown key 'tag'"),
    ({"tags_any": "runbook"}, "filters.tags_any must be an array of strings."),
    ({"kinds": ["journals"]}, "filters.kinds has an unknown kind 'journals'"),
    ({"date_from": "2024-02-30"}, "filters.date_from must be a date written YYYY-MM-DD"),
    ("runbooks", "filters must be a JSON object."),
]


@pytest.fixture
async def client(serve_client: ClientFactory, sample_root: Path) -> Client:
    return await serve_client(sample_root)


@pytest.mark.parametrize("route", ["/search", "/query"])
async def test_routes_honour_filters(client: Client, route: str) -> None:
    response = await client.post(route, json={"query": "release", "limit": 30,
                                              "filters": {"tags_any": ["runbook"]}})
    assert response.status == 200
    body = await response.json()
    found = {item["page_id"] for item in body["results" if route == "/search" else "evidence"]}
    assert found and found <= RUNBOOKS


@pytest.mark.parametrize("route", ["/search", "/query"])
@pytest.mark.parametrize(("filters", "message"), BAD)
async def test_a_bad_filter_is_a_400_naming_it(client: Client, route: str, filters: Any,
                                               message: str) -> None:
    response = await client.post(route, json={"query": "release", "filters": filters})
    assert response.status == 400
    body = await response.json()
    assert list(body) == ["detail"] and body["detail"].startswith(message), body
    assert "Traceback" not in body["detail"] and "/" not in body["detail"].split("'")[0]


async def test_null_or_empty_filters_change_nothing(client: Client) -> None:
    answers = []
    for extra in ({}, {"filters": None}, {"filters": {}}):
        response = await client.post("/search", json={"query": "release", **extra})
        assert response.status == 200
        answers.append(await response.json())
    assert answers[0] == answers[1] == answers[2]


@pytest.mark.parametrize("tool", ["llmwiki_search", "llmwiki_context"])
async def test_the_search_tools_take_filters_on_every_surface(client: Client, tool: str) -> None:
    arguments = {"query": "", "limit": 30, "filters": {"path_prefix": ["runbooks/"]}}
    _, body = await call(client, tool, arguments)
    items = body["result"]["results" if tool == "llmwiki_search" else "evidence"]
    assert {item["page_id"] for item in items} == RUNBOOKS
    _, reply, _ = await stream(client, "tools/call", {"name": tool, "arguments": arguments})
    assert reply["result"]["isError"] is False
    assert reply["result"]["structuredContent"] == body["result"]


@pytest.mark.parametrize(("filters", "message"), BAD)
async def test_a_bad_filter_is_invalid_params_or_a_tool_error(client: Client, filters: Any,
                                                              message: str) -> None:
    arguments = {"query": "release", "filters": filters}
    _, bare = await call(client, "llmwiki_search", arguments)
    assert bare["error"]["code"] == -32602 and bare["error"]["message"].startswith(message), bare
    _, reply, _ = await stream(client, "tools/call", {"name": "llmwiki_search", "arguments": arguments})
    assert reply["result"]["isError"] is True
    text = reply["result"]["content"][0]["text"]
    assert text.startswith(f"Error executing tool llmwiki_search: {message}"), text


async def test_capability_tool_schema_and_openapi_say_so(client: Client) -> None:
    for path in ("/health", "/manifest", "/source-bundle"):
        assert FILTERS_CAPABILITY in (await (await client.get(path)).json())["capabilities"]
    document = await (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for name in ("QueryRequest", "llmwiki_searchArguments", "llmwiki_contextArguments"):
        filters = schemas[name]["properties"]["filters"]
        closed = filters["anyOf"][0]
        assert closed["additionalProperties"] is False and "tags_any" in closed["properties"]
    for route in ("/query", "/search"):
        assert "400" in document["paths"][route]["post"]["responses"]
    assert "quoted phrase" in schemas["QueryRequest"]["properties"]["query"]["description"]
