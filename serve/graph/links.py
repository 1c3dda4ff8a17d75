"""The link index: a snapshot's link resolution and graph by page, kept so that the next
snapshot after an added, deleted, renamed or retitled page changes only that page's entries
and those of the pages whose links or neighbours it changes.

Each page's share of the graph (its Segment: member and link edges, the nodes it proposes)
depends on the page and on where its links resolve; `refs` says which pages point at each
node, in page order. The first of them gives a shared node its label and path (the
contract's first-occurrence rule), and the pages pointing at a page node are its incoming
links. Maps that grow with the folder are Overlays: a derived index shares its parent's
base and keeps only what changed on top, so deriving costs what changed, not the folder."""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from serve.graph.model import (
    OWN_KEYS,
    UNRESOLVED_LINK,
    Edge,
    Fragment,
    GraphBuilder,
    Node,
    SidecarFile,
    canonical_relation,
    edge_parts,
    fact_ends,
    fact_meta,
    lookup_key,
    member_parts,
    page_targets,
)
from serve.source.page import Page

V = TypeVar("V")
_GONE: Any = object()
# An overlay folds its changes into a new base once they outgrow this share of it.
FLATTEN_SHARE = 8
FLATTEN_MIN = 4096


class Overlay(Mapping[str, V]):
    """A persistent map: a shared base mapping (never written once shared) and this map's own
    changes on top. with_changes() returns a new map and leaves this one as it is."""

    __slots__ = ("base", "top")

    def __init__(self, base: Mapping[str, V], top: dict[str, Any] | None = None) -> None:
        self.base = base
        self.top = top or {}

    def get(self, key: str, default: Any = None) -> Any:
        top = self.top
        if key in top:
            value = top[key]
            return default if value is _GONE else value
        return self.base.get(key, default)

    def __getitem__(self, key: str) -> V:
        value = self.get(key, _GONE)
        if value is _GONE:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _GONE) is not _GONE

    def __iter__(self) -> Iterator[str]:
        top = self.top
        for key in self.base:
            if key not in top:
                yield key
        for key, value in top.items():
            if value is not _GONE:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def items(self) -> ItemsView[str, V]:
        return PairsView(self)

    def pairs(self) -> Iterator[tuple[str, V]]:
        """Every key with its value in one pass over the base's items (a key table's are read
        so, where a look-up per key searches the table for each)."""
        top = self.top
        for key, value in self.base.items():
            if key not in top:
                yield key, value
        for key, value in top.items():
            if value is not _GONE:
                yield key, value

    def with_changes(self, changes: dict[str, Any]) -> Overlay[V]:
        """A map with `changes` applied (a value of None removes the key)."""
        top = {**self.top, **{k: (_GONE if v is None else v) for k, v in changes.items()}}
        if len(top) <= max(FLATTEN_MIN, len(self.base) // FLATTEN_SHARE):
            return Overlay(self.base, top)
        merged = dict(self.base.items())  # (a key table's items are read in one pass)
        for key, value in top.items():
            if value is _GONE:
                merged.pop(key, None)
            else:
                merged[key] = value
        return Overlay(merged)


class PairsView(ItemsView[str, V]):
    """A mapping's items in one pass of its own (`pairs()`), not a look-up per key: an overlay's
    and the store's key tables' (graph/index_tables.py)."""

    def __iter__(self) -> Iterator[tuple[str, V]]:
        return iter(self._mapping.pairs())  # type: ignore[attr-defined]


def as_overlay(mapping: Mapping[str, V]) -> Overlay[V]:
    """`mapping` as an overlay's base (never written once shared: a dict, or the store's
    key table) or itself."""
    if isinstance(mapping, Overlay):
        return mapping
    return Overlay(mapping)


class Segment(NamedTuple):
    """One page's share of the graph, in construction order (contract 2.2, pass 2)."""

    edges: tuple[Edge, ...]
    nodes: dict[str, Node]  # the nodes it proposes (first per id), page nodes aside
    by_target: dict[str, tuple[Edge, ...]]


def page_segment(page: Page, fragment: Fragment, lookup: Mapping[str, Page]) -> Segment:
    """What build_graph's second pass adds for `page` alone (same rules, same order)."""
    g = GraphBuilder()
    pid = f"page:{page.id}"
    for nid, node, relation, edge_meta in member_parts(page, fragment):
        g.node(node)
        if edge_meta is not None:
            g.edge(pid, nid, relation, edge_meta)
        elif (pid, nid, relation) not in g.edges:
            g.edges[(pid, nid, relation)] = Edge(pid, nid, relation, None)
    for target_id, target in edge_parts(page, fragment, lookup):
        if target is None:
            g.edge(pid, target_id, "links_to", None)
        else:
            g.node(target)
            g.edge(pid, target.id, "links_to", UNRESOLVED_LINK)
    edges = tuple(g.edges.values())
    by_target: dict[str, list[Edge]] = {}
    for edge in edges:
        by_target.setdefault(edge.target, []).append(edge)
    return Segment(edges, g.nodes, {t: tuple(es) for t, es in by_target.items()})


def own_keys(page: Page, fragment: Fragment, source_root: str) -> tuple[str, ...]:
    """The lookup keys a page holds by its own names (build_lookup's second pass)."""
    keys = fragment.page_keys[:OWN_KEYS]
    if source_root != ".":
        keys += (lookup_key(f"{source_root}/{page.id}"), lookup_key(f"{source_root}/{page.path}"))
    return tuple(dict.fromkeys(k for k in keys if k))


def alias_keys(fragment: Fragment) -> tuple[str, ...]:
    return tuple(dict.fromkeys(k for k in fragment.page_keys[OWN_KEYS:] if k))


class SidecarPart(NamedTuple):
    """The sidecar facts' share of the graph (pass 4) over one snapshot's pages."""

    nodes: dict[str, Node]  # unresolved endpoints no page proposes
    edges: dict[tuple[str, str, str], Edge]  # new edges, in order
    merged: dict[tuple[str, str, str], Edge]  # page edges with sidecar metadata merged in
    order: dict[tuple[str, str, str], int]
    outgoing: dict[str, list[Edge]]
    incoming: dict[str, list[Edge]]
    keys: frozenset[str]  # the lookup keys of every endpoint
    asked: frozenset[str]  # the unresolved endpoints' node ids (whether a page proposes them)


def sidecar_part(sidecars: Sequence[SidecarFile], lookup: Mapping[str, Page],
                 page_edge: Callable[[tuple[str, str, str]], Edge | None],
                 proposed: Callable[[str], bool]) -> SidecarPart:
    g = GraphBuilder()
    from_pages: set[tuple[str, str, str]] = set()
    keys: set[str] = set()
    asked: set[str] = set()
    for sidecar in sidecars:
        for fact in sidecar.edges:
            keys.update((lookup_key(fact.source), lookup_key(fact.target)))
            ends = fact_ends(fact, lookup)
            for nid, node in ends:
                if node is not None:
                    asked.add(nid)
                    if not proposed(nid):
                        g.node(node)
            meta = fact_meta(sidecar, fact)
            key = (ends[0][0], ends[1][0], canonical_relation(fact.type))
            if key not in g.edges:
                kept = page_edge(key)
                if kept is not None:
                    g.edges[key] = kept
                    from_pages.add(key)
            g.edge(*key, meta)
    merged = {key: g.edges.pop(key) for key in from_pages}
    order = {key: i for i, key in enumerate(g.edges)}
    outgoing: dict[str, list[Edge]] = {}
    incoming: dict[str, list[Edge]] = {}
    for edge in g.edges.values():
        outgoing.setdefault(edge.source, []).append(edge)
        incoming.setdefault(edge.target, []).append(edge)
    return SidecarPart(g.nodes, g.edges, merged, order, outgoing, incoming, frozenset(keys),
                       frozenset(asked))


class LinkIndex:
    """Lookup, key holders, link users, edge targets and referrers of one snapshot's pages.
    Its maps never change once made (derived() makes the next index); segments are made
    on first use and memoised."""

    __slots__ = ("lookup", "own", "alias", "linkers", "targets", "refs", "member_nodes",
                 "segment_edges", "source_root", "memo")

    def __init__(self, lookup: Mapping[str, Page], own: Overlay[Sequence[str]],
                 alias: Overlay[Sequence[str]], linkers: Overlay[Sequence[str]],
                 targets: Overlay[Sequence[str]], refs: Overlay[Sequence[str]],
                 member_nodes: int, segment_edges: int, source_root: str,
                 memo: dict[str, Segment] | None = None) -> None:
        self.lookup = lookup
        self.own = own  # lookup key -> paths holding it by their own names, page order
        self.alias = alias  # lookup key -> paths holding it as an alias, page order
        self.linkers = linkers  # lookup key -> paths whose links use it
        self.targets = targets  # page path -> node ids its edges point at (one edge each)
        self.refs = refs  # node id -> paths whose edges point at it, page order
        self.member_nodes = member_nodes  # non-page node ids some page points at
        self.segment_edges = segment_edges  # edges all pages' segments hold
        self.source_root = source_root
        self.memo: dict[str, Segment] = memo if memo is not None else {}  # path -> Segment

    @classmethod
    def build(cls, pages: Sequence[Page], fragments: Sequence[Fragment], source_root: str,
              lookup: Mapping[str, Page]) -> LinkIndex:
        own: dict[str, list[str]] = {}
        alias: dict[str, list[str]] = {}
        linkers: dict[str, list[str]] = {}
        targets: dict[str, tuple[str, ...]] = {}
        refs: dict[str, list[str]] = {}
        edge_count = 0
        for page, fragment in zip(pages, fragments, strict=True):
            path = page.path
            for key in own_keys(page, fragment, source_root):
                own.setdefault(key, []).append(path)
            for key in alias_keys(fragment):
                alias.setdefault(key, []).append(path)
            for key in dict.fromkeys(fragment.link_keys):
                if key:
                    linkers.setdefault(key, []).append(path)
            found = targets[path] = page_targets(fragment, lookup)
            edge_count += len(found)
            for target in found:
                refs.setdefault(target, []).append(path)
        members = sum(1 for nid in refs if not nid.startswith("page:"))
        return cls(lookup, Overlay({k: tuple(v) for k, v in own.items()}),
                   Overlay({k: tuple(v) for k, v in alias.items()}),
                   Overlay({k: tuple(v) for k, v in linkers.items()}), Overlay(targets),
                   Overlay({k: tuple(v) for k, v in refs.items()}), members, edge_count,
                   source_root)

    def derived(self, removed: Sequence[tuple[Page, Fragment]], added: Sequence[tuple[Page, Fragment]],
                pages: Sequence[Page], fragments: Sequence[Fragment],
                position: Mapping[str, int]) -> tuple[LinkIndex, set[str], set[str]]:
        """The index after `removed` pages went and `added` ones came (an edit is both),
        `pages`, `fragments` and `position` being the new snapshot's; also the lookup keys
        that resolve to another page object now, and the node ids whose referrers changed."""
        place = position.__getitem__
        gone = {page.path for page, _ in removed}
        changes: dict[str, dict[str, list[str]]] = {"own": {}, "alias": {}, "linkers": {}}
        stores = {"own": self.own, "alias": self.alias, "linkers": self.linkers}

        def holders(kind: str, key: str) -> list[str]:
            found = changes[kind].get(key)
            if found is None:
                found = changes[kind][key] = list(stores[kind].get(key, ()))
            return found

        # 1. Who holds each touched key, and so which page it resolves to now.
        for page, fragment in removed:
            for kind, keys in (("own", own_keys(page, fragment, self.source_root)),
                               ("alias", alias_keys(fragment)),
                               ("linkers", tuple(dict.fromkeys(k for k in fragment.link_keys if k)))):
                for key in keys:
                    holders(kind, key).remove(page.path)
        for page, fragment in added:
            for kind, keys in (("own", own_keys(page, fragment, self.source_root)),
                               ("alias", alias_keys(fragment))):
                for key in keys:
                    insort(holders(kind, key), page.path, key=place)
            for key in dict.fromkeys(k for k in fragment.link_keys if k):
                holders("linkers", key).append(page.path)
        own, alias, linkers = (
            stores[kind].with_changes({k: tuple(v) or None for k, v in changes[kind].items()})
            for kind in ("own", "alias", "linkers"))
        resolved: dict[str, Page | None] = {}
        for key in changes["own"].keys() | changes["alias"].keys():
            paths = own.get(key) or alias.get(key)
            winner = pages[place(paths[-1])] if paths else None  # later pages win
            if self.lookup.get(key) is not winner:
                resolved[key] = winner
        changed_keys = set(resolved)
        lookup = as_overlay(self.lookup).with_changes(resolved)
        # 2. The pages whose edges may point elsewhere: the new ones, and those linking by
        # a key that resolves to another page now.
        redo = {page.path for page, _ in added}
        for key in changed_keys:
            redo.update(linkers.get(key, ()))
        target_changes: dict[str, Any] = dict.fromkeys(gone - redo)
        ref_changes: dict[str, list[str]] = {}
        segment_edges = self.segment_edges

        def referrers(nid: str) -> list[str]:
            found = ref_changes.get(nid)
            if found is None:
                found = ref_changes[nid] = list(self.refs.get(nid, ()))
            return found

        for path in gone | redo:
            for target in self.targets.get(path, ()):
                referrers(target).remove(path)
                segment_edges -= 1
        for path in redo:
            at = place(path)
            found = target_changes[path] = page_targets(fragments[at], lookup)
            segment_edges += len(found)
            for target in found:
                insort(referrers(target), path, key=place)
        member_nodes = self.member_nodes
        for nid, users in ref_changes.items():
            if not nid.startswith("page:"):
                member_nodes += bool(users) - bool(self.refs.get(nid))
        refs = self.refs.with_changes({nid: tuple(users) or None for nid, users in ref_changes.items()})
        stale = gone | redo
        memo = dict(self.memo)  # one C-level copy: other threads may be filling it
        for path in stale:
            memo.pop(path, None)
        index = LinkIndex(lookup, own, alias, linkers, self.targets.with_changes(target_changes),
                          refs, member_nodes, segment_edges, self.source_root, memo)
        return index, changed_keys, set(ref_changes)

    def with_lookup(self, lookup: Mapping[str, Page]) -> LinkIndex:
        """The same index over the same links, its lookup naming other page objects (a
        content edit's); segments hold no page objects, so they are shared."""
        return LinkIndex(lookup, self.own, self.alias, self.linkers, self.targets, self.refs,
                         self.member_nodes, self.segment_edges, self.source_root, self.memo)

    def segment(self, page: Page, fragment: Fragment) -> Segment:
        found = self.memo.get(page.path)
        if found is None:
            found = self.memo[page.path] = page_segment(page, fragment, self.lookup)
        return found

    def first_visible(self, nid: str, visible: Callable[[str], bool]) -> str | None:
        paths: Sequence[str] = self.refs.get(nid, ())
        for path in paths:
            if visible(path):
                return path
        return None


class Owners:
    """Shared non-page node id -> path of its first visible page (evidence.first_owners),
    answered from the index's referrers instead of a pass over every page."""

    __slots__ = ("index", "visible", "memo")

    def __init__(self, index: LinkIndex, visible: Callable[[str], bool]) -> None:
        self.index = index
        self.visible = visible
        self.memo: dict[str, str | None] = {}

    def get(self, nid: str, default: str | None = None) -> str | None:
        if nid.startswith(("heading:", "page:")):
            return default
        found = self.memo.get(nid, _GONE)
        if found is _GONE:
            found = self.memo[nid] = self.index.first_visible(nid, self.visible)
        return default if found is None else found


def changed_paths(index: LinkIndex, ids: Iterable[str], page_path: Callable[[str], str | None]) -> set[str]:
    """Pages whose evidence items may show a change to the nodes `ids`: the pages pointing
    at them, and the page of a page node."""
    out: set[str] = set()
    for nid in ids:
        out.update(index.refs.get(nid, ()))
        if nid.startswith("page:"):
            path = page_path(nid)
            if path is not None:
                out.add(path)
    return out
