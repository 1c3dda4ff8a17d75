"""The link graph: compact node and edge tuples, per-page fragments, the build and its counts."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from serve.source import okf
from serve.source.page import Page
from serve.source.sidecar import SidecarEdge

SLUG_RE = re.compile(r"[^A-Za-z0-9\uac00-\ud7a3._-]+")
ISSUE_RE = re.compile(r"#\d+|[A-Z][A-Z0-9]+-\d+|GH-\d+")
RELATION_RE = re.compile(r"[^a-z0-9]+")
NOT_ALNUM_RE = re.compile(r"[\W_]+")


def slug(value: str) -> str:
    """The contract's slug: runs outside [A-Za-z0-9가-힣._-] become '-', 'item' if empty."""
    return SLUG_RE.sub("-", value).strip("-") or "item"


def lookup_key(value: str) -> str:
    """Link lookup normalisation: case-, space- and punctuation-insensitive.

    Deliberately keeps every Unicode letter and digit (the reference kept only ASCII and
    Hangul, so Japanese or Chinese titles collided on the empty key)."""
    if value[-3:].lower() == ".md":
        value = value[:-3]
    return NOT_ALNUM_RE.sub("", value.casefold())


def canonical_relation(value: str) -> str:
    return RELATION_RE.sub("_", value.lower()).strip("_") or "related_to"


class Node(NamedTuple):
    """A graph node. `meta` is None for `{}`, a dict, or the Page for page nodes (their
    metadata is rendered from the page on output, which keeps the graph small)."""

    id: str
    label: str
    kind: str
    path: str
    meta: dict[str, Any] | Page | None


class Edge(NamedTuple):
    source: str
    target: str
    relation: str
    meta: dict[str, Any] | None


# NamedTuple's constructor runs Python code; building from a tuple runs in C (hot loops).
def _node(*fields: Any) -> Node:
    return tuple.__new__(Node, fields)


def _edge(*fields: Any) -> Edge:
    return tuple.__new__(Edge, fields)


class Fragment(NamedTuple):
    """What one page contributes to the graph, independent of every other page, kept
    flat because a large folder holds hundreds of thousands of these ids: the node ids
    of its headings, source refs and tags (labels come from the page, in the same order)
    and the lookup keys of its links (parallel to page.links)."""

    member_ids: tuple[str, ...]
    link_keys: tuple[str, ...]
    # Lookup keys of the page itself: id, title, path, file name (OWN_KEYS of them), then
    # its aliases.
    page_keys: tuple[str, ...]
    # The node id each link (parallel to link_keys) has when it resolves to no page: a link
    # index is so built without the page's written links (a page read back from the store
    # would have to be read for them).
    dangling_ids: tuple[str, ...] = ()


OWN_KEYS = 4
TITLE_KEY = 1  # where the title's key sits among them


OkfMember = tuple[str, str, str, str, dict[str, Any], dict[str, Any]]
OKF_META = {"source_profile": okf.PROFILE}


def okf_members(page: Page) -> list[OkfMember]:
    """(node id, label, kind, relation, node metadata, edge metadata) of the nodes an OKF
    page adds after its headings: its type, its resource, then each structured source."""
    if not page.okf_json:
        return []
    data = json.loads(page.okf_json)
    members: list[OkfMember] = []
    if data["concept_type"]:
        members.append((f"okf_type:{slug(data['concept_type']).lower()}", data["concept_type"],
                        "okf_type", "typed_as", dict(OKF_META), {"source": "okf.type", **OKF_META}))
    if data["resource"]:
        members.append((f"okf_resource:{slug(data['resource'])}", data["resource"], "okf_resource",
                        "describes", dict(OKF_META), {"source": "okf.resource", **OKF_META}))
    for source in data["sources"]:
        members.append((f"source:{slug(okf.source_key(source))}", okf.source_label(source),
                        "source_ref", "cites", {**OKF_META, "okf": source},
                        {"source": "okf.sources", **OKF_META}))
    return members


def plain_refs(page: Page) -> tuple[str, ...]:
    """The source refs that get plain `source:` nodes: an OKF page's structured sources
    have their own (with metadata), so refs equal to their keys are skipped."""
    if not page.okf_json:
        return page.source_refs
    keys = {okf.source_key(s) for s in json.loads(page.okf_json)["sources"]}
    return tuple(ref for ref in page.source_refs if ref not in keys)


