"""The link graph: compact node and edge tuples, per-page fragments, filtered views."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
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
    page_keys: tuple[str, ...]  # lookup keys of the page itself: id, title, path, file name


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
    own = (page.id, page.title, page.path, page.path.rsplit("/", 1)[-1])
    return Fragment(tuple(ids), tuple(lookup_key(link) for link in page.links),
                    tuple(lookup_key(key) for key in own))


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


def unresolved_node(value: str, path: str, source: str) -> Node:
    if value.startswith(("http://", "https://")):
        kind = "external_ref"
    elif ISSUE_RE.match(value):
        kind = "external_issue"
    else:
        kind = "placeholder"
    prefix = "external" if kind.startswith("external_") else "placeholder"
    return Node(f"{prefix}:{slug(value)}", value, kind, path, {"unresolved": True, "source": source})


@dataclass(frozen=True, slots=True)
class SidecarFile:
    """One graph sidecar: its root-relative path and its edges."""

    path: str
    edges: tuple[SidecarEdge, ...]


UNRESOLVED_LINK = {"unresolved": True}
PAGE_META_KEYS = frozenset({"source_refs", "review_state", "okf"})
PAGE_JSON_ENTRIES = 50_000  # page nodes' JSON kept per snapshot (~300 bytes each)


def compact_json(value: Any) -> str:
    """JSON as the services answer it: compact, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
                sidecars: Sequence[SidecarFile], lookup: dict[str, Page]) -> tuple[list[Node], list[Edge]]:
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
            src_page = lookup.get(lookup_key(fact.source))
            dst_page = lookup.get(lookup_key(fact.target))
            ends: list[str] = []
            end_page: Page | None
            for value, end_page, other in ((fact.source, src_page, dst_page),
                                           (fact.target, dst_page, src_page)):
                if end_page is not None:
                    ends.append(f"page:{end_page.id}")
                else:
                    node = unresolved_node(value, other.path if other else "", "graph.json")
                    g.node(node)
                    ends.append(node.id)
            meta: dict[str, Any] = {"source": "graph.json", "path": sidecar.path}
            if fact.confidence is not None:
                meta["confidence"] = fact.confidence
            g.edge(ends[0], ends[1], canonical_relation(fact.type), meta)
    return list(nodes.values()), list(edges.values())


