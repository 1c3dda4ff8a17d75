"""HTTP contract of serve's retrieval surfaces: POST /query (context pack) and POST /search.

Contract sections 4.8, 4.9, 5.3-5.9 and checklist items C3-C6, C11, E4, E7, with this
build's deliberate differences: an empty query is not answerable, orientation holds only
entry pages and never makes a query answerable, the pack's graph is the neighbourhood of
the evidence, and vector/hybrid modes answer 400 while no vector backend exists.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from common.schemas import (
    ContextGraph,
    ContextPack,
    HTTPValidationError,
    SearchResponse,
    SearchResult,
)
from serve.graph.budget import GRAPH_BYTES
from serve.protocols import http, off_loop
from serve.retrieval.search import SearchRequest
from tests.support.folders import copy_fixture
from tests.support.guidance import assert_serve_guidance

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

PACK_KEYS = ["query", "wiki_title", "description", "adapter", "implementation", "page_count",
             "approved_page_count", "answerable", "orientation", "evidence", "limitations",
             "graph", "retrieval_guidance"]
REFERENCE_ITEM_KEYS = ["page_id", "title", "path", "score", "snippet", "role", "source_refs",
                       "route"]
# The reference's keys first and in its order, then the section an item cites (ours); the
# passage is left out when the snippet holds it (docs/evidence.md). Orientation items are
# the reference's.
ITEM_KEYS = [*REFERENCE_ITEM_KEYS, "section", "origin", "matched_fields", "passage"]


def assert_item_keys(item: dict[str, Any]) -> None:
    if "passage" in item:
        assert list(item) == ITEM_KEYS
        assert item["passage"].removesuffix("...") not in item["snippet"]
    else:
        assert list(item) == ITEM_KEYS[:-1]
ROLE_RANK = {"hot": 0, "index": 1, "overview": 2}

SAMPLE_TITLE = "Sample Operations Wiki"
SAMPLE_DESCRIPTION = "Release and packaging operations notes for a small software team."
SAMPLE_APPROVED_IDS = {
    "concepts/artifact-signing", "concepts/config-flags", "concepts/semantic-versioning", "hot",
    "index", "ko/release-checklist-ko", "overview", "packaging-pipeline", "release-checklist",
    "runbooks/hotfix-release", "runbooks/rollback", "runbooks/token-rotation",
}
WITHHELD_LINE = "2 draft or unapproved page(s) were withheld."
NO_EVIDENCE = "No matching approved LLMWiki page was found."
EMPTY_QUERY = "The query is empty, so no evidence was searched."
VECTOR_DISABLED_PREFIX = "Vector search is not enabled for this server."
MIN_SCORE_VECTOR = ("min_score is not supported for vector or hybrid search. Remove min_score "
                    "or use lexical/literal mode.")
DRAFT_ID, DRAFT_PATH, DRAFT_TITLE, DRAFT_NEEDLE = (
    "runbooks/incident-comms", "runbooks/incident-comms.md", "Incident Communications",
    "BLUEHERON")
PRIVATE_ID, PRIVATE_PATH, PRIVATE_TITLE, PRIVATE_NEEDLE = (
    "vendor-contacts", "vendor-contacts.md", "Vendor Contacts", "KESTRELVENDOR")
KOREAN_DRAFT_ID, KOREAN_DRAFT_NEEDLE = "초안-메모", "보라색코끼리"
PUBLISH_YML_PAGES = {"hot", "packaging-pipeline", "release-checklist", "ko/release-checklist-ko"}


# -- helpers ------------------------------------------------------------------------------


async def post(client: Client, path: str, body: Any, status: int = 200) -> Any:
    response = await client.post(path, json=body)
    text = await response.text()
    assert response.status == status, text
    assert response.content_type == "application/json"
    return json.loads(text)


async def search(client: Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    payload = await post(client, "/search", body)
    assert list(payload) == ["results"]
    results: list[dict[str, Any]] = payload["results"]
    return results


async def context(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    pack: dict[str, Any] = await post(client, "/query", body)
    assert list(pack) == PACK_KEYS
    return pack


def ids(items: Sequence[dict[str, Any]]) -> list[str]:
    return [item["page_id"] for item in items]


def roundtrips(model: type[Any], body: Any) -> None:
    assert model.model_validate(body).model_dump(mode="json") == body


def expected_fusion(channels: list[list[dict[str, Any]]], limit: int) -> list[tuple[str, float]]:
    """Contract 5.7: sum of 1/(60 + rank), ordered by (-fused, primary rank, best rank,
    role rank, path), rounded to 6 decimals, cut to `limit`."""
    fused: dict[str, float] = {}
    best: dict[str, int] = {}
    item_of: dict[str, dict[str, Any]] = {}
    for items in channels:
        for rank, item in enumerate(items, start=1):
            key = item["page_id"]
            fused[key] = fused.get(key, 0.0) + 1.0 / (60 + rank)
            best[key] = min(best.get(key, rank), rank)
            item_of.setdefault(key, item)
    primary = {item["page_id"]: rank for rank, item in enumerate(channels[0], start=1)}
    order = sorted(fused, key=lambda k: (-fused[k], primary.get(k, 1_000_000), best[k],
                                         ROLE_RANK.get(item_of[k]["role"], 3),
                                         item_of[k]["path"]))
    return [(k, round(fused[k], 6)) for k in order[:limit]]


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture
async def client(serve_client: ClientFactory, sample_root: Path) -> Client:
    return await serve_client(sample_root)


@pytest.fixture
def korean_root(tmp_path: Path) -> Path:
    return copy_fixture("shapes/korean-wiki", tmp_path / "roots")


@pytest.fixture
async def korean(serve_client: ClientFactory, korean_root: Path) -> Client:
    return await serve_client(korean_root)


# -- shapes -------------------------------------------------------------------------------


async def test_query_pack_keys_order_and_models(client: Client) -> None:
    pack = await context(client, {"query": "release"})
    roundtrips(ContextPack, pack)
    assert pack["query"] == "release"
    assert pack["wiki_title"] == SAMPLE_TITLE
    assert pack["description"] == SAMPLE_DESCRIPTION
    assert (pack["adapter"], pack["implementation"]) == ("llmwiki-markdown", "llmwiki-markdown")
    assert (pack["page_count"], pack["approved_page_count"]) == (14, 12)
    assert pack["answerable"] is True
    assert pack["limitations"] == [WITHHELD_LINE]
    assert 0 < len(pack["evidence"]) <= 8
    for item in pack["orientation"]:
        assert list(item) == REFERENCE_ITEM_KEYS
        roundtrips(SearchResult, item)
    for item in pack["evidence"]:
        assert_item_keys(item)
        roundtrips(SearchResult, item)
    assert {item["route"] for item in pack["evidence"]} == {"search"}
    assert [item["score"] for item in pack["orientation"]] == [1.0, 0.99, 0.98]
    assert {item["route"] for item in pack["orientation"]} == {"orientation"}
    roundtrips(ContextGraph, pack["graph"])
    assert pack["graph"]["nodes"]
    assert_serve_guidance(pack["retrieval_guidance"])
    assert pack["retrieval_guidance"]["orientation_source"] == "authored"
    assert pack["retrieval_guidance"]["fallback_modes"] == ["literal"]


async def test_search_response_shape(client: Client) -> None:
    payload = await post(client, "/search", {"query": "release"})
    roundtrips(SearchResponse, payload)
    results = payload["results"]
    assert 0 < len(results) <= 8
    for item in results:
        assert_item_keys(item)
        roundtrips(SearchResult, item)
        assert item["route"] == "search"
        assert item["page_id"] in SAMPLE_APPROVED_IDS
        assert item["score"] > 0
        assert round(item["score"], 4) == item["score"]
    scores = [item["score"] for item in results]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("body", [
    {"query": "release"},
    {"query": "signing key rotation", "limit": 3},
    {"query": "publish.yml", "mode": "literal"},
    {"query": "release", "query_variants": ["rollback", "hotfix"], "limit": 5},
    {"query": "release", "fields": "page_id,score", "snippet_chars": 40},
    {"query": "release", "exclude_page_ids": ["hot", "index.md"], "min_score": 0.5},
])
async def test_evidence_equals_search_for_the_same_arguments(client: Client,
                                                             body: dict[str, Any]) -> None:
    pack = await context(client, body)
    results = await search(client, body)
    assert results
    assert pack["evidence"] == results
    assert pack["answerable"] is True


# -- validation (422) ---------------------------------------------------------------------

VALIDATION_CASES = [
    pytest.param({"limit": 0}, ["body", "limit"], "greater_than_equal", 0, None, id="limit-0"),
    pytest.param({"limit": 31}, ["body", "limit"], "less_than_equal", 31, None, id="limit-31"),
    pytest.param({"limit": "many"}, ["body", "limit"], "int_parsing", "many", None,
                 id="limit-many"),
    pytest.param({"mode": "fuzzy"}, ["body", "mode"], "literal_error", "fuzzy",
                 "Input should be 'lexical', 'literal', 'vector' or 'hybrid'", id="mode-fuzzy"),
    pytest.param({"snippet_chars": -1}, ["body", "snippet_chars"], "greater_than_equal", -1,
                 None, id="snippet-negative"),
    pytest.param({"snippet_chars": 2001}, ["body", "snippet_chars"], "less_than_equal", 2001,
                 None, id="snippet-2001"),
    pytest.param({"min_score": -0.5}, ["body", "min_score"], "greater_than_equal", -0.5, None,
                 id="min-score-negative"),
    pytest.param({"query": "release", "query_variants": None}, ["body", "query_variants"],
                 "value_error", None,
                 "query_variants must be an array of strings; omit it instead of null",
                 id="variants-null"),
    pytest.param({"query": "release", "query_variants": "rollback"},
                 ["body", "query_variants"], "value_error", "rollback",
                 "query_variants must be an array of strings", id="variants-not-list"),
    pytest.param({"query": "release", "query_variants": ["a", "b", "c"]},
                 ["body", "query_variants"], "value_error", ["a", "b", "c"],
                 "query_variants accepts at most 2 supplied variants", id="variants-3"),
    pytest.param({"query": "release", "query_variants": ["rollback", 7]},
                 ["body", "query_variants"], "value_error", ["rollback", 7],
                 "query_variants must be an array of strings", id="variants-non-string"),
    pytest.param({"query": "release", "query_variants": ["rollback", "  "]},
                 ["body", "query_variants"], "value_error", ["rollback", "  "],
                 "query_variants entries must be non-empty strings", id="variants-blank"),
    pytest.param({"query": 5}, ["body", "query"], "string_type", 5, None, id="query-int"),
    pytest.param({"query": ["release"]}, ["body", "query"], "string_type", ["release"], None,
                 id="query-list"),
]


@pytest.mark.parametrize("path", ["/query", "/search"])
@pytest.mark.parametrize(("body", "loc", "kind", "value", "message"), VALIDATION_CASES)
async def test_request_validation_is_422(client: Client, path: str, body: dict[str, Any],
                                         loc: list[str], kind: str, value: Any,
                                         message: str | None) -> None:
    payload = await post(client, path, body, status=422)
    roundtrips(HTTPValidationError, payload)
    assert list(payload) == ["detail"]
    assert len(payload["detail"]) == 1
    issue = payload["detail"][0]
    assert list(issue)[:4] == ["type", "loc", "msg", "input"]
    assert issue["type"] == kind
    assert issue["loc"] == loc
    assert issue["input"] == value
    assert isinstance(issue["msg"], str) and issue["msg"]
    if message is not None:
        assert issue["msg"].endswith(message), issue["msg"]


@pytest.mark.parametrize("path", ["/query", "/search"])
async def test_malformed_json_body_is_json_invalid(client: Client, path: str) -> None:
    response = await client.post(path, data=b'{"query": "release"',
                                 headers={"Content-Type": "application/json"})
    assert response.status == 422
    payload = await response.json()
    roundtrips(HTTPValidationError, payload)
    [issue] = payload["detail"]
    assert issue["type"] == "json_invalid"
    assert issue["loc"][0] == "body"
    assert isinstance(issue["loc"][1], int) and issue["loc"][1] >= 0
    assert issue["msg"] == "JSON decode error"


@pytest.mark.parametrize("path", ["/query", "/search"])
@pytest.mark.parametrize("raw", [b"[]", b'["release"]', b'"release"', b"42"])
async def test_non_object_json_body_is_422(client: Client, path: str, raw: bytes) -> None:
    response = await client.post(path, data=raw, headers={"Content-Type": "application/json"})
    assert response.status == 422
    payload = await response.json()
    roundtrips(HTTPValidationError, payload)
    [issue] = payload["detail"]
    assert issue["loc"] == ["body"]
    assert issue["input"] == json.loads(raw)


@pytest.mark.parametrize("path", ["/query", "/search"])
async def test_empty_body_is_an_empty_request(client: Client, path: str) -> None:
    response = await client.post(path)
    assert response.status == 200
    payload = await response.json()
    if path == "/search":
        assert [item["route"] for item in payload["results"]] == ["overview"] * 8
    else:
        assert payload["answerable"] is False
        assert payload["limitations"][0] == EMPTY_QUERY


@pytest.mark.parametrize("path", ["/query", "/search"])
async def test_body_over_max_body_bytes_is_413(serve_client: ClientFactory, sample_root: Path,
                                               path: str) -> None:
    small = await serve_client(sample_root, max_body_bytes=1024)
    ok = await small.post(path, json={"query": "release"})
    assert ok.status == 200
    response = await small.post(path, json={"query": "release " * 400})
    assert response.status == 413
    assert await response.json() == {"detail": "Request body too large"}


async def test_chunked_body_over_max_body_bytes_is_413(serve_client: ClientFactory,
                                                       sample_root: Path) -> None:
    small = await serve_client(sample_root, max_body_bytes=1024)

    async def chunks() -> Any:
        yield b'{"query": "'
        for _ in range(10):
            yield b"release " * 64
        yield b'"}'

    response = await small.post("/search", data=chunks(),
                                headers={"Content-Type": "application/json"})
    assert response.status == 413
    payload = await response.json()
    assert list(payload) == ["detail"]
    assert str(sample_root) not in json.dumps(payload)


# -- service-level errors (400) -----------------------------------------------------------

SERVICE_ERRORS = [
    pytest.param({"query": "release", "mode": "literal", "query_variants": ["rollback"]},
                 "query_variants is supported only with mode=lexical", id="variants-literal"),
    pytest.param({"query": "   ", "query_variants": ["rollback"]},
                 "query is required when query_variants are supplied", id="variants-blank-query"),
    pytest.param({"query_variants": ["rollback", "hotfix"]},
                 "query is required when query_variants are supplied", id="variants-no-query"),
    pytest.param({"query": "release", "mode": "vector", "min_score": 0.5}, MIN_SCORE_VECTOR,
                 id="min-score-vector"),
    pytest.param({"query": "release", "mode": "hybrid", "min_score": 0}, MIN_SCORE_VECTOR,
                 id="min-score-hybrid"),
]


@pytest.mark.parametrize("path", ["/query", "/search"])
@pytest.mark.parametrize(("body", "detail"), SERVICE_ERRORS)
async def test_service_level_errors_are_400(client: Client, path: str, body: dict[str, Any],
                                            detail: str) -> None:
    assert await post(client, path, body, status=400) == {"detail": detail}


@pytest.mark.parametrize("path", ["/query", "/search"])
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
@pytest.mark.parametrize("query", ["release", ""])
async def test_vector_and_hybrid_are_not_enabled(client: Client, path: str, mode: str,
                                                 query: str) -> None:
    payload = await post(client, path, {"query": query, "mode": mode}, status=400)
    assert list(payload) == ["detail"]
    assert payload["detail"].startswith(VECTOR_DISABLED_PREFIX)


async def test_capabilities_advertise_only_working_search_modes(client: Client) -> None:
    for path in ("/health", "/manifest", "/source-bundle"):
        response = await client.get(path)
        assert response.status == 200
        caps = (await response.json())["capabilities"]
        for cap in ("llmwiki_context", "llmwiki_search", "llmwiki_retrieval_v1",
                    "llmwiki_agent_guided_lexical_v1", "llmwiki_search_mode_lexical",
                    "llmwiki_search_mode_literal"):
            assert cap in caps, (path, cap)
        assert "llmwiki_search_mode_vector" not in caps
        assert "llmwiki_search_mode_hybrid" not in caps


# -- empty queries, orientation, answerability --------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", " \t\n "])
async def test_empty_query_is_not_answerable(client: Client, query: str) -> None:
    pack = await context(client, {"query": query})
    assert pack["query"] == query
    assert pack["answerable"] is False
    assert pack["evidence"] == []
    assert pack["limitations"] == [EMPTY_QUERY, WITHHELD_LINE]
    assert pack["graph"] == {"nodes": [], "edges": []}
    assert ids(pack["orientation"]) == ["hot", "index", "overview"]
    assert_serve_guidance(pack["retrieval_guidance"])


@pytest.mark.parametrize("query", ["", "   "])
async def test_empty_search_is_the_overview_listing(client: Client, query: str) -> None:
    results = await search(client, {"query": query, "limit": 30})
    assert len(results) == 12
    assert set(ids(results)) == SAMPLE_APPROVED_IDS
    assert ids(results)[:3] == ["hot", "index", "overview"]
    assert [item["score"] for item in results] == [round(1.0 - 0.01 * i, 2) for i in range(12)]
    assert {item["route"] for item in results} == {"overview"}
    default = await search(client, {"query": query})
    assert default == results[:8]


async def test_literal_empty_query_is_the_overview_listing(client: Client) -> None:
    literal = await search(client, {"query": "  ", "mode": "literal"})
    assert literal == await search(client, {"query": ""})


async def test_orientation_never_makes_a_query_answerable(client: Client) -> None:
    pack = await context(client, {"query": "zzqqxx quuxblorf"})
    assert pack["answerable"] is False
    assert pack["evidence"] == []
    assert ids(pack["orientation"]) == ["hot", "index", "overview"]
    assert pack["limitations"] == [NO_EVIDENCE, WITHHELD_LINE]
    assert pack["graph"] == {"nodes": [], "edges": []}


async def test_orientation_is_entry_pages_in_order(client: Client) -> None:
    pack = await context(client, {"query": "rollback", "limit": 1,
                                  "exclude_page_ids": ["hot", "index"],
                                  "query_variants": ["hotfix"]})
    orientation = pack["orientation"]
    assert ids(orientation) == ["hot", "index", "overview"]
    assert [item["role"] for item in orientation] == ["hot", "index", "overview"]
    assert [item["score"] for item in orientation] == [1.0, 0.99, 0.98]
    assert {item["route"] for item in orientation} == {"orientation"}
    assert orientation[0]["snippet"].startswith("# Current Focus")
    assert len(pack["evidence"]) == 1


@pytest.mark.parametrize(("fixture", "expected"), [
    ("shapes/openwiki-repo", [("quickstart", "index")]),
    ("shapes/korean-wiki", [("hot", "hot"), ("index", "index")]),
    ("shapes/obsidian-vault", [("wiki/hot", "hot"), ("wiki/index", "index"),
                               ("wiki/overview", "overview")]),
    ("shapes/generic-markdown", []),
    ("shapes/logseq-graph", []),
])
async def test_orientation_holds_only_entry_pages(serve_client: ClientFactory, tmp_path: Path,
                                                  fixture: str,
                                                  expected: list[tuple[str, str]]) -> None:
    served = await serve_client(copy_fixture(fixture, tmp_path / "roots"))
    pack = await context(served, {"query": "release"})
    orientation = pack["orientation"]
    assert [(item["page_id"], item["role"]) for item in orientation] == expected
    assert [item["score"] for item in orientation] == [1.0, 0.99, 0.98][: len(expected)]
    assert all(item["route"] == "orientation" for item in orientation)


async def test_generic_folder_without_entry_pages_answers_no_match_unanswerable(
        serve_client: ClientFactory, tmp_path: Path) -> None:
    served = await serve_client(copy_fixture("shapes/generic-markdown", tmp_path / "roots"))
    pack = await context(served, {"query": "zzqqxx"})
    assert (pack["orientation"], pack["evidence"], pack["answerable"]) == ([], [], False)
    assert pack["limitations"] == [NO_EVIDENCE, "1 draft or unapproved page(s) were withheld."]
    guidance = pack["retrieval_guidance"]
    assert_serve_guidance(guidance)
    assert guidance["orientation_source"] == "projection_extractive"


# -- graph: the neighbourhood of the evidence ---------------------------------------------


def edge_key(edge: dict[str, Any]) -> tuple[str, str, str]:
    return (edge["source"], edge["target"], edge["relation"])


@pytest.mark.parametrize("query", ["rollback", "semantic versioning", "signing key", "hotfix"])
async def test_graph_is_the_neighbourhood_of_the_evidence(client: Client, query: str) -> None:
    """Within its size budget: the evidence pages first, every link between them, nothing
    outside their neighbourhood, and `omitted` counting exactly what the budget left out."""
    pack = await context(client, {"query": query})
    full = await (await client.get("/graph?limit=2000")).json()
    seeds = [f"page:{page_id}" for page_id in ids(pack["evidence"])]
    assert seeds
    incident = [e for e in full["edges"] if e["source"] in seeds or e["target"] in seeds]
    expected_nodes = set(seeds) | {e["source"] for e in incident} | {e["target"] for e in incident}
    assert len(expected_nodes) <= 120  # below the default count bound: only the size cuts
    graph = pack["graph"]
    node_ids = [node["id"] for node in graph["nodes"]]
    assert len(node_ids) == len(set(node_ids))
    assert node_ids[: len(seeds)] == seeds
    assert set(node_ids) <= expected_nodes
    kept = {edge_key(e) for e in graph["edges"]}
    assert kept <= {edge_key(e) for e in incident}
    between = {edge_key(e) for e in incident if e["source"] in seeds and e["target"] in seeds}
    assert between <= kept
    by_id = {node["id"]: node for node in full["nodes"]}
    assert all(node == by_id[node["id"]] for node in graph["nodes"])
    assert len(json.dumps({"nodes": graph["nodes"], "edges": graph["edges"]},
                          separators=(",", ":"), ensure_ascii=False).encode()) <= GRAPH_BYTES
    omitted = (len(expected_nodes - set(node_ids)), len(incident) - len(kept))
    if graph.get("truncated"):
        assert list(graph) == ["nodes", "edges", "truncated", "omitted"]
        assert graph["omitted"] == {"nodes": omitted[0], "edges": omitted[1]} != {"nodes": 0, "edges": 0}
    else:
        assert list(graph) == ["nodes", "edges"] and omitted == (0, 0)


async def test_a_cut_graph_keeps_links_before_tags_and_headings(client: Client) -> None:
    """"release" finds the hubs: their neighbourhood is larger than the budget, and what goes
    is headings and tags, not the links (backlinks included) between pages."""
    pack = await context(client, {"query": "release"})
    graph = pack["graph"]
    assert graph["truncated"] is True
    kinds = {node["kind"] for node in graph["nodes"]}
    relations = [edge["relation"] for edge in graph["edges"]]
    assert "links_to" in relations and "heading" not in kinds
    seeds = {f"page:{page_id}" for page_id in ids(pack["evidence"])}
    assert any(e["target"] in seeds and e["source"] not in seeds for e in graph["edges"]
               if e["relation"] == "links_to")  # a backlink from outside the evidence


async def test_include_graph_false_gives_an_empty_graph(client: Client) -> None:
    body = {"query": "rollback"}
    with_graph = await context(client, body)
    without = await context(client, {**body, "include_graph": False})
    assert with_graph["graph"]["nodes"]
    assert without["graph"] == {"nodes": [], "edges": []}
    assert {k: v for k, v in without.items() if k != "graph"} == {
        k: v for k, v in with_graph.items() if k != "graph"}
    await post(client, "/query", {**body, "include_graph": "not a boolean"}, status=422)


async def test_graph_depends_on_the_query(client: Client) -> None:
    rollback = (await context(client, {"query": "rollback"}))["graph"]
    versions = (await context(client, {"query": "semantic versioning", "limit": 1}))["graph"]
    assert rollback["nodes"][0]["id"] == "page:runbooks/rollback"
    assert versions["nodes"][0]["id"] == "page:concepts/semantic-versioning"
    assert rollback != versions


@pytest.mark.parametrize("bound", [1, 5, 17])
async def test_graph_is_bounded_by_context_graph_limit(serve_client: ClientFactory,
                                                       sample_root: Path, bound: int) -> None:
    served = await serve_client(sample_root, context_graph_limit=bound)
    pack = await context(served, {"query": "release"})
    graph = pack["graph"]
    node_ids = {node["id"] for node in graph["nodes"]}
    assert 1 <= len(graph["nodes"]) <= bound
    assert len(graph["edges"]) <= bound
    assert graph["nodes"][0]["id"] == f"page:{pack['evidence'][0]['page_id']}"
    for edge in graph["edges"]:
        assert edge["source"] in node_ids and edge["target"] in node_ids


async def test_context_graph_limit_zero_gives_an_empty_graph_only(serve_client: ClientFactory,
                                                                  sample_root: Path) -> None:
    default = await serve_client(sample_root)
    none = await serve_client(sample_root, context_graph_limit=0)
    body = {"query": "release readiness"}
    with_graph = await context(default, body)
    without = await context(none, body)
    assert without["graph"] == {"nodes": [], "edges": []}
    assert with_graph["graph"]["nodes"]
    assert {k: v for k, v in without.items() if k != "graph"} == {
        k: v for k, v in with_graph.items() if k != "graph"}


# -- literal mode -------------------------------------------------------------------------


async def test_literal_finds_the_exact_korean_phrase(korean: Client) -> None:
    results = await search(korean, {"query": "3차 계약", "mode": "literal"})
    assert ids(results) == ["계약-관리"]
    assert results[0]["route"] == "literal"
    assert "3차 계약" in results[0]["snippet"]
    assert results[0]["score"] > 0
    projected = await search(korean, {"query": "3차  계약", "mode": "literal",
                                      "fields": ["route", "snippet", "page_id"]})
    assert [list(item) for item in projected] == [["page_id", "snippet", "route"]]
    assert projected[0]["snippet"] == results[0]["snippet"]
    assert await search(korean, {"query": "7차 계약서 폐기", "mode": "literal"}) == []
    pack = await context(korean, {"query": "3차 계약", "mode": "literal"})
    assert pack["evidence"] == results and pack["answerable"] is True
    missing = await context(korean, {"query": "7차 계약서 폐기", "mode": "literal"})
    assert (missing["evidence"], missing["answerable"]) == ([], False)
    assert missing["limitations"][0] == NO_EVIDENCE


async def test_literal_is_case_folded_substring_matching(client: Client) -> None:
    upper = await search(client, {"query": "PUBLISH.YML", "mode": "literal", "limit": 30})
    assert set(ids(upper)) == PUBLISH_YML_PAGES
    assert {item["route"] for item in upper} == {"literal"}
    for item in upper:
        assert "publish.yml" in item["snippet"].casefold()
    lower = await search(client, {"query": "publish.yml", "mode": "literal", "limit": 30})
    assert lower == upper


async def test_literal_scores_follow_the_contract_formula(serve_client: ClientFactory,
                                                          tmp_path: Path) -> None:
    reference = await serve_client(copy_fixture("shapes/reference-sample", tmp_path / "roots"))
    observed = await search(reference, {"query": "Requester  Return", "mode": "literal"})
    assert [(i["page_id"], i["score"]) for i in observed] == [("requester-return", 4.5863),
                                                             ("index", 2.9665)]


@pytest.mark.parametrize("phrase", ["release", "publish.yml", "signing key", "v1.2.3",
                                    "SRC-REL-001", "runbooks/", "릴리스"])
async def test_literal_score_formula_on_every_result(client: Client, phrase: str) -> None:
    """score = (1 + min(3, ln(1 + occurrences)) + 1.5 [in title] + 0.7 [in summary])
    x role multiplier, over title, path, summary, text, tags and source refs."""
    multiplier = {"hot": 1.15, "index": 1.06, "overview": 1.03}
    results = await search(client, {"query": phrase, "mode": "literal", "limit": 30})
    assert results
    needle = phrase.casefold()
    for item in results:
        response = await client.get(f"/read/{item['page_id']}")
        page = await response.json()
        haystack = " ".join((page["title"], page["path"], page["summary"], page["text"],
                             " ".join(page["tags"]), " ".join(page["source_refs"]))).casefold()
        count = haystack.count(needle)
        assert count > 0
        score = (1 + min(3.0, math.log(1 + count)) + 1.5 * (needle in page["title"].casefold())
                 + 0.7 * (needle in page["summary"].casefold()))
        score *= multiplier.get(page["role"], 1.0)
        assert item["score"] == pytest.approx(round(score, 4), abs=1e-4), item["page_id"]
    scores = [item["score"] for item in results]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(("phrase", "page"), [("リリース手順", "ja-release-notes"),
                                              ("部署说明", "zh-deploy-notes")])
async def test_literal_cjk_phrases(korean: Client, phrase: str, page: str) -> None:
    results = await search(korean, {"query": phrase, "mode": "literal"})
    assert ids(results) == [page]
    assert phrase in results[0]["snippet"] or phrase in results[0]["title"]


# -- min_score, fields, snippets, exclusions, limits --------------------------------------


async def test_korean_lexical_ranks_focused_page_above_noisy_index(korean: Client) -> None:
    results = await search(korean, {"query": "3차 계약"})
    assert ids(results)[:2] == ["계약-관리", "index"]
    assert results[0]["score"] > 1.5 * results[1]["score"]


@pytest.mark.parametrize(("fixture", "query"), [("shapes/korean-wiki", "3차 계약"),
                                                ("sample-wiki", "rollback")])
async def test_min_score_between_the_top_two_keeps_only_the_first(
        serve_client: ClientFactory, tmp_path: Path, fixture: str, query: str) -> None:
    served = await serve_client(copy_fixture(fixture, tmp_path / "roots"))
    results = await search(served, {"query": query})
    assert len(results) >= 2 and results[0]["score"] > results[1]["score"]
    threshold = (results[0]["score"] + results[1]["score"]) / 2
    filtered = await search(served, {"query": query, "min_score": threshold})
    assert filtered == results[:1]
    pack = await context(served, {"query": query, "min_score": threshold})
    assert pack["evidence"] == results[:1]
    assert await search(served, {"query": query, "min_score": 0}) == results
    assert await search(served, {"query": query, "min_score": results[0]["score"] + 1}) == []


@pytest.mark.parametrize(("query", "threshold"), [("release", 1.0), ("release", 0.9),
                                                  ("signing key", 3.0)])
async def test_min_score_compares_the_reported_score(client: Client, query: str,
                                                     threshold: float) -> None:
    results = await search(client, {"query": query, "limit": 30})
    assert all(abs(item["score"] - threshold) > 0.001 for item in results)
    expected = [item for item in results if item["score"] >= threshold]
    assert expected
    assert await search(client, {"query": query, "limit": 30, "min_score": threshold}) == expected


async def test_limit_only_cuts_the_ranking_on_a_large_candidate_set(
        serve_client: ClientFactory, tmp_path: Path) -> None:
    root = tmp_path / "many-matches"
    root.mkdir()
    for i in range(110):
        (root / f"filler-{i:03d}.md").write_text(
            f"# Filler {i}\n\nThe alpha notes come first. Much later the beta notes follow, "
            "with other words in between.\n", encoding="utf-8")
    (root / "strong.md").write_text("# Strong\n\n" + "alpha then some words then beta. " * 2,
                                    encoding="utf-8")
    (root / "phrase.md").write_text("# Phrase\n\nalpha beta is the name of this topic.\n",
                                    encoding="utf-8")
    served = await serve_client(root)
    full = await search(served, {"query": "alpha beta", "limit": 30})
    assert ids(full)[:2] == ["phrase", "strong"]
    for limit in (1, 2, 3, 5, 8):
        assert await search(served, {"query": "alpha beta", "limit": limit}) == full[:limit]


FIELD_CASES = [
    pytest.param("page_id,score", ["page_id", "score"], id="comma-string"),
    pytest.param(["title"], ["page_id", "title"], id="list"),
    pytest.param(" route , score ,nonsense,page_id,score", ["page_id", "score", "route"],
                 id="messy-string"),
    pytest.param(["snippet", "title", "bogus", "role"], ["page_id", "title", "snippet", "role"],
                 id="canonical-order"),
    pytest.param(["source_refs,path", "route"], ["page_id", "path", "source_refs", "route"],
                 id="commas-inside-list"),
    pytest.param([], ["page_id"], id="empty-list"),
    pytest.param("", ["page_id"], id="empty-string"),
    pytest.param(["unknown", "page_id.x"], ["page_id"], id="only-unknown"),
    pytest.param(5, ["page_id"], id="not-a-list"),
    pytest.param(None, None, id="null"),  # every key, as without `fields`
]


@pytest.mark.parametrize(("fields", "keys"), FIELD_CASES)
async def test_fields_projection_on_search(client: Client, fields: Any, keys: list[str] | None) -> None:
    full = await search(client, {"query": "release"})
    projected = await search(client, {"query": "release", "fields": fields})
    assert len(projected) == len(full) > 0
    for item, whole in zip(projected, full, strict=True):
        wanted = list(whole) if keys is None else keys
        assert list(item) == wanted
        assert item == {k: whole[k] for k in wanted}


@pytest.mark.parametrize(("fields", "keys"), FIELD_CASES)
async def test_fields_projection_on_query_evidence_and_orientation(
        client: Client, fields: Any, keys: list[str] | None) -> None:
    full = await context(client, {"query": "release"})
    pack = await context(client, {"query": "release", "fields": fields})
    for part in ("orientation", "evidence"):
        assert len(pack[part]) == len(full[part]) > 0
        for item, whole in zip(pack[part], full[part], strict=True):
            wanted = list(whole) if keys is None else keys
            assert list(item) == wanted
            assert item == {k: whole[k] for k in wanted}
    # Top-level keys and the guidance are never projected.
    assert {k: v for k, v in pack.items() if k not in ("orientation", "evidence")} == {
        k: v for k, v in full.items() if k not in ("orientation", "evidence")}
    assert_serve_guidance(pack["retrieval_guidance"])


async def test_a_passage_is_left_out_only_beside_a_snippet_that_holds_it(client: Client) -> None:
    question = "How do we roll back a release?"
    full = await context(client, {"query": question})
    alone = await context(client, {"query": question, "fields": ["passage"]})
    both = await context(client, {"query": question, "fields": ["snippet", "passage"]})
    assert full["evidence"] and all(list(i) == ["page_id", "passage"] for i in alone["evidence"])
    held = 0
    for whole, bare, pair in zip(full["evidence"], alone["evidence"], both["evidence"], strict=True):
        inside = bare["passage"].removesuffix("...") in whole["snippet"]
        held += inside
        assert ("passage" in whole) is (not inside) and ("passage" in pair) is (not inside)
        if not inside:
            assert whole["passage"] == pair["passage"] == bare["passage"]
    assert held > 0  # the sample wiki's first sections sit in their snippets
    orientation = await context(client, {"query": question, "fields": ["page_id", "origin"]})
    assert [list(i) for i in orientation["orientation"]] == [["page_id"]] * 3


def within_snippet_budget(snippet: str, limit: int) -> bool:
    """Contract 5.5: a snippet longer than the limit is cut to its first `limit - 1`
    characters, right-stripped, plus `...` (so at most limit + 2 characters)."""
    if len(snippet) <= limit:
        return True
    return snippet.endswith("...") and len(snippet) - 3 <= limit - 1


async def test_snippet_chars(client: Client) -> None:
    default = await context(client, {"query": "release"})
    items = default["orientation"] + default["evidence"]
    assert all(within_snippet_budget(item["snippet"], 280) for item in items)
    assert any(len(item["snippet"]) > 52 for item in items)

    empty = await context(client, {"query": "release", "snippet_chars": 0})
    assert ids(empty["evidence"]) == ids(default["evidence"])
    assert [i["snippet"] for i in empty["orientation"] + empty["evidence"]] == [""] * len(items)
    assert {i["snippet"] for i in await search(client, {"query": "release",
                                                        "snippet_chars": 0})} == {""}

    short = await context(client, {"query": "release", "snippet_chars": 50})
    short_items = short["orientation"] + short["evidence"]
    assert all(item["snippet"] and within_snippet_budget(item["snippet"], 50)
               for item in short_items)
    for item in await search(client, {"query": "release", "snippet_chars": 50}):
        assert item["snippet"] and within_snippet_budget(item["snippet"], 50)
        assert "release" in item["snippet"].lower() or item["snippet"].endswith("...")

    for size in (60, 280):
        literal = await search(client, {"query": "ExportJob.rotateToken", "mode": "literal",
                                        "snippet_chars": size})
        assert ids(literal) == ["runbooks/token-rotation"]
        assert within_snippet_budget(literal[0]["snippet"], size)
    assert "ExportJob.rotateToken" in literal[0]["snippet"]  # the window holds the hit

    wide = await search(client, {"query": "release", "snippet_chars": 2000, "limit": 1})
    assert len(wide[0]["snippet"]) > 282
    assert within_snippet_budget(wide[0]["snippet"], 2000)


@pytest.mark.parametrize("exclusion", [
    ["runbooks/rollback"], ["runbooks/rollback.md"], "runbooks/rollback", " runbooks/rollback.md ",
    ["index,runbooks/rollback"], "index, runbooks/rollback.md,nosuchpage",
])
async def test_exclude_page_ids_by_id_or_path(client: Client, exclusion: Any) -> None:
    full = await search(client, {"query": "rollback"})
    assert "runbooks/rollback" in ids(full)
    kept = await search(client, {"query": "rollback", "exclude_page_ids": exclusion})
    assert "runbooks/rollback" not in ids(kept)
    assert kept  # something else still matches
    # Exclusions change neither the statistics nor the other pages' scores.
    assert kept == [item for item in full if item["page_id"] in ids(kept)]
    assert set(ids(full)) - set(ids(kept)) <= {"runbooks/rollback", "index"}
    pack = await context(client, {"query": "rollback", "exclude_page_ids": exclusion})
    assert pack["evidence"] == kept
    assert ids(pack["orientation"]) == ["hot", "index", "overview"]  # unaffected


async def test_excluding_every_match_leaves_no_evidence(client: Client) -> None:
    everything = await search(client, {"query": "rollback", "limit": 30})
    pack = await context(client, {"query": "rollback",
                                  "exclude_page_ids": [i["path"] for i in everything]})
    assert (pack["evidence"], pack["answerable"]) == ([], False)
    assert pack["limitations"] == [NO_EVIDENCE, WITHHELD_LINE]
    assert pack["graph"] == {"nodes": [], "edges": []}


async def test_exclusions_apply_to_literal_and_overview(client: Client) -> None:
    literal = await search(client, {"query": "publish.yml", "mode": "literal",
                                    "exclude_page_ids": ["hot", "release-checklist.md"]})
    assert set(ids(literal)) == PUBLISH_YML_PAGES - {"hot", "release-checklist"}
    overview = await search(client, {"query": "", "exclude_page_ids": "hot,index.md"})
    assert ids(overview)[0] == "overview"
    assert [i["score"] for i in overview] == [round(1.0 - 0.01 * i, 2) for i in range(8)]
    assert not {"hot", "index"} & set(ids(overview))


async def test_default_limit_is_eight_and_explicit_limit_overrides(client: Client) -> None:
    everything = await search(client, {"query": "release", "limit": 30})
    assert len(everything) > 8
    assert await search(client, {"query": "release"}) == everything[:8]
    assert await search(client, {"query": "release", "limit": 3}) == everything[:3]
    pack = await context(client, {"query": "release", "limit": 30})
    assert pack["evidence"] == everything


async def test_configured_default_limit(serve_client: ClientFactory, sample_root: Path) -> None:
    served = await serve_client(sample_root, context_default_limit=2)
    everything = await search(served, {"query": "release", "limit": 30})
    assert await search(served, {"query": "release"}) == everything[:2]
    assert (await context(served, {"query": "release"}))["evidence"] == everything[:2]
    assert await search(served, {"query": "release", "limit": 4}) == everything[:4]
    assert (await context(served, {"query": "release", "limit": 4}))["evidence"] == everything[:4]
    assert len(await search(served, {"query": ""})) == 2
    assert len(await search(served, {"query": "publish.yml", "mode": "literal"})) == 2
    # orientation is not limited by the evidence limit
    assert len((await context(served, {"query": "release"}))["orientation"]) == 3


# -- query_variants fusion ----------------------------------------------------------------


@pytest.mark.parametrize(("query", "variants", "limit"), [
    ("release", ["rollback", "hotfix"], 8),
    ("release", ["rollback", "hotfix"], 2),
    ("signing key", ["token rotation"], 5),
    ("3차 계약", ["환불 정책", "REFUND_WINDOW_DAYS"], 8),
])
async def test_query_variants_fuse_by_reciprocal_rank(client: Client, korean: Client,
                                                      query: str, variants: list[str],
                                                      limit: int) -> None:
    served = korean if query.startswith("3") else client
    channels = [await search(served, {"query": text, "limit": limit})
                for text in [query, *variants]]
    fused = await search(served, {"query": query, "query_variants": variants, "limit": limit})
    assert [(item["page_id"], item["score"]) for item in fused] == expected_fusion(channels,
                                                                                   limit)
    assert len(fused) <= limit
    assert {item["route"] for item in fused} == {"search"}
    for item in fused:
        assert round(item["score"], 6) == item["score"]
        source = next(c for channel in channels for c in channel
                      if c["page_id"] == item["page_id"])
        assert {k: v for k, v in item.items() if k != "score"} == {
            k: v for k, v in source.items() if k != "score"}
    pack = await context(served, {"query": query, "query_variants": variants, "limit": limit})
    assert pack["evidence"] == fused


async def test_variants_share_limit_exclusions_and_min_score(client: Client) -> None:
    args: dict[str, Any] = {"limit": 4, "exclude_page_ids": ["hot", "index.md"],
                            "min_score": 0.9}
    channels = [await search(client, {"query": text, **args})
                for text in ("release", "rollback", "hotfix")]
    fused = await search(client, {"query": "release", "query_variants": ["rollback", "hotfix"],
                                  **args})
    assert fused
    assert [(i["page_id"], i["score"]) for i in fused] == expected_fusion(channels, 4)
    assert not {"hot", "index"} & set(ids(fused))
    snippets = await search(client, {"query": "release", "query_variants": ["rollback"],
                                     "snippet_chars": 0, "fields": "snippet,route"})
    assert snippets and all(item == {"page_id": item["page_id"], "snippet": "",
                                     "route": "search"} for item in snippets)


async def test_duplicate_variants_collapse(client: Client) -> None:
    plain = await post(client, "/search", {"query": "release"})
    same = await post(client, "/search", {"query": " release ",
                                          "query_variants": ["Release", " RELEASE "]})
    assert same == plain  # one channel: a plain search, scores untouched
    two = await search(client, {"query": "release", "query_variants": ["rollback", "ROLLBACK"]})
    channels = [await search(client, {"query": "release"}),
                await search(client, {"query": "rollback"})]
    assert [(i["page_id"], i["score"]) for i in two] == expected_fusion(channels, 8)


async def test_unicode_variants_fuse_deterministically(korean: Client) -> None:
    body = {"query": "계약", "query_variants": ["CONTRACT-2026-03", "部署说明"]}
    first = await post(korean, "/search", body)
    second = await post(korean, "/search", body)
    assert first == second
    assert "계약-관리" in ids(first["results"])
    assert "zh-deploy-notes" in ids(first["results"])


# -- ranking: global/local questions, languages, identifiers ------------------------------


@pytest.mark.parametrize(("query", "top"), [
    ("what is in this wiki?", "index"),
    ("what topics does this operations wiki cover?", "index"),
    ("what is the current focus?", "hot"),
    ("what is the team shipping this week?", "hot"),
    ("which branch should an emergency patch be cut from?", "runbooks/hotfix-release"),
    ("a version we published is broken, how do we take it back?", "runbooks/rollback"),
    ("how many days do customers have to ask for a refund by default?", "concepts/config-flags"),
    ("where do release candidate builds get published?", "concepts/semantic-versioning"),
    ("who has to review edits to the list of release steps?", "overview"),
    ("고객사에 배포 일정을 언제 알려야 하나요?", "ko/release-checklist-ko"),
])
async def test_judged_questions_on_the_sample_wiki(client: Client, query: str, top: str) -> None:
    pack = await context(client, {"query": query})
    assert ids(pack["evidence"])[0] == top
    assert pack["answerable"] is True
    assert [item["role"] for item in pack["orientation"]][:2] == ["hot", "index"]
    assert {item["route"] for item in pack["orientation"]} == {"orientation"}
    assert {item["route"] for item in pack["evidence"]} == {"search"}


@pytest.mark.parametrize(("query", "top"), [
    ("3차 계약서는 언제 서명했나요?", "계약-관리"),
    ("결제 오류로 두 번 청구되면 환불받을 수 있나요?", "환불-정책"),
    ("서비스 장애 등급은 어떻게 구분하나요?", "장애-대응"),
    ("회귀 테스트는 어느 환경에서 실행하나요?", "릴리스-체크리스트"),
    ("이 위키에는 어떤 문서들이 모여 있나요?", "index"),
    ("リリースの前に何を確認しますか？", "ja-release-notes"),
    ("本番環境への配布は何曜日ですか", "ja-release-notes"),
    ("リリース手順", "ja-release-notes"),
    ("部署前在哪个环境验证？", "zh-deploy-notes"),
    ("什么时候发布到生产环境？", "zh-deploy-notes"),
    ("部署说明", "zh-deploy-notes"),
    ("REFUND_WINDOW_DAYS", "환불-정책"),
    ("CONTRACT-2026-03", "계약-관리"),
])
async def test_korean_japanese_chinese_queries(korean: Client, query: str, top: str) -> None:
    results = await search(korean, {"query": query})
    assert ids(results)[0] == top
    assert KOREAN_DRAFT_ID not in ids(results)


@pytest.mark.parametrize(("query", "top"), [
    ("REFUND_WINDOW_DAYS", "concepts/config-flags"),
    ("ExportJob.rotateToken", "runbooks/token-rotation"),
    ("when is ExportJob.rotateToken called?", "runbooks/token-rotation"),
    ("snake_case_name", "concepts/config-flags"),
    ("v1.3.0-rc.1", "concepts/semantic-versioning"),
    ("release_signing_key", "concepts/artifact-signing"),
])
async def test_identifier_queries(client: Client, query: str, top: str) -> None:
    results = await search(client, {"query": query})
    assert ids(results)[0] == top
    if len(results) > 1:
        assert results[0]["score"] > results[1]["score"]


async def test_publish_yml_finds_the_pages_that_mention_it(client: Client) -> None:
    results = await search(client, {"query": "publish.yml"})
    assert set(ids(results)[:4]) == PUBLISH_YML_PAGES


@pytest.mark.parametrize(("plain", "punctuated"), [
    ("release", "release."),
    ("rollback", "rollback?!"),
    ("signing key", "signing key,"),
    ("3차 계약", "3차 계약."),
])
async def test_trailing_punctuation_does_not_matter(client: Client, korean: Client, plain: str,
                                                    punctuated: str) -> None:
    served = korean if plain.startswith("3") else client
    expected = await search(served, {"query": plain})
    assert expected
    assert await search(served, {"query": punctuated}) == expected


async def test_hub_pages_never_appear_unless_they_match(client: Client) -> None:
    results = await search(client, {"query": "ExportJob.rotateToken", "limit": 30})
    assert "hot" not in ids(results)  # hot.md does not mention it
    assert "overview" not in ids(results)


# -- withheld pages -----------------------------------------------------------------------

LEAK_MARKERS = [DRAFT_NEEDLE, PRIVATE_NEEDLE, DRAFT_ID, DRAFT_PATH, DRAFT_TITLE, PRIVATE_ID,
                PRIVATE_PATH, PRIVATE_TITLE, "codename", "Escalation contacts"]


def without_query_echo(pack: dict[str, Any]) -> dict[str, Any]:
    """The pack minus what only echoes the client's own query text back."""
    guidance = dict(pack["retrieval_guidance"])
    query_words = {w.casefold().strip("?.,") for w in pack["query"].split()}
    guidance["suggested_terms"] = [t for t in guidance["suggested_terms"]
                                   if t.casefold() not in query_words]
    return {**{k: v for k, v in pack.items() if k != "query"}, "retrieval_guidance": guidance}


