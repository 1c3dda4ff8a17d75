"""Freshness: every change to the folder is visible on the very next request, nothing else is."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

import serve.watch.freshness as freshness_module
from serve.errors import WikiRootError
from serve.protocols.http import SOURCE_KEY
from serve.snapshot.projection import Projection
from serve.watch.freshness import Freshness
from tests.support.folders import FIXTURES, copy_fixture

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

MODES = [pytest.param(True, id="inotify"), pytest.param(False, id="scan")]
FreshnessFactory = Callable[..., Freshness]
ROLLBACK = "runbooks/rollback.md"


@pytest.fixture(params=MODES)
def use_inotify(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def make_freshness(use_inotify: bool) -> Iterator[FreshnessFactory]:
    """Freshness controllers for a root in the parametrised mode, closed at teardown."""
    made: list[Freshness] = []

    def make(root: Path, **kwargs: Any) -> Freshness:
        kwargs.setdefault("use_inotify", use_inotify)
        fresh = Freshness(root, **kwargs)
        made.append(fresh)
        return fresh

    yield make
    for fresh in made:
        fresh.close()


def expected_mode(use_inotify: bool) -> str:
    return "inotify" if use_inotify else "scan"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def rewrite_keeping_stat(path: Path, old: str, new: str) -> None:
    """Same size, same mtime: only the bytes (and the ctime, which nobody can set) change."""
    assert len(old.encode()) == len(new.encode())
    before = os.stat(path)
    edit(path, old, new)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def write_page(path: Path, title: str, body: str = "Body text.") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: {title}\n---\n# {title}\n\n{body}\n", encoding="utf-8")


def title_of(projection: Projection, key: str) -> str | None:
    page = projection.find_page(key)
    return None if page is None else page.title


def wire_edges(projection: Projection) -> list[dict[str, Any]]:
    """The full graph's edges as the wire shows them."""
    return projection.graph(True).truncated(2000)["edges"]


def edge_keys(projection: Projection) -> set[tuple[str, str, str]]:
    return {(e["source"], e["target"], e["relation"]) for e in wire_edges(projection)}


# -- the change matrix, directly on Freshness, in both modes ---------------------------------


def test_mode_is_reported(make_freshness: FreshnessFactory, sample_root: Path,
                          use_inotify: bool) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    assert fresh.mode == expected_mode(use_inotify)


