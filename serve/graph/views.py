"""Visibility-filtered views of the link graph, with adjacency, and their JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from common.json_wire import json_bytes
from serve.graph.model import Edge, Fragment, Node, page_node
from serve.source.page import Page

if TYPE_CHECKING:
    from serve.graph.links import LinkIndex, Segment, SidecarPart

PAGE_JSON_ENTRIES = 50_000  # page nodes' JSON kept per snapshot (~300 bytes each)


def compact_json(value: Any) -> str:
    """JSON as the services answer it (the project's one writer), as text: the pieces a
    context pack's graph is put together from."""
    return json_bytes(value).decode("utf-8")


def _contains_text(value: Any, needles: Sequence[str], shortest: int = 0) -> bool:
    """Whether any string in `value` contains one of `needles` (`shortest`: the length of
    the shortest needle, so shorter strings are passed over without a look)."""
    if isinstance(value, str):
        return len(value) >= shortest and any(n in value for n in needles)
    if isinstance(value, dict):
        return any(_contains_text(v, needles, shortest) for v in value.values())
    if isinstance(value, list):
        return any(_contains_text(v, needles, shortest) for v in value)
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
                meta = {k: v for k, v in meta.items() if not _contains_text(v, withheld_paths, shortest)}
            if path != node.path or meta is not node.meta:
                node = node._replace(path=path, meta=meta)
            visible.append(node)
    keep = {n.id for n in visible}
    kept_edges = []
    for edge in edges:
        if edge.source in keep and edge.target in keep:
            meta = edge.meta
            if withheld_paths and meta and _contains_text(meta, withheld_paths, shortest):
                edge = edge._replace(meta={k: v for k, v in meta.items()
                                           if not _contains_text(v, withheld_paths, shortest)})
            kept_edges.append(edge)
    return GraphView(visible, kept_edges, base_meta)


class _NodeMap(Mapping[str, Node]):
    """A view's nodes by id, answered one id at a time (for `in` and `[]`)."""

    def __init__(self, view: IndexedView) -> None:
        self.view = view

    def __getitem__(self, nid: str) -> Node:
        node = self.view.node(nid)
        if node is None:
            raise KeyError(nid)
        return node

    def __contains__(self, nid: object) -> bool:
        return isinstance(nid, str) and self.view.node(nid) is not None

    def __iter__(self) -> Iterator[str]:
        return (node.id for node in self.view.nodes)

    def __len__(self) -> int:
        return len(self.view.nodes)


class IndexedView(GraphView):
    """A graph view answered node by node from a snapshot's link index: a node, its
    outgoing and its incoming edges each cost that node's neighbourhood, not the graph.
    The full lists (`nodes`, `edges`, for /graph and seed matching by name) are the one
    global part: built on first use by `lists`."""

    def __init__(self, base_meta: dict[str, Any], lists: Callable[[], tuple[list[Node], list[Edge]]]) -> None:
        self.base_meta = base_meta
        self.page_json = None
        self._lists = lists
        self._built: tuple[list[Node], list[Edge]] | None = None
        self._memo: dict[str, Node | None] = {}

    @property
    def nodes(self) -> list[Node]:  # type: ignore[override]
        if self._built is None:
            self._built = self._lists()
        return self._built[0]

    @property
    def edges(self) -> list[Edge]:  # type: ignore[override]
        if self._built is None:
            self._built = self._lists()
        return self._built[1]

    @property
    def by_id(self) -> Mapping[str, Node]:  # type: ignore[override]
        return _NodeMap(self)

    def truncated(self, limit: int) -> dict[str, list[dict[str, Any]]]:
        """GraphView.truncated without the full lists when the first `limit` nodes are all
        page nodes (pass 1 puts every page node first): the edges between them are those
        pages' own edges and then the sidecar's, each in graph order."""
        heads = self._page_heads(limit) if limit > 0 else None
        if heads is None:
            return super().truncated(limit)
        keep = {node.id for node in heads}
        edges: list[Edge] = []
        for node in heads:
            edges += [e for e in self._own_edges(node.id) if e.target in keep]
            if len(edges) >= limit:
                return self.payload(heads, edges[:limit])
        edges += [e for e in self._sidecar_edges() if e.source in keep and e.target in keep]
        return self.payload(heads, edges[:limit])

    def _page_heads(self, limit: int) -> list[Node] | None:
        """The view's first `limit` page nodes, or None when it has fewer pages."""
        raise NotImplementedError

    def _own_edges(self, nid: str) -> list[Edge]:
        """A page node's outgoing edges from its own page (not the sidecar's new ones)."""
        raise NotImplementedError

    def _sidecar_edges(self) -> list[Edge]:
        raise NotImplementedError

    def node(self, nid: str) -> Node | None:
        if nid not in self._memo:
            self._memo[nid] = self._node(nid)
        return self._memo[nid]

    def _node(self, nid: str) -> Node | None:
        raise NotImplementedError




class FullView(IndexedView):
    """The draft-inclusive graph (contract 2.2) from the link index."""

    def __init__(self, index: LinkIndex, page_of: Callable[[str], tuple[Page, Fragment] | None],
                 page_at: Callable[[str], tuple[Page, Fragment] | None], sidecar: SidecarPart,
                 base_meta: dict[str, Any], lists: Callable[[], tuple[list[Node], list[Edge]]],
                 pages: Sequence[Page] = ()) -> None:
        super().__init__(base_meta, lists)
        self.pages = pages  # in page order
        self.index = index
        self.page_of = page_of  # page node id -> its page and fragment
        self.page_at = page_at  # page path -> its page and fragment
        self.sidecar = sidecar

    def _segment(self, path: str) -> Segment | None:
        found = self.page_at(path)
        return None if found is None else self.index.segment(*found)

    def _node(self, nid: str) -> Node | None:
        if nid.startswith("page:"):
            found = self.page_of(nid)
            return None if found is None else page_node(found[0])
        paths = self.index.refs.get(nid)
        if paths:
            segment = self._segment(paths[0])
            if segment is not None:
                return segment.nodes[nid]
        return self.sidecar.nodes.get(nid)

    def outgoing(self, node_id: str) -> list[Edge]:
        return self._own_edges(node_id) + self.sidecar.outgoing.get(node_id, [])

    def _own_edges(self, nid: str) -> list[Edge]:
        found = self.page_of(nid) if nid.startswith("page:") else None
        if found is None:
            return []
        merged = self.sidecar.merged
        edges = self.index.segment(*found).edges
        return [merged.get(e[:3], e) for e in edges] if merged else list(edges)

    def _page_heads(self, limit: int) -> list[Node] | None:
        pages = self.pages
        return [page_node(page) for page in pages[:limit]] if len(pages) >= limit else None

    def _sidecar_edges(self) -> list[Edge]:
        return list(self.sidecar.edges.values())

    def incoming(self, node_id: str) -> list[Edge]:
        merged = self.sidecar.merged
        out: list[Edge] = []
        for path in self.index.refs.get(node_id, ()):
            segment = self._segment(path)
            if segment is None:
                continue
            for edge in segment.by_target[node_id]:
                out.append(merged.get(edge[:3], edge) if merged else edge)
        out += self.sidecar.incoming.get(node_id, [])
        return out


class ApprovedView(IndexedView):
    """The approved-only graph (contract 2.8) from the full one, node by node: the same
    visibility, path and metadata rules as approved_view()."""

    def __init__(self, full: FullView, approved_path: Callable[[str], bool],
                 approved_paths: Callable[[], set[str]], withheld: Callable[[], list[str]],
                 lists: Callable[[], tuple[list[Node], list[Edge]]],
                 pages: Sequence[Page] = ()) -> None:
        super().__init__(full.base_meta, lists)
        self.pages = pages  # the approved pages, in page order
        self._shortest: int | None = None
        self.full = full
        self.approved_path = approved_path
        self.approved_paths = approved_paths
        self.withheld = withheld

    def _approved_page(self, nid: str) -> str | None:
        if not nid.startswith("page:"):
            return None
        found = self.full.page_of(nid)
        return found[0].path if found is not None and found[0].approved else None

    def _node(self, nid: str) -> Node | None:
        node = self.full.node(nid)
        if node is None:
            return None
        if nid.startswith("page:"):
            return node if isinstance(node.meta, Page) and node.meta.approved else None
        first = self.full.index.first_visible(nid, self.approved_path)
        if first is None:  # the first approved page next to it through a sidecar edge
            side = self.full.sidecar
            order = side.order
            best: tuple[int, str] | None = None
            for edge in side.incoming.get(nid, []):
                path = self._approved_page(edge.source)
                if path is not None and (best is None or order[edge[:3]] < best[0]):
                    best = (order[edge[:3]], path)
            for edge in side.outgoing.get(nid, []):
                path = self._approved_page(edge.target)
                if path is not None and (best is None or order[edge[:3]] < best[0]):
                    best = (order[edge[:3]], path)
            first = best[1] if best is not None else None
        if first is None and node.path not in self.approved_paths():
            return None
        path = first if first is not None else node.path
        meta = node.meta
        withheld, shortest = self._needles()
        if withheld and isinstance(meta, dict):
            meta = {k: v for k, v in meta.items() if not _contains_text(v, withheld, shortest)}
        if path != node.path or meta is not node.meta:
            node = node._replace(path=path, meta=meta)
        return node

    def _needles(self) -> tuple[list[str], int]:
        if self._shortest is None:
            withheld = self.withheld()
            self._shortest = min(map(len, withheld), default=0)
        return self.withheld(), self._shortest

    def _edge(self, edge: Edge) -> Edge:
        withheld, shortest = self._needles()
        meta = edge.meta
        if withheld and meta and _contains_text(meta, withheld, shortest):
            return edge._replace(meta={k: v for k, v in meta.items()
                                       if not _contains_text(v, withheld, shortest)})
        return edge

    def outgoing(self, node_id: str) -> list[Edge]:
        if self.node(node_id) is None:
            return []
        return [self._edge(e) for e in self.full.outgoing(node_id) if self.node(e.target) is not None]

    def _own_edges(self, nid: str) -> list[Edge]:
        if self.node(nid) is None:
            return []
        return [self._edge(e) for e in self.full._own_edges(nid) if self.node(e.target) is not None]

    def _page_heads(self, limit: int) -> list[Node] | None:
        pages = self.pages
        return [page_node(page) for page in pages[:limit]] if len(pages) >= limit else None

    def _sidecar_edges(self) -> list[Edge]:
        return [self._edge(e) for e in self.full._sidecar_edges()
                if self.node(e.source) is not None and self.node(e.target) is not None]

    def incoming(self, node_id: str) -> list[Edge]:
        if self.node(node_id) is None:
            return []
        return [self._edge(e) for e in self.full.incoming(node_id) if self.node(e.source) is not None]
