"""The bridge's MCP tool calls: `llmwiki_agent_run` and the read-only source tools (contract 6.3)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge.config.registry import (
    SourceDescriptor,
    normalize_inline,
    readiness,
    registry_warnings,
)
from bridge.core import artifact
from bridge.core.bundle import source_bundle
from bridge.core.errors import RunFailed
from bridge.core.guidance import guidance_diagnostic
from bridge.core.retrieval import IntentError, parse_intent, plan_for, unsupported_message
from bridge.service import BridgeService, RunReports
from bridge.sources.base import (
    TOOL_PROTOCOLS,
    SourceCallError,
    SourceClient,
    UnsupportedOperation,
    bundle_capabilities,
)
from bridge.sources.client import client_for
from bridge.support.text import safe_id, safe_trace_text
from bridge.web.mcp_descriptors import (
    CONTEXT_LIMIT,
    DEPTH,
    DIRECTIONS,
    GRAPH_LIMIT,
    ToolArgumentError,
    clamp,
    either,
    include_drafts,
    name_list,
    source_error_result,
    source_summary,
    tool_query,
    tool_result,
)
from bridge.web.mcp_payloads import context_value, prefixed, search_results, string
from common.bridge_schemas import Diagnostic, JsonObject, TraceStep
from common.options import reference_text
from common.options import reference_text as query_text
from common.source_answer import SourceAnswer

# ----------------------------------------------------------------------------- the tools

class SourceTools:
    """Runs one bridge tool call. Bad input raises ToolArgumentError; an upstream failure is an
    `isError` result; a runtime failure of the run propagates as its HTTP error."""

    def __init__(self, service: BridgeService) -> None:
        self.service = service

    async def call(self, name: str, args: JsonObject, request_id: str, trace_id: str,
                   reports: RunReports | None = None) -> JsonObject:
        if name == "llmwiki_agent_run":
            return await self.agent_run(args, request_id, trace_id, reports)
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
        inline = either(args, "knowledgeSources", "knowledge_sources")
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
        value = either(args, "sourceId", "source_id")
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

    async def agent_run(self, args: JsonObject, request_id: str, trace_id: str,
                        reports: RunReports | None = None) -> JsonObject:
        """The arguments are the `/message:send` body; caller errors become -32602, runtime failures
        (5xx) propagate and are answered with the HTTP error body."""
        envelope = args if isinstance(args.get("data"), dict) else {"data": args}
        if envelope is not args and not reference_text(args.get("query")) and "message" not in args:
            # Said in the tool's own words (the run's check speaks of A2A request fields).
            raise ToolArgumentError("llmwiki_agent_run arguments.query is required: the question to "
                                    "answer.")
        try:
            task = await self.service.run(envelope, request_id, trace_id, reports=reports)
        except RunFailed as exc:
            if exc.kind == "rejected":
                raise ToolArgumentError(exc.message) from None
            raise
        result = artifact.result_of(task)  # written by the reply's one dump, like the A2A task
        return tool_result("llmwiki_agent_result", result, result.answer)

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
            lines.append(f"- {source.id}: {source.safe_label} ({source.protocol}, {source.status}, "
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
                capabilities, basis = bundle_capabilities(read.raw), "fresh"
        plan = plan_for(intent, capabilities, basis, source.id, ids, source.protocol)
        if intent.fallback == "none" and (not plan.mode_supported or plan.diagnostic is not None):
            label = [f"{source.id} ({source.protocol})"]
            raise ToolArgumentError(unsupported_message(
                intent, [] if plan.mode_supported else label,
                label if plan.mode_supported and not plan.guided_supported else [],
                [] if plan.filters_supported else label))
        notes = [plan.diagnostic] if plan.diagnostic is not None else []
        return dict(plan.fields), notes, set(capabilities)

    async def context_or_search(self, tool: str, args: JsonObject) -> JsonObject:
        query = tool_query(tool, args)
        candidates = self.candidates(args)
        source = self.resolve(tool, args, candidates)
        client = self._client(source)
        body: JsonObject = {"query": query, "limit": clamp(args.get("limit"), *CONTEXT_LIMIT),
                            "include_drafts": include_drafts(args)}
        fields, notes, capabilities = await self._retrieval(args, query, source, candidates, client)
        body.update(fields)
        summary = self.summary(source)
        label = source.safe_label
        if tool == "llmwiki_search":
            results = search_results(await client.search(body), source)
            value: JsonObject = {"source": summary, "query": query, "results": results}
            if notes:
                value["diagnostics"] = [d.wire() for d in notes]
            return tool_result(tool, value, f'Search {label}: {len(results)} result(s) for "{query}".')
        payload = await client.context(body)
        value, guidance_note = context_value(payload, source, query, summary)
        if guidance_note is None and "retrievalGuidance" not in value:
            advertised = capabilities | set(source.capabilities) | set(bundle_capabilities(payload))
            guidance_note = guidance_diagnostic(payload, "llmwiki_agent_guided_lexical_v1" in advertised,
                                                safe_id(source.id), source.protocol)
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
        given = query_text(either(args, "pageId", "page_id"))  # `7` is page "7", as the reference reads it
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
        label = source.safe_label
        try:
            page = await self._client(source).read(page_id, include_drafts(args))
        except SourceCallError as exc:
            if exc.http_status != 404:
                raise
            page = {"found": False, "id": page_id}  # a missing page is an answer, not a source failure
        value = {"source": self.summary(source), "pageId": given, "page": page}
        title = string(page.get("title")) or page_id
        state = "not found" if page.get("found") is False else "read"
        return tool_result(tool, value, f"Page {state} from {label}: {safe_trace_text(title)}.")

    async def graph(self, args: JsonObject) -> JsonObject:
        tool = "llmwiki_graph"
        source = self.resolve(tool, args, self.candidates(args))
        limit = clamp(args.get("limit"), *GRAPH_LIMIT)
        payload = await self._client(source).graph(limit, include_drafts(args))
        graph = artifact.graph_from(payload, source.id)
        value = {"source": self.summary(source), "limit": limit, "graph": graph.wire()}
        text = f"Graph from {source.safe_label}: {len(graph.nodes)} node(s), {len(graph.edges)} edge(s)."
        return tool_result(tool, value, text)

    async def neighbors(self, args: JsonObject) -> JsonObject:
        tool = "llmwiki_graph_neighbors"
        requested: list[str] = []
        for key in ("nodeId", "node_id", "nodeIds", "node_ids"):
            requested += name_list(args.get(key), key)
        requested = list(dict.fromkeys(requested))
        if not requested:
            raise ToolArgumentError("llmwiki_graph_neighbors arguments.nodeId or nodeIds is required.")
        relations = list(dict.fromkeys(name_list(args.get("relation"), "relation")
                                       + name_list(args.get("relations"), "relations")))
        given_direction = args.get("direction")
        direction = (given_direction if isinstance(given_direction, str) and given_direction in DIRECTIONS
                     else "both")
        depth = clamp(args.get("depth"), *DEPTH)
        limit = clamp(args.get("limit"), *GRAPH_LIMIT)
        include = include_drafts(args)
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
            answer = SourceAnswer.model_validate(payload)
            graph = artifact.graph_of(answer, source.id)
            citations = artifact.citations_of(answer.cited_items(), source)
            graphs.append(graph)
            citation_groups.append(citations)
            neighborhoods.append({
                "source": self.summary(source),
                "nodeIds": [prefixed(source.id, s) for s in seeds], "depth": depth,
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
        label = source.safe_label
        read = await self._client(source).bundle()
        steps: list[TraceStep] = []
        diagnostics: list[Diagnostic] = []
        bundle = None
        if read.attempted:
            bundle_step = artifact.step(f"source-manifest-{safe_id(source.id)}",
                                        f"Read {label} source bundle", "done",
                                        parent_id="mcp-source-bundle", connection_id=source.id)
            if read.raw is not None:
                bundle = source_bundle(read.raw, source)
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
        name = safe_trace_text(bundle.title or bundle.bundle_id or bundle.source_id)
        return tool_result(tool, value, f"Source bundle from {label}: {name}.")
