"""The OpenAPI document and /docs page describe the routes that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from common.openapi import operations
from serve.protocols.http import create_app
from serve.protocols.openapi import openapi_document
from serve.settings import ServeSettings

SAMPLE = Path(__file__).resolve().parents[3] / "fixtures" / "sample-wiki"
# Contract E14 names the first six (after the JSON-RPC envelopes of the MCP routes).
CORE_MODELS = {"JsonRpcRequest", "JsonRpcResponse",
               "ContextPack", "SearchResponse", "WikiManifest", "SourceBundleManifest",
               "GraphNeighborhoodResponse", "HealthResponse", "SourceRefsResponse", "GraphResponse",
               "WikiPage", "HTTPValidationError", "QueryRequest", "ProjectionStoreDiagnostics"}


def routed_operations(app: web.Application) -> set[tuple[str, str]]:
    """What the app's router really answers: (METHOD, canonical path), without the catch-all 405
    routes of the MCP stream."""
    return {(r.method, r.resource.canonical) for r in app.router.routes()
            if r.resource is not None and r.method not in ("*", "HEAD")}


@pytest.mark.parametrize(("a2a", "metrics"), [(False, False), (True, False), (False, True), (True, True)])
async def test_openapi_lists_exactly_the_routes_the_app_answers(aiohttp_client: Any, tmp_path: Path,
                                                                a2a: bool, metrics: bool) -> None:
    app = create_app(ServeSettings(root=SAMPLE, cache_dir=tmp_path / "cache", enable_a2a=a2a,
                                   metrics=metrics))
    client: TestClient = await aiohttp_client(app)
    response = await client.get("/openapi.json")
    assert response.status == 200
    document = await response.json()
    assert set(document["components"]["schemas"]) >= CORE_MODELS
    assert operations(document) == routed_operations(app)
    assert {("POST", "/query"), ("POST", "/search"), ("POST", "/mcp"), ("POST", "/mcp/stream")} <= \
        operations(document)
    assert (("GET", "/metrics") in operations(document)) is metrics
    assert (("POST", "/message:send") in operations(document)) is a2a


def test_every_reference_resolves() -> None:
    document = openapi_document(a2a_enabled=True, metrics=True)
    names = set(document["components"]["schemas"])
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs and refs <= names


async def test_health_validates_against_its_model(aiohttp_client: Any, tmp_path: Path) -> None:
    from common.schemas import HealthResponse

    client: TestClient = await aiohttp_client(
        create_app(ServeSettings(root=SAMPLE, cache_dir=tmp_path / "cache")))
    body = await (await client.get("/health")).json()
    parsed = HealthResponse.model_validate(body)
    assert parsed.model_dump(mode="json") == body


async def test_docs_page_is_self_contained(aiohttp_client: Any, tmp_path: Path) -> None:
    client: TestClient = await aiohttp_client(
        create_app(ServeSettings(root=SAMPLE, cache_dir=tmp_path / "cache")))
    response = await client.get("/docs")
    assert response.status == 200
    text = await response.text()
    assert "/graph/neighborhood" in text
    assert "http://" not in text and "https://" not in text
