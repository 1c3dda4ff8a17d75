"""Registered sources of every protocol, as an operator sets them up: the settings file API, runs
without inline sources, live probes over HTTP and from the `status`/`sources` commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.citations import named_sources
from tests.e2e.processes import Service, console_script, run_command, start_bridge, stop_checked

QUESTION = "How do we ship a hotfix release?"
DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port


def registered(serve: Service) -> list[dict[str, Any]]:
    return [{"id": "web", "name": "Web", "protocol": "llmwiki-http", "url": serve.url + "/"},
            {"id": "tools", "name": "Tools", "protocol": "mcp", "url": serve.url},
            {"id": "stream", "name": "Stream", "protocol": "mcp", "url": serve.url + "/mcp/stream"},
            {"id": "agent", "name": "Agent", "protocol": "a2a", "url": serve.url},
            {"id": "dead", "name": "Dead", "protocol": "mcp", "url": DEAD + "/mcp"}]


@pytest.fixture(params=["ours", "reference"])
def serve(request: pytest.FixtureRequest) -> Service:
    service: Service = request.getfixturevalue("our_serve" if request.param == "ours" else "reference_serve")
    return service


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[Service]:
    service = start_bridge(tmp_path)
    yield service
    stop_checked(service)


async def test_registered_sources_answer_and_probe(bridge: Service, serve: Service) -> None:
    async with httpx.AsyncClient(base_url=bridge.url, timeout=60) as client:
        saved = await client.put("/settings/sources.json", json=registered(serve))
        assert saved.status_code == 200, saved.text
        stored = json.loads(Path(bridge.extra["config"]).read_text())
        assert [s["id"] for s in stored["sources"]] == ["web", "tools", "stream", "agent", "dead"]

        response = await client.post("/message:send", json={"data": {
            "query": QUESTION, "orchestrationMode": "evidence-only"}})
        assert response.status_code == 200, response.text
        result = response.json()["artifacts"][0]["parts"][0]["data"]
        # all four serve the same wiki: each page is one citation naming the others (alsoIn)
        assert named_sources(result["citations"]) == {"web", "tools", "stream", "agent"}
        failed = [s for s in result["steps"] if s["status"] == "error"]
        assert {s.get("connectionId") for s in failed} == {"dead"}

        probed = await client.get("/sources", params={"probe": "1"})
        assert probed.status_code == 200, probed.text
        view = probed.json()
        assert view["healthBasis"] == "live_probe"
        health = {s["id"]: s["health"] for s in view["sources"]}
        assert all(health[i]["ok"] is True for i in ("web", "tools", "stream", "agent")), health
        assert {health[i]["endpoint"] for i in ("tools", "stream")} == {"llmwiki_source_bundle"}
        assert health["agent"]["endpoint"] == "agent-card"
        assert health["dead"]["ok"] is False and health["dead"]["reason"] == "probe_failed"
        assert health["dead"]["message"] and "127.0.0.1" not in json.dumps(health["dead"])
        assert view["readyCount"] == 4

        for path in ("/health", "/health?probe=1", "/sources", "/settings.json"):
            answered = await client.get(path)
            assert answered.status_code == 200, (path, answered.text)

    for command in (["status", "--probe"], ["status", "--probe", "--json"], ["sources", "--probe", "--json"],
                    ["ls"]):
        argv = [console_script("llmwiki-agent-bridge"), *command, "--config", bridge.extra["config"]]
        done = run_command(Path(bridge.extra["config"]).parent / "cli", argv)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        if "--json" in command:
            report = json.loads(done.stdout)
            rows = (report["sourceRegistry"] if command[0] == "status" else report)["sources"]
            assert {r["id"]: r["health"]["ok"] for r in rows} == {
                "web": True, "tools": True, "stream": True, "agent": True, "dead": False}
        elif command[0] == "status":
            assert "Sources: 5 registered, 5 selected, 4 ready (live_probe)" in done.stdout, done.stdout
