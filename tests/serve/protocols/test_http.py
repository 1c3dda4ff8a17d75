"""HTTP contract of serve's read surfaces: statuses, exact shapes, limits, drafts, errors."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import BaseModel

from common.schemas import (
    ErrorBody,
    GraphNeighborhoodResponse,
    GraphResponse,
    HealthResponse,
    HttpDetailResponse,
    HTTPValidationError,
    ReadNotFound,
    SourceBundleManifest,
    SourceRefsResponse,
    WikiManifest,
    WikiPage,
)
from common.version import __version__
from serve.protocols.http import SOURCE_KEY
from tests.support.folders import copy_fixture

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

HEALTH_KEYS = ["status", "service", "version", "source", "capabilities", "endpoints", "cors",
               "diagnostics", "ready", "phase", "readiness"]
READINESS_KEYS = ["phase", "pages", "indexed_documents", "index_origin", "seconds_since_start"]
HEALTH_SOURCE_KEYS = ["source_id", "bundle_id", "public_uri", "title", "adapter",
                      "implementation", "page_count", "approved_page_count", "projection"]
PROJECTION_KEYS = ["signature", "page_count", "approved_page_count", "graph_node_count",
                   "graph_edge_count"]
ENDPOINTS = {
    "health": "/health", "manifest": "/manifest", "source_bundle": "/source-bundle",
    "source_refs": "/source-refs", "query": "/query", "search": "/search",
    "read": "/read/{page_id}", "graph": "/graph", "graph_neighborhood": "/graph/neighborhood",
    "mcp_jsonrpc": "/mcp", "mcp_streamable_http": "/mcp/stream",
    "openapi": "/openapi.json", "docs": "/docs",
    "a2a_agent_card": "", "a2a_message_send": "",
}
MANIFEST_KEYS = ["title", "description", "root", "source_id", "bundle_id", "public_uri",
                 "adapter", "implementation", "source_profile", "format_version", "page_count",
                 "approved_page_count", "hot_page", "index_page", "overview_page", "projection",
                 "raw_origins", "capabilities"]
BUNDLE_KEYS = ["source_id", "bundle_id", "public_uri", "title", "description", "adapter",
               "implementation", "source_profile", "format_version", "projection",
               "raw_origins", "capabilities", "source_refs"]
REF_KEYS = ["id", "label", "kind", "uri", "linked_pages", "linked_page_ids", "locator"]
PAGE_KEYS = ["id", "title", "path", "role", "text", "summary", "frontmatter", "review_state",
             "status", "source_refs", "tags", "links", "headings", "updated_at", "okf"]
NEIGHBORHOOD_KEYS = ["seeds", "unmatched", "depth", "direction", "relations", "nodes", "edges"]
CAPABILITIES = ["llmwiki_source_bundle", "llmwiki_context", "llmwiki_search", "llmwiki_read",
                "llmwiki_graph", "llmwiki_graph_neighbors", "llmwiki_source_refs",
                "mcp-jsonrpc", "mcp-streamable-http", "llmwiki_retrieval_v1",
                "llmwiki_agent_guided_lexical_v1",
                "llmwiki_search_mode_lexical", "llmwiki_search_mode_literal",
                "llmwiki_search_filters_v1"]

SAMPLE_SOURCE_ID = "sample-operations-wiki"
SAMPLE_TITLE = "Sample Operations Wiki"
SAMPLE_DESCRIPTION = "Release and packaging operations notes for a small software team."
DRAFT_PAGE = "runbooks/incident-comms"
PAGE_NOT_FOUND = {"detail": "page not found"}
WITHHELD = {"found": False, "reason": "not approved for serving"}


def validated(model: type[BaseModel], body: dict[str, Any]) -> None:
    """The body parses as the wire model and nothing is lost or added by the round trip."""
    assert model.model_validate(body).model_dump(mode="json") == body


async def get_json(client: Client, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    return await response.json()


@pytest.fixture
def native_root(tmp_path: Path) -> Path:
    return copy_fixture("shapes/native-wiki-root", tmp_path / "roots")


@pytest.fixture
def many_nodes_root(tmp_path: Path) -> Path:
    """fixtures/adversarial has a page with 5000 distinct wikilinks: over 5000 graph nodes."""
    return copy_fixture("adversarial", tmp_path / "roots")


# -- discovery ------------------------------------------------------------------------


async def test_health_ready_answers_503_until_the_warm_up_is_done(serve_client: ClientFactory,
                                                                  sample_root: Path) -> None:
    client = await serve_client(sample_root)
    source = client.app[SOURCE_KEY]
    assert await asyncio.get_running_loop().run_in_executor(None, source.warmed.wait, 60)
    answer = await client.get("/health?ready=1")
    body = await answer.json()
    assert answer.status == 200 and body["ready"] is True and body["phase"] == "ready"
    assert list(body["readiness"]) == READINESS_KEYS
    assert body["readiness"]["indexed_documents"] == body["source"]["page_count"] == 14
    source.warmed.clear()  # as before the warm-up ran: the same document, with 503
    answer = await client.get("/health?ready=true")
    waiting = await answer.json()
    assert answer.status == 503 and waiting["status"] == "ok" and waiting["ready"] is False
    assert waiting["phase"] == "indexing"
    plain = await client.get("/health")  # without the parameter, compatibility: 200
    assert plain.status == 200 and (await plain.json())["ready"] is False
    bad = await client.get("/health?ready=perhaps")
    assert bad.status == 422


async def test_health_shape(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/health")
    assert list(body) == HEALTH_KEYS
    assert body["status"] == "ok"
    assert body["service"] == "llmwiki-serve"
    assert body["version"] == __version__
    source = body["source"]
    assert list(source) == HEALTH_SOURCE_KEYS
    assert source["source_id"] == SAMPLE_SOURCE_ID
    assert source["title"] == SAMPLE_TITLE
    assert source["public_uri"] == f"llmwiki://{SAMPLE_SOURCE_ID}"
    assert re.fullmatch(rf"{SAMPLE_SOURCE_ID}:sha256:[0-9a-f]{{12}}", source["bundle_id"])
    assert (source["adapter"], source["implementation"]) == ("llmwiki-markdown",
                                                             "llmwiki-markdown")
    assert (source["page_count"], source["approved_page_count"]) == (14, 12)
    projection = source["projection"]
    assert list(projection) == PROJECTION_KEYS
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", projection["signature"])
    assert source["bundle_id"].endswith(projection["signature"][len("sha256:"):][:12])
    assert (projection["page_count"], projection["approved_page_count"]) == (14, 12)
    assert body["capabilities"] == CAPABILITIES
    assert list(body["endpoints"]) == list(ENDPOINTS)
    assert body["endpoints"] == ENDPOINTS
    assert body["cors"] == {"mode": "local-dev-allowlist", "local_dev_origins": True,
                            "explicit_origin_count": 0}
    assert list(body["diagnostics"]) == ["freshness", "skipped_files", "degraded_files", "store"]
    assert body["diagnostics"] == {"freshness": "inotify", "skipped_files": 0,
                                   "degraded_files": 0, "store": "disk"}
    validated(HealthResponse, body)


async def test_manifest_shape_and_redacted_root(serve_client: ClientFactory,
                                                sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/manifest")
    assert list(body) == MANIFEST_KEYS
    assert body["root"] == ""
    assert body["title"] == SAMPLE_TITLE
    assert body["description"] == SAMPLE_DESCRIPTION
    assert body["source_id"] == SAMPLE_SOURCE_ID
    assert (body["source_profile"], body["format_version"]) == ("", "")
    assert (body["page_count"], body["approved_page_count"]) == (14, 12)
    assert (body["hot_page"], body["index_page"], body["overview_page"]) == (
        "hot.md", "index.md", "overview.md")
    assert list(body["projection"]) == PROJECTION_KEYS
    # Enabled (evidence cites line ranges), metadata only, the folder named by its source id;
    # the copied fixture is not a git work tree, so no commit.
    assert body["raw_origins"] == {"enabled": True, "metadata_only": True,
                                   "public_root_labels": ["raw"],
                                   "root_label": "sample-operations-wiki"}
    assert body["capabilities"] == CAPABILITIES
    health = await get_json(client, "/health")
    assert body["bundle_id"] == health["source"]["bundle_id"]
    assert body["projection"] == health["source"]["projection"]
    validated(WikiManifest, body)


async def test_source_refs_shape(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/source-refs")
    assert list(body) == ["source_id", "bundle_id", "source_refs"]
    assert body["source_id"] == SAMPLE_SOURCE_ID
    refs = body["source_refs"]
    assert [r["id"] for r in refs] == sorted(r["id"] for r in refs)
    assert [r["id"] for r in refs] == ["adr-0042", "https-packaging.python.org-en-latest",
                                       "src-ops-index", "src-rel-001", "src-sign-002"]
    for ref in refs:
        assert list(ref) == REF_KEYS
        assert ref["kind"] == "source_ref"
        assert ref["locator"] == {}
        assert ref["uri"] == f"llmwiki://{SAMPLE_SOURCE_ID}/source-refs/{ref['id']}"
    rel = next(r for r in refs if r["id"] == "src-rel-001")
    assert rel["label"] == "SRC-REL-001"
    assert rel["linked_pages"] == ["hot.md", "release-checklist.md", "runbooks/hotfix-release.md"]
    assert rel["linked_page_ids"] == ["hot", "release-checklist", "runbooks/hotfix-release"]
    validated(SourceRefsResponse, body)


async def test_source_bundle_shape(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/source-bundle")
    assert list(body) == BUNDLE_KEYS
    manifest = await get_json(client, "/manifest")
    for key in ("source_id", "bundle_id", "public_uri", "title", "description", "adapter",
                "implementation", "source_profile", "format_version", "projection",
                "raw_origins", "capabilities"):
        assert body[key] == manifest[key], key
    refs = await get_json(client, "/source-refs")
    assert body["source_refs"] == refs["source_refs"]
    validated(SourceBundleManifest, body)


# -- read -----------------------------------------------------------------------------


async def test_read_full_payload(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/read/runbooks/rollback")
    assert list(body) == PAGE_KEYS
    assert body["id"] == "runbooks/rollback"
    assert body["title"] == "Rollback"
    assert body["path"] == "runbooks/rollback.md"
    assert body["role"] == "topic"
    assert body["review_state"] == "approved"
    assert body["tags"] == ["runbook"]
    assert body["headings"] == ["Rollback", "Communication"]
    assert body["text"].startswith("# Rollback\n\nWhen a published release is broken")
    assert body["okf"] is None
    validated(WikiPage, body)
    by_path = await get_json(client, "/read/runbooks/rollback.md")
    assert by_path == body


async def test_read_not_found_is_404(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/read/no-such-page", status=404)
    assert body == PAGE_NOT_FOUND
    validated(HttpDetailResponse, body)


@pytest.mark.parametrize("page", [DRAFT_PAGE, "vendor-contacts"])
async def test_read_withheld_is_200_not_found(serve_client: ClientFactory, sample_root: Path,
                                              page: str) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, f"/read/{page}")
    assert body == WITHHELD
    assert list(body) == ["found", "reason"]
    validated(ReadNotFound, body)


async def test_read_wiki_prefix_does_not_match_native_root(serve_client: ClientFactory,
                                                           native_root: Path) -> None:
    client = await serve_client(native_root)
    assert (await get_json(client, "/read/overview"))["path"] == "overview.md"
    for path in ("/read/wiki/overview", "/read/wiki/overview.md", "/read/README",
                 "/read/README.md"):
        assert await get_json(client, path, status=404) == PAGE_NOT_FOUND, path


async def test_read_non_ascii_and_encoded_ids(serve_client: ClientFactory,
                                              tmp_path: Path) -> None:
    root = copy_fixture("shapes/korean-wiki", tmp_path / "roots")
    client = await serve_client(root)
    body = await get_json(client, "/read/%EA%B3%84%EC%95%BD-%EA%B4%80%EB%A6%AC")
    assert (body["id"], body["title"], body["path"]) == ("계약-관리", "계약 관리", "계약-관리.md")
    assert await get_json(client, "/read/계약-관리.md") == body
    sample = await serve_client(copy_fixture("sample-wiki", tmp_path / "other"))
    encoded = await get_json(sample, "/read/runbooks%2Frollback")
    assert encoded["id"] == "runbooks/rollback"


async def test_read_fields_projection(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/read/hot?fields=id,title,summary")
    assert list(body) == ["id", "title", "summary"]
    assert body["id"] == "hot"
    assert body["title"] == "Current Focus"
    # canonical order regardless of the order asked for; unknown names ignored
    body = await get_json(client, "/read/hot?fields=summary,bogus,title,id")
    assert list(body) == ["id", "title", "summary"]
    assert await get_json(client, "/read/hot?fields=") == {}


# -- graph ----------------------------------------------------------------------------


def assert_closed(graph: dict[str, Any], limit: int) -> None:
    ids = {n["id"] for n in graph["nodes"]}
    assert len(graph["edges"]) <= limit
    for edge in graph["edges"]:
        assert edge["source"] in ids and edge["target"] in ids, edge


async def test_graph_default_limit_is_100(serve_client: ClientFactory,
                                          many_nodes_root: Path) -> None:
    client = await serve_client(many_nodes_root)
    body = await get_json(client, "/graph")
    assert list(body) == ["nodes", "edges"]
    assert len(body["nodes"]) == 100
    assert_closed(body, 100)
    assert len(body["edges"]) > 0
    validated(GraphResponse, body)


async def test_graph_configured_default(serve_client: ClientFactory,
                                        many_nodes_root: Path) -> None:
    client = await serve_client(many_nodes_root, graph_default_limit=7)
    body = await get_json(client, "/graph")
    assert len(body["nodes"]) == 7
    assert_closed(body, 7)
    assert len((await get_json(client, "/graph?limit=120"))["nodes"]) == 120


@pytest.mark.parametrize(("query", "expected"), [
    ("limit=120", 120), ("limit=1", 1), ("limit=0", 1), ("limit=-5", 1),
    ("limit=2000", 2000), ("limit=999999", 2000),
])
async def test_graph_explicit_limits_clamp(serve_client: ClientFactory, many_nodes_root: Path,
                                           query: str, expected: int) -> None:
    client = await serve_client(many_nodes_root)
    body = await get_json(client, f"/graph?{query}")
    assert len(body["nodes"]) == expected
    assert_closed(body, expected)


async def test_graph_clamped_result_equals_max(serve_client: ClientFactory,
                                               many_nodes_root: Path) -> None:
    client = await serve_client(many_nodes_root)
    assert (await get_json(client, "/graph?limit=999999")
            == await get_json(client, "/graph?limit=2000"))
    # the first node of the full graph order is what a limit of 0 (clamped to 1) returns
    one = await get_json(client, "/graph?limit=0")
    full = await get_json(client, "/graph?limit=2000")
    assert one["nodes"] == full["nodes"][:1]
    assert one["edges"] == []


async def test_graph_limit_never_returns_edges_to_omitted_nodes(
        serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    full = await get_json(client, "/graph?limit=2000")
    assert len(full["nodes"]) == 72  # approved view of the sample wiki
    for limit in (1, 5, 13, 20, 40, 71):
        body = await get_json(client, f"/graph?limit={limit}")
        assert body["nodes"] == full["nodes"][:limit]
        assert_closed(body, limit)
        ids = {n["id"] for n in body["nodes"]}
        expected = [e for e in full["edges"] if e["source"] in ids and e["target"] in ids][:limit]
        assert body["edges"] == expected


@pytest.mark.parametrize("value", ["abc", "1.5", "", "ten"])
async def test_graph_non_int_limit_is_422(serve_client: ClientFactory, sample_root: Path,
                                          value: str) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, f"/graph?limit={value}", status=422)
    assert list(body) == ["detail"]
    assert len(body["detail"]) == 1
    item = body["detail"][0]
    assert list(item)[:4] == ["type", "loc", "msg", "input"]
    assert item["type"] == "int_parsing"
    assert item["loc"] == ["query", "limit"]
    assert item["input"] == value
    assert isinstance(item["msg"], str) and item["msg"]
    validated(HTTPValidationError, body)


# -- graph neighbourhood ---------------------------------------------------------------


async def test_neighborhood_native_root_exact_example(serve_client: ClientFactory,
                                                      native_root: Path) -> None:
    client = await serve_client(native_root)
    body = await get_json(client,
                          "/graph/neighborhood?seed=overview&direction=out&relation=SUPPORTS")
    assert list(body) == NEIGHBORHOOD_KEYS
    assert body["seeds"] == ["page:overview"]
    assert body["unmatched"] == []
    assert body["depth"] == 1
    assert body["direction"] == "out"
    assert body["relations"] == ["supports"]
    assert [n["id"] for n in body["nodes"]] == ["page:overview", "page:concepts/release"]
    assert body["nodes"][0]["path"] == "overview.md"
    assert body["nodes"][1]["path"] == "concepts/release.md"
    assert body["edges"] == [{
        "source": "page:overview", "target": "page:concepts/release", "relation": "supports",
        "metadata": {"source": "graph.json", "path": "graph/graph.json", "confidence": 0.88},
    }]
    validated(GraphNeighborhoodResponse, body)


async def test_neighborhood_incoming_external_seed(serve_client: ClientFactory,
                                                   native_root: Path) -> None:
    client = await serve_client(native_root)
    body = await get_json(client, "/graph/neighborhood?seed=GH-42&direction=in")
    assert body["seeds"] == ["external:GH-42"]
    assert [n["id"] for n in body["nodes"]] == ["external:GH-42", "page:concepts/release"]
    assert body["edges"] == [{
        "source": "page:concepts/release", "target": "external:GH-42", "relation": "tracks",
        "metadata": {"source": "graph.json", "path": "graph/graph.json", "confidence": 0.7},
    }]


async def test_neighborhood_repeated_seed_and_relation(serve_client: ClientFactory,
                                                       native_root: Path) -> None:
    client = await serve_client(native_root)
    body = await get_json(
        client, "/graph/neighborhood?seed=overview&seed=page:overview&seed=%20&"
                "seed=concepts/release&relation=SUPPORTS&relation=supports&relation=Links-To"
                "&direction=out")
    assert body["seeds"] == ["page:overview", "page:concepts/release"]
    assert body["relations"] == ["supports", "links_to"]
    assert body["unmatched"] == []
    assert {e["relation"] for e in body["edges"]} <= {"supports", "links_to"}
    assert {"source": "page:overview", "target": "page:concepts/release",
            "relation": "links_to", "metadata": {}} in body["edges"]


async def test_neighborhood_depth_zero_is_seeds_only(serve_client: ClientFactory,
                                                     native_root: Path) -> None:
    client = await serve_client(native_root)
    body = await get_json(client, "/graph/neighborhood?seed=overview&seed=GH-42&depth=0")
    assert body["depth"] == 0
    assert body["seeds"] == ["page:overview", "external:GH-42"]
    assert [n["id"] for n in body["nodes"]] == ["page:overview", "external:GH-42"]
    assert body["edges"] == []


@pytest.mark.parametrize(("depth", "expected"), [("-3", 0), ("9", 4)])
async def test_neighborhood_depth_clamps(serve_client: ClientFactory, native_root: Path,
                                         depth: str, expected: int) -> None:
    client = await serve_client(native_root)
    body = await get_json(client, f"/graph/neighborhood?seed=overview&depth={depth}")
    assert body["depth"] == expected


async def test_neighborhood_limit_clamps(serve_client: ClientFactory,
                                         many_nodes_root: Path) -> None:
    client = await serve_client(many_nodes_root)
    big = await get_json(client, "/graph/neighborhood?seed=many-links&limit=100000")
    assert len(big["nodes"]) == 500
    assert_closed(big, 500)
    small = await get_json(client, "/graph/neighborhood?seed=many-links&limit=0")
    assert [n["id"] for n in small["nodes"]] == ["page:many-links"]
    assert small["edges"] == []
    default = await get_json(client, "/graph/neighborhood?seed=many-links")
    assert len(default["nodes"]) == 50


async def test_neighborhood_unknown_seed_is_unmatched(serve_client: ClientFactory,
                                                      native_root: Path) -> None:
    client = await serve_client(native_root)
    body = await get_json(client, "/graph/neighborhood?seed=no-such-thing&seed=overview")
    assert body["seeds"] == ["page:overview"]
    assert body["unmatched"] == ["no-such-thing"]
    only_unknown = await get_json(client, "/graph/neighborhood?seed=no-such-thing")
    assert only_unknown == {"seeds": [], "unmatched": ["no-such-thing"], "depth": 1,
                            "direction": "both", "relations": [], "nodes": [], "edges": []}
    no_seed = await get_json(client, "/graph/neighborhood")
    assert (no_seed["seeds"], no_seed["nodes"], no_seed["edges"]) == ([], [], [])


async def test_neighborhood_invalid_direction_is_422(serve_client: ClientFactory,
                                                     native_root: Path) -> None:
    client = await serve_client(native_root)
    body = await get_json(client, "/graph/neighborhood?seed=overview&direction=sideways",
                          status=422)
    assert len(body["detail"]) == 1
    item = body["detail"][0]
    assert item["type"] == "literal_error"
    assert item["loc"] == ["query", "direction"]
    assert item["input"] == "sideways"
    assert item["ctx"] == {"expected": "'out', 'in' or 'both'"}


async def test_literal_error_validates_against_model(serve_client: ClientFactory,
                                                     native_root: Path) -> None:
    client = await serve_client(native_root)
    body = await get_json(client, "/graph/neighborhood?direction=sideways", status=422)
    validated(HTTPValidationError, body)


@pytest.mark.parametrize("query", ["depth=deep", "limit=lots"])
async def test_neighborhood_non_int_is_422(serve_client: ClientFactory, native_root: Path,
                                           query: str) -> None:
    client = await serve_client(native_root)
    body = await get_json(client, f"/graph/neighborhood?seed=overview&{query}", status=422)
    name, value = query.split("=")
    assert body["detail"][0]["loc"] == ["query", name]
    assert body["detail"][0]["input"] == value
    assert body["detail"][0]["type"] == "int_parsing"


# -- drafts: double opt-in --------------------------------------------------------------


async def draft_views(client: Client, flag: str) -> dict[str, Any]:
    """What each surface reveals about the draft page for one include_drafts value."""
    read = await get_json(client, f"/read/{DRAFT_PAGE}?include_drafts={flag}")
    graph = await get_json(client, f"/graph?limit=2000&include_drafts={flag}")
    refs = await get_json(client, f"/source-refs?include_drafts={flag}")
    bundle = await get_json(client, f"/source-bundle?include_drafts={flag}")
    hood = await get_json(
        client, f"/graph/neighborhood?seed=hot&direction=in&include_drafts={flag}")
    rel = next(r for r in refs["source_refs"] if r["id"] == "src-rel-001")
    return {
        "read_title": read.get("title"),
        "read_body": read,
        "graph_has_draft": f"page:{DRAFT_PAGE}" in {n["id"] for n in graph["nodes"]},
        "ref_pages": rel["linked_pages"],
        "bundle_refs": bundle["source_refs"],
        "refs": refs["source_refs"],
        "bundle_counts": (bundle["projection"]["page_count"],
                          bundle["projection"]["approved_page_count"]),
        "hood_nodes": [n["id"] for n in hood["nodes"]],
    }


APPROVED_REL_PAGES = ["hot.md", "release-checklist.md", "runbooks/hotfix-release.md"]


async def test_include_drafts_ignored_without_allow_drafts(serve_client: ClientFactory,
                                                           sample_root: Path) -> None:
    client = await serve_client(sample_root)
    for flag in ("true", "false"):
        views = await draft_views(client, flag)
        assert views["read_body"] == WITHHELD
        assert views["graph_has_draft"] is False
        assert views["ref_pages"] == APPROVED_REL_PAGES
        assert views["bundle_refs"] == views["refs"]
        assert views["bundle_counts"] == (14, 12)
        assert views["hood_nodes"] == ["page:hot", "page:index", "page:overview"]


async def test_include_drafts_honoured_with_allow_drafts(serve_client: ClientFactory,
                                                         sample_root: Path) -> None:
    client = await serve_client(sample_root, allow_drafts=True)
    off = await draft_views(client, "false")
    assert off["read_body"] == WITHHELD  # the server flag alone opens nothing
    assert off["graph_has_draft"] is False
    assert off["ref_pages"] == APPROVED_REL_PAGES
    on = await draft_views(client, "true")
    assert on["read_title"] == "Incident Communications"
    assert list(on["read_body"]) == PAGE_KEYS
    assert on["read_body"]["review_state"] == "draft"
    assert on["graph_has_draft"] is True
    assert on["ref_pages"] == ["hot.md", "release-checklist.md", "runbooks/hotfix-release.md",
                               "runbooks/incident-comms.md"]
    assert on["bundle_refs"] == on["refs"]
    assert on["bundle_counts"] == (14, 12)  # counts never depend on include_drafts
    assert on["hood_nodes"] == ["page:hot", "page:index", "page:overview", f"page:{DRAFT_PAGE}"]
    private = await get_json(client, "/read/vendor-contacts?include_drafts=yes")
    assert private["title"] == "Vendor Contacts"


@pytest.mark.parametrize("path", ["/source-refs", "/source-bundle", "/graph", "/read/hot",
                                  "/graph/neighborhood?seed=hot"])
async def test_invalid_boolean_is_422(serve_client: ClientFactory, sample_root: Path,
                                      path: str) -> None:
    client = await serve_client(sample_root, allow_drafts=True)
    joiner = "&" if "?" in path else "?"
    body = await get_json(client, f"{path}{joiner}include_drafts=maybe", status=422)
    assert len(body["detail"]) == 1
    item = body["detail"][0]
    assert item["type"] == "bool_parsing"
    assert item["loc"] == ["query", "include_drafts"]
    assert item["input"] == "maybe"
    validated(HTTPValidationError, body)


async def test_several_invalid_params_reported_together(serve_client: ClientFactory,
                                                        sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/graph?limit=x&include_drafts=nah", status=422)
    assert [i["loc"] for i in body["detail"]] == [["query", "limit"],
                                                   ["query", "include_drafts"]]


# -- routing errors, body limit, request ids --------------------------------------------


@pytest.mark.parametrize("path", ["/nope", "/read", "/read/", "/graph/nope", "/health/extra"])
async def test_unknown_route_is_404(serve_client: ClientFactory, sample_root: Path,
                                    path: str) -> None:
    client = await serve_client(sample_root)
    assert await get_json(client, path, status=404) == {"detail": "Not Found"}


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/health"), ("DELETE", "/manifest"), ("PUT", "/read/hot"), ("POST", "/graph"),
    ("PATCH", "/source-refs"),
])
async def test_wrong_method_is_405(serve_client: ClientFactory, sample_root: Path,
                                   method: str, path: str) -> None:
    client = await serve_client(sample_root)
    response = await client.request(method, path, data=b"{}")
    assert response.status == 405
    assert response.content_type == "application/json"
    assert await response.json() == {"detail": "Method Not Allowed"}


async def test_405_lists_allowed_methods(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    response = await client.post("/health")
    assert response.status == 405
    assert "GET" in response.headers.get("Allow", "")


@pytest.mark.parametrize("path", ["/health", "/graph", "/nope"])
async def test_oversize_body_is_413(serve_client: ClientFactory, sample_root: Path,
                                    path: str) -> None:
    client = await serve_client(sample_root, max_body_bytes=1024)
    response = await client.post(path, data=b"x" * 4096)
    assert response.status == 413
    assert await response.json() == {"detail": "Request body too large"}
    small = await client.post(path, data=b"x" * 100)
    assert small.status in (404, 405)  # under the limit: normal routing answers


async def test_request_id_echoed(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    response = await client.get("/health", headers={"X-Request-Id": "req-42.abc:1"})
    assert response.headers["X-Request-Id"] == "req-42.abc:1"
    errored = await client.get("/read/missing", headers={"X-Request-Id": "err-7"})
    assert errored.status == 404
    assert errored.headers["X-Request-Id"] == "err-7"


async def test_request_id_generated(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    first = (await client.get("/health")).headers["X-Request-Id"]
    second = (await client.get("/health")).headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert first != second
    unsafe = await client.get("/health", headers={"X-Request-Id": "bad id\twith spaces"})
    generated = unsafe.headers["X-Request-Id"]
    assert generated != "bad id\twith spaces"
    assert re.fullmatch(r"[0-9a-f]{32}", generated)


async def test_json_keeps_non_ascii(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root)
    response = await client.get("/read/ko/release-checklist-ko?fields=title")
    assert response.charset == "utf-8"
    raw = await response.read()
    assert raw == '{"title":"릴리스 체크리스트"}'.encode()


async def test_projection_store_diagnostics(serve_client: ClientFactory,
                                            sample_root: Path) -> None:
    client = await serve_client(sample_root)
    body = await get_json(client, "/diagnostics/projection-store")
    assert body == {"backend": "InMemoryProjectionStore", "backend_kind": "memory",
                    "endpoint": None, "namespace": "default", "cache_source_id": "sample-wiki",
                    "available": True, "last_error": ""}


async def test_error_bodies_validate(serve_client: ClientFactory, tmp_path: Path) -> None:
    client = await serve_client(tmp_path / "absent")
    body = await get_json(client, "/manifest", status=404)
    validated(ErrorBody, body)
