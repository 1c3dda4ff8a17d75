"""An llmwiki-http Knowledge Source whose `/query` answers only when the test releases it, on a
loopback port in its own thread: a request the bridge has in flight for as long as the test wants."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web

EVIDENCE = {"page_id": "rollback", "title": "Rollback", "path": "rollback.md",
            "snippet": "Redeploy the previous build."}


@dataclass
class SlowSource:
    url: str = ""
    arrived: threading.Event = field(default_factory=threading.Event)  # a /query is waiting
    loop: asyncio.AbstractEventLoop | None = None
    gate: asyncio.Event | None = None

    def release(self) -> None:
        """Let every waiting (and later) /query answer."""
        assert self.loop is not None and self.gate is not None
        self.loop.call_soon_threadsafe(self.gate.set)


def _app(source: SlowSource) -> web.Application:
    async def answer(request: web.Request) -> web.Response:
        if request.path.endswith("/query"):
            assert source.gate is not None
            source.arrived.set()
            await source.gate.wait()
            return web.json_response({"wiki_title": "Slow", "orientation": [], "limitations": [],
                                      "evidence": [EVIDENCE]})
        if request.path.endswith("/search"):
            return web.json_response({"results": []})
        return web.json_response({"source_id": "slow", "title": "Slow"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


@contextmanager
def running_slow_source() -> Iterator[SlowSource]:
    source = SlowSource()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app(source))

    async def start() -> None:
        source.loop, source.gate = loop, asyncio.Event()
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        source.url = f"http://127.0.0.1:{runner.addresses[0][1]}"

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield source
    finally:
        source.release()
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