def graph_counts(pages: Sequence[Page], fragments: Sequence[Fragment], adapter: str,
                 sidecars: Sequence[SidecarFile], lookup: dict[str, Page]) -> tuple[int, int]:
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
        for key, raw in zip(fragment.link_keys, page.links, strict=True):
            target = lookup.get(key) if key else None
            if target is not None:
                keys.add((pid, f"page:{target.id}", "links_to"))
            else:
                node = unresolved_node(raw, page.path, "wikilink")
                node_ids.add(node.id)
                keys.add((pid, node.id, "links_to"))
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
    nested source root also `<root>/<id>` and `<root>/<path>`."""
    lookup: dict[str, Page] = {}
    for page, fragment in zip(pages, fragments, strict=True):
        keys = list(fragment.page_keys)
        if source_root != ".":
            keys += [lookup_key(f"{source_root}/{page.id}"), lookup_key(f"{source_root}/{page.path}")]
        for norm in keys:
            if norm:
                lookup[norm] = page
    return lookup


def _contains_text(value: Any, needles: Sequence[str]) -> bool:
    if isinstance(value, str):
        return any(n in value for n in needles)
    if isinstance(value, dict):
        return any(_contains_text(v, needles) for v in value.values())
    if isinstance(value, list):
        return any(_contains_text(v, needles) for v in value)
    return False


class GraphView:
    """A visibility-filtered graph in graph order, with adjacency, rendered on demand."""

    def __init__(self, nodes: list[Node], edges: list[Edge], base_meta: dict[str, Any],
                 page_json: dict[str, str] | None = None) -> None:
        self.nodes = nodes
        self.edges = edges
        self.base_meta = base_meta
        self.page_json = page_json
        self._by_id: dict[str, Node] | None = None
        self._outgoing: dict[str, list[Edge]] | None = None
        self._incoming: dict[str, list[Edge]] | None = None

    @property
    def by_id(self) -> dict[str, Node]:
        if self._by_id is None:
            self._by_id = {n.id: n for n in self.nodes}
        return self._by_id

    def outgoing(self, node_id: str) -> list[Edge]:
        if self._outgoing is None:
            self._index()
        assert self._outgoing is not None
        return self._outgoing.get(node_id, [])

    def incoming(self, node_id: str) -> list[Edge]:
        if self._incoming is None:
            self._index()
        assert self._incoming is not None
        return self._incoming.get(node_id, [])

    def _index(self) -> None:
        out: dict[str, list[Edge]] = {}
        inc: dict[str, list[Edge]] = {}
        for edge in self.edges:
            out.setdefault(edge.source, []).append(edge)
            inc.setdefault(edge.target, []).append(edge)
        self._outgoing, self._incoming = out, inc

    def node_dict(self, node: Node) -> dict[str, Any]:
        meta = node.meta
        if isinstance(meta, Page):
            metadata: dict[str, Any] = {**self.base_meta, "source_refs": list(meta.source_refs),
                                        "review_state": meta.review_state,
                                        "okf": json.loads(meta.okf_json) if meta.okf_json else {}}
        else:
            metadata = dict(meta) if meta else {}
        return {"id": node.id, "label": node.label, "kind": node.kind, "path": node.path,
                "metadata": metadata}

    @staticmethod
    def edge_dict(edge: Edge) -> dict[str, Any]:
        return {"source": edge.source, "target": edge.target, "relation": edge.relation,
                "metadata": dict(edge.meta) if edge.meta else {}}

    def payload(self, nodes: Iterable[Node], edges: Iterable[Edge]) -> dict[str, list[dict[str, Any]]]:
        return {"nodes": [self.node_dict(n) for n in nodes], "edges": [self.edge_dict(e) for e in edges]}

    def node_json(self, node: Node) -> str:
        """compact_json(self.node_dict(node)), written straight from the tuple: a context
        pack's graph is most of its JSON, and building dicts only to encode them costs more
        than the rest of the pack. Page nodes' JSON depends on the page alone and is kept in
        `page_json` (by path) when the view has one."""
        meta = node.meta
        enc = encode_basestring  # the encoder json.dumps itself uses for strings
        try:
            if isinstance(meta, Page):
                if not PAGE_META_KEYS.isdisjoint(self.base_meta):
                    return compact_json(self.node_dict(node))  # page metadata overrides a key
                cache = self.page_json if self.page_json is not None else {}
                text = cache.get(meta.path)
                if text is None:
                    base = compact_json(self.base_meta)[:-1] + ("," if self.base_meta else "")
                    refs = ",".join([enc(ref) for ref in meta.source_refs])
                    text = (f'{{"id":{enc(node.id)},"label":{enc(node.label)},"kind":{enc(node.kind)},'
                            f'"path":{enc(node.path)},"metadata":{base}"source_refs":[{refs}],'
                            f'"review_state":{enc(meta.review_state)},'
                            f'"okf":{meta.okf_json or "{}"}}}}}')
                    if len(cache) < PAGE_JSON_ENTRIES:
                        cache[meta.path] = text
                return text
            metadata = compact_json(meta) if meta else "{}"
            return (f'{{"id":{enc(node.id)},"label":{enc(node.label)},"kind":{enc(node.kind)},'
                    f'"path":{enc(node.path)},"metadata":{metadata}}}')
        except TypeError:  # a field that is not a string: let json.dumps decide
            return compact_json(self.node_dict(node))

    def truncated(self, limit: int) -> dict[str, list[dict[str, Any]]]:
        """First `limit` nodes and the edges closed over them, at most `limit` edges."""
        if limit <= 0:
            return {"nodes": [], "edges": []}
        nodes = self.nodes[:limit]
        keep = {n.id for n in nodes}
        edges = []
        for edge in self.edges:
            if edge.source in keep and edge.target in keep:
                edges.append(edge)
                if len(edges) >= limit:
                    break
        return self.payload(nodes, edges)


def approved_view(nodes: list[Node], edges: list[Edge], pages: Sequence[Page],
                  base_meta: dict[str, Any]) -> GraphView:
    """The approved-only graph: approved pages, the non-page nodes they touch, never a
    withheld page's path (contract 2.8)."""
    approved_ids = {f"page:{p.id}": p.path for p in pages if p.approved}
    approved_paths = set(approved_ids.values())
    withheld_paths = sorted({p.path for p in pages if not p.approved} - approved_paths)
    first_adjacent: dict[str, str] = {}
    for edge in edges:
        s, t = edge.source, edge.target
        if s in approved_ids and not t.startswith("page:"):
            first_adjacent.setdefault(t, approved_ids[s])
        if t in approved_ids and not s.startswith("page:"):
            first_adjacent.setdefault(s, approved_ids[t])
    visible: list[Node] = []
    for node in nodes:
        if node.id.startswith("page:"):
            if node.id in approved_ids:
                visible.append(node)
            continue
        if node.id in first_adjacent or node.path in approved_paths:
            path = first_adjacent.get(node.id, node.path)
            meta = node.meta
            if withheld_paths and isinstance(meta, dict):
                meta = {k: v for k, v in meta.items() if not _contains_text(v, withheld_paths)}
            if path != node.path or meta is not node.meta:
                node = node._replace(path=path, meta=meta)
            visible.append(node)
    keep = {n.id for n in visible}
    kept_edges = []
    for edge in edges:
        if edge.source in keep and edge.target in keep:
            meta = edge.meta
            if withheld_paths and meta and _contains_text(meta, withheld_paths):
                edge = edge._replace(meta={k: v for k, v in meta.items()
                                           if not _contains_text(v, withheld_paths)})
            kept_edges.append(edge)
    return GraphView(visible, kept_edges, base_meta)


