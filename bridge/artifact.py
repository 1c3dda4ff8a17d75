"""The `llmwiki_agent_result` artifact: citations, graph, source bundles, steps, answers, diagnostics."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pydantic_core
from pydantic_core import PydanticSerializationError

from bridge.registry import SourceDescriptor, now_iso
from bridge.sources.transport import SourceCallError
from bridge.wire_json import WrittenDict
from common.bridge_schemas import (
    BundleSourceRef,
    Citation,
    CitationRef,
    Diagnostic,
    Graph,
    GraphEdge,
    GraphNode,
    JsonObject,
    Observation,
    ProjectionSummary,
    RawOriginsSummary,
    SourceBundle,
    TraceStep,
)

ARTIFACT_NAME = "llmwiki_agent_result"
_SAFE_REF = re.compile(r"^urn:llmwiki:source-ref:[A-Za-z0-9][A-Za-z0-9._~-]{0,127}$")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_HEADING = re.compile(r"(?m)^\s{0,3}#{1,6}\s+")
_ALIASED_LINK = re.compile(r"\[\[([^\]|]+)\|([^\]]+)\]\]")
_LINK = re.compile(r"\[\[([^\]]+)\]\]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_SCHEME = re.compile(r"^[a-z]+:")


def safe_id(value: str) -> str:
    return _NOT_ALNUM.sub("_", value) or "source"


def markdown_readable(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    # Each pattern needs its marker, so most snippets skip the regexes; without a "\n" a heading can
    # only start the text. `\s` and str.split() agree on what whitespace is.
    if "#" in text:
        if "\n" in text:
            text = _HEADING.sub("", text)
        elif (heading := _HEADING.match(text)) is not None:
            text = text[heading.end():]
    if "[[" in text:
        text = _LINK.sub(r"\1", _ALIASED_LINK.sub(r"\2", text))
    return " ".join(text.split())


def safe_trace_text(text: Any, limit: int = 160) -> str:
    clean = markdown_readable(text)
    if not clean.isprintable():  # markdown_readable already turned \t, \n and the like into spaces
        clean = _CONTROL.sub(" ", clean).strip()
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return ""


def as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _first(raw: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if raw.get(key) not in (None, ""):
            return raw[key]
    return None


def _first_str(raw: dict[str, Any], *keys: str) -> str:
    """`_str(_first(raw, *keys))` in one pass."""
    for key in keys:
        value = raw.get(key)
        if value is not None and value != "":
            return value if type(value) is str else _str(value)
    return ""


# ----------------------------------------------------------------------------- evidence

@dataclass
class SourceEvidence:
    """What one source contributed: its namespaced citations, graph and preview lines."""

    wiki_title: str
    citations: list[Citation]
    graph: EvidenceGraph
    orientation: list[str] = field(default_factory=list)


def _refs(item: dict[str, Any]) -> list[str]:
    refs = _first(item, "sourceRefs", "source_refs")
    return [str(r) for r in refs if isinstance(r, (str, int))] if isinstance(refs, list) else []


def _handle(item: dict[str, Any]) -> str | None:
    """An item's `handle` (or `uri`) when it is an `llmwiki://` handle; no query, fragment or userinfo."""
    uri = _safe_uri(_first(item, "handle", "uri"))
    return uri if uri is not None and uri.startswith("llmwiki://") else None


def _citation_items(payload: JsonObject) -> list[Any]:
    return [item for key in ("evidence", "citations") if isinstance(payload.get(key), list)
            for item in payload[key]]


def _citation(item: dict[str, Any], index: int, source: SourceDescriptor) -> Citation:
    raw_id = _first_str(item, "id", "page_id", "path") or str(index + 1)
    page_id = _first_str(item, "page_id", "pageId", "id") or raw_id
    cid = raw_id if raw_id.startswith(f"{source.id}:") else f"{source.id}:{raw_id}"
    score = item.get("score")
    return Citation(
        id=cid, source_id=source.id, page_id=page_id,
        title=_str(item.get("title")) or "Untitled", path=_str(item.get("path")),
        score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        snippet=markdown_readable(item.get("snippet")),
        connection_id=_first_str(item, "connectionId", "connection_id") or source.id,
        source_refs=_refs(item), handle=_handle(item))