WITHHELD_QUERIES = [
    {"query": DRAFT_NEEDLE},
    {"query": f"codename {DRAFT_NEEDLE}"},
    {"query": PRIVATE_NEEDLE},
    {"query": DRAFT_NEEDLE.lower(), "mode": "literal"},
    {"query": PRIVATE_NEEDLE, "mode": "literal"},
    {"query": "codename", "mode": "literal"},
    {"query": DRAFT_NEEDLE, "include_drafts": True},
    {"query": PRIVATE_NEEDLE, "include_drafts": True, "mode": "literal"},
]


@pytest.mark.parametrize("body", WITHHELD_QUERIES)
async def test_withheld_needles_are_never_found(client: Client, body: dict[str, Any]) -> None:
    pack = await context(client, body)
    assert pack["evidence"] == []
    assert pack["answerable"] is False
    assert pack["limitations"] == [NO_EVIDENCE, WITHHELD_LINE]
    assert pack["graph"] == {"nodes": [], "edges": []}
    text = json.dumps(without_query_echo(pack), ensure_ascii=False).casefold()
    for marker in LEAK_MARKERS:
        assert marker.casefold() not in text, marker
    assert await search(client, body) == []


@pytest.mark.parametrize("body", [
    {"query": "release incident customer messages"},
    {"query": "code signing vendor support line"},
    {"query": "Incident Communications"},
    {"query": "release captain account reference"},
    {"query": "release", "limit": 30},
    {"query": "", "limit": 30},
    {"query": "release", "mode": "literal", "limit": 30},
])
async def test_withheld_pages_leave_no_trace_in_matching_packs(client: Client,
                                                               body: dict[str, Any]) -> None:
    pack = await context(client, body)
    results = await search(client, body)
    assert set(ids(results)) <= SAMPLE_APPROVED_IDS
    text = json.dumps(without_query_echo(pack), ensure_ascii=False).casefold()
    for marker in (DRAFT_NEEDLE, PRIVATE_NEEDLE, DRAFT_ID, DRAFT_PATH, PRIVATE_PATH,
                   DRAFT_TITLE, PRIVATE_TITLE):
        assert marker.casefold() not in text, marker
    assert WITHHELD_LINE in pack["limitations"]


