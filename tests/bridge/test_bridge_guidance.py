"""Retrieval guidance: the closed shape, snake_case to camelCase mapping, and its diagnostics."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.guidance import GuidanceError, map_guidance
from tests.support.bridge_sources import BridgeFactory, source

SNAKE: dict[str, Any] = {
    "schema_version": "llmwiki.retrieval_guidance.v1", "orientation_source": "authored",
    "content_trust": "untrusted_source_evidence", "max_query_variants": 2, "character_budget": 400,
    "folder_cards": [{"path": "runbooks", "page_count": 2, "terms": ["hotfix"]}],
    "page_cards": [{"page_id": "hot", "title": "Current Focus", "path": "hot.md", "headings": ["Open"],
                    "terms": ["release"], "exact_identifiers": ["v1.2.3"], "excerpt": "This week"}],
    "suggested_terms": ["release", "릴리스"], "exact_identifiers": ["publish.yml"],
    "fallback_modes": ["literal"],
}


def test_valid_guidance_maps_to_camel_case() -> None:
    mapped = map_guidance(SNAKE, snake=True)
    assert list(mapped) == ["schemaVersion", "orientationSource", "contentTrust", "maxQueryVariants",
                            "characterBudget", "folderCards", "pageCards", "suggestedTerms",
                            "exactIdentifiers", "fallbackModes"]
    assert mapped["pageCards"][0] == {"pageId": "hot", "title": "Current Focus", "path": "hot.md",
                                      "headings": ["Open"], "terms": ["release"],
                                      "exactIdentifiers": ["v1.2.3"], "excerpt": "This week"}
    assert mapped["folderCards"] == [{"path": "runbooks", "pageCount": 2, "terms": ["hotfix"]}]
    assert map_guidance(mapped, snake=False) == mapped  # the public form validates the same way
    with pytest.raises(GuidanceError):
        map_guidance(mapped, snake=True)


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(SNAKE)
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return raw


@pytest.mark.parametrize(("path", "value"), [
    (["schema_version"], "v2"), (["extra"], 1), (["suggested_terms"], KeyError),
    (["max_query_variants"], 3), (["character_budget"], 10), (["page_cards"], None),
    (["page_cards", 0, "path"], "/etc/passwd"), (["page_cards", 0, "path"], "../x.md"),
    (["page_cards", 0, "path"], "https://x/y"), (["folder_cards", 0, "page_count"], 0),
    (["suggested_terms"], ["a", "A"]), (["fallback_modes"], ["vector", "literal"]),
    (["exact_identifiers"], [" "]),
])
def test_invalid_guidance_is_rejected(path: list[Any], value: Any) -> None:
    with pytest.raises(GuidanceError):
        map_guidance(_broken(path, value), snake=True)


async def test_caller_guidance_is_validated(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    public = map_guidance(SNAKE, snake=True)
    ok = await client.post("/message:send", json={"data": {
        "query": "q", "mode": "evidence-only", "knowledgeSources": [], "retrievalGuidance": public}})
    assert ok.status == 200
    bad = await client.post("/message:send", json={"data": {
        "query": "q", "retrievalGuidance": {**public, "pageCards": None}}})
    body = await bad.json()
    assert bad.status == 400
    assert body["error"] == {"code": "invalid_retrieval_guidance",
                             "message": "data.retrievalGuidance.pageCards must be an array."}


async def test_source_guidance_diagnostics(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    def app(payload: dict[str, Any], capabilities: list[str]) -> web.Application:
        async def bundle(request: web.Request) -> web.Response:
            return web.json_response({"source_id": "s", "capabilities": capabilities})

        async def query(request: web.Request) -> web.Response:
            return web.json_response(payload)

        application = web.Application()
        application.router.add_get("/source-bundle", bundle)
        application.router.add_post("/query", query)
        return application

    evidence = {"evidence": [{"page_id": "p", "title": "P"}]}
    guided = ["llmwiki_agent_guided_lexical_v1"]
    servers: list[TestServer] = [
        await aiohttp_server(app({**evidence, "retrieval_guidance": SNAKE}, guided)),
        await aiohttp_server(app(evidence, guided)),
        await aiohttp_server(app(evidence, [])),
        await aiohttp_server(app({**evidence, "retrieval_guidance": {"schema_version": "x"}}, [])),
    ]
    client = await bridge_client()
    response = await client.post("/message:send", json={
        "query": "q", "mode": "evidence-only",
        "knowledgeSources": [source(f"s{i}", str(s.make_url(""))) for i, s in enumerate(servers)]})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    notes = {d["subject"]: {o["name"]: o["value"] for o in d["observations"]}
             for d in result["diagnostics"]}
    assert set(notes) == {"s1", "s3"}
    assert notes["s1"]["guidance"] == "absent" and notes["s3"]["guidance"] == "omitted"
    assert "retrievalGuidance" not in str(result) and "suggestedTerms" not in str(result)