def page_fragment(page: Page) -> Fragment:
    ids = [f"heading:{slug(page.id + ':' + heading)}" for heading in page.headings]
    if page.okf_json:
        ids += [member[0] for member in okf_members(page)]
    ids += [f"source:{slug(ref)}" for ref in plain_refs(page)]
    ids += [f"tag:{slug(tag.lstrip('#').lower())}" for tag in page.tags]
    own = (page.id, page.title, page.path, page.path.rsplit("/", 1)[-1], *page.aliases)
    return Fragment(tuple(ids), tuple(lookup_key(link) for link in page.links),
                    tuple(lookup_key(key) for key in own),
                    tuple(map(unresolved_id, page.links)))


def shared_strings(fragment: Fragment) -> Fragment:
    """The fragment with the strings pages repeat shared: tag and source ids and link keys
    repeat across pages, so they are interned; the heading ids (listed first) are the page's
    own, and interning them would only cost; a page's own keys often coincide (its id's and
    path's, its title's and file name's): one string for each. (Told apart by their prefix,
    not by the page's headings: a page read back from the store is not read for this.)"""
    ids = fragment.member_ids
    own = next((n for n, nid in enumerate(ids) if not nid.startswith("heading:")), len(ids))
    first: dict[str, str] = {}
    return tuple.__new__(Fragment, ((*ids[:own], *map(sys.intern, ids[own:])),
                                    tuple(map(sys.intern, fragment.link_keys)),
                                    tuple(first.setdefault(key, key) for key in fragment.page_keys),
                                    tuple(map(sys.intern, fragment.dangling_ids))))


def _members(page: Page, fragment: Fragment) -> Iterator[tuple[str, str, str, str, Any, Any]]:
    """(node id, label, kind, relation, node metadata, edge metadata) for each heading, OKF
    member, source ref and tag of a page, in the graph's construction order."""
    labels: list[tuple[str, str, str, Any, Any]] = [(h, "heading", "contains", None, None)
                                                    for h in page.headings]
    if page.okf_json:
        labels += [member[1:] for member in okf_members(page)]
    labels += [(r, "source_ref", "cites", None, None) for r in plain_refs(page)]
    labels += [(t.lstrip("#"), "tag", "tagged", None, None) for t in page.tags]
    for nid, (label, kind, relation, node_meta, edge_meta) in zip(fragment.member_ids, labels,
                                                                   strict=True):
        yield nid, label, kind, relation, node_meta, edge_meta


def page_node(page: Page) -> Node:
    return tuple.__new__(Node, (f"page:{page.id}", page.title, page.role, page.path, page))


def _unresolved_kind(value: str) -> str:
    if value.startswith(("http://", "https://")):
        return "external_ref"
    return "external_issue" if ISSUE_RE.match(value) else "placeholder"


def unresolved_id(value: str) -> str:
    """The node id of a link written `value` that resolves to no page."""
    prefix = "external" if _unresolved_kind(value).startswith("external_") else "placeholder"
    return f"{prefix}:{slug(value)}"


def unresolved_node(value: str, path: str, source: str) -> Node:
    return Node(unresolved_id(value), value, _unresolved_kind(value), path,
                {"unresolved": True, "source": source})


@dataclass(frozen=True, slots=True)
class SidecarFile:
    """One graph sidecar: its root-relative path and its edges."""

    path: str
    edges: tuple[SidecarEdge, ...]


UNRESOLVED_LINK = {"unresolved": True}

