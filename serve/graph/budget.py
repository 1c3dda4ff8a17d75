"""A context pack's graph cut to its byte budget: the evidence pages' items, tier by tier."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from serve.graph.evidence import SeedItems, as_is, edge_text, graph_json

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
                 render: Callable[[Any], Any] = as_is) -> Budgeted:
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
