"""The search index in the store: the same answers as a fresh build, used only for the snapshot
it was built from, and a damaged or altered index is a miss that is rebuilt."""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serve.graph.link_tables import Backlinks, KeyTable
from serve.graph.model import lookup_key
from serve.retrieval import compaction
from serve.retrieval.filters import request_filters
from serve.retrieval.index import LexicalIndex
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.store import array_files
from serve.store.database import store_path
from serve.store.search_index import Pending, StoredIndex
from tests.support.crashes import Steps, killed_in_child

PAGES = 320  # above the index's bulk threshold: only a bulk build is written
QUERIES = ("release signing checksum", "refund window billing", "rollback runbook 17",
           "배포 서명")


# The fixture copy is seconds old: see tests/serve/conftest.py trust_fresh_files.
pytestmark = pytest.mark.usefixtures("trust_fresh_files")


def write_folder(root: Path, pages: int = PAGES) -> None:
    words = ("release", "signing", "checksum", "refund", "window", "billing", "rollback",
             "runbook", "cache", "queue", "배포", "서명")
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "index.md").write_text("---\ntitle: Index\nwiki_title: Cache test\n---\n# Index\n")
    for i in range(pages - 1):
        body = " ".join(words[(i * 7 + k) % len(words)] for k in range(40 + i % 13))
        (root / "wiki" / f"page-{i:04d}.md").write_text(
            f"---\ntitle: Page {i}\ntags: [t{i % 5}]\n---\n# Page {i}\n\n{body} number {i}.\n"
            f"See [[page-{(i + 1) % (pages - 1):04d}]].\n")


def started(root: Path, cache: Path) -> KnowledgeSource:
    source = KnowledgeSource(ServeSettings(root=root, cache_dir=cache, inotify=False))
    source.load()
    source.warm()
    return source


def answers(source: KnowledgeSource) -> list[object]:
    out: list[object] = []
    for query in QUERIES:
        for mode in ("lexical", "literal"):
            result = source.search(source.request(query=query, mode=mode, limit=10))
            out.append([(r["path"], round(r["score"], 6)) for r in result.results])
    out.append(json.dumps(source.context(source.request(query=QUERIES[0])), sort_keys=True))
    return out


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, Path]:
    root, cache = tmp_path / "root", tmp_path / "cache"
    write_folder(root)
    return root, cache


