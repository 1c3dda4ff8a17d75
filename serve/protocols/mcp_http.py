"""MCP over HTTP: POST /mcp (MCP-style JSON-RPC, or standard MCP when versioned) and the
sessionless Streamable HTTP endpoint /mcp/stream (JSON responses only)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from common.browser import BrowserPolicy
from common.errors import json_response
from common.hosts import is_loopback_request_host, parse_authority
from common.mcp import INVALID_REQUEST, McpError, Rejection, Reply, response, route_stream
from common.serve_tools import SEARCH_TOOLS
from serve.protocols import off_loop
from serve.protocols.mcp import Dispatcher
from serve.protocols.params import model_from_body, read_json_body
from serve.routes import path_of
from serve.service import KnowledgeSource

DISPATCHER_KEY = web.AppKey("mcp_dispatcher", Dispatcher)
MCP_SOURCE_KEY = web.AppKey("mcp_source", KnowledgeSource)
STREAM_POLICY_KEY = web.AppKey("mcp_stream_policy", BrowserPolicy)
# The MCP SDK's DNS-rebinding guard (contract 6.2.6) knows these loopback names, each with a port.
SDK_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
VERSION_HEADER = "MCP-Protocol-Version"


class JsonRpcRequest(BaseModel):
    """The reference's /mcp request model: a bad shape is a 422 validation body."""

    model_config = ConfigDict(extra="ignore")

    jsonrpc: str = "2.0"
    id: int | str | None = None
    method: str
    params: dict[str, Any] | None = Field(default_factory=dict)


def _may_block(message: Mapping[str, Any], source: KnowledgeSource) -> bool:
    """Whether the message is a search tool call that off_loop says may take long."""
    params = message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, dict):
        return False
    if params.get("name") not in SEARCH_TOOLS:
        return False
    arguments = params.get("arguments")
    return off_loop.search_may_block(source, arguments.get("mode") if isinstance(arguments, dict)
                                     else None)


async def _answer(request: web.Request, message: Mapping[str, Any],
                  handle: Callable[[], Reply]) -> web.Response:
    """The synchronous dispatcher's reply, off the loop when the call may take long (a search
    tool waits for the start-up warm-up only so long: see off_loop.warmed)."""
    source = request.app[MCP_SOURCE_KEY]
    may_block = _may_block(message, source)
    if may_block and not source.indexing.ready:
        await off_loop.warmed(source)
    return _send(await off_loop.call(handle, may_block=may_block))


def _send(reply: Reply) -> web.Response:
    if reply.body is None:
        return web.Response(status=202)
    return json_response(reply.body, status=reply.status)


def _sdk_host_allowed(request: web.Request) -> bool:
    """The stream's extra guard (contract 6.2.6), on the Host the app check already accepted:
    a loopback host must be one of the SDK's names with an explicit port; any other, accepted."""
    policy = request.app[STREAM_POLICY_KEY]
    if policy.any_host:
        return True
    authority = parse_authority(request.headers.get("Host", ""))
    if authority is None:
        return False
    if is_loopback_request_host(authority.host):  # even when bound or listed: the SDK's rule
        return authority.host in SDK_LOOPBACK_HOSTS and authority.port is not None
    return authority.host in policy.accepted_hosts


async def stream_post(request: web.Request) -> web.Response:
    if not _sdk_host_allowed(request):
        return web.Response(status=421, text="Invalid Host header")
    routed = route_stream(request.headers, await request.read())
    if isinstance(routed, Rejection):
        return json_response(routed.body, status=routed.status)
    dispatcher = request.app[DISPATCHER_KEY]
    return await _answer(request, routed.message,
                         functools.partial(dispatcher.handle, routed.message, routed.era))


async def stream_not_allowed(request: web.Request) -> web.Response:
    """Sessionless: no standalone SSE stream to open and no session to delete."""
    headers = {"Allow": "POST"}
    if request.method == "DELETE":
        body = response(None, error=McpError(
            INVALID_REQUEST, "Method Not Allowed: Session termination not supported"))
        return json_response(body, status=405, headers=headers)
    return web.Response(status=405, headers=headers)


async def mcp_post(request: web.Request) -> web.Response:
    if VERSION_HEADER in request.headers:  # a real MCP client: answer exactly as the stream
        return await stream_post(request)
    message = model_from_body(JsonRpcRequest, await read_json_body(request)).model_dump()
    return await _answer(request, message,
                         functools.partial(request.app[DISPATCHER_KEY].handle_compat, message))


def setup(app: web.Application, source: KnowledgeSource, policy: BrowserPolicy) -> None:
    """What the MCP handlers read from the app (POST /mcp and the stream are in the route table)."""
    app[DISPATCHER_KEY] = Dispatcher(source)
    app[MCP_SOURCE_KEY] = source
    app[STREAM_POLICY_KEY] = policy


def add_stream_variants(app: web.Application) -> None:
    """The stream also answers with a trailing slash, and every other method with a 405."""
    path = path_of("mcp_streamable_http")
    app.router.add_post(path + "/", stream_post)
    for variant in (path, path + "/"):
        app.router.add_route("*", variant, stream_not_allowed)  # GET, DELETE, ...: 405
