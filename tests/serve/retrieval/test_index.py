"""The lexical index: BM25 ranking, two corpora, and page-by-page updates that equal a rebuild."""

from __future__ import annotations

from pathlib import Path

from serve.folder import FolderMirror
from serve.projection import Projection
from serve.retrieval.analyzer import query_terms
from serve.retrieval.index import LexicalIndex
from tests.support.folders import copy_fixture


def _projection(root: Path) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


def _ranked(index: LexicalIndex, query: str, *, approved_only: bool = True) -> list[tuple[str, float]]:
    hits = index.search(query_terms(query), approved_only=approved_only, limit=30)
    return [(h.page.id, round(h.score, 6)) for h in hits]


QUERIES = ["release checklist", "rollback", "token rotation", "publish.yml", "3차 계약", "incident"]


def test_incremental_sync_equals_a_fresh_index(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    first = mirror.project()
    index = LexicalIndex()
    index.sync(first.pages)
    # Edit one page, remove another, add a third.
    target = root / "runbooks" / "rollback.md"
    target.write_text(target.read_text(encoding="utf-8") + "\nToken rotation drill.\n",
                      encoding="utf-8")
    (root / "runbooks" / "incident-comms.md").unlink()
    (root / "runbooks" / "new-page.md").write_text("# New Page\nIncident follow-up notes.\n")
    mirror.full_scan()
    second = mirror.project(first)
    changed = index.sync(second.pages)
    assert changed == 3  # unchanged pages keep their Page objects and are not re-indexed
    fresh = LexicalIndex()
    fresh.sync(second.pages)
    for query in QUERIES:
        for approved_only in (True, False):
            assert _ranked(index, query, approved_only=approved_only) == _ranked(
                fresh, query, approved_only=approved_only)


def test_unchanged_pages_are_not_reindexed(tmp_path: Path) -> None:
    p = _projection(copy_fixture("sample-wiki", tmp_path))
    index = LexicalIndex()
    assert index.sync(p.pages) == len(p.pages)
    assert index.sync(p.pages) == 0


def test_compaction_keeps_results(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    index = LexicalIndex()
    p = _projection(root)
    index.sync(p.pages)
    expected = {q: _ranked(index, q) for q in QUERIES}
    for _ in range(8):  # re-adding every page leaves many dead documents behind
        index.sync([page._replace(summary=page.summary + " ") for page in p.pages])
    assert index.dead < len(index.pages)
    assert {q: _ranked(index, q) for q in QUERIES} == expected


def test_withheld_pages_do_not_count_in_the_approved_corpus(tmp_path: Path) -> None:
    p = _projection(copy_fixture("sample-wiki", tmp_path))
    index = LexicalIndex()
    index.sync(p.pages)
    withheld = [page for page in p.pages if not page.approved]
    assert withheld
    assert index.n_approved == len(p.approved_pages)
    assert index.n_all == len(p.pages)
    for page in withheld:
        approved_hits = {pid for pid, _ in _ranked(index, page.title)}
        assert page.id not in approved_hits
        assert page.id in {pid for pid, _ in _ranked(index, page.title, approved_only=False)}


def test_ties_break_by_role_then_path(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    for name in ("b.md", "a.md", "c.md"):
        (root / name).write_text("# Same\nidentical words here\n")
    index = LexicalIndex()
    index.sync(_projection(root).pages)
    assert [pid for pid, _ in _ranked(index, "identical words")] == ["a", "b", "c"]
