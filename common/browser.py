"""The browser defence of both services: the Host check (DNS rebinding), the Origin check and CORS.

Each concern is one `setup_...` middleware, installed in this order (outermost first): Host,
Origin, CORS. What differs between the services is data: which names and origins a policy
accepts (each contract has its own origin rule), the refusal bodies, and the CORS table. The
headers come from `common.hosts`, the one parser of both. aiohttp-cors writes the allowed
origin (and exposed headers) on every answer to a request the guards let through, streams
included, since it works as the response is prepared; preflights stay ours (its handler echoes
one method, rewrites the requested header names and refuses preflights that name no method,
where both contracts say otherwise), as do the headers a contract wants on every answer."""

from __future__ import annotations

import enum
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp_cors
from aiohttp import web
from aiohttp_cors.abc import AbstractRouterAdapter

from common.errors import HttpError
from common.hosts import Origin, is_loopback_host, is_loopback_request_host, parse_authority, parse_origin

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# serve's contract (6.2): with no origin listed, these local-development origins, as sent.
LOCAL_DEV_ORIGIN = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(?::\d+)?$")


class OriginRule(enum.Enum):
    """How a service judges an `Origin` the parser accepted; each is its contract's words."""

    # serve 6.2: the listed origins compared as sent, which replace the local-dev pattern.
    LISTED_OR_LOCAL_DEV = "listed-or-local-dev"
    # bridge 2.2: a listed origin, or an http(s) origin on a loopback or accepted host, normalized.
    LISTED_OR_SAME_MACHINE = "listed-or-same-machine"


@dataclass(frozen=True)
class BrowserPolicy:
    """Which `Host` headers and browser origins a service answers. A `Host` must name a loopback
    host (`localhost`, 127.0.0.0/8, ::1) or one of `accepted_hosts` (normalized), unless
    `any_host` (serve's `--allowed-host '*'`)."""

    accepted_hosts: frozenset[str] = frozenset()
    any_host: bool = False
    origins: tuple[str, ...] = ()
    origin_rule: OriginRule = OriginRule.LISTED_OR_SAME_MACHINE

    def host_allowed(self, header: str) -> bool:
        if self.any_host:
            return True
        authority = parse_authority(header)
        return authority is not None and (is_loopback_request_host(authority.host)
                                          or authority.host in self.accepted_hosts)

    def origin_allowed(self, header: str) -> bool:
        origin = parse_origin(header)
        if origin is None:
            return False
        if self.origin_rule is OriginRule.LISTED_OR_LOCAL_DEV:
            text = header.strip()
            return text in self.origins if self.origins else LOCAL_DEV_ORIGIN.fullmatch(text) is not None
        return self._same_machine(origin)

    def _same_machine(self, origin: Origin) -> bool:
        if origin.serialized() in self.origins:
            return True
        if origin.scheme not in ("http", "https"):
            return False
        return is_loopback_host(origin.host) or origin.host in self.accepted_hosts


PolicyOf = Callable[[web.Request], BrowserPolicy]


class OriginVerdict(enum.Enum):
    """What the Origin check found, kept on the request for CORS and the audit log."""

    NONE = "none"          # no Origin header: curl, servers, agents
    ALLOWED = "allowed"
    REFUSED = "refused"
    PREFLIGHT = "preflight"  # allowed, and answered by the CORS middleware itself


ORIGIN_VERDICT = web.RequestKey("llmwiki_origin_verdict", OriginVerdict)


def setup_host_check(app: web.Application, policy_of: PolicyOf, refused: HttpError) -> None:
    """A `Host` the policy does not accept gets `refused` (421) before anything else runs: a page
    whose name was rebound to this machine sends its own name. The refusal carries no CORS."""

    @web.middleware
    async def host_check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not policy_of(request).host_allowed(request.headers.get("Host", "")):
            return refused.response()
        return await handler(request)

    app.middlewares.append(host_check)


