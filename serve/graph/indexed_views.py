"""Graph views answered node by node from a snapshot's link index: the full one and the approved one."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from serve.graph.model import Edge, Fragment, Node, page_node
from serve.graph.views import GraphView, contains_text
from serve.source.page import Page

if TYPE_CHECKING:
    from serve.graph.links import LinkIndex, Segment, SidecarPart


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
            meta = {k: v for k, v in meta.items() if not contains_text(v, withheld, shortest)}
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
        if withheld and meta and contains_text(meta, withheld, shortest):
            return edge._replace(meta={k: v for k, v in meta.items()
                                       if not contains_text(v, withheld, shortest)})
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
