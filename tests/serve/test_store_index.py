"""The search index in the store: the same answers as a fresh build, used only for the snapshot
it was built from, and a damaged or altered index is a miss that is rebuilt."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from serve.retrieval.index import LexicalIndex
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.store.database import store_path

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


def test_a_slightly_changed_folder_reuses_the_documents_of_unchanged_pages(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    root, cache = folder
    started(root, cache).close()
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nA new word: zanzibar.\n")
    (root / "wiki" / "page-0007.md").unlink()
    (root / "wiki" / "page-new.md").write_text("---\ntitle: New\n---\n# New\n\nrefund zanzibar queue\n")
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


def test_damaged_pair_signatures_of_a_reused_index_are_made_again_from_its_pages(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    root, cache = folder
    started(root, cache).close()
    cut_pair_signatures(store_of(cache, root))
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nrelease window zanzibar\n")
    (root / "wiki" / "page-0007.md").unlink()
    again = started(root, cache)
    assert again.indexing.origin == "cache" and again.indexing.index.dead == 2
    fresh = started(root, tmp_path / "fresh-cache")
    with capture_logs() as logs:
        assert answers(again) == answers(fresh)
    assert [e["documents"] for e in logs if e["event"] == "index_cache_signatures_remade"] == [PAGES]
    again.close()
    fresh.close()


def test_a_much_changed_folder_rebuilds_the_index(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    started(root, cache).close()
    for i in range(0, PAGES - 1, 2):  # half the pages
        page = root / "wiki" / f"page-{i:04d}.md"
        page.write_text(page.read_text() + "\nzanzibar\n")
    again = started(root, cache)
    assert again.indexing.origin == "built"
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


def cut_pair_signatures(path: Path) -> None:
    alter(path, "UPDATE index_arrays SET data = substr(data, 1, length(data) / 3) "
                "WHERE name = 'pair_columns'")


DAMAGES = {
    "terms": ("UPDATE index_json SET value = '[\"a\", 3' WHERE name = 'terms'",),
    "views": ("UPDATE index_json SET value = '{}' WHERE name = 'views'",),
    "main_docs cut": ("UPDATE index_arrays SET data = substr(data, 1, 7) WHERE name = 'main_docs'",),
    "array gone": ("DELETE FROM index_arrays WHERE name = 'doc_len'",),
    "shape": ("UPDATE index_arrays SET shape = '[3, -1]' WHERE name = 'indptr'",),
    "dtype": ("UPDATE index_arrays SET dtype = 'object' WHERE name = 'df_all'",),
}


@pytest.mark.parametrize("where", [*DAMAGES, "file cut"])
def test_a_damaged_index_is_rebuilt_not_served(folder: tuple[Path, Path], where: str) -> None:
    root, cache = folder
    first = started(root, cache)
    expected = answers(first)
    first.close()
    path = store_of(cache, root)
    if where == "file cut":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) * 2 // 3])
    else:
        alter(path, *DAMAGES[where])
    again = started(root, cache)
    assert again.indexing.origin == "built"
    assert answers(again) == expected
    again.close()


def signature_columns_of(source: KnowledgeSource) -> np.ndarray:
    signatures = source.indexing.index.pair_signatures
    return signatures.columns[:, : -(-signatures.count // 8)].copy()


def test_the_pair_signatures_stay_in_the_store_until_a_literal_search(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    first = started(root, cache)
    # A cold build lets them go once written; the first literal search reads them back.
    assert not first.indexing.index.pair_signatures.is_read
    expected = answers(first)
    assert first.indexing.index.pair_signatures.is_read
    built = signature_columns_of(first)
    first.close()
    again = started(root, cache)
    assert again.indexing.origin == "cache" and not again.indexing.index.pair_signatures.is_read
    lexical = again.search(again.request(query=QUERIES[0], mode="lexical")).results
    assert lexical and not again.indexing.index.pair_signatures.is_read  # lexical search never reads them
    with capture_logs() as logs:
        assert answers(again) == expected
    assert [e["event"] for e in logs if e["event"].startswith("index_cache_signatures")] == [
        "index_cache_signatures_read"]
    assert np.array_equal(signature_columns_of(again), built)
    again.close()


def replace_with_another_index(path: Path) -> None:
    """Another index in the store, as another server for the same root writes."""
    alter(path, "UPDATE index_meta SET value = 'sha256:another' WHERE key = 'signature'")


@pytest.mark.parametrize("damage", ["cut before", "cut", "replaced", "deleted", "edited first"])
def test_damaged_pair_signatures_are_found_at_the_first_literal_search_and_made_again(
        folder: tuple[Path, Path], tmp_path: Path, damage: str) -> None:
    """The pair signatures are read when first needed, not at the start: ones that no longer
    fit, or that belong to another index by then, are never used; they are made from the
    pages instead, equal to a fresh build's."""
    root, cache = folder
    started(root, cache).close()
    path = store_of(cache, root)
    if damage == "cut before":  # before the start: only their declared shape is checked there
        cut_pair_signatures(path)
    again = started(root, cache)
    assert again.indexing.origin == "cache" and not again.indexing.index.pair_signatures.is_read
    if damage == "cut":
        cut_pair_signatures(path)
    elif damage == "replaced":
        replace_with_another_index(path)
    elif damage in ("deleted", "edited first"):
        path.unlink()
    if damage == "edited first":  # documents added while the signatures are unread
        page = root / "wiki" / "page-0003.md"
        page.write_text(page.read_text() + "\nrelease window zanzibar\n")
        assert "page-0003.md" in [
            r["path"] for r in again.search(again.request(query="zanzibar")).results]
        assert not again.indexing.index.pair_signatures.is_read
    fresh = started(root, tmp_path / "fresh-cache")
    with capture_logs() as logs:
        assert answers(again) == answers(fresh)
    remade = [e for e in logs if e["event"] == "index_cache_signatures_remade"]
    assert len(remade) == 1 and remade[0]["documents"] == PAGES
    if damage == "edited first":
        # The edit's new document sits past the cache's, and the cold build has it in place.
        live = np.frombuffer(again.indexing.index.alive, dtype=np.uint8).astype(bool)
        assert again.indexing.index.pair_signatures.count == len(live) == PAGES + 1
    else:
        assert np.array_equal(signature_columns_of(again), signature_columns_of(fresh))
        again.save_cache()  # as at shutdown: the store is whole again
        conn = sqlite3.connect(path)
        [(data,)] = conn.execute("SELECT data FROM index_arrays WHERE name = 'pair_columns'")
        conn.close()
        assert data == bytes(np.ascontiguousarray(signature_columns_of(fresh)))
    again.close()
    fresh.close()


