"""The OpenAPI document for serve's HTTP surface, built from the wire models and the route table:
every routed row has an operation here (a row without one fails the document, and the tests)."""

from __future__ import annotations

import html
from collections.abc import Collection
from typing import Any, get_args

from pydantic import BaseModel

from common import schemas
from common.limits import GRAPH_LIMIT, NEIGHBORHOOD_DEPTH, NEIGHBORHOOD_LIMIT, READ_MAX_CHARS
from common.metrics import METRICS_PATH
from common.openapi import METRICS_OPERATION, JsonRpcRequest, JsonRpcResponse, components, json_body, ref
from common.serve_tools import CONTRACT_DEFAULTS, TOOL_NAMES, TOOLS, ServerDefaults
from common.version import __version__
from serve.protocols import a2a
from serve.routes import path_of, routed

MODELS: tuple[type[BaseModel], ...] = (
    schemas.HealthResponse,
    schemas.WikiManifest,
    schemas.SourceRefsResponse,
    schemas.SourceBundleManifest,
    schemas.WikiPage,
    schemas.ReadNotFound,
    schemas.GraphResponse,
    schemas.GraphNeighborhoodResponse,
    schemas.QueryRequest,
    schemas.ContextPack,
    schemas.SearchResponse,
    schemas.ProjectionStoreDiagnostics,
    schemas.ErrorBody,
    schemas.HttpDetailResponse,
    schemas.HTTPValidationError,
    JsonRpcRequest,
    JsonRpcResponse,
)
Operation = dict[str, Any]


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


DRAFTS = _query("include_drafts", {"type": "boolean", "default": False},
                "Honoured only when the server runs with --allow-drafts.")
ERRORS = {
    "404": {"description": "Root missing", **json_body(schemas.ErrorBody)},
    "422": {"description": "Validation error or unsupported root",
            **json_body({"oneOf": [ref(schemas.HTTPValidationError), ref(schemas.ErrorBody)]})},
}


def _get(summary: str, ok: type[BaseModel] | dict[str, Any], params: list[dict[str, Any]] | None = None,
         extra: dict[str, Any] | None = None) -> Operation:
    responses = {"200": {"description": "OK", **json_body(ok)}, **ERRORS, **(extra or {})}
    return {"summary": summary, "parameters": params or [], "responses": responses}


def _post(summary: str, ok: type[BaseModel]) -> Operation:
    refused = {"description": "A request the service cannot honour: bad `filters` (an unknown key, "
                              "a wrong type, a bad date, an unknown kind) or an unsupported mode",
               **json_body(schemas.HttpDetailResponse)}
    responses = {"200": {"description": "OK", **json_body(ok)}, "400": refused, **ERRORS}
    return {"summary": summary, "requestBody": {"required": False, **json_body(schemas.QueryRequest)},
            "responses": responses}


def _mcp(summary: str) -> Operation:
    return {"summary": summary, "requestBody": {"required": True, **json_body(JsonRpcRequest)},
            "responses": {"200": {"description": "JSON-RPC response", **json_body(JsonRpcResponse)},
                          "202": {"description": "Notification accepted (no body)"},
                          "400": {"description": "Not a JSON-RPC request", **json_body(JsonRpcResponse)}}}


def mcp_tools(defaults: ServerDefaults, enabled: Collection[str]) -> tuple[
        list[dict[str, Any]], list[type[BaseModel]]]:
    """The enabled MCP tools from their table, as the MCP operations' `x-mcp-tools` (what
    tools/list says, the arguments by reference) and their argument models as components."""
    listed: list[dict[str, Any]] = []
    models: list[type[BaseModel]] = []
    for tool in TOOLS:
        if tool.name in enabled:
            model = tool.bound_arguments(defaults)
            models.append(model)
            listed.append({"name": tool.name, "description": tool.describe(defaults, enabled),
                           "inputSchema": ref(model), "annotations": dict(tool.annotations)})
    return listed, models


def _document(summary: str) -> Operation:
    return {"summary": summary, "responses": {"200": {"description": "OK"}}}


