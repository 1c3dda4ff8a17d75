"""The projection: an immutable snapshot of pages, graph, identity and derived views."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from serve.source.layout import Layout
from serve.source.page import ROLE_RANK, Page
from serve.source.sidecar import SidecarEdge

SLUG_RE = re.compile(r"[^A-Za-z0-9\uac00-\ud7a3._-]+")
ISSUE_RE = re.compile(r"#\d+|[A-Z][A-Z0-9]+-\d+|GH-\d+")
RELATION_RE = re.compile(r"[^a-z0-9]+")

Node = dict[str, Any]
Edge = dict[str, Any]


def slug(value: str) -> str:
    """The contract's slug: runs outside [A-Za-z0-9가-힣._-] become '-', 'item' if empty."""
    return SLUG_RE.sub("-", value).strip("-") or "item"


def lookup_key(value: str) -> str:
    """Link lookup normalisation: case-, space- and punctuation-insensitive.

    Deliberately keeps every Unicode letter and digit (the reference kept only ASCII and
    Hangul, so Japanese or Chinese titles collided on the empty key)."""
    if value.lower().endswith(".md"):
        value = value[:-3]
    return "".join(ch for ch in value.casefold() if ch.isalnum())


def canonical_relation(value: str) -> str:
    return RELATION_RE.sub("_", value.lower()).strip("_") or "related_to"


def unresolved_node(value: str, path: str, source: str) -> Node:
    if value.startswith(("http://", "https://")):
        kind = "external_ref"
    elif ISSUE_RE.match(value):
        kind = "external_issue"
    else:
        kind = "placeholder"
    prefix = "external" if kind.startswith("external_") else "placeholder"
    return {
        "id": f"{prefix}:{slug(value)}",
        "label": value,
        "kind": kind,
        "path": path,
        "metadata": {"unresolved": True, "source": source},
    }


@dataclass(frozen=True, slots=True)
class SidecarFile:
    """One graph sidecar: its root-relative path and its edges."""

    path: str
    edges: tuple[SidecarEdge, ...]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A file the projection skipped or degraded, with a stable reason code."""

    path: str
    reason: str  # not_utf8, frontmatter_invalid, too_large, unreadable, symlink_ignored
    skipped: bool


class GraphBuilder:
    """Builds nodes and edges in the contract's order with its dedupe and merge rules."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: dict[tuple[str, str, str], Edge] = {}

    def node(self, node: Node) -> None:
        self.nodes.setdefault(node["id"], node)

    def edge(self, source: str, target: str, relation: str, metadata: dict[str, Any]) -> None:
        key = (source, target, relation)
        kept = self.edges.get(key)
        if kept is None:
            self.edges[key] = {"source": source, "target": target, "relation": relation,
                               "metadata": dict(metadata)}
            return
        merged = kept["metadata"]
        for name, value in metadata.items():
            current = merged.get(name)
            if current in (None, "", [], {}):
                merged[name] = value
            elif current != value:
                if isinstance(current, list):
                    if value not in current:
                        current.append(value)
                else:
                    merged[name] = [current, value]


