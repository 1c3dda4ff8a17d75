"""Knowledge Sources (and a runtime) that misbehave, on one loopback port in a thread: huge answers,
deeply nested JSON, answers that never come. Every path under a prefix answers the same way.

  /huge/...     200, chunked, `HUGE_BYTES` of one JSON string, written until the reader hangs up
  /nested/...   200, an array nested `NESTED_DEPTH` deep
  /hang/...     never answers (released when the server stops)
  /count/...    200 `{}`, each request counted (to show a refused run made no call)
  /good/...     a cheap well-behaved llmwiki-http source: one evidence item for every query
  /runtime/v1/chat/completions   a chat completion whose content is `HUGE_RUNTIME_BYTES` long
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web

HUGE_BYTES = 200 * 1024 * 1024
HUGE_RUNTIME_BYTES = 50 * 1024 * 1024
NESTED_DEPTH = 100_000
_BLOCK = b"x" * (1024 * 1024)


@dataclass
class HostileSources:
    url: str = ""
    sent_bytes: int = 0  # body bytes the huge answers got out before the bridge hung up
    counted: list[str] = field(default_factory=list)
    parked: int = 0
    release: asyncio.Event | None = None


async def _stream(request: web.Request, server: HostileSources, head: bytes, total: int,
                  tail: bytes) -> web.StreamResponse:
    response = web.StreamResponse()
    response.content_type = "application/json"
    await response.prepare(request)
    try:
        await response.write(head)
        written = 0
        while written < total:
            await response.write(_BLOCK)
            written += len(_BLOCK)
            server.sent_bytes += len(_BLOCK)
        await response.write(tail)
    except (ConnectionError, RuntimeError, asyncio.CancelledError):
        pass  # the bridge stopped reading and hung up: what it is meant to do
    return response


def _app(server: HostileSources) -> web.Application:
    async def huge(request: web.Request) -> web.StreamResponse:
        return await _stream(request, server, b'{"evidence": ["', HUGE_BYTES, b'"]}')

    async def nested(request: web.Request) -> web.Response:
        return web.Response(body=b"[" * NESTED_DEPTH + b"]" * NESTED_DEPTH, content_type="application/json")

    async def hang(request: web.Request) -> web.Response:
        server.parked += 1
        assert server.release is not None
        await server.release.wait()
        return web.json_response({})

    async def count(request: web.Request) -> web.Response:
        server.counted.append(request.path)
        return web.json_response({})

    async def good(request: web.Request) -> web.Response:
        if request.path.endswith("/query"):
            return web.json_response({"wiki_title": "Good", "orientation": [], "limitations": [],
                                      "evidence": [{"page_id": "rollback", "title": "Rollback",
                                                    "path": "rollback.md", "snippet": "Redeploy."}]})
        if request.path.endswith("/search"):
            return web.json_response({"results": []})
        return web.json_response({"source_id": "good", "title": "Good"})

    async def runtime(request: web.Request) -> web.StreamResponse:
        return await _stream(request, server, b'{"id": "c", "object": "chat.completion", "created": 0, '
                                              b'"model": "m", "choices": [{"index": 0, "finish_reason": '
                                              b'"stop", "message": {"role": "assistant", "content": "',
                             HUGE_RUNTIME_BYTES, b'"}}]}')

    app = web.Application()
    app.router.add_post("/runtime/v1/chat/completions", runtime)
    for prefix, handler in (("huge", huge), ("nested", nested), ("hang", hang), ("count", count),
                            ("good", good)):
        app.router.add_route("*", f"/{prefix}/{{tail:.*}}", handler)
    return app


@contextmanager
def running_hostile_sources() -> Iterator[HostileSources]:
    """The server on 127.0.0.1 in its own thread and event loop, for the `with` block."""
    server = HostileSources()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app(server), handler_cancellation=True)

    async def start() -> None:
        server.release = asyncio.Event()
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def stop() -> None:
        assert server.release is not None
        server.release.set()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
