"""Added, deleted, renamed and retitled pages derive the next snapshot page by page (the link
index, serve/graph/links.py); after every step of seeded random churn it must show exactly
what a snapshot built anew from the same files shows: graph nodes and edges node by node,
link resolution, backlinks, evidence graphs, counts and search results."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from serve.graph.evidence import incoming_links
from serve.graph.links import LinkIndex
from serve.graph.model import build_graph, graph_counts
from serve.graph.views import GraphView, approved_view
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.snapshot.projection import Projection
from serve.watch.freshness import Freshness
from serve.watch.mirror import FolderMirror

NAMES = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "zeta", "lambda"]
WORDS = ["rollback", "token", "release", "signing", "cache", "incident", "deploy", "index"]
STEPS = 30


def _page(rng: random.Random, name: str, title: str) -> str:
    """A page linking by title, alias, path and file name, to pages that may not exist."""
    links = []
    for _ in range(rng.randint(1, 4)):
        other = rng.choice(NAMES)
        links.append(rng.choice([f"[[{other}]]", f"[[{other.title()} Page]]", f"[[{other}-alias]]",
                                 f"[[notes/{other}]]", f"[{other}](notes/{other}.md)"]))
    lines = ["---", f"title: {title}", f"aliases: [{name}-alias]",
             f"tags: [{rng.choice(WORDS)}, {rng.choice(WORDS)}]"]
    if rng.random() < 0.2:
        lines.append("draft: true")
    lines += ["---", f"# {title}", "", f"About {rng.choice(WORDS)} and {rng.choice(WORDS)}.",
              " ".join(links), "", f"## {rng.choice(WORDS).title()}", "", f"#{rng.choice(WORDS)}", ""]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _folder(root: Path, rng: random.Random) -> None:
    _write(root / "index.md",
           "---\ntitle: Churn Wiki\n---\n# Churn Wiki\n\nSee [[alpha]] and [[Gamma Page]].\n")
    for name in NAMES[:6]:
        _write(root / "notes" / f"{name}.md", _page(rng, name, f"{name.title()} Page"))
    _write(root / "graph" / "graph.json", json.dumps({"edges": _facts(rng)}))


def _facts(rng: random.Random) -> list[dict[str, str]]:
    """Typed edges between pages (by name, alias or title), pages not written yet and an
    external id."""
    ends = NAMES + [f"{name}-alias" for name in NAMES] + ["Gamma Page", "GH-7", "nowhere"]
    return [{"source": rng.choice(ends), "target": rng.choice(ends),
             "type": rng.choice(["supports", "contradicts", "related"])}
            for _ in range(rng.randint(1, 8))]


def _step(root: Path, rng: random.Random, turn: int) -> str:
    notes = sorted((root / "notes").rglob("*.md"))
    kind = rng.choice(["add", "add", "delete", "edit", "rename", "title", "folder", "unfolder",
                       "facts"])
    if kind == "add" or not notes:
        name = rng.choice(NAMES)
        _write(root / "notes" / f"{name}.md", _page(rng, name, f"{name.title()} Page"))
    elif kind == "delete":
        rng.choice(notes).unlink()
    elif kind == "edit":
        target = rng.choice(notes)
        _write(target, _page(rng, target.stem, f"{target.stem.title()} Page"))
    elif kind == "rename":
        target = rng.choice(notes)
        os.replace(target, target.with_name(f"{rng.choice(NAMES)}.md"))
    elif kind == "title":
        target = rng.choice(notes)
        text = target.read_text(encoding="utf-8")
        _write(target, text.replace("title: ", f"title: {rng.choice(NAMES).title()} ", 1))
    elif kind == "facts":  # the sidecar rewritten, at times broken or gone
        sidecar = root / "graph" / "graph.json"
        roll = rng.random()
        if roll < 0.15:
            sidecar.unlink(missing_ok=True)
        elif roll < 0.3:
            _write(sidecar, '{"edges": [')
        else:
            _write(sidecar, json.dumps({"edges": _facts(rng)}))
    elif kind == "folder":
        name = rng.choice(NAMES)
        _write(root / "notes" / f"dir-{turn}" / f"{name}.md", _page(rng, name, f"{name.title()} Inner"))
    else:
        folders = [d for d in (root / "notes").iterdir() if d.is_dir()]
        if folders:
            folder = rng.choice(folders)
            for file in folder.iterdir():
                file.unlink()
            folder.rmdir()
    return kind


def _built(root: Path) -> Projection:
    mirror = FolderMirror(root, source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


def _reference_views(p: Projection) -> dict[bool, GraphView]:
    """The graph as the eager functions build it (the contract's construction)."""
    nodes, edges = build_graph(p.pages, p.fragments, p.layout.adapter, p.sidecars, p.lookup)
    return {True: GraphView(nodes, edges, p.base_meta),
            False: approved_view(nodes, edges, p.pages, p.base_meta)}


def _graph(view: GraphView, ids: list[str]) -> dict[str, Any]:
    return {nid: (view.by_id.get(nid), view.outgoing(nid), view.incoming(nid)) for nid in ids}


def _compare(derived: Projection, built: Projection) -> None:
    assert [p.payload() for p in derived.pages] == [p.payload() for p in built.pages]
    assert (derived.signature, derived.title, derived.bundle_id) == (built.signature, built.title,
                                                                     built.bundle_id)
    assert [d.path for d in derived.diagnostics] == [d.path for d in built.diagnostics]
    assert {k: p.path for k, p in derived.lookup.items()} == {k: p.path for k, p in built.lookup.items()}
    reference = _reference_views(built)
    gone_ids = ["page:notes/nowhere", "placeholder:nowhere"]
    for drafts in (True, False):
        ids = [n.id for n in reference[drafts].nodes] + gone_ids
        assert _graph(derived.graph(drafts), ids) == _graph(reference[drafts], ids), drafts
        for limit in (0, 1, 3, len(derived.approved_pages), len(derived.pages), 500):
            assert derived.graph(drafts).truncated(limit) == reference[drafts].truncated(limit), limit
    assert derived.graph_counts == graph_counts(built.pages, built.fragments, built.layout.adapter,
                                                built.sidecars, built.lookup)
    backlinks = incoming_links(built.pages, built.fragments, built.lookup)
    links = derived.links
    for page in derived.pages:
        assert list(links.refs.get(f"page:{page.id}", ())) == [
            built.pages[i].path for i in backlinks.get(page.path, [])]
    for drafts in (True, False):  # owners, backlinks and facts as context packs show them
        for page in derived.pages:
            assert derived.evidence_graph_json([page], drafts, 200) == built.evidence_graph_json(
                [page], drafts, 200), (page.path, drafts)


def _search(source: KnowledgeSource) -> list[Any]:
    found = []
    for word in WORDS[:4]:
        response = source.search(source.request(query=word, limit=20, include_drafts=True))
        found.append([(r["page_id"], r["title"], round(r["score"], 4)) for r in response.results])
    return found


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_churned_snapshots_equal_a_fresh_build(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = (tmp_path / "wiki").resolve()
    _folder(root, rng)
    freshness = Freshness(root, use_inotify=True)
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    try:
        assert freshness.snapshot().links.segment_edges > 0  # a link index to derive from
        kinds = []
        for turn in range(STEPS):
            before = freshness.snapshot()
            for page in before.pages:  # fill the caches the next snapshot starts from (page JSON)
                before.evidence_graph_json([page], True, 200)
                before.evidence_graph_json([page], False, 200)
            derived = freshness.mirror.derived_count
            kinds.append(_step(root, rng, turn))
            after = freshness.snapshot()
            if kinds[-1] == "facts":  # the pages stay: the sidecar's facts are swapped in
                assert freshness.mirror.derived_count == derived + 1, kinds
            _compare(after, _built(root))
            fresh = KnowledgeSource(ServeSettings(root=root, page_cache=False))
            try:
                assert _search(source) == _search(fresh), kinds
            finally:
                fresh.close()
        # The steps were derived, not built anew (a title change of the index page and a
        # folder's removal aside).
        assert freshness.mirror.derived_count >= STEPS - 2 - kinds.count("unfolder"), kinds
        assert {"add", "delete", "rename", "facts"} <= set(kinds)
    finally:
        freshness.close()
        source.close()


def test_the_first_change_after_a_start_builds_the_link_index_once_then_each_derives_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A started service holds plain link views (from the restart cache or the warm-up), no
    link index: the first added or deleted page builds the parent's once, and every later
    snapshot derives its own, so no change makes a request count backlinks, owners or graph
    sizes over every page again."""
    rng = random.Random(5)
    root = (tmp_path / "wiki").resolve()
    _folder(root, rng)
    builds: list[int] = []
    build = LinkIndex.build.__func__  # type: ignore[attr-defined]

    def counted(cls: type[LinkIndex], pages: Any, *args: Any, **kwargs: Any) -> LinkIndex:
        builds.append(len(pages))
        return build(cls, pages, *args, **kwargs)

    monkeypatch.setattr(LinkIndex, "build", classmethod(counted))
    freshness = Freshness(root, use_inotify=True)
    try:
        start = freshness.snapshot()
        len(start.incoming), start.owners(False), start.graph_counts  # as the warm-up leaves it
        assert start.caches.links is None and not builds
        added = root / "notes" / "newcomer.md"
        steps = [lambda: _write(added, _page(rng, "newcomer", "Newcomer Page")),
                 lambda: _write(root / "notes" / "second.md", _page(rng, "second", "Second Page")),
                 added.unlink]
        for turn, change in enumerate(steps, 1):
            change()
            after = freshness.snapshot()
            assert after.caches.links is not None  # derived with the snapshot, not left to requests
            assert builds == [len(start.pages)], turn  # the start's, at the first change only
            assert freshness.mirror.derived_count == turn
            _compare(after, _built(root))
    finally:
        freshness.close()


def test_a_change_to_most_pages_builds_the_link_index_anew_and_equals_a_fresh_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout or a recompiled wiki changes most pages at once: deriving the link index page
    by page would cost more than building it, so it is built from the new pages; the snapshot
    is still derived (no new parse of the unchanged pages) and shows what a fresh build shows."""
    rng = random.Random(17)
    root = (tmp_path / "wiki").resolve()
    _folder(root, rng)
    freshness = Freshness(root, use_inotify=True)
    try:
        start = freshness.snapshot()
        start.links  # noqa: B018 - a link index it could derive from
        derived_from: list[int] = []
        built: list[int] = []
        derived, build = LinkIndex.derived, LinkIndex.build.__func__  # type: ignore[attr-defined]

        def counted(self: LinkIndex, removed: Any, *args: Any, **kwargs: Any) -> Any:
            derived_from.append(len(removed))
            return derived(self, removed, *args, **kwargs)

        def counted_build(cls: type[LinkIndex], pages: Any, *args: Any, **kwargs: Any) -> LinkIndex:
            built.append(len(pages))
            return build(cls, pages, *args, **kwargs)

        monkeypatch.setattr(LinkIndex, "derived", counted)
        monkeypatch.setattr(LinkIndex, "build", classmethod(counted_build))
        notes = sorted((root / "notes").glob("*.md"))
        for target in notes[:-1]:  # all but one page of the folder rewritten
            _write(target, _page(rng, target.stem, f"{target.stem.title()} Page"))
        after = freshness.snapshot()
        assert freshness.mirror.derived_count == 1 and not derived_from
        assert after.caches.links is not None and built == [len(after.pages)]
        _compare(after, _built(root))
        _write(notes[-1], _page(rng, notes[-1].stem, "Last One"))  # one page: derived again
        again = freshness.snapshot()
        assert derived_from == [1] and freshness.mirror.derived_count == 2
        _compare(again, _built(root))
    finally:
        freshness.close()