def build_graph(pages: Sequence[Page], layout: Layout, sidecars: Sequence[SidecarFile],
                lookup: dict[str, Page]) -> tuple[list[Node], list[Edge]]:
    g = GraphBuilder()
    base_meta: dict[str, Any] = {"adapter": layout.adapter, "implementation": layout.implementation,
                                 **layout.metadata}
    for page in pages:
        g.node({
            "id": f"page:{page.id}",
            "label": page.title,
            "kind": page.role,
            "path": page.path,
            "metadata": {**base_meta, "source_refs": list(page.source_refs),
                         "review_state": page.review_state, "okf": {}},
        })
    for page in pages:
        pid = f"page:{page.id}"
        for heading in page.headings:
            hid = f"heading:{slug(page.id + ':' + heading)}"
            g.node({"id": hid, "label": heading, "kind": "heading", "path": page.path, "metadata": {}})
            g.edge(pid, hid, "contains", {})
        for ref in page.source_refs:
            sid = f"source:{slug(ref)}"
            g.node({"id": sid, "label": ref, "kind": "source_ref", "path": page.path, "metadata": {}})
            g.edge(pid, sid, "cites", {})
        for tag in page.tags:
            label = tag.lstrip("#")
            tid = f"tag:{slug(label.lower())}"
            g.node({"id": tid, "label": label, "kind": "tag", "path": page.path, "metadata": {}})
            g.edge(pid, tid, "tagged", {})
        for link in page.links:
            target = lookup.get(lookup_key(link))
            if target is not None:
                g.edge(pid, f"page:{target.id}", "links_to", {})
            else:
                node = unresolved_node(link, page.path, "wikilink")
                g.node(node)
                g.edge(pid, node["id"], "links_to", {"unresolved": True})
    if layout.adapter == "dendron":
        for page in pages:
            stem = page.path.rsplit(".", 1)[0] if "." in page.path.rsplit("/", 1)[-1] else page.path
            if "." not in stem.rsplit("/", 1)[-1]:
                continue
            parent_key = stem[: stem.rfind(".")]
            parent = lookup.get(lookup_key(parent_key))
            if parent is not None:
                source = f"page:{parent.id}"
            else:
                source = f"placeholder:{slug(parent_key)}"
                g.node({"id": source, "label": parent_key, "kind": "placeholder", "path": page.path,
                        "metadata": {"unresolved": True, "source": "dendron_hierarchy"}})
            g.edge(source, f"page:{page.id}", "parent_of", {"source": "dendron_hierarchy"})
    for sidecar in sidecars:
        for fact in sidecar.edges:
            src_page = lookup.get(lookup_key(fact.source))
            dst_page = lookup.get(lookup_key(fact.target))
            ends: list[str] = []
            end_page: Page | None
            for value, end_page, other in ((fact.source, src_page, dst_page),
                                       (fact.target, dst_page, src_page)):
                if end_page is not None:
                    ends.append(f"page:{end_page.id}")
                else:
                    node = unresolved_node(value, other.path if other else "", "graph.json")
                    g.node(node)
                    ends.append(node["id"])
            meta: dict[str, Any] = {"source": "graph.json", "path": sidecar.path}
            if fact.confidence is not None:
                meta["confidence"] = fact.confidence
            g.edge(ends[0], ends[1], canonical_relation(fact.type), meta)
    return list(g.nodes.values()), list(g.edges.values())


def build_lookup(pages: Iterable[Page], layout: Layout) -> dict[str, Page]:
    lookup: dict[str, Page] = {}
    nested = layout.metadata.get("source_root", ".")
    for page in pages:
        keys = [page.id, page.title, page.path, page.path.rsplit("/", 1)[-1]]
        if nested != ".":
            keys += [f"{nested}/{page.id}", f"{nested}/{page.path}"]
        for key in keys:
            norm = lookup_key(key)
            if norm:
                lookup[norm] = page
    return lookup


def _contains_text(value: Any, needles: Sequence[str]) -> bool:
    if isinstance(value, str):
        return any(n in value for n in needles)
    if isinstance(value, dict):
        return any(_contains_text(v, needles) for v in value.values())
    if isinstance(value, list):
        return any(_contains_text(v, needles) for v in value)
    return False


class GraphView:
    """A visibility-filtered graph: nodes and edges in graph order, with adjacency."""

    def __init__(self, nodes: list[Node], edges: list[Edge]) -> None:
        self.nodes = nodes
        self.edges = edges
        self.by_id: dict[str, Node] = {n["id"]: n for n in nodes}
        self.outgoing: dict[str, list[Edge]] = {}
        self.incoming: dict[str, list[Edge]] = {}
        for edge in edges:
            self.outgoing.setdefault(edge["source"], []).append(edge)
            self.incoming.setdefault(edge["target"], []).append(edge)

    def truncated(self, limit: int) -> dict[str, list[Any]]:
        """First `limit` nodes and the edges closed over them, at most `limit` edges."""
        if limit <= 0:
            return {"nodes": [], "edges": []}
        nodes = self.nodes[:limit]
        keep = {n["id"] for n in nodes}
        edges = []
        for edge in self.edges:
            if edge["source"] in keep and edge["target"] in keep:
                edges.append(edge)
                if len(edges) >= limit:
                    break
        return {"nodes": nodes, "edges": edges}


