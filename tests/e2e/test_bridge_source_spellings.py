"""Sources that answer in the contracts' other spellings (camelCase, fallback keys, null first
spellings, top-level graphs), as deployed: the installed bridge reads them into the same
citations, graph and MCP tool values as serve's snake_case (bridge contract 3.11, 4.3.1, 4.3.2)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.processes import Service, start_bridge, stop_checked
from tests.e2e.spelled_sources import running_spelled_sources

QUESTION = "How do we roll back a release?"


@pytest.fixture(scope="module")
def peers() -> Iterator[str]:
    with running_spelled_sources() as url:
        yield url


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_bridge(tmp_path_factory.mktemp("spellings-bridge"))
    yield service
    stop_checked(service)


def source(source_id: str, url: str) -> dict[str, Any]:
    return {"id": source_id, "name": f"{source_id} source", "protocol": "llmwiki-http", "status": "ready",
            "url": url}


async def post(bridge: Service, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(f"{bridge.url}{path}", json=body)
    assert response.status_code == 200, response.text[:2000]
    answer: dict[str, Any] = response.json()
    return answer


async def tool(bridge: Service, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    answer = await post(bridge, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                         "params": {"name": name, "arguments": arguments}})
    result = answer["result"]
    assert result["isError"] is False, result
    value: dict[str, Any] = result["structuredContent"][name]
    return value


async def test_a_run_reads_citations_and_graphs_in_every_spelling(bridge: Service, peers: str) -> None:
    task = await post(bridge, "/message:send", {"data": {
        "query": QUESTION, "orchestrationMode": "evidence-only",
        "knowledgeSources": [source("camel", f"{peers}/camel"), source("other", f"{peers}/other")]}})
    result = task["artifacts"][0]["parts"][0]["data"]
    citations = {c["id"]: c for c in result["citations"]}
    # camel: an empty `id` is skipped (the path is the raw id), pageId is the page id, the handle
    # came as `uri`, sourceRefs are stringified; the search result merged in by its pageId
    rollback = citations["camel:runbooks/rollback.md"]
    assert (rollback["pageId"], rollback["connectionId"], rollback["sourceRefs"], rollback["score"]) == (
        "rollback", "upstream-a", ["SRC-REL-1", "7"], 2.0)
    assert rollback["handle"] == "llmwiki://camel/pages/rollback"
    # the search result merged in: its raw id is `id|page_id|path` (4.3.1), pageId its page id only
    assert citations["camel:release.md"]["pageId"] == "release-checklist"
    assert "somethingNew" not in rollback
    # other: ids from `path` and `page_id`, connection_id and source_refs; the non-object item
    # keeps its place in the numbering but makes no citation
    deploy = citations["other:guides/deploy.md"]
    assert (deploy["connectionId"], deploy["sourceRefs"]) == ("upstream-b", ["SRC-DEP"])
    assert citations["other:faq"]["pageId"] == "faq"
    assert not any(key.startswith("other:2") for key in citations)
    nodes = {n["id"]: (n["label"], n["kind"], n["path"]) for n in result["graph"]["nodes"]}
    assert nodes["camel:page:rollback"] == ("Rollback page", "topic", "runbooks/rollback.md")
    assert nodes["camel:page:hot"] == ("page:hot", "hot", "")
    assert nodes["other:page:faq"] == ("page:faq", "faq", "")
    assert nodes["other:page:deploy"] == ("Deploy", "node", "")
    edges = {(e["source"], e["target"]): e["relation"] for e in result["graph"]["edges"]}
    assert edges == {("camel:page:hot", "camel:page:rollback"): "links_to",
                     ("camel:page:hot", "elsewhere"): "related",
                     ("other:page:faq", "other:page:deploy"): "mentions"}
    details = {s["connectionId"]: s["detail"] for s in result["steps"] if s["id"].startswith("tool-")}
    assert details["camel"].startswith("Read 2 citation(s) from Camel Wiki. Orientation: hot.md (Hot).")
    assert details["other"].startswith("Read 2 citation(s) from Other Wiki.")
    assert not result["diagnostics"]


async def test_the_mcp_context_and_search_tools_read_every_spelling(bridge: Service, peers: str) -> None:
    camel = [source("camel", f"{peers}/camel")]
    value = await tool(bridge, "llmwiki_context", {"query": QUESTION, "knowledgeSources": camel})
    assert (value["wikiTitle"], value["pageCount"], value["approvedPageCount"], value["adapter"]) == (
        "Camel Wiki", 3, 2, "camel-adapter")
    assert value["orientation"] == [{"id": "hot", "title": "Hot", "path": "hot.md",
                                     "snippet": "Hot This week: the release.", "role": "hot",
                                     "sourceRefs": ["SRC-HOT"]}]
    assert [c["id"] for c in value["citations"]] == ["camel:runbooks/rollback.md"]
    assert value["limitations"] == ["camel limitation"]
    assert {n["label"] for n in value["graph"]["nodes"]} == {"Rollback page", "page:hot"}
    other = await tool(bridge, "llmwiki_context", {"query": QUESTION,
                                                   "knowledgeSources": [source("other", f"{peers}/other")]})
    assert (other["wikiTitle"], other["approvedPageCount"]) == ("Other Wiki", 5) and "pageCount" not in other
    found = await tool(bridge, "llmwiki_search", {"query": "release", "knowledgeSources": camel})
    assert found["results"] == [{"id": "camel:release-checklist", "pageId": "release-checklist",
                                 "title": "Release Checklist", "path": "release.md",
                                 "snippet": "Tag, build, publish.", "score": 1, "sourceRefs": ["SRC-REL-2"]}]


async def test_the_source_bundle_tool_reads_a_manifest_in_every_spelling(bridge: Service, peers: str) -> None:
    camel = await tool(bridge, "llmwiki_source_bundle",
                       {"knowledgeSources": [source("camel", f"{peers}/camel")]})
    assert camel["sourceBundle"] == {
        "connectionId": "camel", "sourceId": "camel", "bundleId": "camel:sha256:abc", "title": "Camel",
        "projection": {"signature": "sha256:abc", "pageCount": 3, "approvedPageCount": 2,
                       "sourceRefCount": 2},
        "rawOrigins": {"metadataOnly": True, "originCount": 4},
        "sourceRefs": [{"id": "SRC-HOT", "label": "Hot notes", "type": "doc",
                        "uri": "https://docs.example/hot"}],
        "sourceRefCount": 2}
    other = await tool(bridge, "llmwiki_source_bundle",
                       {"knowledgeSources": [source("other", f"{peers}/other")]})
    assert other["sourceBundle"] == {
        "connectionId": "other", "sourceId": "other", "bundleId": "other:1", "title": "Other",
        "projection": {"signature": "sha256:def", "pageCount": 5, "graphNodeCount": 9,
                       "sourceRefCount": 1},
        "rawOrigins": {"originCount": 2},
        "sourceRefs": [{"id": "SRC-DEP", "label": "Deploy", "type": "runbook"}],
        "sourceRefCount": 1}