# A citation depends only on its item, the item's place in the payload's items and the source.
MadeCitations = dict[tuple[int, int], Citation]


def early_citations(payload: JsonObject, source: SourceDescriptor) -> MadeCitations:
    """The citations of the payload's items so far, by (place, identity) of their item: an item
    still at its place later (search augmentation appends) need not be made again."""
    return {(index, id(item)): _citation(item, index, source)
            for index, item in enumerate(_citation_items(payload)) if isinstance(item, dict)}


def citations_from(payload: JsonObject, source: SourceDescriptor,
                   made: MadeCitations | None = None) -> list[Citation]:
    """`made` is `early_citations` of this payload before items were added to it, if it was made
    (its items are still alive in the payload, so their identities are still theirs)."""
    citations: list[Citation] = []
    for index, item in enumerate(_citation_items(payload)):
        if not isinstance(item, dict):
            continue
        citation = made.get((index, id(item))) if made else None
        citations.append(citation if citation is not None else _citation(item, index, source))
    return citations


def _graph_items(payload: JsonObject, source_id: str) -> tuple[list[JsonObject], list[JsonObject], bool]:
    """The source's graph nodes and edges in their wire form, ids namespaced by the source, every
    field normalised to its type (the usual case, a non-empty string, skips the fallbacks), and
    whether every edge joins two of the source's own nodes."""
    raw = as_object(payload.get("graph")) or payload
    prefix = source_id + ":"
    nodes: list[JsonObject] = []
    local_ids: set[str] = set()
    index = 0
    for node in as_list(raw.get("nodes")):
        if not isinstance(node, dict):
            continue
        index += 1
        node_id = node.get("id")
        if type(node_id) is not str or not node_id:
            node_id = _str(node_id) or f"node:{index}"
        local_ids.add(node_id)
        label = node.get("label")
        if type(label) is not str or not label:
            label = _first_str(node, "label", "title", "id") or f"Node {index}"
        kind = node.get("kind")
        if type(kind) is not str or not kind:
            kind = _first_str(node, "kind", "role") or "node"
        path = node.get("path")
        metadata = node.get("metadata")
        nodes.append({
            "id": prefix + node_id, "label": label, "kind": kind,
            "path": path if type(path) is str else _str(path),
            "metadata": {**metadata, "connectionId": source_id} if isinstance(metadata, dict)
            else {"connectionId": source_id}})
    edges: list[JsonObject] = []
    all_local = True
    for edge in as_list(raw.get("edges")):
        if not isinstance(edge, dict):
            continue
        source, target = edge.get("source"), edge.get("target")
        if type(source) is not str:
            source = _str(source)
        if type(target) is not str:
            target = _str(target)
        if not source or not target:
            continue
        relation = edge.get("relation")
        if type(relation) is not str or not relation:
            relation = _first_str(edge, "relation", "kind") or "related"
        metadata = edge.get("metadata")
        source_local, target_local = source in local_ids, target in local_ids
        all_local = all_local and source_local and target_local
        edges.append({
            "source": prefix + source if source_local else source,
            "target": prefix + target if target_local else target,
            "relation": relation,
            "metadata": {**metadata, "connectionId": source_id} if isinstance(metadata, dict)
            else {"connectionId": source_id}})
    return nodes, edges, all_local


def graph_from(payload: JsonObject, source_id: str) -> Graph:
    """The source's graph as models, validated in one call (a query answer carries a hundred nodes
    and edges or more)."""
    nodes, edges, _local = _graph_items(payload, source_id)
    return Graph.model_validate({"nodes": nodes, "edges": edges})


