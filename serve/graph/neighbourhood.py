"""A neighbourhood of seed nodes in one graph view: breadth first, bounded (contract 4.12)."""

from __future__ import annotations

from collections.abc import Sequence

from common.limits import (
    DEFAULT_NEIGHBORHOOD_DEPTH,
    DEFAULT_NEIGHBORHOOD_LIMIT,
    NEIGHBORHOOD_DEPTH,
    NEIGHBORHOOD_LIMIT,
)
from common.schemas import GraphNeighborhoodResponse
from serve.graph.model import Edge, Node, canonical_relation, lookup_key, slug
from serve.graph.views import GraphView
from serve.source.page import Page

NEIGHBORHOOD_SEED_MATCHES = 10


def neighbourhood(view: GraphView, seeds: Sequence[str], *, depth: int = DEFAULT_NEIGHBORHOOD_DEPTH,
                 direction: str = "both", relations: Sequence[str] = (),
                 limit: int = DEFAULT_NEIGHBORHOOD_LIMIT) -> GraphNeighborhoodResponse:
    """Breadth-first neighbourhood of seed nodes in one graph view (contract 4.12)."""
    depth = NEIGHBORHOOD_DEPTH.clamp(depth)
    limit = NEIGHBORHOOD_LIMIT.clamp(limit)
    wanted = list(dict.fromkeys(_relation(r) for r in relations if r.strip()))
    found: dict[str, None] = {}
    unmatched: list[str] = []
    by_key: dict[str, list[str]] | None = None  # made once, only if a seed needs it
    for seed in seeds:
        seed = seed.strip()
        if not seed:
            continue
        ids = _exact_seed(view.by_id, seed)
        if not ids:
            if by_key is None:
                by_key = _seed_keys(view.nodes)
            seed_key = lookup_key(seed)
            ids = by_key.get(seed_key, []) if seed_key else []
        if not ids:
            unmatched.append(seed)
        found.update(dict.fromkeys(ids))
    resolved = list(found)
    visited: list[str] = []
    seen: set[str] = set()
    for nid in resolved:
        if len(visited) >= limit:
            break
        visited.append(nid)
        seen.add(nid)
    traversed: list[Edge] = []
    traversed_keys: set[tuple[str, str, str]] = set()
    frontier = list(visited)
    allowed = set(wanted)
    for _ in range(depth):
        if len(visited) >= limit:
            break
        next_frontier: list[str] = []
        for nid in frontier:
            candidates: list[tuple[Edge, str]] = []
            if direction in ("out", "both"):
                candidates += [(e, e.target) for e in view.outgoing(nid)]
            if direction in ("in", "both"):
                candidates += [(e, e.source) for e in view.incoming(nid)]
            for edge, other in candidates:
                if allowed and edge.relation not in allowed:
                    continue
                key = (edge.source, edge.target, edge.relation)
                if key not in traversed_keys:
                    traversed_keys.add(key)
                    traversed.append(edge)
                if other not in seen and len(visited) < limit:
                    seen.add(other)
                    visited.append(other)
                    next_frontier.append(other)
                if len(visited) >= limit:
                    break
            if len(visited) >= limit:
                break
        frontier = next_frontier
    edges = [e for e in traversed if e.source in seen and e.target in seen][:limit]
    graph = view.payload([view.by_id[n] for n in visited], edges)
    return GraphNeighborhoodResponse(seeds=resolved, unmatched=unmatched, depth=depth,
                                     direction=direction,
                                     relations=wanted, **graph)


def _relation(value: str) -> str:
    return canonical_relation(value.strip())


def _exact_seed(by_id: dict[str, Node], seed: str) -> list[str]:
    for candidate in (seed, f"page:{seed}", f"page:{slug(seed)}"):
        if candidate in by_id:
            return [candidate]
    return []


def _seed_keys(nodes: Sequence[Node]) -> dict[str, list[str]]:
    """Lookup key -> the first NEIGHBORHOOD_SEED_MATCHES node ids (in node order) one of whose
    forms (id, id without `page:`, label, path, file stem) has that key: one pass over the nodes
    for all of a request's seeds."""
    by_key: dict[str, list[str]] = {}
    for node in nodes:
        nid, path = node.id, node.path
        name = path.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0] if "." in name else name
        forms: tuple[str, ...] = (nid, nid.removeprefix("page:"), node.label, path, stem)
        if isinstance(node.meta, Page):
            forms += node.meta.aliases
        for key in {lookup_key(form) for form in forms}:
            ids = by_key.setdefault(key, [])
            if len(ids) < NEIGHBORHOOD_SEED_MATCHES:
                ids.append(nid)
    return by_key
