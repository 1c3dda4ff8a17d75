"""The projection: one immutable snapshot of a folder's pages, their order, lookup and identity."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from serve.graph.evidence import SidecarFact
from serve.graph.links import LinkIndex
from serve.graph.model import Edge, Fragment, Node, SidecarFile, slug
from serve.graph.views import GraphView
from serve.snapshot import evidence, graph
from serve.snapshot.caches import SnapshotCaches
from serve.snapshot.fragments import Fill, Fragments
from serve.snapshot.source_refs import source_refs
from serve.source.layout import Layout
from serve.source.page import ROLE_RANK, Page


@dataclass(frozen=True, slots=True)
class FileProblem:
    """A file the projection skipped or degraded, with a stable reason code."""

    path: str
    reason: str  # not_utf8, name_not_utf8, frontmatter_invalid, too_large, unreadable, not_regular_file,
    #               changing, symlink_ignored, binary
    skipped: bool


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


SERIALS = itertools.count(1)  # a snapshot's serial: its lineage names parents by it


def title_and_description(pages: Sequence[Page], layout: Layout) -> tuple[str, str]:
    """From the first approved index page, else the first approved overview page, else the
    folder name: a withheld page never names the wiki."""
    page = (next((p for p in pages if p.role == "index" and p.approved), None)
            or next((p for p in pages if p.role == "overview" and p.approved), None))
    if page is None:
        return layout.folder_name, ""
    return page.wiki_title or page.title or layout.folder_name, page.description


@dataclass(frozen=True, eq=False)
class Projection:
    """One published snapshot of a folder. Frozen: every field is set when the snapshot is
    made (build() for a new one, serve/snapshot/derive.py for the next one after a change),
    and what is computed from it on first use lives in `caches`, an object it owns."""

    # Slots written out rather than dataclass(slots=True), whose rebuilt class makes the
    # frozen check fail with a TypeError for names that are not fields. No __dict__: a
    # snapshot has no room for undeclared entries.
    __slots__ = ("layout", "pages", "fragments", "sidecars", "signature", "raw_labels",
                 "diagnostics", "title", "description", "source_id", "bundle_id", "public_uri",
                 "approved_pages", "base_meta", "by_key", "position", "serial", "lineage", "caches")

    layout: Layout
    pages: tuple[Page, ...]
    fragments: Fragments
    sidecars: tuple[SidecarFile, ...]
    signature: str
    raw_labels: tuple[str, ...]
    diagnostics: tuple[FileProblem, ...]
    title: str
    description: str
    source_id: str
    bundle_id: str
    public_uri: str
    approved_pages: tuple[Page, ...]
    base_meta: dict[str, Any]
    # Indices, not pages: a derived snapshot with the same ids and paths shares them.
    by_key: dict[str, int]
    position: dict[str, int]
    serial: int
    # (serial of the parent snapshot, paths whose pages this step replaced), newest first.
    lineage: tuple[tuple[int, frozenset[str]], ...]
    caches: SnapshotCaches

    @classmethod
    def build(cls, *, layout: Layout, pages: Sequence[Page], fragments: Sequence[Fragment | None],
              sidecars: Sequence[SidecarFile], signature: str, root_name: str,
              source_id: str | None, raw_labels: Sequence[str], diagnostics: Sequence[FileProblem],
              graph_counts: tuple[int, int] | None = None, fill: Fill | None = None) -> Projection:
        """A new snapshot (`graph_counts`: known from a restart cache for this signature; None
        for the fragments of pages read back from the store, which `fill` reads: Fragments)."""
        placed = tuple(p._replace(role=role) if (role := layout.role_of(p.path)) != p.role else p
                       for p in pages)
        title, description = title_and_description(placed, layout)
        source_id = source_id or slug(title or root_name).lower()
        by_key: dict[str, int] = {}
        for index, page in enumerate(placed):  # first page in order wins for an id
            by_key.setdefault(page.id, index)
        for index, page in enumerate(placed):
            by_key.setdefault(page.path, index)
        return cls(
            layout=layout, pages=placed, fragments=Fragments(placed, list(fragments), fill),
            sidecars=tuple(sidecars),
            signature=signature, raw_labels=tuple(raw_labels), diagnostics=tuple(diagnostics),
            title=title, description=description, source_id=source_id,
            bundle_id=bundle_id_of(source_id, signature), public_uri=f"llmwiki://{source_id}",
            approved_pages=tuple(p for p in placed if p.approved),
            base_meta={"adapter": layout.adapter, "implementation": layout.implementation,
                       **layout.metadata},
            by_key=by_key, position={page.path: index for index, page in enumerate(placed)},
            serial=next(SERIALS), lineage=(), caches=SnapshotCaches(graph_counts=graph_counts))

    @property
    def page_count(self) -> int:
        return len(self.pages)

    @property
    def approved_page_count(self) -> int:
        return len(self.approved_pages)

    def changed_since(self, ancestor: Projection) -> set[str] | None:
        """Paths whose pages may differ from `ancestor`'s (edited, added or gone), when this
        snapshot was derived from it; None when it was not, or too long ago."""
        if ancestor.serial == self.serial:
            return set()
        changed: set[str] = set()
        for parent, paths in self.lineage:
            changed |= paths
            if parent == ancestor.serial:
                return changed
        return None

    @property
    def approved_position(self) -> dict[str, int]:
        """Page path -> its position in approved_pages (shared by derived snapshots, which
        keep every page's path, position and approval)."""
        caches = self.caches
        if caches.approved_position is None:
            caches.approved_position = positions(self.approved_pages)
        return caches.approved_position

    def first_with_role(self, role: str) -> Page | None:
        """The first approved page with `role` (the hub pages every client sees)."""
        return next((p for p in self.pages if p.role == role and p.approved), None)

    def find_page(self, key: str) -> Page | None:
        """Exact id or path match; request strings never reach the filesystem."""
        index = self.by_key.get(key)
        return None if index is None else self.pages[index]

    def visible_pages(self, include_drafts: bool) -> tuple[Page, ...]:
        return self.pages if include_drafts else self.approved_pages

    # Its graph, made on first use by serve/snapshot/graph.py, and a context pack's
    # evidence graph (serve/snapshot/evidence.py).

    @property
    def links(self) -> LinkIndex:
        return graph.links(self)

    @property
    def lookup(self) -> Mapping[str, Page]:
        return graph.lookup(self)

    @property
    def incoming(self) -> Mapping[str, list[int]]:
        return graph.incoming(self)

    @property
    def facts(self) -> dict[str, list[SidecarFact]]:
        return graph.facts(self)

    def owners(self, include_drafts: bool) -> dict[str, str]:
        return graph.owners(self, include_drafts)

    def adopt_link_views(self, incoming: Mapping[str, list[int]], owners: dict[str, str],
                         lookup: Mapping[str, Page]) -> None:
        graph.adopt_link_views(self, incoming, owners, lookup)

    @property
    def page_json(self) -> dict[str, str]:
        """Page path -> the JSON of its graph node, filled as context packs need them."""
        return self.caches.page_json

    @property
    def graph_counts(self) -> tuple[int, int]:
        return graph.counts(self)

    @property
    def nodes(self) -> list[Node]:
        return graph.whole_graph(self)[0]

    @property
    def edges(self) -> list[Edge]:
        return graph.whole_graph(self)[1]

    @property
    def full_graph(self) -> GraphView:
        return graph.full_graph(self)

    @property
    def approved_graph(self) -> GraphView:
        return graph.approved_graph(self)

    def graph(self, include_drafts: bool) -> GraphView:
        return graph.full_graph(self) if include_drafts else graph.approved_graph(self)

    def evidence_graph_json(self, seeds: Sequence[Page], include_drafts: bool, limit: int,
                            size: int | None = None) -> str:
        return evidence.evidence_graph_json(self, seeds, include_drafts, limit, size)

    def projection_metadata(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "page_count": self.page_count,
            "approved_page_count": self.approved_page_count,
            "graph_node_count": self.graph_counts[0],
            "graph_edge_count": self.graph_counts[1],
        }

    def raw_origins(self) -> dict[str, Any]:
        """Raw-origin metadata: evidence items cite their files' line ranges (origin), so
        origins are enabled; metadata only, and the folder is named by its source id."""
        return {"enabled": True, "metadata_only": True, "public_root_labels": list(self.raw_labels),
                "root_label": self.source_id}

    def role_page_path(self, role: str) -> str:
        page = self.first_with_role(role)
        return page.path if page else ""

    def source_refs(self, include_drafts: bool) -> list[dict[str, Any]]:
        """Typed source-reference handles over the visible pages, sorted by id."""
        return source_refs(self.visible_pages(include_drafts), self.public_uri)

    def ordered(self, include_drafts: bool) -> tuple[Page, ...]:
        """Visible pages in orientation order (entry pages first), computed once."""
        found = self.caches.ordered.get(include_drafts)
        if found is None:
            found = self.caches.ordered[include_drafts] = tuple(
                orientation_order(self.visible_pages(include_drafts)))
        return found

    def entry_pages(self, include_drafts: bool) -> tuple[Page, ...]:
        """Visible hot, index and overview pages in orientation order."""
        found = self.caches.entry.get(include_drafts)
        if found is None:
            hubs = [p for p in self.visible_pages(include_drafts) if p.role != "topic"]
            found = self.caches.entry[include_drafts] = tuple(orientation_order(hubs))
        return found


def positions(pages: Sequence[Page]) -> dict[str, int]:
    return {page.path: index for index, page in enumerate(pages)}