class GraphBuilder:
    """Collects nodes and edges in order with the contract's dedupe and merge rules:
    first node wins; a repeated edge merges its metadata into the first one."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: dict[tuple[str, str, str], Edge] = {}

    def node(self, node: Node) -> None:
        if node.id not in self.nodes:
            self.nodes[node.id] = node

    def edge(self, source: str, target: str, relation: str, meta: dict[str, Any] | None) -> None:
        key = (source, target, relation)
        kept = self.edges.get(key)
        if kept is None:
            self.edges[key] = _edge(source, target, relation, meta)
            return
        if not meta:
            return
        merged = dict(kept.meta or {})
        for name, value in meta.items():
            current = merged.get(name)
            if current in (None, "", [], {}):
                merged[name] = value
            elif current != value:
                if isinstance(current, list):
                    if value not in current:
                        merged[name] = [*current, value]
                else:
                    merged[name] = [current, value]
        self.edges[key] = kept._replace(meta=merged)


def build_graph(pages: Sequence[Page], fragments: Sequence[Fragment], adapter: str,
                sidecars: Sequence[SidecarFile], lookup: Mapping[str, Page]) -> tuple[list[Node], list[Edge]]:
    """Nodes and edges in the contract's construction order (2.2)."""
    g = GraphBuilder()
    nodes, edges = g.nodes, g.edges
    # One id string per page, shared by every edge that touches it.
    page_ids: dict[str, str] = {}
    for page in pages:
        pid = f"page:{page.id}"
        if pid not in nodes:
            nodes[pid] = _node(pid, page.title, page.role, page.path, page)
        page_ids.setdefault(page.id, nodes[pid].id)
    for page, fragment in zip(pages, fragments, strict=True):
        pid = page_ids[page.id]
        path = page.path
        for nid, label, kind, relation, node_meta, edge_meta in _members(page, fragment):
            if nid not in nodes:
                nodes[nid] = _node(nid, label, kind, path, node_meta)
            if edge_meta is not None:  # OKF members: a repeated edge merges metadata
                g.edge(pid, nid, relation, edge_meta)
                continue
            member_key = (pid, nid, relation)
            if member_key not in edges:
                edges[member_key] = _edge(pid, nid, relation, None)
        for key, raw in zip(fragment.link_keys, page.links, strict=True):
            target = lookup.get(key) if key else None
            if target is not None:
                g.edge(pid, page_ids[target.id], "links_to", None)
            else:
                node = unresolved_node(raw, path, "wikilink")
                g.node(node)
                g.edge(pid, node.id, "links_to", UNRESOLVED_LINK)
    if adapter == "dendron":
        for page in pages:
            name = page.path.rsplit("/", 1)[-1]
            stem = page.path.rsplit(".", 1)[0] if "." in name else page.path
            if "." not in stem.rsplit("/", 1)[-1]:
                continue
            parent_key = stem[: stem.rfind(".")]
            parent = lookup.get(lookup_key(parent_key))
            if parent is not None:
                source = f"page:{parent.id}"
            else:
                source = f"placeholder:{slug(parent_key)}"
                g.node(Node(source, parent_key, "placeholder", page.path,
                            {"unresolved": True, "source": "dendron_hierarchy"}))
            g.edge(source, f"page:{page.id}", "parent_of", {"source": "dendron_hierarchy"})
    for sidecar in sidecars:
        for fact in sidecar.edges:
            ends = fact_ends(fact, lookup)
            for _, end_node in ends:
                if end_node is not None:
                    g.node(end_node)
            g.edge(ends[0][0], ends[1][0], canonical_relation(fact.type), fact_meta(sidecar, fact))
    return list(nodes.values()), list(edges.values())


def fact_ends(fact: SidecarEdge, lookup: Mapping[str, Page]) -> tuple[tuple[str, Node | None], ...]:
    """A sidecar fact's source and target: each its page's node id, or, when no page holds
    it, the id of the unresolved node made for it, with that node."""
    src_page, dst_page = lookup.get(lookup_key(fact.source)), lookup.get(lookup_key(fact.target))
    ends: list[tuple[str, Node | None]] = []
    for value, end_page, other in ((fact.source, src_page, dst_page), (fact.target, dst_page, src_page)):
        if end_page is not None:
            ends.append((f"page:{end_page.id}", None))
        else:
            node = unresolved_node(value, other.path if other else "", "graph.json")
            ends.append((node.id, node))
    return tuple(ends)


def fact_meta(sidecar: SidecarFile, fact: SidecarEdge) -> dict[str, Any]:
    meta: dict[str, Any] = {"source": "graph.json", "path": sidecar.path}
    if fact.confidence is not None:
        meta["confidence"] = fact.confidence
    return meta


