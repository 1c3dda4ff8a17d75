"""serve's /metrics: absent unless enabled, one registry per app, route patterns as labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from serve.protocols.http import create_app
from serve.settings import ServeSettings

SAMPLE = Path(__file__).resolve().parents[3] / "fixtures" / "sample-wiki"


async def test_metrics_are_absent_unless_enabled(aiohttp_client: Any, tmp_path: Path) -> None:
    app = create_app(ServeSettings(root=SAMPLE, cache_dir=tmp_path / "cache"))
    client: TestClient = await aiohttp_client(app)
    assert (await client.get("/metrics")).status == 404
    assert "/metrics" not in (await (await client.get("/openapi.json")).json())["paths"]


async def test_two_apps_keep_their_own_counts(aiohttp_client: Any, tmp_path: Path) -> None:
    first: TestClient = await aiohttp_client(create_app(ServeSettings(
        root=SAMPLE, cache_dir=tmp_path / "a", metrics=True)))
    second: TestClient = await aiohttp_client(create_app(ServeSettings(
        root=SAMPLE, cache_dir=tmp_path / "b", metrics=True)))
    for _ in range(3):
        assert (await first.get("/read/index.md")).status == 200
    assert (await second.get("/health")).status == 200

    async def counts(client: TestClient) -> dict[str, float]:
        text = await (await client.get("/metrics")).text()
        return {s.labels["route"]: s.value for f in text_string_to_metric_families(text)
                for s in f.samples if s.name == "llmwiki_serve_http_requests_total"}

    assert await counts(first) == {"/read/{page_id}": 3.0}
    assert await counts(second) == {"/health": 1.0}


async def test_an_unknown_method_is_one_label(aiohttp_client: Any, tmp_path: Path) -> None:
    client: TestClient = await aiohttp_client(create_app(ServeSettings(
        root=SAMPLE, cache_dir=tmp_path / "cache", metrics=True)))
    assert (await client.request("PROPFIND", "/health")).status == 405  # a WebDAV method
    text = await (await client.get("/metrics")).text()
    methods = {s.labels["method"] for f in text_string_to_metric_families(text)
               for s in f.samples if s.name == "llmwiki_serve_http_requests_total"}
    assert methods == {"other"}
