"""The store's contract: a crash at any step of a write leaves the last whole state, a read
transaction keeps its snapshot while another connection writes, and two users of one store
(another serve process for the same root) work beside each other."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from serve.service import KnowledgeSource
from serve.settings import DEFAULT_MAX_PAGE_BYTES, ServeSettings
from serve.store.database import Database, transaction
from serve.store.files import FileRecords
from serve.watch.records import FileRecord
from tests.support.crashes import Steps, killed_in_child
from tests.support.records import with_body

IDENTITY = {"max_page_bytes": str(DEFAULT_MAX_PAGE_BYTES)}


def records_of(cache_dir: Path, root: Path) -> FileRecords:
    return FileRecords(Database(cache_dir, root.resolve(), IDENTITY))


@pytest.fixture
def stored(sample_root: Path, cache_dir: Path) -> dict[str, FileRecord]:
    """The sample wiki's records, saved once to the store."""
    source = KnowledgeSource(ServeSettings(root=sample_root, cache_dir=cache_dir))
    source.snapshot()
    source.save_cache()
    source.close()
    return records_of(cache_dir, sample_root).load()


def edited(records: dict[str, FileRecord], mark: str) -> dict[str, FileRecord]:
    """Every record changed (and one more file): a save rewrites them all."""
    out = {rel: rec._replace(digest=f"{mark}:{rel}") for rel, rec in records.items()}
    out[f"{mark}.md"] = next(iter(out.values()))
    return out


def save_and_die_at(cache_dir: Path, root: Path, records: dict[str, FileRecord],
                    step: int) -> bool:
    """Save `records` in a forked child that kills itself (SIGKILL) when the store is about to
    run its `step`-th statement; whether the child was killed (False: the save ended first)."""

    def save() -> bool:
        Steps(step).trace_store()
        writer = records_of(cache_dir, root)
        writer.load()
        return writer.save(records)

    return killed_in_child(save)


def test_a_crash_at_any_step_of_a_write_leaves_the_last_whole_store(
        sample_root: Path, cache_dir: Path, stored: dict[str, FileRecord]) -> None:
    before = {rel: with_body(rec) for rel, rec in stored.items()}
    target = edited(stored, "new")
    after = {rel: with_body(rec) for rel, rec in target.items()}
    step = 1
    seen: set[str] = set()
    while save_and_die_at(cache_dir, sample_root, target, step):
        # Every statement of the load and of the save, BEGIN to COMMIT, is a place to die.
        loaded = {rel: with_body(rec) for rel, rec in records_of(cache_dir, sample_root).load().items()}
        assert loaded in (before, after), f"a crash at statement {step} left a mixed store"
        seen.add("before" if loaded == before else "after")
        # Nothing but the engine's own files beside the store: no temporary file of ours.
        assert {name.split(".sqlite3")[-1] for name in os.listdir(cache_dir)} <= {"", "-wal", "-shm"}
        if loaded == after:  # the write was committed: start over from the old state
            reset = records_of(cache_dir, sample_root)
            reset.load()
            assert reset.save(dict(stored)) is True
            assert {rel: with_body(rec) for rel, rec in
                    records_of(cache_dir, sample_root).load().items()} == before
        step += 1
    assert step > 20 and "before" in seen
    final = {rel: with_body(rec) for rel, rec in records_of(cache_dir, sample_root).load().items()}
    assert final == after  # the run that was not killed saved it all


def test_a_read_transaction_keeps_its_snapshot_while_another_connection_writes(
        sample_root: Path, cache_dir: Path, stored: dict[str, FileRecord]) -> None:
    reader_db = Database(cache_dir, sample_root.resolve(), IDENTITY)
    written = threading.Event()
    with reader_db.connect() as conn, transaction(conn, write=False):
        first = conn.execute("SELECT count(*), max(digest) FROM files").fetchone()

        def write() -> None:
            assert records_of(cache_dir, sample_root).save(edited(stored, "zz")) is True
            written.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert written.wait(10), "a reader must not block the writer"
        writer.join()
        assert conn.execute("SELECT count(*), max(digest) FROM files").fetchone() == first
    with reader_db.connect() as conn:
        count, digest = conn.execute("SELECT count(*), max(digest) FROM files").fetchone()
    assert count == first[0] + 1 and digest.startswith("zz:")


def test_two_sources_of_one_root_share_a_store(sample_root: Path, cache_dir: Path) -> None:
    one = KnowledgeSource(ServeSettings(root=sample_root, cache_dir=cache_dir))
    two = KnowledgeSource(ServeSettings(root=sample_root, cache_dir=cache_dir))
    try:
        assert one.snapshot().page_count == two.snapshot().page_count == 14
        saves = [threading.Thread(target=source.save_cache) for source in (one, two)]
        for thread in saves:
            thread.start()
        for thread in saves:
            thread.join()
        (sample_root / "shared-note.md").write_text("# Shared note\n\nboth see it\n",
                                                    encoding="utf-8")
        assert one.snapshot().page_count == 15
        one.save_cache()
        assert two.snapshot().page_count == 15
        two.save_cache()
    finally:
        one.close()
        two.close()
    third = KnowledgeSource(ServeSettings(root=sample_root, cache_dir=cache_dir))
    try:
        assert third.snapshot().find_page("shared-note") is not None
        assert len(third.loaded_keys) >= 15  # started from the shared store
    finally:
        third.close()


def test_two_processes_creating_one_new_store_at_once_both_keep_it_on_disk(
        sample_root: Path, cache_dir: Path) -> None:
    """Two replicas' first start at the same moment: both find the file new, both create the
    schema (the second in a transaction that waited for the first), neither falls back to
    memory nor deletes what the other made."""
    databases = [Database(cache_dir, sample_root.resolve(), IDENTITY) for _ in range(4)]
    gate = threading.Barrier(len(databases))
    failures: list[BaseException] = []

    def open_it(database: Database) -> None:
        try:
            gate.wait(10)
            with database.connect() as conn:
                conn.execute("SELECT count(*) FROM files").fetchone()
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=open_it, args=(d,)) for d in databases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failures
    assert [d.state for d in databases] == ["disk"] * len(databases)
