"""Runtime-backed answers: delegated (one runtime call) and hybrid (source tools for bounded rounds)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.config.registry import SourceDescriptor
from bridge.config.settings import BridgeSettings
from bridge.core import artifact
from bridge.core.artifact import WireGraph, step
from bridge.core.fusion import merge_into, same_page
from bridge.core.origins import location
from bridge.core.prompt import AnsweredSource, compact_json, evidence_bundle, runtime_messages
from bridge.runtime.acp import AcpFailure, acp_answer, prompt_text
from bridge.runtime.base import (
    OpenChat,
    RuntimeFailure,
    ToolCall,
    model_configured,
    runtime_diagnostic,
    tool_arguments,
)
from bridge.sources.base import TOOL_PROTOCOLS, ClientFor, SourceCallError
from bridge.support.clock import elapsed_ms
from bridge.support.facts import observations as observed
from bridge.support.fields import as_list
from bridge.support.iolog import IoLog
from bridge.support.text import safe_id, safe_trace_text
from common.bridge_schemas import Citation, Diagnostic, TraceStep
from common.source_answer import PageItem, SourceAnswer

RUNTIME_STEP_ID = "runtime-chat-completions"
RUNTIME_STEP_LABEL = "Call chat completions"
# The runtime step of each adapter (contract 4.4).
RUNTIME_STEPS = {"chat-completions": (RUNTIME_STEP_ID, RUNTIME_STEP_LABEL),
                 "deepagents-acp": ("runtime-deepagents-acp", "Call DeepAgents ACP runtime")}
ADAPTER_FAILED_MESSAGE = "Runtime adapter request failed."
ADAPTER_NO_ANSWER_TEXT = "The runtime adapter returned no answer text."
TOOL_NAMES = ("llmwiki_search", "llmwiki_read", "llmwiki_graph_neighbors")
MAX_TOOL_ROUNDS = 3  # model turns that may call tools; one more turn (without tools) must answer
MAX_TOOL_CALLS = 8  # tool calls per run, across rounds
SEARCH_LIMIT = 8
READ_TEXT_CHARS = 6000
SNIPPET_CHARS = 320
NEIGHBOR_LIMIT = 40
FALLBACK_ANCHORS = 5
_ANCHOR = re.compile(r"\[([0-9]+)\]\(#citation-([0-9]+)\)")

NO_ANSWER_TEXT = "The chat completions endpoint returned no answer text."


@dataclass
class RuntimeAnswer:
    answer: str
    citations: list[Citation]
    graph: WireGraph
    tool_calls: int = 0
    anchors_appended: bool = False


@dataclass
class _Evidence:
    """The citations the runtime may cite: the bundle's, then what tools found, numbered by position."""

    citations: list[Citation]
    graphs: list[WireGraph]
    positions: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.positions = {c.id: n for n, c in enumerate(self.citations, start=1)}
        # A near-duplicate merged into another citation (`alsoIn`) is known by that one's number.
        self.positions.update({a.id: self.positions[c.id] for c in self.citations for a in c.also_in or ()})

    def add(self, citation: Citation) -> int:
        """The citation's number; a citation seen before keeps the number it already has."""
        if citation.id not in self.positions:
            self.citations.append(citation)
            self.positions[citation.id] = len(self.citations)
        return self.positions[citation.id]

    def add_found(self, found: Sequence[Citation], ranked: bool) -> list[tuple[int, Citation]]:
        """A follow-up search's citations, numbered after the run's. One source answers a search,
        so its order is its own, as `fuse` keeps one source's; when the run ranks by relevance, a
        page another source already gave is that citation (its number, and it names this
        source too, as the run's merge does)."""
        numbered = []
        for citation in found:
            twin = None if not ranked or citation.id in self.positions else \
                next((c for c in self.citations if same_page(c, citation)), None)
            if twin is None:
                numbered.append((self.add(citation), citation))
                continue
            number = self.positions[twin.id]
            if twin.also_in is None:  # the source's own citation stays as it sent it
                twin = self.citations[number - 1] = twin.model_copy()
            merge_into(twin, citation)
            self.positions[citation.id] = number
            numbered.append((number, twin))
        return numbered


