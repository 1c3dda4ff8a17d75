"""The folder mirror's read paths: reading files, parse workers and the early read at start."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

import serve.source.layout as layout_module
import serve.watch.parse_pool as parse_pool_module
import serve.watch.records as records_module
import serve.watch.tracked as folder_module
from common.schemas import CorsStatus
from serve.service import KnowledgeSource
from serve.settings import DEFAULT_MAX_PAGE_BYTES, ServeSettings
from serve.source.reading import NotRegularFile
from serve.source.tree import Walk, is_tracked_file, walk_dir, walk_root
from serve.watch.early_read import EarlyRead
from serve.watch.file_read import digest_file
from serve.watch.mirror import FolderMirror
from serve.watch.records import FileRecord
from tests.support.folders import copy_fixture

LOCAL_CORS = CorsStatus(mode="local-dev-allowlist", local_dev_origins=True, explicit_origin_count=0)

ROLLBACK = "runbooks/rollback.md"



@pytest.fixture
def parse_in_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send even a small folder to the parse workers (two, whatever this machine has)."""
    monkeypatch.setattr(parse_pool_module, "PARALLEL_PARSE_MIN", 1)
    monkeypatch.setattr(parse_pool_module, "parse_workers", lambda: 2)


def comparable(record: FileRecord) -> tuple[Any, ...]:
    """A record without the time it was read."""
    return (record.stat, record.digest, record.page, record.fragment, record.parse_key,
            record.text, record.sidecar, record.problem, record.skipped)


def mirrored(root: Path) -> dict[str, FileRecord]:
    mirror = FolderMirror(root, source_id=None, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    mirror.full_scan()
    mirror.project()
    return mirror.records


def answers(source: KnowledgeSource) -> tuple[Any, ...]:
    # Start-up's progress (seconds since start) is the one part of /health two sources differ in.
    health = source.health(LOCAL_CORS).model_copy(update={"readiness": None})
    return (health, source.manifest(), source.source_bundle(include_drafts=True),
            source.graph(limit=2000), [page.payload() for page in source.snapshot().pages],
            [page.sections for page in source.snapshot().pages])


# -- reading one file ----------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 70_000, 300_000])
def test_digest_covers_the_whole_file_and_returns_bytes_up_to_the_limit(tmp_path: Path,
                                                                        size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    path = tmp_path / "page.md"
    path.write_bytes(data)
    for limit in (100, 200_000, 1_000_000):
        digest, read = digest_file(str(path), limit)
        if size <= limit:
            assert (digest, read) == (hashlib.blake2b(data, digest_size=16).hexdigest(), data)
        else:  # never read: the digest follows the size and mtime instead
            assert read is None
            os.utime(path, ns=(limit, limit))
            assert digest_file(str(path), limit)[0] != digest


def test_digest_never_opens_a_fifo_for_good(tmp_path: Path) -> None:
    fifo = tmp_path / "page.md"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile):
        digest_file(str(fifo), 100)


def test_digest_refuses_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("x")
    os.symlink(tmp_path / "real.md", tmp_path / "link.md")
    with pytest.raises(OSError):
        digest_file(str(tmp_path / "link.md"), 100)


# -- parse workers -------------------------------------------------------------------------


def test_workers_read_the_same_records_as_the_parent(sample_root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    alone = mirrored(sample_root)
    monkeypatch.setattr(parse_pool_module, "PARALLEL_PARSE_MIN", 1)
    monkeypatch.setattr(parse_pool_module, "PARSE_CHUNK", 3)  # several chunks, kept in order
    monkeypatch.setattr(parse_pool_module, "parse_workers", lambda: 2)
    shared = mirrored(sample_root)
    assert list(shared) == list(alone)
    assert {rel: comparable(r) for rel, r in shared.items()} == {
        rel: comparable(r) for rel, r in alone.items()}


# -- the early read --------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["sample-wiki", "shapes/dendron-multi", "shapes/logseq-graph",
                                     "shapes/obsidian-vault", "shapes/korean-wiki"])
