"""A context pack's graph: each evidence page's depth-1 neighbourhood, merged under bounds."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
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

    @property
    def size(self) -> int:
        """How many items (for the bounds of what a snapshot keeps)."""
        return len(self.pairs) // 4 + len(self.facts)

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


def _as_is(node: Any) -> Any:
    return node


def seed_items(page: Page, fragment: Fragment, lookup: dict[str, Page], incoming: Iterable[Page],
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
                render: Callable[[Any], Any] = _as_is) -> tuple[list[Any], dict[tuple[str, str, str], Any]]:
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


# The size of a context pack's graph, in bytes of its JSON: the graph was most of a pack,
# and an agent pays for every byte in its context window. Fixed, so that a question gets
# the same graph whatever `fields` or `snippet_chars` make of its evidence items.
GRAPH_BYTES = 6144
EMPTY_GRAPH_BYTES = len(b'{"nodes":[],"edges":[]}')
SMALLEST_ITEM = len(b'{"source":"","target":"","relation":"","metadata":{}}')  # an edge at least


def _size(text: str) -> int:
    """UTF-8 length of a piece of JSON (most are ASCII: no encoding then)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
# What goes first when the graph must be cut, by the edge's relation: links between the
# evidence pages, then sources cited, then links to and from other pages (backlinks with
# them), then sidecar facts (after the links, as in the full graph: a node both name keeps
# the link's version), then tags, and headings last (evidence items locate sections).
TIER_BETWEEN, TIER_CITES, TIER_LINKS, TIER_FACTS, TIER_TAGS, TIER_HEADINGS = range(6)
TIER_OF = {"links_to": TIER_LINKS, "tagged": TIER_TAGS, "contains": TIER_HEADINGS}


class Budgeted(NamedTuple):
    """A budgeted graph: node JSON, edges by key (metadata JSON), and what was left out."""

    nodes: list[str]
    edges: dict[tuple[str, str, str], str]
    omitted_nodes: int
    omitted_edges: int


# An item as the budget takes it: (node id, node JSON, edge key, edge metadata JSON) for a
# link, tag, heading or source; a sidecar fact has a tuple of ids and one of nodes instead,
# and maybe no edge. Sizes are taken when the budget reaches an item (most are never reached).
BudgetItem = tuple[Any, Any, Any, Any]


class BudgetPlan(NamedTuple):
    """A rendered seed's items as budget_seeds() takes them: sorted into the tiers the other
    evidence pages do not change, then (_tiers) links and facts between evidence pages told
    from the others."""

    fixed: tuple[tuple[BudgetItem, ...], ...]  # by tier; TIER_BETWEEN, TIER_LINKS, TIER_FACTS empty
    all_links: tuple[BudgetItem, ...]  # its links and the links to it, in graph order
    out_links: tuple[BudgetItem, ...]  # the links from it (a link to itself among them)
    in_links: tuple[BudgetItem, ...]
    link_ids: frozenset[str]  # the pages its links name (either way)
    facts: tuple[BudgetItem, ...]
    links: tuple[BudgetItem, ...]  # out and in links taken in turn (no evidence page among them)


def _alternate(out: Sequence[BudgetItem], inc: Sequence[BudgetItem]) -> list[BudgetItem]:
    """Outgoing and incoming links taken in turn, so neither direction is dropped wholesale."""
    taken: list[BudgetItem] = []
    for position in range(max(len(out), len(inc))):
        taken.extend(side[position] for side in (out, inc) if position < len(side))
    return taken


def budget_plan(seed: SeedItems) -> BudgetPlan:
    """The plan of a rendered seed (nodes and edge metadata as JSON)."""
    fixed: list[list[BudgetItem]] = [[] for _ in range(TIER_HEADINGS + 1)]
    links: list[BudgetItem] = []
    out: list[BudgetItem] = []
    inc: list[BudgetItem] = []
    pairs = seed.pairs
    own = seed.own_id
    for at in range(0, len(pairs), 4):
        item = pairs[at:at + 4]
        tier = TIER_OF.get(item[2][2], TIER_CITES)
        if tier == TIER_LINKS:
            links.append(item)
            (out if item[2][0] == own else inc).append(item)
        else:
            fixed[tier].append(item)
    return BudgetPlan(tuple(map(tuple, fixed)), tuple(links),
                      tuple(out), tuple(inc), frozenset(item[0] for item in links),
                      seed.facts, tuple(_alternate(out, inc)))


def _tiers(plan: BudgetPlan, evidence: set[str]) -> Sequence[Sequence[BudgetItem]]:
    """The seed's items by tier for a pack whose evidence pages are `evidence`: links and
    facts between them first (TIER_BETWEEN), the rest of its links taken in turn."""
    between: list[BudgetItem] = []
    links: Sequence[BudgetItem] = plan.links
    if not plan.link_ids.isdisjoint(evidence):
        between = [item for item in plan.all_links if item[0] in evidence]
        links = _alternate([i for i in plan.out_links if i[0] not in evidence],
                           [i for i in plan.in_links if i[0] not in evidence])
    facts: list[BudgetItem] = []
    for item in plan.facts:
        if item[3] is not None and all(i in evidence for i in item[0]):
            between.append(item)
        else:
            facts.append(item)
    tiers: list[Sequence[BudgetItem]] = list(plan.fixed)
    tiers[TIER_BETWEEN], tiers[TIER_LINKS], tiers[TIER_FACTS] = between, links, facts
    return tiers


