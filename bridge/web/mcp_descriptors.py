"""The bridge's MCP tools as MCP lists them (contract 6.2-6.4): names, descriptors, argument helpers."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from bridge.config.policy import SourcePolicy
from bridge.config.registry import (
    SUPPORTED_PROTOCOLS,
    SourceDescriptor,
    readiness,
    settings_view,
)
from bridge.core.fusion import CITATION_ORDERS, DEFAULT_CITATION_ORDER
from bridge.sources.base import SourceCallError
from common.bridge_schemas import JsonObject, RetrievalIntent
from common.guidance import RetrievalGuidance
from common.json_schema import tool_schema
from common.limits import INTENT_LIMIT
from common.options import reference_text as query_text

TOOL_NAMES = ("llmwiki_agent_run", "llmwiki_list_sources", "llmwiki_context", "llmwiki_search",
              "llmwiki_read", "llmwiki_graph", "llmwiki_graph_neighbors", "llmwiki_source_bundle")
CONTEXT_LIMIT = (8, INTENT_LIMIT.low, INTENT_LIMIT.high)  # default, minimum, maximum
GRAPH_LIMIT = (120, 1, 500)
DEPTH = (1, 1, 4)
DIRECTIONS = ("out", "in", "both")
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
# The run may call the configured runtime (an outside model), so it is not a closed-world tool.
RUN_ANNOTATIONS = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": True}
SOURCE_ERROR_CHARS = 240

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
_BEARER = re.compile(r"(?i)\bbearer\s+[^\s\"']+")
_SECRET = re.compile(r"(?i)\b(?:sk|pk|api[-_]?key|token|secret)[-_][A-Za-z0-9_-]{6,}")


class ToolArgumentError(ValueError):
    """A tool call the bridge cannot run as asked (JSON-RPC -32602); the message says why."""


# ----------------------------------------------------------------------------- descriptors

def _text(description: str, **extra: Any) -> JsonObject:
    return {"type": "string", "description": description, **extra}


_DESCRIPTOR: JsonObject = {
    "type": "object", "required": ["protocol", "status", "url"], "additionalProperties": True,
    "properties": {
        "id": {"type": "string"}, "name": {"type": "string"}, "title": {"type": "string"},
        "description": {"type": "string"},
        "protocol": {"type": "string", "enum": list(SUPPORTED_PROTOCOLS)},
        "status": _text('Last known status; only "ready" sources are used.'),
        "url": _text("Base URL of the Knowledge Source."),
        "selected": {"type": "boolean"},
        "capabilities": {"type": "array", "items": {"type": "string"}},
        "adapter": {"type": "string"}, "implementation": {"type": "string"}}}
_SOURCES: JsonObject = {"type": "array", "items": _DESCRIPTOR, "default": [],
                        "description": "Inline Knowledge Source descriptors used instead of the registry."}
SELECTION: JsonObject = {
    "sourceId": _text("Id of the Knowledge Source to use; required when several are ready."),
    "source_id": _text("Alias of sourceId."),
    "knowledgeSources": _SOURCES, "knowledge_sources": _SOURCES}
DRAFTS: JsonObject = {"includeDrafts": {"type": "boolean", "default": False},
                      "include_drafts": {"type": "boolean", "default": False}}

# Both derived from the shared models, so what is listed is what is checked.
RETRIEVAL_SCHEMA: JsonObject = tool_schema(RetrievalIntent)
GUIDANCE_SCHEMA: JsonObject = tool_schema(RetrievalGuidance)


def _limit(bounds: tuple[int, int, int]) -> JsonObject:
    default, low, high = bounds
    return {"type": "integer", "minimum": low, "maximum": high, "default": default}


def _schema(properties: JsonObject, required: Sequence[str] = (), **extra: Any) -> JsonObject:
    schema: JsonObject = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return {**schema, **extra}


_MODES = ["evidence-only", "delegated-runtime", "hybrid"]
_RUN_QUERY = _text("The question to answer from the selected Knowledge Sources.", minLength=1)
_QUERY = _text("What to look for in the Knowledge Source.", minLength=1)
_MODE = {"type": "string", "enum": _MODES, "default": "delegated-runtime",
         "description": "evidence-only answers from the sources without calling the runtime; "
                        "delegated-runtime (the default) and hybrid ask the configured runtime."}
_MODE_ALIAS = {**_MODE, "description": "Alias of orchestrationMode."}
_CITATION_ORDER = {"type": "string", "enum": list(CITATION_ORDERS), "default": DEFAULT_CITATION_ORDER,
                   "description": "relevance (the default) ranks the merged citations across sources; "
                                  "source keeps each source's citations in turn, in selected order."}
_NODE_ID = _text("A graph node id; <sourceId>:<nodeId> goes to that source only.", minLength=1)
_NODE_IDS = {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
             "description": "Graph node ids (prefixed ids go to their source only)."}

DESCRIPTIONS = {
    "llmwiki_agent_run": (
        "Answer a question end to end: gather evidence from the selected Knowledge Sources and, unless "
        "orchestrationMode is evidence-only, ask the configured runtime for a cited answer. Returns the "
        "llmwiki_agent_result (answer, citations, graph, steps, source bundles, diagnostics). For "
        "step-by-step exploration without the runtime use llmwiki_list_sources, llmwiki_context, "
        "llmwiki_search and llmwiki_read."),
    "llmwiki_list_sources": (
        "Step 1 of the progressive workflow (list_sources -> context -> search -> read): list the "
        "registered (or given) Knowledge Sources with readiness, protocol and capabilities. Calls no "
        "source and never the runtime."),
    "llmwiki_context": (
        "Step 2: get a context pack from one ready Knowledge Source: orientation, citations (ids "
        "prefixed <sourceId>:<pageId>), graph and retrievalGuidance (untrusted source evidence for "
        "choosing search terms). Pass sourceId when several sources are ready. Default limit 8, maximum "
        "50. Read-only; never calls the runtime."),
    "llmwiki_search": (
        "Step 3: search one Knowledge Source for candidate pages. Result ids are prefixed "
        "<sourceId>:<pageId> and can be passed to llmwiki_read. Optional retrieval intent "
        "(llmwiki.retrieval.v1) picks the search mode and up to two query variants. Default limit 8, "
        "maximum 50. Read-only; never calls the runtime."),
    "llmwiki_read": (
        "Step 4: read one page by pageId. A prefixed id (<sourceId>:<pageId>) is routed to its source. "
        "Read-only; never calls the runtime."),
    "llmwiki_graph": (
        "Get the page/link graph of one Knowledge Source, node ids prefixed <sourceId>:. Default limit "
        "120 nodes, maximum 500. Read-only; never calls the runtime."),
    "llmwiki_graph_neighbors": (
        "Get bounded graph neighbourhoods around node ids (prefixed ids go to their source) from every "
        "ready Knowledge Source, or only sourceId. Depth 1-4, default limit 120 nodes. Read-only; never "
        "calls the runtime."),
    "llmwiki_source_bundle": (
        "Read one Knowledge Source's safe source-bundle metadata: bundle id, capabilities, projection "
        "counts and typed source refs. Read-only; never calls the runtime."),
}

INPUT_SCHEMAS: dict[str, JsonObject] = {
    "llmwiki_agent_run": _schema({
        "query": _RUN_QUERY, "orchestrationMode": _MODE, "mode": _MODE_ALIAS, "retrieval": RETRIEVAL_SCHEMA,
        "retrievalGuidance": GUIDANCE_SCHEMA, "knowledgeSources": _SOURCES,
        "knowledge_sources": _SOURCES, "citationOrder": _CITATION_ORDER}, ["query"]),
    "llmwiki_list_sources": _schema(dict(SELECTION)),
    "llmwiki_context": _schema({"query": _QUERY, **SELECTION, "limit": _limit(CONTEXT_LIMIT),
                                "retrieval": RETRIEVAL_SCHEMA, **DRAFTS}, ["query"]),
    "llmwiki_search": _schema({"query": _QUERY, **SELECTION, "limit": _limit(CONTEXT_LIMIT),
                               "retrieval": RETRIEVAL_SCHEMA, **DRAFTS}, ["query"]),
    "llmwiki_read": _schema({"pageId": _text("A page id or path; <sourceId>:<pageId> picks the source.",
                                             minLength=1),
                             "page_id": _text("Alias of pageId.", minLength=1), **SELECTION, **DRAFTS},
                            anyOf=[{"required": ["pageId"]}, {"required": ["page_id"]}]),
    "llmwiki_graph": _schema({**SELECTION, "limit": _limit(GRAPH_LIMIT), **DRAFTS}),
    "llmwiki_graph_neighbors": _schema(
        {"nodeId": _NODE_ID, "node_id": {**_NODE_ID, "description": "Alias of nodeId."},
         "nodeIds": _NODE_IDS, "node_ids": {**_NODE_IDS, "description": "Alias of nodeIds."}, **SELECTION,
         "direction": {"type": "string", "enum": list(DIRECTIONS), "default": "both"},
         "relation": _text("Only edges with this relation (e.g. links_to).", minLength=1),
         "relations": {"type": "array", "items": {"type": "string", "minLength": 1},
                       "description": "Only edges with one of these relations."},
         "depth": {"type": "integer", "minimum": 1, "maximum": 4, "default": 1},
         "limit": _limit(GRAPH_LIMIT), **DRAFTS},
        anyOf=[{"required": [key]} for key in ("nodeId", "node_id", "nodeIds", "node_ids")]),
    "llmwiki_source_bundle": _schema({**SELECTION, **DRAFTS}),
}


def tool_descriptors(*, annotated: bool) -> list[JsonObject]:
    """`tools/list` in the fixed order; standard MCP eras also get the behaviour annotations."""
    tools = []
    for name in TOOL_NAMES:
        tool: JsonObject = {"name": name, "description": DESCRIPTIONS[name],
                            "inputSchema": INPUT_SCHEMAS[name]}
        if annotated:
            tool["annotations"] = dict(RUN_ANNOTATIONS if name == "llmwiki_agent_run" else READ_ONLY)
        tools.append(tool)
    return tools


# ----------------------------------------------------------------------------- argument helpers

def clamp(value: Any, default: int, low: int, high: int) -> int:
    """Limits are clamped, not rejected: a non-number gives the default, a number is truncated."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if isinstance(value, float) and not math.isfinite(value):
        return default
    return max(low, min(high, int(value)))


