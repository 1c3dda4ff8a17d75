"""The bridge's request pipeline, one middleware: Host (421), Origin (403), preflight (204),
bearer (401), body cap (413), then the route; core errors mapped in one place (errors.py), CORS
headers on whatever comes back, and the audit line."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from bridge.service import BridgeService
from bridge.support import audit
from bridge.support.auth import bearer_matches
from bridge.support.errors import BridgeError
from bridge.support.iolog import header_summary, io_scope
from bridge.web.errors import http_error
from bridge.web.requests import service_of, trace_id
from common.a2a import SEND_PATH
from common.errors import CodedError, HttpError, json_response
from common.logging import REQUEST_ID

ALLOW_HEADERS = "authorization, content-type, a2a-version"
ALLOW_METHODS = "GET, POST, PUT, DELETE, OPTIONS"

log = structlog.get_logger("llmwiki.bridge.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def setup_bridge_pipeline(app: web.Application) -> None:
    """Host check, origin check, preflight, bearer check, body cap, then the handler; every error
    becomes the bridge's coded body, and every response carries the CORS headers."""

    @web.middleware
    async def pipeline(request: web.Request, handler: Handler) -> web.StreamResponse:
        service = service_of(request)
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
    app.on_response_prepare.append(_cors_headers)


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
    return response


async def _cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The CORS headers, set as any response is about to be sent: a stream (SSE) is sent before
    its handler returns, so the middleware could not add them afterwards. A request refused for
    its Host gets none (421 says nothing to a rebinding page)."""
    policy = service_of(request).browser_policy
    if not policy.host_allowed(request.headers.get("Host", "")):
        return
    response.headers["Access-Control-Allow-Headers"] = ALLOW_HEADERS
    response.headers["Access-Control-Allow-Methods"] = ALLOW_METHODS
    response.headers["Vary"] = "Origin"
    origin = request.headers.get("Origin")
    if origin is not None and policy.origin_allowed(origin):
        response.headers["Access-Control-Allow-Origin"] = origin


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
    if request.path == SEND_PATH:
        body.update(requestId=request[REQUEST_ID], traceId=trace_id(request))
    return json_response(body, status=413)
