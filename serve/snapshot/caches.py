"""What a snapshot derives from itself on first use, kept in one object the snapshot owns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from serve.graph.evidence import SidecarFact
from serve.graph.links import LinkIndex, Owners, SidecarPart
from serve.graph.model import Edge, Node
from serve.graph.views import GraphView
from serve.source.page import Page


@dataclass(slots=True, eq=False)
class SnapshotCaches:
    """Per-snapshot memo caches, made with the snapshot and owned by it: the snapshot's own
    fields never change, these fill in as requests need them. Each entry is a function of
    the snapshot alone, so two threads racing to fill one only compute it twice.

    Keys of the dicts by visibility: True with drafts, False approved pages only."""

    # Views that depend only on what a derived snapshot keeps equal (ids, titles, paths,
    # links, members, approval): a derived snapshot starts with the ones computed so far.
    approved_position: dict[str, int] | None = None
    lookup: Mapping[str, Page] | None = None
    incoming: Mapping[str, list[int]] | None = None
    facts: dict[str, list[SidecarFact]] | None = None
    graph: tuple[list[Node], list[Edge]] | None = None
    graph_counts: tuple[int, int] | None = None
    full_graph: GraphView | None = None
    approved_graph: GraphView | None = None
    owners: dict[bool, dict[str, str]] = field(default_factory=dict)
    # The link index (serve/graph/links.py): made on first use, or derived from the parent's
    # when pages are added, deleted or renamed; the views answered from it.
    links: LinkIndex | None = None
    indexable: bool | None = None
    sidecar_keys: frozenset[str] | None = None  # the lookup keys of the sidecar facts' ends
    sidecar: SidecarPart | None = None
    owner_views: dict[bool, Owners] = field(default_factory=dict)
    withheld: list[str] | None = None
    approved_paths: set[str] | None = None
    # Page path -> its graph node's JSON: shared (the same dict) with derived snapshots, as
    # a page node's JSON depends only on fields derive() keeps equal.
    page_json: dict[str, str] = field(default_factory=dict)
    # This snapshot's alone: they hold its page objects, or text made from them.
    ordered: dict[bool, tuple[Page, ...]] = field(default_factory=dict)
    entry: dict[bool, tuple[Page, ...]] = field(default_factory=dict)
    results: dict[Any, Any] = field(default_factory=dict)  # what other modules memoise

    def carried_over(self) -> SnapshotCaches:
        """The caches a snapshot derived from this one starts with, when only the text of
        some pages differs. Copies: filling the new one leaves this one as is."""
        return SnapshotCaches(
            approved_position=self.approved_position, lookup=self.lookup,
            incoming=self.incoming, facts=self.facts, graph=self.graph,
            graph_counts=self.graph_counts, full_graph=self.full_graph,
            approved_graph=self.approved_graph, owners=dict(self.owners),
            page_json=self.page_json, links=self.links, indexable=self.indexable,
            sidecar_keys=self.sidecar_keys, sidecar=self.sidecar,
            withheld=self.withheld,
            approved_paths=self.approved_paths,
        )

    def with_other_facts(self, links: LinkIndex) -> SnapshotCaches:
        """The caches a snapshot with the same pages but other sidecar facts starts with: what
        is made from the pages alone (`links`, this snapshot's link index, included); the
        facts, the graph, its counts and views are made again."""
        return SnapshotCaches(
            approved_position=self.approved_position, lookup=links.lookup, incoming=self.incoming,
            owners=dict(self.owners), links=links, indexable=True, withheld=self.withheld,
            approved_paths=self.approved_paths, page_json=self.page_json)
