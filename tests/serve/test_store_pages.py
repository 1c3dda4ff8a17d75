"""The store's contract for pages read back at a restart: a start reads of each page only the
fields every request needs (serve.source.page.KNOWN_AT_START), a request reads the rest of the
pages it touches (the store keeps the last few thousand read, no page keeps its own), and what
it reads is the page a fresh start parses. A snapshot keeps the page it was made with whatever
a save writes after it: the pages a save replaces are held first, and only those."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve.retrieval.documents import fingerprints
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.snapshot.projection import Projection
from serve.source.page import KNOWN_AT_START, Page, StoredPage
from serve.store.bodies import Bodies, BodyUnavailable, StoredBody
from serve.store.database import transaction
from tests.support.folders import rewrite

ROLLBACK = "runbooks/rollback.md"


# The fixture copy is seconds old: see tests/serve/conftest.py trust_fresh_files.
pytestmark = pytest.mark.usefixtures("trust_fresh_files")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the pages read whole from the store (or the folder), in order."""
    seen: list[str] = []
    real = Bodies.page

    def counting(self: Bodies, body: StoredBody) -> Page:
        seen.append(body.rel)
        return real(self, body)

    monkeypatch.setattr(Bodies, "page", counting)
    return seen


def stored_at(snapshot: Projection, rel: str) -> StoredPage:
    page = snapshot.find_page(rel)
    assert isinstance(page, StoredPage), "the restart parsed or read this page whole"
    return page


def fresh_pages(root: Path) -> dict[str, Page]:
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    try:
        return {p.path: p for p in source.snapshot().pages}
    finally:
        source.close()


def test_a_restart_reads_each_page_by_its_start_fields_only(
        restarted: KnowledgeSource, reads: list[str]) -> None:
    snapshot = restarted.snapshot()
    assert restarted.freshness.mirror.parsed_count == 0
    assert all(isinstance(p, StoredPage) and not p.held for p in snapshot.pages)
    # Only the page that names the wiki (its title and description) was read whole.
    assert len(reads) <= 1 and len(snapshot.pages) > 5
    assert snapshot.title


