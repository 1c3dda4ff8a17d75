"""Visibility-filtered views of a built graph, with adjacency, and their JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from common.json_wire import json_bytes
from serve.graph.model import Edge, Node
from serve.source.page import Page

PAGE_JSON_ENTRIES = 50_000  # page nodes' JSON kept per snapshot (~300 bytes each)


def compact_json(value: Any) -> str:
    """JSON as the services answer it (the project's one writer), as text: the pieces a
    context pack's graph is put together from."""
    return json_bytes(value).decode("utf-8")


def contains_text(value: Any, needles: Sequence[str], shortest: int = 0) -> bool:
    """Whether any string in `value` contains one of `needles` (`shortest`: the length of
    the shortest needle, so shorter strings are passed over without a look)."""
    if isinstance(value, str):
        return len(value) >= shortest and any(n in value for n in needles)
    if isinstance(value, dict):
        return any(contains_text(v, needles, shortest) for v in value.values())
    if isinstance(value, list):
        return any(contains_text(v, needles, shortest) for v in value)
    return False


class GraphView:
    """A visibility-filtered graph in graph order, with adjacency, rendered on demand."""

    def __init__(self, nodes: list[Node], edges: list[Edge], base_meta: dict[str, Any],
                 page_json: dict[str, str] | None = None) -> None:
        self.nodes = nodes
        self.edges = edges
        self.base_meta = base_meta
        self.page_json = page_json
        self._by_id: dict[str, Node] | None = None
        self._outgoing: dict[str, list[Edge]] | None = None
        self._incoming: dict[str, list[Edge]] | None = None

    @property
    def by_id(self) -> dict[str, Node]:
        if self._by_id is None:
            self._by_id = {n.id: n for n in self.nodes}
        return self._by_id

    def outgoing(self, node_id: str) -> list[Edge]:
        if self._outgoing is None:
            self._index()
        assert self._outgoing is not None
        return self._outgoing.get(node_id, [])

    def incoming(self, node_id: str) -> list[Edge]:
        if self._incoming is None:
            self._index()
        assert self._incoming is not None
        return self._incoming.get(node_id, [])

    def _index(self) -> None:
        out: dict[str, list[Edge]] = {}
        inc: dict[str, list[Edge]] = {}
        for edge in self.edges:
            out.setdefault(edge.source, []).append(edge)
            inc.setdefault(edge.target, []).append(edge)
        self._outgoing, self._incoming = out, inc

    def node_dict(self, node: Node) -> dict[str, Any]:
        meta = node.meta
        if isinstance(meta, Page):
            metadata: dict[str, Any] = {**self.base_meta, "source_refs": list(meta.source_refs),
                                        "review_state": meta.review_state,
                                        "okf": json.loads(meta.okf_json) if meta.okf_json else {}}
        else:
            metadata = dict(meta) if meta else {}
        return {"id": node.id, "label": node.label, "kind": node.kind, "path": node.path,
                "metadata": metadata}

    @staticmethod
    def edge_dict(edge: Edge) -> dict[str, Any]:
        return {"source": edge.source, "target": edge.target, "relation": edge.relation,
                "metadata": dict(edge.meta) if edge.meta else {}}

    def payload(self, nodes: Iterable[Node], edges: Iterable[Edge]) -> dict[str, list[dict[str, Any]]]:
        return {"nodes": [self.node_dict(n) for n in nodes], "edges": [self.edge_dict(e) for e in edges]}

    def node_json(self, node: Node) -> str:
        """compact_json(self.node_dict(node)). Page nodes' JSON depends on the page alone and
        is kept in `page_json` (by path) when the view has one."""
        meta = node.meta
        if not isinstance(meta, Page):
            return compact_json(self.node_dict(node))
        cache = self.page_json if self.page_json is not None else {}
        text = cache.get(meta.path)
        if text is None:
            text = compact_json(self.node_dict(node))
            if len(cache) < PAGE_JSON_ENTRIES:
                cache[meta.path] = text
        return text

    def truncated(self, limit: int) -> dict[str, list[dict[str, Any]]]:
        """First `limit` nodes and the edges closed over them, at most `limit` edges."""
        if limit <= 0:
            return {"nodes": [], "edges": []}
        nodes = self.nodes[:limit]
        keep = {n.id for n in nodes}
        edges = []
        for edge in self.edges:
            if edge.source in keep and edge.target in keep:
                edges.append(edge)
                if len(edges) >= limit:
                    break
        return self.payload(nodes, edges)


def approved_view(nodes: list[Node], edges: list[Edge], pages: Sequence[Page],
                  base_meta: dict[str, Any]) -> GraphView:
    """The approved-only graph: approved pages, the non-page nodes they touch, never a
    withheld page's path (contract 2.8)."""
    approved_ids = {f"page:{p.id}": p.path for p in pages if p.approved}
    approved_paths = set(approved_ids.values())
    withheld_paths = sorted({p.path for p in pages if not p.approved} - approved_paths)
    shortest = min(map(len, withheld_paths), default=0)
    first_adjacent: dict[str, str] = {}
    for edge in edges:
        s, t = edge.source, edge.target
        if s in approved_ids and not t.startswith("page:"):
            first_adjacent.setdefault(t, approved_ids[s])
        if t in approved_ids and not s.startswith("page:"):
            first_adjacent.setdefault(s, approved_ids[t])
    visible: list[Node] = []
    for node in nodes:
        if node.id.startswith("page:"):
            if node.id in approved_ids:
                visible.append(node)
            continue
        if node.id in first_adjacent or node.path in approved_paths:
            path = first_adjacent.get(node.id, node.path)
            meta = node.meta
            if withheld_paths and isinstance(meta, dict):
                meta = {k: v for k, v in meta.items() if not contains_text(v, withheld_paths, shortest)}
            if path != node.path or meta is not node.meta:
                node = node._replace(path=path, meta=meta)
            visible.append(node)
    keep = {n.id for n in visible}
    kept_edges = []
    for edge in edges:
        if edge.source in keep and edge.target in keep:
            meta = edge.meta
            if withheld_paths and meta and contains_text(meta, withheld_paths, shortest):
                edge = edge._replace(meta={k: v for k, v in meta.items()
                                           if not contains_text(v, withheld_paths, shortest)})
            kept_edges.append(edge)
    return GraphView(visible, kept_edges, base_meta)
