"""The lexical index: BM25 ranking, two corpora, and page-by-page updates that equal a rebuild."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from serve.retrieval import documents as documents_module
from serve.retrieval import index_arrays
from serve.retrieval.analyzer import query_terms
from serve.retrieval.index import LexicalIndex
from serve.retrieval.literal_bounds import literal_bounds
from serve.retrieval.pairs import needle_bits
from serve.snapshot.projection import Projection
from serve.watch.mirror import FolderMirror
from tests.benchmarks.generate import generate
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


def test_removing_and_updating_pages_equals_a_fresh_index(tmp_path: Path) -> None:
    p = _projection(copy_fixture("sample-wiki", tmp_path))
    index = LexicalIndex()
    index.sync(p.pages)
    gone = [page.path for page in p.pages if "release" in page.path or "incident" in page.path]
    assert gone
    assert index.remove([*gone, "no/such-page.md"]) == len(gone)
    assert index.remove(gone) == 0  # already gone
    kept = [page for page in p.pages if page.path not in gone]
    fresh = LexicalIndex()
    fresh.update(kept)
    for query in QUERIES:
        for approved_only in (True, False):
            assert _ranked(index, query, approved_only=approved_only) == _ranked(
                fresh, query, approved_only=approved_only)
    assert index.update([page for page in p.pages if page.path in gone]) == len(gone)
    whole = LexicalIndex()
    whole.update(p.pages)
    for query in QUERIES:
        assert _ranked(index, query) == _ranked(whole, query)


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


def _candidates(index: LexicalIndex, needle: str) -> set[str] | None:
    """Paths of the pages literal_bounds() leaves in the running (None: every page)."""
    bound = literal_bounds(index, needle)
    if bound is None:
        return None
    return {page.path for doc in np.flatnonzero(bound).tolist()
            if (page := index.pages[doc]) is not None}


def test_literal_bounds_never_rule_out_a_page_that_contains_the_phrase(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    texts = {
        "a.md": "# Café Notes\nThe Straße runs there. ExportJob.rotateToken and snake_case_name.\n",
        "b.md": "# 계약\n3차 계약서를 검토했다. 日本語のリリースノート v2版 2026-07-10\n",
        "c.md": "# Other\nnothing relevant here at all\n",
    }
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
    p = _projection(root)
    index = LexicalIndex()
    index.sync(p.pages)
    needles = ["café", "ther", "straße", "portjob.rotate", "ke_case_na", "3차 계약", "계약서",
               "本語のリ", "v2版", "07-10", "notes", "nothing relevant"]
    for needle in needles:
        folded = needle.casefold()
        expected = {page.path for page in p.pages
                    if folded in " ".join((page.title, page.path, page.summary, page.text)).casefold()}
        assert expected, needle
        candidates = _candidates(index, folded)
        assert candidates is None or expected <= candidates, needle
    narrowed = _candidates(index, "snake_case_name")
    assert narrowed == {"a.md"}


def test_a_bulk_build_in_worker_slices_equals_adding_page_by_page(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "generated"
    generate(root, 420, seed=5)
    pages = _projection(root).pages
    monkeypatch.setattr(documents_module, "PARALLEL_BULK_MIN", 300)  # two or more worker slices
    bulk = LexicalIndex()
    bulk.sync(pages)
    assert bulk.main_docs.dtype == np.uint16 and len(bulk.main_docs) > 0
    assert bulk.main_tfs.dtype == np.uint8
    one_by_one = LexicalIndex()
    one_by_one.update(pages)  # the delta segment only
    assert len(one_by_one.main_docs) == 0
    size = len(bulk.vocab)
    assert sorted(bulk.vocab) == sorted(one_by_one.vocab)
    for term, tid in bulk.vocab.items():
        other = one_by_one.vocab[term]
        assert (bulk.df_all[tid], bulk.df_approved[tid]) == (
            one_by_one.df_all[other], one_by_one.df_approved[other]), term
    assert size == len(one_by_one.vocab)
    for query in [*QUERIES, "release train", "token", "refund window days"]:
        for approved_only in (True, False):
            assert _ranked(bulk, query, approved_only=approved_only) == _ranked(
                one_by_one, query, approved_only=approved_only), query
    for needle in ("release train", "but this", "publish.yml", "no payout"):
        assert np.array_equal(bulk.pair_signatures.matching(needle_bits(needle)),
                              one_by_one.pair_signatures.matching(needle_bits(needle)))


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_postings_placed_a_chunk_at_a_time_equal_one_stable_sort_of_them_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The main segment is the postings sorted by term, documents in order within a term:
    placed a few documents at a time, across worker slices, it is that sort exactly."""
    root = tmp_path / "generated"
    generate(root, 420, seed=11)
    pages = _projection(root).pages
    monkeypatch.setattr(documents_module, "PARALLEL_BULK_MIN", 300)  # two or more worker slices
    monkeypatch.setattr(index_arrays, "PLACE_CHUNK", chunk)
    bulk = LexicalIndex()
    bulk.sync(pages)
    terms, docs, tfs = [], [], []
    for doc, page in enumerate(pages):  # every posting, in document order
        one = LexicalIndex()
        one.update([page])
        for term, tid in one.vocab.items():
            for found_docs, found_tfs in one.postings_of(tid):
                terms.append(bulk.vocab[term])
                docs.extend([doc] * len(found_docs))
                tfs.extend(found_tfs.tolist())
    order = np.argsort(np.array(terms), kind="stable")
    assert np.array_equal(bulk.main_docs, np.array(docs)[order])
    assert np.array_equal(bulk.main_tfs, np.array(tfs)[order])
    assert np.array_equal(np.diff(bulk.indptr), np.bincount(terms, minlength=len(bulk.vocab)))
    approved = [p.approved for p in pages]
    assert bulk.df_approved[:len(bulk.vocab)].tolist() == np.bincount(
        [t for t, d in zip(terms, docs, strict=True) if approved[d]], minlength=len(bulk.vocab)).tolist()


def test_a_sync_where_most_pages_changed_rebuilds_in_bulk(tmp_path: Path) -> None:
    """A checkout or a recompiled wiki: editing most pages in one by one would cost more than
    the bulk build it ends in (compaction), so the index is built anew, with the same results."""
    root = tmp_path / "generated"
    generate(root, 400, seed=9)
    pages = _projection(root).pages
    index = LexicalIndex()
    index.sync(pages)
    edited = [page._replace(summary=page.summary + " rewritten") if i % 4 else page
              for i, page in enumerate(pages)]
    edited.append(edited.pop(0)._replace(path="moved/elsewhere.md"))
    assert index.sync(edited) == len(edited)
    assert index.dead == 0 and len(index.delta) == 0 and index.n_all == len(edited)
    fresh = LexicalIndex()
    fresh.sync(edited)
    for query in [*QUERIES, "rewritten", "release train"]:
        for approved_only in (True, False):
            assert _ranked(index, query, approved_only=approved_only) == _ranked(
                fresh, query, approved_only=approved_only), query
    few = [page._replace(summary="a few") if i < 10 else page for i, page in enumerate(edited)]
    assert index.sync(few) == 10 and index.dead == 10  # a few: edited in, as before