def test_early_read_serves_the_same_answers_without_parsing_again(
        fixture: str, tmp_path: Path, cache_dir: Path, sources: list[KnowledgeSource],
        trust_fresh_files: None, parse_in_workers: None) -> None:
    root = copy_fixture(fixture, tmp_path / "roots")
    settings = ServeSettings(root=root, cache_dir=cache_dir)
    early = EarlyRead(root, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    head_start = KnowledgeSource(settings, early=early)
    sources.append(head_start)
    assert head_start.freshness.mirror.pending  # taken by the first scan
    # An empty store of its own: everything parsed, and /health says "disk" for both.
    plain = KnowledgeSource(ServeSettings(root=root, cache_dir=tmp_path / "plain-cache"))
    sources.append(plain)
    assert answers(head_start) == answers(plain)
    assert head_start.freshness.mirror.parsed_count == 0  # every record trusted by its stat
    # The early records are not the restart cache: the first start still writes it.
    head_start.save_cache()
    assert os.listdir(cache_dir)


def test_early_read_of_a_file_edited_afterwards_is_read_again(
        sample_root: Path, sources: list[KnowledgeSource], trust_fresh_files: None,
        parse_in_workers: None) -> None:
    early = EarlyRead(sample_root, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    records = early.records()
    assert records[ROLLBACK].page is not None
    path = sample_root / ROLLBACK
    path.write_text(path.read_text(encoding="utf-8").replace("title: Rollback", "title: Rolled", 1),
                    encoding="utf-8")

    class Handed:  # the records as taken above, before the edit
        def records(self) -> dict[str, FileRecord]:
            return records

        def close(self) -> None:
            pass

    source = KnowledgeSource(ServeSettings(root=sample_root, page_cache=False),
                             early=Handed())  # type: ignore[arg-type]
    sources.append(source)
    page = source.snapshot().find_page("runbooks/rollback")
    assert page is not None and page.title == "Rolled"
    assert source.freshness.mirror.parsed_count == 1


def test_files_read_again_at_start_keep_the_signature_of_an_ordinary_read(
        sample_root: Path, sources: list[KnowledgeSource], parse_in_workers: None) -> None:
    """The early read's records of files too recent to trust are read again by the mirror's walk;
    they must keep their walk position, or the signature (and bundle id) of a cold start would
    depend on which files happened to be recent."""
    early = EarlyRead(sample_root, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    records = early.records()
    # The fixture copy was just written: every record but one counts as too recent.
    trusted = sorted(records)[len(records) // 2]
    records = {rel: r._replace(verified_ns=r.stat.ctime_ns + records_module.RACY_WINDOW_NS + 1)
               if rel == trusted else r for rel, r in records.items()}

    class Handed:
        def records(self) -> dict[str, FileRecord]:
            return records

        def close(self) -> None:
            pass

    started = KnowledgeSource(ServeSettings(root=sample_root, page_cache=False),
                              early=Handed())  # type: ignore[arg-type]
    ordinary = KnowledgeSource(ServeSettings(root=sample_root, page_cache=False))
    sources += [started, ordinary]
    assert started.freshness.mirror.parsed_count < len(records)
    assert started.health(LOCAL_CORS).source == ordinary.health(LOCAL_CORS).source


def test_an_early_read_never_taken_is_stopped_with_the_source(
        sample_root: Path, parse_in_workers: None) -> None:
    early = EarlyRead(sample_root, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    KnowledgeSource(ServeSettings(root=sample_root, page_cache=False), early=early).close()
    assert early.records() == {}


def test_early_read_is_empty_for_small_or_missing_folders(sample_root: Path,
                                                          tmp_path: Path) -> None:
    assert EarlyRead(sample_root, max_page_bytes=DEFAULT_MAX_PAGE_BYTES).records() == {}
    missing = EarlyRead(tmp_path / "missing", max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    assert missing.records() == {}


def test_closing_an_early_read_drops_its_records(sample_root: Path,
                                                 parse_in_workers: None) -> None:
    early = EarlyRead(sample_root, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    early.close()
    assert early.records() == {}


# -- layout detection ------------------------------------------------------------------------


def test_first_projection_detects_the_layout_once(sample_root: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = layout_module.detect_layout

    def counting(*args: Any) -> Any:
        calls.append("detect")
        return real(*args)

    monkeypatch.setattr(folder_module, "detect_layout", counting)
    mirrored(sample_root)
    assert calls == ["detect"]


def test_a_config_file_changed_since_its_record_is_detected_anew(tmp_path: Path) -> None:
    root = copy_fixture("shapes/dendron-multi", tmp_path)
    mirror = FolderMirror(root, source_id=None, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    mirror.full_scan()
    before = mirror.project()
    # Single-vault dendron.yml: detection from the stale record text and from the new text
    # disagree, so the projection must come from a second detection.
    config = root / "dendron.yml"
    config.write_text("version: 5\nworkspace:\n  vaults:\n    - fsPath: vault\n",
                      encoding="utf-8")
    mirror.full_scan()
    after = mirror.project()
    fresh = FolderMirror(root, source_id=None, max_page_bytes=DEFAULT_MAX_PAGE_BYTES)
    fresh.full_scan()
    expected = fresh.project()
    assert after.layout == expected.layout
    assert [p.path for p in after.pages] == [p.path for p in expected.pages]
    assert before.layout is not None


# -- walking ---------------------------------------------------------------------------------


def test_walk_tracks_exactly_what_is_tracked_file_accepts(tmp_path: Path) -> None:
    names = ["a.md", "B.MD", "c.org", "notes.txt", "graph.json", "dendron.yml",
             "quartz.config.ts", ".wiki-compiler.json"]
    dirs = ["", "graph", "docs/graph", ".vscode", "docs", "node_modules", ".obsidian", "logseq"]
    for base in dirs:
        for name in [*names, "extensions.json", "config.edn"]:
            path = tmp_path / base / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
    candidates = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    walked = walk_root(str(tmp_path)).files
    assert set(walked) == {rel for rel in candidates
                           if is_tracked_file(rel)
                           and all(part not in ("node_modules", ".obsidian")
                                   for part in rel.split("/")[:-1])}
    # A re-walk that starts inside an ignored directory tracks nothing there.
    ignored = Walk(files={}, dirs=[], marker_dirs={})
    walk_dir(str(tmp_path), "node_modules", ignored)
    assert ignored.files == {}
