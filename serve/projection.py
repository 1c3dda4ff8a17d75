"""The projection: an immutable snapshot of pages, graph, identity and derived views."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from serve.graph import (
    Edge,
    Fragment,
    GraphView,
    Node,
    SeedItems,
    SidecarFact,
    SidecarFile,
    approved_view,
    build_graph,
    build_lookup,
    canonical_relation,
    edge_text,
    first_owners,
    graph_counts,
    graph_json,
    incoming_links,
    lookup_key,
    merge_seeds,
    page_node,
    seed_items,
    sidecar_facts,
    slug,
)
from serve.source import okf
from serve.source.layout import Layout
from serve.source.page import ROLE_RANK, Page

__all__ = ["Diagnostic", "Projection", "SidecarFile", "canonical_relation", "lookup_key", "slug"]


class EvidenceMemo(dict[str, SeedItems]):
    """A snapshot's evidence pages' items (as JSON) by path, and how many items they hold."""

    item_count = 0


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A file the projection skipped or degraded, with a stable reason code."""

    path: str
    reason: str  # not_utf8, name_not_utf8, frontmatter_invalid, too_large, unreadable, symlink_ignored
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
# Evidence pages whose graph items a snapshot keeps as JSON (about 25 items, ~6 KB, a page):
# the pages agents' questions keep landing on. A hub page linked from every page has as many
# items as links, so the items are bounded too (about 250 bytes each).
EVIDENCE_PAGES = 4096
EVIDENCE_ITEMS = 100_000
_SERIALS = itertools.count(1)


def _all_pages(page: Page) -> bool:
    return True


def _approved_only(page: Page) -> bool:
    return page.approved


