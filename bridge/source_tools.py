"""The bridge's MCP tools: `llmwiki_agent_run` and the read-only source tools (contract 6.2-6.4)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from bridge import artifact
from bridge.guidance import GuidanceError, guidance_diagnostic, map_guidance
from bridge.policy import SourcePolicy
from bridge.registry import (
    SUPPORTED_PROTOCOLS,
    SourceDescriptor,
    normalize_inline,
    readiness,
    registry_warnings,
    settings_view,
)
from bridge.retrieval import IntentError, parse_intent, plan_for, unsupported_message
from bridge.service import BridgeService
from bridge.sources.client import SourceClient, UnsupportedOperation, client_for
from bridge.sources.transport import SourceCallError
from common.bridge_schemas import Diagnostic, JsonObject, RetrievalIntent, TraceStep
from common.errors import CodedError
from common.guidance import RetrievalGuidance
from common.json_schema import tool_schema
from common.options import reference_text as query_text

TOOL_NAMES = ("llmwiki_agent_run", "llmwiki_list_sources", "llmwiki_context", "llmwiki_search",
              "llmwiki_read", "llmwiki_graph", "llmwiki_graph_neighbors", "llmwiki_source_bundle")
# Which source protocols each source tool can use (contract 6.3); list_sources calls no source.
TOOL_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "llmwiki_context": ("llmwiki-http", "mcp", "a2a"),
    "llmwiki_search": ("llmwiki-http", "mcp"), "llmwiki_read": ("llmwiki-http", "mcp"),
    "llmwiki_graph": ("llmwiki-http", "mcp"), "llmwiki_graph_neighbors": ("llmwiki-http", "mcp"),
    "llmwiki_source_bundle": ("llmwiki-http", "mcp")}
CONTEXT_LIMIT = (8, 1, 50)  # default, minimum, maximum
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
        "knowledge_sources": _SOURCES}, ["query"]),
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


def _either(args: JsonObject, camel: str, snake: str) -> Any:
    """`args.camel ?? args.snake`: null counts as absent."""
    value = args.get(camel)
    return value if value is not None else args.get(snake)


def _include_drafts(args: JsonObject) -> bool:
    return _either(args, "includeDrafts", "include_drafts") is True


def _query(tool: str, args: JsonObject) -> str:
    query = query_text(args.get("query"))  # a number is read as text, as in /message:send
    if not query:
        raise ToolArgumentError(f"{tool} arguments.query is required.")  # the reference's words
    return query


def _names(value: Any, what: str) -> list[str]:
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


def source_summary(source: SourceDescriptor, policy: SourcePolicy) -> JsonObject:
    """A ToolSourceSummary: the descriptor with its raw URL (callers may send it back), roots
    redacted, and readiness under the bridge's source policy."""
    view = settings_view(source)
    state = readiness(source, policy)
    view["readiness"] = {"ready": state.ready, "basis": state.basis}
    if not state.ready:
        view["readiness"]["reason"] = state.reason
    return view


def _label(source: SourceDescriptor) -> str:
    return artifact.safe_trace_text(source.label) or "Knowledge Source"


# ----------------------------------------------------------------------------- payload normalisation

def _first(raw: JsonObject, *keys: str) -> Any:
    return next((raw[k] for k in keys if raw.get(k) not in (None, "")), None)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _refs(item: JsonObject) -> list[str]:
    refs = _first(item, "sourceRefs", "source_refs")
    return [str(r) for r in refs if isinstance(r, (str, int))] if isinstance(refs, list) else []


def _prefixed(source_id: str, raw_id: str) -> str:
    return raw_id if raw_id.startswith(f"{source_id}:") else f"{source_id}:{raw_id}"


