"""The contract fixes of issue 12 (sections 5 and 6) over real sockets, against the installed
`llmwiki-agent-bridge` and `llmwiki-serve` console scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.model_server import ModelServer
from tests.e2e.processes import Service, free_port, start_bridge, stop_checked

QUESTION = "How do we ship a hotfix release?"
FAKE_AGENT = Path(__file__).resolve().parents[1] / "support" / "fake_acp_agent.py"


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The bridge with its runtime pointed at a port nothing listens on."""
    dead = f"http://127.0.0.1:{free_port()}/v1"
    service = start_bridge(tmp_path_factory.mktemp("contract-bridge"),
                           env={"LLMWIKI_AGENT_BRIDGE_BASE_URL": dead})
    yield service
    stop_checked(service)


def send(bridge: Service, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(f"{bridge.url}/message:send", json=body, headers=headers, timeout=30)


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["artifacts"][0]["parts"][0]["data"]
    return data


def wiki(our_serve: Service, source_id: str = "wiki") -> dict[str, Any]:
    return {"id": source_id, "name": "Wiki", "protocol": "llmwiki-http", "status": "ready",
            "url": our_serve.url}


def test_the_ready_line_has_the_contracts_fields(bridge: Service) -> None:
    ready = bridge.extra["ready"]
    assert {"event", "url", "baseUrl", "baseUrlSource", "modelConfigured", "modelSource", "hermesBaseUrl",
            "hermesModelConfigured", "publicBind", "bridgeAuthConfigured", "configuredAllowedOrigins",
            "sourcePolicy", "runtimeProfile", "settingsPersistence"} <= set(ready)
    assert ready["baseUrlSource"] == "env" and ready["hermesBaseUrl"] == ready["baseUrl"]


def test_413_on_message_send_carries_the_ids(bridge: Service) -> None:
    body = json.dumps({"query": "x" * (3 * 1024 * 1024)})
    response = httpx.post(f"{bridge.url}/message:send", content=body, timeout=30,
                          headers={"X-Request-Id": "req-413", "X-Trace-Id": "trace-413",
                                   "Content-Type": "application/json"})
    assert response.status_code == 413
    payload = response.json()
    assert payload["error"]["code"] == "body_too_large"
    assert (payload["requestId"], payload["traceId"]) == ("req-413", "trace-413")


def test_runtime_settings_are_validated_and_applied(bridge: Service) -> None:
    refused = httpx.put(f"{bridge.url}/settings/config.json", json={"runtimeAdapter": "telepathy"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_bridge_settings"
    saved = httpx.put(f"{bridge.url}/settings/config.json",
                      json={"runtimeName": "E2E Bridge", "providerOrganization": "E2E"})
    assert saved.status_code == 200, saved.text
    card = httpx.get(f"{bridge.url}/.well-known/agent-card.json").json()
    assert card["name"] == "E2E Bridge" and card["provider"] == {"organization": "E2E"}
    stored = json.loads(Path(bridge.extra["config"]).read_text(encoding="utf-8"))["config"]
    assert stored["runtimeName"] == "E2E Bridge"


def test_a_numeric_query_is_answered(bridge: Service, our_serve: Service) -> None:
    result = result_of(send(bridge, {"query": 2026, "mode": "evidence-only",
                                     "knowledgeSources": [wiki(our_serve)]}))
    [tool] = [s for s in result["steps"] if s["id"].startswith("tool-")]
    assert tool["status"] == "done" and isinstance(tool["citationIds"], list)


def test_excluding_an_unselected_sources_pages_is_a_400(bridge: Service, our_serve: Service) -> None:
    retrieval = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
                 "search": {"excludePageIds": ["elsewhere:index"]}}
    response = send(bridge, {"query": QUESTION, "mode": "evidence-only", "retrieval": retrieval,
                             "knowledgeSources": [wiki(our_serve)]}, **{"X-Request-Id": "req-ex"})
    assert response.status_code == 400
    payload = response.json()
    assert payload["error"]["code"] == "invalid_retrieval_intent" and payload["requestId"] == "req-ex"


def test_a_failed_source_step_has_empty_citation_lists(bridge: Service, our_serve: Service) -> None:
    dead = {**wiki(our_serve, "dead"), "url": f"http://127.0.0.1:{free_port()}"}
    result = result_of(send(bridge, {"query": QUESTION, "mode": "evidence-only",
                                     "knowledgeSources": [dead, wiki(our_serve)]}))
    dead_step, wiki_step = (s for s in result["steps"] if s["id"].startswith("tool-"))
    assert dead_step["status"] == "error"
    assert dead_step["citationIds"] == [] and dead_step["citationRefs"] == []
    assert wiki_step["citationIds"]
    [bundle] = result["sourceBundles"]
    assert isinstance(bundle["rawOrigins"]["publicRootLabelCount"], int)


def test_health_probe_is_honest_about_the_runtime(bridge: Service, tmp_path: Path,
                                                  model: ModelServer) -> None:
    assert httpx.get(f"{bridge.url}/health").json()["status"] == "ok"  # not probed: nothing to say
    probed = httpx.get(f"{bridge.url}/health?probe=1").json()
    assert probed["status"] == "degraded"
    reachability = probed["runtimeConnection"]["reachability"]
    assert reachability["checked"] is True and reachability["reachable"] is False
    healthy = start_bridge(tmp_path, name="healthy", env={"LLMWIKI_AGENT_BRIDGE_BASE_URL": model.url})
    try:
        probed = httpx.get(f"{healthy.url}/health?probe=1").json()
        assert probed["status"] == "ok" and probed["runtimeConnection"]["reachability"]["ok"] is True
    finally:
        stop_checked(healthy)


def test_a_source_is_tested_before_it_is_saved(bridge: Service, our_serve: Service) -> None:
    response = httpx.post(f"{bridge.url}/sources/probe", json={"source": wiki(our_serve, "draft")},
                          timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["source"]["health"]["ok"] is True
    dead = httpx.post(f"{bridge.url}/sources/probe", timeout=30,
                      json={"source": {"id": "gone", "url": f"http://127.0.0.1:{free_port()}"}}).json()
    health = dead["source"]["health"]
    assert health["ok"] is False and health["message"] and "127.0.0.1" not in health["message"]
    view = httpx.get(f"{bridge.url}/sources").json()
    assert view["sources"] == []  # a test saves nothing


def test_the_acp_adapter_runs_as_a_subprocess_of_the_installed_bridge(tmp_path: Path,
                                                                      our_serve: Service) -> None:
    record = tmp_path / "acp.jsonl"
    service = start_bridge(tmp_path, name="acp-bridge", env={
        "LLMWIKI_AGENT_BRIDGE_RUNTIME_ADAPTER": "acp",
        "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_COMMAND": sys.executable,
        "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_ARGS": json.dumps([str(FAKE_AGENT), "answer", str(record)])})
    try:
        result = result_of(send(service, {"query": QUESTION, "knowledgeSources": [wiki(our_serve)]}))
        assert result["answer"].startswith("The agent says:")
        assert any(s["id"] == "runtime-deepagents-acp" and s["status"] == "done" for s in result["steps"])
        methods = [json.loads(line).get("method") for line in record.read_text().splitlines()]
        assert methods[:3] == ["initialize", "session/new", "session/prompt"]
        failing = httpx.put(f"{service.url}/settings/config.json", json={"runtimeAdapter": "deepagents-acp"})
        assert failing.status_code == 200
        health = httpx.get(f"{service.url}/health?probe=1").json()
        assert health["runtimeConnection"]["reachability"]["basis"] == "adapter_not_probeable"
    finally:
        stop_checked(service)