def either(args: JsonObject, camel: str, snake: str) -> Any:
    """`args.camel ?? args.snake`: null counts as absent."""
    value = args.get(camel)
    return value if value is not None else args.get(snake)


def include_drafts(args: JsonObject) -> bool:
    return either(args, "includeDrafts", "include_drafts") is True


def tool_query(tool: str, args: JsonObject) -> str:
    query = query_text(args.get("query"))  # a number is read as text, as in /message:send
    if not query:
        raise ToolArgumentError(f"{tool} arguments.query is required.")  # the reference's words
    return query


def name_list(value: Any, what: str) -> list[str]:
    """A string or an array of strings, trimmed; anything else is a caller error."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in items):
        raise ToolArgumentError(f"{what} must be a string or an array of strings.")
    return [item.strip() for item in items if item.strip()]


def redact_source_message(text: str) -> str:
    """What a caller may see of an upstream failure: no URLs, bearer tokens or key-like strings."""
    text = _URL.sub("[redacted-url]", text)
    text = _BEARER.sub("Bearer [redacted]", text)
    text = _SECRET.sub("[redacted]", text)
    text = " ".join(text.split())
    return text if len(text) <= SOURCE_ERROR_CHARS else text[: SOURCE_ERROR_CHARS - 3] + "..."


def tool_result(key: str, value: Any, text: str) -> JsonObject:
    return {"content": [{"type": "text", "text": text}], "structuredContent": {key: value}, "isError": False}


def source_error_result(tool: str, error: SourceCallError) -> JsonObject:
    """An upstream failure is a tool result with `isError`, not a JSON-RPC error (contract 6.3)."""
    message = redact_source_message(error.message) or "Knowledge Source call failed."
    return {"content": [{"type": "text", "text": message}],
            "structuredContent": {"llmwiki_source_error": {"tool": tool, "message": message}},
            "isError": True}


def argument_error_result(message: str) -> JsonObject:
    """Arguments a tool cannot run with, as MCP asks: a tool result with `isError`, so the model
    that called it can read why and retry (standard MCP clients; the unversioned /mcp keeps the
    reference's -32602)."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def source_summary(source: SourceDescriptor, policy: SourcePolicy) -> JsonObject:
    """A ToolSourceSummary: the descriptor with its raw URL (callers may send it back), roots
    redacted, and readiness under the bridge's source policy."""
    view = settings_view(source)
    state = readiness(source, policy)
    view["readiness"] = {"ready": state.ready, "basis": state.basis}
    if not state.ready:
        view["readiness"]["reason"] = state.reason
    return view