@pytest.mark.parametrize("body", [
    {"query": "release"},
    {"query": "release incident customer messages", "limit": 30},
    {"query": "code signing vendor escalation contacts"},
    {"query": f"codename {DRAFT_NEEDLE}"},
    {"query": "release", "mode": "literal", "limit": 30},
    {"query": "release", "query_variants": ["incident", "vendor"]},
    {"query": ""},
])
async def test_withheld_pages_do_not_influence_anything_visible(
        serve_client: ClientFactory, tmp_path: Path, body: dict[str, Any]) -> None:
    """The same folder with the withheld files deleted answers identically, scores,
    snippets, graph and guidance included; only the page count and the note differ."""
    with_drafts = copy_fixture("sample-wiki", tmp_path / "a")
    without = copy_fixture("sample-wiki", tmp_path / "b")
    (without / DRAFT_PATH).unlink()
    (without / PRIVATE_PATH).unlink()
    a = await serve_client(with_drafts)
    b = await serve_client(without, cache_dir=tmp_path / "cache-b")
    pack_a = await context(a, body)
    pack_b = await context(b, body)
    assert pack_a["page_count"] == 14 and pack_b["page_count"] == 12
    assert WITHHELD_LINE in pack_a["limitations"]
    assert [line for line in pack_a["limitations"] if line != WITHHELD_LINE] == \
        pack_b["limitations"]
    # Origins name the source's bundle (/source-bundle's bundle_id), which identifies all of
    # its files, withheld ones included, as it always has: the rest must not differ.
    for pack, client in ((pack_a, a), (pack_b, b)):
        bundle = (await (await client.get("/source-bundle")).json())["bundle_id"]
        for item in pack["evidence"]:  # orientation items have no origin
            assert item["origin"].pop("bundle_id") == bundle
    for key in PACK_KEYS:
        if key not in ("page_count", "limitations"):
            assert pack_a[key] == pack_b[key], key
    found_a, found_b = await search(a, body), await search(b, body)
    for item in found_a + found_b:
        del item["origin"]["bundle_id"]
    assert found_a == found_b