def budget_seeds(seeds: Sequence[SeedItems], limit: int, size: int,
                 render: Callable[[Any], Any] = _as_is) -> Budgeted:
    """The neighbourhood of the evidence pages within `limit` nodes, `limit` edges and `size`
    bytes of JSON: the evidence pages' nodes first, then tier by tier (TIER_*),
    taking the pages' items in turn so the first page cannot use the whole budget. Seeds'
    items are rendered (SeedItems.rendered()); `render` writes the JSON of a page node a
    seed links to or is linked from when the budget reaches it."""
    plans = [budget_plan(seed) for seed in seeds]
    nodes: dict[str, str] = {}
    edges: dict[tuple[str, str, str], str] = {}
    used = EMPTY_GRAPH_BYTES
    for seed in seeds:
        cost = _size(seed.own) + 1
        if seed.own_id not in nodes and len(nodes) < limit and used + cost <= size:
            nodes[seed.own_id] = seed.own
            used += cost
    # What the neighbourhood holds, cut seeds included: `omitted` is the rest.
    seen_nodes: set[str] = set()
    seen_edges: set[tuple[str, str, str]] = set()
    for seed in seeds:
        seen_nodes.add(seed.own_id)
        seen_nodes.update(seed.pairs[::4])
        seen_edges.update(seed.pairs[2::4])
        for ids, _, key, _ in seed.facts:
            seen_nodes.update(ids)
            if key is not None:
                seen_edges.add(key)
    evidence = {seed.own_id for seed in seeds}
    per_seed = [_tiers(plan, evidence) for seed, plan in zip(seeds, plans, strict=True)
                if seed.own_id in nodes]
    for tier in range(TIER_HEADINGS + 1):
        if size - used < SMALLEST_ITEM:
            break  # full
        queues = [tiers[tier] for tiers in per_seed]
        for position in range(max((len(q) for q in queues), default=0)):
            if size - used < SMALLEST_ITEM:
                break
            for queue in queues:
                if position >= len(queue):
                    continue
                ids, node_json, key, meta = queue[position]
                if isinstance(ids, str):  # one node
                    if ids in nodes:
                        new: Sequence[tuple[str, str]] = ()
                        cost = 0
                    else:
                        if not isinstance(node_json, str):
                            node_json = render(node_json)
                        new, cost = ((ids, node_json),), _size(node_json) + 1
                else:
                    new = [(i, n) for i, n in zip(ids, node_json, strict=True) if i not in nodes]
                    cost = sum(_size(n) + 1 for _, n in new)
                if used + cost > size or len(nodes) + len(new) > limit:
                    continue
                if key is not None and key not in edges:
                    if len(edges) >= limit:
                        continue
                    cost += _size(edge_text(key, meta)) + 1
                    if used + cost > size:
                        continue
                nodes.update(new)
                if key is not None:
                    edges.setdefault(key, meta)
                used += cost
                if size - used < SMALLEST_ITEM:
                    break
    return Budgeted(list(nodes.values()), edges, len(seen_nodes) - len(nodes),
                    len(seen_edges) - len(edges))


def budgeted_json(graph: Budgeted) -> str:
    """A budgeted graph's JSON: the reference's two keys, and `truncated` with what was left
    out when anything was (so an uncut graph reads exactly as before)."""
    body = graph_json(graph.nodes, [edge_text(key, meta) for key, meta in graph.edges.items()])
    if not (graph.omitted_nodes or graph.omitted_edges):
        return body
    return (f'{body[:-1]},"truncated":true,"omitted":{{"nodes":{graph.omitted_nodes},'
            f'"edges":{graph.omitted_edges}}}}}')


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


def sidecar_facts(sidecars: Sequence[SidecarFile], lookup: dict[str, Page]) -> dict[str, list[SidecarFact]]:
    """Page path -> the sidecar facts with that page at either end, endpoints resolved."""
    facts: dict[str, list[SidecarFact]] = {}
    for sidecar in sidecars:
        for fact in sidecar.edges:
            ends = (lookup.get(lookup_key(fact.source)), lookup.get(lookup_key(fact.target)))
            for path in {end.path for end in ends if end is not None}:
                facts.setdefault(path, []).append((sidecar.path, fact, ends))
    return facts


def first_owners(pages: Sequence[Page], fragments: Sequence[Fragment], lookup: dict[str, Page],
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
        for key, raw in zip(fragment.link_keys, page.links, strict=True):
            if not key or key not in lookup:
                owner.setdefault(unresolved_node(raw, "", "").id, page.path)
    return owner


def incoming_links(pages: Sequence[Page], fragments: Sequence[Fragment],
                   lookup: dict[str, Page]) -> dict[str, list[int]]:
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
