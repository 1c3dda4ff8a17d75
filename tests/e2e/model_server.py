"""A small deterministic OpenAI-compatible server for the e2e tier, on a loopback port in a thread.

The bridge subprocess reaches it through the real `openai` client. It answers every chat request
the same way: when the request offers tools and no tool has answered yet, it calls the search tool
once (so hybrid runs make a real source call); otherwise it answers in text citing [1]. Asked
with `stream: true`, it sends the same reply as chat-completion chunks, one word each, `chunk_delay`
seconds apart, and notes when it sent each (for the forwarding-latency figures)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

MODEL = "e2e-model"
ANSWER = "The release is rolled back by redeploying the previous build [1]."
TOOL_QUERY = "rollback"


@dataclass
class ModelServer:
    url: str = ""  # the base URL the bridge takes (`.../v1`)
    requests: list[dict[str, Any]] = field(default_factory=list)
    chunk_delay: float = 0.0  # seconds between streamed chunks
    sent: list[tuple[float, str]] = field(default_factory=list)  # (time.monotonic(), text) per chunk

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {"id": "chatcmpl-e2e", "object": "chat.completion", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    tools = body.get("tools") or []
    answered = any(m.get("role") == "tool" for m in body.get("messages", []) if isinstance(m, dict))
    names = {t["function"]["name"]: t["function"] for t in tools if isinstance(t, dict) and "function" in t}
    if "llmwiki_search" in names and not answered:
        arguments: dict[str, Any] = {"query": TOOL_QUERY}
        source_id = names["llmwiki_search"]["parameters"]["properties"].get("sourceId", {}).get("enum")
        if source_id:
            arguments["sourceId"] = source_id[0]
        call = {"id": "call-1", "type": "function",
                "function": {"name": "llmwiki_search", "arguments": json.dumps(arguments)}}
        return _completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
    return _completion({"role": "assistant", "content": ANSWER}, "stop")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


async def _streamed(request: web.Request, server: ModelServer, reply: dict[str, Any]) -> web.StreamResponse:
    """The reply as SSE chunks: text word by word, a tool call in one delta."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    message = reply["choices"][0]["message"]
    await response.write(_chunk({"role": "assistant", "content": ""}))
    if message.get("tool_calls"):
        calls = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        await response.write(_chunk({"tool_calls": calls}, "tool_calls"))
    else:
        words = str(message["content"]).split(" ")
        for index, word in enumerate(words):
            if server.chunk_delay:
                await asyncio.sleep(server.chunk_delay)  # the slow model the figures are about
            text = word if index == 0 else " " + word
            server.sent.append((time.monotonic(), text))
            await response.write(_chunk({"content": text}))
        await response.write(_chunk({}, "stop"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _app(server: ModelServer) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        server.requests.append({"path": request.path, "body": None})
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        server.requests.append({"path": request.path, "body": body,
                                "authorization": request.headers.get("Authorization", "")})
        if body.get("stream") is True:
            return await _streamed(request, server, _reply(body))
        return web.json_response(_reply(body))

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@contextmanager
def running_model_server() -> Iterator[ModelServer]:
    """The server on 127.0.0.1 in its own thread and event loop, for the `with` block."""
    server = ModelServer()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner = web.AppRunner(_app(server))

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        server.url = f"http://127.0.0.1:{port}/v1"
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    started.wait(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
