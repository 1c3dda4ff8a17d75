"""Bounded runs: caps on sources and runtime answers, one run deadline, per-source failures of
every kind, and hanging sources that cannot cost other runs their healthy sources."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.core import artifact
from bridge.runtime.base import CHAT_FAILED_MESSAGE, TOO_LARGE_MESSAGE
from bridge.sources import transport
from tests.support.bridge_sources import BridgeFactory, Client, source

QUESTION = "How do we ship a hotfix release?"
Handler = Callable[[web.Request], Any]


class FakeSources:
    """Loopback Knowledge Sources that misbehave, each on its own port; parked handlers are
    released at teardown."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.parked = 0
        self.parked_at: dict[str, int] = {}  # by Host header
        self.servers: list[TestServer] = []

    async def start(self, handler: Handler) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        self.servers.append(server)
        return str(server.make_url("")).rstrip("/")

    async def hanging(self) -> str:
        async def hang(request: web.Request) -> web.Response:
            self.parked += 1
            self.parked_at[request.host] = self.parked_at.get(request.host, 0) + 1
            await self.release.wait()
            return web.json_response({})
        return await self.start(hang)

    async def answering(self, body: bytes) -> str:
        async def answer(request: web.Request) -> web.Response:
            return web.Response(body=body, content_type="application/json")
        return await self.start(answer)


@pytest.fixture
async def fakes() -> AsyncIterator[FakeSources]:
    sources = FakeSources()
    yield sources
    sources.release.set()
    for server in sources.servers:
        await server.close()


async def send(client: Client, body: Any, status: int = 200) -> dict[str, Any]:
    response = await client.post("/message:send", json=body)
    payload: dict[str, Any] = await response.json()
    assert response.status == status, payload
    return payload


def result_of(task: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = task["artifacts"][0]["parts"][0]["data"]
    return data


def run(*sources: dict[str, Any], mode: str = "evidence-only", **data: Any) -> dict[str, Any]:
    return {"data": {"query": QUESTION, "orchestrationMode": mode, "knowledgeSources": list(sources), **data}}


def tool(result: dict[str, Any], source_id: str) -> dict[str, Any]:
    step: dict[str, Any] = next(s for s in result["steps"] if s["id"] == f"tool-{source_id}")
    return step


def assert_good_kept(result: dict[str, Any], *failed: str) -> None:
    """The good source's citations are all there; each bad source is its own failed step."""
    assert result["citations"] and all(c["sourceId"] == "good" for c in result["citations"])
    assert tool(result, "good")["status"] == "done"
    for source_id in failed:
        step = tool(result, source_id)
        assert step["status"] == "error" and step["error"] == "Source query failed."
        assert step["diagnostic"]["scope"] == "source"


# ----------------------------------------------------------------------------- decode failures

@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"evidence": ' + b"[" * 300 + b"]" * 300 + b"}",
    b'{"evidence": [{"title": "\xff' + b"[" * 5000 + b'"}], "x": ' + b"[" * 5000 + b"}",
    b"\xff\xfe" + b"{" * 10,
])
async def test_a_source_answering_undecodable_json_is_its_own_failure(
        bridge_client: BridgeFactory, serve_url: str, fakes: FakeSources, body: bytes) -> None:
    client = await bridge_client()
    bad = await fakes.answering(body)
    result = result_of(await send(client, run(source("good", serve_url), source("bad", bad))))
    assert_good_kept(result, "bad")


async def test_a_host_name_with_a_64_character_label_is_its_own_failure(
        bridge_client: BridgeFactory, serve_url: str) -> None:
    client = await bridge_client()
    long_label = f"http://{'a' * 64}.localhost:1"
    result = result_of(await send(client, run(source("good", serve_url), source("bad", long_label))))
    assert_good_kept(result, "bad")


