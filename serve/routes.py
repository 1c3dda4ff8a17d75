"""serve's route table: every path the HTTP surface answers, from which the router, the health
document's `endpoints` and the OpenAPI paths are derived (no protocol code: the core reads it)."""

from __future__ import annotations

from typing import NamedTuple

from common.a2a import CARD_PATH, JSONRPC_PATH, REST_ROUTES, SEND_PATH


class Route(NamedTuple):
    name: str  # the handler's name; also the health document's key when `listed`
    method: str
    path: str  # as documented (contract 4.2)
    pattern: str = ""  # the router's pattern, when it differs from `path`
    opt_in: bool = False  # A2A: routed, and listed with its path, only when enabled
    listed: bool = True  # named in the health document's `endpoints`


# The listed rows are in the health document's order.
ROUTES: tuple[Route, ...] = (
    Route("health", "GET", "/health"),
    Route("manifest", "GET", "/manifest"),
    Route("source_bundle", "GET", "/source-bundle"),
    Route("source_refs", "GET", "/source-refs"),
    Route("query", "POST", "/query"),
    Route("search", "POST", "/search"),
    Route("read", "GET", "/read/{page_id}", pattern=r"/read/{page_id:[\s\S]+}"),  # ids may hold newlines
    Route("graph", "GET", "/graph"),
    Route("graph_neighborhood", "GET", "/graph/neighborhood"),
    Route("mcp_jsonrpc", "POST", "/mcp"),
    Route("mcp_streamable_http", "POST", "/mcp/stream"),
    Route("openapi", "GET", "/openapi.json"),
    Route("docs", "GET", "/docs"),
    Route("a2a_agent_card", "GET", CARD_PATH, opt_in=True),
    Route("a2a_message_send", "POST", SEND_PATH, opt_in=True),
    Route("a2a_jsonrpc", "POST", JSONRPC_PATH, opt_in=True, listed=False),
    # Clients that join a path onto the card's JSON-RPC URL post to it with a trailing slash.
    Route("a2a_jsonrpc_slash", "POST", JSONRPC_PATH + "/", opt_in=True, listed=False),
    *(Route(name, method, path, opt_in=True, listed=False) for name, method, path, _ in REST_ROUTES),
    # Contract 4.5 lists it; the reference's health document does not.
    Route("projection_store", "GET", "/diagnostics/projection-store", listed=False),
)
BY_NAME = {route.name: route for route in ROUTES}


def path_of(name: str) -> str:
    return BY_NAME[name].path


def routed(a2a_enabled: bool) -> tuple[Route, ...]:
    """The routes an app answers: the opt-in ones only when A2A is enabled."""
    return tuple(route for route in ROUTES if a2a_enabled or not route.opt_in)


def endpoint_paths(a2a_enabled: bool) -> dict[str, str]:
    """The health document's `endpoints`: each listed route's path, "" for one not enabled."""
    return {route.name: route.path if a2a_enabled or not route.opt_in else ""
            for route in ROUTES if route.listed}
