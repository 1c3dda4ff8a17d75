"""A snapshot's graph, made on first use: link index, lookup, backlinks, facts, owners, views, counts."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from serve.graph.evidence import SidecarFact, first_owners, incoming_links, sidecar_facts
from serve.graph.indexed_views import ApprovedView, FullView
from serve.graph.links import LinkIndex, SidecarPart, sidecar_part
from serve.graph.model import Edge, Fragment, Node, build_graph, build_lookup, graph_counts
from serve.graph.views import GraphView, approved_view
from serve.source.page import Page

if TYPE_CHECKING:
    from serve.snapshot.projection import Projection

# Each function reads one snapshot and fills what it computes into the snapshot's caches
# (serve/snapshot/caches.py); Projection answers for its graph through them.


def _all_pages(page: Page) -> bool:
    return True


def _approved_only(page: Page) -> bool:
    return page.approved


def indexable(snapshot: Projection) -> bool:
    """Whether the graph can be answered from the link index: each page's graph edges
    are its own (unique page ids) and no rule spans pages (the Dendron hierarchy)."""
    caches = snapshot.caches
    if caches.indexable is None:
        pages, by_key = snapshot.pages, snapshot.by_key
        caches.indexable = snapshot.layout.adapter != "dendron" and all(
            pages[by_key[page.id]] is page for page in pages)
    return caches.indexable


def links(snapshot: Projection) -> LinkIndex:
    """The link index (built on first use, or derived from the parent snapshot's)."""
    caches = snapshot.caches
    if caches.links is None:
        caches.links = new_links(snapshot)
    return caches.links


def new_links(snapshot: Projection) -> LinkIndex:
    """A link index of the snapshot built from every page (not kept by it)."""
    return LinkIndex.build(snapshot.pages, snapshot.fragments, source_root(snapshot), lookup(snapshot))


def source_root(snapshot: Projection) -> str:
    """The folder the source's paths are relative to, as its lookup keys spell it."""
    return str(snapshot.layout.metadata.get("source_root", "."))


def lookup(snapshot: Projection) -> Mapping[str, Page]:
    caches = snapshot.caches
    if caches.lookup is None and caches.links is not None:
        caches.lookup = caches.links.lookup
    if caches.lookup is None:
        caches.lookup = build_lookup(snapshot.pages, snapshot.fragments, source_root(snapshot))
    return caches.lookup


def sidecar_part_of(snapshot: Projection) -> SidecarPart:
    caches = snapshot.caches
    if caches.sidecar is None:
        index = links(snapshot)

        def page_edge(key: tuple[str, str, str]) -> Edge | None:
            found = page_of(snapshot, key[0])
            if found is None or key[1] not in index.targets.get(found[0].path, ()):
                return None
            for edge in index.segment(*found).by_target.get(key[1], ()):
                if edge.relation == key[2]:
                    return edge
            return None

        caches.sidecar = sidecar_part(snapshot.sidecars, index.lookup, page_edge,
                                      lambda nid: bool(index.refs.get(nid)))
    return caches.sidecar


def page_of(snapshot: Projection, nid: str) -> tuple[Page, Fragment] | None:
    """The page (and fragment) of page node `nid`."""
    if not nid.startswith("page:"):
        return None
    index = snapshot.by_key.get(nid[5:])
    if index is None or snapshot.pages[index].id != nid[5:]:
        return None
    return snapshot.pages[index], snapshot.fragments[index]


def page_at(snapshot: Projection, path: str) -> tuple[Page, Fragment] | None:
    index = snapshot.position.get(path)
    return None if index is None else (snapshot.pages[index], snapshot.fragments[index])


def approved_path(snapshot: Projection, path: str) -> bool:
    index = snapshot.position.get(path)
    return index is not None and snapshot.pages[index].approved


def incoming(snapshot: Projection) -> Mapping[str, list[int]]:
    """Page path -> positions of the pages linking to it (for evidence graphs)."""
    caches = snapshot.caches
    if caches.incoming is None:
        caches.incoming = incoming_links(snapshot.pages, snapshot.fragments, lookup(snapshot))
    return caches.incoming


def adopt_link_views(snapshot: Projection, incoming: Mapping[str, list[int]], owners: dict[str, str],
                     lookup: Mapping[str, Page]) -> None:
    """Views the snapshot would compute, taken from the restart cache (which checked them
    against the snapshot's signature and pages); those computed already stay."""
    caches = snapshot.caches
    if caches.lookup is None:
        caches.lookup = lookup
    if caches.incoming is None:
        caches.incoming = incoming
    caches.owners.setdefault(False, owners)


def adopt_links(snapshot: Projection, index: LinkIndex) -> None:
    """The snapshot's link index, taken from the store (which checked it against the
    snapshot's signature and pages), unless one was made already."""
    caches = snapshot.caches
    if caches.links is None:
        caches.links = index


def link_views_at_hand(snapshot: Projection) -> bool:
    """Whether link_views() answers without reading every page's fragment."""
    caches = snapshot.caches
    return (caches.incoming is not None and caches.lookup is not None and False in caches.owners) or (
        caches.links is not None and indexable(snapshot))


def link_views(snapshot: Projection) -> tuple[Mapping[str, list[int]], dict[str, str], Mapping[str, Page]]:
    """The views the store keeps beside the index (backlinks, the owners of shared nodes with
    drafts withheld, the lookup): those made, else from the link index when there is one
    (the referrers of page nodes are the backlinks; evidence.first_owners' owner is a node's
    first visible referrer), else made from every fragment."""
    caches = snapshot.caches
    links = caches.links
    if (caches.incoming is None or False not in caches.owners) and links is not None and indexable(snapshot):
        at = snapshot.position
        refs = links.refs
        incoming = {page.path: [at[path] for path in referrers] for page in snapshot.pages
                    if (referrers := refs.get(f"page:{page.id}"))}
        visible = partial(approved_path, snapshot)
        owners = {nid: found for nid in refs if not nid.startswith(("page:", "heading:"))
                  and (found := links.first_visible(nid, visible)) is not None}
        return incoming, owners, links.lookup
    return snapshot.incoming, snapshot.owners(False), snapshot.lookup


def built_links(snapshot: Projection) -> LinkIndex | None:
    """The link index if made (or taken from the store) already: it is not made here."""
    return snapshot.caches.links


def facts(snapshot: Projection) -> dict[str, list[SidecarFact]]:
    """Page path -> sidecar facts touching it (for evidence graphs)."""
    caches = snapshot.caches
    if caches.facts is None:
        caches.facts = sidecar_facts(snapshot.sidecars, lookup(snapshot))
    return caches.facts


def owners(snapshot: Projection, include_drafts: bool) -> dict[str, str]:
    """Shared graph node -> path of its first visible page (computed once)."""
    found = snapshot.caches.owners.get(include_drafts)
    if found is None:
        found = snapshot.caches.owners[include_drafts] = first_owners(
            snapshot.pages, snapshot.fragments, lookup(snapshot),
            _all_pages if include_drafts else _approved_only)
    return found


def whole_graph(snapshot: Projection) -> tuple[list[Node], list[Edge]]:
    """Every node and edge, built whole (once)."""
    caches = snapshot.caches
    if caches.graph is None:
        caches.graph = build_graph(snapshot.pages, snapshot.fragments, snapshot.layout.adapter,
                                   snapshot.sidecars, lookup(snapshot))
    return caches.graph


def counts(snapshot: Projection) -> tuple[int, int]:
    caches = snapshot.caches
    if caches.graph_counts is None:
        if caches.graph is not None:  # already built: count it
            caches.graph_counts = len(caches.graph[0]), len(caches.graph[1])
        elif caches.links is not None and indexable(snapshot):
            side = sidecar_part_of(snapshot)
            caches.graph_counts = (len(snapshot.pages) + caches.links.member_nodes + len(side.nodes),
                                   caches.links.segment_edges + len(side.edges))
        else:
            caches.graph_counts = graph_counts(snapshot.pages, snapshot.fragments,
                                               snapshot.layout.adapter, snapshot.sidecars,
                                               lookup(snapshot))
    return caches.graph_counts


def full_graph(snapshot: Projection) -> GraphView:
    """The draft-inclusive view: node by node from the link index when the graph allows
    (its full lists only built when asked for), else built whole."""
    caches = snapshot.caches
    if caches.full_graph is None:
        if indexable(snapshot):
            caches.full_graph = FullView(
                links(snapshot), partial(page_of, snapshot), partial(page_at, snapshot),
                sidecar_part_of(snapshot), snapshot.base_meta,
                partial(whole_graph, snapshot), snapshot.pages)
        else:
            nodes, edges = whole_graph(snapshot)
            caches.full_graph = GraphView(nodes, edges, snapshot.base_meta)
    return caches.full_graph


def approved_graph(snapshot: Projection) -> GraphView:
    caches = snapshot.caches
    if caches.approved_graph is None:
        full = full_graph(snapshot)
        if isinstance(full, FullView):
            caches.approved_graph = ApprovedView(
                full, partial(approved_path, snapshot), partial(approved_paths, snapshot),
                partial(withheld, snapshot), partial(_approved_lists, snapshot),
                snapshot.approved_pages)
        else:
            nodes, edges = whole_graph(snapshot)
            caches.approved_graph = approved_view(nodes, edges, snapshot.pages, snapshot.base_meta)
    return caches.approved_graph


def _approved_lists(snapshot: Projection) -> tuple[list[Node], list[Edge]]:
    nodes, edges = whole_graph(snapshot)
    view = approved_view(nodes, edges, snapshot.pages, snapshot.base_meta)
    return view.nodes, view.edges


def approved_paths(snapshot: Projection) -> set[str]:
    caches = snapshot.caches
    if caches.approved_paths is None:
        caches.approved_paths = {p.path for p in snapshot.approved_pages}
    return caches.approved_paths


def withheld(snapshot: Projection) -> list[str]:
    """Paths of withheld pages (approved_view's), whose mention a view drops."""
    caches = snapshot.caches
    if caches.withheld is None:
        caches.withheld = sorted({p.path for p in snapshot.pages if not p.approved}
                                 - approved_paths(snapshot))
    return caches.withheld
