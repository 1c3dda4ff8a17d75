"""The official clients against the installed bridge: the MCP client in its three modes on `/mcp`
(the agent run and every source tool, on a source of each protocol) and a2a-sdk on both bindings."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, SendMessageRequest, TaskState
from google.protobuf import json_format
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.citations import named_sources
from tests.e2e.conftest import SAMPLE_WIKI
from tests.e2e.processes import Service, start_bridge, stop_checked

TOKEN = "e2e-bridge-token"
QUESTION = "How do we roll back a release?"
SOURCES = {"web": "llmwiki-http", "tools": "mcp", "agent": "a2a"}
PAGE = "runbooks/rollback"


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory, our_serve: Service) -> Iterator[Service]:
    """The bridge with a bearer token and one registered source per protocol, all on our serve."""
    settings = {"sources": [
        {"id": "web", "name": "Web", "protocol": "llmwiki-http", "url": our_serve.url},
        {"id": "tools", "name": "Tools", "protocol": "mcp", "url": our_serve.url + "/mcp/stream"},
        {"id": "agent", "name": "Agent", "protocol": "a2a", "url": our_serve.url}]}
    service = start_bridge(tmp_path_factory.mktemp("bridge"), "--bearer-token", TOKEN, settings=settings)
    yield service
    stop_checked(service)


def mcp_client(bridge: Service, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    return Client(streamable_http_client(bridge.url + "/mcp", http_client=http), mode=mode)


def source_calls(source_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [("llmwiki_context", {"query": QUESTION, "sourceId": source_id}),
            ("llmwiki_search", {"query": "rollback", "sourceId": source_id, "limit": 3}),
            ("llmwiki_read", {"pageId": f"{source_id}:{PAGE}"}),
            ("llmwiki_graph", {"sourceId": source_id, "limit": 10}),
            ("llmwiki_graph_neighbors", {"nodeIds": [f"{source_id}:page:{PAGE}"], "limit": 5}),
            ("llmwiki_source_bundle", {"sourceId": source_id})]


@pytest.mark.parametrize("mode", ["auto", "legacy", "2026-07-28"])
async def test_mcp_client_runs_the_agent_and_every_source_tool(bridge: Service, mode: str) -> None:
    async with mcp_client(bridge, mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[0] == "llmwiki_agent_run" and "llmwiki_list_sources" in names

        listed = await client.call_tool("llmwiki_list_sources", {})
        assert listed.is_error is False and listed.structured_content is not None
        run = await client.call_tool("llmwiki_agent_run", {"query": QUESTION,
                                                           "orchestrationMode": "evidence-only"})
        assert run.is_error is False, run.content
        result = (run.structured_content or {})["llmwiki_agent_result"]
        assert named_sources(result["citations"]) == set(SOURCES)
        assert not [s for s in result["steps"] if s["status"] == "error"]

        for source_id, protocol in SOURCES.items():
            for name, arguments in source_calls(source_id):
                if protocol == "a2a" and name != "llmwiki_context":
                    # An A2A source answers context only: a clear argument error as a tool result
                    # with isError (MCP's advice), not a protocol error.
                    refused = await client.call_tool(name, arguments)
                    assert refused.is_error is True and refused.structured_content is None
                    # Neighbours are asked of node ids; no a2a source owns any, which is what it says.
                    expected = ("No selected Knowledge Source matched" if name == "llmwiki_graph_neighbors"
                                else "does not support a2a")
                    assert expected in refused.content[0].text  # type: ignore[union-attr]
                    continue
                answer = await client.call_tool(name, arguments)
                assert answer.is_error is False, (source_id, name, answer.content)
                assert answer.structured_content, (source_id, name)
                assert answer.content[0].text  # type: ignore[union-attr]


async def test_citations_cite_lines_whose_handles_read_back(bridge: Service) -> None:
    """Issue 16 through the bridge: a citation from our serve names the file's lines (they hash
    to its sha256) and its section handle, and llmwiki_read on that handle gives those lines."""
    async with mcp_client(bridge, "auto") as client:
        # In the reference's order, so each source's own citations are there (not merged).
        run = await client.call_tool("llmwiki_agent_run", {"query": QUESTION, "citationOrder": "source",
                                                           "orchestrationMode": "evidence-only"})
        assert run.is_error is False, run.content
        citations = (run.structured_content or {})["llmwiki_agent_result"]["citations"]
        with_origin = [c for c in citations if "origin" in c]
        assert {c["sourceId"] for c in with_origin} >= {"web", "tools"}
        for cited in with_origin:
            origin = cited["origin"]
            lines = (SAMPLE_WIKI / origin["path"]).read_bytes().splitlines(keepends=True)
            assert 1 <= origin["lineStart"] <= origin["lineEnd"] <= len(lines)
            cited_bytes = b"".join(lines[origin["lineStart"] - 1:origin["lineEnd"]])
            assert hashlib.sha256(cited_bytes).hexdigest() == origin["sha256"], cited["id"]
        for source_id in ("web", "tools"):
            origin = next(c["origin"] for c in with_origin if c["sourceId"] == source_id)
            read = await client.call_tool("llmwiki_read", {"pageId": origin["handle"],
                                                           "sourceId": source_id})
            assert read.is_error is False, read.content
            section = (read.structured_content or {})["llmwiki_read"]["page"]
            assert section["handle"] == origin["handle"]
            assert (section["origin"]["line_start"], section["origin"]["line_end"]) == (
                origin["lineStart"], origin["lineEnd"])


def a2a_message(text: str) -> Message:
    raw = {"messageId": "e2e-1", "role": "ROLE_USER",
           "parts": [{"text": text}, {"data": {"orchestrationMode": "evidence-only"}}]}
    return json_format.ParseDict(raw, Message())


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
async def test_a2a_sdk_client_on_both_bindings(bridge: Service, binding: str) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as session:
        client = await create_client(bridge.url, client_config=ClientConfig(
            streaming=False, supported_protocol_bindings=[binding], httpx_client=session))
        request = SendMessageRequest(message=a2a_message(QUESTION))
        events = [event async for event in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("task")
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = task.artifacts
    data: dict[str, Any] = json_format.MessageToDict(artifact.parts[0].data)
    assert named_sources(data["citations"]) == set(SOURCES)
    assert data["answer"].startswith("Evidence-only result:")


async def test_every_route_needs_the_token(bridge: Service, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=bridge.url, timeout=30) as client:
        for method, path in (("GET", "/health"), ("GET", "/sources"), ("GET", "/settings.json"),
                             ("POST", "/message:send"), ("POST", "/mcp"),
                             ("GET", "/.well-known/agent-card.json")):
            answer = await client.request(method, path, json={} if method == "POST" else None)
            assert answer.status_code == 401, (path, answer.text)
            assert answer.json()["error"]["code"] == "bridge_unauthorized"
        page = await client.get("/settings")
        assert page.status_code == 200 and TOKEN not in page.text
