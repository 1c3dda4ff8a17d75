"""The store's file records: parsed pages reused across restarts, never stale, never inside
the root, and a store this build cannot use rebuilt, never read."""

from __future__ import annotations

import os
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import serve.watch.file_read as file_read_module
from serve.protocols.http import SOURCE_KEY, create_app
from serve.service import KnowledgeSource
from serve.settings import DEFAULT_MAX_PAGE_BYTES, ServeSettings
from serve.store.database import SCHEMA_VERSION, Database, store_path
from serve.store.files import FileRecords
from serve.watch.records import FileRecord
from tests.support.folders import tree_digest
from tests.support.records import with_body

ROLLBACK = "runbooks/rollback.md"



@pytest.fixture
def digest_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file whose bytes the mirror reads, in order."""
    reads: list[str] = []
    real = file_read_module.digest_file

    def counting(path: str, limit: int) -> Any:
        reads.append(path)
        return real(path, limit)

    monkeypatch.setattr(file_read_module, "digest_file", counting)
    return reads


def start(sources: list[KnowledgeSource], root: Path, cache_dir: Path,
          **overrides: Any) -> KnowledgeSource:
    source = KnowledgeSource(ServeSettings(root=root, cache_dir=cache_dir, **overrides))
    sources.append(source)
    return source


def first_run(sources: list[KnowledgeSource], root: Path, cache_dir: Path) -> KnowledgeSource:
    source = start(sources, root, cache_dir)
    source.snapshot()
    assert source.freshness.mirror.parsed_count == 14
    source.save_cache()
    source.close()
    return source


def cache_files(cache_dir: Path) -> list[str]:
    return sorted(os.listdir(cache_dir))


def store_file(cache_dir: Path, root: Path) -> Path:
    return store_path(cache_dir, root.resolve())


def stored(cache_dir: Path, root: Path, **identity: str) -> FileRecords:
    """The file records of the store `serve` keeps for `root` (default settings)."""
    return FileRecords(Database(cache_dir, root.resolve(),
                                {"max_page_bytes": str(DEFAULT_MAX_PAGE_BYTES), **identity}))


def sqlite_file(path: Path, *statements: str) -> bytes:
    """The bytes of a SQLite database made by `statements` (a store of another kind)."""
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    data = path.read_bytes()
    path.unlink()
    return data


def test_restart_reuses_parsed_pages(sample_root: Path, cache_dir: Path,
                                     sources: list[KnowledgeSource], trust_fresh_files: None,
                                     digest_reads: list[str]) -> None:
    first = first_run(sources, sample_root, cache_dir)
    before = first.freshness.current
    assert before is not None
    digest_reads.clear()
    second = start(sources, sample_root, cache_dir)
    after = second.snapshot()
    assert second.freshness.mirror.parsed_count == 0
    assert digest_reads == []  # every record trusted from its stat: no bytes read at all
    assert after.signature == before.signature
    assert after.bundle_id == before.bundle_id
    assert [(p.id, p.title, p.text) for p in after.pages] == [
        (p.id, p.title, p.text) for p in before.pages]


def test_restart_inside_racy_window_rereads_but_does_not_reparse(
        sample_root: Path, cache_dir: Path, sources: list[KnowledgeSource],
        digest_reads: list[str]) -> None:
    first_run(sources, sample_root, cache_dir)
    digest_reads.clear()
    second = start(sources, sample_root, cache_dir)
    second.snapshot()
    # just-written files are re-read (racy window) but equal bytes keep the cached parse
    assert len(digest_reads) > 0
    assert second.freshness.mirror.parsed_count == 0


def test_edited_file_is_not_served_stale(sample_root: Path, cache_dir: Path,
                                         sources: list[KnowledgeSource],
                                         trust_fresh_files: None) -> None:
    first_run(sources, sample_root, cache_dir)
    path = sample_root / ROLLBACK
    before = os.stat(path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("title: Rollback", "title: Rollbock", 1), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after_stat = os.stat(path)
    assert (after_stat.st_size, after_stat.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    second = start(sources, sample_root, cache_dir)
    page = second.snapshot().find_page("runbooks/rollback")
    assert page is not None
    assert page.title == "Rollbock"
    assert second.freshness.mirror.parsed_count == 1  # only the edited page was re-parsed


def test_file_replaced_by_same_bytes_new_inode(sample_root: Path, cache_dir: Path,
                                               sources: list[KnowledgeSource],
                                               trust_fresh_files: None) -> None:
    first_run(sources, sample_root, cache_dir)
    path = sample_root / ROLLBACK
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data.replace(b"title: Rollback", b"title: Replaced", 1))
    second = start(sources, sample_root, cache_dir)
    page = second.snapshot().find_page("runbooks/rollback")
    assert page is not None and page.title == "Replaced"


class _Tamper:
    """A pickle that would create a file when unpickled (the cache must never run code)."""

    def __init__(self, witness: Path) -> None:
        self.witness = witness

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.witness,))


@pytest.mark.parametrize("kind", [
    "empty", "text", "garbage", "pickle", "foreign-sqlite", "older-schema", "newer-schema",
    "other-root",
])
def test_corrupt_or_foreign_store_is_rebuilt(sample_root: Path, cache_dir: Path, tmp_path: Path,
                                             sources: list[KnowledgeSource], kind: str) -> None:
    cache_path = store_file(cache_dir, sample_root)
    cache_path.parent.mkdir(parents=True)
    scratch = tmp_path / "scratch.sqlite3"
    if kind in ("older-schema", "newer-schema", "other-root"):
        first_run(sources, sample_root, cache_dir)
        conn = sqlite3.connect(cache_path)
        if kind == "other-root":
            conn.execute("UPDATE meta SET value = '/elsewhere' WHERE key = 'root'")
        else:
            version = SCHEMA_VERSION - 1 if kind == "older-schema" else SCHEMA_VERSION + 1
            conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
        conn.close()
    else:
        cache_path.write_bytes({
            "empty": b"", "text": b"not a store at all", "garbage": b"\x80\x05\x95garbage" * 100,
            "pickle": pickle.dumps(({}, {})),
            "foreign-sqlite": sqlite_file(scratch, "CREATE TABLE files (rel TEXT, page BLOB)",
                                          "INSERT INTO files VALUES ('hot.md', x'00')"),
        }[kind])
    source = start(sources, sample_root, cache_dir)
    projection = source.snapshot()
    assert projection.page_count == 14
    assert source.freshness.mirror.parsed_count == 14
    source.save_cache()
    assert stored(cache_dir, sample_root).load().keys() >= {ROLLBACK, "hot.md"}


def test_tampered_cache_runs_no_code(sample_root: Path, cache_dir: Path, tmp_path: Path,
                                     sources: list[KnowledgeSource]) -> None:
    witness = tmp_path / "code-ran"
    cache_path = store_file(cache_dir, sample_root)
    cache_path.parent.mkdir(parents=True)
    cache_path.write_bytes(pickle.dumps(_Tamper(witness)))
    source = start(sources, sample_root, cache_dir)
    assert source.snapshot().page_count == 14
    assert not witness.exists()


def test_truncated_cache_is_ignored(sample_root: Path, cache_dir: Path,
                                    sources: list[KnowledgeSource]) -> None:
    first_run(sources, sample_root, cache_dir)
    cache_path = store_file(cache_dir, sample_root)
    data = cache_path.read_bytes()
    cache_path.write_bytes(data[: len(data) // 2])
    source = start(sources, sample_root, cache_dir)
    assert source.snapshot().page_count == 14
    assert source.freshness.mirror.parsed_count == 14


def test_cache_of_another_root_is_not_used(tmp_path: Path, cache_dir: Path,
                                           sources: list[KnowledgeSource],
                                           trust_fresh_files: None) -> None:
    from tests.support.folders import copy_fixture

    one = copy_fixture("sample-wiki", tmp_path / "one")
    two = copy_fixture("sample-wiki", tmp_path / "two")
    first_run(sources, one, cache_dir)
    assert store_file(cache_dir, one) != store_file(cache_dir, two)
    other = start(sources, two, cache_dir)
    other.snapshot()
    assert other.freshness.mirror.parsed_count == 14


@pytest.mark.parametrize("inside", [".", "cache", "runbooks/.cache", "deep/er"])
def test_cache_dir_inside_root_is_refused(sample_root: Path, inside: str) -> None:
    with pytest.raises(ValueError, match="outside the served root"):
        KnowledgeSource(ServeSettings(root=sample_root, cache_dir=sample_root / inside))
    with pytest.raises(ValueError, match="outside the served root"):
        create_app(ServeSettings(root=sample_root, cache_dir=sample_root / inside))


def test_cache_dir_symlinked_into_root_is_refused(sample_root: Path, tmp_path: Path) -> None:
    (tmp_path / "sneaky-cache").symlink_to(sample_root / "runbooks", target_is_directory=True)
    with pytest.raises(ValueError, match="outside the served root"):
        KnowledgeSource(ServeSettings(root=sample_root, cache_dir=tmp_path / "sneaky-cache"))


def test_store_holds_every_page_and_no_file_of_ours_beside_it(
        sample_root: Path, cache_dir: Path, sources: list[KnowledgeSource]) -> None:
    source = first_run(sources, sample_root, cache_dir)
    path = store_file(cache_dir, sample_root)
    # the engine's write-ahead log is folded back in when the last connection closes
    assert cache_files(cache_dir) == [path.name]
    records = stored(cache_dir, sample_root).load()
    page_files = {r for r in records if r.endswith(".md")}
    assert len(page_files) == 14
    assert "graph/graph.json" in records
    assert source.store is not None and source.store.path == path


def full_disk(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every store connection from now on sees a disk with no page left to grow into."""
    hits: list[int] = []
    real = Database._connect_file

    def capped(self: Database) -> sqlite3.Connection:
        conn = real(self)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        hits.append(pages)
        return conn

    monkeypatch.setattr(Database, "_connect_file", capped)
    return hits


