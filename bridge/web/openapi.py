"""The bridge's OpenAPI document (`GET /openapi.json`), from the wire models: one operation for each
route the app answers (the tests compare it with the router)."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel

from bridge.core.fusion import CITATION_ORDERS
from bridge.core.request import MODES
from bridge.support.routes import ROUTES
from bridge.web.requests import service_of
from common import bridge_schemas, schemas
from common.errors import json_response
from common.metrics import METRICS_PATH
from common.openapi import METRICS_OPERATION, JsonRpcRequest, JsonRpcResponse, components, json_body, ref
from common.version import __version__

MODELS: tuple[type[BaseModel], ...] = (
    schemas.ErrorBody,
    bridge_schemas.RetrievalIntent,
    bridge_schemas.Citation,
    bridge_schemas.TraceStep,
    bridge_schemas.Diagnostic,
    bridge_schemas.SourceBundle,
    JsonRpcRequest,
    JsonRpcResponse,
)
Operation = dict[str, Any]
OBJECT = {"type": "object"}
PROBE = {"name": "probe", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "Present (empty or a true word): check live, not from the last probe."}
# Every route may answer these (the pipeline's checks, in order).
CHECKS = {
    "401": {"description": "Bearer token required (when one is configured)", **json_body(schemas.ErrorBody)},
    "403": {"description": "Origin not allowed", **json_body(schemas.ErrorBody)},
    "413": {"description": "Body too large", **json_body(schemas.ErrorBody)},
    "421": {"description": "Host not allowed", **json_body(schemas.ErrorBody)},
}
MESSAGE_SEND = {
    "type": "object",
    "description": "A legacy {data: {...}} body, {text}, {message: {parts}} or an A2A 1.0 "
                   "SendMessageRequest; the data part's keys are the ones below.",
    "properties": {"data": {"type": "object", "properties": {
        "query": {"type": "string"},
        "knowledgeSources": {"type": "array", "items": OBJECT,
                             "description": "Inline sources, or ids of registered ones"},
        "orchestrationMode": {"enum": list(MODES)},
        "citationOrder": {"enum": list(CITATION_ORDERS), "description": "relevance (default): merged "
                          "across sources; source: each source's citations in turn (the reference)"},
        "retrieval": ref(bridge_schemas.RetrievalIntent),
        "messages": {"type": "array", "items": OBJECT},
        "threadId": {"type": "string"}, "sessionId": {"type": "string"}, "turnId": {"type": "string"},
    }}, "message": OBJECT},
}
ARTIFACT = {
    "type": "object",
    "description": "The completed run: one llmwiki_agent_result artifact (answer, citations, trace, "
                   "diagnostics, source bundles), or {task: Task} for an A2A 1.0 request.",
    "properties": {"citations": {"type": "array", "items": ref(bridge_schemas.Citation)},
                   "trace": {"type": "array", "items": ref(bridge_schemas.TraceStep)},
                   "diagnostics": {"type": "array", "items": ref(bridge_schemas.Diagnostic)},
                   "sourceBundles": {"type": "array", "items": ref(bridge_schemas.SourceBundle)}},
}


def _op(summary: str, ok: dict[str, Any] | type[BaseModel] = OBJECT, *,
        body: dict[str, Any] | type[BaseModel] | None = None,
        params: list[dict[str, Any]] | None = None, content_type: str = "application/json") -> Operation:
    ok_content = (json_body(ok) if content_type == "application/json"
                  else {"content": {content_type: {"schema": {"type": "string"}}}})
    operation: Operation = {"summary": summary, "parameters": params or [],
                            "responses": {"200": {"description": "OK", **ok_content}, **CHECKS}}
    if body is not None:
        operation["requestBody"] = {"required": True, **json_body(body)}
        operation["responses"]["400"] = {"description": "Invalid body", **json_body(schemas.ErrorBody)}
    return operation


RPC: dict[str, Any] = {"ok": JsonRpcResponse, "body": JsonRpcRequest}
# What an operation says beyond its route table row's summary, by route name.
DETAILS: dict[str, dict[str, Any]] = {
    "health": {"params": [PROBE]},
    "sources": {"params": [PROBE]},
    "settings_page": {"content_type": "text/html"},
    "probe_source": {"body": OBJECT},
    "put_config": {"body": OBJECT},
    "put_sources_json": {"body": OBJECT},
    "message_send": {"ok": ARTIFACT, "body": MESSAGE_SEND},
    "a2a_jsonrpc": RPC,
    "a2a_jsonrpc_slash": RPC,
    "mcp": RPC,
}
OPERATIONS: dict[tuple[str, str], Operation] = {
    (route.method, route.path): _op(route.summary, **DETAILS.get(route.name, {})) for route in ROUTES}


def openapi_document(*, metrics: bool = False) -> dict[str, Any]:
    paths: dict[str, dict[str, Operation]] = {}
    for (method, path), operation in OPERATIONS.items():
        paths.setdefault(path, {})[method.lower()] = operation
    if metrics:
        paths[METRICS_PATH] = METRICS_OPERATION
    return {
        "openapi": "3.1.0",
        "info": {"title": "llmwiki-agent-bridge", "version": __version__,
                 "description": "Fans a question out to LLMWiki Knowledge Sources and returns one "
                                "llmwiki_agent_result artifact."},
        "paths": paths,
        "components": {"schemas": components(MODELS, by_alias=True)},  # the bridge speaks camelCase
    }


async def openapi(request: web.Request) -> web.Response:
    return json_response(openapi_document(metrics=service_of(request).settings.metrics))
