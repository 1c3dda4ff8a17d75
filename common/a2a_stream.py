"""A2A SendStreamingMessage over SSE, on both bindings: the task (working) at once, the run's
progress as status updates, the result artifact (`lastChunk`), then the terminal status. A client
that goes away cancels the run."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web

from common import a2a
from common.a2a import A2aError
from common.a2a_server import A2aOperations, Handler, check_content_type, history_message, rest_error
from common.errors import json_response
from common.json_wire import json_bytes

log = structlog.get_logger("llmwiki.a2a")

STREAM_METHODS = ("SendStreamingMessage", "message/stream")
Event = dict[str, Any]


def _status(state: str, message: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state, "timestamp": a2a.timestamp()}
    if message is not None:
        status["message"] = message
    return status


async def stream_task(ops: A2aOperations, params: dict[str, Any], request: web.Request,
                      message: dict[str, Any]) -> AsyncGenerator[Event, None]:
    """The StreamResponse events of one run (its message already accepted)."""
    task_id, context_id = str(uuid.uuid4()), a2a.context_id_of(message)
    working: dict[str, Any] = {"id": task_id, "contextId": context_id,
                               "status": _status("TASK_STATE_WORKING"),
                               "history": [history_message(message, task_id, context_id)]}
    ops.store.put(working)  # GetTask sees it working while it runs
    yield {"task": working}
    progress: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    run = asyncio.ensure_future(ops.execute(params, request, progress.put_nowait))
    ops.running[task_id] = run
    try:
        while True:
            waiter = asyncio.ensure_future(progress.get())
            await asyncio.wait({run, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                waiter.cancel()
                while not progress.empty():  # what the run reported just before it ended
                    yield _update(task_id, context_id, progress.get_nowait())
                break
            yield _update(task_id, context_id, waiter.result())
        if run.cancelled():  # CancelTask stopped it: the stream ends with that status
            yield {"statusUpdate": {"taskId": task_id, "contextId": context_id,
                                    "status": _status("TASK_STATE_CANCELED")}}
            return
        try:
            outcome = run.result()
        except A2aError as exc:
            failed = {**working, "status": _status("TASK_STATE_FAILED", _agent_text(task_id, context_id,
                                                                                    exc.message))}
            ops.store.put(failed)
            yield {"statusUpdate": {"taskId": task_id, "contextId": context_id, "status": failed["status"]}}
            return
        task = ops.finish(task_id, context_id, message, outcome)
        for artifact in task["artifacts"]:
            yield {"artifactUpdate": {"taskId": task_id, "contextId": context_id, "artifact": artifact,
                                      "lastChunk": True}}
        yield {"statusUpdate": {"taskId": task_id, "contextId": context_id, "status": task["status"]}}
    finally:
        ops.running.pop(task_id, None)
        if not run.done():  # the client went away (or the server is stopping): stop the run
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await run
            ops.store.put({**working, "status": _status("TASK_STATE_CANCELED")})


def _agent_text(task_id: str, context_id: str, text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "contextId": context_id, "taskId": task_id,
            "role": "ROLE_AGENT", "parts": [{"text": text}]}


def _update(task_id: str, context_id: str, report: dict[str, Any]) -> Event:
    """One progress report as a working status update whose message carries it."""
    message = {"messageId": str(uuid.uuid4()), "contextId": context_id, "taskId": task_id,
               "role": "ROLE_AGENT", "parts": report.get("parts", [])}
    if report.get("metadata"):
        message["metadata"] = report["metadata"]
    return {"statusUpdate": {"taskId": task_id, "contextId": context_id,
                             "status": _status("TASK_STATE_WORKING", message)}}


async def sse(request: web.Request, events: AsyncGenerator[Event, None],
              frame: Callable[[Event], Any] = lambda event: event) -> web.StreamResponse:
    """Each event as one SSE `data:` line, sent as soon as it is made."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
    await response.prepare(request)
    try:
        async for event in events:
            await response.write(b"data: " + json_bytes(frame(event), exact_floats=False) + b"\n\n")
    except (ConnectionResetError, asyncio.CancelledError):
        await events.aclose()  # its `finally` cancels the run
        raise
    await response.write_eof()
    return response


async def rest_stream(ops: A2aOperations, request: web.Request, body: object) -> web.StreamResponse:
    """`POST /message:stream`: the events, or the AIP-193 error when the request cannot start."""
    try:
        a2a.check_version(request.headers.get(a2a.VERSION_HEADER))
        message = ops.accept(body)
    except A2aError as exc:
        return rest_error(exc)
    assert isinstance(body, dict)
    return await sse(request, stream_task(ops, body, request, message))


async def rpc_response(ops: A2aOperations, request: web.Request, payload: object) -> web.StreamResponse:
    """A JSON-RPC request's response: SSE for SendStreamingMessage (each event a JSON-RPC result
    under the request's id), one JSON body for everything else and for a stream refused up front."""
    call = a2a.parse_rpc(payload)
    if not isinstance(call, a2a.RpcCall) or call.method not in STREAM_METHODS:
        return json_response(await ops.rpc(payload, request))
    try:
        a2a.check_version(request.headers.get(a2a.VERSION_HEADER))
        if call.method == "message/stream":
            raise A2aError("UnsupportedOperation", "0.3 streaming is not supported; use "
                           "SendStreamingMessage.")
        message = ops.accept(call.params)
    except A2aError as exc:
        return json_response(exc.rpc(call.id))
    assert isinstance(call.params, dict)
    return await sse(request, stream_task(ops, call.params, request, message),
                     lambda event: a2a.rpc_result(call.id, event))


@dataclass(frozen=True)
class BodyReader:
    """A service's JSON body reader and what it raises for a body that is not JSON."""

    read: Callable[[web.Request], Awaitable[Any]]
    errors: tuple[type[Exception], ...]


def handlers(ops: A2aOperations, body: BodyReader) -> dict[str, Handler]:
    """The JSON-RPC endpoint (both URL forms) and every route of `a2a.REST_ROUTES`, by route
    name; each service answers the card and `/message:send` (legacy forms included) itself."""

    async def jsonrpc(request: web.Request) -> web.StreamResponse:
        try:
            check_content_type(request)
            payload = await body.read(request)
        except A2aError as exc:
            return json_response(exc.rpc(None))
        except body.errors:
            return json_response(a2a.rpc_error(None, a2a.PARSE_ERROR, "Parse error"))
        return await rpc_response(ops, request, payload)

    async def stream(request: web.Request) -> web.StreamResponse:
        try:
            payload = await body.read(request)
        except body.errors:
            return rest_error(A2aError("ParseError", "The request body is not valid JSON."))
        return await rest_stream(ops, request, payload)

    return {"a2a_jsonrpc": jsonrpc, "a2a_jsonrpc_slash": jsonrpc, **ops.rest_handlers(),
            "a2a_message_stream": stream}
