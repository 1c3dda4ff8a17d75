"""The bridge's OpenAPI document lists exactly the routes its app answers, from the wire models."""

from __future__ import annotations

import json
import re

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bridge.config.settings import BridgeSettings
from bridge.web.app import create_app
from bridge.web.openapi import openapi_document
from common.openapi import operations


def routed_operations(app: web.Application) -> set[tuple[str, str]]:
    return {(r.method, r.resource.canonical) for r in app.router.routes()
            if r.resource is not None and r.method != "HEAD"}


@pytest.mark.parametrize("metrics", [False, True])
async def test_openapi_lists_exactly_the_routes_the_app_answers(metrics: bool) -> None:
    app = create_app(BridgeSettings(metrics=metrics), sources=[])
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/openapi.json")
        assert response.status == 200
        document = await response.json()
    assert operations(document) == routed_operations(app)
    assert {("POST", "/message:send"), ("POST", "/mcp"), ("POST", "/a2a/jsonrpc"),
            ("PUT", "/settings/config.json"), ("GET", "/sources")} <= operations(document)
    assert (("GET", "/metrics") in operations(document)) is metrics
    # Generated from the wire models, camelCase as the bridge speaks.
    citation = document["components"]["schemas"]["Citation"]
    assert "sourceId" in citation["properties"] and "source_id" not in citation["properties"]


async def test_openapi_needs_the_token_as_every_route_does() -> None:
    app = create_app(BridgeSettings(bearer_token="bridge-secret"), sources=[])
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/openapi.json")).status == 401
        ok = await client.get("/openapi.json", headers={"Authorization": "Bearer bridge-secret"})
        assert ok.status == 200


def test_every_reference_resolves() -> None:
    document = openapi_document(metrics=True)
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs and refs <= set(document["components"]["schemas"])
