"""The store's contract for page bodies: a restart leaves them in the store, a request reads
the one it needs, and a snapshot keeps reading the body it was made with whatever is saved
after it (the pages a save replaces are read into memory first, and only those)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.snapshot.projection import Projection
from serve.source.page import Page
from serve.store.bodies import BodyUnavailable, StoredBody
from serve.store.database import store_path, transaction
from tests.support.folders import rewrite

ROLLBACK = "runbooks/rollback.md"


# The fixture copy is seconds old: see tests/serve/conftest.py trust_fresh_files.
pytestmark = pytest.mark.usefixtures("trust_fresh_files")


def page_at(snapshot: Projection, rel: str) -> Page:
    page = snapshot.find_page(rel)
    assert page is not None
    return page


def body_of(page: Page) -> StoredBody:
    assert isinstance(page.text_z, StoredBody), "the restart held this page's body in memory"
    return page.text_z


def test_a_restart_leaves_every_body_in_the_store_and_a_read_finds_it(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    snapshot = restarted.snapshot()
    assert restarted.freshness.mirror.parsed_count == 0
    assert all(isinstance(p.text_z, StoredBody) and p.text_z.held is None for p in snapshot.pages)
    page = page_at(snapshot, ROLLBACK)
    on_disk = (sample_root / ROLLBACK).read_text(encoding="utf-8")
    assert page.text and page.text in on_disk
    read = restarted.read(page.id)
    assert read.outcome == "found" and isinstance(read.payload, dict)
    assert read.payload["text"] == page.text
    assert any(s.level > 0 for s in page.sections) and page.packed_sections
    assert body_of(page).held is None  # read, not kept


def test_a_snapshot_keeps_the_body_it_was_made_with_after_a_save_replaces_it(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    old = restarted.snapshot()
    old_page = page_at(old, ROLLBACK)
    old_text, old_sections = old_page.text, old_page.packed_sections
    rewrite(sample_root, ROLLBACK, "---\ntitle: Rollback\n---\n# Rollback\n\nAll new words here.\n")
    new = restarted.snapshot()
    assert "All new words here." in page_at(new, ROLLBACK).text
    restarted.save_cache()
    # The row is now the new page's; the old snapshot's page was read into memory first.
    assert body_of(old_page).held is not None
    assert (old_page.text, old_page.packed_sections) == (old_text, old_sections)
    kept = [p for p in old.pages if p.path != ROLLBACK]
    assert all(body_of(p).held is None for p in kept)  # only the replaced page is held


def test_a_page_rewritten_with_the_same_bytes_is_read_from_the_store_again(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    page = page_at(restarted.snapshot(), ROLLBACK)
    path = sample_root / ROLLBACK
    path.write_bytes(path.read_bytes())  # a new stat, the same content
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    again = page_at(restarted.snapshot(), ROLLBACK)
    assert again.text_z is page.text_z  # same bytes: the parsed page is kept
    restarted.save_cache()
    assert body_of(again).held is None
    assert again.text == page.text


def test_a_body_gone_from_the_store_is_parsed_again_from_the_folder(
        restarted: KnowledgeSource, sample_root: Path, cache_dir: Path) -> None:
    snapshot = restarted.snapshot()
    page = page_at(snapshot, ROLLBACK)
    expected = (sample_root / ROLLBACK).read_text(encoding="utf-8")
    for suffix in ("", "-wal", "-shm"):  # the cache directory cleaned while serving
        Path(f"{store_path(cache_dir, sample_root.resolve())}{suffix}").unlink(missing_ok=True)
    assert page.text in expected and page.packed_sections
    # The next save finds a new, empty store and writes every record again.
    restarted.save_cache()
    reopened = KnowledgeSource(ServeSettings(root=sample_root, cache_dir=cache_dir))
    try:
        again = reopened.snapshot()
        assert reopened.freshness.mirror.parsed_count == 0
        assert [(p.path, p.text) for p in again.pages] == [(p.path, p.text) for p in snapshot.pages]
    finally:
        reopened.close()


def test_a_body_neither_stored_nor_on_disk_as_known_is_a_retryable_error(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    page = page_at(restarted.snapshot(), ROLLBACK)
    # Another serve process sharing the store saw the edit first and wrote the new page.
    (sample_root / ROLLBACK).write_text("# Rollback\n\nRewritten elsewhere.\n", encoding="utf-8")
    assert restarted.store is not None
    with restarted.store.connect() as conn, transaction(conn):
        conn.execute("UPDATE files SET digest = 'newer' WHERE rel = ?", (ROLLBACK,))
    with pytest.raises(BodyUnavailable) as raised:
        _ = page.text
    assert raised.value.code == "page_changing" and raised.value.retry_after_seconds == 1