def _operations() -> dict[str, Operation]:
    """The operation of each route-table row that is not opt-in, by the row's name."""
    read_ok = {"oneOf": [ref(schemas.WikiPage), ref(schemas.ReadNotFound),
                         {"type": "object", "description": "Projected or clipped WikiPage "
                          "(?fields=, ?max_chars=), or a focused read (?query=, ?sections=)"}]}
    return {
        "health": _get("Readiness and discovery", schemas.HealthResponse),
        "manifest": _get("Wiki manifest (root redacted)", schemas.WikiManifest),
        "source_refs": _get("Typed source-reference handles", schemas.SourceRefsResponse, [DRAFTS]),
        "source_bundle": _get("Bundle identity, capabilities and source refs",
                              schemas.SourceBundleManifest, [DRAFTS]),
        "query": _post("Context pack for a question", schemas.ContextPack),
        "search": _post("Ranked search results", schemas.SearchResponse),
        "read": _get(
            "Read one page by id or path", read_ok,
            [{"name": "page_id", "in": "path", "required": True, "schema": {"type": "string"}},
             DRAFTS, _query("fields", {"type": "string"},
                            "Comma-separated WikiPage fields (plain reads only)."),
             _query("query", {"type": "string"},
                    "Focused read: return the page sections that best match these terms."),
             _query("sections", {"type": "array", "items": {"type": "string"}},
                    "Focused read: section numbers or headings (repeatable and/or "
                    "comma-separated); descendants are included."),
             _query("max_chars", {"type": "integer"},
                    f"Text budget, clamped to {READ_MAX_CHARS.span} (focused reads default to 8000)."),
             _query("include_links", {"type": "boolean"},
                    "false drops links from a plain read; true adds them to a focused one.")],
            {"404": {"description": "No such page", **json_body(schemas.HttpDetailResponse)}}),
        "graph": _get("The link graph (truncated)", schemas.GraphResponse,
                      [_query("limit", {"type": "integer"}, f"Clamped to {GRAPH_LIMIT.span}."), DRAFTS]),
        "graph_neighborhood": _get(
            "A bounded neighbourhood around seed nodes", schemas.GraphNeighborhoodResponse,
            [_query("seed", {"type": "array", "items": {"type": "string"}}),
             _query("depth", {"type": "integer", "default": 1}, f"Clamped to {NEIGHBORHOOD_DEPTH.span}."),
             _query("direction", {"enum": list(get_args(schemas.Direction)), "default": "both"}),
             _query("relation", {"type": "array", "items": {"type": "string"}}),
             _query("limit", {"type": "integer", "default": 50}, f"Clamped to {NEIGHBORHOOD_LIMIT.span}."),
             DRAFTS]),
        "mcp_jsonrpc": _mcp("MCP over plain JSON-RPC (one request per POST)"),
        "mcp_streamable_http": _mcp("MCP Streamable HTTP transport (JSON responses; other methods 405)"),
        "openapi": _document("This document"),
        "docs": _document("A human-readable index of this document (HTML)"),
        "projection_store": _get("Projection cache diagnostics", schemas.ProjectionStoreDiagnostics),
    }


def openapi_document(*, a2a_enabled: bool = False, metrics: bool = False,
                     defaults: ServerDefaults = CONTRACT_DEFAULTS,
                     enabled_tools: Collection[str] = TOOL_NAMES) -> dict[str, Any]:
    """The document of what an app with these options routes: the route table's rows (the opt-in
    A2A ones only when enabled), the stream's trailing-slash variant and, when on, /metrics;
    the MCP operations list the enabled tools with the server's defaults."""
    own = _operations()
    tools, tool_models = mcp_tools(defaults, enabled_tools)
    for name in ("mcp_jsonrpc", "mcp_streamable_http"):
        own[name]["x-mcp-tools"] = tools
    opt_in = a2a.openapi_paths() if a2a_enabled else {}
    paths: dict[str, dict[str, Operation]] = {}
    for route in routed(a2a_enabled):
        operation = opt_in[route.path][route.method.lower()] if route.opt_in else own[route.name]
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    stream = path_of("mcp_streamable_http")
    paths[stream + "/"] = {"post": {**own["mcp_streamable_http"], "summary": f"Same as {stream}"}}
    if metrics:
        paths[METRICS_PATH] = METRICS_OPERATION
    return {
        "openapi": "3.1.0",
        "info": {"title": "llmwiki-serve", "version": __version__,
                 "description": "Read-only Knowledge Source over a Markdown knowledge folder."},
        "paths": paths,
        "components": {"schemas": components((*MODELS, *tool_models), by_alias=False)},  # snake_case
    }


def docs_page(document: dict[str, Any]) -> str:
    """A dependency-free HTML index of the API (no external assets)."""
    rows = []
    for path, item in document["paths"].items():
        for method, op in item.items():
            params = ", ".join(p["name"] for p in op.get("parameters", []))
            rows.append(f"<tr><td>{method.upper()}</td><td><code>{html.escape(path)}</code></td>"
                        f"<td>{html.escape(op['summary'])}</td><td>{html.escape(params)}</td></tr>")
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>llmwiki-serve API</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2rem}td,th{padding:.3rem .6rem;"
        "border-bottom:1px solid #ddd;text-align:left}</style></head><body>"
        f"<h1>llmwiki-serve {html.escape(document['info']['version'])}</h1>"
        "<p>Machine-readable: <a href=/openapi.json>/openapi.json</a></p>"
        "<table><thead><tr><th>method</th><th>path</th><th>what</th><th>parameters</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table></body></html>"
    )
