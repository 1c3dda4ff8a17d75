"""serve's HTTP surface: the aiohttp application, its routes and error mapping."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from common.browser import BrowserPolicy
from common.errors import CodedError, DetailError, HttpError, json_response
from common.limits import DEFAULT_NEIGHBORHOOD_DEPTH, DEFAULT_NEIGHBORHOOD_LIMIT
from common.logging import setup_request_context
from common.schemas import CorsStatus, QueryRequest
from serve.errors import KnowledgeSourceError, NotReady, UserError, WikiRootError
from serve.protocols import a2a, mcp_http, off_loop
from serve.protocols.openapi import docs_page, openapi_document
from serve.protocols.params import QueryParams, model_from_body, read_json_body
from serve.protocols.security import cors_status, serve_policy, setup_security
from serve.reads.focus import ReadOptions
from serve.retrieval.filters import request_filters
from serve.retrieval.search import SearchRequest
from serve.routes import routed
from serve.service import DIRECTIONS, KnowledgeSource
from serve.settings import ServeSettings
from serve.support.memory import release_free_memory

SOURCE_KEY = web.AppKey("knowledge_source", KnowledgeSource)
POLICY_KEY = web.AppKey("browser_policy", BrowserPolicy)

log = structlog.get_logger("llmwiki.serve.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def to_http_error(exc: KnowledgeSourceError) -> HttpError:
    """Core errors carry a code and a safe message; only those reach the client."""
    if isinstance(exc, WikiRootError):
        status = 404 if exc.code == "wiki_root_missing" else 422
        return CodedError(status, exc.code, exc.safe_message)
    if isinstance(exc, UserError):
        return DetailError(400, exc.safe_message)
    if isinstance(exc, NotReady):
        busy = CodedError(503, exc.code, exc.safe_message)
        busy.headers = {"Retry-After": str(exc.retry_after_seconds)}
        return busy
    return CodedError(500, exc.code, exc.safe_message)


def setup_core_errors(app: web.Application) -> None:
    @web.middleware
    async def core_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except KnowledgeSourceError as exc:
            raise to_http_error(exc) from None

    app.middlewares.append(core_errors)


def setup_body_limit(app: web.Application, max_bytes: int, timeout: float) -> None:
    """Refuse declared oversize bodies before reading them (aiohttp caps the rest), and read
    each body within `timeout`: a client that stops sending holds no handler (408)."""

    @web.middleware
    async def body_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        length = request.content_length
        if length is not None and length > max_bytes:
            raise DetailError(413, "Request body too large")
        if request.body_exists:
            try:
                await asyncio.wait_for(request.read(), timeout)  # kept: handlers read it again
            except TimeoutError:
                late = CodedError(408, "request_timeout",
                                  f"The request body did not arrive within {timeout:g} s.")
                late.headers = {"Connection": "close"}  # the rest of the body is never read
                raise late from None
        return await handler(request)

    app.middlewares.append(body_limit)


def _source(request: web.Request) -> KnowledgeSource:
    return request.app[SOURCE_KEY]


async def health(request: web.Request) -> web.Response:
    """The health document; with `?ready=1` (for load balancers and probes) it answers 503
    until queries can be answered, with the same document."""
    params = QueryParams(request)
    want_ready = params.boolean("ready")
    params.check()
    cors = CorsStatus(**cors_status(request.app[POLICY_KEY]))
    body = _source(request).health(cors)
    return json_response(body, status=503 if want_ready and not body.ready else 200)


async def manifest(request: web.Request) -> web.Response:
    return json_response(_source(request).manifest())


async def source_refs(request: web.Request) -> web.Response:
    params = QueryParams(request)
    include = params.boolean("include_drafts")
    params.check()
    return json_response(_source(request).source_refs(include))


async def source_bundle(request: web.Request) -> web.Response:
    params = QueryParams(request)
    include = params.boolean("include_drafts")
    params.check()
    return json_response(_source(request).source_bundle(include))


async def read_page(request: web.Request) -> web.Response:
    params = QueryParams(request)
    include = params.boolean("include_drafts")
    fields = params.fields()
    options = ReadOptions(query=params.query.get("query"),
                          sections=tuple(params.fields("sections") or ()),
                          max_chars=params.integer("max_chars", None),
                          include_links=params.optional_boolean("include_links"))
    params.check()
    read = functools.partial(_source(request).read, request.match_info["page_id"],
                             include_drafts=include, fields=fields, options=options)
    result = await off_loop.call(read, may_block=options.focused)
    if result.outcome == "missing":
        raise DetailError(404, "page not found")
    return json_response(result.payload)


async def graph(request: web.Request) -> web.Response:
    params = QueryParams(request)
    limit = params.integer("limit", None)
    include = params.boolean("include_drafts")
    params.check()
    return json_response(_source(request).graph(limit, include))


async def graph_neighborhood(request: web.Request) -> web.Response:
    params = QueryParams(request)
    depth = params.integer("depth", DEFAULT_NEIGHBORHOOD_DEPTH)
    direction = params.choice("direction", DIRECTIONS, "both")
    limit = params.integer("limit", DEFAULT_NEIGHBORHOOD_LIMIT)
    include = params.boolean("include_drafts")
    params.check()
    assert depth is not None and limit is not None
    return json_response(_source(request).neighborhood(
        params.repeated("seed"), depth=depth, direction=direction,
        relations=params.repeated("relation"), limit=limit, include_drafts=include))


def _search_request(source: KnowledgeSource, body: QueryRequest) -> SearchRequest:
    return source.request(
        query=body.query, limit=body.limit, include_drafts=body.include_drafts, mode=body.mode,
        fields=tuple(body.fields) if body.fields is not None else None,
        snippet_chars=body.snippet_chars, min_score=body.min_score,
        exclude_page_ids=tuple(body.exclude_page_ids), query_variants=tuple(body.query_variants),
        include_graph=body.include_graph, filters=request_filters(body.filters))


async def query(request: web.Request) -> web.Response:
    body = model_from_body(QueryRequest, await read_json_body(request))
    source = _source(request)
    req = _search_request(source, body)
    body_bytes = await off_loop.search(source, req, source.context_json)
    return web.Response(body=body_bytes, content_type="application/json", charset="utf-8")


async def search(request: web.Request) -> web.Response:
    body = model_from_body(QueryRequest, await read_json_body(request))
    source = _source(request)
    req = _search_request(source, body)
    return json_response(await off_loop.search(source, req, source.search))


async def projection_store(request: web.Request) -> web.Response:
    return json_response(_source(request).projection_store())


def _openapi(request: web.Request) -> dict[str, Any]:
    source = _source(request)  # opt-in routes are documented only when they exist
    tools = request.app[mcp_http.DISPATCHER_KEY]  # the MCP tools this server lists
    return openapi_document(a2a_enabled=source.a2a_enabled, metrics=source.settings.metrics,
                            defaults=tools.defaults, enabled_tools=tools.enabled)


async def openapi(request: web.Request) -> web.Response:
    return json_response(_openapi(request))


async def docs(request: web.Request) -> web.Response:
    return web.Response(text=docs_page(_openapi(request)), content_type="text/html")


HANDLERS: dict[str, Handler] = {
    "health": health, "manifest": manifest, "source_bundle": source_bundle,
    "source_refs": source_refs, "query": query, "search": search, "read": read_page,
    "graph": graph, "graph_neighborhood": graph_neighborhood, "openapi": openapi, "docs": docs,
    "projection_store": projection_store,
    "mcp_jsonrpc": mcp_http.mcp_post, "mcp_streamable_http": mcp_http.stream_post,
}


def add_routes(app: web.Application) -> None:
    """Route every row of serve's route table (the opt-in A2A rows only when enabled: otherwise
    their paths 404 like unknown ones)."""
    source = app[SOURCE_KEY]
    mcp_http.setup(app, source, app[POLICY_KEY])
    handlers = {**HANDLERS, **a2a.handlers(_source, a2a.operations(source))}
    for route in routed(source.a2a_enabled):
        app.router.add_route(route.method, route.pattern or route.path, handlers[route.name])
    mcp_http.add_stream_variants(app)


def create_app(settings: ServeSettings, source: KnowledgeSource | None = None) -> web.Application:
    """Build the serve application for one folder."""
    app = web.Application(client_max_size=settings.max_body_bytes)
    knowledge = source or KnowledgeSource(settings)
    policy = serve_policy(settings.cors_origins, settings.allowed_hosts, settings.host)
    app[SOURCE_KEY] = knowledge
    app[POLICY_KEY] = policy
    if settings.metrics:  # off: no middleware, no route, prometheus_client not even imported
        from serve.protocols.metrics import install_metrics

        install_metrics(app, knowledge)  # first, so outermost: it sees the status the client gets
    setup_request_context(app, "serve")
    setup_security(app, policy)
    setup_body_limit(app, settings.max_body_bytes, settings.body_timeout_seconds)
    setup_core_errors(app)
    add_routes(app)
    app.cleanup_ctx.append(_lifecycle)
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    """Load the folder before serving (a missing root is not fatal: it loads lazily), then
    keep the restart cache up to date in the background and on shutdown."""
    source = app[SOURCE_KEY]
    try:
        source.snapshot()
    except KnowledgeSourceError as exc:
        log.warning("source_not_ready", code=exc.code)
    release_free_memory()
    loop = asyncio.get_running_loop()
    warming = loop.run_in_executor(None, source.warm_then_save)
    yield
    await warming
    await asyncio.get_running_loop().run_in_executor(None, source.save_cache)
    source.close()


