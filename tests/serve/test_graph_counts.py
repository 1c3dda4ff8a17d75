"""The /health graph counts equal the size of the graph they stand for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve.graph.model import graph_counts
from serve.watch.mirror import FolderMirror

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDERS = [FIXTURES / "sample-wiki"] + sorted(
    p for p in (FIXTURES / "shapes").iterdir() if p.is_dir() and p.name != "marker-only"
)


def _projection(root: Path):  # type: ignore[no-untyped-def]
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


@pytest.mark.parametrize("root", FOLDERS, ids=lambda p: p.name)
def test_counts_match_the_built_graph(root: Path) -> None:
    p = _projection(root)
    counted = graph_counts(p.pages, p.fragments, p.layout.adapter, p.sidecars, p.lookup)
    assert counted == (len(p.nodes), len(p.edges))


def test_sidecar_edges_merge_with_links_and_count_once(tmp_path: Path) -> None:
    root = tmp_path / "wiki"
    (root / "graph").mkdir(parents=True)
    (root / "a.md").write_text("---\nsource_refs: [SRC-1]\ntags: [x]\n---\n# A\nsee [[b]] [[gone]]\n")
    (root / "b.md").write_text("# B\n")
    edges = [
        # Sidecar endpoints resolve to pages or unresolved nodes, never to source nodes.
        {"from": "a", "to": "SRC-1", "type": "cites"},
        {"from": "a", "to": "SRC-2", "type": "cites"},
        {"from": "b", "to": "SRC-1", "type": "cites"},
        {"from": "a", "to": "b", "type": "links_to"},  # merges with the wikilink
        {"from": "a", "to": "gone", "type": "links-to"},  # merges with the unresolved link
        {"from": "b", "to": "a", "type": "Related To"},
    ]
    (root / "graph" / "graph.json").write_text(json.dumps({"edges": edges}))
    p = _projection(root)
    full = (len(p.nodes), len(p.edges))
    assert graph_counts(p.pages, p.fragments, p.layout.adapter, p.sidecars, p.lookup) == full
    assert full == (9, 10)
    ids = {n.id for n in p.nodes}
    assert {"external:SRC-1", "external:SRC-2", "source:SRC-1"} <= ids