def context_value(payload: JsonObject, source: SourceDescriptor, query: str,
                  summary: JsonObject) -> tuple[JsonObject, Diagnostic | None]:
    """The `llmwiki_context` value (contract 3.11) and a note when the source's guidance was dropped."""
    metadata = artifact.as_object(payload.get("metadata"))

    def pick(*keys: str) -> Any:
        found = _first(payload, *keys)
        return found if found is not None else _first(metadata, *keys)

    orientation = []
    for item in artifact.as_list(payload.get("orientation")):
        if isinstance(item, dict):
            orientation.append({
                "id": _str(_first(item, "id", "page_id", "pageId")),
                "title": _str(item.get("title")) or "Untitled", "path": _str(item.get("path")),
                "snippet": artifact.markdown_readable(item.get("snippet")),
                "role": _str(item.get("role")), "sourceRefs": _refs(item)})
    graph = artifact.graph_from(payload, source.id)
    value: JsonObject = {
        "source": summary, "query": query,
        "wikiTitle": _str(_first(payload, "wiki_title", "wikiTitle", "title")) or source.name,
        "description": _str(pick("description")) or source.description,
        "adapter": _str(pick("adapter")) or source.adapter,
        "implementation": _str(pick("implementation")) or source.implementation}
    for key, names in (("pageCount", ("page_count", "pageCount")),
                       ("approvedPageCount", ("approved_page_count", "approvedPageCount"))):
        count = pick(*names)
        if isinstance(count, int) and not isinstance(count, bool):
            value[key] = count
    value["orientation"] = orientation
    value["citations"] = [c.wire() for c in artifact.citations_from(payload, source)]
    value["limitations"] = [s for s in artifact.as_list(payload.get("limitations")) if isinstance(s, str)]
    note: Diagnostic | None = None
    raw_guidance = payload.get("retrieval_guidance", payload.get("retrievalGuidance"))
    if raw_guidance is not None:
        try:  # a source may send either spelling; only the closed shape passes
            snake = "retrieval_guidance" in payload
            value["retrievalGuidance"] = map_guidance(raw_guidance, snake=snake,
                                                      where="retrieval_guidance" if snake else
                                                      "retrievalGuidance")
        except GuidanceError:
            note = guidance_diagnostic({"retrieval_guidance": raw_guidance}, False,
                                       artifact.safe_id(source.id), source.protocol)
    value["graph"] = graph.wire()
    return value, note


def search_results(payload: JsonObject, source: SourceDescriptor) -> list[JsonObject]:
    results = []
    items = payload.get("results") if isinstance(payload.get("results"), list) else payload.get("evidence")
    for index, item in enumerate(artifact.as_list(items)):
        if not isinstance(item, dict):
            continue
        raw_id = _str(_first(item, "page_id", "pageId", "id", "path")) or str(index + 1)
        page_id = raw_id.removeprefix(f"{source.id}:")
        result: JsonObject = {"id": _prefixed(source.id, raw_id), "pageId": page_id,
                              "title": _str(item.get("title")) or "Untitled", "path": _str(item.get("path")),
                              "snippet": artifact.markdown_readable(item.get("snippet"))}
        score = item.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            result["score"] = score
        result["sourceRefs"] = _refs(item)
        results.append(result)
    return results


# ----------------------------------------------------------------------------- the tools