@dataclass(frozen=True)
class EvidenceGraph:
    """A run's graph kept in its wire form: the run only counts, merges and writes it, so building
    a model per node and dumping each again would be wasted (`model()` gives the models).

    `nodes_json` and `edges_json` are the lists' compact JSON, written as the source answered (for a
    graph of one source, the slowest one's is then the only one written after its answer). A graph
    with a `namespace` has node ids and edge ends all `<namespace>:...` and no repeated node id or
    edge key, so such graphs of different colon-free namespaces never share a key."""

    nodes: list[JsonObject]
    edges: list[JsonObject]
    nodes_json: Sequence[bytes | memoryview] | None = None
    edges_json: Sequence[bytes | memoryview] | None = None
    namespace: str | None = None

    def wire(self) -> JsonObject:
        """Equal to `self.model().wire()`; the lists are shared, not copied. With the lists' JSON at
        hand, the dict carries it, so the answer's writer does not write them again."""
        items = {"nodes": self.nodes, "edges": self.edges}
        if self.nodes_json is None or self.edges_json is None:
            return items
        return WrittenDict(items, [b'{"nodes":', *self.nodes_json, b',"edges":', *self.edges_json, b"}"])

    def model(self) -> Graph:
        return Graph.model_validate({"nodes": self.nodes, "edges": self.edges})


def evidence_graph(payload: JsonObject, source_id: str) -> EvidenceGraph:
    """`graph_from` in wire form, with its lists' JSON. Metadata is the source's own JSON; the rare
    one with a NaN or an infinity (which the model's dump writes as null) or a lone surrogate goes
    through the model (so does, needlessly, a text that spells NaN or Infinity)."""
    nodes, edges, all_local = _graph_items(payload, source_id)
    try:
        nodes_json = pydantic_core.to_json(nodes, inf_nan_mode="constants")
        edges_json = pydantic_core.to_json(edges, inf_nan_mode="constants")
        plain = not any(b"NaN" in text or b"Infinity" in text for text in (nodes_json, edges_json))
    except PydanticSerializationError:
        plain = False
    if not plain:
        wire = Graph.model_validate({"nodes": nodes, "edges": edges}).wire()
        return EvidenceGraph(wire["nodes"], wire["edges"])
    unique = (len({node["id"] for node in nodes}) == len(nodes) and all_local
              and len({(e["source"], e["target"], e["relation"]) for e in edges}) == len(edges))
    return EvidenceGraph(nodes, edges, [nodes_json], [edges_json], source_id if unique else None)


def evidence_from(payload: JsonObject, source: SourceDescriptor, graph: EvidenceGraph | None = None,
                  made: MadeCitations | None = None) -> SourceEvidence:
    """`graph` is the payload's `evidence_graph` and `made` its `early_citations`, when they were
    made already."""
    orientation = []
    for item in as_list(payload.get("orientation")):
        if isinstance(item, dict):
            orientation.append(_preview(_str(item.get("path")), _str(item.get("title")),
                                        _str(_first(item, "id", "page_id", "pageId"))))
    return SourceEvidence(
        wiki_title=_str(_first(payload, "wiki_title", "wikiTitle", "title")) or source.name,
        citations=citations_from(payload, source, made),
        graph=graph if graph is not None else evidence_graph(payload, source.id),
        orientation=[o for o in orientation if o])


def merge_graphs(graphs: Sequence[Graph]) -> Graph:
    nodes: dict[str, GraphNode] = {}
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    for graph in graphs:
        for node in graph.nodes:
            nodes.setdefault(node.id, node)
        for edge in graph.edges:
            edges.setdefault((edge.source, edge.target, edge.relation), edge)
    return Graph(nodes=list(nodes.values()), edges=list(edges.values()))


def merge_evidence_graphs(graphs: Sequence[EvidenceGraph]) -> EvidenceGraph:
    """`merge_graphs` for graphs in wire form: the first node per id, the first edge per
    (source, target, relation)."""
    namespaces = [graph.namespace for graph in graphs]
    if graphs and all(namespaces) and len(set(namespaces)) == len(namespaces) and not any(
            ":" in name for name in namespaces if name):
        return _joined(graphs)  # no key can repeat: every item is kept, in order
    all_nodes = [node for graph in graphs for node in graph.nodes]
    all_edges = [edge for graph in graphs for edge in graph.edges]
    # Without a repeated key a comprehension keeps every item in order; with one, the first wins.
    nodes = {node["id"]: node for node in all_nodes}
    if len(nodes) != len(all_nodes):
        nodes = {}
        for node in all_nodes:
            nodes.setdefault(node["id"], node)
    edges = {(edge["source"], edge["target"], edge["relation"]): edge for edge in all_edges}
    if len(edges) != len(all_edges):
        edges = {}
        for edge in all_edges:
            edges.setdefault((edge["source"], edge["target"], edge["relation"]), edge)
    return EvidenceGraph(list(nodes.values()), list(edges.values()))


