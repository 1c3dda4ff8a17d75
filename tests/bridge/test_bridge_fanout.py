"""Bounded fan-out: input order kept, concurrency capped, and really concurrent."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.config.settings import BridgeSettings
from bridge.fanout import fan_out
from bridge.protocols.http import SERVICE_KEY
from bridge.registry import normalize_registered
from bridge.service import BridgeService
from bridge.sources.protocols import source_clients
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


async def test_start_order_is_the_order_items_take_slots_in() -> None:
    started: list[int] = []

    async def work(index: int) -> int:
        started.append(index)
        await asyncio.sleep(0.001)
        return index * 10

    assert await fan_out(range(4), work, 4, start_order=[3, 1, 0, 2]) == [0, 10, 20, 30]
    assert started == [3, 1, 0, 2]
    started.clear()
    assert await fan_out(range(5), work, 2, start_order=[4, 3, 2, 1, 0]) == [0, 10, 20, 30, 40]
    assert started == [4, 3, 2, 1, 0]
    for wrong in ([0, 1], [0, 1, 1], [0, 1, 3]):
        try:
            await fan_out(range(3), work, 2, start_order=wrong)
        except ValueError:
            continue
        raise AssertionError(f"start order {wrong} was accepted")


def test_start_order_is_slowest_first_and_unseen_sources_before_any() -> None:
    service = BridgeService(BridgeSettings(config_path=None), clients=source_clients())
    a, b, c, d = normalize_registered([source(name, f"http://127.0.0.1:{port}")
                                       for name, port in (("a", 1), ("b", 2), ("c", 3), ("d", 4))])
    assert service.start_order([a, b, c, d]) == [0, 1, 2, 3]  # nothing seen yet: selected order
    service._note_path_time(a, 0.020)
    service._note_path_time(b, 0.040)
    service._note_path_time(d, 0.030)
    assert service.start_order([a, b, c, d]) == [2, 1, 3, 0]
    service._note_path_time(b, 0.010)  # smoothed: 25 ms now, below d's 30 ms
    assert service.start_order([a, b, c, d]) == [2, 3, 1, 0]


async def test_the_run_starts_the_slowest_source_it_has_seen_first(bridge_client: BridgeFactory,
                                                                   aiohttp_server: Any) -> None:
    async def answer(request: web.Request) -> web.Response:
        name = request.app[NAME]
        if name == "slow":
            await asyncio.sleep(0.05)
        return web.json_response({"wiki_title": name, "evidence": [
            {"page_id": "p", "title": name, "path": "p.md", "snippet": "s"}]})

    async def no_bundle(request: web.Request) -> web.Response:
        return web.Response(status=404)

    urls = []
    for name in ("fast", "slow"):
        app = web.Application()
        app[NAME] = name
        app.router.add_post("/{tail:.*}", answer)
        app.router.add_get("/{tail:.*}", no_bundle)
        server: TestServer = await aiohttp_server(app)
        urls.append(str(server.make_url("")))
    client = await bridge_client(sources=normalize_registered(
        [source("fast", urls[0]), source("slow", urls[1])]))
    service = client.server.app[SERVICE_KEY]
    assert service.start_order(service.sources) == [0, 1]
    for _ in range(2):
        response = await client.post("/message:send", json={"query": "q", "mode": "evidence-only"})
        result = (await response.json())["artifacts"][0]["parts"][0]["data"]
        # whatever order the calls started in, the artifact keeps the selected order
        assert [c["id"] for c in result["citations"]] == ["fast:p", "slow:p"]
        assert [s["id"] for s in result["steps"] if s["id"].startswith("tool-")] == ["tool-fast", "tool-slow"]
        assert service.start_order(service.sources) == [1, 0]


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