def rewrite_array(path: Path, name: str, change: object) -> None:
    """Alter one array in place, as someone who can write the store could."""
    conn = sqlite3.connect(path)
    [(dtype, shape, data)] = conn.execute(
        "SELECT dtype, shape, data FROM index_arrays WHERE name = ?", (name,))
    values = np.frombuffer(data, dtype=dtype).reshape(json.loads(shape)).copy()
    change(values)  # type: ignore[operator]
    conn.execute("UPDATE index_arrays SET data = ? WHERE name = ?", (values.tobytes(), name))
    conn.commit()
    conn.close()


def out_of_range(values: np.ndarray) -> None:
    values[0] = np.iinfo(values.dtype).max


def reversed_offsets(values: np.ndarray) -> None:
    values[1], values[2] = values[2] + 5, values[1]


@pytest.mark.parametrize(("name", "change"), [("main_docs", out_of_range),
                                               ("indptr", reversed_offsets)])
def test_an_altered_index_is_rejected(folder: tuple[Path, Path], name: str,
                                                           change: object) -> None:
    root, cache = folder
    first = started(root, cache)
    expected = answers(first)
    first.close()
    rewrite_array(store_of(cache, root), name, change)
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
    source.close()


def test_altered_fingerprints_are_rejected_when_a_later_snapshot_would_use_them(
        folder: tuple[Path, Path]) -> None:
    root, cache = folder
    started(root, cache).close()

    def doubled(values: np.ndarray) -> None:
        values[1] = values[0]  # two documents would stand for one page

    rewrite_array(store_of(cache, root), "fingerprints", doubled)
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nzanzibar\n")
    again = started(root, cache)
    assert again.indexing.origin == "built"
    assert [r["path"] for r in again.search(again.request(query="zanzibar")).results] == ["page-0003.md"]
    again.close()
