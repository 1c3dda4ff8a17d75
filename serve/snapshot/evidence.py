"""A snapshot's evidence graph for a context pack, each evidence page's items kept as JSON."""

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
from serve.snapshot.caches import EvidenceMemo
from serve.source.page import Page

if TYPE_CHECKING:
    from serve.snapshot.projection import Projection

# Evidence pages whose graph items a snapshot keeps as JSON (about 25 items, ~6 KB, a page):
# the pages agents' questions keep landing on. A hub page linked from every page has as many
# items as links, so the items are bounded too (about 250 bytes each).
EVIDENCE_PAGES = 4096
EVIDENCE_ITEMS = 100_000


def evidence_graph_json(snapshot: Projection, seeds: Sequence[Page], include_drafts: bool,
                        limit: int, size: int | None = None) -> str:
    """The compact JSON of the neighbourhood of the evidence pages, for a context pack. Each
    evidence page's items are kept as JSON per snapshot (the walk and the rendering were
    most of a context pack's work), so a pack only merges them. With `size`, the graph
    is cut to that many bytes (graph/budget.py budget_seeds) and says so."""
    if limit <= 0 or not seeds:
        return graph_json([], [])
    view = GraphView([], [], snapshot.base_meta, snapshot.caches.page_json)  # writes the items' JSON
    memo = snapshot.caches.evidence.get(include_drafts)
    if memo is None or len(memo) >= EVIDENCE_PAGES or memo.item_count >= EVIDENCE_ITEMS:
        # Bounded: start over rather than track use.
        memo = snapshot.caches.evidence[include_drafts] = EvidenceMemo()
    parts = []
    for page in seeds:
        found = memo.get(page.path)
        if found is None:
            found = memo[page.path] = _seed_items(snapshot, page, include_drafts).rendered(view)
            memo.item_count += found.size
        parts.append(found)
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
