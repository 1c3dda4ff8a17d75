"""The projection: an immutable snapshot of pages, graph, identity and derived views."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import operator
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from serve.graph.evidence import (
    SeedItems,
    SidecarFact,
    budget_seeds,
    budgeted_json,
    edge_text,
    first_owners,
    graph_json,
    incoming_links,
    merge_seeds,
    seed_items,
    sidecar_facts,
)
from serve.graph.links import (
    LinkIndex,
    Owners,
    SidecarPart,
    alias_keys,
    changed_paths,
    own_keys,
    sidecar_part,
)
from serve.graph.model import (
    Edge,
    Fragment,
    Node,
    SidecarFile,
    build_graph,
    build_lookup,
    canonical_relation,
    graph_counts,
    lookup_key,
    page_node,
    slug,
)
from serve.graph.views import ApprovedView, FullView, GraphView, approved_view
from serve.snapshot.caches import EvidenceMemo, SnapshotCaches
from serve.snapshot.source_refs import source_refs
from serve.source.layout import Layout
from serve.source.page import ROLE_RANK, Page

__all__ = ["FileProblem", "Projection", "SidecarFile", "canonical_relation", "lookup_key", "slug"]


@dataclass(frozen=True, slots=True)
class FileProblem:
    """A file the projection skipped or degraded, with a stable reason code."""

    path: str
    reason: str  # not_utf8, name_not_utf8, frontmatter_invalid, too_large, unreadable, not_regular_file,
    #               changing, symlink_ignored, binary
    skipped: bool


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


# Derived snapshots remember this many steps back which pages each step replaced, so whatever
# was synced to an ancestor (the search index) can catch up with just those pages.
LINEAGE_DEPTH = 32
# Past this share of the pages changed at once, a derived snapshot's link index is built
# anew (from its own pages) rather than derived from the parent's, page by page.
REBUILD_SHARE = 0.3
# Evidence pages whose graph items a snapshot keeps as JSON (about 25 items, ~6 KB, a page):
# the pages agents' questions keep landing on. A hub page linked from every page has as many
# items as links, so the items are bounded too (about 250 bytes each).
EVIDENCE_PAGES = 4096
EVIDENCE_ITEMS = 100_000
_SERIALS = itertools.count(1)
_PATH = operator.attrgetter("path")
_ID = operator.attrgetter("id")


def _all_pages(page: Page) -> bool:
    return True


def _approved_only(page: Page) -> bool:
    return page.approved


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
    made (build() for a new one, derive() for the next one after a content edit), and
    what is computed from it on first use lives in `caches`, an object it owns."""

    # Slots written out rather than dataclass(slots=True), whose rebuilt class makes the
    # frozen check fail with a TypeError for names that are not fields. No __dict__: a
    # snapshot has no room for undeclared entries.
    __slots__ = ("layout", "pages", "fragments", "sidecars", "signature", "raw_labels",
                 "diagnostics", "title", "description", "source_id", "bundle_id", "public_uri",
                 "approved_pages", "base_meta", "by_key", "position", "serial", "lineage", "caches")

    layout: Layout
    pages: tuple[Page, ...]
    fragments: tuple[Fragment, ...]
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
    def build(cls, *, layout: Layout, pages: Sequence[Page], fragments: Sequence[Fragment],
              sidecars: Sequence[SidecarFile], signature: str, root_name: str,
              source_id: str | None, raw_labels: Sequence[str], diagnostics: Sequence[FileProblem],
              graph_counts: tuple[int, int] | None = None) -> Projection:
        """A new snapshot (`graph_counts`: known from a restart cache for this signature)."""
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
            layout=layout, pages=placed, fragments=tuple(fragments), sidecars=tuple(sidecars),
            signature=signature, raw_labels=tuple(raw_labels), diagnostics=tuple(diagnostics),
            title=title, description=description, source_id=source_id,
            bundle_id=bundle_id_of(source_id, signature), public_uri=f"llmwiki://{source_id}",
            approved_pages=tuple(p for p in placed if p.approved),
            base_meta={"adapter": layout.adapter, "implementation": layout.implementation,
                       **layout.metadata},
            by_key=by_key, position={page.path: index for index, page in enumerate(placed)},
            serial=next(_SERIALS), lineage=(), caches=SnapshotCaches(graph_counts=graph_counts))

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

    def derive(self, replaced: Sequence[tuple[Page, Fragment]], signature: str,
               diagnostics: Sequence[FileProblem]) -> Projection | None:
        """The next snapshot when only the content of existing pages changed, sharing
        everything that cannot have changed; None when a full build is needed (a page's
        identity, links, members, visibility or graph metadata changed). This snapshot and
        its caches are only read."""
        pages = list(self.pages)
        fragments = list(self.fragments)
        approved = list(self.approved_pages)
        approved_position = self.caches.approved_position
        if approved_position is None:
            approved_position = _positions(self.approved_pages)
        for page, fragment in replaced:
            index = self.position.get(page.path)
            if index is None:
                return None
            old = pages[index]
            page = page._replace(role=self.layout.role_of(page.path))
            if (page.id, page.title, page.role, page.approved, page.review_state,
                    page.source_refs, page.okf_json) != (old.id, old.title, old.role, old.approved,
                                                         old.review_state, old.source_refs,
                                                         old.okf_json):
                return None
            if fragment != fragments[index]:
                return None
            pages[index], fragments[index] = page, fragment
            if page.approved:  # the same pages are approved
                approved[approved_position[page.path]] = page
        title, description = title_and_description(pages, self.layout)
        if title != self.title:
            return None  # the title names the source: identity changes, build anew
        changed = frozenset(page.path for page, _ in replaced)
        # The graph (ids, labels, kinds, edges, visibility, page-node metadata) is unchanged
        # by construction, so the built graph, its views and its counts carry over.
        caches = self.caches.carried_over(changed)
        caches.approved_position = approved_position
        if caches.lookup is not None:  # a read by name must find the new text
            caches.lookup = self._relinked(caches.lookup, replaced, pages)
        if caches.links is not None:
            caches.links = caches.links.with_lookup(
                caches.lookup if caches.links.lookup is self.caches.lookup and caches.lookup is not None
                else self._relinked(caches.links.lookup, replaced, pages))
        return dataclasses.replace(
            self, pages=tuple(pages), fragments=tuple(fragments), approved_pages=tuple(approved),
            signature=signature, diagnostics=tuple(diagnostics), description=description,
            bundle_id=bundle_id_of(self.source_id, signature), serial=next(_SERIALS),
            lineage=((self.serial, changed), *self.lineage[: LINEAGE_DEPTH - 1]), caches=caches)

    def derive_pages(self, gone: Iterable[str], added: Sequence[tuple[Page, Fragment]], signature: str,
                     diagnostics: Sequence[FileProblem], raw_labels: Sequence[str],
                     sort_key: Callable[[str], Any]) -> Projection | None:
        """The next snapshot when pages were added, deleted, renamed or rewritten in any
        way (`gone`: paths whose pages went, `added`: the pages that came, an edit being
        both), without a pass over every page's links: the link index (link_index.py) is
        derived from this one's, so the graph, link resolution, backlinks and owners of
        only the touched pages and their neighbours are worked out again. None when a full
        build is needed: the wiki's title changed, or the graph's rules need every page
        (Dendron hierarchy, two pages with one id). This snapshot is only read, but for
        its link index, built if no request built it yet."""
        if not self.indexable:
            return None
        gone = set(gone)
        pages, fragments = list(self.pages), list(self.fragments)
        removed: list[tuple[Page, Fragment]] = []
        for index in sorted((self.position[path] for path in gone), reverse=True):
            removed.append((pages[index], fragments[index]))
            del pages[index], fragments[index]
        layout = self.layout
        placed_added: list[tuple[Page, Fragment]] = []
        ids: set[str] = set()
        for page, fragment in added:
            if page.path in self.position and page.path not in gone:
                return None  # a path both kept and added: not a change set this can apply
            held = self.by_key.get(page.id)
            if page.id in ids or (held is not None and self.pages[held].id == page.id
                                  and self.pages[held].path not in gone):
                return None  # two pages would share an id: the graph's dedupe needs every page
            ids.add(page.id)
            if (role := layout.role_of(page.path)) != page.role:
                page = page._replace(role=role)
            key = sort_key(page.path)
            at = bisect_left(pages, key, key=lambda p: sort_key(p.path))
            pages.insert(at, page)
            fragments.insert(at, fragment)
            placed_added.append((page, fragment))
        if not pages:
            return None
        title, description = title_and_description(pages, layout)
        if title != self.title:
            return None  # the title names the source: identity changes, build anew
        placed = tuple(pages)
        # The ids are unique (checked above), and an id wins over a path spelled the same.
        position = dict(zip(map(_PATH, placed), itertools.count()))
        by_key = dict(position)
        by_key.update(zip(map(_ID, placed), itertools.count()))
        touched = gone | {page.path for page, _ in placed_added}
        parent = self.caches
        page_json = dict(parent.page_json)  # one C-level copy: other threads may be filling it
        for path in touched:
            page_json.pop(path, None)
        caches = SnapshotCaches(page_json=page_json, indexable=True)
        if parent.approved_paths is not None:
            caches.approved_paths = (parent.approved_paths - gone) | {
                page.path for page, _ in placed_added if page.approved}
        if parent.withheld is not None:
            withheld = [path for path in parent.withheld if path not in gone]
            for page, _ in placed_added:
                if not page.approved:
                    insort(withheld, page.path)
            caches.withheld = withheld
        large = len(touched) > REBUILD_SHARE * len(placed)
        if not large:
            # The parent's link index is built here if no request needed it yet (a start-up
            # holds the restart cache's plain views instead): once, for the first change;
            # every later snapshot derives its own from it, and without one each snapshot
            # after a change would work out backlinks, owners and graph counts from every
            # page again.
            links, changed_keys, changed_ids = self.links.derived(removed, placed_added, placed,
                                                                  fragments, position)
            caches.links, caches.lookup = links, links.lookup

            def page_path(nid: str) -> str | None:
                found = by_key.get(nid[5:])
                return placed[found].path if found is not None and placed[found].id == nid[5:] else None

            stale = touched | changed_paths(links, changed_ids, page_path)
            for key in changed_keys:
                stale.update(links.linkers.get(key, ()))
            if parent.sidecar_keys is None:
                parent.sidecar_keys = frozenset(sidecar_keys(self.sidecars))
            caches.sidecar_keys = parent.sidecar_keys
            side = parent.sidecar
            if (side is not None and not changed_keys & side.keys and not changed_ids & side.asked
                    and not stale & self.facts.keys()):
                caches.sidecar = side  # no fact's end resolves, or is proposed, differently
            if self.sidecars and changed_keys & parent.sidecar_keys:
                stale.update(self.facts)
                stale.update(sidecar_facts(self.sidecars, links.lookup))
            # Copied in one C-level step first: requests on the parent may be filling them.
            caches.evidence = {key: EvidenceMemo(dict(memo)).without(frozenset(stale))
                               for key, memo in dict(parent.evidence).items()}
        derived = dataclasses.replace(
            self, pages=placed, fragments=tuple(fragments), signature=signature,
            raw_labels=tuple(raw_labels), diagnostics=tuple(diagnostics), description=description,
            bundle_id=bundle_id_of(self.source_id, signature),
            approved_pages=tuple(p for p in placed if p.approved), by_key=by_key,
            position=position, serial=next(_SERIALS),
            lineage=((self.serial, frozenset(touched)), *self.lineage[: LINEAGE_DEPTH - 1]),
            caches=caches)
        if large:  # a checkout or a recompiled wiki: built from its pages, quicker than derived
            derived.links  # noqa: B018 - made on first use; here, with the change, not by a request
        return derived

    def with_sidecars(self, sidecars: Sequence[SidecarFile], signature: str,
                      diagnostics: Sequence[FileProblem]) -> Projection | None:
        """The next snapshot when only the sidecar files (graph/graph.json) changed: the same
        pages, so what is made from them alone carries over (lookup, backlinks, owners, the
        link index, page-node JSON); what the facts reach is made again on first use. None
        when the graph needs every page (see indexable). This snapshot is only read, but for
        its link index, built if no request built it yet (as derive_pages does)."""
        if not self.indexable:
            return None
        caches = self.caches.with_other_facts(self.links)
        return dataclasses.replace(
            self, sidecars=tuple(sidecars), signature=signature, diagnostics=tuple(diagnostics),
            bundle_id=bundle_id_of(self.source_id, signature), serial=next(_SERIALS),
            lineage=((self.serial, frozenset()), *self.lineage[: LINEAGE_DEPTH - 1]), caches=caches)

    def _relinked(self, lookup: dict[str, Page], replaced: Sequence[tuple[Page, Fragment]],
                  pages: Sequence[Page]) -> dict[str, Page]:
        """`lookup` with the replaced pages' keys naming their new objects (in `pages`)."""
        lookup = dict(lookup)
        root = self.layout.metadata.get("source_root", ".")
        for page, fragment in replaced:
            at = self.position[page.path]
            old, new = self.pages[at], pages[at]
            for key in (*own_keys(new, fragment, root), *alias_keys(fragment)):
                if lookup.get(key) is old:
                    lookup[key] = new
        return lookup

    @property
    def indexable(self) -> bool:
        """Whether the graph can be answered from the link index: each page's graph edges
        are its own (unique page ids) and no rule spans pages (the Dendron hierarchy)."""
        caches = self.caches
        if caches.indexable is None:
            caches.indexable = self.layout.adapter != "dendron" and all(
                self.pages[self.by_key[page.id]] is page for page in self.pages)
        return caches.indexable

    @property
    def links(self) -> LinkIndex:
        """The link index (built on first use, or derived from the parent snapshot's)."""
        caches = self.caches
        if caches.links is None:
            caches.links = LinkIndex.build(self.pages, self.fragments,
                                           self.layout.metadata.get("source_root", "."), self.lookup)
        return caches.links

    @property
    def sidecar_part(self) -> SidecarPart:
        caches = self.caches
        if caches.sidecar is None:
            links = self.links

            def page_edge(key: tuple[str, str, str]) -> Edge | None:
                found = self._page_of(key[0])
                if found is None or key[1] not in links.targets.get(found[0].path, ()):
                    return None
                for edge in links.segment(*found).by_target.get(key[1], ()):
                    if edge.relation == key[2]:
                        return edge
                return None

            caches.sidecar = sidecar_part(self.sidecars, links.lookup, page_edge,
                                          lambda nid: bool(links.refs.get(nid)))
        return caches.sidecar

    def _page_of(self, nid: str) -> tuple[Page, Fragment] | None:
        """The page (and fragment) of page node `nid`."""
        if not nid.startswith("page:"):
            return None
        index = self.by_key.get(nid[5:])
        if index is None or self.pages[index].id != nid[5:]:
            return None
        return self.pages[index], self.fragments[index]

    def _page_at(self, path: str) -> tuple[Page, Fragment] | None:
        index = self.position.get(path)
        return None if index is None else (self.pages[index], self.fragments[index])

    def _approved_path(self, path: str) -> bool:
        index = self.position.get(path)
        return index is not None and self.pages[index].approved

    @property
    def approved_position(self) -> dict[str, int]:
        """Page path -> its position in approved_pages (shared by derived snapshots, which
        keep every page's path, position and approval)."""
        caches = self.caches
        if caches.approved_position is None:
            caches.approved_position = _positions(self.approved_pages)
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

    @property
    def lookup(self) -> dict[str, Page]:
        caches = self.caches
        if caches.lookup is None and caches.links is not None:
            caches.lookup = caches.links.lookup
        if caches.lookup is None:
            caches.lookup = build_lookup(self.pages, self.fragments,
                                         self.layout.metadata.get("source_root", "."))
        return caches.lookup

    @property
    def incoming(self) -> dict[str, list[int]]:
        """Page path -> positions of the pages linking to it (for evidence graphs)."""
        caches = self.caches
        if caches.incoming is None:
            caches.incoming = incoming_links(self.pages, self.fragments, self.lookup)
        return caches.incoming

    def adopt_link_views(self, incoming: dict[str, list[int]], owners: dict[str, str],
                         lookup: dict[str, Page]) -> None:
        """Views this snapshot would compute, taken from the restart cache (which checked
        them against this snapshot's signature and pages); those computed already stay."""
        caches = self.caches
        if caches.lookup is None:
            caches.lookup = lookup
        if caches.incoming is None:
            caches.incoming = incoming
        caches.owners.setdefault(False, owners)

    @property
    def facts(self) -> dict[str, list[SidecarFact]]:
        """Page path -> sidecar facts touching it (for evidence graphs)."""
        caches = self.caches
        if caches.facts is None:
            caches.facts = sidecar_facts(self.sidecars, self.lookup)
        return caches.facts

    def evidence_graph_json(self, seeds: Sequence[Page], include_drafts: bool, limit: int,
                            size: int | None = None) -> str:
        """The compact JSON of the neighbourhood of the evidence pages, for a context pack. Each
        evidence page's items are kept as JSON per snapshot (the walk and the rendering were
        most of a context pack's work), so a pack only merges them. With `size`, the graph
        is cut to that many bytes (evidence.budget_seeds) and says so."""
        if limit <= 0 or not seeds:
            return graph_json([], [])
        view = GraphView([], [], self.base_meta, self.page_json)  # writes the items' JSON
        memo = self.caches.evidence.get(include_drafts)
        if memo is None or len(memo) >= EVIDENCE_PAGES or memo.item_count >= EVIDENCE_ITEMS:
            # Bounded: start over rather than track use.
            memo = self.caches.evidence[include_drafts] = EvidenceMemo()
        parts = []
        for page in seeds:
            found = memo.get(page.path)
            if found is None:
                found = memo[page.path] = self._seed_items(page, include_drafts).rendered(view)
                memo.item_count += found.size
            parts.append(found)
        if size is not None:
            return budgeted_json(budget_seeds(parts, limit, size, view.node_json))
        nodes, edges = merge_seeds(parts, limit, view.node_json)
        return graph_json(nodes, [edge_text(key, meta) for key, meta in edges.items()])

    def _seed_items(self, page: Page, include_drafts: bool) -> SeedItems:
        position = self.position.get(page.path)
        if position is None:  # not a page of this snapshot: only its own node
            own = page_node(page)
            return SeedItems(own.id, own, (), ())
        pages = self.pages
        links = self.caches.links
        if links is None or not self.indexable:  # the plain views (also what the restart cache holds)
            return seed_items(page, self.fragments[position], self.lookup,
                              (pages[i] for i in self.incoming.get(page.path, ())),
                              self.facts.get(page.path, ()), approved_only=not include_drafts,
                              owner=self.owners(include_drafts))
        at = self.position
        owner = self.caches.owner_views.get(include_drafts)
        if owner is None:
            owner = self.caches.owner_views[include_drafts] = Owners(
                links, (lambda path: True) if include_drafts else self._approved_path)
        return seed_items(page, self.fragments[position], links.lookup,
                          (pages[at[path]] for path in links.refs.get(f"page:{page.id}", ())),
                          self.facts.get(page.path, ()), approved_only=not include_drafts,
                          owner=owner)  # type: ignore[arg-type]

    @property
    def page_json(self) -> dict[str, str]:
        """Page path -> the JSON of its graph node, filled as context packs need them."""
        return self.caches.page_json

    def owners(self, include_drafts: bool) -> dict[str, str]:
        """Shared graph node -> path of its first visible page (computed once)."""
        found = self.caches.owners.get(include_drafts)
        if found is None:
            found = self.caches.owners[include_drafts] = first_owners(
                self.pages, self.fragments, self.lookup,
                _all_pages if include_drafts else _approved_only)
        return found

    def _graph(self) -> tuple[list[Node], list[Edge]]:
        caches = self.caches
        if caches.graph is None:
            caches.graph = build_graph(self.pages, self.fragments, self.layout.adapter,
                                       self.sidecars, self.lookup)
        return caches.graph

    @property
    def graph_counts(self) -> tuple[int, int]:
        caches = self.caches
        if caches.graph_counts is None:
            if caches.graph is not None:  # already built: count it
                caches.graph_counts = len(caches.graph[0]), len(caches.graph[1])
            elif caches.links is not None and self.indexable:
                side = self.sidecar_part
                caches.graph_counts = (len(self.pages) + caches.links.member_nodes + len(side.nodes),
                                       caches.links.segment_edges + len(side.edges))
            else:
                caches.graph_counts = graph_counts(self.pages, self.fragments, self.layout.adapter,
                                                   self.sidecars, self.lookup)
        return caches.graph_counts

    @property
    def nodes(self) -> list[Node]:
        return self._graph()[0]

    @property
    def edges(self) -> list[Edge]:
        return self._graph()[1]

    @property
    def full_graph(self) -> GraphView:
        """The draft-inclusive view: node by node from the link index when the graph allows
        (its full lists only built when asked for), else built whole."""
        caches = self.caches
        if caches.full_graph is None:
            if self.indexable:
                caches.full_graph = FullView(self.links, self._page_of, self._page_at, self.sidecar_part,
                                             self.base_meta, self._graph, self.pages)
            else:
                caches.full_graph = GraphView(self.nodes, self.edges, self.base_meta)
        return caches.full_graph

    @property
    def approved_graph(self) -> GraphView:
        caches = self.caches
        if caches.approved_graph is None:
            full = self.full_graph
            if isinstance(full, FullView):
                caches.approved_graph = ApprovedView(full, self._approved_path, self._approved_paths,
                                                     self._withheld, self._approved_lists,
                                                     self.approved_pages)
            else:
                caches.approved_graph = approved_view(self.nodes, self.edges, self.pages, self.base_meta)
        return caches.approved_graph

    def _approved_lists(self) -> tuple[list[Node], list[Edge]]:
        view = approved_view(self.nodes, self.edges, self.pages, self.base_meta)
        return view.nodes, view.edges

    def _approved_paths(self) -> set[str]:
        caches = self.caches
        if caches.approved_paths is None:
            caches.approved_paths = {p.path for p in self.approved_pages}
        return caches.approved_paths

    def _withheld(self) -> list[str]:
        """Paths of withheld pages (approved_view's), whose mention a view drops."""
        caches = self.caches
        if caches.withheld is None:
            caches.withheld = sorted({p.path for p in self.pages if not p.approved} - self._approved_paths())
        return caches.withheld

    def graph(self, include_drafts: bool) -> GraphView:
        return self.full_graph if include_drafts else self.approved_graph

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


def sidecar_keys(sidecars: Sequence[SidecarFile]) -> set[str]:
    """The lookup keys of every sidecar fact's ends."""
    return {lookup_key(value) for sidecar in sidecars for fact in sidecar.edges
            for value in (fact.source, fact.target)}


def _positions(pages: Sequence[Page]) -> dict[str, int]:
    return {page.path: index for index, page in enumerate(pages)}