async def test_korean_withheld_needle(korean: Client) -> None:
    for body in ({"query": KOREAN_DRAFT_NEEDLE}, {"query": f"{KOREAN_DRAFT_NEEDLE} 작전"},
                 {"query": KOREAN_DRAFT_NEEDLE, "mode": "literal"}):
        pack = await context(korean, body)
        assert (pack["evidence"], pack["answerable"]) == ([], False)
        assert pack["limitations"] == [NO_EVIDENCE,
                                       "1 draft or unapproved page(s) were withheld."]
        text = json.dumps(without_query_echo(pack), ensure_ascii=False)
        assert KOREAN_DRAFT_NEEDLE not in text
        assert KOREAN_DRAFT_ID not in text


async def test_allow_drafts_with_include_drafts_finds_withheld_pages(
        serve_client: ClientFactory, sample_root: Path) -> None:
    served = await serve_client(sample_root, allow_drafts=True)
    assert await search(served, {"query": DRAFT_NEEDLE}) == []  # still opt-in per request
    found = await search(served, {"query": DRAFT_NEEDLE, "include_drafts": True})
    assert ids(found) == [DRAFT_ID]
    assert DRAFT_NEEDLE in found[0]["snippet"]
    private = await search(served, {"query": PRIVATE_NEEDLE, "include_drafts": True,
                                    "mode": "literal"})
    assert ids(private) == [PRIVATE_ID]
    assert private[0]["route"] == "literal"
    pack = await context(served, {"query": DRAFT_NEEDLE, "include_drafts": "yes"})
    assert ids(pack["evidence"]) == [DRAFT_ID]
    assert pack["answerable"] is True
    assert pack["limitations"] == []
    assert f"page:{DRAFT_ID}" in {node["id"] for node in pack["graph"]["nodes"]}
    overview = await search(served, {"query": "", "include_drafts": True, "limit": 30})
    assert len(overview) == 14


