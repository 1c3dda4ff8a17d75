"""The `llmwiki_agent_result` artifact: citations, graph, source bundles, steps, answers, diagnostics."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from bridge.config.registry import SourceDescriptor
from bridge.core.bundle import safe_uri
from bridge.core.origins import citation_origin
from bridge.sources.base import SourceCallError
from bridge.support.clock import now_iso
from bridge.support.facts import observations as observed
from bridge.support.fields import text_of
from bridge.support.text import markdown_readable, safe_id, safe_trace_text
from common.bridge_schemas import (
    CamelModel,
    Citation,
    CitationRef,
    Diagnostic,
    JsonObject,
    SourceBundle,
    TraceStep,
)
from common.source_answer import PageItem, SourceAnswer, SourceContextPack

ARTIFACT_NAME = "llmwiki_agent_result"
_DRIVE = re.compile(r"^[A-Za-z]:")
_SCHEME = re.compile(r"^[a-z]+:")


# ----------------------------------------------------------------------------- evidence

@dataclass(frozen=True)
class WireGraph:
    """A graph as the artifact writes it: nodes and edges in their wire form (ids namespaced by the
    source, every field normalised to its type; metadata as the source sent it), made once from
    the source's answer as `common.source_answer` reads it. The nodes and edges are not validated
    into output models again: they are made in the form that round-trip gave. A NaN or infinity in
    metadata is written as null by the dump that writes it (the artifact's model, or `wire()` here
    for a tool's answer), as the model dump did."""

    nodes: list[JsonObject] = field(default_factory=list)
    edges: list[JsonObject] = field(default_factory=list)

    def value(self) -> JsonObject:
        """The graph as it is, for a dump that makes it JSON-safe itself."""
        return {"nodes": self.nodes, "edges": self.edges}

    def wire(self) -> JsonObject:
        """The JSON form, in one pydantic-core pass."""
        safe: JsonObject = pydantic_core.to_jsonable_python(self.value(), inf_nan_mode="null")
        return safe


@dataclass
class SourceEvidence:
    """What one source contributed: its namespaced citations, graph and preview lines, and
    whether it said it can answer (its pack's `answerable`; None when it did not say)."""

    wiki_title: str
    citations: list[Citation]
    graph: WireGraph
    orientation: list[str] = field(default_factory=list)
    answerable: bool | None = None


def _handle(item: PageItem) -> str | None:
    """An item's `handle` (or `uri`) when it is an `llmwiki://` handle; no query, fragment or userinfo."""
    uri = safe_uri(item.handle)
    return uri if uri is not None and uri.startswith("llmwiki://") else None


def _citation_items(payload: JsonObject) -> list[Any]:
    """The payload's own `evidence` then `citations` items, to tell where merged items went."""
    return [item for key in ("evidence", "citations") if isinstance(payload.get(key), list)
            for item in payload[key]]


def _citation(item: PageItem, index: int, source: SourceDescriptor) -> Citation:
    raw_id = text_of(item.citation_id) or str(index + 1)
    cid = raw_id if raw_id.startswith(f"{source.id}:") else f"{source.id}:{raw_id}"
    score = item.score
    return Citation(
        id=cid, source_id=source.id, page_id=text_of(item.page_id) or raw_id,
        title=text_of(item.title) or "Untitled", path=text_of(item.path),
        score=float(score) if score is not None else None,
        snippet=markdown_readable(item.snippet),
        connection_id=text_of(item.connection_id) or source.id,
        source_refs=[str(ref) for ref in item.source_refs or ()], handle=_handle(item),
        origin=citation_origin(item.origin, item.section))


def citations_of(items: Sequence[PageItem | None], source: SourceDescriptor,
                 start: int = 0) -> list[Citation]:
    """The items as namespaced citations (contract 4.3.1), numbered by their place from `start`
    (None, an item that was not an object, keeps its place)."""
    return [_citation(item, start + index, source) for index, item in enumerate(items) if item is not None]


def citations_from(payload: JsonObject, source: SourceDescriptor) -> list[Citation]:
    """The payload's `evidence` then `citations` items as namespaced citations (contract 4.3.1)."""
    return citations_of(SourceAnswer.model_validate(payload).cited_items(), source)


def add_citations(evidence: SourceEvidence, payload: JsonObject, added: Sequence[JsonObject],
                  source: SourceDescriptor) -> None:
    """`evidence`, made from `payload` before `added` were merged into it, as if made after: the
    new items' citations follow, numbered by their place (as `citations_from` numbers them).
    Items merged anywhere but at the end make every citation again."""
    if not added:
        return
    items = _citation_items(payload)
    start = len(items) - len(added)
    if start >= 0 and all(item is new for item, new in zip(items[start:], added, strict=True)):
        evidence.citations += citations_of([PageItem.model_validate(item) for item in added], source, start)
    else:
        evidence.citations = citations_from(payload, source)


def _metadata(metadata: JsonObject | None, source_id: str) -> JsonObject:
    return {**metadata, "connectionId": source_id} if metadata is not None else {"connectionId": source_id}


def graph_of(answer: SourceAnswer, source_id: str) -> WireGraph:
    """The answer's graph in its wire form: ids namespaced by the source, every field normalised
    to its type, defaults where the source gave no value (contract 4.3.2)."""
    raw_nodes, raw_edges = answer.graph_items()
    prefix = source_id + ":"
    nodes: list[JsonObject] = []
    local_ids: set[str] = set()
    for index, node in enumerate(raw_nodes, start=1):
        node_id = node.id or f"node:{index}"
        local_ids.add(node_id)
        nodes.append({
            "id": prefix + node_id, "label": node.label or f"Node {index}", "kind": node.kind or "node",
            "path": node.path, "metadata": _metadata(node.metadata, source_id)})
    edges: list[JsonObject] = []
    for edge in raw_edges:
        source, target = edge.source, edge.target
        if not source or not target:
            continue
        edges.append({
            "source": prefix + source if source in local_ids else source,
            "target": prefix + target if target in local_ids else target,
            "relation": edge.relation or "related",
            "metadata": _metadata(edge.metadata, source_id)})
    return WireGraph(nodes, edges)


def graph_from(payload: JsonObject, source_id: str) -> WireGraph:
    """The source's graph in its wire form (a query answer carries a hundred nodes and edges or more)."""
    return graph_of(SourceAnswer.model_validate(payload), source_id)


def evidence_from(payload: JsonObject, source: SourceDescriptor) -> SourceEvidence:
    """What the run keeps of one source's context: its citations, graph and preview lines."""
    pack = SourceContextPack.model_validate(payload)
    orientation = [_preview(text_of(item.path), text_of(item.title), text_of(item.item_id))
                   for item in pack.orientation or () if item is not None]
    return SourceEvidence(
        wiki_title=text_of(pack.wiki_title) or source.name,
        citations=citations_of(pack.cited_items(), source),
        graph=graph_of(pack, source.id),
        orientation=[o for o in orientation if o],
        answerable=pack.answerable)


def merge_graphs(graphs: Sequence[WireGraph]) -> WireGraph:
    """One graph: the first node per id, the first edge per (source, target, relation)."""
    nodes: dict[str, JsonObject] = {}
    edges: dict[tuple[str, str, str], JsonObject] = {}
    for graph in graphs:
        for node in graph.nodes:
            nodes.setdefault(node["id"], node)
        for edge in graph.edges:
            edges.setdefault((edge["source"], edge["target"], edge["relation"]), edge)
    return WireGraph(list(nodes.values()), list(edges.values()))


def dedupe_citations(groups: Sequence[Sequence[Citation]]) -> list[Citation]:
    seen: dict[str, Citation] = {}
    for group in groups:
        for citation in group:
            seen.setdefault(citation.id, citation)
    return list(seen.values())


# ----------------------------------------------------------------------------- steps and diagnostics

def step(step_id: str, label: str, status: str, *, timestamp: str | None = None, **extra: Any) -> TraceStep:
    """A trace step, stamped now unless it began earlier (`timestamp`)."""
    return TraceStep(id=step_id, label=label, status=status, timestamp=timestamp or now_iso(), **extra)


def failure_observations(error: SourceCallError) -> list[tuple[str, str]]:
    """The safe facts of a failed source call (status, timeout, bad JSON, JSON-RPC error, policy)."""
    observations = error.facts()
    if error.json_rpc_error:
        observations.append(("jsonRpcError", "true"))
    if error.policy:
        observations.append(("policy", "source-url"))
    return observations


def source_diagnostic(source: SourceDescriptor, error: SourceCallError, phase: str, *,
                      source_policy: str, timeout_ms: int) -> Diagnostic:
    """A redacted per-source failure: facts about the failure, never URLs, bodies or the query."""
    observations = failure_observations(error)
    observations.append(("sourcePolicy", source_policy))
    if phase == "query":
        observations += [("sourceSelected", "true" if source.selected else "false"),
                         ("sourceStatus", source.status)]
    observations += [("timeoutMs", str(timeout_ms)), ("redaction", "urls, headers, bodies, queries")]
    label = safe_trace_text(source.label)
    if phase == "query":
        severity, message = "error", f"{label} could not be queried by the bridge."
        if error.policy:
            remediation = ("Register the source under an allowed origin or change the bridge source "
                           "policy.")
        elif error.invalid_json:
            remediation = "Check that the URL points at an LLMWiki source that answers JSON."
        elif error.http_status in (429, 503):  # it answered: up, but starting or overloaded
            remediation = (f"The Knowledge Source is busy or still starting (HTTP {error.http_status}); "
                           "retry in a few seconds.")
        else:
            remediation = "Check that the Knowledge Source is running and reachable, then retry."
    else:
        severity, message = "warning", f"{label} source bundle metadata could not be read."
        remediation = "The run continued without source bundle metadata."
    return Diagnostic(severity=severity, scope="source", phase=phase,
                      protocol=source.protocol, subject=safe_id(source.id), retryable=error.retryable,
                      observations=observed(observations),
                      remediation=remediation, message=message)


def _preview(path: str, title: str, ident: str) -> str:
    if path and title:
        return f"{path} ({title})"
    return path or title or ident


def _safe_ref_text(value: str) -> bool:
    return bool(value) and not (value.startswith(("/", "\\")) or _DRIVE.match(value)
                                or any(bad in value for bad in ("\\", "://", "@", "?", "#")))


def citation_refs(citations: Sequence[Citation]) -> list[CitationRef]:
    refs: list[CitationRef] = []
    for citation in citations[:5]:
        path = citation.path.removeprefix("./")
        path_ok = _safe_ref_text(path) and ".." not in path.split("/") and not _SCHEME.match(path)
        title_ok = bool(citation.title) and not (citation.title.startswith("/") or "\\" in citation.title
                                                 or "://" in citation.title)
        source_refs = [r for r in citation.source_refs if _safe_ref_text(r)
                       and not any(c in r for c in "[]{}<>")][:5]
        origin = citation.origin if path_ok else None
        if origin is not None and not (origin.path == path or origin.path.endswith("/" + path)):
            origin = None  # lines of another file than the one the ref names
        refs.append(CitationRef(
            id=safe_trace_text(citation.id) if _safe_ref_text(citation.id) else None,
            title=safe_trace_text(citation.title) if title_ok else None,
            path=safe_trace_text(path) if path_ok else None,
            source_refs=source_refs or None,
            line_start=origin.line_start if origin is not None else None,
            line_end=origin.line_end if origin is not None else None))
    return refs


def tool_detail(evidence: SourceEvidence) -> str:
    detail = f"Read {len(evidence.citations)} citation(s) from {safe_trace_text(evidence.wiki_title)}."
    if evidence.orientation:
        detail += " Orientation: " + "; ".join(safe_trace_text(o) for o in evidence.orientation[:3]) + "."
    previews = [_preview(c.path, c.title, c.id) for c in evidence.citations]
    if previews:
        shown = "; ".join(safe_trace_text(p) for p in previews[:3])
        more = f"; +{len(previews) - 3} more" if len(previews) > 3 else ""
        detail += f" Evidence: {shown}{more}."
    return detail if len(detail) <= 360 else detail[:357] + "..."


# ----------------------------------------------------------------------------- answers and the task

class AgentResult(CamelModel):
    """The `llmwiki_agent_result` data part. It stays a model in the task: the one JSON dump of the
    answer writes it in its wire form (camelCase, unset keys left out, NaN as null: see
    `OptionalKey`), so it is never copied into Python values first. The graph
    (`WireGraph.value()`) is already in its wire form."""

    request_id: str
    trace_id: str
    answer: str
    orchestration_mode: str
    citations: list[Citation]
    graph: JsonObject
    steps: list[TraceStep]
    source_bundles: list[SourceBundle]
    diagnostics: list[Diagnostic]


def evidence_only_answer(citations: Sequence[Citation], graph: WireGraph,
                         bundles: Sequence[SourceBundle], answered_sources: int, failed_sources: int) -> str:
    lines = [f"Evidence-only result: the bridge gathered {len(citations)} citation(s) from "
             f"{answered_sources} Knowledge Source(s) and did not call the configured runtime.",
             f"Graph: {len(graph.nodes)} node(s), {len(graph.edges)} edge(s)."]
    if bundles:
        lines.append("Source bundles: " + ", ".join(b.bundle_id or b.source_id for b in bundles) + ".")
    lines.append("")
    if citations:
        lines.append("Citations:")
        # Exactly the reference's lines (contract 4.6): no anchors in this mode.
        lines += [f"- {citation.id}: {citation.title}" for citation in citations[:8]]
        if len(citations) > 8:
            lines.append(f"- {len(citations) - 8} additional citation(s) omitted from this summary.")
    else:
        lines.append("Citations: none returned by selected Knowledge Sources.")
    if failed_sources:
        lines += ["", f"Source failures: {failed_sources} selected source(s) could not be queried. "
                  "See trace steps for redacted details."]
    return "\n".join(lines)


def fail_closed_answer(failed_sources: int) -> str:
    return "\n".join([
        f"Source readiness diagnostic: {failed_sources} selected Knowledge Source(s) could not be queried.",
        "Persisted ready status is treated as last-known only until a live source query succeeds.",
        "The bridge did not call the configured runtime because no selected Knowledge Source "
        "returned evidence.",
        "See trace steps and diagnostics for redacted source failure details."])


def task_envelope(answer: str, result: AgentResult, request_id: str, trace_id: str) -> JsonObject:
    """The A2A task: a completed status, the answer as a text part, the result as a data artifact
    (the model itself, see `AgentResult`)."""
    return {
        "id": str(uuid.uuid4()), "requestId": request_id, "traceId": trace_id,
        "status": {"state": "completed", "message": {"parts": [{"kind": "text", "text": answer}]}},
        "message": {"role": "agent", "parts": [{"kind": "text", "text": answer}]},
        "artifacts": [{"name": ARTIFACT_NAME, "parts": [{"kind": "data", "data": result}]}],
    }



def result_of(task: JsonObject) -> AgentResult:
    """The run's result in a task made by `task_envelope`."""
    result = task["artifacts"][0]["parts"][0]["data"]
    if not isinstance(result, AgentResult):
        raise TypeError("not a task made by task_envelope")
    return result