def test_a_full_disk_keeps_the_previous_store(sample_root: Path, cache_dir: Path,
                                              sources: list[KnowledgeSource],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    first_run(sources, sample_root, cache_dir)
    records = stored(cache_dir, sample_root)
    loaded = records.load()
    changed = {rel: rec._replace(verified_ns=rec.verified_ns + 1) for rel, rec in loaded.items()}
    changed |= {f"more/{n}.md": next(iter(loaded.values())) for n in range(200)}
    hits = full_disk(monkeypatch)
    assert records.save(changed) is False
    monkeypatch.undo()
    assert hits  # the full disk was really met
    assert records.database.failing is True
    again = stored(cache_dir, sample_root).load()
    assert {rel: tuple(r) for rel, r in again.items()} == {rel: tuple(r) for rel, r in loaded.items()}
    assert records.save(changed) is True  # space is back: the same save goes through
    assert records.database.failing is False
    assert stored(cache_dir, sample_root).load().keys() == changed.keys()


def test_lower_max_page_bytes_after_restart_skips_big_page(
        sample_root: Path, cache_dir: Path, sources: list[KnowledgeSource],
        trust_fresh_files: None) -> None:
    big = sample_root / "big.md"
    big.write_text("# Big\n\n" + "word " * 1000 + "\n", encoding="utf-8")  # about 5 KB
    first = start(sources, sample_root, cache_dir, max_page_bytes=1 << 20)
    assert first.snapshot().find_page("big") is not None
    first.save_cache()
    first.close()
    second = start(sources, sample_root, cache_dir, max_page_bytes=2048)
    projection = second.snapshot()
    assert projection.find_page("big") is None
    assert [(d.path, d.reason) for d in projection.diagnostics] == [("big.md", "too_large")]


def test_layout_change_between_runs_reparses(tmp_path: Path, cache_dir: Path,
                                             sources: list[KnowledgeSource],
                                             trust_fresh_files: None) -> None:
    import shutil

    from tests.support.folders import copy_fixture

    root = copy_fixture("shapes/logseq-graph", tmp_path / "roots")
    config = (root / "logseq" / "config.edn").read_bytes()
    shutil.rmtree(root / "logseq")
    shutil.rmtree(root / "journals")
    first = start(sources, root, cache_dir)
    generic = first.snapshot()
    assert generic.layout.adapter == "generic-markdown"
    page = generic.find_page("pages/Project___Alpha")
    assert page is not None and page.title == "Project___Alpha"
    first.save_cache()
    first.close()
    (root / "logseq").mkdir()
    (root / "logseq" / "config.edn").write_bytes(config)
    second = start(sources, root, cache_dir)
    logseq = second.snapshot()
    assert logseq.layout.adapter == "logseq"
    page = logseq.find_page("pages/Project___Alpha")
    assert page is not None and page.title == "Project/Alpha"


def test_no_cache_when_disabled(sample_root: Path, cache_dir: Path,
                                sources: list[KnowledgeSource]) -> None:
    source = start(sources, sample_root, cache_dir, page_cache=False)
    source.snapshot()
    source.save_cache()
    assert source.cache is None and source.store is None
    assert not cache_dir.exists()


def test_serving_never_writes_inside_root(sample_root: Path, cache_dir: Path,
                                          sources: list[KnowledgeSource]) -> None:
    digest = tree_digest(sample_root)
    first_run(sources, sample_root, cache_dir)
    again = start(sources, sample_root, cache_dir)
    again.snapshot()
    again.save_cache()
    assert tree_digest(sample_root) == digest
    # The store, and the engine's own -wal and -shm beside it while a reader is open
    name = store_file(cache_dir, sample_root).name
    assert set(cache_files(cache_dir)) <= {name, f"{name}-wal", f"{name}-shm"}
    assert name in cache_files(cache_dir)


async def test_http_restart_uses_cache(sample_root: Path, cache_dir: Path,
                                       trust_fresh_files: None) -> None:
    settings = ServeSettings(root=sample_root, cache_dir=cache_dir)
    async with TestClient(TestServer(create_app(settings))) as client:
        assert (await client.get("/health")).status == 200
        assert client.app[SOURCE_KEY].freshness.mirror.parsed_count == 14
    # shutdown saved the cache; a new process-equivalent app parses nothing
    assert len(cache_files(cache_dir)) == 1
    async with TestClient(TestServer(create_app(settings))) as client:
        body = await (await client.get("/read/runbooks/rollback")).json()
        assert body["title"] == "Rollback"
        assert client.app[SOURCE_KEY].freshness.mirror.parsed_count == 0


def test_store_round_trip_keeps_every_record_equal(sample_root: Path, cache_dir: Path,
                                                   sources: list[KnowledgeSource],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("serve.store.files.WRITE_BATCH", 4)  # several batches
    source = start(sources, sample_root, cache_dir)
    source.snapshot()
    records = dict(source.freshness.mirror.records)
    writer = stored(cache_dir, sample_root)
    writer.save(records, {"sha256:x": (3, 4)})
    loaded = stored(cache_dir, sample_root)
    again = loaded.load()
    assert sorted(again) == sorted(rel for rel, r in records.items() if not r.skipped)
    assert {rel: with_body(r) for rel, r in again.items()} == {
        rel: with_body(records[rel]) for rel in again}
    assert loaded.counts == {"sha256:x": (3, 4)}
    pages = [r.page for r in again.values() if r.page is not None]
    assert [p.sections for p in pages] == [records[r].page.sections  # type: ignore[union-attr]
                                           for r, rec in again.items() if rec.page is not None]
    assert any(p.sections for p in pages)
    # A restart reads no fragment; the store gives each back when a snapshot asks for them.
    assert all(r.fragment is None for r in again.values())
    assert loaded.fragments(pages) == [records[rel].fragment for rel, rec in again.items()
                                       if rec.page is not None]
    # Records parsed the same way share one ParseOptions after loading.
    assert len({id(r.parse_key[1]) for r in again.values() if r.parse_key is not None}) == 1


def test_a_save_writes_only_what_changed(sample_root: Path, cache_dir: Path,
                                         sources: list[KnowledgeSource]) -> None:
    first_run(sources, sample_root, cache_dir)
    records = stored(cache_dir, sample_root)
    loaded = records.load()
    edited: dict[str, FileRecord] = dict(loaded)
    edited[ROLLBACK] = loaded[ROLLBACK]._replace(digest="edited")
    del edited["hot.md"]
    statements: list[str] = []
    real = Database._connect_file

    def traced(self: Database) -> sqlite3.Connection:
        conn = real(self)
        conn.set_trace_callback(statements.append)
        return conn

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Database, "_connect_file", traced)
        assert records.save(edited)
    inserts = [s for s in statements if s.startswith("INSERT INTO files")]
    assert len(inserts) == 1 and ROLLBACK in inserts[0]
    again = stored(cache_dir, sample_root).load()
    assert again.keys() == edited.keys() and again[ROLLBACK].digest == "edited"


def test_a_cache_directory_that_cannot_be_made_keeps_serving_from_memory(
        sample_root: Path, tmp_path: Path, sources: list[KnowledgeSource]) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory should be\n", encoding="utf-8")
    source = start(sources, sample_root, blocked / "cache")
    assert source.snapshot().page_count == 14
    source.save_cache()
    assert source.store is not None and source.store.mode == "memory"
    assert source.store.state == "memory"
    assert blocked.read_text(encoding="utf-8").startswith("a file")


def test_an_unwritable_store_file_sends_the_store_to_memory(
        sample_root: Path, cache_dir: Path, sources: list[KnowledgeSource],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Database) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(Database, "_connect_file", refuse)
    source = start(sources, sample_root, cache_dir)
    assert source.snapshot().page_count == 14
    source.save_cache()
    assert source.store is not None and source.store.mode == "memory"
    assert source.cache is not None and source.cache.load().keys() >= {ROLLBACK, "hot.md"}