def test_a_restart_answers_from_the_cached_index_as_a_fresh_build_does(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    first = started(root, cache)
    assert first.indexing.origin == "built"
    expected = answers(first)
    first.close()
    conn = sqlite3.connect(store_of(cache, root))
    assert dict(conn.execute("SELECT key, value FROM index_meta"))["documents"] == str(PAGES)
    conn.close()
    second = started(root, cache)
    assert second.indexing.origin == "cache"
    assert second.phase == "ready"
    assert answers(second) == expected
    second.close()


def change_slightly(root: Path) -> None:
    """A page edited (a new word), one deleted, one added (the new word again)."""
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nA new word: zanzibar.\n")
    (root / "wiki" / "page-0007.md").unlink()
    (root / "wiki" / "page-new.md").write_text("---\ntitle: New\n---\n# New\n\nrefund zanzibar queue\n")


def test_a_slightly_changed_folder_reuses_the_documents_of_unchanged_pages(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    root, cache = folder
    started(root, cache).close()
    change_slightly(root)
    again = started(root, cache)
    assert again.indexing.origin == "cache"
    assert again.indexing.index.dead == 2  # the edited page's old document and the deleted page's
    assert sorted(r["path"] for r in again.search(again.request(query="zanzibar")).results) == [
        "page-0003.md", "page-new.md"]
    fresh = started(root, tmp_path / "fresh-cache")
    assert fresh.indexing.origin == "built"
    assert answers(again) == answers(fresh)
    again.close()
    fresh.close()


def postings_by_term(terms: list[str], arrays: dict[str, np.ndarray]
                     ) -> dict[str, tuple[list[int], list[int]]]:
    indptr = arrays["indptr"]
    return {term: (arrays["main_docs"][indptr[i]:indptr[i + 1]].tolist(),
                   arrays["main_tfs"][indptr[i]:indptr[i + 1]].tolist())
            for i, term in enumerate(terms)}


def by_term(terms: list[str], values: np.ndarray) -> dict[str, int]:
    return dict(zip(terms, values.tolist(), strict=True))


def test_an_index_kept_up_by_edits_is_laid_out_as_a_bulk_build_of_its_pages(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    """A reused index with dead documents and added ones, compacted, holds what a bulk build
    of the same pages holds: postings, frequencies, lengths, approvals and filters in page
    order, and only the terms some page has."""
    root, cache = folder
    started(root, cache).close()
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nA new word: zanzibar.\n")
    (root / "wiki" / "page-0007.md").unlink()  # its words stay in other pages
    (root / "wiki" / "page-0100.md").write_text("---\ntitle: Lone\n---\n# Lone\n\nquokka\n")
    (root / "wiki" / "page-new.md").write_text("---\ntitle: New\n---\n# New\n\nrefund zanzibar queue\n")
    again = started(root, cache)
    index = again.indexing.index
    assert again.indexing.origin == "cache" and index.dead == 3 and index.delta
    snapshot = again.snapshot()
    terms, arrays = compaction.compacted(compaction.frozen(index), snapshot.pages, snapshot.position)
    fresh = started(root, tmp_path / "fresh-cache")
    want_terms, want = fresh.indexing.index.exported()
    assert "quokka" in terms and "quokka" in want_terms
    assert set(index.vocab) - set(terms)  # terms only dead documents had ("100")
    assert sorted(terms) == sorted(want_terms)
    assert postings_by_term(terms, arrays) == postings_by_term(want_terms, want)
    for name in ("df_all", "df_approved"):
        assert by_term(terms, arrays[name]) == by_term(want_terms, want[name])
    for name in ("doc_len", "approved", "pair_columns"):
        assert np.array_equal(arrays[name], want[name]), name
    assert arrays["main_docs"].dtype == want["main_docs"].dtype
    assert arrays["main_tfs"].dtype == want["main_tfs"].dtype
    again.close()
    fresh.close()


def test_a_restart_over_a_changed_folder_leaves_the_next_restart_its_exact_index(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    """The reused index, once the first answer is out, is written as the snapshot's own, with
    its link views and link index: the restart after that maps them all, and answers as a
    fresh build does."""
    root, cache = folder
    started(root, cache).close()
    change_slightly(root)
    again = started(root, cache)
    assert again.indexing.origin == "cache" and again.indexing.index.dead == 2
    again.save_cache()
    signature = again.snapshot().signature
    again.close()
    conn = sqlite3.connect(store_of(cache, root))
    assert dict(conn.execute("SELECT key, value FROM index_meta"))["signature"] == signature
    assert dict(conn.execute("SELECT key, value FROM link_meta"))["signature"] == signature
    conn.close()
    third = started(root, cache)
    third.save_cache()  # maps the link index
    index = third.indexing.index
    assert third.indexing.origin == "cache" and not index.dead and not index.delta
    assert shares_the_store(third) and third.snapshot().caches.links is not None
    fresh = started(root, tmp_path / "fresh-cache")
    assert answers(third) == answers(fresh)
    third.close()
    fresh.close()


def test_a_damaged_array_of_a_reused_index_is_a_miss(folder: tuple[Path, Path], tmp_path: Path) -> None:
    root, cache = folder
    started(root, cache).close()
    cut(array_file(cache, root, "pair_columns"))
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nrelease window zanzibar\n")
    again = started(root, cache)
    assert again.indexing.origin == "built"
    fresh = started(root, tmp_path / "fresh-cache")
    assert answers(again) == answers(fresh)
    again.close()
    fresh.close()


def test_a_much_changed_folder_rebuilds_the_index(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    first = started(root, cache)
    first.save_cache()  # the records too: a restart could start from their snapshot
    first.close()
    for i in range(0, PAGES - 1, 2):  # half the pages
        page = root / "wiki" / f"page-{i:04d}.md"
        page.write_text(page.read_text() + "\nzanzibar\n")
    again = started(root, cache)
    assert again.indexing.origin == "built"
    assert not again.snapshot().lineage  # built anew, not derived from the store's snapshot
    found = [r["path"] for r in again.search(again.request(query="zanzibar")).results]
    assert found and all(int(path[5:9]) % 2 == 0 for path in found)
    again.close()


def store_of(cache: Path, root: Path) -> Path:
    return store_path(cache, root.resolve())


def alter(path: Path, *statements: str, **values: object) -> None:
    """Change the store behind serve's back, as someone who can write the file could."""
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement, values)
    conn.commit()
    conn.close()


def array_row(cache: Path, root: Path, name: str) -> tuple[str, str, str]:
    """An array's dtype, shape and file, as the store names them."""
    conn = sqlite3.connect(store_of(cache, root))
    [row] = conn.execute("SELECT dtype, shape, file FROM index_arrays WHERE name = ?", (name,))
    conn.close()
    return row


def array_file(cache: Path, root: Path, name: str) -> Path:
    return store_of(cache, root).with_suffix(".arrays") / array_row(cache, root, name)[2]


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


ROW_DAMAGES = {
    "terms": ("UPDATE index_arrays SET shape = '[3]' WHERE name = 'term_ends'",),
    "owners": ("UPDATE index_json SET value = '{\"tag:x\": \"nowhere.md\"}' WHERE name = 'owners'",),
    "array gone": ("DELETE FROM index_arrays WHERE name = 'doc_len'",),
    "shape": ("UPDATE index_arrays SET shape = '[3, -1]' WHERE name = 'indptr'",),
    "dtype": ("UPDATE index_arrays SET dtype = 'object' WHERE name = 'df_all'",),
    "stored shape": ("UPDATE index_arrays SET shape = '[7]' WHERE name = 'main_tfs'",),
    "file outside": ("UPDATE index_arrays SET file = '../../outside.npy' WHERE name = 'doc_len'",),
    "digest": ("UPDATE index_arrays SET sha256 = zeroblob(32) WHERE name = 'approved'",),
}
FILE_DAMAGES = {
    "main_docs cut": ("main_docs", cut),
    "main_tfs altered": ("main_tfs", flip_last_byte),
    "pair_columns altered": ("pair_columns", flip_last_byte),
    "file gone": ("indptr", Path.unlink),
}


@pytest.mark.parametrize("where", [*ROW_DAMAGES, *FILE_DAMAGES, "store cut", "arrays gone"])
def test_a_damaged_index_is_rebuilt_not_served(folder: tuple[Path, Path], where: str) -> None:
    root, cache = folder
    first = started(root, cache)
    expected = answers(first)
    first.close()
    path = store_of(cache, root)
    if where == "store cut":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) * 2 // 3])
    elif where == "arrays gone":
        shutil.rmtree(path.with_suffix(".arrays"))
    elif where in FILE_DAMAGES:
        name, damage = FILE_DAMAGES[where]
        damage(array_file(cache, root, name))
    else:
        alter(path, *ROW_DAMAGES[where])
    again = started(root, cache)
    assert again.indexing.origin == "built"
    assert answers(again) == expected
    again.close()
    # The rebuilt index was written again: one generation of files, the one the store names.
    assert os.listdir(path.with_suffix(".arrays")) == [array_row(cache, root, "indptr")[2].split("/")[0]]


def is_mapped(array: np.ndarray) -> bool:
    """Whether `array` reads a mapped file (rather than memory of its own)."""
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, mmap.mmap)


def shares_the_store(source: KnowledgeSource) -> bool:
    index = source.indexing.index
    signatures = index.pair_signatures
    return all(is_mapped(a) for a in (index.indptr, index.main_docs, index.main_tfs,
                                      signatures.packed()))


def test_the_index_reads_the_stores_files_after_a_cold_build_and_after_a_restart(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    """Its main segment and pair signatures are the store's files, mapped, not copies in
    memory; documents an edit adds go into memory of the index's own."""
    root, cache = folder
    first = started(root, cache)
    assert first.indexing.origin == "built" and shares_the_store(first)
    expected = answers(first)
    first.close()
    again = started(root, cache)
    assert again.indexing.origin == "cache" and shares_the_store(again)
    assert answers(again) == expected
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nrelease window zanzibar\n")
    assert [r["path"] for r in again.search(again.request(query="zanzibar")).results] == [
        "page-0003.md"]
    assert again.indexing.index.pair_signatures.count == PAGES + 1
    fresh = started(root, tmp_path / "fresh-cache")
    assert answers(again) == answers(fresh)
    again.close()
    fresh.close()


def test_a_restart_maps_the_link_views_a_fresh_build_makes(folder: tuple[Path, Path],
                                                            tmp_path: Path) -> None:
    """Backlinks and lookup keys come back as the store's tables, mapped, and say what the
    dicts of a fresh build say; an edit after the restart finds the new page by its keys."""
    root, cache = folder
    first = started(root, cache)
    first.save_cache()  # with the graph's counts, which a restart then need not work out
    first.close()
    again, fresh = started(root, cache), started(root, tmp_path / "fresh-cache")
    restored, built = again.snapshot(), fresh.snapshot()
    assert isinstance(restored.incoming, Backlinks) and isinstance(restored.lookup, KeyTable)
    assert isinstance(built.incoming, dict) and isinstance(built.lookup, dict)
    assert dict(restored.incoming) == built.incoming
    assert {key: page.path for key, page in restored.lookup.items()} == {
        key: page.path for key, page in built.lookup.items()}
    assert all(restored.lookup[key].path == page.path for key, page in built.lookup.items())
    assert restored.owners(False) == built.owners(False)
    page = root / "wiki" / "page-0007.md"
    page.write_text(page.read_text().replace("# Page 7", "# Page 7\n\nzanzibar"))
    edited = again.snapshot()
    assert "zanzibar" in edited.lookup[lookup_key("page-0007")].text
    assert again.read("page-0007") == fresh.read("page-0007")
    again.close()
    fresh.close()


def test_the_first_literal_search_after_a_restart_reads_no_page_whole(folder: tuple[Path, Path]) -> None:
    """Literal search scores titles, summaries and paths of every document: the summaries of
    pages left in the store are read in one pass, not by reading each page whole (5-8 s at
    100,000 pages); only the hits are read whole, for their items."""
    root, cache = folder
    first = started(root, cache)
    expected = [r["path"] for r in first.search(first.request(query="number 17", mode="literal",
                                                               limit=3)).results]
    first.save_cache()
    first.close()
    again = started(root, cache)
    assert again.cache is not None
    found = again.search(again.request(query="number 17", mode="literal", limit=3)).results
    assert expected and [r["path"] for r in found] == expected
    # The candidates ("number 17", "117", "170"...) are read whole, not every page (320).
    assert again.cache.bodies.kept <= 40
    again.close()


def test_filters_after_a_restart_read_tags_and_dates_in_one_pass(folder: tuple[Path, Path]) -> None:
    """Tag and date filters read every visible page's tags and frontmatter: those of pages
    left in the store are read in one pass and kept for the snapshot, not each page read
    whole (0.7 s a filter at 20,000 pages); only the hits are read whole, for their items."""
    root, cache = folder
    tagged = {"tags_any": ["t2"]}
    first = started(root, cache)
    expected = [r["path"] for r in first.search(first.request(
        query="release", filters=request_filters(tagged), limit=50)).results]
    first.save_cache()
    first.close()
    again = started(root, cache)
    assert again.cache is not None
    found = again.search(again.request(query="release", filters=request_filters(tagged), limit=50))
    assert expected and [r["path"] for r in found.results] == expected
    assert again.cache.bodies.kept <= len(expected) + 5, again.cache.bodies.kept  # not all 320
    kept = again.cache.bodies.kept
    other = again.search(again.request(query="release", limit=50,
                                       filters=request_filters({"tags_any": ["t3"],
                                                                "date_from": "2000-01-01"})))
    assert other.results and again.cache.bodies.kept <= kept + len(other.results)
    again.close()


@pytest.mark.parametrize("change", ["another index written", "store deleted"])
def test_an_index_keeps_its_files_while_the_store_changes_under_it(
        folder: tuple[Path, Path], tmp_path: Path, change: str) -> None:
    """Another serve process for the root writes the store's index (removing the generation
    this one maps), or the store is deleted: searches go on reading the mapped files."""
    root, cache = folder
    started(root, cache).close()
    again = started(root, cache)
    assert shares_the_store(again)
    arrays = store_of(cache, root).with_suffix(".arrays")
    generation = os.listdir(arrays)
    if change == "store deleted":
        store_of(cache, root).unlink()
        shutil.rmtree(arrays)
    else:
        alter(store_of(cache, root), "DELETE FROM index_meta")  # so the other builds and writes
        other = started(root, cache)
        assert other.indexing.origin == "built"
        other.close()
        assert os.listdir(arrays) != generation
    fresh = started(root, tmp_path / "fresh-cache")
    assert answers(again) == answers(fresh)
    again.close()
    fresh.close()


def rewrite_array(cache: Path, root: Path, name: str, change: object) -> None:
    """Alter one array in its file and the file's digest in the store, as someone who can
    write both could."""
    path = array_file(cache, root, name)
    values = np.load(path)
    change(values)  # type: ignore[operator]
    np.save(path, values)
    alter(store_of(cache, root), "UPDATE index_arrays SET sha256 = :digest WHERE name = :name",
          digest=hashlib.sha256(path.read_bytes()).digest(), name=name)


def out_of_range(values: np.ndarray) -> None:
    values[0] = np.iinfo(values.dtype).max


def reversed_offsets(values: np.ndarray) -> None:
    values[1], values[2] = values[2] + 5, values[1]


def not_utf8(values: np.ndarray) -> None:
    values[0] = 0xFF


@pytest.mark.parametrize(("name", "change"), [
    ("main_docs", out_of_range), ("indptr", reversed_offsets),
    ("backlink_sources", out_of_range), ("backlink_start", reversed_offsets),
    ("key_pages", out_of_range), ("key_ends", reversed_offsets), ("key_bytes", not_utf8),
    ("term_order", out_of_range), ("term_ends", reversed_offsets), ("term_bytes", not_utf8)])
def test_an_altered_index_is_rejected(folder: tuple[Path, Path], name: str,
                                                           change: object) -> None:
    root, cache = folder
    first = started(root, cache)
    expected = answers(first)
    first.close()
    rewrite_array(cache, root, name, change)
    again = started(root, cache)
    assert again.indexing.origin == "built"
    assert answers(again) == expected
    again.close()


def test_restored_refuses_arrays_that_do_not_fit_the_pages(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    source = started(root, cache)
    pages = source.snapshot().pages
    terms, arrays = source.indexing.index.exported()
    copies = {name: np.array(value) for name, value in arrays.items()}
    assert LexicalIndex.restored(pages, terms, copies).n_all == len(pages)
    with pytest.raises(ValueError):
        LexicalIndex.restored(pages[:-1], terms, copies)
    with pytest.raises(ValueError):
        LexicalIndex.restored(pages, terms[:-1], copies)
    with pytest.raises(ValueError):  # a term twice: the ids after it would name other terms
        LexicalIndex.restored(pages, [*terms[:-1], terms[0]], copies)
    source.close()


def test_altered_fingerprints_are_rejected_when_a_later_snapshot_would_use_them(
        folder: tuple[Path, Path]) -> None:
    root, cache = folder
    started(root, cache).close()

    def doubled(values: np.ndarray) -> None:
        values[1] = values[0]  # two documents would stand for one page

    rewrite_array(cache, root, "fingerprints", doubled)
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nzanzibar\n")
    again = started(root, cache)
    assert again.indexing.origin == "built"
    assert [r["path"] for r in again.search(again.request(query="zanzibar")).results] == ["page-0003.md"]
    again.close()


def index_write_dies_at(root: Path, cache: Path, step: int) -> bool:
    """Start serve's core in a forked child, which builds the index and writes it, killing
    itself (SIGKILL) at the `step`-th statement or array file of that write; whether it was
    killed (False: the write ended first)."""

    def start() -> bool:
        steps = Steps(step)
        real_write, real_array = StoredIndex.write, array_files.npy.write_array

        def write(self: StoredIndex, pending: Pending) -> bool:
            steps.trace_store()  # from the write's connection on
            return real_write(self, pending)

        def array(*args: Any, **kwargs: Any) -> None:
            steps.step()
            real_array(*args, **kwargs)
            steps.step()

        StoredIndex.write = write  # type: ignore[method-assign]
        array_files.npy.write_array = array  # type: ignore[attr-defined]
        started(root, cache).close()
        return True

    return killed_in_child(start)


def test_a_crash_at_any_step_of_an_index_write_leaves_an_index_that_is_whole_or_rebuilt(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    root, cache = folder
    started(root, cache).close()
    for i in range(0, PAGES - 1, 2):  # half the pages: the next start builds anew and writes
        page = root / "wiki" / f"page-{i:04d}.md"
        page.write_text(page.read_text() + "\nzanzibar\n")
    pristine = tmp_path / "pristine"
    shutil.copytree(cache, pristine)
    fresh = started(root, tmp_path / "fresh-cache")
    expected = answers(fresh)
    fresh.close()
    arrays = store_of(cache, root).with_suffix(".arrays")
    origins: set[str] = set()
    step = 1
    while index_write_dies_at(root, cache, step):
        again = started(root, cache)
        origins.add(again.indexing.origin)
        assert answers(again) == expected, f"a crash at step {step} was served"
        again.close()
        # A generation a killed write left is gone once the store's index is written again.
        assert len(os.listdir(arrays)) == 1, f"step {step}: {os.listdir(arrays)}"
        shutil.rmtree(cache)
        shutil.copytree(pristine, cache)
        step += 1
    assert step > 20 and origins == {"built"}
    last = started(root, cache)
    assert last.indexing.origin == "cache" and answers(last) == expected
    last.close()
