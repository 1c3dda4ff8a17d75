"""The store's contract for the link index: a start that parsed the folder keeps its link index
in the store; a restart of the same snapshot maps it, and the first pages added, deleted or
renamed after it derive the next index from it (reading no other page's fragment) with the
graph, backlinks and packs a fresh start gives; tables altered behind our back, or of another
snapshot, are never used."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from serve.graph.index_tables import DTYPES
from serve.retrieval.index import LexicalIndex
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.snapshot import graph
from serve.store import array_files
from serve.store.database import store_path
from serve.store.link_index import StoredLinks
from tests.support.crashes import Steps, killed_in_child

PAGES = 320  # above the index's bulk threshold: only a bulk build's link views are kept
GONE = "page-0007.md"  # page paths, under the page root wiki/
ADDED = "added.md"

# The fixture copy is seconds old: see tests/serve/conftest.py trust_fresh_files.
pytestmark = pytest.mark.usefixtures("trust_fresh_files")


def started(root: Path, cache_dir: Path, sources: list[KnowledgeSource]) -> KnowledgeSource:
    """A source as the service starts one: warmed (the index and the link views, from the
    store when it holds them), then its store saved."""
    source = KnowledgeSource(ServeSettings(root=root, cache_dir=cache_dir))
    sources.append(source)
    source.warm()
    source.save_cache()
    return source


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Pages linking to the next one, to a hub and to pages no file is, tagged by fives."""
    root = tmp_path / "root"
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "index.md").write_text("---\ntitle: Index\nwiki_title: Links\n---\n# Index\n\n[[hub]]\n")
    (root / "wiki" / "hub.md").write_text("---\ntitle: Hub\n---\n# Hub\n\nrelease rollback\n")
    for i in range(PAGES - 2):
        (root / "wiki" / f"page-{i:04d}.md").write_text(
            f"---\ntitle: Page {i}\ntags: [t{i % 5}]\n---\n# Page {i}\n\nrelease rollback {i}.\n"
            f"See [[page-{(i + 1) % (PAGES - 2):04d}]], [[hub]] and [[nowhere-{i % 3}]].\n"
            + ("Also [[lonely]].\n" if i == 5 else ""))
    return root


@pytest.fixture
def restarted(root: Path, cache_dir: Path, sources: list[KnowledgeSource],
              trust_fresh_files: None) -> Iterator[KnowledgeSource]:
    first = started(root, cache_dir, sources)
    assert graph.built_links(first.snapshot()) is not None  # the start made it, to keep it
    first.close()
    yield started(root, cache_dir, sources)


def change(root: Path) -> None:
    """A page added (resolving a link no page held), one deleted (that another links to)."""
    (root / "wiki" / ADDED).write_text("---\ntitle: Lonely\naliases: [lonely]\n---\n# Added\n\n"
                              "See [[page-0003]] and [[hub]]. release\n", encoding="utf-8")
    (root / "wiki" / GONE).unlink()


def answers(source: KnowledgeSource) -> dict[str, Any]:
    """What clients see of the graph and backlinks: the graph, a neighbourhood, a pack."""
    pack = source.context(source.request(query="release rollback 6"))
    return {"graph": source.graph().model_dump(),
            "neighbourhood": source.neighborhood(["added", "page-0006"]).model_dump(),
            "pack": {key: pack[key] for key in ("evidence", "graph")}}


def test_a_restart_maps_the_link_index_and_derives_the_next_from_it(
        restarted: KnowledgeSource, root: Path, sources: list[KnowledgeSource]) -> None:
    snapshot = restarted.snapshot()
    assert graph.built_links(snapshot) is not None
    assert snapshot.fragments.missing == snapshot.page_count > 10  # none read for it
    change(root)
    after = restarted.snapshot()
    assert ADDED in after.position and GONE not in after.position
    assert after.lineage  # derived from the restart's snapshot, not built anew
    # Only the pages the change touches had their fragment made (the added one, the pages
    # whose links resolve elsewhere now), not every page's read.
    assert after.fragments.missing >= after.page_count - 5
    fresh = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    sources.append(fresh)
    assert answers(restarted) == answers(fresh)