# ----------------------------------------------------------------------------- anchors

def has_valid_anchor(answer: str, citation_count: int) -> bool:
    """Contract 4.8: `[n](#citation-n)`, same canonical n on both sides, in range, not an image."""
    for match in _ANCHOR.finditer(answer):
        label, target = match.groups()
        if match.start() > 0 and answer[match.start() - 1] == "!":
            continue
        if label == target and not label.startswith("0") and 1 <= int(label) <= citation_count:
            return True
    return False


def with_fallback_anchors(answer: str, citation_count: int,
                          citations: Sequence[Citation] = ()) -> tuple[str, bool]:
    """Append `Evidence used: [1](#citation-1) ...` when the runtime cited nothing it was given;
    a citation whose source gave its lines is followed by them (`path:12-18 (Heading)`)."""
    if citation_count == 0 or has_valid_anchor(answer, citation_count):
        return answer, False
    shown = min(FALLBACK_ANCHORS, citation_count)
    anchors = []
    for n in range(1, shown + 1):
        where = location(citations[n - 1].origin) if n <= len(citations) else ""
        anchors.append(f"[{n}](#citation-{n}) {where}" if where else f"[{n}](#citation-{n})")
    line = "Evidence used: " + (" " if not any(" " in a for a in anchors) else "; ").join(anchors)
    if citation_count > shown:
        line += f" +{citation_count - shown} more"
    trimmed = answer.rstrip()
    return (f"{trimmed}\n\n{line}" if trimmed else line), True


# ----------------------------------------------------------------------------- tools