def approved_view(nodes: list[Node], edges: list[Edge], pages: Sequence[Page]) -> GraphView:
    """The approved-only graph: approved pages, the non-page nodes they touch, never a
    withheld page's path (contract 2.8)."""
    approved_paths = {p.path for p in pages if p.approved}
    approved_ids = {f"page:{p.id}" for p in pages if p.approved}
    withheld_paths = sorted({p.path for p in pages if not p.approved} - approved_paths)
    first_adjacent: dict[str, str] = {}
    node_path = {n["id"]: n["path"] for n in nodes}
    for edge in edges:
        s, t = edge["source"], edge["target"]
        if s in approved_ids and not t.startswith("page:"):
            first_adjacent.setdefault(t, node_path.get(s, ""))
        if t in approved_ids and not s.startswith("page:"):
            first_adjacent.setdefault(s, node_path.get(t, ""))
    visible: list[Node] = []
    for node in nodes:
        nid = node["id"]
        if nid.startswith("page:"):
            if nid in approved_ids:
                visible.append(node)
            continue
        if nid in first_adjacent or node["path"] in approved_paths:
            path = first_adjacent.get(nid, node["path"])
            meta = node["metadata"]
            if withheld_paths and meta:
                meta = {k: v for k, v in meta.items() if not _contains_text(v, withheld_paths)}
            if path != node["path"] or meta is not node["metadata"]:
                node = {**node, "path": path, "metadata": meta}
            visible.append(node)
    keep = {n["id"] for n in visible}
    kept_edges = []
    for edge in edges:
        if edge["source"] in keep and edge["target"] in keep:
            meta = edge["metadata"]
            if withheld_paths and meta and _contains_text(meta, withheld_paths):
                edge = {**edge, "metadata": {k: v for k, v in meta.items()
                                             if not _contains_text(v, withheld_paths)}}
            kept_edges.append(edge)
    return GraphView(visible, kept_edges)


def signature_of(lines: Iterable[str]) -> str:
    """`sha256:<hex>` over the walk-ordered entry lines, or "" for no entries."""
    body = "\n".join(lines)
    if not body:
        return ""
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def bundle_id_of(source_id: str, signature: str) -> str:
    if not signature:
        return source_id
    algorithm, sep, digest = signature.partition(":")
    if not sep:
        return f"{source_id}:{signature[:12]}"
    return f"{source_id}:{algorithm}:{digest[:12]}"


def orientation_order(pages: Iterable[Page]) -> list[Page]:
    """First hot, first index, first overview page, then every other page, by (role, path)."""
    ordered = sorted(pages, key=lambda p: (ROLE_RANK.get(p.role, 3), p.path))
    head: list[Page] = []
    for role in ("hot", "index", "overview"):
        for page in ordered:
            if page.role == role:
                head.append(page)
                break
    chosen = {id(p) for p in head}
    return head + [p for p in ordered if id(p) not in chosen]