def setup_origin_check(app: web.Application, policy_of: PolicyOf, refused: HttpError) -> None:
    """An `Origin`, when present, must be one the policy accepts, else `refused` (403), whatever
    the path or method; the verdict stays on the request."""

    @web.middleware
    async def origin_check(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is None:
            request[ORIGIN_VERDICT] = OriginVerdict.NONE
        elif policy_of(request).origin_allowed(origin):
            request[ORIGIN_VERDICT] = OriginVerdict.ALLOWED
        else:
            request[ORIGIN_VERDICT] = OriginVerdict.REFUSED
            return refused.response()
        return await handler(request)

    app.middlewares.append(origin_check)


@dataclass(frozen=True)
class CorsRules:
    """One service's CORS table (its contract's words; never `*`, never credentials)."""

    allow_methods: str
    allow_headers: str | None        # None: a preflight's requested headers, echoed
    expose_headers: tuple[str, ...]
    preflight_status: int
    preflight_text: str | None
    preflight_max_age: int | None
    any_options_is_preflight: bool  # OPTIONS without an Origin is a preflight too
    methods_on_every_answer: bool   # the allow headers on every answer, refusals included


class _Guarded(AbstractRouterAdapter):
    """aiohttp-cors's view of the application: every path is CORS-enabled (unknown paths and
    errors too), but only for a request the Origin check allowed; preflights are ours."""

    def __init__(self, expose_headers: tuple[str, ...]) -> None:
        options = aiohttp_cors.ResourceOptions(expose_headers=expose_headers)  # type: ignore[no-untyped-call]
        self.config = {"*": options}

    def add_preflight_handler(self, routing_entity: Any, handler: Any, webview: bool = False) -> None:
        raise NotImplementedError("preflights are answered by the CORS middleware")

    def is_preflight_request(self, request: web.Request) -> bool:
        return request.get(ORIGIN_VERDICT) is OriginVerdict.PREFLIGHT

    def is_cors_enabled_on_request(self, request: web.Request) -> bool:
        return request.get(ORIGIN_VERDICT) is OriginVerdict.ALLOWED

    def set_config_for_routing_entity(self, routing_entity: Any, config: Any) -> None:
        raise NotImplementedError("one configuration for the whole application")

    async def get_preflight_request_config(self, preflight_request: web.Request, origin: str,
                                           requested_method: str) -> Any:
        raise NotImplementedError("preflights are answered by the CORS middleware")

    def get_non_preflight_request_config(self, request: web.Request) -> Any:
        return self.config


def setup_cors(app: web.Application, rules: CorsRules) -> None:
    """Answer preflights; have aiohttp-cors echo an allowed origin on every other answer; add
    `Vary: Origin` (and the allow headers when the rules say so) as any answer is prepared, so a
    stream sent before its handler returns gets them too. Goes after the Origin check."""
    aiohttp_cors.CorsConfig(app, router_adapter=_Guarded(rules.expose_headers))

    @web.middleware
    async def preflight(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if request.method != "OPTIONS" or (origin is None and not rules.any_options_is_preflight):
            return await handler(request)
        response = web.Response(status=rules.preflight_status, text=rules.preflight_text)
        if origin is not None:
            request[ORIGIN_VERDICT] = OriginVerdict.PREFLIGHT
            response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Methods"] = rules.allow_methods
        requested = request.headers.get("Access-Control-Request-Headers")
        allow_headers = requested if rules.allow_headers is None else rules.allow_headers
        if allow_headers:
            response.headers["Access-Control-Allow-Headers"] = allow_headers
        if rules.preflight_max_age is not None:
            response.headers["Access-Control-Max-Age"] = str(rules.preflight_max_age)
        return response

    async def every_answer(request: web.Request, response: web.StreamResponse) -> None:
        verdict = request.get(ORIGIN_VERDICT)
        if verdict is None:  # refused for its Host (or answered before the checks ran)
            return
        if verdict is OriginVerdict.REFUSED and not rules.methods_on_every_answer:
            return
        if rules.methods_on_every_answer:
            response.headers["Access-Control-Allow-Headers"] = rules.allow_headers or ""
            response.headers["Access-Control-Allow-Methods"] = rules.allow_methods
        response.headers["Vary"] = "Origin"

    app.middlewares.append(preflight)
    app.on_response_prepare.append(every_answer)
