"""The bridge's routes: the handlers of its own endpoints and the whole route table."""

from __future__ import annotations

from aiohttp import web

from bridge.web import a2a, mcp
from bridge.web.openapi import OPENAPI_PATH, openapi
from bridge.web.requests import read_json_body, service_of, trace_id
from bridge.web.settings_page import settings_html
from common.booleans import TRUE_WORDS
from common.errors import json_response

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
    """The whole route table, in one place."""
    app.router.add_get("/health", health, allow_head=False)
    app.router.add_get("/settings", settings_html, allow_head=False)
    app.router.add_get("/sources", sources, allow_head=False)
    app.router.add_post("/sources/probe", probe_source)
    app.router.add_get("/settings.json", settings_json, allow_head=False)
    app.router.add_put("/settings/config.json", put_config)
    app.router.add_get("/settings/sources.json", get_sources_json, allow_head=False)
    app.router.add_put("/settings/sources.json", put_sources_json)
    operations = a2a.operations(service_of, trace_id)
    app.router.add_routes(a2a.routes(service_of, read_json_body, trace_id, operations))  # card, A2A
    app.router.add_routes(mcp.routes(service_of, read_json_body, trace_id))  # POST /mcp
    app.router.add_get(OPENAPI_PATH, openapi, allow_head=False)  # bridge/web/openapi.py lists them all