class Projection:
    """One published snapshot of a folder. Never mutated after construction: derived views
    are computed once, on first use, and cached on the instance."""

    def __init__(
        self,
        *,
        layout: Layout,
        pages: Sequence[Page],
        sidecars: Sequence[SidecarFile],
        signature: str,
        root_name: str,
        source_id: str | None,
        raw_labels: Sequence[str],
        diagnostics: Sequence[Diagnostic],
    ) -> None:
        self.layout = layout
        self.pages: tuple[Page, ...] = tuple(
            replace(p, role=role) if (role := layout.role_of(p.path)) != p.role else p
            for p in pages
        )
        self.sidecars = tuple(sidecars)
        self.signature = signature
        self.raw_labels = list(raw_labels)
        self.diagnostics = tuple(diagnostics)
        title_page = self.first_with_role("index") or self.first_with_role("overview")
        if title_page is not None:
            self.title = title_page.wiki_title or title_page.title or layout.folder_name
            self.description = title_page.description
        else:
            self.title = layout.folder_name
            self.description = ""
        self.source_id = source_id or slug(self.title or root_name).lower()
        self.bundle_id = bundle_id_of(self.source_id, signature)
        self.public_uri = f"llmwiki://{self.source_id}"
        self.page_count = len(self.pages)
        self.approved_pages: tuple[Page, ...] = tuple(p for p in self.pages if p.approved)
        self.approved_page_count = len(self.approved_pages)
        self.lookup = build_lookup(self.pages, layout)
        self.nodes, self.edges = build_graph(self.pages, layout, self.sidecars, self.lookup)
        self._by_key: dict[str, Page] = {}
        for page in self.pages:  # first page in page order wins for an id or a path
            self._by_key.setdefault(page.id, page)
        for page in self.pages:
            self._by_key.setdefault(page.path, page)

    def first_with_role(self, role: str) -> Page | None:
        return next((p for p in self.pages if p.role == role), None)

    def find_page(self, key: str) -> Page | None:
        """Exact id or path match; request strings never reach the filesystem."""
        return self._by_key.get(key)

    def visible_pages(self, include_drafts: bool) -> tuple[Page, ...]:
        return self.pages if include_drafts else self.approved_pages

    @cached_property
    def full_graph(self) -> GraphView:
        return GraphView(self.nodes, self.edges)

    @cached_property
    def approved_graph(self) -> GraphView:
        return approved_view(self.nodes, self.edges, self.pages)

    def graph(self, include_drafts: bool) -> GraphView:
        return self.full_graph if include_drafts else self.approved_graph

    def projection_metadata(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "page_count": self.page_count,
            "approved_page_count": self.approved_page_count,
            "graph_node_count": len(self.nodes),
            "graph_edge_count": len(self.edges),
        }

    def raw_origins(self) -> dict[str, Any]:
        return {"enabled": False, "metadata_only": True, "public_root_labels": list(self.raw_labels)}

    def role_page_path(self, role: str) -> str:
        page = self.first_with_role(role)
        return page.path if page else ""

    def source_refs(self, include_drafts: bool) -> list[dict[str, Any]]:
        """Typed source-reference handles over the visible pages, sorted by id."""
        refs: dict[str, dict[str, Any]] = {}
        used: set[str] = set()
        for page in self.visible_pages(include_drafts):
            for label in page.source_refs:
                ref = refs.get(label)
                if ref is None:
                    ref_id = _unique_ref_id(label, used)
                    ref = {"id": ref_id, "label": label, "kind": "source_ref",
                           "uri": f"{self.public_uri}/source-refs/{ref_id}",
                           "linked_pages": [], "linked_page_ids": [], "locator": {}}
                    refs[label] = ref
                if page.path not in ref["linked_pages"]:
                    ref["linked_pages"].append(page.path)
                if page.id not in ref["linked_page_ids"]:
                    ref["linked_page_ids"].append(page.id)
        return sorted(refs.values(), key=lambda r: str(r["id"]))

    @cached_property
    def orientation(self) -> tuple[Page, ...]:
        return tuple(orientation_order(self.approved_pages))


def _unique_ref_id(label: str, used: set[str]) -> str:
    base = slug(label).lower()
    candidate = base
    if candidate in used:
        candidate = f"{base}-{hashlib.sha256(label.encode('utf-8')).hexdigest()[:8]}"
        n = 2
        stem = candidate
        while candidate in used:
            candidate = f"{stem}-{n}"
            n += 1
    used.add(candidate)
    return candidate