class SeedItems(NamedTuple):
    """What one evidence page adds to a context pack's graph, in graph order. Kept per page
    by a snapshot, so it is flat: `pairs` holds, per item, a node id, the node, the edge's
    key and the edge (its headings, OKF members, source refs and tags, its links, the
    visible pages linking to it); `facts` the sidecar facts touching it as (node ids,
    nodes, edge key, edge), with no edge when the other end is withheld. Nodes and edges
    are the tuples, or their JSON (rendered())."""

    own_id: str
    own: Any
    pairs: tuple[Any, ...]
    facts: tuple[tuple[tuple[str, ...], tuple[Any, ...], tuple[str, str, str] | None, Any], ...]

    @property
    def size(self) -> int:
        """How many items (for the bounds of what a snapshot keeps)."""
        return len(self.pairs) // 4 + len(self.facts)

    def rendered(self, view: GraphView) -> SeedItems:
        """The same items with each node as its JSON in `view`, and each edge as its
        metadata's JSON: edge_text() writes the rest from the key when the edge is used, as
        most edges have no metadata and their JSON would only repeat the key (memory)."""
        pairs = list(self.pairs)
        for at in range(1, len(pairs), 4):
            pairs[at] = view.node_json(pairs[at])
            pairs[at + 2] = sys.intern(edge_meta_json(pairs[at + 2]))  # a few distinct ones
        facts = tuple((ids, tuple(view.node_json(n) for n in nodes), key,
                       edge_meta_json(edge) if edge is not None else None)
                      for ids, nodes, key, edge in self.facts)
        return SeedItems(self.own_id, view.node_json(self.own), tuple(pairs), facts)


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


def merge_seeds(seeds: Sequence[SeedItems], limit: int) -> tuple[list[Any], dict[tuple[str, str, str], Any]]:
    """The evidence pages' nodes first, then each page's items in order: at most `limit`
    nodes (first come, first kept) and `limit` edges, each edge between two kept nodes. A
    shared node keeps the first page's version (its path is the first visible owner's).
    Returns the nodes and the edges by key as the items hold them. This runs on every
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
                nodes[nid] = pairs[at + 1]
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
    """An edge's JSON from its (source, target, relation) and its metadata's JSON."""
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