def _joined(graphs: Sequence[EvidenceGraph]) -> EvidenceGraph:
    """Graphs with disjoint keys, one after the other; their lists' JSON joined when they all have it."""
    nodes = [node for graph in graphs for node in graph.nodes]
    edges = [edge for graph in graphs for edge in graph.edges]
    parts = [(graph.nodes_json, graph.edges_json) for graph in graphs]
    if any(nodes_json is None or edges_json is None for nodes_json, edges_json in parts):
        return EvidenceGraph(nodes, edges)
    return EvidenceGraph(nodes, edges, _joined_lists([p[0] for p in parts]),
                         _joined_lists([p[1] for p in parts]))


def _joined_lists(lists: Sequence[Sequence[bytes | memoryview] | None]) -> list[bytes | memoryview]:
    """The JSON of the concatenated lists from each list's JSON (`[a,b]` and `[c]` give `[a,b,c]`)."""
    inner = [memoryview(b"".join(parts))[1:-1] for parts in lists if parts is not None]
    joined: list[bytes | memoryview] = [b"["]
    for items in inner:
        if len(items):
            if len(joined) > 1:
                joined.append(b",")
            joined.append(items)
    joined.append(b"]")
    return joined


def dedupe_citations(groups: Sequence[Sequence[Citation]]) -> list[Citation]:
    seen: dict[str, Citation] = {}
    for group in groups:
        for citation in group:
            seen.setdefault(citation.id, citation)
    return list(seen.values())


# ----------------------------------------------------------------------------- source bundle

def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _safe_uri(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("urn:"):
        return value if _SAFE_REF.match(value) else None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https", "llmwiki") or not parts.netloc:
        return None
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _flag(value: Any) -> bool | None:
    """A JSON boolean, or the strings "true"/"false" as the reference reads them."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _number(value: Any) -> int | None:
    """A count given as a number or a numeric string (fractions truncated)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value)


def _raw_origins(origins: Any) -> RawOriginsSummary | None:
    """An object gives its flags and counts (a label list counts even when empty); a list or a
    comma string gives how many origins it names."""
    if isinstance(origins, (list, str)):
        items = origins if isinstance(origins, list) else origins.split(",")
        count = sum(1 for item in items if str(item).strip())
        return RawOriginsSummary(origin_count=count) if count else None
    if not isinstance(origins, dict):
        return None
    labels = next((origins[key] for key in ("public_root_labels", "publicRootLabels")
                   if isinstance(origins.get(key), list)), None)
    counts = (_number(origins.get(key)) for key in ("origin_count", "originCount", "count"))
    metadata_only = (_flag(origins.get(key)) for key in ("metadata_only", "metadataOnly"))
    summary = RawOriginsSummary(
        enabled=_flag(origins.get("enabled")),
        metadata_only=next((f for f in metadata_only if f is not None), None),
        origin_count=next((c for c in counts if c is not None), None),
        public_root_label_count=len(labels) if labels is not None else None)
    return summary if summary.model_dump(exclude_none=True) else None


