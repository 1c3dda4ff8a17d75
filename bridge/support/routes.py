"""The bridge's route table: every path it answers, from which the router, the OpenAPI document,
the settings document's `endpoints` and the audit log's routes are derived (handlers live in web/)."""

from __future__ import annotations

from typing import NamedTuple

from common.a2a import CARD_PATH, JSONRPC_PATH, REST_ROUTES, SEND_PATH

OPENAPI_PATH = "/openapi.json"


class Route(NamedTuple):
    name: str  # the handler's name
    method: str
    path: str
    summary: str  # the OpenAPI operation's summary
    endpoint: str = ""  # its key in the settings document's `endpoints` (contract 2.6.3), if listed
    audited: bool = False  # written to the audit log when it is on


ROUTES: tuple[Route, ...] = (
    Route("health", "GET", "/health", "Bridge health (never calls sources; ?probe checks the runtime)",
          "health", True),
    Route("sources", "GET", "/sources", "The registered Knowledge Sources and their health", "sources", True),
    Route("agent_card", "GET", CARD_PATH, "A2A agent card (1.0, with the 0.3 connection fields); "
          "Cache-Control and ETag", "agentCard", True),
    Route("message_send", "POST", SEND_PATH, "Run a question over the Knowledge Sources",
          "messageSend", True),
    Route("mcp", "POST", "/mcp", "MCP over JSON-RPC: the bridge's tools", "mcp", True),
    Route("settings_page", "GET", "/settings", "The settings page (HTML; open without the token)",
          "settings", True),
    Route("settings_json", "GET", "/settings.json", "The bridge's settings (secrets redacted)",
          "settingsJson", True),
    Route("put_config", "PUT", "/settings/config.json", "Change settings (host and port apply at restart)",
          "settingsConfigJson", True),
    Route("get_sources_json", "GET", "/settings/sources.json", "The registered sources as stored",
          "settingsSourcesJson", True),
    Route("put_sources_json", "PUT", "/settings/sources.json", "Replace the registered sources", "", True),
    Route("probe_source", "POST", "/sources/probe", "Probe one source as typed, before it is saved",
          "", True),
    Route("a2a_jsonrpc", "POST", JSONRPC_PATH, "A2A JSON-RPC: SendMessage, SendStreamingMessage, GetTask, "
          "ListTasks, CancelTask (1.0) and message/send (0.3)"),
    Route("a2a_jsonrpc_slash", "POST", JSONRPC_PATH + "/",
          "The A2A JSON-RPC endpoint, with a trailing slash"),
    *(Route(name, method, path, summary, "", name == "a2a_message_stream")
      for name, method, path, summary in REST_ROUTES),
    Route("openapi", "GET", OPENAPI_PATH, "This document"),
)

# The settings document's `endpoints`, in the table's order.
ENDPOINTS: dict[str, str] = {route.endpoint: route.path for route in ROUTES if route.endpoint}
AUDITED_ROUTES: frozenset[str] = frozenset(route.path for route in ROUTES if route.audited)
