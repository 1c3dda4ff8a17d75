"""The bridge's HTTP surface: the aiohttp application, its request pipeline and routes."""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from aiohttp.abc import AbstractResolver

from bridge import audit
from bridge.auth import bearer_matches
from bridge.config.settings import BridgeSettings, check_bind_policy
from bridge.config.store import SettingsFileError, SettingsStore
from bridge.core.errors import BridgeError
from bridge.iolog import header_summary, io_scope
from bridge.protocols import a2a, mcp
from bridge.protocols.errors import http_error
from bridge.protocols.settings_page import settings_html
from bridge.registry import SourceDescriptor, normalize_registered
from bridge.service import BridgeService
from bridge.sources.protocols import source_clients
from bridge.sources.transport import source_http_client
from common.booleans import TRUE_WORDS
from common.errors import CodedError, HttpError, json_response
from common.json_read import JsonRejected, JsonTooDeep, loads_bounded
from common.logging import REQUEST_ID, setup_request_context

SERVICE_KEY = web.AppKey("bridge_service", BridgeService)
RESOLVER_KEY = web.AppKey("bridge_resolver", AbstractResolver)
ALLOW_HEADERS = "authorization, content-type"
ALLOW_METHODS = "GET, POST, PUT, OPTIONS"
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PROBE_VALUES = ("", *TRUE_WORDS)  # `?probe` alone asks for a probe too

log = structlog.get_logger("llmwiki.bridge.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _service(request: web.Request) -> BridgeService:
    return request.app[SERVICE_KEY]


def setup_bridge_pipeline(app: web.Application) -> None:
    """Host check, origin check, preflight, bearer check, body cap, then the handler; every error
    becomes the bridge's coded body, and every response carries the CORS headers."""

    @web.middleware
    async def pipeline(request: web.Request, handler: Handler) -> web.StreamResponse:
        service = _service(request)
        started = time.perf_counter()
        facts, token = audit.begin()
        scope = (io_scope(request_id=request[REQUEST_ID], headers=header_summary(request.headers))
                 if service.io.enabled else contextlib.nullcontext())
        try:
            with scope:
                response = await _checked(request, handler, service)
        finally:
            audit.end(token)
        if service.settings.audit_log and request.path in audit.AUDITED_ROUTES:
            _audit(request, response, service, facts, (time.perf_counter() - started) * 1000)
        return response

    app.middlewares.append(pipeline)


async def _checked(request: web.Request, handler: Handler, service: BridgeService) -> web.StreamResponse:
    """Host, origin, preflight, then the guarded handler; the CORS headers on whatever comes back.
    The Host check comes first: a page whose name was rebound to 127.0.0.1 sends its own name."""
    policy = service.browser_policy
    if not policy.host_allowed(request.headers.get("Host", "")):
        return host_not_allowed().response()
    origin = request.headers.get("Origin")
    allowed_origin = origin is not None and policy.origin_allowed(origin)
    if origin is not None:
        audit.note(originAllowed=allowed_origin)
    if origin is not None and not allowed_origin:
        response: web.StreamResponse = CodedError(
            403, "origin_not_allowed", "Request origin is not allowed by the bridge.").response()
    elif request.method == "OPTIONS":
        response = web.Response(status=204)
    else:
        response = await _guarded(request, handler, service)
    if not response.prepared:
        response.headers["Access-Control-Allow-Headers"] = ALLOW_HEADERS
        response.headers["Access-Control-Allow-Methods"] = ALLOW_METHODS
        response.headers["Vary"] = "Origin"
        if allowed_origin and origin is not None:
            response.headers["Access-Control-Allow-Origin"] = origin
    return response


def _audit(request: web.Request, response: web.StreamResponse, service: BridgeService,
           facts: dict[str, Any], duration_ms: float) -> None:
    """The audit line of one request: the route's pattern, never its query string or body."""
    error_code = None
    if response.status >= 400 and isinstance(response, web.Response) and isinstance(response.body, bytes):
        try:
            error = json.loads(response.body).get("error")
            error_code = error.get("code") if isinstance(error.get("code"), str) else None
        except (ValueError, AttributeError):
            error_code = None
    token = service.settings.bearer_token
    authorized = False if response.status == 401 else (True if token and "authorized" in facts else None)
    audit.write(audit.audit_line(
        request_id=request[REQUEST_ID], method=request.method, route=request.path, status=response.status,
        duration_ms=duration_ms, source_policy=service.settings.source_policy, facts=facts,
        error_code=error_code, authorized=authorized, origin_allowed=facts.get("originAllowed")))


async def _guarded(request: web.Request, handler: Handler, service: BridgeService) -> web.StreamResponse:
    token = service.settings.bearer_token
    if token and not _open_route(request):
        if not bearer_matches(request.headers.get("Authorization"), token):
            return CodedError(401, "bridge_unauthorized", "Bridge bearer token is required.").response()
        audit.note(authorized=True)
    length = request.content_length
    if length is not None and length > service.settings.max_body_bytes:
        return _too_large(request)
    try:
        return await handler(request)
    except BridgeError as exc:
        return http_error(exc).response()
    except HttpError as exc:
        return exc.response()
    except web.HTTPRequestEntityTooLarge:
        return _too_large(request)
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed):
        return CodedError(404, "not_found", "Not found.").response()
    except web.HTTPException as exc:
        return CodedError(exc.status, "bad_request", exc.reason or "Bad request.").response()
    except Exception:
        log.exception("bridge_request_failed", method=request.method, path=request.path)
        return CodedError(500, "bridge_error", "Bridge request failed.").response()