def source_bundle(raw: JsonObject, source: SourceDescriptor) -> SourceBundle:
    """The strict allow-list: roots, locators, linked pages and unknown keys are dropped."""
    projection_raw = as_object(raw.get("projection"))
    merged = {**raw, **projection_raw}
    refs_raw = _first(raw, "source_refs", "sourceRefs")
    refs = refs_raw if isinstance(refs_raw, list) else []
    raw_origins = _raw_origins(_first(raw, "raw_origins", "rawOrigins"))
    capabilities = raw.get("capabilities")
    projection = ProjectionSummary(
        signature=_str(_first(merged, "signature", "projection_signature", "projectionSignature")) or None,
        page_count=_count(_first(merged, "page_count", "pageCount")),
        approved_page_count=_count(_first(merged, "approved_page_count", "approvedPageCount")),
        graph_node_count=_count(_first(merged, "graph_node_count", "graphNodeCount")),
        graph_edge_count=_count(_first(merged, "graph_edge_count", "graphEdgeCount")),
        source_ref_count=len(refs) if refs else None)
    return SourceBundle(
        connection_id=source.id,
        source_id=_str(_first(raw, "source_id", "sourceId")) or source.id,
        bundle_id=_str(_first(raw, "bundle_id", "bundleId")) or None,
        title=_str(raw.get("title")) or None,
        capabilities=[c.strip() for c in capabilities if isinstance(c, str) and c.strip()] or None
        if isinstance(capabilities, list) else None,
        adapter=_str(raw.get("adapter")) or source.adapter or None,
        implementation=_str(raw.get("implementation")) or source.implementation or None,
        projection=projection if projection.model_dump(exclude_none=True) else None,
        raw_origins=raw_origins,
        source_refs=[BundleSourceRef(
            id=_str(_first(r, "id", "source_ref_id", "sourceRefId")) or None,
            label=_str(_first(r, "label", "name")) or None,
            type=_str(_first(r, "type", "kind")) or None,
            uri=_safe_uri(r.get("uri"))) for r in refs[:40] if isinstance(r, dict)] or None,
        source_ref_count=len(refs) if refs else None)


def bundle_capabilities(raw: JsonObject | None) -> tuple[str, ...]:
    caps = (raw or {}).get("capabilities")
    return tuple(c.strip() for c in caps if isinstance(c, str)) if isinstance(caps, list) else ()


# ----------------------------------------------------------------------------- steps and diagnostics

def step(step_id: str, label: str, status: str, **extra: Any) -> TraceStep:
    return TraceStep(id=step_id, label=label, status=status,
                     timestamp=now_iso(), **extra)


def failure_observations(error: SourceCallError) -> list[tuple[str, str]]:
    """The safe facts of a failed source call (status, timeout, bad JSON, JSON-RPC error, policy)."""
    observations: list[tuple[str, str]] = []
    if error.http_status is not None:
        observations.append(("httpStatus", str(error.http_status)))
    if error.timeout:
        observations.append(("timeout", "true"))
    if error.invalid_json:
        observations.append(("invalidJson", "true"))
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
        else:
            remediation = "Check that the Knowledge Source is running and reachable, then retry."
    else:
        severity, message = "warning", f"{label} source bundle metadata could not be read."
        remediation = "The run continued without source bundle metadata."
    return Diagnostic(severity=severity, scope="source", phase=phase,
                      protocol=source.protocol, subject=safe_id(source.id), retryable=error.retryable,
                      observations=[Observation(name=n, value=safe_trace_text(v)) for n, v in observations],
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
        refs.append(CitationRef(
            id=safe_trace_text(citation.id) if _safe_ref_text(citation.id) else None,
            title=safe_trace_text(citation.title) if title_ok else None,
            path=safe_trace_text(path) if path_ok else None,
            source_refs=source_refs or None))
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

def evidence_only_answer(citations: Sequence[Citation], graph: Graph | EvidenceGraph,
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


def task_envelope(answer: str, result: JsonObject, request_id: str, trace_id: str) -> JsonObject:
    """The A2A task: a completed status, the answer as a text part, the result as a data artifact."""
    return {
        "id": str(uuid.uuid4()), "requestId": request_id, "traceId": trace_id,
        "status": {"state": "completed", "message": {"parts": [{"kind": "text", "text": answer}]}},
        "message": {"role": "agent", "parts": [{"kind": "text", "text": answer}]},
        "artifacts": [{"name": ARTIFACT_NAME, "parts": [{"kind": "data", "data": result}]}],
    }
