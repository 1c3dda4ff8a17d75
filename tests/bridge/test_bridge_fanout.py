"""Bounded fan-out: input order kept, concurrency capped, and really concurrent."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.config.registry import normalize_registered
from bridge.support.fanout import fan_out, task_group
from tests.support.bridge_sources import BridgeFactory, source

NAME = web.AppKey("name", str)


async def test_results_keep_input_order_and_the_limit() -> None:
    running = 0
    peak = 0

    async def work(index: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (8 - index))  # later items finish first
        running -= 1
        return index * 10

    assert await fan_out(range(8), work, 3) == [i * 10 for i in range(8)]
    assert peak == 3


async def test_the_artifact_keeps_selected_order_when_sources_finish_out_of_it(
        bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    fast_answered = asyncio.Event()

    async def answer(request: web.Request) -> web.Response:
        name = request.app[NAME]
        if name == "slow":  # answers only after the source selected after it
            await asyncio.wait_for(fast_answered.wait(), 10)
        elif request.path == "/query":
            fast_answered.set()
        return web.json_response({"wiki_title": name, "evidence": [
            {"page_id": "p", "title": name, "path": "p.md", "snippet": "s"}]})

    async def no_bundle(request: web.Request) -> web.Response:
        return web.Response(status=404)

    urls = []
    for name in ("slow", "fast"):
        app = web.Application()
        app[NAME] = name
        app.router.add_post("/{tail:.*}", answer)
        app.router.add_get("/{tail:.*}", no_bundle)
        server: TestServer = await aiohttp_server(app)
        urls.append(str(server.make_url("")))
    client = await bridge_client(sources=normalize_registered(
        [source("slow", urls[0]), source("fast", urls[1])]))
    response = await client.post("/message:send", json={"query": "q", "mode": "evidence-only"})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    assert fast_answered.is_set()
    assert [c["id"] for c in result["citations"]] == ["slow:p", "fast:p"]
    assert [s["id"] for s in result["steps"] if s["id"].startswith("tool-")] == ["tool-slow", "tool-fast"]


async def test_a_bug_in_work_cancels_the_group() -> None:
    async def work(index: int) -> int:
        if index == 1:
            raise RuntimeError("bug")
        await asyncio.sleep(10)
        return index

    try:
        await asyncio.wait_for(fan_out(range(3), work, 4), 5)
    except* RuntimeError as group:
        assert len(group.exceptions) == 1
    else:
        raise AssertionError("the bug was swallowed")


async def test_bridge_fan_out_is_concurrent_but_bounded(bridge_client: BridgeFactory,
                                                        aiohttp_server: Any) -> None:
    running = 0
    peak = 0
    enough = asyncio.Event()

    async def slow_query(request: web.Request) -> web.Response:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if peak >= 2:
            enough.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(enough.wait(), 2)
        await asyncio.sleep(0.02)
        running -= 1
        name = request.app[NAME]
        return web.json_response({"wiki_title": name, "evidence": [
            {"page_id": "p", "title": name, "path": "p.md", "snippet": "s"}]})

    async def no_bundle(request: web.Request) -> web.Response:
        return web.Response(status=404)

    urls = []
    for index in range(6):
        app = web.Application()
        app[NAME] = f"S{index}"
        app.router.add_post("/query", slow_query)
        app.router.add_get("/{tail:.*}", no_bundle)
        server: TestServer = await aiohttp_server(app)
        urls.append(str(server.make_url("")))
    client = await bridge_client(fanout_concurrency=4)
    response = await client.post("/message:send", json={
        "query": "q", "mode": "evidence-only",
        "knowledgeSources": [source(f"s{i}", url) for i, url in enumerate(urls)]})
    task = await response.json()
    result = task["artifacts"][0]["parts"][0]["data"]
    assert 1 < peak <= 4
    assert [c["id"] for c in result["citations"]] == [f"s{i}:p" for i in range(6)]
    # a bundle 404 is a warning step, the query still counts
    assert all(d["phase"] == "source-bundle" for d in result["diagnostics"])
    assert all(s["status"] == "done" for s in result["steps"] if s["id"].startswith("tool-"))


async def test_a_task_group_failure_is_itself_and_frees_what_the_calls_held_at_once() -> None:
    """As a source's query fails while its searches are out: no ExceptionGroup to unwrap, and no
    reference cycle keeping the calls' frames (and the buffers they read) until a collection."""

    class Buffer:
        pass

    held: list[weakref.ref[Buffer]] = []
    searching = asyncio.Event()

    async def search() -> None:
        buffer = Buffer()
        held.append(weakref.ref(buffer))
        searching.set()
        await asyncio.Event().wait()  # only the query's failure ends it

    async def query() -> None:
        buffer = Buffer()
        held.append(weakref.ref(buffer))
        await asyncio.wait_for(searching.wait(), 10)
        raise ValueError("source down")

    gc.disable()
    try:
        caught: ValueError | None = None
        try:
            async with task_group() as group:
                group.create_task(search())
                await query()
        except ValueError as exc:
            caught = exc.with_traceback(None)
        assert caught is not None and str(caught) == "source down" and caught.__context__ is None
        caught = None
        assert len(held) == 2 and [ref() for ref in held] == [None, None]
    finally:
        gc.enable()