# -- freshness ----------------------------------------------------------------------------


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "scan"])
async def test_search_sees_edits_deletions_and_additions(serve_client: ClientFactory,
                                                         sample_root: Path,
                                                         inotify: bool) -> None:
    served = await serve_client(sample_root, inotify=inotify)
    word = "quokkazanzibar"
    assert await search(served, {"query": word}) == []
    assert "packaging-pipeline" in ids(await search(served, {"query": "packaging pipeline"}))

    page = sample_root / "runbooks" / "rollback.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\nThe {word} drill is yearly.\n",
                    encoding="utf-8")
    assert ids(await search(served, {"query": word})) == ["runbooks/rollback"]
    literal = await search(served, {"query": f"{word} drill", "mode": "literal"})
    assert ids(literal) == ["runbooks/rollback"]
    pack = await context(served, {"query": word})
    assert ids(pack["evidence"]) == ["runbooks/rollback"]

    (sample_root / "packaging-pipeline.md").unlink()
    for query in ("packaging pipeline", "linux installers", ""):
        assert "packaging-pipeline" not in ids(await search(served, {"query": query,
                                                                     "limit": 30}))
    assert (await context(served, {"query": "rollback"}))["page_count"] == 13

    new = sample_root / "runbooks" / "capybara-drill.md"
    new.write_text("---\ntitle: Capybara Drill\n---\n# Capybara Drill\n\n"
                   "The capybaraferry checklist covers the yearly drill.\n", encoding="utf-8")
    found = await search(served, {"query": "capybaraferry"})
    assert ids(found) == ["runbooks/capybara-drill"]
    assert found[0]["title"] == "Capybara Drill"