class Projection:
    """One published snapshot of a folder. Never mutated after construction: derived views
    are computed once, on first use, and cached on the instance."""

    def __init__(
        self,
        *,
        layout: Layout,
        pages: Sequence[Page],
        fragments: Sequence[Fragment],
        sidecars: Sequence[SidecarFile],
        signature: str,
        root_name: str,
        source_id: str | None,
        raw_labels: Sequence[str],
        diagnostics: Sequence[Diagnostic],
    ) -> None:
        self.layout = layout
        self.pages: tuple[Page, ...] = tuple(
            p._replace(role=role) if (role := layout.role_of(p.path)) != p.role else p
            for p in pages
        )
        self.sidecars = tuple(sidecars)
        self.signature = signature
        self.raw_labels = list(raw_labels)
        self.diagnostics = tuple(diagnostics)
        self.title, self.description = self._title_and_description()
        self.source_id = source_id or slug(self.title or root_name).lower()
        self.bundle_id = bundle_id_of(self.source_id, signature)
        self.public_uri = f"llmwiki://{self.source_id}"
        self.page_count = len(self.pages)
        self.approved_pages: tuple[Page, ...] = tuple(p for p in self.pages if p.approved)
        self.approved_page_count = len(self.approved_pages)
        self.fragments = tuple(fragments)
        self.base_meta: dict[str, Any] = {"adapter": layout.adapter,
                                          "implementation": layout.implementation, **layout.metadata}
        # Indices, not pages: a derived snapshot with the same ids and paths shares it.
        self._by_key: dict[str, int] = {}
        for index, page in enumerate(self.pages):  # first page in order wins for an id
            self._by_key.setdefault(page.id, index)
        for index, page in enumerate(self.pages):
            self._by_key.setdefault(page.path, index)
        self.position = {page.path: index for index, page in enumerate(self.pages)}
        self.serial = next(_SERIALS)
        # (serial of the parent snapshot, paths whose pages this step replaced), newest first.
        self.lineage: tuple[tuple[int, frozenset[str]], ...] = ()

    def changed_since(self, ancestor: Projection) -> set[str] | None:
        """Paths whose pages may differ from `ancestor`'s, when this snapshot was derived from
        it (same paths, in the same positions); None when it was not, or too long ago."""
        if ancestor.serial == self.serial:
            return set()
        changed: set[str] = set()
        for parent, paths in self.lineage:
            changed |= paths
            if parent == ancestor.serial:
                return changed
        return None

    def derive(self, replaced: Sequence[tuple[Page, Fragment]], signature: str,
               diagnostics: Sequence[Diagnostic]) -> Projection | None:
        """The next snapshot when only the content of existing pages changed, sharing
        everything that cannot have changed; None when a full build is needed (a page's
        identity, links, members, visibility or graph metadata changed)."""
        pages = list(self.pages)
        fragments = list(self.fragments)
        approved = list(self.approved_pages)
        approved_position = self.approved_position
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
            if page.approved:
                approved[approved_position[page.path]] = page
        nxt = object.__new__(Projection)
        nxt.__dict__.update(self.__dict__)
        for key in ("_ordered_all", "_ordered_approved", "_entry_all", "_entry_approved", "memo"):
            nxt.__dict__.pop(key, None)  # they hold page objects or what was made from them
        changed = frozenset(page.path for page, _ in replaced)
        for key in ("_evidence_all", "_evidence_approved"):
            # Evidence items are JSON made from the graph, which is unchanged (below): all but
            # the edited pages' own carry over, so the first pack after an edit stays cheap.
            kept = self.__dict__.get(key)
            if kept is not None:
                carried = nxt.__dict__[key] = EvidenceMemo(
                    (path, items) for path, items in kept.items() if path not in changed)
                carried.item_count = sum(items.size for items in carried.values())
        nxt.pages = tuple(pages)
        nxt.fragments = tuple(fragments)
        nxt.serial = next(_SERIALS)
        step = (self.serial, changed)
        nxt.lineage = (step, *self.lineage[: LINEAGE_DEPTH - 1])
        nxt.signature = signature
        nxt.diagnostics = tuple(diagnostics)
        nxt.bundle_id = bundle_id_of(nxt.source_id, signature)
        nxt.approved_pages = tuple(approved)  # the same pages are approved
        title, nxt.description = nxt._title_and_description()
        if title != self.title:
            return None  # the title names the source: identity changes, build anew
        # The graph (ids, labels, kinds, edges, visibility, page-node metadata) is unchanged
        # by construction, so the built graph, its views and its counts carry over.
        return nxt

    @cached_property
    def approved_position(self) -> dict[str, int]:
        """Page path -> its position in approved_pages (shared by derived snapshots, which
        keep every page's path, position and approval)."""
        return {page.path: index for index, page in enumerate(self.approved_pages)}

    def _title_and_description(self) -> tuple[str, str]:
        """From the first approved index page, else the first approved overview page, else the
        folder name: a withheld page never names the wiki."""
        page = self.first_with_role("index") or self.first_with_role("overview")
        if page is None:
            return self.layout.folder_name, ""
        return page.wiki_title or page.title or self.layout.folder_name, page.description

    def first_with_role(self, role: str) -> Page | None:
        """The first approved page with `role` (the hub pages every client sees)."""
        return next((p for p in self.pages if p.role == role and p.approved), None)

    def find_page(self, key: str) -> Page | None:
        """Exact id or path match; request strings never reach the filesystem."""
        index = self._by_key.get(key)
        return None if index is None else self.pages[index]

    def visible_pages(self, include_drafts: bool) -> tuple[Page, ...]:
        return self.pages if include_drafts else self.approved_pages

    @cached_property
    def lookup(self) -> dict[str, Page]:
        return build_lookup(self.pages, self.fragments, self.layout.metadata.get("source_root", "."))

    @cached_property
    def incoming(self) -> dict[str, list[int]]:
        """Page path -> positions of the pages linking to it (for evidence graphs)."""
        return incoming_links(self.pages, self.fragments, self.lookup)

    @cached_property
    def facts(self) -> dict[str, list[SidecarFact]]:
        """Page path -> sidecar facts touching it (for evidence graphs)."""
        return sidecar_facts(self.sidecars, self.lookup)

    def evidence_graph_json(self, seeds: Sequence[Page], include_drafts: bool, limit: int) -> str:
        """The compact JSON of the neighbourhood of the evidence pages, for a context pack. Each
        evidence page's items are kept as JSON per snapshot (the walk and the rendering were
        most of a context pack's work), so a pack only merges them."""
        if limit <= 0 or not seeds:
            return graph_json([], [])
        view = GraphView([], [], self.base_meta, self.page_json)  # writes the items' JSON
        key = "_evidence_all" if include_drafts else "_evidence_approved"
        memo: EvidenceMemo | None = self.__dict__.get(key)
        if memo is None or len(memo) >= EVIDENCE_PAGES or memo.item_count >= EVIDENCE_ITEMS:
            memo = self.__dict__[key] = EvidenceMemo()  # bounded: start over rather than track use
        parts = []
        for page in seeds:
            found = memo.get(page.path)
            if found is None:
                found = memo[page.path] = self._seed_items(page, include_drafts).rendered(view)
                memo.item_count += found.size
            parts.append(found)
        nodes, edges = merge_seeds(parts, limit)
        return graph_json(nodes, [edge_text(key, meta) for key, meta in edges.items()])

    def _seed_items(self, page: Page, include_drafts: bool) -> SeedItems:
        position = self.position.get(page.path)
        if position is None:  # not a page of this snapshot: only its own node
            own = page_node(page)
            return SeedItems(own.id, own, (), ())
        pages = self.pages
        return seed_items(page, self.fragments[position], self.lookup,
                          (pages[i] for i in self.incoming.get(page.path, ())),
                          self.facts.get(page.path, ()), approved_only=not include_drafts,
                          owner=self.owners(include_drafts))

    @cached_property
    def page_json(self) -> dict[str, str]:
        """Page path -> the JSON of its graph node, filled as context packs need them. A
        derived snapshot shares it: the node's fields are the ones derive() keeps equal."""
        return {}

    def owners(self, include_drafts: bool) -> dict[str, str]:
        """Shared graph node -> path of its first visible page (computed once)."""
        key = "_owners_all" if include_drafts else "_owners_approved"
        cached = self.__dict__.get(key)
        if cached is None:
            cached = self.__dict__[key] = first_owners(
                self.pages, self.fragments, self.lookup,
                _all_pages if include_drafts else _approved_only)
        return cached

    @cached_property
    def _graph(self) -> tuple[list[Node], list[Edge]]:
        return build_graph(self.pages, self.fragments, self.layout.adapter, self.sidecars,
                           self.lookup)

    @cached_property
    def graph_counts(self) -> tuple[int, int]:
        if "_graph" in self.__dict__:  # already built: count it
            return len(self.nodes), len(self.edges)
        return graph_counts(self.pages, self.fragments, self.layout.adapter, self.sidecars,
                            self.lookup)

    @property
    def nodes(self) -> list[Node]:
        return self._graph[0]

    @property
    def edges(self) -> list[Edge]:
        return self._graph[1]

    @cached_property
    def full_graph(self) -> GraphView:
        return GraphView(self.nodes, self.edges, self.base_meta)

    @cached_property
    def approved_graph(self) -> GraphView:
        return approved_view(self.nodes, self.edges, self.pages, self.base_meta)

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
        return {"enabled": False, "metadata_only": True, "public_root_labels": list(self.raw_labels)}

    def role_page_path(self, role: str) -> str:
        page = self.first_with_role(role)
        return page.path if page else ""

    def source_refs(self, include_drafts: bool) -> list[dict[str, Any]]:
        """Typed source-reference handles over the visible pages, sorted by id."""
        refs: dict[str, dict[str, Any]] = {}
        used: set[str] = set()
        for page in self.visible_pages(include_drafts):
            okf_keys: set[str] = set()
            if page.okf_json:  # structured sources first, keyed by id else resource
                document = json.loads(page.okf_json)
                for source in document["sources"]:
                    key = okf.source_key(source)
                    okf_keys.add(key)
                    ref = refs.get(key)
                    if ref is None:
                        ref_id = _unique_ref_id(key, used)
                        ref = refs[key] = {
                            "id": ref_id, "label": okf.source_label(source), "kind": "okf_source",
                            "uri": f"{self.public_uri}/source-refs/{ref_id}",
                            "linked_pages": [], "linked_page_ids": [],
                            "locator": _okf_locator(source, page, document)}
                    _link(ref, page)
            for label in page.source_refs:
                if label in okf_keys:
                    continue
                ref = refs.get(label)
                if ref is None:
                    ref_id = _unique_ref_id(label, used)
                    ref = {"id": ref_id, "label": label, "kind": "source_ref",
                           "uri": f"{self.public_uri}/source-refs/{ref_id}",
                           "linked_pages": [], "linked_page_ids": [], "locator": {}}
                    refs[label] = ref
                _link(ref, page)
        return sorted(refs.values(), key=lambda r: str(r["id"]))

    def ordered(self, include_drafts: bool) -> tuple[Page, ...]:
        """Visible pages in orientation order (entry pages first), computed once."""
        key = "_ordered_all" if include_drafts else "_ordered_approved"
        cached = self.__dict__.get(key)
        if cached is None:
            cached = self.__dict__[key] = tuple(orientation_order(self.visible_pages(include_drafts)))
        return cached

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """Results other modules derive from this snapshot alone (not carried over to a
        derived snapshot: page texts may differ there)."""
        return {}

    def entry_pages(self, include_drafts: bool) -> tuple[Page, ...]:
        """Visible hot, index and overview pages in orientation order."""
        key = "_entry_all" if include_drafts else "_entry_approved"
        cached = self.__dict__.get(key)
        if cached is None:
            hubs = [p for p in self.visible_pages(include_drafts) if p.role != "topic"]
            cached = self.__dict__[key] = tuple(orientation_order(hubs))
        return cached


def _link(ref: dict[str, Any], page: Page) -> None:
    if page.path not in ref["linked_pages"]:
        ref["linked_pages"].append(page.path)
    if page.id not in ref["linked_page_ids"]:
        ref["linked_page_ids"].append(page.id)


def _okf_locator(source: dict[str, Any], page: Page, document: dict[str, Any]) -> dict[str, Any]:
    """Where an OKF source was first seen, with the citing document's trust lifecycle."""
    return {
        "source_profile": okf.PROFILE,
        "source": source,
        "first_seen_page": {"id": page.id, "path": page.path},
        "document": {key: document[key]
                     for key in ("concept_type", "status", "trust_tier", "stale_after")},
    }


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


