"""Where a client written for the reference bridge broke on ours (issue 12, section 5)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.config.registry import normalize_inline
from bridge.core.bundle import source_bundle
from tests.support.bridge_sources import BridgeFactory, Client, observations, source

QUESTION = "How do we ship a hotfix release?"
AGENT = Path(__file__).resolve().parents[1] / "support" / "fake_acp_agent.py"


async def send(client: Client, body: Any, status: int = 200, **headers: str) -> dict[str, Any]:
    response = await client.post("/message:send", json=body, headers=headers)
    payload: dict[str, Any] = await response.json()
    assert response.status == status, payload
    return payload


def result_of(task: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = task["artifacts"][0]["parts"][0]["data"]
    return data


# ----------------------------------------------------------------------------- artifact shapes

def test_raw_origins_summary_counts_labels_even_when_empty() -> None:
    [descriptor] = normalize_inline([source("wiki", "http://127.0.0.1:1")])

    def origins(value: Any) -> Any:
        bundle = source_bundle({"bundle_id": "b", "raw_origins": value}, descriptor)
        return bundle.wire().get("rawOrigins")

    assert origins({"enabled": False, "metadata_only": True, "public_root_labels": []}) == {
        "enabled": False, "metadataOnly": True, "publicRootLabelCount": 0}
    assert origins({"enabled": "true", "metadataOnly": "false", "count": "3",
                    "publicRootLabels": ["a", "b"]}) == {
        "enabled": True, "metadataOnly": False, "originCount": 3, "publicRootLabelCount": 2}
    assert origins("a, b,, c") == {"originCount": 3}
    assert origins(["x", ""]) == {"originCount": 1}
    assert origins({"metadata_only": "maybe"}) is None  # nothing usable: no key at all
    assert origins([]) is None


async def test_serve_bundles_carry_the_label_count(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client()
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only",
                                           "knowledgeSources": [source("wiki", serve_url)]}))
    [bundle] = result["sourceBundles"]
    assert isinstance(bundle["rawOrigins"]["publicRootLabelCount"], int)


async def test_a_failed_source_step_still_has_citation_lists(bridge_client: BridgeFactory, serve_url: str,
                                                             dead_url: str) -> None:
    client = await bridge_client()
    result = result_of(await send(client, {"query": QUESTION, "mode": "evidence-only", "knowledgeSources": [
        source("down", dead_url), source("wiki", serve_url)]}))
    down, wiki = (s for s in result["steps"] if s["id"].startswith("tool-"))
    assert down["status"] == "error"
    assert down["citationIds"] == [] and down["citationRefs"] == []
    assert wiki["status"] == "done" and wiki["citationIds"]


# ----------------------------------------------------------------------------- request handling

async def test_too_large_on_message_send_has_the_ids(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    big = json.dumps({"query": "x" * (3 * 1024 * 1024)})
    response = await client.post("/message:send", data=big, headers={"X-Request-Id": "req-413",
                                                                      "X-Trace-Id": "trace-413"})
    assert response.status == 413
    too_large = {"code": "body_too_large", "message": "Request body is too large."}
    assert await response.json() == {"error": too_large, "requestId": "req-413", "traceId": "trace-413"}
    response = await client.put("/settings/sources.json", data=big)
    assert response.status == 413 and "requestId" not in await response.json()


@pytest.mark.parametrize(("query", "text"), [(42, "42"), (1.0, "1"), (2.5, "2.5"), (True, "true")])
async def test_a_number_query_is_read_as_text(bridge_client: BridgeFactory, serve_url: str, query: Any,
                                              text: str) -> None:
    client = await bridge_client()
    result = result_of(await send(client, {"query": query, "mode": "evidence-only",
                                           "knowledgeSources": [source("wiki", serve_url)]}))
    assert result["steps"][0]["id"] == "bridge-plan"
    response = await client.post("/message:send", json={"query": {"text": "no"}, "knowledgeSources": []})
    assert response.status == 400


async def test_excluding_another_sources_pages_is_refused(bridge_client: BridgeFactory, serve_url: str,
                                                          aiohttp_server: Any) -> None:
    client = await bridge_client()
    retrieval = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical"}
    inline = [source("wiki", serve_url)]
    for bad in ("other:index", "page:x"):
        payload = await send(client, {"query": QUESTION, "mode": "evidence-only", "knowledgeSources": inline,
                                      "retrieval": {**retrieval, "search": {"excludePageIds": [bad]}}},
                             status=400, **{"X-Request-Id": "req-x"})
        assert payload["error"] == {
            "code": "invalid_retrieval_intent",
            "message": "retrieval.search.excludePageIds contains a source-prefixed page id for an unselected "
                       "source."}
        assert payload["requestId"] == "req-x" and "traceId" in payload
    own = {**retrieval, "search": {"excludePageIds": ["wiki:index", "index"]}}
    ok = await send(client, {"query": QUESTION, "mode": "evidence-only", "knowledgeSources": inline,
                             "retrieval": own})
    assert result_of(ok)["citations"]


# ----------------------------------------------------------------------------- MCP schemas

async def test_tool_schemas_declare_the_reference_constraints(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    response = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    tools = {t["name"]: t for t in (await response.json())["result"]["tools"]}
    for tool in tools.values():
        assert tool["description"]
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for name in ("sourceId", "source_id"):
            if tool["name"] != "llmwiki_agent_run":
                assert schema["properties"][name]["description"]
    run = tools["llmwiki_agent_run"]["inputSchema"]["properties"]
    for name in ("query", "orchestrationMode", "mode"):
        assert run[name]["description"], name
    assert run["query"]["minLength"] == 1
    for name in ("llmwiki_context", "llmwiki_search"):
        assert tools[name]["inputSchema"]["properties"]["query"]["minLength"] == 1
    read = tools["llmwiki_read"]["inputSchema"]["properties"]
    assert read["pageId"]["minLength"] == 1 and read["page_id"]["minLength"] == 1
    neighbors = tools["llmwiki_graph_neighbors"]["inputSchema"]["properties"]
    for name in ("nodeId", "node_id", "relation"):
        assert neighbors[name]["minLength"] == 1, name
    for name in ("nodeIds", "node_ids"):
        assert neighbors[name]["minItems"] == 1 and neighbors[name]["items"]["minLength"] == 1, name
    assert neighbors["relations"]["items"]["minLength"] == 1


# ----------------------------------------------------------------------------- runtime settings

async def test_runtime_adapter_and_identity_settings(bridge_client: BridgeFactory, config_path: Path) -> None:
    client = await bridge_client()
    response = await client.put("/settings/config.json", json={"runtimeAdapter": "telepathy"})
    assert response.status == 400
    assert (await response.json())["error"] == {
        "code": "invalid_bridge_settings",
        "message": "Unsupported LLMWiki Agent Bridge runtime adapter: telepathy."}
    response = await client.put("/settings/config.json", json={
        "runtimeAdapter": "ACP", "runtimeName": "Team Wiki Bridge", "runtimeId": "team-bridge",
        "providerOrganization": "Team"})
    saved = await response.json()
    assert response.status == 200, saved
    assert {"runtimeAdapter", "runtimeName", "runtimeId", "providerOrganization"} <= set(saved["applied"])
    assert saved["settings"]["runtime"]["adapter"] == "deepagents-acp"
    assert saved["settings"]["runtime"]["name"] == "Team Wiki Bridge"
    card = await (await client.get("/.well-known/agent-card.json")).json()
    assert (card["id"], card["name"], card["provider"]) == ("team-bridge", "Team Wiki Bridge",
                                                            {"organization": "Team"})
    health = await (await client.get("/health")).json()
    assert health["runtimeAdapter"] == "deepagents-acp" and health["runtimeId"] == "team-bridge"
    stored = json.loads(config_path.read_text(encoding="utf-8"))["config"]
    assert stored["runtimeAdapter"] == "deepagents-acp" and stored["runtimeName"] == "Team Wiki Bridge"
    # A profile resets the identity to its defaults; an explicit field in the same body still wins.
    response = await client.put("/settings/config.json", json={"runtimeProfile": "generic",
                                                               "runtimeName": "Mine"})
    runtime = (await response.json())["settings"]["runtime"]
    assert runtime["id"] == "llmwiki-agent-bridge-generic-openai-compatible" and runtime["name"] == "Mine"
    response = await client.put("/settings/config.json", json={"runtimeId": ""})
    assert response.status == 400


# ----------------------------------------------------------------------------- the ACP adapter

def acp_settings(tmp_path: Path, mode: str, **extra: Any) -> dict[str, Any]:
    return {"runtime_adapter": "deepagents-acp", "deepagents_acp_command": sys.executable,
            "deepagents_acp_args": (str(AGENT), mode, str(tmp_path / "acp.jsonl")),
            "deepagents_acp_cwd": tmp_path, **extra}


def received(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "acp.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


async def test_acp_adapter_answers_through_one_session(bridge_client: BridgeFactory, serve_url: str,
                                                       fake: Any, tmp_path: Path) -> None:
    client = await bridge_client(**acp_settings(tmp_path, "answer"), base_url=fake.url)
    inline = [source("wiki", serve_url)]
    result = result_of(await send(client, {"query": QUESTION, "knowledgeSources": inline}))
    assert result["answer"] == "The agent says: release after the checklist [1](#citation-1)."
    runtime_step = next(s for s in result["steps"] if s["id"] == "runtime-deepagents-acp")
    assert runtime_step["label"] == "Call DeepAgents ACP runtime" and runtime_step["status"] == "done"
    assert "DeepAgents ACP runtime adapter returned" in runtime_step["detail"]
    assert fake.requests == []  # the chat endpoint is never called
    messages = received(tmp_path)
    assert [m.get("method") for m in messages] == ["initialize", "session/new", "session/prompt", None]
    init, new, prompt, permission = messages
    assert init["params"] == {"protocolVersion": 1, "clientInfo": {"name": "llmwiki-agent-bridge"},
                              "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                                     "terminal": False}}
    assert new["params"] == {"cwd": str(tmp_path), "mcpServers": []}
    text = prompt["params"]["prompt"][0]["text"]
    assert text.startswith("# system\n") and "# LLMWiki evidence bundle\n" in text and QUESTION in text
    assert permission == {"jsonrpc": "2.0", "id": 900, "result": {"outcome": {"outcome": "cancelled"}}}


@pytest.mark.parametrize(("mode", "facts"), [
    ("exit", {"processExitCode": "42"}),
    ("old-version", {}),
    ("hang", {"timeout": "true"}),
])
async def test_acp_failures_are_the_contracts_502(bridge_client: BridgeFactory, serve_url: str,
                                                  tmp_path: Path, mode: str, facts: dict[str, str]) -> None:
    # Only the hanging agent needs a short deadline (a busy machine starts Python slowly).
    client = await bridge_client(**acp_settings(tmp_path, mode),
                                 request_timeout_ms=1500 if mode == "hang" else 30_000)
    payload = await send(client, {"query": QUESTION, "knowledgeSources": [source("wiki", serve_url)]},
                         status=502, **{"X-Request-Id": "req-acp"})
    assert payload["error"] == {"code": "runtime_adapter_failed",
                                "message": "Runtime adapter request failed."}
    assert payload["requestId"] == "req-acp"
    runtime_step = payload["steps"][-1]
    assert runtime_step["id"] == "runtime-deepagents-acp" and runtime_step["status"] == "error"
    diagnostic = payload["diagnostics"][-1]
    assert diagnostic == runtime_step["diagnostic"]
    assert (diagnostic["scope"], diagnostic["phase"], diagnostic["protocol"]) == ("runtime", "deepagents-acp",
                                                                                  "acp")
    seen = observations(diagnostic)
    assert facts.items() <= seen.items()
    assert seen["runtimeAdapter"] == "deepagents-acp"
    text = json.dumps(payload)
    assert "sk-live" not in text and "/home/someone" not in text and QUESTION not in text
    if mode == "exit":
        assert "agent crashed" in seen["stderr"]


async def test_acp_command_that_cannot_start(bridge_client: BridgeFactory, serve_url: str,
                                             tmp_path: Path) -> None:
    client = await bridge_client(runtime_adapter="deepagents-acp",
                                 deepagents_acp_command=str(tmp_path / "no-such-agent"))
    payload = await send(client, {"query": QUESTION, "knowledgeSources": [source("wiki", serve_url)]},
                         status=502)
    assert payload["error"]["code"] == "runtime_adapter_failed"
    assert payload["steps"][-1]["detail"] == "DeepAgents ACP process could not start."
    evidence_only = await send(client, {"query": QUESTION, "mode": "evidence-only",
                                        "knowledgeSources": [source("wiki", serve_url)]})
    assert result_of(evidence_only)["citations"]  # evidence-only never needs the runtime


async def test_config_values_are_read_as_the_reference_reads_them(bridge_client: BridgeFactory) -> None:
    client = await bridge_client(model="")

    async def put(body: dict[str, Any], status: int = 200) -> dict[str, Any]:
        response = await client.put("/settings/config.json", json=body)
        payload: dict[str, Any] = await response.json()
        assert response.status == status, payload
        return payload

    saved = await put({"timeoutMs": 2500.0, "port": "8790", "runtimeName": 42})
    assert saved["settings"]["runtimeConnection"]["requestTimeoutMs"] == 2500
    assert saved["settings"]["runtime"]["name"] == "42" and saved["restartRequired"] == ["port"]
    for body, message in (({"port": 70000}, "port must be an integer port from 0 to 65535."),
                          ({"timeoutMs": 0}, "timeoutMs must be a positive integer."),
                          ({"agentModel": " "}, "agentModel must be a non-empty string."),
                          ({"runtimeId": {"x": 1}}, "runtimeId must be a non-empty string.")):
        assert (await put(body, 400))["error"]["message"] == message
    # A new profile on a bridge without a model brings the default model back.
    switched = await put({"runtimeProfile": "deepagents"})
    assert {"model", "hermesModel"} <= set(switched["applied"])
    assert switched["settings"]["runtimeConnection"]["model"] == "hermes-agent"
    assert switched["settings"]["runtimeConnection"]["modelSource"] == "default"


async def test_a_mode_that_is_not_text_is_refused(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    payload = await send(client, {"query": QUESTION, "mode": 5, "knowledgeSources": []}, status=400)
    assert payload["error"]["code"] == "bad_request"


async def test_settings_and_tool_call_bodies_as_the_reference_reads_them(
        bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    response = await client.put("/settings/config.json", json=[1])
    assert response.status == 400
    assert (await response.json())["error"] == {"code": "bad_request",
                                                "message": "Settings config body must be a JSON object."}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "llmwiki_list_sources", "arguments": "not an object"}}
    answer = await (await client.post("/mcp", json=call)).json()
    assert answer["result"]["structuredContent"]["llmwiki_sources"]["totalSourceCount"] == 0
    unsaved = await bridge_client(config_path=None)
    response = await unsaved.put("/settings/config.json", json={})
    assert response.status == 409
    assert (await response.json())["error"]["code"] == "settings_persistence_disabled"


async def test_source_tools_read_a_number_as_text(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client()
    sources = [source("wiki", serve_url)]
    for name, arguments in (("llmwiki_search", {"query": 2026}), ("llmwiki_read", {"pageId": 404404})):
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": {**arguments, "knowledgeSources": sources}}}
        answer = await (await client.post("/mcp", json=call)).json()
        assert answer["result"]["isError"] is False, answer
    value = answer["result"]["structuredContent"]["llmwiki_read"]
    assert value["pageId"] == "404404" and value["page"]["found"] is False