async def test_page_turned_draft_disappears_at_once(serve_client: ClientFactory,
                                                    sample_root: Path) -> None:
    served = await serve_client(sample_root)
    assert ids(await search(served, {"query": "rollback"}))[0] == "runbooks/rollback"
    page = sample_root / "runbooks" / "rollback.md"
    text = page.read_text(encoding="utf-8")
    assert "review_state: approved\n" in text
    page.write_text(text.replace("review_state: approved\n", "review_state: draft\n"),
                    encoding="utf-8")
    assert "runbooks/rollback" not in ids(await search(served, {"query": "rollback",
                                                                "limit": 30}))
    pack = await context(served, {"query": "rollback"})
    assert "3 draft or unapproved page(s) were withheld." in pack["limitations"]
    assert "page:runbooks/rollback" not in {n["id"] for n in pack["graph"]["nodes"]}
    page.write_text(text, encoding="utf-8")
    assert ids(await search(served, {"query": "rollback"}))[0] == "runbooks/rollback"


async def test_incremental_index_matches_a_fresh_start(serve_client: ClientFactory,
                                                       sample_root: Path,
                                                       tmp_path: Path) -> None:
    """Many edits (enough to trigger compaction), a deletion, an addition and an approval
    flip, each searched in between: the live index then ranks exactly like a new server."""
    served = await serve_client(sample_root)
    page = sample_root / "concepts" / "semantic-versioning.md"
    original = page.read_text(encoding="utf-8")
    words = ["wombatalpha", "wombatbravo", "wombatcharlie", "wombatdelta", "wombatecho"]
    for i in range(80):
        word = words[i % len(words)]
        page.write_text(original + f"\nRevision note: release {word} checks.\n",
                        encoding="utf-8")
        assert ids(await search(served, {"query": word})) == ["concepts/semantic-versioning"]
    (sample_root / "runbooks" / "hotfix-release.md").unlink()
    (sample_root / "new-page.md").write_text("# Release Wombat Notes\n\nwombatecho release "
                                             "notes for the packaging pipeline.\n",
                                             encoding="utf-8")
    signing = sample_root / "concepts" / "artifact-signing.md"
    signing.write_text("---\nstatus: private\n" + signing.read_text(encoding="utf-8")[4:],
                       encoding="utf-8")
    live = await context(served, {"query": "signing key", "limit": 30})
    assert (live["page_count"], live["approved_page_count"]) == (14, 11)
    assert "concepts/artifact-signing" not in ids(live["evidence"])
    assert "runbooks/hotfix-release" not in ids(live["evidence"])
    fresh = await serve_client(sample_root, cache_dir=tmp_path / "fresh-cache")
    for body in ({"query": "release", "limit": 30}, {"query": "wombatecho release"},
                 {"query": "signing key packaging pipeline", "limit": 30},
                 {"query": "release", "query_variants": ["wombatecho", "rollback"]},
                 {"query": "wombat", "mode": "literal", "limit": 30}, {"query": "", "limit": 30}):
        assert await post(served, "/search", body) == await post(fresh, "/search", body), body
        assert await post(served, "/query", body) == await post(fresh, "/query", body), body


