"""Browser and DNS-rebinding defences: Host and Origin checks, CORS, preflight.

The guards are ours (aiohttp-cors has none: it trusts every origin it is configured for)
and run first. aiohttp-cors then writes the CORS headers of every response to a request
that passed them. Preflights stay ours: the contract answers every path with a fixed
method list and the requested headers as sent, where aiohttp-cors's preflight handler
echoes one method, rewrites the header names and refuses requests that name no method."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp_cors
from aiohttp import web
from aiohttp_cors.abc import AbstractRouterAdapter

from common.errors import DetailError, render_errors

LOCAL_ORIGIN_RE = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(?::\d+)?$")
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"

EXPOSE_HEADERS = ("Mcp-Session-Id",)
# What the middleware found, for the CORS adapter: the request passed the guards with an
# Origin, or it is a preflight the middleware answered itself.
CORS_STATE_KEY = web.RequestKey("llmwiki_cors", str)
ALLOWED, PREFLIGHT = "allowed", "preflight"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class OriginPolicy:
    """Which browser origins and Host headers are accepted."""

    explicit_origins: tuple[str, ...] = ()
    extra_hosts: tuple[str, ...] = ()
    bind_host: str = "127.0.0.1"

    def origin_allowed(self, origin: str) -> bool:
        if self.explicit_origins:
            return origin in self.explicit_origins
        return LOCAL_ORIGIN_RE.fullmatch(origin) is not None

    def host_allowed(self, host_header: str) -> bool:
        if "*" in self.extra_hosts:
            return True
        host = _strip_port(host_header.strip().lower())
        if host in LOOPBACK_HOSTS:
            return True
        if self.bind_host not in ("0.0.0.0", "::", "") and host == _strip_port(self.bind_host.lower()):
            return True
        return any(_strip_port(h.lower()) == host for h in self.extra_hosts)

    def status(self) -> dict[str, Any]:
        """The /health CORS block: a count, never the origin strings."""
        if self.explicit_origins:
            return {"mode": "explicit-allowlist", "local_dev_origins": False,
                    "explicit_origin_count": len(self.explicit_origins)}
        return {"mode": "local-dev-allowlist", "local_dev_origins": True,
                "explicit_origin_count": 0}


def _strip_port(host: str) -> str:
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


class _GuardedApp(AbstractRouterAdapter):
    """aiohttp-cors's view of the application: every path is CORS-enabled (the contract
    covers unknown paths and error responses too), but only for requests the security
    middleware let through; preflights are answered by the middleware."""

    def __init__(self) -> None:
        options = aiohttp_cors.ResourceOptions(expose_headers=EXPOSE_HEADERS)  # type: ignore[no-untyped-call]
        self.config = {"*": options}

    def add_preflight_handler(self, routing_entity: Any, handler: Any, webview: bool = False) -> None:
        raise NotImplementedError("preflights are answered by the security middleware")

    def is_preflight_request(self, request: web.Request) -> bool:
        return request.get(CORS_STATE_KEY) == PREFLIGHT

    def is_cors_enabled_on_request(self, request: web.Request) -> bool:
        return request.get(CORS_STATE_KEY) == ALLOWED

    def set_config_for_routing_entity(self, routing_entity: Any, config: Any) -> None:
        raise NotImplementedError("one configuration for the whole application")

    async def get_preflight_request_config(self, preflight_request: web.Request, origin: str,
                                           requested_method: str) -> Any:
        raise NotImplementedError("preflights are answered by the security middleware")

    def get_non_preflight_request_config(self, request: web.Request) -> Any:
        return self.config


def setup_security(app: web.Application, policy: OriginPolicy) -> None:
    """Reject foreign Hosts (421) and Origins (403) before any handler runs; answer CORS
    preflights; have aiohttp-cors add CORS headers (never '*') to every other response to
    an allowed origin."""
    aiohttp_cors.CorsConfig(app, router_adapter=_GuardedApp())

    @web.middleware
    async def security(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not policy.host_allowed(request.headers.get("Host", "")):
            return DetailError(421, "host not allowed").response()
        origin = request.headers.get("Origin")
        if origin is not None and not policy.origin_allowed(origin):
            return DetailError(403, "origin not allowed").response()
        if request.method == "OPTIONS" and origin is not None:
            request[CORS_STATE_KEY] = PREFLIGHT
            response: web.StreamResponse = web.Response(text="OK")
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Methods"] = ALLOW_METHODS
            requested = request.headers.get("Access-Control-Request-Headers")
            if requested:
                response.headers["Access-Control-Allow-Headers"] = requested
            response.headers["Access-Control-Max-Age"] = "600"
        else:
            if origin is not None:
                request[CORS_STATE_KEY] = ALLOWED
            response = await render_errors(handler, request)
        if not response.prepared:
            response.headers["Vary"] = "Origin"
        return response

    app.middlewares.append(security)
