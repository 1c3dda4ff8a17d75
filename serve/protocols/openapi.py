"""The OpenAPI document for serve's HTTP surface, built from the wire models."""

from __future__ import annotations

import html
from typing import Any

from pydantic import BaseModel

from common import schemas
from common.version import __version__

MODELS: tuple[type[BaseModel], ...] = (
    schemas.HealthResponse,
    schemas.WikiManifest,
    schemas.SourceRefsResponse,
    schemas.SourceBundleManifest,
    schemas.WikiPage,
    schemas.ReadNotFound,
    schemas.GraphResponse,
    schemas.GraphNeighborhoodResponse,
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


def openapi_document() -> dict[str, Any]:
    components: dict[str, Any] = {}
    for model in MODELS:
        schema = model.model_json_schema(ref_template=REF)
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
            "/health": _get("Readiness and discovery", schemas.HealthResponse),
            "/manifest": _get("Wiki manifest (root redacted)", schemas.WikiManifest),
            "/source-refs": _get("Typed source-reference handles", schemas.SourceRefsResponse,
                                 [DRAFTS]),
            "/source-bundle": _get("Bundle identity, capabilities and source refs",
                                   schemas.SourceBundleManifest, [DRAFTS]),
            "/read/{page_id}": _get(
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
                        "Text budget, clamped to 200..1000000 (focused reads default to 8000)."),
                 _query("include_links", {"type": "boolean"},
                        "false drops links from a plain read; true adds them to a focused one.")],
                {"404": {"description": "No such page", **_json(schemas.HttpDetailResponse)}}),
            "/graph": _get("The link graph (truncated)", schemas.GraphResponse,
                           [_query("limit", {"type": "integer"}, "Clamped to 1..2000."), DRAFTS]),
            "/graph/neighborhood": _get(
                "A bounded neighbourhood around seed nodes", schemas.GraphNeighborhoodResponse,
                [_query("seed", {"type": "array", "items": {"type": "string"}}),
                 _query("depth", {"type": "integer", "default": 1}, "Clamped to 0..4."),
                 _query("direction", {"enum": ["out", "in", "both"], "default": "both"}),
                 _query("relation", {"type": "array", "items": {"type": "string"}}),
                 _query("limit", {"type": "integer", "default": 50}, "Clamped to 1..500."),
                 DRAFTS]),
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
