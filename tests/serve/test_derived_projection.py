"""Content-only edits derive the next snapshot; it must equal a snapshot built anew."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from serve.graph.model import lookup_key
from serve.reads.target import find_read_target
from serve.snapshot.projection import Projection
from serve.watch.freshness import Freshness
from serve.watch.mirror import FolderMirror
from tests.support.folders import copy_fixture


def _built(root: Path) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


def _observable(p: Projection) -> dict[str, Any]:
    """Everything a client can see of a snapshot."""
    return {
        "identity": (p.title, p.description, p.source_id, p.bundle_id, p.signature),
        "counts": (p.page_count, p.approved_page_count, p.graph_counts),
        "pages": [page.payload() for page in p.pages],
        "approved": [page.id for page in p.approved_pages],
        "graph": json.dumps(p.graph(True).truncated(5000), sort_keys=True),
        "approved_graph": json.dumps(p.graph(False).truncated(5000), sort_keys=True),
        "refs": p.source_refs(False),
        "found": {page.id: p.find_page(page.id).payload() for page in p.pages},  # type: ignore[union-attr]
    }


@pytest.mark.parametrize("use_inotify", [True, False], ids=["inotify", "scan"])
@pytest.mark.parametrize(
    ("edit", "derived"),
    [
        (lambda t: t.replace("\n\n", "\n\nA new paragraph about rollback drills.\n\n", 1), True),
        (lambda t: t + "\nOne more closing sentence.\n", True),
        (lambda t: t + "\nSee [[overview]] and [[a-page-that-does-not-exist]].\n", False),
        (lambda t: t + "\n## A New Heading\n", False),
        (lambda t: t.replace("---\n", "---\nstatus: private\n", 1), False),
    ],
    ids=["paragraph", "append", "links", "heading", "visibility"],
)
def test_snapshot_after_an_edit_equals_a_fresh_build(tmp_path: Path, edit: Any, derived: bool,
                                                    use_inotify: bool) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve(), use_inotify=use_inotify)
    try:
        before = freshness.snapshot()
        assert before.graph_counts[0] > 0  # counted before the edit, as /health would
        target = root / "runbooks" / "rollback.md"
        target.write_text(edit(target.read_text(encoding="utf-8")), encoding="utf-8")
        after = freshness.snapshot()
        assert after is not before
        assert _observable(after) == _observable(_built(root))
        # Derived either way: content-only edits share the graph, others derive page by page.
        assert freshness.mirror.derived_count == 1
        assert (after.caches.graph_counts == before.caches.graph_counts) or not derived
        # The earlier snapshot is untouched (immutability).
        assert "rollback drills" not in before.find_page("runbooks/rollback").text  # type: ignore[union-attr]
    finally:
        freshness.close()


def test_a_derived_snapshot_names_the_pages_replaced_since_an_ancestor(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve(), use_inotify=True)
    try:
        first = freshness.snapshot()
        edits = ["runbooks/rollback.md", "runbooks/incident-comms.md"]
        snapshots = [first]
        for rel in edits:
            target = root / rel
            target.write_text(target.read_text(encoding="utf-8") + "\nOne more sentence.\n",
                              encoding="utf-8")
            snapshots.append(freshness.snapshot())
        second, third = snapshots[1], snapshots[2]
        assert third.changed_since(third) == set()
        assert third.changed_since(second) == {"runbooks/incident-comms.md"}
        assert third.changed_since(first) == set(edits)
        for snapshot in snapshots:  # the approved pages are the very page objects, in order
            assert [id(p) for p in snapshot.approved_pages] == [
                id(p) for p in snapshot.pages if p.approved]
        assert first.changed_since(third) is None  # not derived from it
        (root / "runbooks" / "new-page.md").write_text("# New Page\nText.\n", encoding="utf-8")
        rebuilt = freshness.snapshot()
        assert rebuilt.changed_since(third) == {"runbooks/new-page.md"}  # derived page by page
    finally:
        freshness.close()


def _fields(p: Projection) -> dict[str, Any]:
    """Every field of a snapshot, and its caches' entries, by identity."""
    fields = {name: id(getattr(p, name)) for name in p.__dataclass_fields__}
    caches = {name: id(getattr(p.caches, name)) for name in p.caches.__dataclass_fields__}
    return {"fields": fields, "caches": caches, "owners": dict(p.caches.owners),
            "results": dict(p.caches.results)}


def test_a_published_snapshot_refuses_writes(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve(), use_inotify=False)
    try:
        published = freshness.snapshot()
        for name, value in (("graph_counts", (1, 1)), ("title", "Other"), ("memo", {})):
            with pytest.raises(AttributeError):
                setattr(published, name, value)
        assert not hasattr(published, "__dict__")  # no place to hang an undeclared cache
        assert published.title != "Other" and published.graph_counts != (1, 1)
    finally:
        freshness.close()


def test_known_graph_counts_go_in_when_the_snapshot_is_made(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    signature = _built(root).signature
    freshness = Freshness(root.resolve(), use_inotify=False, known_counts={signature: (7, 11)})
    try:
        assert freshness.snapshot().graph_counts == (7, 11)  # taken, not counted again
    finally:
        freshness.close()


def test_deriving_a_snapshot_leaves_its_parent_as_it_was(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve(), use_inotify=True)
    try:
        parent = freshness.snapshot()
        parent.evidence_graph_json(list(parent.pages), False, 2000)  # fill some caches first
        parent.ordered(False)
        parent.caches.results["probe"] = ["kept"]
        before = _fields(parent)
        pages_before = [page.text for page in parent.pages]
        target = root / "runbooks" / "rollback.md"
        target.write_text(target.read_text(encoding="utf-8") + "\nOne more sentence.\n",
                          encoding="utf-8")
        child = freshness.snapshot()
        assert freshness.mirror.derived_count == 1  # the derived path, not a new build
        assert child.caches is not parent.caches
        assert _fields(parent) == before
        assert [page.text for page in parent.pages] == pages_before
        # The child starts without the parent's per-snapshot results and texts.
        assert not child.caches.results and not child.caches.ordered
        child.ordered(False)
        child.owners(True)
        assert _fields(parent) == before  # filling the child's caches does not reach the parent
    finally:
        freshness.close()


def test_a_read_by_title_after_an_edit_shows_the_new_text(tmp_path: Path) -> None:
    root = copy_fixture("sample-wiki", tmp_path)
    freshness = Freshness(root.resolve(), use_inotify=True)
    try:
        before = freshness.snapshot()
        page = before.find_page("runbooks/rollback")
        assert page is not None and before.lookup[lookup_key(page.title)] is page
        target = root / "runbooks" / "rollback.md"
        target.write_text(target.read_text(encoding="utf-8") + "\nA fresh closing line.\n",
                          encoding="utf-8")
        after = freshness.snapshot()
        assert freshness.mirror.derived_count == 1
        found = find_read_target(after, page.title, False)
        assert found is after.find_page("runbooks/rollback")
        assert found is not None and "A fresh closing line." in found.text
        assert before.lookup[lookup_key(page.title)] is page  # the parent's is as it was
    finally:
        freshness.close()
