"""What context packs keep between requests (orientation items, page-node JSON, guidance
sizes) gives what computing it afresh gives, and never outlives a changed page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.json_wire import json_bytes
from serve.graph.views import compact_json
from serve.retrieval import guidance
from serve.retrieval.guidance import build_guidance
from serve.retrieval.index import LexicalIndex
from serve.retrieval.items import result, snippet
from serve.retrieval.search import MEMO_ENTRIES, Searcher, SearchRequest
from serve.watch.freshness import Freshness
from tests.support.folders import copy_fixture


def test_orientation_is_computed_once_and_handed_out_as_copies(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve(), use_inotify=False)
    try:
        p = freshness.snapshot()
        searcher = Searcher(p, LexicalIndex())
        for size in (None, 0, 40, 2000, 5000):
            req = SearchRequest(query="release", snippet_chars=size)
            fresh = [result(page, round(1.0 - 0.01 * i, 4), "orientation", snippet(page, (), size))
                     for i, page in enumerate(p.entry_pages(False)[:3])]
            first = searcher.orientation(req)
            assert first == fresh
            first[0]["title"] = "changed"
            first[0]["source_refs"].append("changed")
            assert searcher.orientation(req) == fresh  # the kept items are untouched
        for size in range(3 * MEMO_ENTRIES):  # any number of sizes keeps a bounded memo
            searcher.orientation(SearchRequest(snippet_chars=size))
        assert len(p.caches.results) <= MEMO_ENTRIES
    finally:
        freshness.close()


def test_a_content_edit_gives_fresh_orientation_and_equal_pack_json(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve(), use_inotify=False)
    try:
        before = freshness.snapshot()
        req = SearchRequest(query="release checklist")
        index = LexicalIndex()
        index.sync(before.pages)
        json_bytes(Searcher(before, index).context(req, graph_limit=120))  # fills the memos, page_json
        hot = before.entry_pages(False)[0]
        hub = root / hot.path
        hub.write_text(hub.read_text(encoding="utf-8").replace("\n\n", "\n\nFreshly edited lead.\n\n", 1),
                       encoding="utf-8")
        after = freshness.snapshot()
        assert after is not before and not after.caches.results  # page texts may differ
        index.sync(after.pages)
        searcher = Searcher(after, index)
        assert "Freshly edited lead." in searcher.orientation(req)[0]["snippet"]
        pack = searcher.context(req, graph_limit=120)
        assert json_bytes(searcher.context(req, graph_limit=120)) == compact_json(pack).encode()
    finally:
        freshness.close()


def test_guidance_item_sizes_equal_their_compact_json() -> None:
    for text in ("plain", 'quote " and \\ backslash', "tab\tnew\nline \x01", "한국어 ü", "\ud800 lone", ""):
        assert guidance._size(text) == len(guidance._compact(text))
    assert guidance._size({"a": [1, "b"]}) == len(guidance._compact({"a": [1, "b"]}))


def test_guidance_equals_a_build_that_measures_every_item(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "cards"
    for i in range(20):  # cards big enough that the budget drops some
        (root / f"d{i % 6}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 6}" / f"p{i}.md").write_text(
            f"---\ntitle: {'Title ' * (5 * i)}{i}\n---\n# H {i}\n\n{'Body sentence here. ' * 40}\n",
            encoding="utf-8")
    roots = [root, copy_fixture("sample-wiki", tmp_path), copy_fixture("shapes/korean-wiki", tmp_path)]
    queries = ("release", "계약 관리", "", "title body sentence " * 20)
    built = {}
    for folder in roots:
        freshness = Freshness(folder.resolve(), use_inotify=False)
        try:
            p = freshness.snapshot()
            for query in queries:
                built[folder, query] = (p, build_guidance(p.approved_pages, p.layout.adapter, query))
        finally:
            freshness.close()
    assert any(len(g["page_cards"]) < 12 and len(g["page_cards"]) < len(p.approved_pages)
               for p, g in built.values())
    fit = guidance._fit_budget
    monkeypatch.setattr(guidance, "_fit_budget",
                        lambda value, budget, known=None: fit(value, budget))  # measure everything
    for (folder, query), (p, expected) in built.items():
        assert build_guidance(p.approved_pages, p.layout.adapter, query) == expected, (folder.name, query)