async def test_a_bridge_bug_with_one_source_is_that_sources_failure(
        bridge_client: BridgeFactory, serve_url: str, fakes: FakeSources,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever escapes a source's processing (here: the evidence step raising) fails that
    source only, with a safe message, never the run."""
    real = artifact.evidence_from

    def evidence_from(payload: dict[str, Any], descriptor: Any, *args: Any) -> Any:
        if descriptor.id == "odd":
            raise RecursionError("maximum recursion depth exceeded")
        return real(payload, descriptor, *args)

    monkeypatch.setattr(artifact, "evidence_from", evidence_from)
    client = await bridge_client()
    result = result_of(await send(client, run(source("good", serve_url), source("odd", serve_url))))
    assert_good_kept(result, "odd")
    assert "recursion" not in json.dumps(result)


# ----------------------------------------------------------------------------- caps

async def test_more_inline_sources_than_the_cap_are_refused_before_any_call(
        bridge_client: BridgeFactory, fakes: FakeSources) -> None:
    calls: list[str] = []

    async def counting(request: web.Request) -> web.Response:
        calls.append(request.path)
        return web.json_response({})

    url = await fakes.start(counting)
    client = await bridge_client(max_sources_per_run=3)
    many = [source(f"s{i}", url) for i in range(10_000)]
    body = await send(client, run(*many), status=400)
    assert body["error"]["code"] == "bad_request"
    assert body["error"]["message"] == ("A run may call at most 3 Knowledge Sources; this one names 10000. "
                                        "Name fewer, or raise maxSourcesPerRun.")
    assert body["requestId"] and body["traceId"]
    result = result_of(await send(client, run(*many[:3])))
    assert len([s for s in result["steps"] if s["id"].startswith("tool-")]) == 3
    assert calls  # the cap itself is what refused the big request, not the source
    calls.clear()
    await send(client, run(*many[:4]), status=400)
    assert calls == []


async def test_a_registry_selecting_more_than_the_cap_is_refused(bridge_client: BridgeFactory,
                                                                  serve_url: str) -> None:
    client = await bridge_client(max_sources_per_run=2)
    registered = [source(f"s{i}", serve_url) for i in range(3)]
    response = await client.put("/settings/sources.json", json={"sources": registered})
    assert response.status == 200, await response.json()
    body = await send(client, {"data": {"query": QUESTION, "orchestrationMode": "evidence-only"}}, status=400)
    assert body["error"]["code"] == "bad_request"
    assert "at most 2 Knowledge Sources" in body["error"]["message"]


async def runtime_app(answer: Callable[[web.Request], Any]) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("/v1"))


def completion(content: str) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}]}


@pytest.mark.parametrize("shape", ["content-length", "streamed", "error-status", "fits"])
async def test_runtime_answers_over_the_cap_fail_the_runtime_call(
        bridge_client: BridgeFactory, serve_url: str, shape: str) -> None:
    cap = 64 * 1024
    sent = 0

    async def answer(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        if shape == "fits":
            return web.json_response(completion("Branch and release [1](#citation-1)."))
        if shape == "content-length":
            return web.json_response(completion("x" * (2 * cap)))
        response = web.StreamResponse(status=500 if shape == "error-status" else 200)
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(b'{"choices": [{"message": {"content": "')
        while sent < 50 * 1024 * 1024:  # the 50 MB answer of issue 12
            await response.write(b"x" * 65536)
            sent += 65536
        await response.write(b'"}}]}')
        return response

    async for base_url in runtime_app(answer):
        client = await bridge_client(base_url=base_url, model="m", max_runtime_answer_bytes=cap)
        if shape == "fits":
            result = result_of(await send(client, run(source("good", serve_url), mode="delegated-runtime")))
            assert result["answer"].startswith("Branch and release")
            return
        body = await send(client, run(source("good", serve_url), mode="delegated-runtime"), status=502)
        assert body["error"] == {"code": "chat_completions_failed", "message": CHAT_FAILED_MESSAGE}
        runtime_step = next(s for s in body["steps"] if s["id"].startswith("runtime-")
                            or s.get("error") == CHAT_FAILED_MESSAGE)
        assert runtime_step["detail"] == TOO_LARGE_MESSAGE
        assert sent < 16 * 1024 * 1024  # cut off, not read to the end


# ----------------------------------------------------------------------------- the run deadline

async def test_the_run_deadline_fails_the_sources_still_out(bridge_client: BridgeFactory, serve_url: str,
                                                            fakes: FakeSources) -> None:
    slow = await fakes.hanging()
    # The deadline leaves the good source time to answer on a loaded machine (400 ms did not,
    # once, in CI); without it the hanging source would hold the run for the 60 s timeout.
    client = await bridge_client(request_timeout_ms=60_000, run_deadline_ms=1500)
    await send(client, run(source("good", serve_url)))  # serve has built its index
    started = time.perf_counter()
    result = result_of(await send(client, run(source("good", serve_url), source("slow", slow))))
    assert time.perf_counter() - started < 5  # the deadline, not the 60 s timeout
    assert_good_kept(result, "slow")
    observations = {o["name"]: o["value"] for o in tool(result, "slow")["diagnostic"]["observations"]}
    assert observations["timeout"] == "true"
    assert fakes.parked >= 1


async def test_sources_waiting_for_a_slot_past_the_deadline_fail_without_a_call(
        bridge_client: BridgeFactory, fakes: FakeSources) -> None:
    first, second = await fakes.hanging(), await fakes.hanging()
    client = await bridge_client(request_timeout_ms=60_000, run_deadline_ms=300, fanout_concurrency=1)
    result = result_of(await send(client, run(source("first", first), source("second", second))))
    assert [tool(result, s)["status"] for s in ("first", "second")] == ["error", "error"]
    assert list(fakes.parked_at) == [first.removeprefix("http://")]  # the second was never called


async def test_a_hanging_http_source_costs_one_timeout_not_two(bridge_client: BridgeFactory,
                                                               fakes: FakeSources) -> None:
    """Bundle, manifest and query all hang: the bundle read used to wait a timeout per candidate
    after the query had already timed out."""
    slow = await fakes.hanging()
    client = await bridge_client(request_timeout_ms=500)
    started = time.perf_counter()
    result = result_of(await send(client, run(source("slow", slow))))
    elapsed = time.perf_counter() - started
    assert tool(result, "slow")["status"] == "error"
    assert elapsed < 0.95, elapsed  # one 0.5 s timeout (plus overhead), not two


async def test_the_deadline_also_bounds_retrieval_discovery(bridge_client: BridgeFactory, serve_url: str,
                                                            fakes: FakeSources) -> None:
    slow = await fakes.hanging()
    # The deadline leaves the good source time to answer on a loaded machine (400 ms did not,
    # once, in CI); without it the hanging source would hold the run for the 60 s timeout.
    client = await bridge_client(request_timeout_ms=60_000, run_deadline_ms=1500)
    await send(client, run(source("good", serve_url)))
    started = time.perf_counter()
    result = result_of(await send(client, run(source("good", serve_url), source("slow", slow),
                                              retrieval={"schemaVersion": "llmwiki.retrieval.v1",
                                                         "searchMode": "lexical"})))
    assert time.perf_counter() - started < 5
    step = tool(result, "slow")
    assert step["status"] == "error"
    assert tool(result, "good")["status"] == "done"


# ----------------------------------------------------------------------------- hanging sources

async def test_a_hanging_source_cannot_cost_other_runs_their_healthy_sources(
        bridge_client: BridgeFactory, serve_url: str, fakes: FakeSources,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Many concurrent runs, each naming one hanging and one healthy source: the hanging host
    fills only its own connection slots, so every run still gets its healthy source's evidence.
    (With one pool of this size for everything, the hanging calls held every slot.)"""
    monkeypatch.setattr(transport, "CONNECTIONS_PER_HOST", 4)
    slow = await fakes.hanging()
    client = await bridge_client(request_timeout_ms=3000)
    await send(client, run(source("good", serve_url)))
    results = await asyncio.gather(*(send(client, run(source("good", serve_url), source("slow", slow)))
                                     for _ in range(12)))
    for task in results:
        result = result_of(task)
        assert result["citations"] and tool(result, "good")["status"] == "done"
        assert tool(result, "slow")["status"] == "error"
    assert fakes.parked <= 4 + 4  # the hanging host never held more than its slots (a few freed at timeouts)
