"""The OpenAPI document and /docs page describe the routes that exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from serve.protocols.http import create_app
from serve.settings import ServeSettings

SAMPLE = Path(__file__).resolve().parents[3] / "fixtures" / "sample-wiki"
# Contract E14 names the first six.
CORE_MODELS = {"ContextPack", "SearchResponse", "WikiManifest", "SourceBundleManifest",
               "GraphNeighborhoodResponse", "HealthResponse", "SourceRefsResponse", "GraphResponse",
               "WikiPage", "HTTPValidationError", "QueryRequest", "ProjectionStoreDiagnostics"}


async def test_openapi_lists_core_models_and_every_rest_route(aiohttp_client: Any, tmp_path: Path) -> None:
    app = create_app(ServeSettings(root=SAMPLE, cache_dir=tmp_path / "cache"))
    client: TestClient = await aiohttp_client(app)
    response = await client.get("/openapi.json")
    assert response.status == 200
    document = await response.json()
    assert set(document["components"]["schemas"]) >= CORE_MODELS
    documented = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    routed = {
        (r.method, r.resource.canonical.replace("{page_id:.+}", "{page_id}"))
        for r in app.router.routes()
        if r.method in ("GET", "POST") and r.resource is not None
    }
    assert documented <= routed
    # The documents themselves and the MCP transports (described by MCP, not OpenAPI) are not listed.
    assert {path for _, path in routed - documented} == {
        "/openapi.json", "/docs", "/mcp", "/mcp/stream", "/mcp/stream/"}


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
