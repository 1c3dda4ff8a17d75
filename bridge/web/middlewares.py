"""The bridge's request pipeline: the audit line around everything, then common/browser.py's Host
(421), Origin (403) and CORS (preflight 204, the CORS headers on whatever comes back), then the
bridge's own guard: bearer (401), body cap (413), the route, core errors mapped in one place
(errors.py)."""

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
from common.browser import (
    ORIGIN_VERDICT,
    CorsRules,
    OriginVerdict,
    setup_cors,
    setup_host_check,
    setup_origin_check,
)
from common.errors import CodedError, HttpError, json_response
from common.logging import REQUEST_ID

# The contract's (2.1, 2.2), plus what the A2A routes added (`DELETE`, `A2A-Version`): the allow
# headers on every answer, a preflight at any path answered 204 with no body.
BRIDGE_CORS = CorsRules(
    allow_methods="GET, POST, PUT, DELETE, OPTIONS", allow_headers="authorization, content-type, a2a-version",
    expose_headers=(), preflight_status=204, preflight_text=None, preflight_max_age=None,
    any_options_is_preflight=True, methods_on_every_answer=True)

log = structlog.get_logger("llmwiki.bridge.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def setup_bridge_pipeline(app: web.Application) -> None:
    """The audit line around everything; Host, Origin and CORS; then bearer, body cap and the
    handler, every error becoming the bridge's coded body."""

    @web.middleware
    async def audited(request: web.Request, handler: Handler) -> web.StreamResponse:
        service = service_of(request)
        started = time.perf_counter()
        facts, token = audit.begin()
        scope = (io_scope(request_id=request[REQUEST_ID], headers=header_summary(request.headers))
                 if service.io.enabled else contextlib.nullcontext())
        try:
            with scope:
                response = await handler(request)
        finally:
            audit.end(token)
        if service.settings.audit_log and request.path in audit.AUDITED_ROUTES:
            _audit(request, response, service, facts, (time.perf_counter() - started) * 1000)
        return response

    @web.middleware
    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        return await _guarded(request, handler, service_of(request))

    app.middlewares.append(audited)
    setup_host_check(app, lambda request: service_of(request).browser_policy, host_not_allowed())
    setup_origin_check(app, lambda request: service_of(request).browser_policy, CodedError(
        403, "origin_not_allowed", "Request origin is not allowed by the bridge."))
    setup_cors(app, BRIDGE_CORS)
    app.middlewares.append(guarded)


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
        error_code=error_code, authorized=authorized, origin_allowed=_origin_allowed(request)))


def _origin_allowed(request: web.Request) -> bool | None:
    """The Origin check's verdict for the audit line; None when there was no Origin to judge."""
    verdict = request.get(ORIGIN_VERDICT)
    if verdict is None or verdict is OriginVerdict.NONE:
        return None
    return verdict is not OriginVerdict.REFUSED


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