# -- bad input (issue 3) ------------------------------------------------------------------

BAD_INPUTS = [
    pytest.param({"query": ""}, id="empty"),
    pytest.param({"query": " \t\r\n  "}, id="whitespace"),
    pytest.param({"query": "release readiness " * 6000}, id="100KB"),
    pytest.param({"query": "x" * 102400}, id="100KB-one-word"),
    pytest.param({"query": "\x00\x01rel\x07ease\x1b[31m\x7f\u200b\ufeff\u202e"},
                 id="control-chars"),
    pytest.param({"query": "release 릴리스 リリース 部署 релиз αβγ 🚀 e\u0301"}, id="mixed-script"),
    pytest.param({"query": "🚀🚀🚀 ??? ... ---"}, id="symbols-only"),
    pytest.param({"query": "release", "fields": ["unknown", "__class__", "page_id.x"]},
                 id="unknown-fields"),
    pytest.param({"query": "release", "exclude_page_ids": [f"page-{i}" for i in range(5000)]},
                 id="5000-exclusions"),
    pytest.param({"query": "release", "snippet_chars": 10**12}, id="huge-snippet-chars"),
    pytest.param({"query": "release", "snippet_chars": -10**12}, id="negative-snippet-chars"),
    pytest.param({"query": "release", "limit": 10**30}, id="huge-limit"),
    pytest.param({"query": "release", "min_score": 1e308}, id="huge-min-score"),
    pytest.param({"query": "release", "min_score": "NaN"}, id="nan-min-score"),
    pytest.param({"query": "release", "query_variants": ["x" * 50000, "\x00"]},
                 id="odd-variants"),
    pytest.param({"query": "\x00" * 1000, "mode": "literal"}, id="literal-nul"),
    pytest.param({"query": "release " * 12000, "mode": "literal"}, id="literal-100KB"),
    pytest.param({"query": "../../etc/passwd", "exclude_page_ids": "../../etc/passwd"},
                 id="path-traversal"),
    pytest.param({"query": "release", "include_drafts": "maybe"}, id="bad-bool"),
    pytest.param({"query": "release", "unknown_key": {"nested": [1, 2]}}, id="unknown-key"),
]


