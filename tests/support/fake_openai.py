"""A scriptable OpenAI-compatible server for the bridge runtime tests (chat completions and models)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer


@dataclass
class RecordedRequest:
    """What one call to the fake looked like: enough to assert the prompt, headers and tools."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body.get("messages", []) if isinstance(self.body, dict) else []
        return messages

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self.body.get("tools") or [] if isinstance(self.body, dict) else []
        return tools


@dataclass
class Script:
    """One scripted reply to a chat-completions request."""

    kind: str  # answer | tool_calls | status | hang | garbage | raw
    content: Any = None
    status: int = 200
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class FakeOpenAI:
    """Replies are consumed in order, one per chat request; an unscripted request gets HTTP 500 so
    a test that calls the runtime more often than it expected fails loudly."""

    def __init__(self) -> None:
        self.scripts: list[Script] = []
        self.requests: list[RecordedRequest] = []
        self.reject_tools = False
        self.models_status = 200
        self.hanging = asyncio.Event()  # set once a request is parked by `hang()`
        self._release = asyncio.Event()  # set at teardown so parked handlers finish
        self._gate = asyncio.Event()  # holds a gated answer's rest back
        self.url = ""

    # -------------------------------------------------------------- scripting

    def answer(self, text: Any) -> FakeOpenAI:
        self.scripts.append(Script("answer", content=text))
        return self

    def tool_calls(self, *calls: tuple[str, dict[str, Any]]) -> FakeOpenAI:
        self.scripts.append(Script("tool_calls", calls=list(calls)))
        return self

    def fail(self, status: int, message: str = "upstream exploded") -> FakeOpenAI:
        self.scripts.append(Script("status", status=status, content=message))
        return self

    def gated_answer(self, first: str, rest: str) -> FakeOpenAI:
        """A streamed answer whose first chunk is sent at once and the rest once `open_gate()`."""
        self.scripts.append(Script("gated", content=(first, rest)))
        return self

    def open_gate(self) -> None:
        self._gate.set()

    def hang(self) -> FakeOpenAI:
        self.scripts.append(Script("hang"))
        return self

    def garbage(self) -> FakeOpenAI:
        self.scripts.append(Script("garbage"))
        return self

    def raw(self, payload: Any) -> FakeOpenAI:
        self.scripts.append(Script("raw", content=payload))
        return self

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -------------------------------------------------------------- server

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _record(self, request: web.Request) -> RecordedRequest:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        recorded = RecordedRequest(request.method, request.path, dict(request.headers), body)
        self.requests.append(recorded)
        return recorded

    async def _models(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]},
                                 status=self.models_status)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request)
        if self.reject_tools and recorded.tools:
            return web.json_response({"error": {"message": "This model does not support tools.",
                                                "type": "invalid_request_error", "param": "tools"}},
                                     status=400)
        if not self.scripts:
            return web.json_response({"error": {"message": "unscripted request"}}, status=500)
        script = self.scripts.pop(0)
        if script.kind == "hang":
            self.hanging.set()
            await self._release.wait()
            return web.json_response(_completion({"role": "assistant", "content": "too late"}))
        if script.kind == "status":
            return web.json_response({"error": {"message": script.content}}, status=script.status)
        if script.kind == "garbage":
            return web.Response(text="{not json at all", content_type="application/json")
        if script.kind == "raw":
            return web.json_response(script.content)
        streamed = isinstance(recorded.body, dict) and recorded.body.get("stream") is True
        if script.kind == "gated":
            first, rest = script.content
            return await _sse(request, [{"role": "assistant", "content": first}, {"content": rest}], "stop",
                              gate=self._gate)
        if script.kind == "tool_calls":
            calls = [{"id": f"call_{index}", "type": "function",
                      "function": {"name": name, "arguments": json.dumps(args)}}
                     for index, (name, args) in enumerate(script.calls, start=1)]
            if streamed:
                return await _sse(request, [{"role": "assistant", "tool_calls": [
                    {"index": i, **call} for i, call in enumerate(calls)]}], "tool_calls")
            return web.json_response(_completion({"role": "assistant", "content": None,
                                                  "tool_calls": calls}, "tool_calls"))
        if streamed and isinstance(script.content, str):  # as a real server streams: a few chunks
            text = script.content
            cuts = [text[i:i + 16] for i in range(0, len(text), 16)] or [""]
            return await _sse(request, [{"role": "assistant", "content": cut} for cut in cuts], "stop")
        return web.json_response(_completion({"role": "assistant", "content": script.content}))

    def release(self) -> None:
        self._release.set()


async def _sse(request: web.Request, deltas: list[dict[str, Any]], finish: str,
               gate: asyncio.Event | None = None) -> web.StreamResponse:
    """A streamed completion: one chunk per delta, then the finish reason and [DONE]; with a
    `gate`, everything after the first chunk waits for it."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for index, delta in enumerate([*deltas, {}]):
        if gate is not None and index == 1:
            await gate.wait()
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                 "model": "fake-model",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None if delta else finish}]}
        await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


@asynccontextmanager
async def running_fake_openai() -> AsyncIterator[FakeOpenAI]:
    """Start the fake on a loopback port; `fake.url` is its base URL (ending in /v1)."""
    fake = FakeOpenAI()
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    fake.url = str(server.make_url("/v1"))
    try:
        yield fake
    finally:
        fake.release()
        await server.close()