def _open_route(request: web.Request) -> bool:
    """The settings page itself holds no settings; the JSON endpoints it calls need the token."""
    return request.method == "GET" and request.path == "/settings"


def host_not_allowed() -> CodedError:
    return CodedError(421, "host_not_allowed", "Request host is not allowed by the bridge.")


def _too_large(request: web.Request) -> web.Response:
    """413; on `/message:send` with the request and trace ids, as its every error has them."""
    body = CodedError(413, "body_too_large", "Request body is too large.").body()
    if request.path == a2a.SEND_PATH:
        body.update(requestId=request[REQUEST_ID], traceId=_trace_id(request))
    return json_response(body, status=413)


async def json_body(request: web.Request) -> Any:
    """The request's JSON (`{}` when empty); 400 `invalid_json` when it is not JSON or nests deeper
    than any bridge request shape could (which would otherwise exhaust the stack later)."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        return loads_bounded(raw)
    except JsonTooDeep:
        raise CodedError(400, "invalid_json", "Request body JSON is nested too deeply.") from None
    except JsonRejected as exc:
        raise CodedError(400, "invalid_json", f"Request body JSON is not accepted: {exc}.") from None
    except ValueError:
        raise CodedError(400, "invalid_json", "Request body must be valid JSON.") from None


def _probe_requested(request: web.Request) -> bool:
    return "probe" in request.query and request.query["probe"].strip().lower() in _PROBE_VALUES


async def health(request: web.Request) -> web.Response:
    """Never touches sources; `?probe` adds one live `GET <runtime>/models` (contract 2.6.1)."""
    service = _service(request)
    if _probe_requested(request):
        return json_response(await service.probed_health())
    return json_response(service.health())


async def sources(request: web.Request) -> web.Response:
    return json_response(await _service(request).sources_view(_probe_requested(request)))


async def probe_source(request: web.Request) -> web.Response:
    """The settings page's Test: one source as typed, before it is saved."""
    body = await json_body(request)
    return json_response(await _service(request).probe_draft(body))


async def settings_json(request: web.Request) -> web.Response:
    return json_response(_service(request).settings_document(request.headers.get("Host")))


async def put_config(request: web.Request) -> web.Response:
    body = await json_body(request)
    return json_response(_service(request).put_config(body, request.headers.get("Host"),
                                                      request.headers.get("Authorization")))


async def get_sources_json(request: web.Request) -> web.Response:
    return json_response(_service(request).sources_document())


async def put_sources_json(request: web.Request) -> web.Response:
    body = await json_body(request)
    return json_response(_service(request).put_sources(body))


def _trace_id(request: web.Request) -> str:
    given = request.headers.get("X-Trace-Id", "")
    return given if _SAFE_ID.match(given) else str(uuid.uuid4())


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
    app.router.add_routes(a2a.routes(_service, json_body, _trace_id))  # card, /message:send, JSON-RPC
    app.router.add_routes(mcp.routes(_service, json_body, _trace_id))  # POST /mcp


def load_registry(store: SettingsStore | None) -> list[SourceDescriptor]:
    """Registered sources from the settings file; an unusable file or entry is reported, not fatal."""
    if store is None:
        return []
    try:
        document = store.read()
    except SettingsFileError:
        log.warning("settings_file_invalid")
        return []
    try:
        return normalize_registered(document.sources)
    except ValueError:
        store.status = "invalid_sources"
        log.warning("settings_file_sources_invalid")
        return []


def create_app(settings: BridgeSettings, sources: list[SourceDescriptor] | None = None,
               resolver: AbstractResolver | None = None) -> web.Application:
    """Build the bridge application. Sources come from the settings file when `config_path` is set
    (persistence on), unless given explicitly. `resolver` replaces the system resolver under the
    policy check (tests use it to simulate DNS answers)."""
    check_bind_policy(settings)
    store = SettingsStore(settings.config_path) if settings.config_path is not None else None
    registry = sources if sources is not None else load_registry(store)
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SERVICE_KEY] = BridgeService(settings, registry, store, clients=source_clients())
    if resolver is not None:
        app[RESOLVER_KEY] = resolver
    setup_request_context(app, "bridge")
    setup_bridge_pipeline(app)
    add_routes(app)
    app.cleanup_ctx.append(_source_client)
    return app


async def _source_client(app: web.Application) -> AsyncIterator[None]:
    """One shared outbound client for every source call; closed with the app."""
    service = app[SERVICE_KEY]
    resolver = app.get(RESOLVER_KEY, None)
    async with source_http_client(lambda: service.source_policy, resolver) as client:
        service.http = client
        yield
        service.http = None
