"""Building blocks of both services' OpenAPI documents: components from the wire models, references
to them, and the JSON-RPC envelopes (MCP and A2A JSON-RPC) described as models too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

JsonObject = dict[str, Any]
REF = "#/components/schemas/{model}"
METRICS_OPERATION: JsonObject = {"get": {
    "summary": "Prometheus metrics (only when the service runs with --metrics)",
    "responses": {"200": {"description": "Prometheus text exposition format (OpenMetrics when the "
                                         "Accept header asks for it)",
                          "content": {"text/plain": {"schema": {"type": "string"}}}}}}}


class JsonRpcRequest(BaseModel):
    """One JSON-RPC 2.0 request or notification (batches are refused)."""

    model_config = ConfigDict(extra="allow")

    jsonrpc: str = Field(description='Always "2.0".')
    id: str | int | None = Field(default=None, description="Absent for a notification.")
    method: str
    params: JsonObject | None = None


class JsonRpcError(BaseModel):
    code: int
    message: str
    data: Any = None


class JsonRpcResponse(BaseModel):
    """The answer to one JSON-RPC request: a result or an error."""

    jsonrpc: str = "2.0"
    id: str | int | None = None
    result: Any = None
    error: JsonRpcError | None = None


def ref(model: type[BaseModel]) -> JsonObject:
    return {"$ref": REF.format(model=model.__name__)}


def json_body(schema: type[BaseModel] | Mapping[str, Any]) -> JsonObject:
    """An OpenAPI `content` of JSON, `schema` a model (referenced) or a schema as is."""
    return {"content": {"application/json": {"schema": ref(schema) if isinstance(schema, type)
                                             else dict(schema)}}}


def components(models: Iterable[type[BaseModel]], *, by_alias: bool) -> JsonObject:
    """Each model's JSON schema, and the schemas it refers to, by name (`by_alias`: as the wire
    spells field names; serve speaks snake_case, the bridge camelCase)."""
    found: JsonObject = {}
    for model in models:
        schema = model.model_json_schema(ref_template=REF, by_alias=by_alias)
        found.update(schema.pop("$defs", {}))
        found[model.__name__] = schema
    return found


def operations(document: Mapping[str, Any]) -> set[tuple[str, str]]:
    """Every (METHOD, path) a document describes."""
    return {(method.upper(), path) for path, item in document["paths"].items() for method in item}
