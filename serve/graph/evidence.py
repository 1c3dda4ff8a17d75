"""A context pack's graph: each evidence page's depth-1 neighbourhood, merged under bounds."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any, NamedTuple

from serve.graph.model import (
    UNRESOLVED_LINK,
    Edge,
    Fragment,
    Node,
    SidecarFile,
    canonical_relation,
    lookup_key,
    okf_members,
    page_node,
    plain_refs,
    unresolved_node,
)
from serve.graph.views import GraphView, compact_json
from serve.source.page import Page
from serve.source.sidecar import SidecarEdge


class SeedItems(NamedTuple):
    """What one evidence page adds to a context pack's graph, in graph order. Kept per page
    by a snapshot, so it is flat: `pairs` holds, per item, a node id, the node, the edge's
    key and the edge (its headings, OKF members, source refs and tags, its links, the
    visible pages linking to it); `facts` the sidecar facts touching it as (node ids,
    nodes, edge key, edge), with no edge when the other end is withheld. Nodes and edges
    are the tuples, or (rendered()) edges' metadata and most nodes as JSON."""

    own_id: str
    own: Any
    pairs: tuple[Any, ...]
    facts: tuple[tuple[tuple[str, ...], tuple[Any, ...], tuple[str, str, str] | None, Any], ...]

    def rendered(self, view: GraphView) -> SeedItems:
        """The same items with each edge as its metadata's JSON: edge_text() writes the rest
        from the key when the edge is used, as most edges have no metadata and their JSON
        would only repeat the key (memory). Nodes become their JSON in `view`, but for the
        pages it links to and is linked from: they stay nodes, written (`render`, from the
        snapshot's JSON of each page node) when a pack takes them, as a pack's size budget
        takes a few of each page's."""
        pairs = list(self.pairs)
        for at in range(1, len(pairs), 4):
            node = pairs[at]
            if not isinstance(node.meta, Page):  # a page's is kept by path in `view`
                pairs[at] = view.node_json(node)
            pairs[at + 2] = sys.intern(edge_meta_json(pairs[at + 2]))  # a few distinct ones
        facts = tuple((ids, tuple(view.node_json(n) for n in nodes), key,
                       edge_meta_json(edge) if edge is not None else None)
                      for ids, nodes, key, edge in self.facts)
        return SeedItems(self.own_id, view.node_json(self.own), tuple(pairs), facts)


def as_is(node: Any) -> Any:
    return node


def seed_items(page: Page, fragment: Fragment, lookup: Mapping[str, Page], incoming: Iterable[Page],
               facts: Sequence[SidecarFact], *, approved_only: bool, owner: dict[str, str]) -> SeedItems:
    """A page's own node and its depth-1 neighbourhood, independent of the other evidence
    pages (merge_seeds() applies the bounds)."""
    new = tuple.__new__  # Node(...) and Edge(...) without the Python-level constructor
    pid = f"page:{page.id}"
    path = page.path
    pairs: list[Any] = []
    n_headings = len(page.headings)
    # An OKF page's own members sit between its headings and its (plain) source refs.
    members = okf_members(page) if page.okf_json else []
    refs = plain_refs(page)
    n_okf = n_headings + len(members)
    n_refs = n_okf + len(refs)
    for i, nid in enumerate(fragment.member_ids):  # headings, OKF, source refs, tags
        edge_meta: dict[str, Any] | None = None
        if n_headings <= i < n_okf:
            _, label, kind, relation, node_meta, edge_meta = members[i - n_headings]
            node = new(Node, (nid, label, kind, owner.get(nid, path), node_meta))
        else:
            if i < n_headings:
                label, kind, relation = page.headings[i], "heading", "contains"
            elif i < n_refs:
                label, kind, relation = refs[i - n_okf], "source_ref", "cites"
            else:
                label, kind, relation = page.tags[i - n_refs].lstrip("#"), "tag", "tagged"
            node = new(Node, (nid, label, kind, owner.get(nid, path), None))
        pairs += (nid, node, (pid, nid, relation), new(Edge, (pid, nid, relation, edge_meta)))
    for link_key, raw in zip(fragment.link_keys, page.links, strict=True):
        target = lookup.get(link_key) if link_key else None
        meta: dict[str, Any] | None = None
        if target is not None:
            if approved_only and not target.approved:
                continue
            node = page_node(target)
        else:
            node = unresolved_node(raw, path, "wikilink")
            node = node._replace(path=owner.get(node.id, path))
            meta = UNRESOLVED_LINK
        pairs += (node.id, node, (pid, node.id, "links_to"), new(Edge, (pid, node.id, "links_to", meta)))
    for source in incoming:
        if approved_only and not source.approved:
            continue
        node = page_node(source)
        pairs += (node.id, node, (node.id, pid, "links_to"), new(Edge, (node.id, pid, "links_to", None)))
    fact_items: list[tuple[tuple[str, ...], tuple[Node, ...], tuple[str, str, str] | None, Edge | None]] = []
    for sidecar_path, fact, ends in facts:
        ends_nodes: list[Node] = []
        for value, end in zip((fact.source, fact.target), ends, strict=True):
            if end is None:
                node = unresolved_node(value, path, "graph.json")
                ends_nodes.append(node._replace(path=owner.get(node.id, path)))
            elif end.approved or not approved_only:
                ends_nodes.append(page_node(end))
            else:
                # A withheld end: no edge, but an end already listed is still shown.
                if ends_nodes:
                    fact_items.append(((ends_nodes[0].id,), (ends_nodes[0],), None, None))
                break
        else:
            fact_meta: dict[str, Any] = {"source": "graph.json", "path": sidecar_path}
            if fact.confidence is not None:
                fact_meta["confidence"] = fact.confidence
            key = (ends_nodes[0].id, ends_nodes[1].id, canonical_relation(fact.type))
            fact_items.append(((key[0], key[1]), tuple(ends_nodes), key, new(Edge, (*key, fact_meta))))
    own = page_node(page)
    return SeedItems(own.id, own, tuple(pairs), tuple(fact_items))


