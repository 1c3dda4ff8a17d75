"""A2A over plain HTTP: opt-in routes, the card, legacy and 1.0 message forms, JSON-RPC, junk."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from common.version import __version__
from serve.cli import build_parser
from serve.indexing import IndexKeeper
from serve.protocols import http
from serve.protocols.a2a import (
    NO_EVIDENCE,
    is_v1_request,
    legacy_query,
    message_query,
    render_summary,
)
from serve.settings import resolve_settings

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

A2A_PATHS = [("GET", "/.well-known/agent-card.json"), ("POST", "/message:send"),
             ("POST", "/a2a/jsonrpc")]
DRAFT_WORD = "BLUEHERON"  # only in runbooks/incident-comms.md, a draft


async def _query_pack(client: Client, query: str) -> dict[str, Any]:
    response = await client.post("/query", json={"query": query})
    assert response.status == 200
    pack: dict[str, Any] = await response.json()
    return pack


async def _send(client: Client, body: object, path: str = "/message:send") -> dict[str, Any]:
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    payload: dict[str, Any] = await response.json()
    return payload


# -- opt-in ------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path"), A2A_PATHS)
async def test_disabled_a2a_paths_are_not_found(serve_client: ClientFactory, sample_root: Path,
                                                method: str, path: str) -> None:
    client = await serve_client(sample_root)
    response = await client.request(method, path, json={"data": {"query": "release"}})
    assert response.status == 404
    assert await response.json() == {"detail": "Not Found"}


async def test_health_and_capabilities_follow_the_switch(serve_client: ClientFactory,
                                                         sample_root: Path) -> None:
    off = await serve_client(sample_root)
    health = await (await off.get("/health")).json()
    assert health["endpoints"]["a2a_agent_card"] == ""
    assert health["endpoints"]["a2a_message_send"] == ""
    assert "a2a-message" not in health["capabilities"]
    assert "a2a-message" not in (await (await off.get("/manifest")).json())["capabilities"]

    on = await serve_client(sample_root, enable_a2a=True)
    health = await (await on.get("/health")).json()
    assert health["endpoints"]["a2a_agent_card"] == "/.well-known/agent-card.json"
    assert health["endpoints"]["a2a_message_send"] == "/message:send"
    assert health["capabilities"][-1] == "a2a-message"
    assert (await (await on.get("/manifest")).json())["capabilities"][-1] == "a2a-message"
    assert (await (await on.get("/source-bundle")).json())["capabilities"][-1] == "a2a-message"


async def test_card_urls_use_the_public_url_behind_a_proxy(serve_client: ClientFactory,
                                                          sample_root: Path) -> None:
    settings = resolve_settings(sample_root, {"enable_a2a": True},
                                {"LLMWIKI_SERVE_PUBLIC_URL": "https://wiki.example.org/kb/"})
    client = await serve_client(sample_root, enable_a2a=True, public_url=settings.public_url)
    card = await (await client.get("/.well-known/agent-card.json")).json()
    assert [i["url"] for i in card["supportedInterfaces"]] == [
        "https://wiki.example.org/kb", "https://wiki.example.org/kb/a2a/jsonrpc"]
    assert card["url"] == "https://wiki.example.org/kb/a2a/jsonrpc"
    with pytest.raises(ValueError):
        resolve_settings(sample_root, {}, {"LLMWIKI_SERVE_PUBLIC_URL": "https://u:p@wiki.example.org"})


@pytest.mark.parametrize("flag", ["--enable-a2a", "--enable-a2a-compat"])
def test_flag_and_its_alias_enable_a2a(tmp_path: Path, flag: str) -> None:
    args = build_parser().parse_args(["serve", str(tmp_path), flag])
    assert args.enable_a2a is True
    assert resolve_settings(tmp_path, {"enable_a2a": True}, {}).enable_a2a is True
    assert resolve_settings(tmp_path, {}, {"LLMWIKI_SERVE_ENABLE_A2A": "1"}).enable_a2a is True
    assert resolve_settings(tmp_path, {}, {}).enable_a2a is False


# -- the card ----------------------------------------------------------------------------

async def test_agent_card_is_a_1_0_card_with_0_3_and_contract_fields(
        serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    response = await client.get("/.well-known/agent-card.json")
    assert response.status == 200
    card = await response.json()
    manifest = await (await client.get("/manifest")).json()
    base = f"http://{client.server.host}:{client.server.port}"
    assert card["name"] == manifest["title"]
    assert card["description"] == manifest["description"]
    assert card["version"] == __version__
    assert card["capabilities"] == {"streaming": True, "pushNotifications": False}
    assert card["supportedInterfaces"] == [
        {"url": base, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": base + "/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ]
    assert card["defaultInputModes"] and card["defaultOutputModes"]
    for skill in card["skills"]:
        assert {"id", "name", "description", "tags"} <= skill.keys()
        assert skill["tags"]
    # 0.3 connection fields, absolute so 0.3 clients can use them
    assert card["url"] == base + "/a2a/jsonrpc"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"] == "0.3.0"
    assert str(sample_root) not in json.dumps(card)


# -- legacy forms ------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    {"data": {"query": "release checklist"}},
    {"text": "release checklist"},
    {"message": {"parts": [{"text": "release"}, {"kind": "text", "text": "checklist"}]}},
    {"message": {"role": "user", "parts": [{"text": "release checklist"}]}},
    {"data": {"query": "release checklist"}, "text": "ignored because data wins"},
], ids=["data-query", "text", "message-parts", "message-with-role", "data-wins"])
async def test_legacy_forms_answer_the_documented_shape(serve_client: ClientFactory,
                                                        sample_root: Path, body: object) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    payload = await _send(client, body)
    expected = await _query_pack(client, "release checklist")
    assert list(payload) == ["status", "message", "artifacts"]
    assert payload["status"] == "completed"
    assert payload["message"] == {"role": "agent",
                                  "parts": [{"kind": "text", "text": render_summary(expected)}]}
    assert payload["artifacts"] == [{"name": "llmwiki_context",
                                     "parts": [{"kind": "data", "data": expected}]}]
    text = payload["message"]["parts"][0]["text"]
    assert text.startswith(f"{expected['wiki_title']} context:\n")
    assert "Evidence:\n[1] " in text
    assert str(sample_root) not in json.dumps(payload)


async def test_a_body_naming_no_form_is_refused(serve_client: ClientFactory, sample_root: Path) -> None:
    """`{}` is neither a legacy message nor a SendMessageRequest: refused (spec 3.3.2), AIP-193."""
    client = await serve_client(sample_root, enable_a2a=True)
    response = await client.post("/message:send", json={})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert "message is required" in error["message"]


@pytest.mark.parametrize("body", [
    {"message": {"parts": "not-a-list"}},
    {"message": {"parts": [1, None, "x", {"text": None}]}},
    {"message": "hello"},
    {"data": 5},
    {"data": {"query": ""}, "text": ""},
], ids=["parts-not-list", "junk-parts", "message-string", "data-number", "blank"])
async def test_junk_legacy_input_gets_the_empty_query_pack(serve_client: ClientFactory,
                                                           sample_root: Path, body: object) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    payload = await _send(client, body)
    pack = payload["artifacts"][0]["parts"][0]["data"]
    assert payload["status"] == "completed"
    assert pack["query"] == ""
    assert pack["answerable"] is False  # deliberate: an empty query is not answerable
    assert pack == await _query_pack(client, "")


@pytest.mark.parametrize("raw", ["[1, 2]", "\"text\"", "null"])
async def test_non_object_bodies_are_422(serve_client: ClientFactory, sample_root: Path,
                                         raw: str) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    response = await client.post("/message:send", data=raw,
                                 headers={"Content-Type": "application/json"})
    assert response.status == 422
    assert "detail" in await response.json()


async def test_bad_json_is_an_a2a_400(serve_client: ClientFactory, sample_root: Path) -> None:
    response = await serve_client_post(serve_client, sample_root, "{not json")
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400


async def serve_client_post(serve_client: ClientFactory, sample_root: Path, raw: str) -> Any:
    client = await serve_client(sample_root, enable_a2a=True)
    return await client.post("/message:send", data=raw, headers={"Content-Type": "application/json"})


async def test_message_send_is_approved_only(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root, enable_a2a=True, allow_drafts=True)
    drafts = await (await client.post("/query", json={"query": DRAFT_WORD,
                                                      "include_drafts": True})).json()
    assert drafts["evidence"]  # the operator allows drafts, and /query can show them ...
    for body in ({"data": {"query": DRAFT_WORD, "include_drafts": True}, "include_drafts": True},
                 {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": DRAFT_WORD}]},
                  "metadata": {"include_drafts": True}}):
        payload = await _send(client, body)
        text = json.dumps(payload)
        assert "incident-comms" not in text  # ... but A2A never does
        assert "Incident Communications" not in text


# -- 1.0 SendMessageRequest over REST ----------------------------------------------------

async def test_rest_send_message_request_answers_a_1_0_task(serve_client: ClientFactory,
                                                             sample_root: Path) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    body = {"message": {"messageId": "m-1", "contextId": "ctx-1", "role": "ROLE_USER",
                        "parts": [{"text": "release checklist"}]},
            "configuration": {"acceptedOutputModes": ["application/json"]}}
    payload = await _send(client, body)
    expected = await _query_pack(client, "release checklist")
    task = payload["task"]
    assert list(payload) == ["task"]
    assert task["contextId"] == "ctx-1" and task["id"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["role"] == "ROLE_AGENT"
    [artifact] = task["artifacts"]
    assert artifact["name"] == "llmwiki_context" and artifact["artifactId"]
    assert artifact["parts"][0]["data"] == expected
    assert artifact["parts"][1]["text"] == render_summary(expected)


@pytest.mark.parametrize("parts", [[{"raw": "aGVsbG8="}], [{"data": [1, 2]}]])
async def test_rest_parts_without_text_get_the_empty_query_task(serve_client: ClientFactory,
                                                                sample_root: Path, parts: object) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    payload = await _send(client, {"message": {"messageId": "m", "role": "ROLE_USER",
                                               "parts": parts}})
    pack = payload["task"]["artifacts"][0]["parts"][0]["data"]
    assert payload["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert pack["query"] == "" and pack["answerable"] is False


@pytest.mark.parametrize("message", [
    {"messageId": "m", "role": "ROLE_USER", "parts": []},
    {"messageId": "m", "role": "ROLE_USER", "parts": "junk"},
    {"messageId": "m", "role": "ROLE_USER", "parts": [7]},
    {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "data": {}}]},
    {"messageId": "", "role": "ROLE_USER", "parts": [{"text": "a"}]},
    {"messageId": "m", "role": "ROLE_ROBOT", "parts": [{"text": "a"}]},
], ids=["no-parts", "parts-string", "part-number", "two-kinds", "blank-id", "bad-role"])
async def test_rest_invalid_messages_are_refused_before_running(serve_client: ClientFactory,
                                                                sample_root: Path,
                                                                message: dict[str, Any]) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    response = await client.post("/message:send", json={"message": message},
                                 headers={"A2A-Version": "1.0"})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["message"].startswith("message.")


async def test_a_data_part_query_is_read(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    payload = await _send(client, {"message": {"messageId": "m", "role": "ROLE_USER",
                                               "parts": [{"data": {"query": "release checklist"}}]}})
    pack = payload["task"]["artifacts"][0]["parts"][0]["data"]
    assert pack == await _query_pack(client, "release checklist")


# -- JSON-RPC ----------------------------------------------------------------------------

def _rpc(method: str, params: object, rpc_id: object = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


async def test_jsonrpc_send_message_and_0_3_message_send(serve_client: ClientFactory,
                                                         sample_root: Path) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    expected = await _query_pack(client, "release checklist")
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "release checklist"}]}
    v1 = await _send(client, _rpc("SendMessage", {"message": message}, "a"), "/a2a/jsonrpc")
    assert v1["id"] == "a" and v1["jsonrpc"] == "2.0"
    assert v1["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert v1["result"]["task"]["artifacts"][0]["parts"][0]["data"] == expected

    legacy_message = {"kind": "message", "messageId": "m", "role": "user",
                      "parts": [{"kind": "text", "text": "release checklist"}]}
    v03 = await _send(client, _rpc("message/send", {"message": legacy_message}, 2), "/a2a/jsonrpc")
    task = v03["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["name"] == "llmwiki_context"
    assert task["artifacts"][0]["parts"][0] == {"kind": "data", "data": expected}


@pytest.mark.parametrize(("raw", "code"), [
    ("{not json", -32700),
    ("[1]", -32600),
    ('{"jsonrpc": "2.0", "id": 1}', -32600),
    ('{"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}', -32600),
    ('{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}', -32001),
    ('{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}}', -32601),
    ('{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": []}', -32602),
])
async def test_jsonrpc_errors_come_back_with_http_200(serve_client: ClientFactory, sample_root: Path,
                                                      raw: str, code: int) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    response = await client.post("/a2a/jsonrpc", data=raw, headers={"Content-Type": "application/json"})
    assert response.status == 200
    payload = await response.json()
    assert payload["error"]["code"] == code
    assert "result" not in payload


async def test_jsonrpc_junk_message_is_invalid_params(serve_client: ClientFactory,
                                                     sample_root: Path) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    payload = await _send(client, _rpc("SendMessage", {"message": {"parts": [None, {"raw": 1}]}}),
                          "/a2a/jsonrpc")
    assert payload["error"]["code"] == -32602 and "result" not in payload


# -- security still applies ---------------------------------------------------------------

@pytest.mark.parametrize(("method", "path"), A2A_PATHS)
async def test_foreign_origin_is_refused(serve_client: ClientFactory, sample_root: Path,
                                         method: str, path: str) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    response = await client.request(method, path, json={"text": "release"},
                                    headers={"Origin": "http://evil.example"})
    assert response.status == 403


async def test_foreign_host_is_refused(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root, enable_a2a=True)
    response = await client.get("/.well-known/agent-card.json", headers={"Host": "evil.example"})
    assert response.status == 421


# -- pure helpers ---------------------------------------------------------------------------

def test_only_a_message_id_makes_a_1_0_request() -> None:
    assert is_v1_request({"message": {"messageId": "m", "parts": []}})
    assert not is_v1_request({"message": {"role": "ROLE_USER", "parts": []}})
    assert not is_v1_request({"data": {"query": "q"}, "messageId": "m"})


def test_query_extraction_rules() -> None:
    assert legacy_query({"data": {"query": " a "}, "text": "b"}) == "a"
    assert legacy_query({"data": {"query": ""}, "text": "b"}) == "b"
    assert legacy_query({"message": {"parts": [{"text": "a"}, {"x": 1}, {"text": "b"}]}}) == "a  b"
    assert message_query({"parts": [{"text": "a"}, {"text": "b"}]}) == "a b"
    assert message_query({"parts": [{"data": {"query": "q"}}]}) == "q"
    assert message_query(None) == ""


def test_summary_without_evidence() -> None:
    assert render_summary({"orientation": [], "evidence": []}) == NO_EVIDENCE


async def test_openapi_lists_a2a_routes_only_when_enabled(serve_client: ClientFactory,
                                                          sample_root: Path) -> None:
    paths = {"/.well-known/agent-card.json", "/message:send", "/a2a/jsonrpc"}
    off = await (await (await serve_client(sample_root)).get("/openapi.json")).json()
    assert not paths & set(off["paths"])
    on = await (await (await serve_client(sample_root, enable_a2a=True)).get("/openapi.json")).json()
    assert paths <= set(on["paths"])


# -- off the event loop ------------------------------------------------------------------

@pytest.mark.parametrize("form", ["legacy", "jsonrpc"])
async def test_a_query_before_the_index_exists_does_not_hold_the_event_loop(
        serve_client: ClientFactory, sample_root: Path, monkeypatch: pytest.MonkeyPatch,
        form: str) -> None:
    """Before the index is built a query waits for the build: it runs in a worker thread (the
    rule HTTP and MCP follow), so /health answers meanwhile."""
    client = await serve_client(sample_root, enable_a2a=True)
    source = client.app[http.SOURCE_KEY]
    monkeypatch.setattr(IndexKeeper, "ready", property(lambda self: False))
    context = source.context
    started, release = threading.Event(), threading.Event()
    threads: list[bool] = []

    def gated(req: Any) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        started.set()
        assert release.wait(10), "the test never released the query"
        return context(req)

    monkeypatch.setattr(source, "context", gated)
    if form == "legacy":
        pending = asyncio.ensure_future(client.post("/message:send",
                                                    json={"data": {"query": "release checklist"}}))
    else:
        call = {"jsonrpc": "2.0", "id": 1, "method": "message/send",
                "params": {"message": {"role": "user", "messageId": "m1",
                                       "parts": [{"kind": "text", "text": "release checklist"}]}}}
        pending = asyncio.ensure_future(client.post("/a2a/jsonrpc", json=call))
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
    health = await client.get("/health")  # answered while the query is still running
    assert health.status == 200 and not pending.done()
    release.set()
    response = await pending
    assert response.status == 200 and "release" in await response.text()
    assert threads == [False]
