"""The bridge's A2A surface over raw HTTP: the card, every request form, JSON-RPC and its errors."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card

from bridge.config.resolve import resolve_settings
from bridge.config.settings import SettingsError
from common.options import parse_public_url
from tests.support.bridge_sources import BridgeFactory, Client, source

QUESTION = "How do we ship a hotfix release?"
TOKEN = "bridge-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EVIDENCE_ONLY = {"orchestrationMode": "evidence-only"}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def base_of(client: Client) -> str:
    return str(client.make_url("")).rstrip("/")


def v1_message(*parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"messageId": "msg-1", "role": "ROLE_USER", "parts": list(parts), **extra}


async def post(client: Client, path: str, body: Any, status: int = 200, **headers: str) -> Any:
    response = await client.post(path, json=body, headers={**AUTH, **headers})
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def started(bridge_client: BridgeFactory, serve_url: str | None = None, **settings: Any) -> Client:
    client = await bridge_client(bearer_token=TOKEN, **settings)
    if serve_url is not None:
        response = await client.put("/settings/sources.json", json=[source("sample-wiki", serve_url)],
                                    headers=AUTH)
        assert response.status == 200
    return client


def data_part(task: dict[str, Any]) -> dict[str, Any]:
    """The llmwiki_agent_result payload of a 1.0 task, checking the artifact's shape on the way."""
    [artifact] = task["artifacts"]
    assert artifact["name"] == "llmwiki_agent_result" and artifact["artifactId"]
    data, text = artifact["parts"]
    assert data["mediaType"] == "application/json" and text["mediaType"] == "text/plain"
    assert text["text"] == data["data"]["answer"]
    result: dict[str, Any] = data["data"]
    return result


# ----------------------------------------------------------------------------- the card

