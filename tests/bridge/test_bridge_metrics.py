"""The bridge's /metrics: absent unless enabled; with it, each source query's outcome by protocol."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bridge.web.requests import SERVICE_KEY

QUESTION = "How do we roll back a release?"


def _source(source_id: str, url: str, protocol: str = "llmwiki-http") -> dict[str, Any]:
    return {"id": source_id, "name": source_id, "protocol": protocol, "status": "ready", "url": url}


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


async def test_metrics_are_absent_unless_enabled(bridge_client: Any) -> None:
    client = await bridge_client()
    response = await client.get("/metrics")
    assert response.status == 404
    assert client.server.app[SERVICE_KEY].metrics is None  # nothing wraps the run's clients


async def test_source_outcomes_are_counted_per_protocol(bridge_client: Any, serve_url: str,
                                                        dead_url: str) -> None:
    client = await bridge_client(metrics=True)
    body = {"data": {"query": QUESTION, "orchestrationMode": "evidence-only",
                     "knowledgeSources": [_source("wiki", serve_url), _source("dead", dead_url),
                                          _source("mcp-dead", dead_url + "/mcp", "mcp")]}}
    assert (await client.post("/message:send", json=body)).status == 200
    text = await (await client.get("/metrics")).text()
    queries = _samples(text, "llmwiki_bridge_source_queries_total")
    assert queries == {(("outcome", "ok"), ("protocol", "llmwiki-http")): 1.0,
                       (("outcome", "error"), ("protocol", "llmwiki-http")): 1.0,
                       (("outcome", "error"), ("protocol", "mcp")): 1.0}
    requests = _samples(text, "llmwiki_bridge_http_requests_total")
    assert requests[(("method", "POST"), ("route", "/message:send"), ("status", "200"))] == 1.0