def test_edit_visible_next_snapshot(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Rollback"
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Rollback Plan")
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Rollback Plan"
    edit(sample_root / ROLLBACK, "title: Rollback Plan", "title: Rollback Again")
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Rollback Again"


def test_add_and_delete_page(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    assert fresh.snapshot().page_count == 14
    write_page(sample_root / "runbooks" / "new-runbook.md", "New Runbook")
    after_add = fresh.snapshot()
    assert after_add.page_count == 15
    assert title_of(after_add, "runbooks/new-runbook") == "New Runbook"
    (sample_root / ROLLBACK).unlink()
    after_delete = fresh.snapshot()
    assert after_delete.page_count == 14
    assert after_delete.find_page("runbooks/rollback") is None
    assert after_delete.find_page("runbooks/rollback.md") is None


def test_same_size_same_mtime_rewrite(make_freshness: FreshnessFactory,
                                      sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    before = fresh.snapshot()
    rewrite_keeping_stat(sample_root / ROLLBACK, "title: Rollback", "title: Rollbock")
    after = fresh.snapshot()
    assert title_of(after, "runbooks/rollback") == "Rollbock"
    assert after.signature != before.signature


def test_new_directory_with_pages(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    write_page(sample_root / "playbooks" / "alpha.md", "Alpha Play")
    write_page(sample_root / "playbooks" / "deep" / "er" / "beta.md", "Beta Play")
    first = fresh.snapshot()
    assert title_of(first, "playbooks/alpha") == "Alpha Play"
    assert title_of(first, "playbooks/deep/er/beta") == "Beta Play"
    # the new directories are now watched too: later files in them show up
    write_page(sample_root / "playbooks" / "deep" / "er" / "gamma.md", "Gamma Play")
    edit(sample_root / "playbooks" / "alpha.md", "title: Alpha Play", "title: Alpha Two")
    second = fresh.snapshot()
    assert title_of(second, "playbooks/deep/er/gamma") == "Gamma Play"
    assert title_of(second, "playbooks/alpha") == "Alpha Two"
    assert second.page_count == 17


def test_directory_removed(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    assert fresh.snapshot().find_page("runbooks/rollback") is not None
    shutil.rmtree(sample_root / "runbooks")
    after = fresh.snapshot()
    assert after.page_count == 10
    assert [p.id for p in after.pages if p.id.startswith("runbooks/")] == []


def test_directory_renamed(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    os.rename(sample_root / "runbooks", sample_root / "procedures")
    after = fresh.snapshot()
    assert after.find_page("runbooks/rollback") is None
    assert title_of(after, "procedures/rollback") == "Rollback"
    assert after.page_count == 14
    # edits inside the renamed directory are still seen
    edit(sample_root / "procedures" / "rollback.md", "title: Rollback", "title: Renamed Edit")
    assert title_of(fresh.snapshot(), "procedures/rollback") == "Renamed Edit"


def test_directory_moved_out_and_back(make_freshness: FreshnessFactory, sample_root: Path,
                                      tmp_path: Path) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    os.rename(sample_root / "concepts", tmp_path / "parked")
    assert fresh.snapshot().find_page("concepts/config-flags") is None
    os.rename(tmp_path / "parked", sample_root / "concepts")
    assert title_of(fresh.snapshot(), "concepts/config-flags") == "Configuration Flags"


def build_replacement_wiki(staging: Path) -> Path:
    wiki = staging / "wiki"
    (wiki / "concepts").mkdir(parents=True)
    (wiki / "overview.md").write_text(
        "---\nwiki_title: Rebuilt Wiki\n---\n# Rebuilt Overview\n\nSee [[concepts/fresh]].\n",
        encoding="utf-8")
    write_page(wiki / "concepts" / "fresh.md", "Fresh Concept")
    return wiki


def test_wiki_directory_replaced_wholesale(make_freshness: FreshnessFactory,
                                           tmp_path: Path) -> None:
    root = copy_fixture("shapes/native-wiki-root", tmp_path / "roots")
    fresh = make_freshness(root)
    before = fresh.snapshot()
    assert before.title == "Native Wiki Fixture"
    assert {p.id for p in before.pages} == {"CRITICAL_FACTS", "concepts/release", "overview"}
    staged = build_replacement_wiki(tmp_path / "staging")
    shutil.rmtree(root / "wiki")
    os.rename(staged, root / "wiki")
    after = fresh.snapshot()
    assert after.title == "Rebuilt Wiki"
    assert {p.id for p in after.pages} == {"concepts/fresh", "overview"}
    assert after.layout.page_root == "wiki"


def test_wiki_directory_swapped_by_rename(make_freshness: FreshnessFactory,
                                         tmp_path: Path) -> None:
    root = copy_fixture("shapes/native-wiki-root", tmp_path / "roots")
    fresh = make_freshness(root)
    fresh.snapshot()
    staged = build_replacement_wiki(tmp_path / "staging")
    os.rename(root / "wiki", tmp_path / "old-wiki")  # compile output swap: old out, new in
    os.rename(staged, root / "wiki")
    after = fresh.snapshot()
    assert after.title == "Rebuilt Wiki"
    assert after.find_page("CRITICAL_FACTS") is None


def test_graph_sidecar_create_modify_delete(make_freshness: FreshnessFactory,
                                            tmp_path: Path) -> None:
    root = copy_fixture("shapes/reference-sample", tmp_path / "roots")
    fresh = make_freshness(root)
    supports = ("page:hot", "page:index", "supports")
    refines = ("page:hot", "page:index", "refines")
    base = fresh.snapshot()
    assert supports not in edge_keys(base)
    sidecar = root / "graph" / "graph.json"
    sidecar.parent.mkdir()
    sidecar.write_text(json.dumps({"edges": [
        {"from": "hot", "to": "index", "type": "supports", "confidence": 0.5}]}),
        encoding="utf-8")
    created = fresh.snapshot()
    assert supports in edge_keys(created)
    edge = next(e for e in wire_edges(created) if e["relation"] == "supports")
    assert edge["metadata"] == {"source": "graph.json", "path": "graph/graph.json",
                                "confidence": 0.5}
    sidecar.write_text(json.dumps({"edges": [
        {"from": "hot", "to": "index", "type": "refines", "confidence": 0.5}]}),
        encoding="utf-8")
    modified = fresh.snapshot()
    assert refines in edge_keys(modified)
    assert supports not in edge_keys(modified)
    sidecar.unlink()
    deleted = fresh.snapshot()
    assert refines not in edge_keys(deleted)
    assert supports not in edge_keys(deleted)
    assert deleted.signature == base.signature


def test_graph_sidecar_same_stat_rewrite(make_freshness: FreshnessFactory,
                                         sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    assert any(e["relation"] == "supports" for e in wire_edges(fresh.snapshot()))
    rewrite_keeping_stat(sample_root / "graph" / "graph.json", '"supports"', '"supplies"')
    relations = {e["relation"] for e in wire_edges(fresh.snapshot())}
    assert "supplies" in relations
    assert "supports" not in relations


def test_obsidian_marker_switches_adapter(make_freshness: FreshnessFactory,
                                          tmp_path: Path) -> None:
    root = copy_fixture("shapes/generic-markdown", tmp_path / "roots")
    fresh = make_freshness(root)
    assert fresh.snapshot().layout.adapter == "generic-markdown"
    (root / ".obsidian").mkdir()
    assert fresh.snapshot().layout.adapter == "obsidian"
    (root / ".obsidian").rmdir()
    assert fresh.snapshot().layout.adapter == "generic-markdown"


def test_foam_dir_and_file_markers(make_freshness: FreshnessFactory, tmp_path: Path) -> None:
    root = copy_fixture("shapes/generic-markdown", tmp_path / "roots")
    fresh = make_freshness(root)
    fresh.snapshot()
    (root / ".foam").mkdir()
    assert fresh.snapshot().layout.adapter == "foam"
    (root / ".foam").rmdir()
    assert fresh.snapshot().layout.adapter == "generic-markdown"
    (root / ".foam").write_text("", encoding="utf-8")
    assert fresh.snapshot().layout.adapter == "foam"


def test_vscode_extensions_switch_to_foam(make_freshness: FreshnessFactory,
                                          tmp_path: Path) -> None:
    root = copy_fixture("shapes/generic-markdown", tmp_path / "roots")
    fresh = make_freshness(root)
    fresh.snapshot()
    (root / ".vscode").mkdir()
    assert fresh.snapshot().layout.adapter == "generic-markdown"
    extensions = root / ".vscode" / "extensions.json"
    extensions.write_text(json.dumps({"recommendations": ["foam.foam-vscode"]}),
                          encoding="utf-8")
    assert fresh.snapshot().layout.adapter == "foam"
    extensions.write_text(json.dumps({"recommendations": ["ms-python.python"]}),
                          encoding="utf-8")
    assert fresh.snapshot().layout.adapter == "generic-markdown"


def test_vscode_dir_created_with_extensions_at_once(make_freshness: FreshnessFactory,
                                                    tmp_path: Path) -> None:
    root = copy_fixture("shapes/generic-markdown", tmp_path / "roots")
    fresh = make_freshness(root)
    fresh.snapshot()
    (root / ".vscode").mkdir()
    (root / ".vscode" / "extensions.json").write_text(
        '{"recommendations": ["foam.foam-vscode"]}', encoding="utf-8")
    assert fresh.snapshot().layout.adapter == "foam"


def test_logseq_config_switches_adapter(make_freshness: FreshnessFactory,
                                        tmp_path: Path) -> None:
    root = copy_fixture("shapes/generic-markdown", tmp_path / "roots")
    fresh = make_freshness(root)
    fresh.snapshot()
    (root / "logseq").mkdir()
    (root / "logseq" / "config.edn").write_text("{:meta/version 1}\n", encoding="utf-8")
    (root / "pages").mkdir()
    (root / "pages" / "Alpha.md").write_text("- Alpha block\n", encoding="utf-8")
    switched = fresh.snapshot()
    assert switched.layout.adapter == "logseq"
    assert [p.id for p in switched.pages] == ["pages/Alpha"]


def test_visibility_flip(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    before = fresh.snapshot()
    assert before.approved_page_count == 12
    page = before.find_page("vendor-contacts")
    assert page is not None and page.approved is False
    edit(sample_root / "vendor-contacts.md", "status: private", "status: current")
    served = fresh.snapshot()
    assert served.approved_page_count == 13
    page = served.find_page("vendor-contacts")
    assert page is not None and page.approved is True
    edit(sample_root / "vendor-contacts.md", "status: current", "status: embargoed")
    hidden = fresh.snapshot()
    assert hidden.approved_page_count == 12


def test_root_removed_then_recreated(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    shutil.rmtree(sample_root)
    with pytest.raises(WikiRootError) as missing:
        fresh.snapshot()
    assert missing.value.code == "wiki_root_missing"
    with pytest.raises(WikiRootError):
        fresh.snapshot()
    shutil.copytree(FIXTURES / "shapes" / "llmwiki-compiler-output", sample_root)
    back = fresh.snapshot()
    assert back.title == "Compiler Output"
    assert back.page_count == 3
    edit(sample_root / "packaging-topic.md", "# ", "# Edited ")
    assert fresh.snapshot().find_page("packaging-topic") is not None
    write_page(sample_root / "later.md", "Later Page")
    assert title_of(fresh.snapshot(), "later") == "Later Page"


def test_root_created_after_start(make_freshness: FreshnessFactory, tmp_path: Path) -> None:
    root = tmp_path / "not-yet"
    fresh = make_freshness(root)
    with pytest.raises(WikiRootError) as missing:
        fresh.snapshot()
    assert missing.value.code == "wiki_root_missing"
    root.mkdir()
    with pytest.raises(WikiRootError) as empty:
        fresh.snapshot()
    assert empty.value.code == "wiki_root_unsupported"
    write_page(root / "index.md", "Index")
    write_page(root / "hot.md", "Hot")
    ready = fresh.snapshot()
    assert ready.layout.adapter == "llmwiki-markdown"
    assert ready.page_count == 2


IGNORED_WRITES = [
    "node_modules/pkg/readme.md", ".git/notes.md", "dist/page.md", "build/out.md",
    ".venv/lib/doc.md", "__pycache__/x.md", ".runtime-logs/log.md", "runbooks/node_modules/a.md",
    "concepts/dist/deep/b.md", ".trash/deleted-note.md", ".stversions/runbooks/rollback~20261201-101010.md",
    "runbooks/.Trash/old.md", ".Trashes/501/x.md",
]


@pytest.mark.parametrize("rel", IGNORED_WRITES)
def test_ignored_directories_cause_no_projection(make_freshness: FreshnessFactory,
                                                 sample_root: Path, rel: str,
                                                 use_inotify: bool) -> None:
    fresh = make_freshness(sample_root)
    first = fresh.snapshot()
    projections, walks = fresh.projections, fresh.walks
    write_page(sample_root / rel, "Ignored Page")
    again = fresh.snapshot()
    assert fresh.projections == projections
    assert again is first
    assert again.page_count == 14
    if use_inotify:
        assert fresh.walks == walks
    (sample_root / rel).write_text("# changed\n", encoding="utf-8")
    assert fresh.snapshot() is first
    assert fresh.projections == projections


def test_editor_only_files_cause_no_projection(make_freshness: FreshnessFactory,
                                               tmp_path: Path) -> None:
    root = copy_fixture("shapes/foam-workspace", tmp_path / "roots")
    fresh = make_freshness(root)
    first = fresh.snapshot()
    projections = fresh.projections
    write_page(root / ".vscode" / "other.md", "VS Code Only")
    write_page(root / ".foam" / "templates" / "another.md", "Template Only")
    (root / ".foam" / "templates" / "new-note.md").write_text("# changed\n", encoding="utf-8")
    assert fresh.snapshot() is first
    assert fresh.projections == projections


def test_obsidian_config_contents_ignored(make_freshness: FreshnessFactory,
                                          tmp_path: Path) -> None:
    root = copy_fixture("shapes/obsidian-vault", tmp_path / "roots")
    fresh = make_freshness(root)
    first = fresh.snapshot()
    projections = fresh.projections
    (root / ".obsidian" / "workspace.json").write_text("{}", encoding="utf-8")
    write_page(root / ".obsidian" / "templates" / "daily.md", "Daily Template")
    assert fresh.snapshot() is first
    assert fresh.projections == projections


def test_ignored_parent_name_is_fine(make_freshness: FreshnessFactory, tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path / "build" / "dist" / "node_modules")
    fresh = make_freshness(root)
    assert fresh.snapshot().page_count == 14
    edit(root / ROLLBACK, "title: Rollback", "title: Under Build")
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Under Build"


def test_atomic_save_by_rename(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    staged = sample_root / "runbooks" / ".rollback.md.tmp"
    staged.write_text("---\ntitle: Saved Atomically\n---\n# Saved\n", encoding="utf-8")
    os.replace(staged, sample_root / ROLLBACK)
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Saved Atomically"


def test_nested_directory_renamed_keeps_watching(make_freshness: FreshnessFactory,
                                                 sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    write_page(sample_root / "concepts" / "sub" / "inner.md", "Inner")
    assert title_of(fresh.snapshot(), "concepts/sub/inner") == "Inner"
    os.rename(sample_root / "concepts", sample_root / "ideas")
    assert title_of(fresh.snapshot(), "ideas/sub/inner") == "Inner"
    edit(sample_root / "ideas" / "sub" / "inner.md", "title: Inner", "title: Inner Edit")
    write_page(sample_root / "ideas" / "sub" / "second.md", "Second Inner")
    after = fresh.snapshot()
    assert title_of(after, "ideas/sub/inner") == "Inner Edit"
    assert title_of(after, "ideas/sub/second") == "Second Inner"
    assert after.find_page("concepts/sub/inner") is None


def test_moved_out_directory_is_forgotten(make_freshness: FreshnessFactory, sample_root: Path,
                                          tmp_path: Path) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    os.rename(sample_root / "runbooks", tmp_path / "elsewhere")
    gone = fresh.snapshot()
    assert gone.page_count == 10
    write_page(tmp_path / "elsewhere" / "outside.md", "Outside")  # no longer under the root
    assert fresh.snapshot() is gone


def test_page_replaced_by_outside_symlink(make_freshness: FreshnessFactory, sample_root: Path,
                                          tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    write_page(secret, "OUTSIDESECRET")
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    (sample_root / ROLLBACK).unlink()
    (sample_root / ROLLBACK).symlink_to(secret)
    write_page(sample_root / "sneaky.md", "placeholder")
    (sample_root / "sneaky.md").unlink()
    (sample_root / "sneaky.md").symlink_to(secret)
    after = fresh.snapshot()
    assert after.find_page("runbooks/rollback") is None
    assert after.find_page("sneaky") is None
    assert all(p.title != "OUTSIDESECRET" for p in after.pages)
    assert {d.path for d in after.diagnostics if d.reason == "symlink_ignored"} == {
        ROLLBACK, "sneaky.md"}


def test_directory_replaced_by_outside_symlink(make_freshness: FreshnessFactory,
                                               sample_root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-dir"
    write_page(outside / "rollback.md", "OUTSIDESECRET")
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    shutil.rmtree(sample_root / "runbooks")
    (sample_root / "runbooks").symlink_to(outside, target_is_directory=True)
    after = fresh.snapshot()
    assert after.find_page("runbooks/rollback") is None
    assert after.page_count == 10
    write_page(outside / "later.md", "OUTSIDESECRET")
    assert all(p.title != "OUTSIDESECRET" for p in fresh.snapshot().pages)


def test_page_grows_over_limit_and_back(make_freshness: FreshnessFactory,
                                        sample_root: Path) -> None:
    fresh = make_freshness(sample_root, max_page_bytes=4096)
    assert fresh.snapshot().find_page("runbooks/rollback") is not None
    original = (sample_root / ROLLBACK).read_text(encoding="utf-8")
    (sample_root / ROLLBACK).write_text(original + "x" * 5000 + "\n", encoding="utf-8")
    big = fresh.snapshot()
    assert big.find_page("runbooks/rollback") is None
    assert [(d.path, d.reason, d.skipped) for d in big.diagnostics] == [
        (ROLLBACK, "too_large", True)]
    (sample_root / ROLLBACK).write_text(original, encoding="utf-8")
    back = fresh.snapshot()
    assert title_of(back, "runbooks/rollback") == "Rollback"
    assert back.diagnostics == ()


def test_logseq_config_removed_switches_back(make_freshness: FreshnessFactory,
                                             tmp_path: Path) -> None:
    root = copy_fixture("shapes/logseq-graph", tmp_path / "roots")
    fresh = make_freshness(root)
    assert fresh.snapshot().layout.adapter == "logseq"
    shutil.rmtree(root / "logseq")
    switched = fresh.snapshot()
    # no config and no journals+pages pair?  pages/ and journals/ both exist: still logseq
    assert switched.layout.adapter == "logseq"
    shutil.rmtree(root / "journals")
    generic = fresh.snapshot()
    assert generic.layout.adapter == "generic-markdown"
    assert "pages/Product" in {p.id for p in generic.pages}


def test_inotify_queue_overflow_recovers(sample_root: Path) -> None:
    fresh = Freshness(sample_root, use_inotify=True)
    try:
        fresh.snapshot()
        assert fresh.mode == "inotify"
        walks = fresh.walks
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
        a, b = sample_root / "a.md", sample_root / "b.md"
        # alternate two files so the kernel cannot coalesce the events
        for i in range(limit // 2 + 10):
            a.write_text(f"# A {i}\n", encoding="utf-8")
            b.write_text(f"# B {i}\n", encoding="utf-8")
        after = fresh.snapshot()
        assert fresh.walks > walks  # the overflow forced a full rescan
        assert title_of(after, "a") == f"A {limit // 2 + 9}"
        assert title_of(after, "b") == f"B {limit // 2 + 9}"
        assert fresh.mode == "inotify"
        edit(sample_root / ROLLBACK, "title: Rollback", "title: After Overflow")
        assert title_of(fresh.snapshot(), "runbooks/rollback") == "After Overflow"
    finally:
        fresh.close()


def test_snapshot_is_immutable(make_freshness: FreshnessFactory, sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    old = fresh.snapshot()
    old_pages = old.pages
    old_ids = [p.id for p in old.pages]
    old_signature = old.signature
    edit(sample_root / ROLLBACK, "title: Rollback", "title: New Rollback")
    (sample_root / "runbooks" / "token-rotation.md").unlink()
    write_page(sample_root / "added.md", "Added")
    new = fresh.snapshot()
    assert new is not old
    assert title_of(new, "runbooks/rollback") == "New Rollback"
    # the snapshot a request already holds is untouched
    assert old.pages is old_pages
    assert [p.id for p in old.pages] == old_ids
    assert title_of(old, "runbooks/rollback") == "Rollback"
    assert title_of(old, "runbooks/token-rotation") == "Token Rotation"
    assert old.find_page("added") is None
    assert old.page_count == 14
    assert old.signature == old_signature != new.signature


# -- refresh interval ---------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A settable monotonic clock, seen only by serve.watch.freshness."""
    now = [1000.0]
    monkeypatch.setattr(freshness_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_refresh_interval(make_freshness: FreshnessFactory, sample_root: Path,
                          clock: list[float], use_inotify: bool) -> None:
    fresh = make_freshness(sample_root, refresh_interval_seconds=10)
    first = fresh.snapshot()
    walks, projections = fresh.walks, fresh.projections
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Interval Edit")
    clock[0] = 1009.0
    assert fresh.snapshot() is first
    clock[0] = 1009.999
    assert fresh.snapshot() is first
    assert (fresh.walks, fresh.projections) == (walks, projections)
    clock[0] = 1010.0
    refreshed = fresh.snapshot()
    assert title_of(refreshed, "runbooks/rollback") == "Interval Edit"
    assert fresh.projections == projections + 1
    assert fresh.walks == walks + (0 if use_inotify else 1)
    # a new interval starts at the check
    edit(sample_root / ROLLBACK, "title: Interval Edit", "title: Forced Edit")
    clock[0] = 1015.0
    assert fresh.snapshot() is refreshed
    forced = fresh.snapshot(refresh=True)
    assert title_of(forced, "runbooks/rollback") == "Forced Edit"
    assert fresh.walks == walks + (1 if use_inotify else 2)
    clock[0] = 1019.0
    assert fresh.snapshot() is forced


def test_refresh_true_always_rescans(make_freshness: FreshnessFactory,
                                     sample_root: Path) -> None:
    fresh = make_freshness(sample_root)
    fresh.snapshot()
    walks = fresh.walks
    for _ in range(3):
        fresh.snapshot(refresh=True)
    assert fresh.walks == walks + 3


def test_negative_interval_rejected(sample_root: Path) -> None:
    with pytest.raises(ValueError, match="refresh_interval_seconds must be >= 0"):
        Freshness(sample_root, refresh_interval_seconds=-1)


# -- producer manifest ----------------------------------------------------------------------


MARKER = ".producer-manifest"


def strict_signature(root: Path) -> tuple[str, str]:
    strict = Freshness(root, use_inotify=False)
    try:
        projection = strict.snapshot()
        return projection.signature, projection.bundle_id
    finally:
        strict.close()


def test_producer_manifest_gates_rescans(make_freshness: FreshnessFactory,
                                         sample_root: Path) -> None:
    marker = sample_root / MARKER
    marker.write_bytes(b"build 1\n")
    fresh = make_freshness(sample_root, producer_manifest=MARKER)
    first = fresh.snapshot()
    assert fresh.mode == "producer-manifest"
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Produced")
    write_page(sample_root / "produced.md", "Produced Page")
    for _ in range(3):
        assert fresh.snapshot() is first
    assert title_of(first, "runbooks/rollback") == "Rollback"
    marker.write_bytes(b"build 2\n")
    produced = fresh.snapshot()
    assert title_of(produced, "runbooks/rollback") == "Produced"
    assert title_of(produced, "produced") == "Produced Page"
    # public identity is content-derived: equal to a strict scan of the same folder
    assert (produced.signature, produced.bundle_id) == strict_signature(sample_root)
    assert produced.signature != first.signature


def test_producer_marker_same_stat_rewrite_detected(make_freshness: FreshnessFactory,
                                                    sample_root: Path) -> None:
    marker = sample_root / MARKER
    marker.write_bytes(b"build 1\n")
    fresh = make_freshness(sample_root, producer_manifest=str(marker))  # absolute form
    first = fresh.snapshot()
    assert fresh.mode == "producer-manifest"
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Sneaky")
    assert fresh.snapshot() is first
    before = os.stat(marker)
    marker.write_bytes(b"build 2\n")
    os.utime(marker, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Sneaky"


def test_producer_marker_in_subdirectory(make_freshness: FreshnessFactory,
                                         sample_root: Path) -> None:
    marker = sample_root / "raw" / "producer.json"
    marker.write_text('{"run": 1}', encoding="utf-8")
    fresh = make_freshness(sample_root, producer_manifest="raw/producer.json")
    first = fresh.snapshot()
    assert fresh.mode == "producer-manifest"
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Sub Marker")
    assert fresh.snapshot() is first
    marker.write_text('{"run": 2}', encoding="utf-8")
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Sub Marker"


def assert_strict(fresh: Freshness, root: Path, use_inotify: bool, title: str) -> None:
    fresh.snapshot()
    assert fresh.mode == expected_mode(use_inotify)
    edit(root / ROLLBACK, "title: Rollback", f"title: {title}")
    assert title_of(fresh.snapshot(), "runbooks/rollback") == title


def test_missing_marker_is_strict_until_it_appears(make_freshness: FreshnessFactory,
                                                   sample_root: Path, use_inotify: bool) -> None:
    fresh = make_freshness(sample_root, producer_manifest=MARKER)
    assert_strict(fresh, sample_root, use_inotify, "Strict One")
    (sample_root / MARKER).write_bytes(b"now valid")
    gated = fresh.snapshot()
    assert fresh.mode == "producer-manifest"
    assert title_of(gated, "runbooks/rollback") == "Strict One"
    edit(sample_root / ROLLBACK, "title: Strict One", "title: Gated")
    assert fresh.snapshot() is gated
    (sample_root / MARKER).unlink()  # marker gone: strict again
    assert title_of(fresh.snapshot(), "runbooks/rollback") == "Gated"
    assert fresh.mode == expected_mode(use_inotify)


def test_outside_root_marker_is_strict(make_freshness: FreshnessFactory, sample_root: Path,
                                       tmp_path: Path, use_inotify: bool) -> None:
    outside = tmp_path / "outside-marker"
    outside.write_bytes(b"outside")
    fresh = make_freshness(sample_root, producer_manifest=str(outside))
    assert_strict(fresh, sample_root, use_inotify, "Outside Abs")


def test_relative_escape_marker_is_strict(make_freshness: FreshnessFactory, sample_root: Path,
                                          use_inotify: bool) -> None:
    (sample_root.parent / "escaped-marker").write_bytes(b"outside")
    fresh = make_freshness(sample_root, producer_manifest="../escaped-marker")
    assert_strict(fresh, sample_root, use_inotify, "Outside Rel")


def test_symlinked_marker_is_strict(make_freshness: FreshnessFactory, sample_root: Path,
                                    use_inotify: bool) -> None:
    (sample_root / "real-marker").write_bytes(b"real")
    (sample_root / MARKER).symlink_to(sample_root / "real-marker")
    fresh = make_freshness(sample_root, producer_manifest=MARKER)
    assert_strict(fresh, sample_root, use_inotify, "Symlinked")


def test_directory_marker_is_strict(make_freshness: FreshnessFactory, sample_root: Path,
                                    use_inotify: bool) -> None:
    (sample_root / "marker-dir").mkdir()
    fresh = make_freshness(sample_root, producer_manifest="marker-dir")
    assert_strict(fresh, sample_root, use_inotify, "Dir Marker")


# -- per-request cost ----------------------------------------------------------------------


def test_unchanged_inotify_snapshots_do_no_walks(sample_root: Path) -> None:
    fresh = Freshness(sample_root, use_inotify=True)
    try:
        first = fresh.snapshot()
        assert fresh.mode == "inotify"
        walks, projections = fresh.walks, fresh.projections
        for _ in range(1000):
            assert fresh.snapshot() is first
        assert fresh.walks == walks
        assert fresh.projections == projections
    finally:
        fresh.close()


def test_unchanged_scan_snapshots_walk_but_do_not_project(sample_root: Path) -> None:
    fresh = Freshness(sample_root, use_inotify=False)
    try:
        first = fresh.snapshot()
        walks, projections = fresh.walks, fresh.projections
        for _ in range(50):
            assert fresh.snapshot() is first
        assert fresh.walks == walks + 50
        assert fresh.projections == projections
    finally:
        fresh.close()


def test_edit_reparses_only_the_changed_file(sample_root: Path) -> None:
    fresh = Freshness(sample_root, use_inotify=True)
    try:
        fresh.snapshot()
        parsed = fresh.mirror.parsed_count
        edit(sample_root / ROLLBACK, "title: Rollback", "title: One File")
        fresh.snapshot()
        assert fresh.mirror.parsed_count == parsed + 1
    finally:
        fresh.close()


# -- through the HTTP app ---------------------------------------------------------------------


async def read_title(client: Client, page_id: str) -> Any:
    response = await client.get(f"/read/{page_id}")
    body = await response.json()
    return response.status, body.get("title", body)


@pytest.fixture
async def live(serve_client: ClientFactory, sample_root: Path, use_inotify: bool) -> Client:
    client = await serve_client(sample_root, inotify=use_inotify)
    health = await (await client.get("/health")).json()
    assert health["diagnostics"]["freshness"] == expected_mode(use_inotify)
    return client


async def test_http_edit_add_delete(live: Client, sample_root: Path) -> None:
    assert await read_title(live, "runbooks/rollback") == (200, "Rollback")
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Live Edit")
    assert await read_title(live, "runbooks/rollback") == (200, "Live Edit")
    write_page(sample_root / "live-added.md", "Live Added")
    assert await read_title(live, "live-added") == (200, "Live Added")
    (sample_root / "live-added.md").unlink()
    assert await read_title(live, "live-added") == (404, {"detail": "page not found"})
    rewrite_keeping_stat(sample_root / ROLLBACK, "title: Live Edit", "title: Live Edid")
    assert await read_title(live, "runbooks/rollback") == (200, "Live Edid")


async def test_http_new_and_removed_directory(live: Client, sample_root: Path) -> None:
    write_page(sample_root / "guides" / "nested" / "how-to.md", "How To")
    assert await read_title(live, "guides/nested/how-to") == (200, "How To")
    shutil.rmtree(sample_root / "guides")
    assert (await read_title(live, "guides/nested/how-to"))[0] == 404


async def test_http_visibility_flip(live: Client, sample_root: Path) -> None:
    withheld = await (await live.get("/read/vendor-contacts")).json()
    assert withheld == {"found": False, "reason": "not approved for serving"}
    edit(sample_root / "vendor-contacts.md", "status: private", "status: published")
    assert await read_title(live, "vendor-contacts") == (200, "Vendor Contacts")
    manifest = await (await live.get("/manifest")).json()
    assert manifest["approved_page_count"] == 13


async def test_http_graph_sidecar_changes(live: Client, sample_root: Path) -> None:
    query = "/graph/neighborhood?seed=release-checklist&direction=in&relation=supports"
    before = await (await live.get(query)).json()
    assert [(e["source"], e["target"]) for e in before["edges"]] == [
        ("page:concepts/artifact-signing", "page:release-checklist")]
    (sample_root / "graph" / "graph.json").write_text(json.dumps({"edges": [
        {"from": "hot", "to": "release-checklist", "type": "supports", "confidence": 0.3}]}),
        encoding="utf-8")
    changed = await (await live.get(query)).json()
    assert [(e["source"], e["target"]) for e in changed["edges"]] == [
        ("page:hot", "page:release-checklist")]
    (sample_root / "graph" / "graph.json").unlink()
    assert (await (await live.get(query)).json())["edges"] == []


async def test_http_marker_switch(live: Client, sample_root: Path) -> None:
    (sample_root / ".obsidian").mkdir()
    health = await (await live.get("/health")).json()
    assert health["source"]["adapter"] == "obsidian"


async def test_http_root_removed_and_recreated(live: Client, sample_root: Path) -> None:
    shutil.rmtree(sample_root)
    gone = await live.get("/health")
    assert gone.status == 404
    assert (await gone.json())["error"]["code"] == "wiki_root_missing"
    shutil.copytree(FIXTURES / "sample-wiki", sample_root)
    back = await live.get("/health")
    assert back.status == 200
    edit(sample_root / ROLLBACK, "title: Rollback", "title: After Recreate")
    assert await read_title(live, "runbooks/rollback") == (200, "After Recreate")


async def test_http_wiki_replaced_wholesale(serve_client: ClientFactory, tmp_path: Path,
                                            use_inotify: bool) -> None:
    root = copy_fixture("shapes/native-wiki-root", tmp_path / "roots")
    client = await serve_client(root, inotify=use_inotify)
    assert (await (await client.get("/manifest")).json())["title"] == "Native Wiki Fixture"
    staged = build_replacement_wiki(tmp_path / "staging")
    shutil.rmtree(root / "wiki")
    os.rename(staged, root / "wiki")
    manifest = await (await client.get("/manifest")).json()
    assert manifest["title"] == "Rebuilt Wiki"
    assert manifest["page_count"] == 2
    assert (await read_title(client, "CRITICAL_FACTS"))[0] == 404
    assert await read_title(client, "concepts/fresh") == (200, "Fresh Concept")


async def test_http_ignored_changes_do_not_reproject(live: Client,
                                                     sample_root: Path) -> None:
    fresh = live.app[SOURCE_KEY].freshness
    before = await (await live.get("/health")).json()
    projections = fresh.projections
    for rel in ("node_modules/x/readme.md", ".git/info.md", "dist/site.md"):
        write_page(sample_root / rel, "Ignored")
    after = await (await live.get("/health")).json()
    assert fresh.projections == projections
    assert after["source"]["bundle_id"] == before["source"]["bundle_id"]
    assert after["source"]["page_count"] == 14


async def test_http_directory_swapped_for_outside_symlink(
        live: Client, sample_root: Path, tmp_path: Path) -> None:
    # a queued event for runbooks/rollback.md must not be re-read through the new symlink
    outside = tmp_path / "outside-dir"
    write_page(outside / "rollback.md", "OUTSIDESECRET", "Lives outside the root.")
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Edited Before Swap")
    os.rename(sample_root / "runbooks", tmp_path / "old-runbooks")
    (sample_root / "runbooks").symlink_to(outside, target_is_directory=True)
    response = await live.get("/read/runbooks/rollback")
    assert response.status == 404
    assert "OUTSIDESECRET" not in await response.text()
    graph = await (await live.get("/graph?limit=2000")).text()
    assert "OUTSIDESECRET" not in graph


async def test_http_producer_manifest(serve_client: ClientFactory, sample_root: Path,
                                      use_inotify: bool) -> None:
    marker = sample_root / MARKER
    marker.write_bytes(b"run 1")
    client = await serve_client(sample_root, inotify=use_inotify, producer_manifest=MARKER)
    health = await (await client.get("/health")).json()
    assert health["diagnostics"]["freshness"] == "producer-manifest"
    edit(sample_root / ROLLBACK, "title: Rollback", "title: Published Later")
    assert await read_title(client, "runbooks/rollback") == (200, "Rollback")
    marker.write_bytes(b"run 2")
    assert await read_title(client, "runbooks/rollback") == (200, "Published Later")
    after = await (await client.get("/health")).json()
    assert after["source"]["projection"]["signature"] == strict_signature(sample_root)[0]


# -- inotify resources and fallbacks ------------------------------------------------------------


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_rebuilds_do_not_leak_inotify_instances(sample_root: Path) -> None:
    fresh = Freshness(sample_root, use_inotify=True)
    try:
        fresh.snapshot()
        before = open_fds()
        for _ in range(200):  # more than the default per-user instance limit (128)
            fresh.snapshot(refresh=True)
        for _ in range(5):
            shutil.rmtree(sample_root)
            with pytest.raises(WikiRootError):
                fresh.snapshot()
            shutil.copytree(FIXTURES / "sample-wiki", sample_root)
            fresh.snapshot()
        assert open_fds() == before
        assert fresh.mode == "inotify"
    finally:
        fresh.close()
    assert open_fds() == before - 1


def test_watch_limit_falls_back_to_scan(sample_root: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from serve.watch import inotify

    def refuse(self: inotify.Inotify, path: str, mask: int = 0) -> int:
        raise OSError(errno.ENOSPC, "inotify watch limit reached", path)

    monkeypatch.setattr(inotify.Inotify, "add_watch", refuse)
    fresh = Freshness(sample_root, use_inotify=True)
    try:
        assert fresh.snapshot().page_count == 14
        assert fresh.mode == "scan"
        edit(sample_root / ROLLBACK, "title: Rollback", "title: Scanned")
        assert title_of(fresh.snapshot(), "runbooks/rollback") == "Scanned"
    finally:
        fresh.close()


def test_inotify_init_failure_falls_back_to_scan(sample_root: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from serve.watch import inotify

    def refuse(self: inotify.Inotify) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(inotify.Inotify, "__init__", refuse)
    fresh = Freshness(sample_root, use_inotify=True)
    try:
        fresh.snapshot()
        assert fresh.mode == "scan"
        write_page(sample_root / "fallback.md", "Fallback Page")
        assert title_of(fresh.snapshot(), "fallback") == "Fallback Page"
    finally:
        fresh.close()


def test_a_page_made_between_the_walk_and_its_watch_is_seen(make_freshness: FreshnessFactory,
                                                            sample_root: Path) -> None:
    """The first scan walks, then watches what it walked: a file created in that gap sends no
    event, so the scan must notice it some other way (here: its directory's mtime)."""
    fresh = make_freshness(sample_root)
    walk = fresh.mirror.full_scan
    made: list[Path] = []

    def walk_then_write() -> None:
        walk()
        if not made:  # only during the first scan
            page = sample_root / "runbooks" / "late-page.md"
            page.write_text("# Late Page\nWritten while the watches were being set up.\n",
                            encoding="utf-8")
            made.append(page)

    fresh.mirror.full_scan = walk_then_write  # type: ignore[method-assign]
    fresh.snapshot()
    assert made
    # It appeared during that request; the next one must see it.
    assert "runbooks/late-page.md" in {p.path for p in fresh.snapshot().pages}


def _bytes_name(parent: Path, name: bytes) -> Path:
    """A path whose last part is `name`, bytes that need not be UTF-8."""
    return Path(os.fsdecode(os.path.join(os.fsencode(parent), name)))


async def test_names_that_are_not_utf8_are_skipped_and_reported(serve_client: ClientFactory,
                                                                sample_root: Path, use_inotify: bool) -> None:
    """A page or directory named in other bytes (Latin-1 here) cannot appear in any answer,
    log or signature: it is skipped with a diagnostic and everything else is served, at start
    and when one appears later."""
    write_page(_bytes_name(sample_root, b"caf\xe9.md"), "Latin1 Named")
    write_page(_bytes_name(sample_root, b"r\xe9sum\xe9s") / "inside.md", "Inside Latin1 Dir")
    client = await serve_client(sample_root, inotify=use_inotify)
    source = client.app[SOURCE_KEY]
    shown = {d.path for d in source.snapshot().diagnostics if d.reason == "name_not_utf8"}
    assert shown == {"caf\\xe9.md", "r\\xe9sum\\xe9s"}
    health = await client.get("/health")
    assert health.status == 200
    pack = await client.post("/query", json={"query": "Latin1 rollback"})
    assert pack.status == 200
    titles = [item["title"] for item in (await pack.json())["evidence"]]
    assert titles and "Latin1 Named" not in titles and "Inside Latin1 Dir" not in titles
    write_page(_bytes_name(sample_root, b"late\xff.md"), "Late Latin1")
    write_page(sample_root / "late-good.md", "Late Good")
    assert await read_title(client, "late-good") == (200, "Late Good")
    shown = {d.path for d in source.snapshot().diagnostics if d.reason == "name_not_utf8"}
    assert "late\\xff.md" in shown
    assert (await client.post("/search", json={"query": "Late"})).status == 200


def test_a_page_reopened_for_writing_while_it_is_read_keeps_its_whole_version(sample_root: Path) -> None:
    """The race behind torn reads: the events of a whole write (modified, closed) are read, then
    the writer reopens the file, truncates it, writes half and is preempted before the file is
    read. The half file's size and times stay put while it is read, so only the truncation's
    event, queued by then, can tell: the page keeps its last whole version until the writer
    closes the file, and the next check after that reads the new one."""
    fresh = Freshness(sample_root, use_inotify=True)
    page = sample_root / "big.md"
    old, new = "# Big\n\n" + "alpha line\n" * 2000, "# Big\n\n" + "omega line\n" * 2000
    try:
        page.write_text(old, encoding="utf-8")
        fresh.snapshot(refresh=True)
        assert fresh.watcher is not None, "inotify is needed for this case"
        page.write_text(new, encoding="utf-8")  # a whole write: modified, then closed
        watcher, real_read = fresh.watcher, fresh.watcher.read_events
        writer: list[Any] = []

        def events_then_reopened() -> list[Any]:
            events = real_read()
            if not writer:  # the writer's next turn starts right after the events were read
                handle = open(page, "wb")  # noqa: SIM115 - held open: the writer is preempted
                handle.write(old.encode()[: len(old) // 2])
                handle.flush()
                writer.append(handle)
            return events

        watcher.read_events = events_then_reopened  # type: ignore[method-assign]
        during = fresh.snapshot().find_page("big")
        assert during is not None
        assert during.text in (old.strip(), new.strip()), "a half-written page was served"
        writer[0].write(old.encode()[len(old) // 2:])
        writer[0].close()
        after = fresh.snapshot().find_page("big")
        assert after is not None and after.text == old.strip()
    finally:
        for handle in writer:
            handle.close()
        fresh.close()