def merge_seeds(seeds: Sequence[SeedItems], limit: int,
                render: Callable[[Any], Any] = as_is) -> tuple[list[Any], dict[tuple[str, str, str], Any]]:
    """The evidence pages' nodes first, then each page's items in order: at most `limit`
    nodes (first come, first kept) and `limit` edges, each edge between two kept nodes. A
    shared node keeps the first page's version (its path is the first visible owner's).
    Returns the nodes (`render`: what a kept page node a seed links to or is linked from
    becomes) and the edges by key as the items hold them. This runs on every
    context pack, so it is flat loops over ready-made items that stop once both bounds are
    reached."""
    nodes: dict[str, Any] = {}
    edges: dict[tuple[str, str, str], Any] = {}
    for seed in seeds:
        if seed.own_id not in nodes and len(nodes) < limit:
            nodes[seed.own_id] = seed.own
    for seed in seeds:
        if len(nodes) >= limit and len(edges) >= limit:
            break  # nothing more can be added
        if seed.own_id not in nodes:
            continue  # a seed cut by the bound: the bound is reached, so it adds nothing
        pairs = seed.pairs
        for at in range(0, len(pairs), 4):
            nid = pairs[at]
            if nid not in nodes:
                if len(nodes) >= limit:
                    continue
                node = pairs[at + 1]
                nodes[nid] = node if isinstance(node, str) else render(node)
            if len(edges) < limit:
                key = pairs[at + 2]
                if key not in edges:
                    edges[key] = pairs[at + 3]
        for ids, fact_nodes, fact_key, fact_edge in seed.facts:
            for nid, node in zip(ids, fact_nodes, strict=True):
                if nid not in nodes:
                    if len(nodes) >= limit:
                        break
                    nodes[nid] = node
            else:
                if fact_key is not None and len(edges) < limit:
                    edges.setdefault(fact_key, fact_edge)
    return list(nodes.values()), edges


def graph_json(node_json: Sequence[str], edge_json: Sequence[str]) -> str:
    return f'{{"nodes":[{",".join(node_json)}],"edges":[{",".join(edge_json)}]}}'


def edge_meta_json(edge: Edge) -> str:
    return compact_json(edge.meta) if edge.meta else "{}"


def edge_text(key: tuple[str, str, str], meta_json: str) -> str:
    """An edge's JSON from its (source, target, relation) and its metadata's JSON (written by
    compact_json). Runs for every edge of every context pack, so the key's strings are
    written here, with json.dumps' own string encoder, rather than by a writer call each;
    the pack's graph is put together from such pieces (search.Searcher.context_json)."""
    enc = encode_basestring  # the encoder json.dumps itself uses for strings
    return (f'{{"source":{enc(key[0])},"target":{enc(key[1])},"relation":{enc(key[2])},'
            f'"metadata":{meta_json}}}')


SidecarFact = tuple[str, SidecarEdge, tuple[Page | None, Page | None]]


def sidecar_facts(sidecars: Sequence[SidecarFile],
                  lookup: Mapping[str, Page]) -> dict[str, list[SidecarFact]]:
    """Page path -> the sidecar facts with that page at either end, endpoints resolved."""
    facts: dict[str, list[SidecarFact]] = {}
    for sidecar in sidecars:
        for fact in sidecar.edges:
            ends = (lookup.get(lookup_key(fact.source)), lookup.get(lookup_key(fact.target)))
            for path in {end.path for end in ends if end is not None}:
                facts.setdefault(path, []).append((sidecar.path, fact, ends))
    return facts


def first_owners(pages: Sequence[Page], fragments: Sequence[Fragment], lookup: Mapping[str, Page],
                 visible: Callable[[Page], bool]) -> dict[str, str]:
    """Shared non-page node id -> path of the first visible page (in page order) that has
    it as a source ref, tag or unresolved link: the path the filtered graph shows for it."""
    owner: dict[str, str] = {}
    for page, fragment in zip(pages, fragments, strict=True):
        if not visible(page):
            continue
        for nid in fragment.member_ids:
            if not nid.startswith("heading:"):
                owner.setdefault(nid, page.path)
        for key, dangling in zip(fragment.link_keys, fragment.dangling_ids, strict=True):
            if not key or key not in lookup:
                owner.setdefault(dangling, page.path)
    return owner


def incoming_links(pages: Sequence[Page], fragments: Sequence[Fragment],
                   lookup: Mapping[str, Page]) -> dict[str, list[int]]:
    """For each page path, the positions of the pages that link to it (in page order)."""
    incoming: dict[str, list[int]] = {}
    for position, fragment in enumerate(fragments):
        seen: set[str] = set()
        for key in fragment.link_keys:
            target = lookup.get(key) if key else None
            if target is not None and target.path not in seen:
                seen.add(target.path)
                incoming.setdefault(target.path, []).append(position)
    return incoming