async def test_card_is_a_contract_card_and_an_a2a_card(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await started(bridge_client, serve_url)
    assert (await client.get("/.well-known/agent-card.json")).status == 401
    response = await client.get("/.well-known/agent-card.json", headers=AUTH)
    assert response.status == 200 and response.content_type == "application/json"
    card = await response.json()
    base = base_of(client)

    # the contract's fields (2.6.2)
    assert card["id"] == "llmwiki-agent-bridge-hermes" and card["protocol"] == "a2a"
    assert card["description"].startswith("Local A2A-compatible bridge")
    assert {"name", "runtime", "agentRuntime", "provider"} <= set(card)
    assert card["url"] == base + "/message:send"
    capabilities = card["capabilities"]
    assert capabilities["streaming"] is True
    # The bridge's own facts ride in a declared, optional extension (strict A2A parsers reject
    # unknown keys in `capabilities`).
    [extension] = capabilities["extensions"]
    assert extension["uri"] == "urn:llmwiki:a2a-extension:agent-bridge:v1" and extension["required"] is False
    assert extension["params"] == {"structuredArtifacts": True, "localBridge": True,
                                   "knowledgeSourceProtocols": ["llmwiki-http", "mcp", "a2a"]}
    assert set(capabilities) == {"streaming", "pushNotifications", "extensions"}
    metadata = card["metadata"]
    assert metadata["bridge"] == "llmwiki-agent-bridge" and metadata["settingsUrl"] == "/settings"
    assert metadata["runtimeProfile"] == "hermes" and metadata["runtimeAdapter"] == "chat-completions"
    assert metadata["protocolSurface"] == {"a2a": "compatible", "mcp": "compatible"}
    assert metadata["runtimeConnection"]["reachability"] == {"checked": False, "basis": "not_probed"}
    assert metadata["sourceRegistry"]["registeredSourceCount"] == 1
    assert serve_url not in str(card)  # source URLs never leak

    # the A2A 1.0 fields, with absolute interface URLs
    assert card["version"] and card["defaultInputModes"] and card["defaultOutputModes"]
    assert card["supportedInterfaces"] == [
        {"url": base, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": base + "/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    [skill] = card["skills"]
    assert skill["id"] == "llmwiki_agent_result" and skill["name"] and skill["description"] and skill["tags"]
    assert card["preferredTransport"] == "JSONRPC" and card["protocolVersion"] == "0.3.0"

    parsed = parse_agent_card(card)  # what the official client does with it
    assert [i.url for i in parsed.supported_interfaces] == [base, base + "/a2a/jsonrpc"]
    assert parsed.name == card["name"] and [s.id for s in parsed.skills] == ["llmwiki_agent_result"]


async def test_card_urls_follow_the_host_header(bridge_client: BridgeFactory) -> None:
    client = await started(bridge_client)
    card = await (await client.get("/.well-known/agent-card.json",
                                   headers={**AUTH, "Host": "localhost:9999"})).json()
    assert card["url"] == "http://localhost:9999/message:send"
    assert [i["url"] for i in card["supportedInterfaces"]] == ["http://localhost:9999",
                                                               "http://localhost:9999/a2a/jsonrpc"]
    assert card["metadata"]["sourceRegistry"]["registeredSourceCount"] == 0


async def test_card_urls_use_the_public_url_behind_a_proxy(bridge_client: BridgeFactory) -> None:
    client = await started(bridge_client, public_url=parse_public_url("https://bridge.example.org/llm/"))
    card = await (await client.get("/.well-known/agent-card.json",
                                   headers={**AUTH, "Host": "127.0.0.1:8788"})).json()
    assert card["url"] == "https://bridge.example.org/llm/message:send"
    assert [i["url"] for i in card["supportedInterfaces"]] == [
        "https://bridge.example.org/llm", "https://bridge.example.org/llm/a2a/jsonrpc"]


@pytest.mark.parametrize("bad", ["ftp://x.example", "https://u:p@x.example", "https://x.example/?q=1",
                                 "/relative", "https://x.example:99999"])
def test_public_url_must_be_a_plain_http_url(bad: str) -> None:
    with pytest.raises(SettingsError):
        resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_PUBLIC_URL": bad})


# ----------------------------------------------------------------------------- POST /message:send

async def test_v1_send_message_request_gets_a_v1_task(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await started(bridge_client)
    inline = {"knowledgeSources": [source("inline-wiki", serve_url)], **EVIDENCE_ONLY}
    body = {"message": v1_message({"text": QUESTION}, {"data": inline}, contextId="ctx-7"),
            "configuration": {"acceptedOutputModes": ["application/json"]}}
    payload = await post(client, "/message:send", body, **{"A2A-Version": "1.0", "X-Request-Id": "req-9"})
    assert set(payload) == {"task"}
    task = payload["task"]
    assert task["id"] and task["contextId"] == "ctx-7"
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task["status"]["timestamp"]
    status_message = task["status"]["message"]
    assert status_message["role"] == "ROLE_AGENT" and status_message["taskId"] == task["id"]
    assert task["metadata"]["requestId"] == "req-9" and task["metadata"]["traceId"]
    result = data_part(task)
    assert status_message["parts"] == [{"text": result["answer"]}]
    assert result["orchestrationMode"] == "evidence-only" and result["requestId"] == "req-9"
    assert result["citations"] and {c["sourceId"] for c in result["citations"]} == {"inline-wiki"}
    assert not any("kind" in part for part in task["artifacts"][0]["parts"])  # 1.0 parts have no `kind`


LEGACY_MESSAGE = {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": QUESTION}]}


@pytest.mark.parametrize(("body", "headers", "v1"), [
    ({"message": LEGACY_MESSAGE}, {}, False),
    ({"message": LEGACY_MESSAGE}, {"A2A-Version": "1.0"}, True),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": QUESTION}]}}, {}, True),
    ({"data": {"query": QUESTION}, "message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
     {"A2A-Version": "1.0"}, False),
], ids=["0.3-message-plain-client", "0.3-message-1.0-header", "1.0-role", "has-data"])
async def test_the_answer_form_follows_the_request_form(bridge_client: BridgeFactory, serve_url: str,
                                                        body: dict[str, Any], headers: dict[str, str],
                                                        v1: bool) -> None:
    client = await started(bridge_client, serve_url)
    payload = await post(client, "/message:send", {**body, **EVIDENCE_ONLY}, **headers)
    if v1:
        assert set(payload) == {"task"}
        assert data_part(payload["task"])["citations"]
    else:  # the contract's task envelope (4.1), unchanged
        assert {"id", "requestId", "traceId", "status", "message", "artifacts"} <= set(payload)
        assert payload["status"]["state"] == "completed"
        assert payload["artifacts"][0]["parts"][0]["data"]["citations"]


async def test_a_1_0_message_without_message_id_is_refused(bridge_client: BridgeFactory,
                                                          serve_url: str) -> None:
    """With a 1.x A2A-Version header the body is a SendMessageRequest, validated before it runs."""
    client = await started(bridge_client, serve_url)
    response = await client.post("/message:send", json={
        "message": {"role": "ROLE_USER", "parts": [{"text": QUESTION}]}, **EVIDENCE_ONLY},
        headers={**AUTH, "A2A-Version": "1.0"})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "messageId" in error["message"]


async def test_metadata_can_carry_the_mode(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await started(bridge_client, serve_url)
    body = {"message": v1_message({"text": QUESTION}), "metadata": EVIDENCE_ONLY}
    task = (await post(client, "/message:send", body))["task"]
    assert data_part(task)["orchestrationMode"] == "evidence-only"


async def test_v1_errors_are_a2a_rest_errors(bridge_client: BridgeFactory) -> None:
    client = await started(bridge_client)
    payload = await post(client, "/message:send", {"message": v1_message({"text": " "})}, status=400,
                         **{"X-Request-Id": "req-e"})
    error = payload["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"] == "A2A request data.query or message text is required."
    info, body = error["details"]
    assert info["@type"] == ERROR_INFO and info["reason"] == "INVALID_PARAMS"
    assert info["metadata"]["code"] == "bad_request" and info["metadata"]["requestId"] == "req-e"
    assert body["value"]["error"]["code"] == "bad_request" and body["value"]["traceId"]

    retrieval = {"message": v1_message({"text": "x"}, {"data": {"retrieval": {"searchMode": "vector"}}})}
    error = (await post(client, "/message:send", retrieval, status=400))["error"]
    assert error["details"][0]["metadata"]["code"] == "invalid_retrieval_intent"

    # the documented form keeps the contract's error body
    legacy = await post(client, "/message:send", {"data": {"query": " "}}, status=400)
    assert legacy["error"]["code"] == "bad_request" and legacy["requestId"] and legacy["traceId"]


# ----------------------------------------------------------------------------- JSON-RPC

def rpc(method: str, params: Any, rpc_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


async def test_jsonrpc_send_message_1_0_and_0_3(bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await started(bridge_client, serve_url)
    params = {"message": v1_message({"text": QUESTION}, {"data": EVIDENCE_ONLY})}
    v1 = await post(client, "/a2a/jsonrpc", rpc("SendMessage", params, "a"), **{"X-Request-Id": "req-r"})
    assert v1["jsonrpc"] == "2.0" and v1["id"] == "a" and set(v1["result"]) == {"task"}
    task = v1["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task["metadata"]["requestId"] == "req-r"
    assert data_part(task)["citations"]

    legacy_message = {"kind": "message", "messageId": "m", "role": "user",
                      "parts": [{"kind": "text", "text": QUESTION}, {"kind": "data", "data": EVIDENCE_ONLY}]}
    for path in ("/a2a/jsonrpc", "/message:send"):  # the card's 0.3 `url` is /message:send
        v03 = await post(client, path, rpc("message/send", {"message": legacy_message}, 2))
        result = v03["result"]
        assert v03["id"] == 2 and result["kind"] == "task" and result["status"]["state"] == "completed"
        assert result["status"]["message"]["role"] == "agent"
        data, text = result["artifacts"][0]["parts"]
        assert data["kind"] == "data" and data["data"]["citations"]
        assert text == {"kind": "text", "text": data["data"]["answer"]}


@pytest.mark.parametrize(("raw", "code", "rpc_id"), [
    ("{not json", -32700, None),
    ("[]", -32600, None),
    ('[{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}]', -32600, None),
    ('{"jsonrpc": "2.0", "id": 1}', -32600, 1),
    ('{"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}', -32600, 1),
    ('{"jsonrpc": "2.0", "id": {"x": 1}, "method": "SendMessage"}', -32600, None),
    ('{"jsonrpc": "2.0", "id": 3, "method": "Nope", "params": {}}', -32601, 3),
    ('{"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": "t"}}', -32001, 4),
    ('{"jsonrpc": "2.0", "id": 5, "method": "SendStreamingMessage", "params": {}}', -32602, 5),
    ('{"jsonrpc": "2.0", "id": 10, "method": "SubscribeToTask", "params": {"id": "t"}}', -32001, 10),
    ('{"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {"id": "t"}}', -32004, 6),
    ('{"jsonrpc": "2.0", "id": 7, "method": "CancelTask", "params": {"id": "t"}}', -32001, 7),
    ('{"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": {}}', -32602, 9),
    ('{"jsonrpc": "2.0", "id": 8, "method": "SendMessage", "params": []}', -32602, 8),
])
async def test_jsonrpc_errors_come_back_with_http_200(bridge_client: BridgeFactory, raw: str, code: int,
                                                      rpc_id: Any) -> None:
    client = await started(bridge_client)
    response = await client.post("/a2a/jsonrpc", data=raw,
                                 headers={**AUTH, "Content-Type": "application/json"})
    assert response.status == 200
    payload = await response.json()
    assert payload["jsonrpc"] == "2.0" and payload["id"] == rpc_id and "result" not in payload
    assert payload["error"]["code"] == code and payload["error"]["message"]


@pytest.mark.parametrize(("params", "bridge_code"), [
    ({"message": v1_message({"text": " "})}, "bad_request"),
    ({"message": v1_message({"text": "x"}), "metadata": {"orchestrationMode": "turbo"}}, "bad_request"),
    ({"message": v1_message({"text": "x"}, {"data": {"retrieval": {"schemaVersion": "v0"}}})},
     "invalid_retrieval_intent"),
])
async def test_jsonrpc_run_errors_carry_the_bridge_error(bridge_client: BridgeFactory, params: dict[str, Any],
                                                         bridge_code: str) -> None:
    client = await started(bridge_client)
    payload = await post(client, "/a2a/jsonrpc", rpc("SendMessage", params, "e"), **{"X-Request-Id": "req-x"})
    error = payload["error"]
    assert payload["id"] == "e" and error["code"] == -32602
    info, body = error["data"]
    assert info == {"@type": ERROR_INFO, "reason": "INVALID_PARAMS", "domain": "a2a-protocol.org",
                    "metadata": {"code": bridge_code, "requestId": "req-x",
                                 "traceId": body["value"]["traceId"]}}
    assert body["value"]["error"] == {"code": bridge_code, "message": error["message"]}


async def test_jsonrpc_needs_the_bearer_token_too(bridge_client: BridgeFactory) -> None:
    client = await started(bridge_client)
    response = await client.post("/a2a/jsonrpc", json=rpc("SendMessage", {}))
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "bridge_unauthorized"
