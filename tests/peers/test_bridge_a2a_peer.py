"""The official a2a-sdk client against the bridge (our serve registered as its source), over loopback."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # so `tests.*` imports however pytest is launched
    sys.path.insert(0, str(REPO))

from a2a.client import ClientConfig, ClientFactory, create_client  # noqa: E402
from a2a.client.card_resolver import parse_agent_card  # noqa: E402
from a2a.client.errors import AgentCardResolutionError  # noqa: E402
from a2a.types import (  # noqa: E402
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (  # noqa: E402
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
)

from tests.bridge import conftest as bridge_fixtures  # noqa: E402
from tests.support.bridge_sources import BridgeFactory, source  # noqa: E402

# The bridge tests' fixtures: our serve on the sample wiki, the bridge, and the loopback-only guard
# (autouse here too: any non-loopback lookup or connect fails the test).
network_guard = bridge_fixtures.network_guard
sample_root = bridge_fixtures.sample_root
serve_url = bridge_fixtures.serve_url
config_path = bridge_fixtures.config_path
bridge_client = bridge_fixtures.bridge_client

QUESTION = "How do we ship a hotfix release?"
TOKEN = "peer-secret"
Sent = list[tuple[str, str]]


@pytest.fixture
async def bridge_url(bridge_client: BridgeFactory, serve_url: str) -> str:
    """A bridge on a loopback port, bearer-protected, with our serve as its one registered source."""
    client = await bridge_client(bearer_token=TOKEN)
    response = await client.put("/settings/sources.json", json=[source("sample-wiki", serve_url)],
                                headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status == 200
    return str(client.make_url("")).rstrip("/")


@pytest.fixture
async def http() -> AsyncIterator[tuple[httpx.AsyncClient, Sent]]:
    """The client's HTTP session (it carries the bearer token) and the (method, path) it sent."""
    sent: Sent = []

    async def record(request: httpx.Request) -> None:
        sent.append((request.method, request.url.path))

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                                 event_hooks={"request": [record]}) as client:
        yield client, sent


def message(*parts: dict[str, Any]) -> Message:
    raw = {"messageId": "peer-1", "role": "ROLE_USER", "parts": list(parts)}
    return json_format.ParseDict(raw, Message())


async def send(client: Any, request: SendMessageRequest) -> Task:
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("task")
    task: Task = events[0].task
    return task


def agent_result(task: Task) -> dict[str, Any]:
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = task.artifacts
    assert artifact.name == "llmwiki_agent_result"
    data: dict[str, Any] = json_format.MessageToDict(artifact.parts[0].data)
    assert artifact.parts[1].text == data["answer"]
    assert task.status.message.parts[0].text == data["answer"]
    return data


def assert_evidence(data: dict[str, Any]) -> None:
    assert data["orchestrationMode"] == "evidence-only"
    assert data["citations"] and {c["sourceId"] for c in data["citations"]} == {"sample-wiki"}
    assert any(c["pageId"] == "runbooks/hotfix-release" for c in data["citations"])
    assert data["answer"].startswith("Evidence-only result:")


Connect = Callable[[str], Awaitable[Any]]


@pytest.mark.parametrize(("binding", "path"), [("HTTP+JSON", "/message:send"), ("JSONRPC", "/a2a/jsonrpc")])
async def test_send_message_with_the_official_client(bridge_url: str, http: tuple[httpx.AsyncClient, Sent],
                                                     binding: str, path: str) -> None:
    session, sent = http
    client = await create_client(bridge_url, client_config=ClientConfig(
        streaming=False, supported_protocol_bindings=[binding], httpx_client=session))
    task = await send(client, SendMessageRequest(message=message(
        {"text": QUESTION}, {"data": {"orchestrationMode": "evidence-only"}})))
    data = agent_result(task)
    assert_evidence(data)
    assert task.id and task.context_id
    assert json_format.MessageToDict(task.metadata)["requestId"] == data["requestId"]
    assert sent == [("GET", "/.well-known/agent-card.json"), ("POST", path)]


async def test_request_metadata_can_choose_the_mode(bridge_url: str,
                                                    http: tuple[httpx.AsyncClient, Sent]) -> None:
    session, _ = http
    client = await create_client(bridge_url, client_config=ClientConfig(
        streaming=False, supported_protocol_bindings=["JSONRPC"], httpx_client=session))
    request = SendMessageRequest(message=message({"text": QUESTION}))
    request.metadata.update({"orchestrationMode": "evidence-only"})
    assert_evidence(agent_result(await send(client, request)))


async def test_a_0_3_client_uses_the_cards_0_3_fields(bridge_url: str,
                                                      http: tuple[httpx.AsyncClient, Sent]) -> None:
    """Without supportedInterfaces the 1.x client maps `url`/`preferredTransport` and speaks 0.3
    JSON-RPC (`message/send`) to the card's `url`, the contract's /message:send."""
    session, sent = http
    raw = (await session.get(bridge_url + "/.well-known/agent-card.json")).json()
    del raw["supportedInterfaces"]
    card = parse_agent_card(raw)
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces][0] == \
        ("JSONRPC", "0.3.0")
    client = ClientFactory(ClientConfig(streaming=False, httpx_client=session)).create(card)
    task = await send(client, SendMessageRequest(message=message(
        {"text": QUESTION}, {"data": {"orchestrationMode": "evidence-only"}})))
    assert_evidence(agent_result(task))
    assert sent[-1] == ("POST", "/message:send")


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
async def test_bridge_errors_become_the_clients_error_types(bridge_url: str,
                                                            http: tuple[httpx.AsyncClient, Sent],
                                                            binding: str) -> None:
    session, _ = http
    client = await create_client(bridge_url, client_config=ClientConfig(
        streaming=False, supported_protocol_bindings=[binding], httpx_client=session))
    with pytest.raises(InvalidParamsError) as caught:
        await send(client, SendMessageRequest(message=message({"text": "   "})))
    assert caught.value.message == "A2A request data.query or message text is required."
    assert caught.value.data is not None and caught.value.data["code"] == "bad_request"
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="any"))


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
async def test_a_sent_task_can_be_fetched_listed_and_not_canceled(bridge_url: str,
                                                                  http: tuple[httpx.AsyncClient, Sent],
                                                                  binding: str) -> None:
    session, _ = http
    client = await create_client(bridge_url, client_config=ClientConfig(
        streaming=False, supported_protocol_bindings=[binding], httpx_client=session))
    task = await send(client, SendMessageRequest(message=message(
        {"text": QUESTION}, {"data": {"orchestrationMode": "evidence-only"}})))
    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert fetched.id == task.id and agent_result(fetched) == agent_result(task)
    listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
    assert [t.id for t in listed.tasks] == [task.id] and listed.next_page_token == ""
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_the_card_needs_the_bearer_token(bridge_url: str) -> None:
    with pytest.raises(AgentCardResolutionError) as caught:
        await create_client(bridge_url, client_config=ClientConfig(streaming=False))
    assert caught.value.status_code == 401