def test_a_restart_over_a_changed_folder_derives_the_changes_from_the_stores_snapshot(
        restarted: KnowledgeSource, root: Path, cache_dir: Path, sources: list[KnowledgeSource],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages added, deleted and edited while serve was stopped: the restart makes the snapshot
    the store was written from, takes its index and link index, and derives the changes from
    them as from edits while serving (no other page's fragment read, no page indexed again);
    it answers as a fresh start does, and the store then holds the new snapshot's index and
    link index, which the restart after it maps."""
    restarted.close()
    change(root)
    edited = root / "wiki" / "page-0011.md"
    edited.write_text(edited.read_text() + "\nzanzibar\n")
    hour_ago = time.time() - 3600  # changed while stopped, not while the first walk runs
    os.utime(root / "wiki", (hour_ago, hour_ago))
    indexed: list[str] = []
    real_update = LexicalIndex.update

    def update(self: LexicalIndex, pages: Any) -> int:
        pages = list(pages)
        indexed.extend(page.path for page in pages)
        return int(real_update(self, pages))

    monkeypatch.setattr(LexicalIndex, "update", update)
    source = KnowledgeSource(ServeSettings(root=root, cache_dir=cache_dir))
    sources.append(source)
    snapshot = source.snapshot()
    assert snapshot.lineage and ADDED in snapshot.position and GONE not in snapshot.position
    assert graph.built_links(snapshot) is not None
    assert snapshot.fragments.missing >= snapshot.page_count - 6
    source.warm()
    assert sorted(indexed) == [ADDED, "page-0011.md"] and source.indexing.origin == "cache"
    assert [r["path"] for r in source.search(source.request(query="zanzibar")).results] == [
        "page-0011.md"]
    fresh = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    sources.append(fresh)
    assert answers(source) == answers(fresh)
    source.save_cache()
    signature = snapshot.signature
    source.close()
    conn = sqlite3.connect(store_path(cache_dir, root.resolve()))
    for table in ("index_meta", "link_meta"):
        assert dict(conn.execute(f"SELECT key, value FROM {table}"))["signature"] == signature
    conn.close()
    indexed.clear()
    again = started(root, cache_dir, sources)
    assert not again.snapshot().lineage and graph.built_links(again.snapshot()) is not None
    assert indexed == [] and not again.indexing.index.dead
    assert answers(again) == answers(fresh)


def test_altered_tables_are_never_used(restarted: KnowledgeSource, root: Path,
                                       cache_dir: Path, sources: list[KnowledgeSource]) -> None:
    restarted.close()
    folder = store_path(cache_dir, root.resolve()).with_suffix(".links")
    table = next(folder.glob("*/refs_pages.npy"))
    data = bytearray(table.read_bytes())
    data[-4:] = (10**6).to_bytes(4, "little")  # a referrer no page is
    table.write_bytes(bytes(data))
    again = started(root, cache_dir, sources)
    assert graph.built_links(again.snapshot()) is None  # rejected: built when needed
    change(root)
    fresh = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    sources.append(fresh)
    assert answers(again) == answers(fresh)


def test_the_tables_of_another_snapshot_are_not_taken(
        restarted: KnowledgeSource, root: Path, cache_dir: Path, sources: list[KnowledgeSource]) -> None:
    restarted.close()
    conn = sqlite3.connect(store_path(cache_dir, root.resolve()))
    with conn:
        conn.execute("UPDATE link_meta SET value = 'another' WHERE key = 'signature'")
    conn.close()
    again = started(root, cache_dir, sources)
    assert graph.built_links(again.snapshot()) is None


def link_write_dies_at(root: Path, cache: Path, step: int) -> bool:
    """A cold start in a forked child, killing itself (SIGKILL) at the `step`-th statement
    or array file of its link index's write; whether it was killed."""

    def start() -> bool:
        steps, writing = Steps(step), []
        real_save, real_array = StoredLinks.save, array_files.npy.write_array

        def save(self: StoredLinks, *args: Any) -> bool:
            steps.trace_store()  # from the write's connection on
            writing.append(True)
            return real_save(self, *args)

        def array(*args: Any, **kwargs: Any) -> None:
            if writing:  # the link index's files, not the search index's before them
                steps.step()
            real_array(*args, **kwargs)

        StoredLinks.save = save  # type: ignore[method-assign]
        array_files.npy.write_array = array  # type: ignore[attr-defined]
        started(root, cache, []).close()
        return True

    return killed_in_child(start)


def stored_tables(cache: Path, root: Path) -> list[tuple[str, str, bytes]]:
    """The link index's rows as the store holds them; each file they name is checked whole
    (its sha256), and none is named when the meta is absent."""
    path = store_path(cache, root.resolve())
    conn = sqlite3.connect(path)
    try:
        meta = dict(conn.execute("SELECT key, value FROM link_meta"))
        rows = conn.execute("SELECT name, file, sha256 FROM link_arrays").fetchall()
    finally:
        conn.close()
    assert bool(meta) == bool(rows)
    for _, file, sha256 in rows:
        assert hashlib.sha256((path.with_suffix(".links") / file).read_bytes()).digest() == sha256
    return rows


def test_a_crash_at_any_step_of_a_link_index_write_leaves_one_that_is_whole_or_absent(
        root: Path, tmp_path: Path, sources: list[KnowledgeSource], trust_fresh_files: None) -> None:
    cache = tmp_path / "cache"
    step = 1
    while link_write_dies_at(root, cache, step):
        stored_tables(cache, root)  # whole or absent, whatever step it died at
        step += 2
    assert step > 30
    assert len(stored_tables(cache, root)) == len(DTYPES)
    kept = started(root, cache, sources)
    assert graph.built_links(kept.snapshot()) is not None
    assert len(os.listdir(store_path(cache, root.resolve()).with_suffix(".links"))) == 1
    fresh_root = tmp_path / "fresh-root"
    shutil.copytree(root, fresh_root)
    change(fresh_root)
    change(root)
    assert answers(kept) == answers(started(fresh_root, tmp_path / "fresh-cache", sources))