def graph_counts(pages: Sequence[Page], fragments: Sequence[Fragment], adapter: str,
                 sidecars: Sequence[SidecarFile], lookup: Mapping[str, Page]) -> tuple[int, int]:
    """len(nodes), len(edges) of build_graph without building it: /health needs only the
    counts, and building a large graph costs seconds. Falls back to the full build where
    the shortcut's assumptions do not hold (Dendron hierarchy, duplicate page ids)."""
    page_ids = {f"page:{p.id}" for p in pages}
    if adapter == "dendron" or len(page_ids) != len(pages):
        nodes, edges = build_graph(pages, fragments, adapter, sidecars, lookup)
        return len(nodes), len(edges)
    node_ids = set(page_ids)
    edge_count = 0
    for fragment in fragments:
        node_ids.update(fragment.member_ids)
        # Member ids are unique to their relation (the id prefix says which), so a page's
        # member edges are its distinct member ids.
        edge_count += len(set(fragment.member_ids))
    keys: set[tuple[str, str, str]] = set()
    for page, fragment in zip(pages, fragments, strict=True):
        pid = f"page:{page.id}"
        for key, dangling in zip(fragment.link_keys, fragment.dangling_ids, strict=True):
            target = lookup.get(key) if key else None
            if target is not None:
                keys.add((pid, f"page:{target.id}", "links_to"))
            else:
                node_ids.add(dangling)
                keys.add((pid, dangling, "links_to"))
    for sidecar in sidecars:
        for fact in sidecar.edges:
            ends = []
            for value in (fact.source, fact.target):
                end_page = lookup.get(lookup_key(value))
                if end_page is not None:
                    ends.append(f"page:{end_page.id}")
                else:
                    nid = unresolved_node(value, "", "graph.json").id
                    node_ids.add(nid)
                    ends.append(nid)
            # Sidecar endpoints are pages or placeholder/external nodes, never heading,
            # source or tag nodes, so these edges can only merge with link edges.
            keys.add((ends[0], ends[1], canonical_relation(fact.type)))
    return len(node_ids), edge_count + len(keys)


def build_lookup(pages: Iterable[Page], fragments: Iterable[Fragment],
                 source_root: str) -> dict[str, Page]:
    """Link targets: id, title, path and file name of every page (later pages win); for a
    nested source root also `<root>/<id>` and `<root>/<path>`. Aliases resolve too, but
    never in place of a page's own name: they go in first, and own keys overwrite them."""
    lookup: dict[str, Page] = {}
    pages, fragments = list(pages), list(fragments)
    for page, fragment in zip(pages, fragments, strict=True):
        for norm in fragment.page_keys[OWN_KEYS:]:
            if norm:
                lookup[norm] = page
    for page, fragment in zip(pages, fragments, strict=True):
        keys = list(fragment.page_keys[:OWN_KEYS])
        if source_root != ".":
            keys += [lookup_key(f"{source_root}/{page.id}"), lookup_key(f"{source_root}/{page.path}")]
        for norm in keys:
            if norm:
                lookup[norm] = page
    return lookup


def member_parts(page: Page, fragment: Fragment) -> Iterator[tuple[str, Node, str, Any]]:
    """(node id, node, relation, edge metadata) of a page's members, as build_graph makes them."""
    path = page.path
    for nid, label, kind, relation, node_meta, edge_meta in _members(page, fragment):
        yield nid, _node(nid, label, kind, path, node_meta), relation, edge_meta


def edge_parts(page: Page, fragment: Fragment,
               lookup: Mapping[str, Page]) -> Iterator[tuple[str, Node | None]]:
    """Per link of a page: (target page node id, None) when it resolves, else (its
    unresolved node's id, that node), as build_graph makes them."""
    path = page.path
    for key, raw in zip(fragment.link_keys, page.links, strict=True):
        target = lookup.get(key) if key else None
        if target is not None:
            yield f"page:{target.id}", None
        else:
            node = unresolved_node(raw, path, "wikilink")
            yield node.id, node


def page_targets(fragment: Fragment, lookup: Mapping[str, Page]) -> tuple[str, ...]:
    """The distinct node ids a page's edges point at, in order. Each has one edge from the
    page (a member id's prefix fixes its relation; links are links_to)."""
    targets = dict.fromkeys(fragment.member_ids)
    for key, dangling in zip(fragment.link_keys, fragment.dangling_ids, strict=True):
        target = lookup.get(key) if key else None
        targets[f"page:{target.id}" if target is not None else dangling] = None
    return tuple(targets)
