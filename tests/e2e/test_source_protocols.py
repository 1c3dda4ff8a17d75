"""Every source protocol, in every URL form a user types, in every orchestration mode, from the
installed bridge to two independent serve implementations (ours and the published reference)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.citations import named_sources
from tests.e2e.model_server import ANSWER, MODEL, ModelServer
from tests.e2e.processes import Service, start_bridge, stop_checked

QUESTION = "How do we roll back a release?"
# protocol, the suffix typed after the serve's base URL
FORMS = [("llmwiki-http", ""), ("llmwiki-http", "/"), ("mcp", ""), ("mcp", "/mcp"), ("mcp", "/mcp/stream"),
         ("mcp", "/mcp/stream/"), ("a2a", ""), ("a2a", "/"), ("a2a", "/.well-known/agent-card.json")]
MODES = ["evidence-only", "delegated-runtime", "hybrid"]
FAILED_STATUSES = {"error", "failed"}


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory, model: ModelServer) -> Iterator[Service]:
    service = start_bridge(tmp_path_factory.mktemp("bridge"), "--base-url", model.url, "--model", MODEL)
    yield service
    stop_checked(service)


@pytest.fixture(params=["ours", "reference"])
def serve(request: pytest.FixtureRequest) -> Service:
    service: Service = request.getfixturevalue("our_serve" if request.param == "ours" else "reference_serve")
    return service


def agent_result(task: dict[str, Any]) -> dict[str, Any]:
    [artifact] = task["artifacts"]
    assert artifact["name"] == "llmwiki_agent_result"
    data: dict[str, Any] = artifact["parts"][0]["data"]
    return data


async def send(bridge: Service, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(f"{bridge.url}/message:send", json=body)
    assert response.status_code == 200, response.text
    return agent_result(response.json())


def failed_steps(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in result["steps"] if s["status"] in FAILED_STATUSES]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("protocol", "suffix"), FORMS)
async def test_each_protocol_form_and_mode_gives_citations(bridge: Service, serve: Service,
                                                           model: ModelServer, protocol: str, suffix: str,
                                                           mode: str) -> None:
    before = len(model.chat_requests())
    source = {"id": "wiki", "name": "Ops Wiki", "protocol": protocol, "status": "ready",
              "url": serve.url + suffix}
    result = await send(bridge, {"data": {"query": QUESTION, "orchestrationMode": mode,
                                          "knowledgeSources": [source]}})
    assert result["citations"], result
    assert {c["sourceId"] for c in result["citations"]} == {"wiki"}
    assert all(c["id"].startswith("wiki:") for c in result["citations"])
    assert not failed_steps(result), failed_steps(result)
    assert not [d for d in result["diagnostics"] if d.get("severity") == "error"], result["diagnostics"]
    chats = model.chat_requests()[before:]
    if mode == "evidence-only":
        assert not chats and result["answer"].startswith("Evidence-only result:")
        return
    assert ANSWER in result["answer"]
    assert chats, "the runtime was not called"
    if mode == "hybrid" and protocol == "a2a":
        # An A2A source answers context only: the model is offered no source tools.
        assert len(chats) == 1 and "tools" not in chats[0]["body"]
    elif mode == "hybrid":
        # The model called the search tool once: the bridge ran it against this source.
        assert len(chats) == 2 and any(m.get("role") == "tool" for m in chats[1]["body"]["messages"])
        tool_steps = [s for s in result["steps"] if "llmwiki_search" in (s.get("toolName") or "")]
        assert tool_steps and all(s["status"] == "done" for s in tool_steps), result["steps"]
    else:
        assert len(chats) == 1 and "tools" not in chats[0]["body"]


async def test_sources_that_point_at_nothing_fail_alone(bridge: Service, our_serve: Service,
                                                        tmp_path: Path) -> None:
    """A mix with a dead source: the live ones still give citations; the dead one is one failed step."""
    sources = [{"id": "web", "protocol": "llmwiki-http", "url": our_serve.url},
               {"id": "tools", "protocol": "mcp", "url": our_serve.url + "/mcp/stream"},
               {"id": "agent", "protocol": "a2a", "url": our_serve.url},
               {"id": "dead", "protocol": "mcp", "url": "http://127.0.0.1:9/mcp"},
               {"id": "odd", "protocol": "gopher", "url": our_serve.url}]
    for source in sources:
        source["status"] = "ready"  # inline sources must say so (contract 3.4)
    result = await send(bridge, {"data": {"query": QUESTION, "orchestrationMode": "evidence-only",
                                          "knowledgeSources": sources}})
    # the three serve the same pages: each page is one citation naming the others (alsoIn)
    assert named_sources(result["citations"]) == {"web", "tools", "agent"}
    failed = failed_steps(result)
    assert failed and all(s.get("connectionId") == "dead" for s in failed), failed
    assert [d["subject"] for d in result["diagnostics"] if d["scope"] == "source"] == ["dead"]
    # A protocol this bridge does not speak is skipped, as the contract says (3.4), never a 500.
    assert not [s for s in result["steps"] if s.get("connectionId") == "odd"]


async def test_a_registry_with_an_unknown_protocol_is_refused_clearly(bridge: Service) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        answer = await client.put(f"{bridge.url}/settings/sources.json",
                                  json=[{"id": "odd", "protocol": "gopher", "url": "http://127.0.0.1:9"}])
    assert answer.status_code == 400, answer.text
    assert "unsupported protocol: gopher" in answer.json()["error"]["message"]