@pytest.mark.parametrize("path", ["/query", "/search"])
@pytest.mark.parametrize("body", BAD_INPUTS)
async def test_bad_input_is_a_sane_result_or_a_clear_4xx(client: Client, sample_root: Path,
                                                         path: str, body: dict[str, Any]) -> None:
    response = await client.post(path, json=body)
    text = await response.text()
    assert response.status < 500, text
    assert response.status in (200, 400, 413, 422), text
    assert str(sample_root) not in text
    assert str(sample_root.parent) not in text
    payload = json.loads(text)
    if response.status == 200:
        if path == "/search":
            roundtrips(SearchResponse, payload)
            assert set(ids(payload["results"])) <= SAMPLE_APPROVED_IDS
        else:
            ContextPack.model_validate(payload)
            assert list(payload) == PACK_KEYS
            assert_serve_guidance(payload["retrieval_guidance"])
            assert set(ids(payload["evidence"])) <= SAMPLE_APPROVED_IDS
    else:
        assert "detail" in payload


async def test_bad_input_expectations(client: Client) -> None:
    """The concrete outcomes for the issue-3 inputs that have an obvious right answer."""
    long = await search(client, {"query": "release readiness " * 6000, "limit": 30})
    assert set(ids(long)) == set(ids(await search(client, {"query": "release readiness",
                                                           "limit": 30})))
    control = await search(client, {"query": "\x00rollback\x07"})
    assert ids(control)[0] == "runbooks/rollback"
    unknown = await search(client, {"query": "release", "fields": ["unknown", "__class__"]})
    assert unknown and all(list(item) == ["page_id"] for item in unknown)
    many = [f"page-{i}" for i in range(5000)] + sorted(SAMPLE_APPROVED_IDS - {"hot"})
    excluded = await search(client, {"query": "release", "exclude_page_ids": many})
    assert ids(excluded) == ["hot"]
    pack = await context(client, {"query": "release", "exclude_page_ids": many})
    assert ids(pack["evidence"]) == ["hot"]
    for body, loc in (({"query": "r", "snippet_chars": 10**12}, ["body", "snippet_chars"]),
                      ({"query": "r", "limit": 10**30}, ["body", "limit"])):
        payload = await post(client, "/search", body, status=422)
        assert payload["detail"][0]["loc"] == loc
    mixed = await context(client, {"query": "release 릴리스 リリース 部署 🚀"})
    assert mixed["answerable"] is True
    assert "ko/release-checklist-ko" in ids(mixed["evidence"])


@pytest.mark.parametrize("path", [
    "/query",
    "/search",
])
async def test_lone_surrogate_query_is_not_a_server_error(client: Client, path: str) -> None:
    """JSON allows escaped lone surrogates; the result must still be a 200 or a clear 4xx."""
    raw = b'{"query": "\\ud800release"}'
    response = await client.post(path, data=raw, headers={"Content-Type": "application/json"})
    text = await response.text()
    assert response.status < 500, text
    assert response.status in (200, 400, 422), text
    payload = json.loads(text)
    if response.status == 200 and path == "/query":
        assert list(payload) == PACK_KEYS
        assert payload["query"] == "\ud800release"
        # "release" was searched (the hot page, a hub, now stays in orientation).
        assert "release-checklist" in ids(payload["evidence"])
    elif response.status == 200:
        assert "release-checklist" in ids(payload["results"])


@pytest.mark.parametrize("inline_reads", [0, 512])
async def test_a_literal_search_over_its_inline_read_budget_moves_to_a_worker_thread(
        client: Client, monkeypatch: pytest.MonkeyPatch, inline_reads: int) -> None:
    source = client.app[http.SOURCE_KEY]
    await search(client, {"query": "warm"})  # the index exists: lexical requests stay inline
    calls: list[tuple[bool, int | None]] = []
    context_json = source.context_json

    def recorded(req: SearchRequest) -> bytes:
        calls.append((threading.current_thread() is threading.main_thread(), req.read_budget))
        return context_json(req)

    monkeypatch.setattr(source, "context_json", recorded)
    monkeypatch.setattr(off_loop, "LITERAL_INLINE_READS", inline_reads)
    body = {"query": "release", "mode": "literal", "limit": 5}
    pack = await context(client, body)
    unbounded = source.search(source.request(query="release", mode="literal", limit=5)).results
    assert pack["evidence"] == unbounded and unbounded
    if inline_reads:  # a few pages to read: answered on the event loop
        assert calls == [(True, inline_reads)]
    else:  # over budget: tried on the loop, then run again, unbounded, in a worker thread
        assert calls == [(True, 0), (False, None)]


async def test_a_search_that_would_sync_the_whole_index_runs_in_a_worker_thread(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a checkout or a recompiled wiki the index is rebuilt for the next search: seconds
    at scale, so that search leaves the loop (and /health keeps answering); after an edit of a
    page or two it stays on the loop."""
    source = client.app[http.SOURCE_KEY]
    await search(client, {"query": "warm"})
    calls: list[bool] = []
    context_json = source.context_json

    def recorded(req: SearchRequest) -> bytes:
        calls.append(threading.current_thread() is threading.main_thread())
        return context_json(req)

    monkeypatch.setattr(source, "context_json", recorded)
    edited = source.root / "runbooks" / "rollback.md"
    pages = [page for page in sorted(source.root.rglob("*.md")) if page != edited]
    for page in pages[: len(pages) // 2]:
        page.write_text(page.read_text(encoding="utf-8") + "\nCheckout wombat.\n", encoding="utf-8")
    pack = await context(client, {"query": "checkout wombat", "limit": 3})
    assert calls == [False] and pack["evidence"]
    edited.write_text(edited.read_text(encoding="utf-8") + "\nOne numbat.\n", encoding="utf-8")
    pack = await context(client, {"query": "numbat", "limit": 3})
    assert calls == [False, True] and pack["evidence"]
