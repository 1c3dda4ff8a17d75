"""A snapshot's evidence graph for a context pack: each evidence page's depth-1 items."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from serve.graph.budget import budget_seeds, budgeted_json
from serve.graph.evidence import SeedItems, edge_text, graph_json, merge_seeds, seed_items
from serve.graph.links import Owners
from serve.graph.model import page_node
from serve.graph.views import GraphView
from serve.snapshot import graph
from serve.source.page import Page

if TYPE_CHECKING:
    from serve.snapshot.projection import Projection

def evidence_graph_json(snapshot: Projection, seeds: Sequence[Page], include_drafts: bool,
                        limit: int, size: int | None = None) -> str:
    """The compact JSON of the neighbourhood of the evidence pages, for a context pack. With
    `size`, the graph is cut to that many bytes (graph/budget.py budget_seeds) and says so.
    Each page's items are rendered per pack: keeping them per snapshot saved under 1 ms a
    repeated pack and held up to 24 MB (docs/performance.md, issue 25)."""
    if limit <= 0 or not seeds:
        return graph_json([], [])
    view = GraphView([], [], snapshot.base_meta, snapshot.caches.page_json)  # writes the items' JSON
    parts = [_seed_items(snapshot, page, include_drafts).rendered(view) for page in seeds]
    if size is not None:
        return budgeted_json(budget_seeds(parts, limit, size, view.node_json))
    nodes, edges = merge_seeds(parts, limit, view.node_json)
    return graph_json(nodes, [edge_text(key, meta) for key, meta in edges.items()])


def _seed_items(snapshot: Projection, page: Page, include_drafts: bool) -> SeedItems:
    position = snapshot.position.get(page.path)
    if position is None:  # not a page of this snapshot: only its own node
        own = page_node(page)
        return SeedItems(own.id, own, (), ())
    pages = snapshot.pages
    links = snapshot.caches.links
    facts = graph.facts(snapshot)
    if links is None or not graph.indexable(snapshot):  # the plain views (also what the restart cache holds)
        return seed_items(page, snapshot.fragments[position], graph.lookup(snapshot),
                          (pages[i] for i in graph.incoming(snapshot).get(page.path, ())),
                          facts.get(page.path, ()), approved_only=not include_drafts,
                          owner=graph.owners(snapshot, include_drafts))
    at = snapshot.position
    owner = snapshot.caches.owner_views.get(include_drafts)
    if owner is None:
        owner = snapshot.caches.owner_views[include_drafts] = Owners(
            links, (lambda path: True) if include_drafts else partial(graph.approved_path, snapshot))
    return seed_items(page, snapshot.fragments[position], links.lookup,
                      (pages[at[path]] for path in links.refs.get(f"page:{page.id}", ())),
                      facts.get(page.path, ()), approved_only=not include_drafts,
                      owner=owner)  # type: ignore[arg-type]
