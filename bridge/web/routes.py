"""The bridge's routes: the handlers of its own endpoints and the whole route table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from bridge.support.routes import ROUTES
from bridge.web import a2a, mcp
from bridge.web.openapi import openapi
from bridge.web.requests import read_json_body, service_of, trace_id
from bridge.web.settings_page import settings_html
from common.booleans import TRUE_WORDS
from common.errors import json_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_PROBE_VALUES = ("", *TRUE_WORDS)  # `?probe` alone asks for a probe too


def _probe_requested(request: web.Request) -> bool:
    return "probe" in request.query and request.query["probe"].strip().lower() in _PROBE_VALUES


async def health(request: web.Request) -> web.Response:
    """Never touches sources; `?probe` adds one live `GET <runtime>/models` (contract 2.6.1)."""
    service = service_of(request)
    if _probe_requested(request):
        return json_response(await service.probed_health())
    return json_response(service.health())


async def sources(request: web.Request) -> web.Response:
    return json_response(await service_of(request).sources_view(_probe_requested(request)))


async def probe_source(request: web.Request) -> web.Response:
    """The settings page's Test: one source as typed, before it is saved."""
    body = await read_json_body(request)
    return json_response(await service_of(request).probe_draft(body))


async def settings_json(request: web.Request) -> web.Response:
    return json_response(service_of(request).settings_document(request.headers.get("Host")))


async def put_config(request: web.Request) -> web.Response:
    body = await read_json_body(request)
    return json_response(service_of(request).put_config(body, request.headers.get("Host"),
                                                      request.headers.get("Authorization")))


async def get_sources_json(request: web.Request) -> web.Response:
    return json_response(service_of(request).sources_document())


async def put_sources_json(request: web.Request) -> web.Response:
    body = await read_json_body(request)
    return json_response(service_of(request).put_sources(body))


def add_routes(app: web.Application) -> None:
    """Route every row of the route table (bridge/support/routes.py) to its handler."""
    operations = a2a.operations(service_of, trace_id)
    handlers: dict[str, Handler] = {
        "health": health, "settings_page": settings_html, "sources": sources, "probe_source": probe_source,
        "settings_json": settings_json, "put_config": put_config, "get_sources_json": get_sources_json,
        "put_sources_json": put_sources_json, "openapi": openapi,
        **a2a.handlers(service_of, read_json_body, trace_id, operations),
        "mcp": mcp.handler(service_of, read_json_body, trace_id)}
    for route in ROUTES:
        app.router.add_route(route.method, route.path, handlers[route.name])