def tool_schemas(sources: Sequence[SourceDescriptor]) -> list[dict[str, Any]]:
    """The three source tools as OpenAI function tools; `sourceId` is required with several sources."""
    ids = [s.id for s in sources]
    source_id = {"type": "string", "enum": ids, "description": "The Knowledge Source to call."}
    needs_source = ["sourceId"] if len(ids) > 1 else []

    def tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": {"sourceId": source_id, **properties},
                           "required": needs_source + required, "additionalProperties": False}}}

    return [
        tool("llmwiki_search", "Search a Knowledge Source; returns new citations with their number n.",
             {"query": {"type": "string", "description": "What to search for."},
              "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT}}, ["query"]),
        tool("llmwiki_read", "Read one page of a Knowledge Source; returns it as a citation with its text.",
             {"pageId": {"type": "string", "description": "A page id, or a citation id from the "
                                                          "evidence bundle."}}, ["pageId"]),
        tool("llmwiki_graph_neighbors", "List the graph neighbours of a page (links, headings, refs).",
             {"seed": {"type": "string", "description": "A page id or graph node id."},
              "depth": {"type": "integer", "minimum": 1, "maximum": 2},
              "limit": {"type": "integer", "minimum": 1, "maximum": NEIGHBOR_LIMIT}}, ["seed"]),
    ]


def _bounded_int(value: Any, default: int, high: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return min(max(value, 1), high)
    return default


def _citation_entry(number: int, citation: Citation) -> dict[str, Any]:
    entry = {"n": number, "id": citation.id, "title": citation.title, "path": citation.path,
             "snippet": citation.snippet[:SNIPPET_CHARS]}
    if citation.origin is not None:  # the section the citation rests on
        entry["section"] = location(citation.origin)
    return entry


class _ToolRunner:
    """Runs the model's tool calls against the selected sources, one trace step per call."""

    def __init__(self, client_for: ClientFor,
                 sources: Sequence[SourceDescriptor], evidence: _Evidence,
                 steps: list[TraceStep], diagnostics: list[Diagnostic], settings: BridgeSettings,
                 ranked: bool = False) -> None:
        self.client_for = client_for
        self.ranked = ranked  # the run's citations are in relevance order (see `_Evidence.add_found`)
        self.sources = {s.id: s for s in sources}
        self.evidence = evidence
        self.steps = steps
        self.diagnostics = diagnostics
        self.settings = settings
        self.count = 0

    def _source(self, args: dict[str, Any], ref: str) -> SourceDescriptor | None:
        wanted = args.get("sourceId")
        if isinstance(wanted, str) and wanted in self.sources:
            return self.sources[wanted]
        by_prefix = [s for sid, s in self.sources.items() if ref.startswith(f"{sid}:")]
        if by_prefix:
            return max(by_prefix, key=lambda s: len(s.id))
        return next(iter(self.sources.values())) if len(self.sources) == 1 and wanted is None else None

    async def run(self, call: ToolCall) -> str:
        """The tool message content (compact JSON) for one call; failures are answered, not raised."""
        self.count += 1
        args = tool_arguments(call)
        name = call.name if call.name in TOOL_NAMES else safe_trace_text(call.name, 64) or "unknown"
        ref = next((v for k in ("query", "pageId", "seed") if isinstance(v := args.get(k), str)), "").strip()
        source = self._source(args, ref)
        label = safe_trace_text(source.label) if source else "Knowledge Source"
        started = time.perf_counter()
        trace = step(f"runtime-tool-{self.count}", f"Call {name} on {label}", "running",
                     parent_id=RUNTIME_STEP_ID, tool_name=f"{name}__{safe_id(source.id)}" if source else name,
                     connection_id=source.id if source else None)
        self.steps.append(trace)
        try:
            if call.name not in TOOL_NAMES:
                raise _BadCall("The runtime asked for a tool the bridge does not offer.")
            if source is None:
                raise _BadCall("The runtime named no selected Knowledge Source.")
            if not ref:
                raise _BadCall("The runtime sent the tool call without its required argument.")
            result = await self._call(call.name, source, ref, args, trace)
        except _BadCall as exc:
            trace.status, trace.error, trace.detail = "error", "Tool call rejected.", exc.message
            result = {"error": exc.message}
        except SourceCallError as exc:
            assert source is not None
            diagnostic = _tool_diagnostic(source, exc, self.settings)
            self.diagnostics.append(diagnostic)
            trace.status, trace.error, trace.diagnostic = "error", "Source tool call failed.", diagnostic
            trace.detail = f"{label} could not answer {name}."
            result = {"error": "The Knowledge Source call failed."}
        else:
            trace.status = "done"
        trace.latency_ms = elapsed_ms(started)
        return compact_json(result)

    async def _call(self, name: str, source: SourceDescriptor, ref: str, args: dict[str, Any],
                    trace: TraceStep) -> dict[str, Any]:
        client = self.client_for(source)
        page_ref = ref.removeprefix(f"{source.id}:")
        if name == "llmwiki_search":
            limit = _bounded_int(args.get("limit"), SEARCH_LIMIT, SEARCH_LIMIT)
            payload = await client.search({"query": ref, "limit": limit})
            found = artifact.citations_of(SourceAnswer.model_validate(payload).results or [], source)
            numbered = self.evidence.add_found(found, self.ranked)
            self._cite(trace, [c for _, c in numbered], f"Search returned {len(found)} citation(s)")
            return {"citations": [_citation_entry(n, c) for n, c in numbered]}
        if name == "llmwiki_read":
            page = await client.read(page_ref)
            text = page.get("text") if isinstance(page.get("text"), str) else page.get("summary")
            item = {"id": page.get("id") or page_ref, "title": page.get("title"), "path": page.get("path"),
                    "snippet": str(text or "")[:SNIPPET_CHARS * 4],
                    "source_refs": as_list(page.get("source_refs"))}
            [citation] = artifact.citations_of([PageItem.model_validate(item)], source)
            citation.snippet = citation.snippet[:SNIPPET_CHARS]
            number = self.evidence.add(citation)
            self._cite(trace, [citation], "Read 1 page")
            page_text = str(text or "")[:READ_TEXT_CHARS]
            return {"citation": {**_citation_entry(number, citation), "text": page_text}}
        payload = await client.neighbors([page_ref], _bounded_int(args.get("depth"), 1, 2), "both", [],
                                         _bounded_int(args.get("limit"), 20, NEIGHBOR_LIMIT))
        graph = artifact.graph_from(payload, source.id)
        self.evidence.graphs.append(graph)
        trace.detail = f"Graph neighbourhood returned {len(graph.nodes)} node(s), {len(graph.edges)} edge(s)."
        return {"nodes": [{"id": n["id"], "label": n["label"], "kind": n["kind"], "path": n["path"]}
                          for n in graph.nodes[:NEIGHBOR_LIMIT]],
                "edges": [{"source": e["source"], "target": e["target"], "relation": e["relation"]}
                          for e in graph.edges[: NEIGHBOR_LIMIT * 2]]}

    @staticmethod
    def _cite(trace: TraceStep, citations: list[Citation], lead: str) -> None:
        trace.citation_ids = [c.id for c in citations]
        trace.citation_refs = artifact.citation_refs(citations)
        previews = "; ".join(safe_trace_text(c.path or c.title or c.id) for c in citations[:3])
        more = f"; +{len(citations) - 3} more" if len(citations) > 3 else ""
        detail = f"{lead}." + (f" Evidence: {previews}{more}." if previews else "")
        trace.detail = detail if len(detail) <= 360 else detail[:357] + "..."


class _BadCall(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _tool_diagnostic(source: SourceDescriptor, error: SourceCallError,
                     settings: BridgeSettings) -> Diagnostic:
    observations = artifact.failure_observations(error)
    observations += [("sourcePolicy", settings.source_policy),
                     ("timeoutMs", str(settings.request_timeout_ms)),
                     ("redaction", "urls, headers, bodies, queries")]
    return Diagnostic(severity="warning", scope="source", phase="runtime-tool", protocol=source.protocol,
                      subject=safe_id(source.id), retryable=error.retryable,
                      observations=observed(observations),
                      remediation="The runtime answered without this tool result.",
                      message=f"{safe_trace_text(source.label)} could not answer a runtime tool call.")


# ----------------------------------------------------------------------------- the run

async def runtime_answer(settings: BridgeSettings, client_for: ClientFor | None,
                         open_chat: OpenChat, io: IoLog | None, *, hybrid: bool,
                         query: str, history: Sequence[tuple[str, str]],
                         conversation_context: dict[str, Any] | None, answered: Sequence[AnsweredSource],
                         failed: Sequence[SourceDescriptor], citations: Sequence[Citation], graph: WireGraph,
                         steps: list[TraceStep], diagnostics: list[Diagnostic],
                         ranked: bool = False) -> RuntimeAnswer:
    """Call the runtime (hybrid: with source tools); tool steps and diagnostics go straight into the
    run's lists, so a later failure still reports them. Raises `RuntimeFailure`."""
    if not model_configured(settings) or not settings.base_url.strip():
        raise RuntimeFailure("No runtime model or base URL is configured.", configuration=True)
    evidence = _Evidence(list(citations), [graph])
    bundle = evidence_bundle(query, citations, answered, failed, graph, conversation_context, ranked)
    # Tools only for sources whose protocol can run them (an A2A source answers context only).
    sources = [a.source for a in answered if a.source.protocol in TOOL_PROTOCOLS["llmwiki_search"]]
    tools = tool_schemas(sources) if hybrid and sources and client_for is not None else None
    runner = _ToolRunner(client_for, sources, evidence, steps, diagnostics, settings, ranked) \
        if tools and client_for is not None else None
    messages: list[dict[str, Any]] = list(runtime_messages(query, history, bundle, hybrid=tools is not None))
    # Tool rounds stop once one request timeout has been spent, so a hybrid run costs at most about
    # two timeouts (tool rounds, then the answer) however slowly the runtime and sources answer.
    tools_until = time.monotonic() + settings.timeout_seconds
    async with open_chat(settings, io) as runtime:
        for round_number in range(MAX_TOOL_ROUNDS + 1):
            in_budget = (round_number < MAX_TOOL_ROUNDS and time.monotonic() < tools_until
                         and runner is not None and runner.count < MAX_TOOL_CALLS)
            offer = tools if in_budget else None
            try:
                reply = await runtime.complete(messages, offer)
            except RuntimeFailure as exc:
                if not exc.tools_rejected:
                    raise
                diagnostics.append(runtime_diagnostic(
                    settings, exc, severity="warning",
                    message="The runtime rejected source tools; answered as delegated-runtime instead.",
                    remediation="Use a model that supports tool calls for hybrid runs.",
                    extra=[("toolsRejected", "true"), ("fallback", "delegated-runtime")]))
                tools = offer = None
                messages = list(runtime_messages(query, history, bundle))
                reply = await runtime.complete(messages)
            if offer is None or runner is None or not reply.tool_calls:
                break
            messages.append(reply.as_message())
            for call in reply.tool_calls:
                if runner.count < MAX_TOOL_CALLS:
                    content = await runner.run(call)
                else:  # every call id needs an answer, even past the budget
                    content = compact_json({"error": "Tool call budget exhausted; answer from the evidence."})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    # An empty reply is still an answer (contract 4.8): say so, and the anchor line follows.
    content = reply.content or NO_ANSWER_TEXT
    answer, appended = with_fallback_anchors(content, len(evidence.citations), evidence.citations)
    return RuntimeAnswer(answer=answer, citations=evidence.citations,
                         graph=artifact.merge_graphs(evidence.graphs),
                         tool_calls=runner.count if runner else 0, anchors_appended=appended)


async def acp_runtime_answer(settings: BridgeSettings, *, query: str, history: Sequence[tuple[str, str]],
                             conversation_context: dict[str, Any] | None,
                             answered: Sequence[AnsweredSource], failed: Sequence[SourceDescriptor],
                             citations: Sequence[Citation], graph: WireGraph,
                             ranked: bool = False) -> RuntimeAnswer:
    """The deepagents-acp adapter: the same prompt as chat completions, as one ACP turn (hybrid
    runs too: the agent has no bridge tools). Raises AcpFailure."""
    bundle = evidence_bundle(query, citations, answered, failed, graph, conversation_context, ranked)
    prompt = prompt_text(runtime_messages(query, history, bundle))
    text = await acp_answer(settings.deepagents_acp_command, settings.acp_args,
                            settings.deepagents_acp_cwd or Path.cwd(), prompt, settings.timeout_seconds)
    answer, appended = with_fallback_anchors(text.strip() or ADAPTER_NO_ANSWER_TEXT, len(citations),
                                             citations)
    return RuntimeAnswer(answer=answer, citations=list(citations), graph=graph, anchors_appended=appended)


def acp_diagnostic(settings: BridgeSettings, failure: AcpFailure) -> Diagnostic:
    """Contract 4.5's adapter diagnostic: process facts and redacted stderr, never the prompt."""
    observations = failure.facts()
    if failure.exit_code is not None:
        observations.append(("processExitCode", str(failure.exit_code)))
    if failure.signal_name is not None:
        observations.append(("processSignal", failure.signal_name))
    if failure.stderr:
        observations.append(("stderr", failure.stderr))
    if failure.stderr_truncated:
        observations.append(("stderrTruncated", "true"))
    observations += [("runtimeProfile", settings.runtime_profile),
                     ("runtimeAdapter", settings.runtime_adapter),
                     ("timeoutMs", str(settings.request_timeout_ms)),
                     ("redaction", "urls, headers, credentials, prompts, paths")]
    return Diagnostic(
        severity="error", scope="runtime", phase=settings.runtime_adapter, protocol="acp",
        subject=safe_id(settings.identity()["runtimeId"]), retryable=failure.exit_code is None,
        observations=observed(observations),
        remediation=("Check the DeepAgents ACP command at /settings (LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_*), "
                     "or retry with orchestrationMode evidence-only."),
        message=safe_trace_text(failure.message))