def test_every_field_read_when_asked_is_the_field_a_fresh_start_parses(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    expected = fresh_pages(sample_root)
    snapshot = restarted.snapshot()
    assert sorted(p.path for p in snapshot.pages) == sorted(expected)
    for page in snapshot.pages:
        fresh = expected[page.path]
        for name in Page._fields:
            if name in ("text_z", "section_table"):
                continue
            assert getattr(page, name) == getattr(fresh, name), (page.path, name)
        assert page.text == fresh.text and page.packed_sections == fresh.packed_sections
        assert page.payload() == fresh.payload()
        # As a Page to every reader: equality, hashing, iteration, indexing
        assert isinstance(page, StoredPage)
        whole = page.whole
        assert page == whole and whole == page
        assert (page != whole) is False
        assert hash(page) == hash(whole) and tuple(page) == tuple(whole) and page[1] == whole[1]
        assert page._asdict()["tags"] == fresh.tags


def test_start_fields_need_no_read_and_a_page_read_lately_is_not_read_again(
        restarted: KnowledgeSource, reads: list[str]) -> None:
    page = stored_at(restarted.snapshot(), ROLLBACK)
    reads.clear()
    for name in KNOWN_AT_START:
        getattr(page, name)
    assert page.body_sha1 and reads == []
    assert page.tags == page.tags and page.summary and reads == [ROLLBACK]
    assert not page.held  # kept while among the pages read last, not held
    placed = page._replace(role="hot")
    assert isinstance(placed, StoredPage) and placed.role == "hot"
    assert placed.whole.role == "hot" and page.whole.role == page.role
    placed.hold()
    assert page.held and placed.held  # one hold serves both
    changed = page._replace(summary="other")
    assert not isinstance(changed, StoredPage) and changed.summary == "other"


def test_a_snapshot_keeps_the_page_it_was_made_with_after_a_save_replaces_it(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    old = restarted.snapshot()
    old_page = stored_at(old, ROLLBACK)
    expected = fresh_pages(sample_root)[ROLLBACK]
    assert not old_page.held
    rewrite(sample_root, ROLLBACK, "---\ntitle: Rollback\ntags: [renamed]\n---\n# Rollback\n\nNew.\n")
    new = restarted.snapshot()
    assert new.find_page(ROLLBACK).tags == ("renamed",)  # type: ignore[union-attr]
    restarted.save_cache()
    # The row is the new page's now; the old snapshot's page was held before it was written.
    assert old_page.held
    assert (old_page.tags, old_page.summary, old_page.headings) == (
        expected.tags, expected.summary, expected.headings)
    assert not any(p.held for p in old.pages if isinstance(p, StoredPage) and p is not old_page)


def test_a_page_gone_from_the_store_is_parsed_again_and_then_a_retryable_error(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    snapshot = restarted.snapshot()
    first, second = (stored_at(snapshot, rel) for rel in (ROLLBACK, "release-checklist.md"))
    assert restarted.store is not None
    with restarted.store.connect() as conn, transaction(conn):
        conn.execute("UPDATE files SET digest = 'newer' WHERE rel IN (?, ?)",
                     (ROLLBACK, "release-checklist.md"))
    # The folder still holds the content the snapshot knows: parsed again from it.
    assert first.tags == fresh_pages(sample_root)[ROLLBACK].tags
    # Neither the store nor the folder has it any more: the request may retry shortly.
    (sample_root / "release-checklist.md").write_text("# Elsewhere\n\nRewritten.\n", encoding="utf-8")
    with pytest.raises(BodyUnavailable) as raised:
        _ = second.summary
    assert raised.value.code == "page_changing"


def test_a_snapshot_keeps_a_page_whose_file_was_deleted_after_a_save_drops_its_row(
        restarted: KnowledgeSource, sample_root: Path) -> None:
    old = restarted.snapshot()
    old_page = stored_at(old, ROLLBACK)
    expected = fresh_pages(sample_root)[ROLLBACK]
    (sample_root / ROLLBACK).unlink()
    assert restarted.snapshot().find_page(ROLLBACK) is None
    restarted.save_cache()
    # Neither the store nor the folder has it now: it was read before the row was dropped.
    assert (old_page.tags, old_page.summary, old_page.text) == (
        expected.tags, expected.summary, expected.text)


def test_pages_read_whole_are_kept_by_the_store_within_its_bound(
        restarted: KnowledgeSource, monkeypatch: pytest.MonkeyPatch) -> None:
    import serve.store.bodies as bodies_module

    monkeypatch.setattr(bodies_module, "RECENT_PAGES", 3)
    snapshot = restarted.snapshot()
    assert restarted.cache is not None
    kept = restarted.cache.bodies
    for page in snapshot.pages:
        assert page.tags is not None
        assert kept.kept <= 3
    assert not any(isinstance(p, StoredPage) and p.held for p in snapshot.pages)
    holding = [p for p in snapshot.pages if isinstance(p, StoredPage) and "_whole" in p.__dict__]
    assert len(holding) <= 3 and holding[-1] is snapshot.pages[-1]
    first = snapshot.pages[0]
    assert first.tags == first.whole.tags  # let go of, read again when asked


def test_the_first_page_added_after_a_restart_reads_no_stored_page_for_the_link_index(
        restarted: KnowledgeSource, sample_root: Path, reads: list[str]) -> None:
    """The link index the first added page needs is built from fragments alone: a link that
    resolves to no page takes its node id from its fragment, not from the page's links."""
    restarted.snapshot()
    reads.clear()
    added = "concepts/added.md"
    (sample_root / added).write_text(
        "---\ntitle: Added\n---\n# Added\n\nSee [[rollback]] and [[nowhere at all]].\n",
        encoding="utf-8")
    snapshot = restarted.snapshot()
    assert snapshot.find_page(added) is not None
    assert snapshot.caches.links is not None  # derived, not built anew by a request
    assert reads == []
    fresh = KnowledgeSource(ServeSettings(root=sample_root, page_cache=False))
    try:
        assert restarted.graph(include_drafts=True).model_dump() == fresh.graph(
            include_drafts=True).model_dump()
    finally:
        fresh.close()


def test_fingerprints_of_pages_left_in_the_store_read_no_page_whole(
        restarted: KnowledgeSource, sample_root: Path, reads: list[str]) -> None:
    """A restart over a changed folder fingerprints every page to find which documents of
    the stored index still stand: from the columns, as the pages a fresh start parses."""
    snapshot = restarted.snapshot()
    reads.clear()
    found = fingerprints(snapshot.pages)
    assert reads == [] and all(isinstance(p, StoredPage) and not p.held for p in snapshot.pages)
    placed = [page._replace(role="hot") for page in snapshot.pages]
    assert fingerprints(placed) != found  # the role placed is the one taken
    expected = fresh_pages(sample_root)
    assert found == fingerprints([expected[page.path] for page in snapshot.pages])
    assert fingerprints(placed) == fingerprints([p._replace(role="hot") for p in
                                                 (expected[page.path] for page in snapshot.pages)])
