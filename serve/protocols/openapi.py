"""The OpenAPI document for serve's HTTP surface, built from the wire models and the route table."""

from __future__ import annotations

import html
from typing import Any, get_args

from pydantic import BaseModel

from common import schemas
from common.limits import GRAPH_LIMIT, NEIGHBORHOOD_DEPTH, NEIGHBORHOOD_LIMIT, READ_MAX_CHARS
from common.version import __version__
from serve.routes import path_of

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
)
REF = "#/components/schemas/{model}"


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": REF.format(model=model.__name__)}


def _json(model: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    schema = _ref(model) if isinstance(model, type) else model
    return {"content": {"application/json": {"schema": schema}}}


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


DRAFTS = _query("include_drafts", {"type": "boolean", "default": False},
                "Honoured only when the server runs with --allow-drafts.")
ERRORS = {
    "404": {"description": "Root missing", **_json(schemas.ErrorBody)},
    "422": {"description": "Validation error or unsupported root",
            **_json({"oneOf": [_ref(schemas.HTTPValidationError), _ref(schemas.ErrorBody)]})},
}


def _get(summary: str, ok: type[BaseModel] | dict[str, Any], params: list[dict[str, Any]] | None = None,
         extra: dict[str, Any] | None = None) -> dict[str, Any]:
    responses = {"200": {"description": "OK", **_json(ok)}, **ERRORS, **(extra or {})}
    return {"get": {"summary": summary, "parameters": params or [], "responses": responses}}


def _post(summary: str, ok: type[BaseModel]) -> dict[str, Any]:
    responses = {"200": {"description": "OK", **_json(ok)}, **ERRORS}
    return {"post": {"summary": summary, "requestBody": {"required": False, **_json(schemas.QueryRequest)},
                     "responses": responses}}


def openapi_document() -> dict[str, Any]:
    components: dict[str, Any] = {}
    for model in MODELS:
        schema = model.model_json_schema(ref_template=REF, by_alias=False)  # serve speaks snake_case
        for name, sub in schema.pop("$defs", {}).items():
            components[name] = sub
        components[model.__name__] = schema
    read_ok = {"oneOf": [_ref(schemas.WikiPage), _ref(schemas.ReadNotFound),
                         {"type": "object", "description": "Projected or clipped WikiPage "
                          "(?fields=, ?max_chars=), or a focused read (?query=, ?sections=)"}]}
    return {
        "openapi": "3.1.0",
        "info": {"title": "llmwiki-serve", "version": __version__,
                 "description": "Read-only Knowledge Source over a Markdown knowledge folder."},
        "paths": {
            path_of("health"): _get("Readiness and discovery", schemas.HealthResponse),
            path_of("manifest"): _get("Wiki manifest (root redacted)", schemas.WikiManifest),
            path_of("source_refs"): _get("Typed source-reference handles",
                                         schemas.SourceRefsResponse, [DRAFTS]),
            path_of("source_bundle"): _get("Bundle identity, capabilities and source refs",
                                           schemas.SourceBundleManifest, [DRAFTS]),
            path_of("query"): _post("Context pack for a question", schemas.ContextPack),
            path_of("search"): _post("Ranked search results", schemas.SearchResponse),
            path_of("read"): _get(
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
                {"404": {"description": "No such page", **_json(schemas.HttpDetailResponse)}}),
            path_of("graph"): _get("The link graph (truncated)", schemas.GraphResponse,
                                   [_query("limit", {"type": "integer"},
                                           f"Clamped to {GRAPH_LIMIT.span}."), DRAFTS]),
            path_of("graph_neighborhood"): _get(
                "A bounded neighbourhood around seed nodes", schemas.GraphNeighborhoodResponse,
                [_query("seed", {"type": "array", "items": {"type": "string"}}),
                 _query("depth", {"type": "integer", "default": 1},
                        f"Clamped to {NEIGHBORHOOD_DEPTH.span}."),
                 _query("direction", {"enum": list(get_args(schemas.Direction)), "default": "both"}),
                 _query("relation", {"type": "array", "items": {"type": "string"}}),
                 _query("limit", {"type": "integer", "default": 50},
                        f"Clamped to {NEIGHBORHOOD_LIMIT.span}."),
                 DRAFTS]),
            path_of("projection_store"): _get("Projection cache diagnostics",
                                              schemas.ProjectionStoreDiagnostics),
        },
        "components": {"schemas": components},
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
