"""`llmwiki_agent_run` progress through the official MCP client, in each of its modes, against the
installed bridge: one notification per source step, then the answer as the runtime generates it,
and the same result as without progress."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.model_server import ANSWER, ModelServer
from tests.e2e.processes import Service, start_bridge, stop_checked
from tests.e2e.volatile import without

QUESTION = "How do we roll back a release?"
VOLATILE = ("requestId", "traceId", "timestamp", "startedAt", "completedAt", "durationMs", "latencyMs")


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory, our_serve: Service,
           model: ModelServer) -> Iterator[Service]:
    settings = {"sources": [{"id": "web", "protocol": "llmwiki-http", "url": our_serve.url},
                            {"id": "tools", "protocol": "mcp", "url": our_serve.url + "/mcp/stream"}]}
    service = start_bridge(tmp_path_factory.mktemp("progress-bridge"), settings=settings,
                           env={"LLMWIKI_AGENT_BRIDGE_BASE_URL": model.url,
                                "LLMWIKI_AGENT_BRIDGE_MODEL": "e2e-model"})
    yield service
    stop_checked(service)


def stable(value: Any) -> Any:
    return without(value, VOLATILE)


@pytest.mark.parametrize("mode", ["auto", "legacy", "2026-07-28"])
async def test_agent_run_reports_progress_to_the_official_client(bridge: Service, model: ModelServer,
                                                                 mode: str) -> None:
    notes: list[tuple[float, float | None, str | None]] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    arguments = {"query": QUESTION, "orchestrationMode": "delegated-runtime"}
    http = httpx2.AsyncClient(timeout=60)
    async with Client(streamable_http_client(bridge.url + "/mcp", http_client=http), mode=mode) as client:
        with_progress = await client.call_tool("llmwiki_agent_run", arguments, progress_callback=heard)
        without = await client.call_tool("llmwiki_agent_run", arguments)
    assert with_progress.is_error is False and without.is_error is False
    messages = [m or "" for _, _, m in notes]
    assert [p for p, _, _ in notes] == list(range(1, len(notes) + 1))  # increasing, one by one
    sources = [m for m in messages if m.startswith("Knowledge Source ")]
    assert sorted(m.split()[2] for m in sources) == ["tools", "web"]
    assert messages[:2] == sources  # the source steps come before the answer
    assert "".join(messages[2:]) == ANSWER  # then the answer, word by word as generated
    result = (with_progress.structured_content or {})["llmwiki_agent_result"]
    assert stable(result) == stable((without.structured_content or {})["llmwiki_agent_result"])


async def test_without_a_progress_token_the_reply_is_plain_json(bridge: Service) -> None:
    """Progress is opt-in: the same call without a token is one JSON answer, as before."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "llmwiki_agent_run", "arguments": {"query": QUESTION, "orchestrationMode": "evidence-only"}}}
    async with httpx2.AsyncClient(timeout=60) as http:
        response = await http.post(bridge.url + "/mcp", json=body, headers={
            "MCP-Protocol-Version": "2025-11-25", "Accept": "application/json, text/event-stream"})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json()["result"]["isError"] is False


async def test_a_progress_stream_carries_the_cors_headers_of_an_allowed_origin(bridge: Service) -> None:
    """The progress stream is sent before its handler returns; its CORS headers are those of any
    other answer (common/browser.py)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "llmwiki_agent_run", "_meta": {"progressToken": "p"},
        "arguments": {"query": QUESTION, "orchestrationMode": "evidence-only"}}}
    origin = "http://localhost:3000"
    async with httpx2.AsyncClient(timeout=60) as http:
        response = await http.post(bridge.url + "/mcp", json=body, headers={
            "MCP-Protocol-Version": "2025-11-25", "Accept": "application/json, text/event-stream",
            "Origin": origin})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Access-Control-Allow-Origin"] == origin
    assert response.headers["Vary"] == "Origin"
    assert response.headers["Access-Control-Allow-Methods"] == "GET, POST, PUT, DELETE, OPTIONS"
    assert "notifications/progress" in response.text
