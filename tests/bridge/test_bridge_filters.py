"""`retrieval.search.filters` (issue 27): checked by serve's rules in the bridge's camelCase,
sent in serve's snake_case only to sources that advertise llmwiki_search_filters_v1 (HTTP, MCP;
A2A gets the intent's own spelling), and a warning, or with `fallback: "none"` a 400, for the
sources that do not."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.core.request import RunRequestError, parse_run_request
from bridge.core.retrieval import UNFILTERED, IntentError, parse_intent, plan_for
from bridge.sources.a2a_source import forwarded_retrieval
from common.filters import FILTERS_CAPABILITY
from tests.bridge.test_bridge_message_send import QUESTION, result_of, send
from tests.support.bridge_sources import BridgeFactory, source

BASE = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical"}
CAPS = ("llmwiki_retrieval_v1", "llmwiki_search_mode_lexical")
RUNBOOKS = {"runbooks/hotfix-release", "runbooks/rollback", "runbooks/token-rotation"}


def _filtered(filters: Any, **intent: Any) -> dict[str, Any]:
    return {**BASE, **intent, "search": {"filters": filters}}


@pytest.mark.parametrize(("filters", "message"), [
    ({"tags_any": ["x"]}, "retrieval.search.filters has an unknown key 'tags_any': expected tagsAny, "
                          "tagsAll, pathPrefix, kinds, dateFrom, dateTo."),
    ({"tagsAny": "x"}, "retrieval.search.filters.tagsAny must be an array of strings."),
    ({"kinds": ["page"]}, "retrieval.search.filters.kinds has an unknown kind 'page': expected journal, "
                          "orientation or note."),
    ({"dateFrom": "2024-3-5"}, "retrieval.search.filters.dateFrom must be a date written YYYY-MM-DD, "
                              "not '2024-3-5'."),
    ("runbook", "retrieval.search.filters must be a JSON object."),
])
def test_a_bad_filter_is_named(filters: Any, message: str) -> None:
    with pytest.raises(IntentError) as caught:
        parse_intent(_filtered(filters), "question")
    assert str(caught.value) == message
    with pytest.raises(RunRequestError) as refused:
        parse_run_request({"data": {"query": "q", "retrieval": _filtered(filters)}})
    assert (refused.value.code, str(refused.value.message)) == ("invalid_retrieval_intent", message)


def test_filters_go_only_to_sources_that_advertise_them() -> None:
    intent = parse_intent(_filtered({"tagsAny": ["#Runbook"], "dateFrom": "2026-01-01"}), "q")
    assert intent.search is not None and intent.search.filters == {"tagsAny": ["runbook"],
                                                                   "dateFrom": "2026-01-01"}
    capable = plan_for(intent, (*CAPS, FILTERS_CAPABILITY), "fresh", "wiki", ["wiki"], "llmwiki-http")
    assert capable.diagnostic is None and capable.filters_supported
    assert capable.fields == {"mode": "lexical",
                              "filters": {"tags_any": ["runbook"], "date_from": "2026-01-01"}}
    legacy = plan_for(intent, CAPS, "fresh", "old", ["old"], "mcp")
    assert legacy.fields == {"mode": "lexical"} and not legacy.filters_supported
    assert legacy.diagnostic is not None and legacy.diagnostic.message == UNFILTERED
    observations = {o.name: o.value for o in legacy.diagnostic.observations}
    assert observations["missingCapability"] == FILTERS_CAPABILITY
    assert observations["capabilityStatus"] == "missing_filters_v1"
    unfiltered = plan_for(parse_intent(BASE, "q"), CAPS, "fresh", "old", ["old"], "mcp")
    assert unfiltered.diagnostic is None and unfiltered.filters_supported


def test_a2a_sources_get_the_intents_own_spelling() -> None:
    fields = {"mode": "lexical", "limit": 3, "filters": {"tags_all": ["a"], "path_prefix": ["x/"]}}
    assert forwarded_retrieval(fields, "lexical") == {
        "schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical", "fallback": "lexical",
        "search": {"limit": 3, "filters": {"tagsAll": ["a"], "pathPrefix": ["x/"]}}}


async def test_serve_gets_the_filters_and_a_source_without_them_is_named(
        bridge_client: BridgeFactory, serve_url: str, aiohttp_server: Any) -> None:
    seen: list[dict[str, Any]] = []

    async def legacy_bundle(request: web.Request) -> web.Response:
        return web.json_response({"source_id": "legacy", "capabilities": list(CAPS)})

    async def legacy_query(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"wiki_title": "Legacy", "evidence": [
            {"page_id": "p1", "title": "P1", "path": "p1.md", "snippet": "x"}]})

    async def legacy_search(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"results": []})

    app = web.Application()
    app.router.add_get("/source-bundle", legacy_bundle)
    app.router.add_post("/query", legacy_query)
    app.router.add_post("/search", legacy_search)
    legacy: TestServer = await aiohttp_server(app)

    client = await bridge_client()
    retrieval = _filtered({"tagsAny": ["runbook"]})
    sources = [source("sample-wiki", serve_url), source("legacy", str(legacy.make_url("")))]
    result = result_of(await send(client, {"query": "release", "mode": "evidence-only",
                                           "retrieval": retrieval, "knowledgeSources": sources}))
    wiki = {c["pageId"] for c in result["citations"] if c["sourceId"] == "sample-wiki"}
    assert wiki and wiki <= RUNBOOKS
    assert seen and all("filters" not in body for body in seen)
    [diagnostic] = result["diagnostics"]
    assert diagnostic["subject"] == "legacy" and diagnostic["message"] == UNFILTERED

    strict = _filtered({"tagsAny": ["runbook"]}, fallback="none")
    refused = await send(client, {"query": "release", "mode": "evidence-only", "retrieval": strict,
                                  "knowledgeSources": sources}, status=400)
    assert refused["error"] == {"code": "retrieval_mode_unsupported", "message": (
        f"Retrieval filters require selected source(s) to advertise {FILTERS_CAPABILITY}: legacy "
        "(llmwiki-http). Omit filters, set fallback to lexical (those sources are then asked without "
        "filters), or choose sources that advertise filters.")}
    bad = await send(client, {"query": QUESTION, "retrieval": _filtered({"tag": ["x"]}),
                              "knowledgeSources": sources}, status=400)
    assert bad["error"]["code"] == "invalid_retrieval_intent"
    assert bad["error"]["message"].startswith("retrieval.search.filters has an unknown key 'tag'")
