"""The size budget of a context pack's graph (serve/evidence.budget_seeds): within the budget,
the evidence pages first, links between them before anything else, links (backlinks too)
before tags and headings, and `omitted` counting exactly what the budget left out of the
neighbourhood; on every fixture shape and on a folder of edge cases."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from serve.graph.budget import EMPTY_GRAPH_BYTES, GRAPH_BYTES
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from tests.serve.test_evidence_graph import FOLDERS, _projection, edge_case_folder, seed_sets
from tests.support import judged as J
from tests.support import real_folders as R

BUDGETS = (EMPTY_GRAPH_BYTES, 600, 2500, 8000, 10**9)


def key(edge: dict[str, object]) -> tuple[object, object, object]:
    return (edge["source"], edge["target"], edge["relation"])


@pytest.mark.parametrize("include_drafts", [False, True], ids=["approved", "drafts"])
def test_budgeted_graphs_are_cut_neighbourhoods(tmp_path: Path, include_drafts: bool) -> None:
    for root in [*FOLDERS, edge_case_folder(tmp_path / "edge-cases")]:
        p = _projection(root)
        for seeds in seed_sets(p):
            whole = json.loads(p.evidence_graph_json(seeds, include_drafts, 2000))
            whole_nodes = {n["id"]: n for n in whole["nodes"]}
            whole_edges = {key(e) for e in whole["edges"]}
            own = [f"page:{page.id}" for page in seeds]
            for chars in BUDGETS:
                text = p.evidence_graph_json(seeds, include_drafts, 2000, size=chars)
                graph = json.loads(text)
                body = json.dumps({"nodes": graph["nodes"], "edges": graph["edges"]},
                                  separators=(",", ":"), ensure_ascii=False)
                assert len(body.encode()) <= max(chars, EMPTY_GRAPH_BYTES), (root.name, chars)
                ids = [n["id"] for n in graph["nodes"]]
                assert all(n == whole_nodes[n["id"]] for n in graph["nodes"])
                kept = {key(e) for e in graph["edges"]}
                assert kept <= whole_edges and all(s in ids and t in ids for s, t, _ in kept)
                assert ids[: len([i for i in dict.fromkeys(own) if i in ids])] == [
                    i for i in dict.fromkeys(own) if i in ids]  # evidence pages lead
                omitted = {"nodes": len(whole_nodes) - len(ids), "edges": len(whole_edges) - len(kept)}
                if omitted == {"nodes": 0, "edges": 0}:
                    assert list(graph) == ["nodes", "edges"]
                else:
                    assert graph["truncated"] is True and graph["omitted"] == omitted
                if chars == 10**9:
                    assert set(ids) == set(whole_nodes) and kept == whole_edges


def test_headings_go_before_links_and_backlinks() -> None:
    root = FOLDERS[0]  # the sample wiki
    p = _projection(root)
    hub = next(page for page in p.pages if page.id == "release-checklist")
    whole = json.loads(p.evidence_graph_json([hub], False, 2000))
    relations = {e["relation"] for e in whole["edges"]}
    assert {"contains", "links_to"} <= relations
    links = [e for e in whole["edges"] if e["relation"] == "links_to"]
    assert any(e["target"] == f"page:{hub.id}" for e in links)  # it has backlinks
    # A budget that holds the links but not everything.
    graph = json.loads(p.evidence_graph_json([hub], False, 2000, size=len(json.dumps(whole)) // 2))
    assert graph["truncated"] is True
    kept = {key(e) for e in graph["edges"]}
    kept_links = {key(e) for e in links} & kept
    headings = [e for e in graph["edges"] if e["relation"] == "contains"]
    if len(kept_links) < len(links):
        assert not headings  # no heading while a link was left out
    assert any(t == f"page:{hub.id}" for _, t, _ in kept_links)  # a backlink is kept


# -- whole packs ------------------------------------------------------------------------------

PACK_TARGET = 16 * 1024  # median /query pack at the default limit (issue 16)
# Issue 16: react-ko's Korean text is three bytes a character in UTF-8 and few of its passages
# lie in their snippets, so even compact items (docs/evidence.md) leave its median pack over
# the target (about 19.6 KB); obsidian-tasks is about 165 bytes over once items carry their
# section's anchor (docs/context-packs.md "Sizes").
OVER_TARGET = pytest.mark.xfail(strict=True, reason="issue 16: react-ko's median pack is about 19.6 KB "
                                "(Korean text, passages outside the snippets), obsidian-tasks' "
                                "16.2 KB with the section anchors")
OVER_IN = {"react-ko", "obsidian-tasks"}


def pack_sizes(root: Path, questions: list[str]) -> list[int]:
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False, inotify=False,
                                           refresh_interval_seconds=3600.0))
    try:
        sizes = []
        for question in questions:
            body = source.context_json(source.request(query=question))
            pack = json.loads(body)
            graph = json.dumps({"nodes": pack["graph"]["nodes"], "edges": pack["graph"]["edges"]},
                               separators=(",", ":"), ensure_ascii=False).encode()
            assert len(graph) <= GRAPH_BYTES
            sizes.append(len(body))
        return sizes
    finally:
        source.close()


def test_median_pack_of_the_sample_wiki_fits_the_target() -> None:
    questions = [j.query for j in J.load_judged(J.FIXTURES_SET) if j.folder == "sample-wiki"]
    assert len(questions) >= 30
    assert statistics.median(pack_sizes(J.FIXTURES / "sample-wiki", questions)) <= PACK_TARGET


@pytest.mark.parametrize("name", [pytest.param(n, marks=OVER_TARGET) if n in OVER_IN else n
                                  for n in R.NAMES])
def test_median_pack_of_the_real_folders_fits_the_target(name: str) -> None:
    real = R.extract()
    if real is None:
        pytest.skip(f"real folders not found: {R.TARBALL} (or ${R.ENV}); not in CI")
    questions = [j.query for j in R.load() if R.name_of(j.folder) == name]
    assert statistics.median(pack_sizes(real / name, questions)) <= PACK_TARGET, name