class SourceTools:
    """Runs one bridge tool call. Bad input raises ToolArgumentError; an upstream failure is an
    `isError` result; a runtime failure of the run propagates as its HTTP error."""

    def __init__(self, service: BridgeService) -> None:
        self.service = service

    async def call(self, name: str, args: JsonObject, request_id: str, trace_id: str) -> JsonObject:
        if name == "llmwiki_agent_run":
            return await self.agent_run(args, request_id, trace_id)
        if name == "llmwiki_list_sources":
            return self.list_sources(args)
        try:
            if name in ("llmwiki_context", "llmwiki_search"):
                return await self.context_or_search(name, args)
            if name == "llmwiki_read":
                return await self.read(args)
            if name == "llmwiki_graph":
                return await self.graph(args)
            if name == "llmwiki_graph_neighbors":
                return await self.neighbors(args)
            return await self.source_bundle(args)
        except UnsupportedOperation as exc:  # this bridge build lacks the operation: a caller error
            raise ToolArgumentError(exc.message) from None
        except SourceCallError as exc:
            return source_error_result(name, exc)

    # -------------------------------------------------------------- selection

    def _listed(self, args: JsonObject) -> list[SourceDescriptor]:
        """`knowledgeSources ?? knowledge_sources ?? registered`."""
        inline = _either(args, "knowledgeSources", "knowledge_sources")
        if inline is None:
            return list(self.service.sources)
        if not isinstance(inline, list):
            raise ToolArgumentError("knowledgeSources must be an array of Knowledge Source descriptors.")
        return normalize_inline(inline)

    def candidates(self, args: JsonObject) -> list[SourceDescriptor]:
        """Selected, last-known ready sources; the policy is checked when a source is called."""
        return [s for s in self._listed(args) if readiness(s).ready]

    @staticmethod
    def _source_id(args: JsonObject) -> str | None:
        value = _either(args, "sourceId", "source_id")
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ToolArgumentError("sourceId must be a non-empty string.")
        return value.strip()

    def resolve(self, tool: str, args: JsonObject, candidates: Sequence[SourceDescriptor]
                ) -> SourceDescriptor:
        source_id = self._source_id(args)
        if source_id is not None:
            match = next((c for c in candidates if c.id == source_id), None)
            if match is None:
                raise ToolArgumentError(
                    f"No ready selected Knowledge Source found for sourceId: {source_id}.")
            source = match
        elif not candidates:
            raise ToolArgumentError("No ready selected Knowledge Source is available.")
        elif len(candidates) > 1:
            raise ToolArgumentError(
                f"{tool} requires sourceId when more than one ready Knowledge Source is available.")
        else:
            source = candidates[0]
        self._check_protocol(tool, source)
        return source

    @staticmethod
    def _check_protocol(tool: str, source: SourceDescriptor) -> None:
        if source.protocol not in TOOL_PROTOCOLS[tool]:
            raise ToolArgumentError(f"{tool} does not support {source.protocol} Knowledge Sources.")

    def summary(self, source: SourceDescriptor) -> JsonObject:
        return source_summary(source, self.service.source_policy)

    def _client(self, source: SourceDescriptor) -> SourceClient:
        return client_for(self.service.transport(), source)

    @staticmethod
    def _owner(item_id: str, candidates: Sequence[SourceDescriptor]) -> SourceDescriptor | None:
        """The candidate whose `<id>:` prefixes the id; the longest id wins."""
        owners = [c for c in candidates if item_id.startswith(f"{c.id}:")]
        return max(owners, key=lambda c: len(c.id)) if owners else None

    # -------------------------------------------------------------- the run

    async def agent_run(self, args: JsonObject, request_id: str, trace_id: str) -> JsonObject:
        """The arguments are the `/message:send` body; caller errors become -32602, runtime failures
        (5xx) propagate and are answered with the HTTP error body."""
        envelope = args if isinstance(args.get("data"), dict) else {"data": args}
        try:
            task = await self.service.run(envelope, request_id, trace_id)
        except CodedError as exc:
            if exc.status < 500:
                raise ToolArgumentError(exc.message) from None
            raise
        result: JsonObject = {}
        for item in artifact.as_list(task.get("artifacts")):
            if isinstance(item, dict) and item.get("name") == artifact.ARTIFACT_NAME:
                parts = artifact.as_list(item.get("parts"))
                first = artifact.as_object(parts[0]) if parts else {}
                result = artifact.as_object(first.get("data"))
        return tool_result("llmwiki_agent_result", result, _str(result.get("answer")))

    # -------------------------------------------------------------- source tools

    def list_sources(self, args: JsonObject) -> JsonObject:
        sources = self._listed(args)
        policy = self.service.source_policy
        summaries = [self.summary(s) for s in sources]
        ready = sum(1 for s in sources if readiness(s, policy).ready)
        warnings = registry_warnings(sources)
        value = {"sources": summaries, "totalSourceCount": len(sources),
                 "selectedSourceCount": sum(1 for s in sources if s.selected),
                 "readySourceCount": ready, "unavailableSourceCount": len(sources) - ready,
                 "warningCount": len(warnings), "warnings": warnings}
        if not sources:
            return tool_result("llmwiki_sources", value, "No Knowledge Sources are registered.")
        lines = [f"Registered Knowledge Sources: {len(sources)}."]
        for source, summary in zip(sources, summaries, strict=True):
            state = summary["readiness"]
            status = "ready" if state["ready"] else f"unavailable: {state['reason']}"
            selected = "" if source.selected else ", not selected"
            lines.append(f"- {source.id}: {_label(source)} ({source.protocol}, {source.status}, "
                         f"{status}{selected})")
        return tool_result("llmwiki_sources", value, "\n".join(lines))

    async def _retrieval(self, args: JsonObject, query: str, source: SourceDescriptor,
                         candidates: Sequence[SourceDescriptor], client: SourceClient
                         ) -> tuple[JsonObject, list[Diagnostic], set[str]]:
        """The forwarded retrieval fields, fallback diagnostics, and the capabilities that decided them."""
        if "retrieval" not in args:
            return {}, [], set()
        try:
            intent = parse_intent(args["retrieval"], query)
        except IntentError as exc:
            raise ToolArgumentError(f"Invalid retrieval intent: {exc}") from None
        ids = [c.id for c in candidates]
        excluded = intent.search.exclude_page_ids if intent.search is not None else None
        for page_id in excluded or []:
            if ":" in page_id and self._owner(page_id, candidates) is None:
                raise ToolArgumentError("Invalid retrieval intent: retrieval.search.excludePageIds contains "
                                        "a source-prefixed page id for an unselected source.")
        capabilities: tuple[str, ...] = source.capabilities
        basis = "descriptor" if capabilities else "none"
        if source.protocol in ("llmwiki-http", "mcp"):
            try:
                read = await client.bundle()
            except SourceCallError:
                read = None
            if read is not None and read.raw is not None:  # fresh capabilities win over the descriptor
                capabilities, basis = artifact.bundle_capabilities(read.raw), "fresh"
        plan = plan_for(intent, capabilities, basis, source.id, ids, source.protocol)
        if intent.fallback == "none" and (not plan.mode_supported or plan.diagnostic is not None):
            label = [f"{source.id} ({source.protocol})"]
            raise ToolArgumentError(unsupported_message(intent, [] if plan.mode_supported else label,
                                                        label if plan.mode_supported else []))
        notes = [plan.diagnostic] if plan.diagnostic is not None else []
        return dict(plan.fields), notes, set(capabilities)

    async def context_or_search(self, tool: str, args: JsonObject) -> JsonObject:
        query = _query(tool, args)
        candidates = self.candidates(args)
        source = self.resolve(tool, args, candidates)
        client = self._client(source)
        body: JsonObject = {"query": query, "limit": clamp(args.get("limit"), *CONTEXT_LIMIT),
                            "include_drafts": _include_drafts(args)}
        fields, notes, capabilities = await self._retrieval(args, query, source, candidates, client)
        body.update(fields)
        summary = self.summary(source)
        label = _label(source)
        if tool == "llmwiki_search":
            results = search_results(await client.search(body), source)
            value: JsonObject = {"source": summary, "query": query, "results": results}
            if notes:
                value["diagnostics"] = [d.wire() for d in notes]
            return tool_result(tool, value, f'Search {label}: {len(results)} result(s) for "{query}".')
        payload = await client.context(body)
        value, guidance_note = context_value(payload, source, query, summary)
        if guidance_note is None and "retrievalGuidance" not in value:
            advertised = capabilities | set(source.capabilities) | set(artifact.bundle_capabilities(payload))
            guidance_note = guidance_diagnostic(payload, "llmwiki_agent_guided_lexical_v1" in advertised,
                                                artifact.safe_id(source.id), source.protocol)
        if guidance_note is not None:
            notes.append(guidance_note)
        if notes:
            value["diagnostics"] = [d.wire() for d in notes]
        graph = value["graph"]
        text = (f"Context from {label}: {len(value['citations'])} citation(s), "
                f"{len(value['orientation'])} orientation item(s).\n"
                f"Graph: {len(graph['nodes'])} node(s), {len(graph['edges'])} edge(s).")
        return tool_result(tool, value, text)

    async def read(self, args: JsonObject) -> JsonObject:
        tool = "llmwiki_read"
        given = query_text(_either(args, "pageId", "page_id"))  # `7` is page "7", as the reference reads it
        if not given:
            raise ToolArgumentError("llmwiki_read arguments.pageId is required.")
        candidates = self.candidates(args)
        owner = self._owner(given, candidates)
        source_id = self._source_id(args)
        if owner is not None and source_id is not None and owner.id != source_id:
            raise ToolArgumentError(
                f"llmwiki_read pageId source prefix {owner.id} does not match sourceId: {source_id}.")
        if owner is not None:
            self._check_protocol(tool, owner)
            source, page_id = owner, given[len(owner.id) + 1:]
        else:
            source, page_id = self.resolve(tool, args, candidates), given
        label = _label(source)
        try:
            page = await self._client(source).read(page_id, _include_drafts(args))
        except SourceCallError as exc:
            if exc.http_status != 404:
                raise
            page = {"found": False, "id": page_id}  # a missing page is an answer, not a source failure
        value = {"source": self.summary(source), "pageId": given, "page": page}
        title = _str(page.get("title")) or page_id
        state = "not found" if page.get("found") is False else "read"
        return tool_result(tool, value, f"Page {state} from {label}: {artifact.safe_trace_text(title)}.")

    async def graph(self, args: JsonObject) -> JsonObject:
        tool = "llmwiki_graph"
        source = self.resolve(tool, args, self.candidates(args))
        limit = clamp(args.get("limit"), *GRAPH_LIMIT)
        payload = await self._client(source).graph(limit, _include_drafts(args))
        graph = artifact.graph_from(payload, source.id)
        value = {"source": self.summary(source), "limit": limit, "graph": graph.wire()}
        text = f"Graph from {_label(source)}: {len(graph.nodes)} node(s), {len(graph.edges)} edge(s)."
        return tool_result(tool, value, text)

    async def neighbors(self, args: JsonObject) -> JsonObject:
        tool = "llmwiki_graph_neighbors"
        requested: list[str] = []
        for key in ("nodeId", "node_id", "nodeIds", "node_ids"):
            requested += _names(args.get(key), key)
        requested = list(dict.fromkeys(requested))
        if not requested:
            raise ToolArgumentError("llmwiki_graph_neighbors arguments.nodeId or nodeIds is required.")
        relations = list(dict.fromkeys(_names(args.get("relation"), "relation")
                                       + _names(args.get("relations"), "relations")))
        given_direction = args.get("direction")
        direction = (given_direction if isinstance(given_direction, str) and given_direction in DIRECTIONS
                     else "both")
        depth = clamp(args.get("depth"), *DEPTH)
        limit = clamp(args.get("limit"), *GRAPH_LIMIT)
        include = _include_drafts(args)
        candidates = self.candidates(args)
        if self._source_id(args) is not None:
            targets = [self.resolve(tool, args, candidates)]
        else:
            targets = [c for c in candidates if c.protocol in TOOL_PROTOCOLS[tool]]
            if not targets:
                raise ToolArgumentError("No ready selected Knowledge Source is available.")
        plan: list[tuple[SourceDescriptor, list[str]]] = []
        for source in targets:
            seeds = []
            for node_id in requested:
                owner = self._owner(node_id, candidates)
                if owner is None:
                    seeds.append(node_id)
                elif owner.id == source.id:
                    seeds.append(node_id[len(source.id) + 1:])
            if seeds:
                plan.append((source, list(dict.fromkeys(seeds))))
        if not plan:
            raise ToolArgumentError("No selected Knowledge Source matched the requested graph node ids.")
        neighborhoods: list[JsonObject] = []
        graphs = []
        citation_groups = []
        for source, seeds in plan:  # sequential on purpose: one neighbourhood at a time per contract
            payload = await self._client(source).neighbors(seeds, depth, direction, relations, limit, include)
            graph = artifact.graph_from(payload, source.id)
            citations = artifact.citations_from(payload, source)
            graphs.append(graph)
            citation_groups.append(citations)
            neighborhoods.append({
                "source": self.summary(source),
                "nodeIds": [_prefixed(source.id, s) for s in seeds], "depth": depth,
                "direction": direction, "relations": relations, "limit": limit, "graph": graph.wire(),
                "citations": [c.wire() for c in citations]})
        merged = artifact.merge_graphs(graphs)
        citations = artifact.dedupe_citations(citation_groups)
        value = {"sources": [n["source"] for n in neighborhoods], "nodeIds": requested, "depth": depth,
                 "direction": direction, "relations": relations, "limit": limit,
                 "neighborhoods": neighborhoods, "graph": merged.wire(),
                 "citations": [c.wire() for c in citations]}
        text = (f"Graph neighborhoods from {len(plan)} source(s): {len(merged.nodes)} node(s), "
                f"{len(merged.edges)} edge(s), {len(citations)} citation(s).")
        return tool_result(tool, value, text)

    async def source_bundle(self, args: JsonObject) -> JsonObject:
        tool = "llmwiki_source_bundle"
        source = self.resolve(tool, args, self.candidates(args))
        label = _label(source)
        read = await self._client(source).bundle()
        steps: list[TraceStep] = []
        diagnostics: list[Diagnostic] = []
        bundle = None
        if read.attempted:
            bundle_step = artifact.step(f"source-manifest-{artifact.safe_id(source.id)}",
                                        f"Read {label} source bundle", "done",
                                        parent_id="mcp-source-bundle", connection_id=source.id)
            if read.raw is not None:
                bundle = artifact.source_bundle(read.raw, source)
                bundle_step.detail = ("Read safe manifest metadata." if read.endpoint == "manifest" else
                                      "Read safe MCP source bundle metadata." if source.protocol == "mcp"
                                      else "Read safe source bundle metadata.")
            else:
                settings = self.service.settings
                diagnostic = artifact.source_diagnostic(
                    source, read.error or SourceCallError("Source bundle unavailable."), "source-bundle",
                    source_policy=settings.source_policy, timeout_ms=settings.request_timeout_ms)
                bundle_step.status = "error"
                bundle_step.error = "Source bundle unavailable."
                bundle_step.detail = (f"{label} source bundle metadata could not be read; "
                                      "continuing without it.")
                bundle_step.diagnostic = diagnostic
                diagnostics.append(diagnostic)
            steps.append(bundle_step)
        value = {"source": self.summary(source),
                 "sourceBundle": bundle.wire() if bundle is not None else None,
                 "steps": [s.wire() for s in steps], "diagnostics": [d.wire() for d in diagnostics]}
        if bundle is None:
            return tool_result(tool, value, f"No source bundle metadata was available from {label}.")
        name = artifact.safe_trace_text(bundle.title or bundle.bundle_id or bundle.source_id)
        return tool_result(tool, value, f"Source bundle from {label}: {name}.")
