"""The official a2a-sdk client against the running app: card resolution, HTTP+JSON, JSON-RPC."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from google.protobuf import json_format

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # so `tests.support` imports however pytest is launched
    sys.path.insert(0, str(REPO))

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory, create_client  # noqa: E402
from a2a.client.card_resolver import parse_agent_card  # noqa: E402
from a2a.helpers import new_text_message  # noqa: E402
from a2a.types import Role, SendMessageRequest, Task, TaskState  # noqa: E402

from serve.protocols.http import create_app  # noqa: E402
from serve.settings import ServeSettings  # noqa: E402
from tests.support.folders import copy_fixture  # noqa: E402

QUESTION = "release checklist"


@dataclass
class Wire:
    """What the client actually sent: (method, path, A2A-Version header, JSON body)."""

    requests: list[tuple[str, str, str | None, Any]] = field(default_factory=list)


@dataclass
class Server:
    base: str
    root: Path
    wire: Wire


@pytest.fixture
async def a2a_server(aiohttp_server: Callable[..., Awaitable[Any]], tmp_path: Path) -> Server:
    root = copy_fixture("sample-wiki", tmp_path / "roots")
    app = create_app(ServeSettings(root=root, cache_dir=tmp_path / "cache", enable_a2a=True))
    wire = Wire()

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        wire.requests.append((request.method, request.path, request.headers.get("A2A-Version"),
                              json.loads(raw) if raw else None))
        return await handler(request)

    app.middlewares.insert(0, record)
    server = await aiohttp_server(app)
    return Server(f"http://{server.host}:{server.port}", root, wire)


async def _query_pack(server: Server, query: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        response = await http.post(server.base + "/query", json={"query": query})
    response.raise_for_status()
    pack: dict[str, Any] = response.json()
    return pack


async def _send(client: Any, text: str) -> Task:
    message = new_text_message(text, role=Role.ROLE_USER)
    events = [event async for event in client.send_message(SendMessageRequest(message=message))]
    assert len(events) == 1 and events[0].HasField("task")
    task: Task = events[0].task
    return task


def _artifact_data(task: Task) -> dict[str, Any]:
    [artifact] = task.artifacts
    assert artifact.name == "llmwiki_context"
    data: dict[str, Any] = json_format.MessageToDict(artifact.parts[0].data)
    return data


async def test_card_resolves_with_the_official_resolver(a2a_server: Server) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, a2a_server.base).get_agent_card()
    bindings = {i.protocol_binding: i for i in card.supported_interfaces}
    assert set(bindings) == {"HTTP+JSON", "JSONRPC"}
    assert bindings["HTTP+JSON"].url == a2a_server.base
    assert bindings["JSONRPC"].url == a2a_server.base + "/a2a/jsonrpc"
    assert all(i.protocol_version == "1.0" for i in card.supported_interfaces)
    assert card.name and card.description and card.version
    assert card.capabilities.streaming
    assert [s.id for s in card.skills] == ["llmwiki_context"]
    assert list(card.default_input_modes) and list(card.default_output_modes)


@pytest.mark.parametrize(("binding", "path", "rpc_method"), [
    ("HTTP+JSON", "/message:send", None),
    ("JSONRPC", "/a2a/jsonrpc", "SendMessage"),
])
async def test_send_message_with_the_official_client(a2a_server: Server, binding: str, path: str,
                                                     rpc_method: str | None) -> None:
    client = await create_client(a2a_server.base, client_config=ClientConfig(
        streaming=False, supported_protocol_bindings=[binding]))
    try:
        task = await _send(client, QUESTION)
    finally:
        await client.close()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.id and task.context_id
    assert _artifact_data(task) == await _query_pack(a2a_server, QUESTION)
    assert task.artifacts[0].parts[1].text.startswith("Sample Operations Wiki context:")
    assert str(a2a_server.root) not in json_format.MessageToJson(task)

    sent = [r for r in a2a_server.wire.requests if r[1] == path]
    assert len(sent) == 1
    method, _, version, body = sent[0]
    assert method == "POST" and version == "1.0"
    if rpc_method is None:
        assert body["message"]["role"] == "ROLE_USER" and body["message"]["messageId"]
    else:
        assert body["method"] == rpc_method
        assert body["params"]["message"]["parts"] == [{"text": QUESTION}]


async def test_a_0_3_client_uses_the_cards_0_3_fields(a2a_server: Server) -> None:
    """Drop supportedInterfaces: the 1.x client then maps the 0.3 fields and speaks 0.3
    JSON-RPC (`message/send`) to the card's `url`."""
    async with httpx.AsyncClient() as http:
        raw = (await http.get(a2a_server.base + "/.well-known/agent-card.json")).json()
    del raw["supportedInterfaces"]
    card = parse_agent_card(raw)
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces][0] == \
        ("JSONRPC", "0.3.0")
    client = ClientFactory(ClientConfig(streaming=False)).create(card)
    try:
        task = await _send(client, QUESTION)
    finally:
        await client.close()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _artifact_data(task) == await _query_pack(a2a_server, QUESTION)
    assert [r[3]["method"] for r in a2a_server.wire.requests if r[1] == "/a2a/jsonrpc"] == \
        ["message/send"]


async def test_an_empty_message_is_answered_not_failed(a2a_server: Server) -> None:
    client = await create_client(a2a_server.base, client_config=ClientConfig(
        streaming=False, supported_protocol_bindings=["HTTP+JSON"]))
    try:
        task = await _send(client, "   ")
    finally:
        await client.close()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    data = _artifact_data(task)
    assert data["query"] == "" and data["answerable"] is False
