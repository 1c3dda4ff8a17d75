"""A2A SendStreamingMessage through the official a2a-sdk client, on both bindings, against the
installed serve and bridge: the task working at once, each source's step and the runtime's answer
as they happen, the result artifact equal to the non-streamed one, then the terminal status."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, SendMessageRequest, StreamResponse, TaskState
from google.protobuf import json_format

from tests.e2e.model_server import ANSWER, ModelServer
from tests.e2e.processes import Service, start_bridge, stop_checked
from tests.e2e.volatile import without

QUESTION = "How do we roll back a release?"
SOURCE_STEP = "urn:llmwiki:a2a-extension:agent-bridge:v1#sourceStep"
ANSWER_DELTA = "urn:llmwiki:a2a-extension:agent-bridge:v1#answerDelta"
# What differs between two runs of the same question: ids, clocks and durations.
VOLATILE = ("requestId", "traceId", "timestamp", "startedAt", "completedAt", "durationMs", "generatedAt",
            "checkedAt", "latencyMs", "elapsedMs")


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory, our_serve: Service,
           model: ModelServer) -> Iterator[Service]:
    """Two sources on our serve (so two source steps), the test model as the runtime."""
    settings = {"sources": [{"id": "web", "protocol": "llmwiki-http", "url": our_serve.url},
                            {"id": "tools", "protocol": "mcp", "url": our_serve.url + "/mcp/stream"}]}
    service = start_bridge(tmp_path_factory.mktemp("stream-bridge"), "--default-mode", "evidence-only",
                           settings=settings, env={"LLMWIKI_AGENT_BRIDGE_BASE_URL": model.url,
                                                   "LLMWIKI_AGENT_BRIDGE_MODEL": "e2e-model"})
    yield service
    stop_checked(service)


def message(mode: str | None = None) -> Message:
    parts: list[dict[str, Any]] = [{"text": QUESTION}]
    if mode:
        parts.append({"data": {"orchestrationMode": mode}})
    return json_format.ParseDict({"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER",
                                  "parts": parts}, Message())


async def exchange(url: str, binding: str, streaming: bool, mode: str | None = None
                   ) -> list[tuple[float, StreamResponse]]:
    """Every event the client yields, with the time it arrived."""
    async with httpx.AsyncClient(timeout=60) as session:
        client = await create_client(url, client_config=ClientConfig(
            streaming=streaming, supported_protocol_bindings=[binding], httpx_client=session))
        return [(time.monotonic(), event)
                async for event in client.send_message(SendMessageRequest(message=message(mode)))]


def stable(value: Any) -> Any:
    return without(value, VOLATILE)


def kinds(events: list[tuple[float, StreamResponse]]) -> list[str]:
    return [str(event.WhichOneof("payload")) for _, event in events]


def final_artifact(events: list[tuple[float, StreamResponse]]) -> dict[str, Any]:
    [artifact] = [e.artifact_update for _, e in events if e.HasField("artifact_update")]
    assert artifact.last_chunk is True
    return json_format.MessageToDict(artifact.artifact)


def unary_artifact(events: list[tuple[float, StreamResponse]]) -> dict[str, Any]:
    [(_, event)] = events
    [artifact] = event.task.artifacts
    return json_format.MessageToDict(artifact)


def check_frame(events: list[tuple[float, StreamResponse]]) -> None:
    """Task (working) first, the artifact, then the completed status last; one task id throughout."""
    order = kinds(events)
    assert order[0] == "task" and order[-2:] == ["artifact_update", "status_update"], order
    first = events[0][1].task
    assert first.status.state == TaskState.TASK_STATE_WORKING
    assert events[-1][1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    ids = {first.id} | {e.status_update.task_id for _, e in events if e.HasField("status_update")}
    assert ids == {first.id}


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
async def test_serve_streams_its_context_artifact(our_serve: Service, binding: str) -> None:
    events = await exchange(our_serve.url, binding, streaming=True)
    check_frame(events)
    assert kinds(events) == ["task", "artifact_update", "status_update"]
    streamed = final_artifact(events)
    unary = unary_artifact(await exchange(our_serve.url, binding, streaming=False))
    assert streamed["name"] == unary["name"] == "llmwiki_context"
    assert stable(streamed["parts"]) == stable(unary["parts"])


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
async def test_the_bridge_streams_each_source_step_then_the_result(bridge: Service, binding: str) -> None:
    events = await exchange(bridge.url, binding, streaming=True, mode="evidence-only")
    check_frame(events)
    steps = [json_format.MessageToDict(e.status_update.status.message) for _, e in events[1:-2]]
    assert [s["metadata"]["event"] for s in steps] == [SOURCE_STEP, SOURCE_STEP]
    reported = sorted(s["parts"][0]["data"]["sourceId"] for s in steps)
    assert reported == ["tools", "web"]
    for s in steps:
        data = s["parts"][0]["data"]
        assert data["status"] == "answered" and data["citations"] and data["steps"]
        assert all(c["sourceId"] == data["sourceId"] for c in data["citations"])
    streamed = final_artifact(events)
    unary = unary_artifact(await exchange(bridge.url, binding, streaming=False, mode="evidence-only"))
    assert streamed["name"] == unary["name"] == "llmwiki_agent_result"
    assert stable(streamed["parts"]) == stable(unary["parts"])


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
async def test_the_runtime_answer_streams_as_it_is_generated(bridge: Service, model: ModelServer,
                                                            binding: str) -> None:
    model.chunk_delay = 0.05  # a slow model: each word a little later than the last
    model.sent.clear()
    try:
        events = await exchange(bridge.url, binding, streaming=True, mode="delegated-runtime")
    finally:
        model.chunk_delay = 0.0
    check_frame(events)
    deltas = [(at, e.status_update.status.message) for at, e in events if e.HasField("status_update")
              and json_format.MessageToDict(e.status_update.status.message).get("metadata", {})
              .get("event") == ANSWER_DELTA]
    assert "".join(m.parts[0].text for _, m in deltas) == ANSWER
    # The chunks came while the model was still writing: the first long before the last was sent.
    assert len(deltas) == len(ANSWER.split(" ")) and deltas[0][0] < model.sent[-1][0]
    streamed = final_artifact(events)
    assert streamed["parts"][1]["text"] == json_format.MessageToDict(
        events[-1][1].status_update.status.message)["parts"][0]["text"]
    assert ANSWER.split(" [1]")[0] in streamed["parts"][1]["text"]
    stream_requests = [r for r in model.chat_requests() if r["body"].get("stream") is True]
    assert stream_requests, "the runtime was not asked to stream"


async def test_a_client_that_goes_away_stops_the_run(bridge: Service, model: ModelServer) -> None:
    """The stream is dropped while the model is still writing: the bridge stops asking for the
    rest (the model sees its connection closed) and the task is left canceled."""
    model.chunk_delay = 0.3
    model.sent.clear()
    body = {"message": {"messageId": "gone", "role": "ROLE_USER", "parts": [
        {"text": QUESTION}, {"data": {"orchestrationMode": "delegated-runtime"}}]}}
    task_id = ""
    try:
        async with httpx.AsyncClient(timeout=60) as session, session.stream(
                "POST", bridge.url + "/message:stream", json=body,
                headers={"A2A-Version": "1.0"}) as response:
            async for line in response.aiter_lines():
                if '"task"' in line and not task_id:
                    task_id = line.split('"id":"', 1)[1].split('"', 1)[0]
                if "answerDelta" in line:
                    break  # the first word arrived: hang up
        words_at_hangup = len(model.sent)
        async with httpx.AsyncClient(timeout=30) as session:
            for _ in range(100):  # the cancellation lands within a chunk interval or two
                state = (await session.get(f"{bridge.url}/tasks/{task_id}",
                                           headers={"A2A-Version": "1.0"})).json()["status"]["state"]
                if state != "TASK_STATE_WORKING":
                    break
                await asyncio.sleep(0.05)  # polling GetTask: no event to wait on from outside
    finally:
        model.chunk_delay = 0.0
    assert state == "TASK_STATE_CANCELED"
    assert words_at_hangup < len(ANSWER.split(" "))
    assert len(model.sent) <= words_at_hangup + 2  # the model stopped being read soon after


@pytest.mark.parametrize("agent", ["serve", "bridge"])
async def test_a_stream_carries_the_cors_headers_of_an_allowed_origin(our_serve: Service, bridge: Service,
                                                                     agent: str) -> None:
    """A stream is sent before its handler returns: the CORS headers must be on it all the same."""
    url = our_serve.url if agent == "serve" else bridge.url
    body = {"message": {"messageId": "cors", "role": "ROLE_USER", "parts": [{"text": QUESTION}]}}
    async with httpx.AsyncClient(timeout=60) as session, session.stream(
            "POST", url + "/message:stream", json=body,
            headers={"A2A-Version": "1.0", "Origin": "http://localhost:3000"}) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
        assert response.headers["Vary"] == "Origin"
        assert "Access-Control-Allow-Credentials" not in response.headers
        if agent == "serve":  # each contract's table (common/browser.py CorsRules)
            assert response.headers["Access-Control-Expose-Headers"] == "Mcp-Session-Id"
        else:
            allowed = response.headers["Access-Control-Allow-Headers"]
            assert allowed == "authorization, content-type, a2a-version"
            assert response.headers["Access-Control-Allow-Methods"] == "GET, POST, PUT, DELETE, OPTIONS"
        assert [line async for line in response.aiter_lines() if line.startswith("data:")]


async def test_cancel_task_stops_a_streaming_run(bridge: Service, model: ModelServer) -> None:
    """CancelTask of a task still working stops its run: the answer stops, the task and the
    stream both end canceled."""
    model.chunk_delay = 0.3
    model.sent.clear()
    body = {"message": {"messageId": "cancel-me", "role": "ROLE_USER", "parts": [
        {"text": QUESTION}, {"data": {"orchestrationMode": "delegated-runtime"}}]}}
    states: list[str] = []
    asked = False
    try:
        async with httpx.AsyncClient(timeout=60) as session, session.stream(
                "POST", bridge.url + "/message:stream", json=body,
                headers={"A2A-Version": "1.0"}) as response:
            task_id = ""
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if "task" in event:
                    task_id = event["task"]["id"]
                update = event.get("statusUpdate", {})
                if update:
                    states.append(update["status"]["state"])
                    meta = update["status"].get("message", {}).get("metadata", {})
                    if meta.get("event") == ANSWER_DELTA and not asked:
                        asked = True  # ask once, at the first word
                        async with httpx.AsyncClient(timeout=30) as other:
                            answer = (await other.post(bridge.url + f"/tasks/{task_id}:cancel",
                                                       headers={"A2A-Version": "1.0"})).json()
                        assert answer["id"] == task_id and answer["status"]["state"] == "TASK_STATE_CANCELED"
    finally:
        model.chunk_delay = 0.0
    assert states[-1] == "TASK_STATE_CANCELED"  # the stream's last word
    assert len(model.sent) < len(ANSWER.split(" "))  # the model was not read to the end
    async with httpx.AsyncClient(timeout=30) as session:
        kept = (await session.get(f"{bridge.url}/tasks/{task_id}", headers={"A2A-Version": "1.0"})).json()
    assert kept["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_run_that_fails_mid_stream_ends_failed_with_its_reason(
        tmp_path_factory: pytest.TempPathFactory, our_serve: Service) -> None:
    """The stream has begun (the task is out) when the runtime fails: the last event is the
    failed status carrying the run's safe message, and the kept task says the same."""
    settings = {"sources": [{"id": "web", "protocol": "llmwiki-http", "url": our_serve.url}]}
    broken = start_bridge(tmp_path_factory.mktemp("broken-runtime"), settings=settings,
                          env={"LLMWIKI_AGENT_BRIDGE_BASE_URL": "http://127.0.0.1:9/v1"})
    try:
        events = await exchange(broken.url, "HTTP+JSON", streaming=True, mode="delegated-runtime")
        async with httpx.AsyncClient(timeout=30) as session:
            kept = (await session.get(f"{broken.url}/tasks/{events[0][1].task.id}",
                                      headers={"A2A-Version": "1.0"})).json()
    finally:
        stop_checked(broken)
    assert kinds(events)[0] == "task" and kinds(events)[-1] == "status_update"
    last = events[-1][1].status_update.status
    assert last.state == TaskState.TASK_STATE_FAILED
    assert "Chat completions request failed" in last.message.parts[0].text
    assert "127.0.0.1:9" not in last.message.parts[0].text  # no URL in what the client reads
    assert not [e for _, e in events if e.HasField("artifact_update")]
    assert kept["status"]["state"] == "TASK_STATE_FAILED"
