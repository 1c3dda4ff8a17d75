"""The store's contract for graph fragments: a restart reads pages without them; a snapshot
makes one from its page when one is asked for, and reads all those missing from the store at
once when a pass needs every page, taking only rows of the same file content."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import serve.snapshot.fragments as fragments_module
from serve.graph.model import Fragment
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.source.page import Page
from serve.store.database import store_path

ROLLBACK = "runbooks/rollback.md"


# The fixture copy is seconds old: see tests/serve/conftest.py trust_fresh_files.
pytestmark = pytest.mark.usefixtures("trust_fresh_files")


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the pages whose fragment a snapshot made from the page (not the store)."""
    paths: list[str] = []
    real = fragments_module.made

    def counting(page: Page) -> Fragment:
        paths.append(page.path)
        return real(page)

    monkeypatch.setattr(fragments_module, "made", counting)
    return paths


@pytest.fixture
def fresh(sample_root: Path) -> Iterator[KnowledgeSource]:
    """The same folder served with no store: every page parsed, every fragment made."""
    source = KnowledgeSource(ServeSettings(root=sample_root, page_cache=False))
    yield source
    source.close()


def fragments_by_path(source: KnowledgeSource) -> dict[str, Fragment]:
    snapshot = source.snapshot()
    return {page.path: fragment for page, fragment in zip(snapshot.pages, snapshot.fragments,
                                                         strict=True)}


def store_execute(cache_dir: Path, root: Path, statement: str, *args: str) -> None:
    conn = sqlite3.connect(store_path(cache_dir, root.resolve()))
    with conn:
        assert conn.execute(statement, args).rowcount > 0
    conn.close()


def test_a_restart_makes_no_fragment_until_one_is_needed(
        restarted: KnowledgeSource, fresh: KnowledgeSource, made: list[str]) -> None:
    snapshot = restarted.snapshot()
    assert restarted.freshness.mirror.parsed_count == 0
    assert snapshot.fragments.missing == snapshot.page_count > 10
    expected = fragments_by_path(fresh)
    at = snapshot.position[ROLLBACK]
    assert snapshot.fragments[at] == expected[ROLLBACK]
    assert made == [ROLLBACK]  # asked for one: made from its page, not read
    assert snapshot.fragments.missing == snapshot.page_count - 1


def test_a_pass_over_every_page_reads_the_missing_fragments_from_the_store(
        restarted: KnowledgeSource, fresh: KnowledgeSource, made: list[str],
        ) -> None:
    assert fragments_by_path(restarted) == fragments_by_path(fresh)
    assert made == []
    assert restarted.snapshot().fragments.missing == 0
    assert restarted.graph().model_dump() == fresh.graph().model_dump()


def test_a_row_of_other_content_is_not_taken(
        restarted: KnowledgeSource, fresh: KnowledgeSource, made: list[str],
        sample_root: Path, cache_dir: Path) -> None:
    restarted.snapshot()
    # Another process sharing the store saved a newer version of the file meanwhile.
    store_execute(cache_dir, sample_root, "UPDATE files SET digest = 'newer' WHERE rel = ?", ROLLBACK)
    store_execute(cache_dir, sample_root, "UPDATE pages SET fragment = '[[], [], []]' WHERE rel = ?",
                  ROLLBACK)
    assert fragments_by_path(restarted) == fragments_by_path(fresh)
    assert made == [ROLLBACK]


def test_an_unreadable_store_leaves_every_fragment_made_from_its_page(
        restarted: KnowledgeSource, fresh: KnowledgeSource, made: list[str],
        sample_root: Path, cache_dir: Path) -> None:
    snapshot = restarted.snapshot()
    store_execute(cache_dir, sample_root, "UPDATE pages SET fragment = 'not json' WHERE rel = ?",
                  ROLLBACK)
    assert fragments_by_path(restarted) == fragments_by_path(fresh)
    assert sorted(made) == sorted(page.path for page in snapshot.pages)


def test_pages_added_and_deleted_after_a_restart_give_the_graph_a_fresh_start_gives(
        restarted: KnowledgeSource, sample_root: Path,
        sources: list[KnowledgeSource]) -> None:
    restarted.snapshot()
    added = "concepts/added.md"
    (sample_root / added).write_text(
        "---\ntitle: Added Concept\n---\n# Added Concept\n\nSee [[rollback]] and #incident.\n",
        encoding="utf-8")
    (sample_root / ROLLBACK).unlink()
    after = restarted.snapshot()
    assert added in after.position and ROLLBACK not in after.position
    assert after.lineage  # derived from the restart's snapshot, not built anew
    assert after.fragments.missing == 0  # one pass, for the parent's link index, served both
    fresh = KnowledgeSource(ServeSettings(root=sample_root, page_cache=False))
    sources.append(fresh)
    assert fragments_by_path(restarted) == fragments_by_path(fresh)
    assert restarted.graph().model_dump() == fresh.graph().model_dump()
    seeds = ["concepts/added", "hot"]
    assert (restarted.neighborhood(seeds).model_dump()
            == fresh.neighborhood(seeds).model_dump())
