"""Context-pack graphs: the fast evidence graph, its JSON and the pack's JSON equal the
straightforward versions they replace, on every fixture shape and on a folder of edge cases."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from serve.graph.evidence import edge_meta_json, edge_text, graph_json
from serve.graph.model import (
    UNRESOLVED_LINK,
    Edge,
    Node,
    canonical_relation,
    okf_members,
    plain_refs,
    unresolved_node,
)
from serve.graph.views import GraphView, compact_json
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.snapshot.projection import Projection
from serve.source.page import Page
from serve.watch.freshness import Freshness
from serve.watch.mirror import FolderMirror
from tests.support.folders import copy_fixture

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDERS = [FIXTURES / "sample-wiki"] + sorted(
    p for p in (FIXTURES / "shapes").iterdir() if p.is_dir() and p.name != "marker-only"
)
LIMITS = (1, 3, 17, 120, 2000)


def _projection(root: Path) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


def reference_evidence_graph(p: Projection, seeds: Sequence[Page], include_drafts: bool,
                             limit: int) -> tuple[list[Node], list[Edge]]:
    """The evidence graph as first written: a node built for every candidate, then kept
    if it is new and there is room; an edge kept when both ends are kept and there is room."""
    nodes: dict[str, Node] = {}
    edges: dict[tuple[str, str, str], Edge] = {}
    owner = p.owners(include_drafts)

    def visible(page: Page) -> bool:
        return include_drafts or page.approved

    def add_node(node: Node) -> bool:
        if node.id in nodes:
            return True
        if len(nodes) >= limit:
            return False
        nodes[node.id] = node
        return True

    def add_edge(source: str, target: str, relation: str, meta: dict[str, Any] | None) -> None:
        if source in nodes and target in nodes and len(edges) < limit:
            edges.setdefault((source, target, relation), Edge(source, target, relation, meta))

    def page_node(page: Page) -> Node:
        return Node(f"page:{page.id}", page.title, page.role, page.path, page)

    if limit <= 0 or not seeds:
        return [], []
    for page in seeds:
        add_node(page_node(page))
    for page in seeds:
        pid = f"page:{page.id}"
        fragment = p.fragments[p.position[page.path]]
        members: list[tuple[str, str, str, Any, Any]] = [
            (h, "heading", "contains", None, None) for h in page.headings]
        members += [m[1:] for m in okf_members(page)]  # OKF pages: type, resource, sources
        members += [(r, "source_ref", "cites", None, None) for r in plain_refs(page)]
        members += [(t.lstrip("#"), "tag", "tagged", None, None) for t in page.tags]
        for nid, (label, kind, relation, node_meta, edge_meta) in zip(fragment.member_ids, members,
                                                                       strict=True):
            if add_node(Node(nid, label, kind, owner.get(nid, page.path), node_meta)):
                add_edge(pid, nid, relation, edge_meta)
        for key, raw in zip(fragment.link_keys, page.links, strict=True):
            target = p.lookup.get(key) if key else None
            if target is not None:
                if visible(target) and add_node(page_node(target)):
                    add_edge(pid, f"page:{target.id}", "links_to", None)
            else:
                node = unresolved_node(raw, page.path, "wikilink")
                node = node._replace(path=owner.get(node.id, page.path))
                if add_node(node):
                    add_edge(pid, node.id, "links_to", UNRESOLVED_LINK)
        for source_index in p.incoming.get(page.path, ()):
            source = p.pages[source_index]
            if visible(source) and add_node(page_node(source)):
                add_edge(f"page:{source.id}", pid, "links_to", None)
        for sidecar_path, fact, ends in p.facts.get(page.path, ()):
            ids = []
            for value, end in zip((fact.source, fact.target), ends, strict=True):
                if end is None:
                    node = unresolved_node(value, page.path, "graph.json")
                    node = node._replace(path=owner.get(node.id, page.path))
                elif visible(end):
                    node = page_node(end)
                else:
                    break
                if not add_node(node):
                    break
                ids.append(node.id)
            if len(ids) == 2:
                meta: dict[str, Any] = {"source": "graph.json", "path": sidecar_path}
                if fact.confidence is not None:
                    meta["confidence"] = fact.confidence
                add_edge(ids[0], ids[1], canonical_relation(fact.type), meta)
    return list(nodes.values()), list(edges.values())


def seed_sets(p: Projection) -> list[list[Page]]:
    """Every page alone, windows of eight (forwards and backwards) and all pages."""
    pages = list(p.pages)
    backwards = pages[::-1]
    sets = [[page] for page in pages]
    sets += [pages[i:i + 8] for i in range(0, len(pages), 3)]
    sets += [backwards[i:i + 8] for i in range(0, len(pages), 5)]
    return [*sets, pages]


def edge_case_folder(root: Path) -> Path:
    """Self links, links to drafts and from drafts, unresolved and external links, shared
    tags and refs, quotes, control characters and non-ASCII in labels, sidecar facts with
    tiny and large confidences and unresolved ends."""
    (root / "graph").mkdir(parents=True)
    (root / "notes").mkdir()
    (root / "a.md").write_text(
        '---\nsource_refs: [SRC-1, "SRC \\"2\\""]\ntags: [Release, ops]\n---\n'
        '# Über "quoted" \\ heading\n\nSee [[a]], [[b]], [[c]], [[gone]], [[GH-12]], '
        "[[https://example.com/x]] and [[notes/d]].\n\n## Second\ttab\n", encoding="utf-8")
    (root / "b.md").write_text(
        "---\nstatus: draft\nsource_refs: [SRC-1]\ntags: [release]\n---\n# B draft\n"
        "Links [[a]] and [[gone]].\n", encoding="utf-8")
    (root / "c.md").write_text("---\ntags: [ops, 한국어]\n---\n# C 한국어 제목\n"
                               "[[a]] [[b]] [[missing page]]\n", encoding="utf-8")
    (root / "notes" / "d.md").write_text("# D\n[[a]] [[c]] [[b]]\n", encoding="utf-8")
    edges = [
        {"from": "a", "to": "c", "type": "supports", "confidence": 1e-05},
        {"from": "c", "to": "b", "type": "Depends On", "confidence": 12345678901234567890.0},
        {"from": "a", "to": "GH-99", "type": "tracks", "confidence": 0.7},
        {"from": "nowhere", "to": "notes/d", "type": "mentions"},
        {"from": "a", "to": "c", "type": "supports", "confidence": 0.5},
    ]
    (root / "graph" / "graph.json").write_text(json.dumps({"edges": edges}), encoding="utf-8")
    return root


@pytest.fixture
def edge_cases(tmp_path: Path) -> Path:
    return edge_case_folder(tmp_path / "edge-cases")


def _all_folders(edge_cases: Path) -> list[Path]:
    return [*FOLDERS, edge_cases]


@pytest.mark.parametrize("include_drafts", [False, True], ids=["approved", "drafts"])
def test_evidence_graph_equals_the_reference(edge_cases: Path, include_drafts: bool) -> None:
    """The graph's JSON equals the reference's, whichever graphs were made before."""
    for root in _all_folders(edge_cases):
        p = _projection(root)
        for seeds in seed_sets(p):
            for limit in LIMITS:
                expected = reference_evidence_graph(p, seeds, include_drafts, limit)
                expected_json = compact_json(GraphView(*expected, p.base_meta).payload(*expected))
                assert p.evidence_graph_json(seeds, include_drafts, limit) == expected_json, (
                    root.name, limit, [s.path for s in seeds])


@pytest.mark.parametrize("include_drafts", [False, True], ids=["approved", "drafts"])
def test_node_and_edge_json_equal_encoding_their_dicts(edge_cases: Path, include_drafts: bool) -> None:
    for root in _all_folders(edge_cases):
        p = _projection(root)
        for _ in range(2):  # the second round writes page nodes from the snapshot's cache
            for seeds in seed_sets(p):
                nodes, edges = reference_evidence_graph(p, seeds, include_drafts, 120)
                for view in (GraphView(nodes, edges, p.base_meta, p.page_json),
                             GraphView(nodes, edges, p.base_meta)):
                    for node in nodes:
                        assert view.node_json(node) == compact_json(view.node_dict(node))
                for edge in edges:
                    written = edge_text(edge[:3], edge_meta_json(edge))
                    assert written == compact_json(GraphView.edge_dict(edge))
        assert p.page_json


def test_node_json_falls_back_where_it_cannot_write_the_json_itself(edge_cases: Path) -> None:
    p = _projection(edge_cases)
    nodes, edges = reference_evidence_graph(p, list(p.pages), True, 120)
    odd = Node("placeholder:7", 7, "placeholder", "a.md", None)  # type: ignore[arg-type]
    view = GraphView(nodes, edges, p.base_meta)
    assert view.node_json(odd) == compact_json(view.node_dict(odd))
    clashing = {**p.base_meta, "review_state": "from the layout"}  # page metadata overrides it
    clash = GraphView(nodes, edges, clashing)
    assert any(isinstance(node.meta, Page) for node in nodes)
    for node in nodes:
        assert clash.node_json(node) == compact_json(clash.node_dict(node))
    assert graph_json([], []) == '{"nodes":[],"edges":[]}'


@pytest.mark.parametrize("name", ["sample-wiki", "shapes/korean-wiki", "edge-cases"])
def test_context_json_equals_encoding_the_context_pack(tmp_path: Path, edge_cases: Path, name: str) -> None:
    root = edge_cases if name == "edge-cases" else FIXTURES / name
    for graph_limit in (0, 5, 120):
        settings = ServeSettings(root=root, cache_dir=tmp_path / "cache", allow_drafts=True,
                                 context_graph_limit=graph_limit)
        source = KnowledgeSource(settings)
        try:
            for query in ("release", "rollback signing key", "계약", "a c", "", "zzqqxx", 'quote " \\'):
                for options in ({}, {"include_drafts": True}, {"fields": ("page_id", "score")},
                                {"snippet_chars": 0}, {"limit": 2, "query_variants": ("b draft",)}):
                    if options.get("query_variants") and not query.strip():
                        continue
                    req = source.request(query=query, **options)
                    assert source.context_json(req) == compact_json(source.context(req)).encode()
        finally:
            source.close()


def test_after_a_content_edit_the_evidence_graphs_equal_the_reference(tmp_path: Path) -> None:
    """A body edit derives the next snapshot; its evidence graphs equal the reference's."""
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve())  # change notifications: an edit derives a snapshot
    try:
        before = freshness.snapshot()
        before.evidence_graph_json(list(before.pages), False, 2000)
        edited = next(page for page in before.pages if page.approved)
        path = root / edited.path
        path.write_text(path.read_text(encoding="utf-8") + "\nA freshly added closing line.\n",
                        encoding="utf-8")
        after = freshness.snapshot()
        assert after is not before and after.changed_since(before) == {edited.path}
        seeds = [after.pages[after.position[page.path]] for page in before.pages]
        for limit in LIMITS:
            expected = reference_evidence_graph(after, seeds, False, limit)
            assert after.evidence_graph_json(seeds, False, limit) == compact_json(
                GraphView(*expected, after.base_meta).payload(*expected))
    finally:
        freshness.close()
