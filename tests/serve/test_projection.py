"""Projection: graph construction and order (contract 2.2-2.8), identity, and hostile folders."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from serve.graph.model import Edge, Node, canonical_relation, lookup_key, slug, unresolved_node
from serve.graph.views import approved_view
from serve.snapshot.projection import Projection, bundle_id_of
from serve.source.page import ParseOptions
from serve.source.parse import parse_page
from serve.watch.mirror import FolderMirror
from tests.support.folders import (
    FIXTURES,
    OUTSIDE_GRAPH_RELATION,
    OUTSIDE_SECRET_WORD,
    build_adversarial,
    copy_fixture,
    tree_digest,
)
from tests.support.signature import signature_of

MAX_PAGE_BYTES = 8 << 20


def project(root: Path, *, max_page_bytes: int = MAX_PAGE_BYTES, source_id: str | None = None) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=source_id, max_page_bytes=max_page_bytes)
    mirror.full_scan()
    return mirror.project()


def graph(projection: Projection, *, approved: bool = False) -> dict[str, list[dict[str, Any]]]:
    """The graph as rendered on the wire (full or approved-only)."""
    view = projection.approved_graph if approved else projection.full_graph
    return view.payload(view.nodes, view.edges)


def build(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def triples(rendered: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, str]]:
    return [(e["source"], e["target"], e["relation"]) for e in rendered["edges"]]


def node(rendered: dict[str, list[dict[str, Any]]], node_id: str) -> dict[str, Any]:
    matches = [n for n in rendered["nodes"] if n["id"] == node_id]
    assert len(matches) == 1, node_id
    return matches[0]


def edge(rendered: dict[str, list[dict[str, Any]]], source: str, target: str,
         relation: str) -> dict[str, Any]:
    matches = [e for e in rendered["edges"]
               if (e["source"], e["target"], e["relation"]) == (source, target, relation)]
    assert len(matches) == 1, (source, target, relation)
    return matches[0]


# -- helpers of the graph vocabulary ---------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Sample Packaging LLMWiki", "Sample-Packaging-LLMWiki"),
        ("artwork-review:Release Gate", "artwork-review-Release-Gate"),
        ("concepts/release:Release Concept", "concepts-release-Release-Concept"),
        ("https://packaging.python.org/en/latest/", "https-packaging.python.org-en-latest"),
        ("계약 관리", "계약-관리"),
        ("部署说明", "item"),
        ("!!!", "item"),
        ("  a__b..c  ", "a__b..c"),
    ],
)
def test_slug(value: str, expected: str) -> None:
    assert slug(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Product Process", "productprocess"),
        ("product-process.md", "productprocess"),
        ("Notes.MD", "notes"),
        ("page.org", "pageorg"),
        ("../computations/revenue-ytd", "computationsrevenueytd"),
        ("Project/Alpha", "projectalpha"),
        ("snake_case_name", "snakecasename"),
        ("릴리스 체크리스트", "릴리스체크리스트"),
        # Deliberate deviation: every Unicode letter and digit is kept.
        ("リリース手順メモ", "リリース手順メモ"),
        ("部署说明", "部署说明"),
        ("Café Crème", "cafécrème"),
        ("---", ""),
    ],
)
def test_lookup_key(value: str, expected: str) -> None:
    assert lookup_key(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Documents", "documents"), ("  Part Of!! ", "part_of"), ("depends-on", "depends_on"),
     ("", "related_to"), ("---", "related_to"), ("SUPPORTS", "supports")],
)
def test_canonical_relation(value: str, expected: str) -> None:
    assert canonical_relation(value) == expected


@pytest.mark.parametrize(
    ("value", "node_id", "kind"),
    [
        ("https://example.com/a b", "external:https-example.com-a-b", "external_ref"),
        ("http://x", "external:http-x", "external_ref"),
        ("GH-42", "external:GH-42", "external_issue"),
        ("ABC-12", "external:ABC-12", "external_issue"),
        ("ABC-12 follow-up", "external:ABC-12-follow-up", "external_issue"),
        ("#77", "external:77", "external_issue"),
        ("A-12", "placeholder:A-12", "placeholder"),
        ("abc-12", "placeholder:abc-12", "placeholder"),
        ("missing topic", "placeholder:missing-topic", "placeholder"),
        ("ftp://x", "placeholder:ftp-x", "placeholder"),
    ],
)
def test_unresolved_node_kinds(value: str, node_id: str, kind: str) -> None:
    made = unresolved_node(value, "p.md", "wikilink")
    assert (made.id, made.label, made.kind, made.path) == (node_id, value, kind, "p.md")
    assert made.meta == {"unresolved": True, "source": "wikilink"}


# -- reference sample (Appendix A) ------------------------------------------------------


def test_reference_sample_numbers_and_identity() -> None:
    projection = project(FIXTURES / "shapes/reference-sample")
    assert projection.source_id == "sample-packaging-llmwiki"
    assert (projection.page_count, projection.approved_page_count) == (5, 4)
    assert projection.projection_metadata() == {
        "signature": projection.signature,
        "page_count": 5,
        "approved_page_count": 4,
        "graph_node_count": 18,
        "graph_edge_count": 16,
    }
    full, approved = graph(projection), graph(projection, approved=True)
    assert (len(full["nodes"]), len(full["edges"])) == (18, 16)
    assert (len(approved["nodes"]), len(approved["edges"])) == (15, 14)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", projection.signature)
    assert re.fullmatch(r"sample-packaging-llmwiki:sha256:[0-9a-f]{12}", projection.bundle_id)
    assert projection.bundle_id == f"sample-packaging-llmwiki:sha256:{projection.signature[7:19]}"
    assert projection.public_uri == "llmwiki://sample-packaging-llmwiki"
    assert [projection.role_page_path(r) for r in ("hot", "index", "overview")] == ["hot.md", "index.md", ""]


def test_reference_sample_graph_in_construction_order() -> None:
    rendered = graph(project(FIXTURES / "shapes/reference-sample"))
    assert [n["id"] for n in rendered["nodes"]] == [
        "page:artwork-review",
        "page:draft-note",
        "page:hot",
        "page:index",
        "page:requester-return",
        "heading:artwork-review-Artwork-Review-Process",
        "heading:artwork-review-Release-Gate",
        "source:SRC-ART-001",
        "tag:process",
        "tag:packaging",
        "heading:draft-note-Draft-Note",
        "source:SRC-DRAFT",
        "heading:hot-Current-Focus",
        "source:SRC-HOT",
        "heading:index-Sample-Packaging-LLMWiki",
        "source:SRC-INDEX",
        "heading:requester-return-Requester-Return",
        "source:SRC-RET-001",
    ]
    assert triples(rendered) == [
        ("page:artwork-review", "heading:artwork-review-Artwork-Review-Process", "contains"),
        ("page:artwork-review", "heading:artwork-review-Release-Gate", "contains"),
        ("page:artwork-review", "source:SRC-ART-001", "cites"),
        ("page:artwork-review", "tag:process", "tagged"),
        ("page:artwork-review", "tag:packaging", "tagged"),
        ("page:artwork-review", "page:requester-return", "links_to"),
        ("page:draft-note", "heading:draft-note-Draft-Note", "contains"),
        ("page:draft-note", "source:SRC-DRAFT", "cites"),
        ("page:hot", "heading:hot-Current-Focus", "contains"),
        ("page:hot", "source:SRC-HOT", "cites"),
        ("page:index", "heading:index-Sample-Packaging-LLMWiki", "contains"),
        ("page:index", "source:SRC-INDEX", "cites"),
        ("page:index", "page:hot", "links_to"),
        ("page:index", "page:artwork-review", "links_to"),
        ("page:requester-return", "heading:requester-return-Requester-Return", "contains"),
        ("page:requester-return", "source:SRC-RET-001", "cites"),
    ]
    assert all(e["metadata"] == {} for e in rendered["edges"])
    assert node(rendered, "source:SRC-ART-001") == {
        "id": "source:SRC-ART-001", "label": "SRC-ART-001", "kind": "source_ref",
        "path": "artwork-review.md", "metadata": {},
    }


def test_reference_sample_approved_view_drops_the_draft() -> None:
    projection = project(FIXTURES / "shapes/reference-sample")
    approved = graph(projection, approved=True)
    ids = [n["id"] for n in approved["nodes"]]
    assert "page:draft-note" not in ids
    assert "heading:draft-note-Draft-Note" not in ids
    assert "source:SRC-DRAFT" not in ids
    assert "draft-note" not in json.dumps(approved)
    assert "draft-note" in json.dumps(graph(projection))


def test_page_node_shape() -> None:
    rendered = graph(project(FIXTURES / "shapes/native-wiki-root"))
    assert node(rendered, "page:overview") == {
        "id": "page:overview",
        "label": "Native Wiki Overview",
        "kind": "overview",
        "path": "overview.md",
        "metadata": {
            "adapter": "llmwiki-markdown",
            "implementation": "llmwiki-markdown",
            "source_root": "wiki",
            "source_refs": ["NATIVE-OVERVIEW"],
            "review_state": "unknown",
            "okf": {},
        },
    }


def test_quartz_page_node_metadata_key_order() -> None:
    rendered = graph(project(FIXTURES / "shapes/quartz-site"))
    assert list(node(rendered, "page:index")["metadata"]) == [
        "adapter", "implementation", "content_root", "source_root", "source_refs", "review_state", "okf",
    ]


# -- native-wiki-root: vocabulary and sidecar -------------------------------------------


def test_native_wiki_root_nodes_and_edges() -> None:
    rendered = graph(project(FIXTURES / "shapes/native-wiki-root"))
    assert [(n["id"], n["kind"]) for n in rendered["nodes"]] == [
        ("page:CRITICAL_FACTS", "topic"),
        ("page:concepts/release", "topic"),
        ("page:overview", "overview"),
        ("heading:CRITICAL_FACTS-Critical-Facts", "heading"),
        ("heading:CRITICAL_FACTS-Escalation", "heading"),
        ("heading:concepts-release-Release-Concept", "heading"),
        ("tag:release", "tag"),
        ("tag:ship-checks", "tag"),
        ("heading:overview-Native-Wiki-Overview", "heading"),
        ("heading:overview-Reading-Order", "heading"),
        ("source:NATIVE-OVERVIEW", "source_ref"),
        ("tag:native", "tag"),
        ("placeholder:missing-topic", "placeholder"),
        ("external:GH-42", "external_issue"),
    ]
    assert node(rendered, "placeholder:missing-topic") == {
        "id": "placeholder:missing-topic", "label": "missing-topic", "kind": "placeholder",
        "path": "overview.md", "metadata": {"unresolved": True, "source": "wikilink"},
    }
    assert node(rendered, "external:GH-42") == {
        "id": "external:GH-42", "label": "GH-42", "kind": "external_issue",
        "path": "concepts/release.md", "metadata": {"unresolved": True, "source": "graph.json"},
    }
    assert edge(rendered, "page:overview", "page:concepts/release", "links_to")["metadata"] == {}
    assert edge(rendered, "page:overview", "placeholder:missing-topic", "links_to")["metadata"] == {
        "unresolved": True
    }
    assert edge(rendered, "page:overview", "page:concepts/release", "supports")["metadata"] == {
        "source": "graph.json", "path": "graph/graph.json", "confidence": 0.88,
    }
    assert edge(rendered, "page:concepts/release", "external:GH-42", "tracks")["metadata"] == {
        "source": "graph.json", "path": "graph/graph.json", "confidence": 0.7,
    }
    # Sidecar facts come last, in file order.
    assert triples(rendered)[-2:] == [
        ("page:overview", "page:concepts/release", "supports"),
        ("page:concepts/release", "external:GH-42", "tracks"),
    ]


def test_sample_wiki_vocabulary_counts() -> None:
    rendered = graph(project(FIXTURES / "sample-wiki"))
    kinds = Counter(n["kind"] for n in rendered["nodes"])
    assert kinds == {"topic": 11, "hot": 1, "index": 1, "overview": 1, "heading": 39, "tag": 15,
                     "source_ref": 5, "placeholder": 2, "external_issue": 1}
    relations = Counter(e["relation"] for e in rendered["edges"])
    assert relations == {"contains": 39, "links_to": 26, "tagged": 24, "cites": 10, "supports": 1,
                         "tracks": 1, "documents": 1}


def test_sample_wiki_sidecar_facts() -> None:
    rendered = graph(project(FIXTURES / "sample-wiki"))
    assert edge(rendered, "page:index", "page:overview", "links_to")["metadata"] == {
        "source": "graph.json", "path": "graph/graph.json", "confidence": 0.77,
    }
    assert edge(rendered, "page:packaging-pipeline", "placeholder:release-dashboard", "documents")[
        "metadata"] == {"source": "graph.json", "path": "graph/graph.json"}
    assert node(rendered, "placeholder:release-dashboard")["metadata"] == {
        "unresolved": True, "source": "graph.json"}
    assert node(rendered, "placeholder:release-dashboard")["path"] == "packaging-pipeline.md"
    # GH-42 is first created by a wikilink in hot.md and joined by the sidecar.
    assert node(rendered, "external:GH-42")["path"] == "hot.md"
    assert node(rendered, "external:GH-42")["metadata"] == {"unresolved": True, "source": "wikilink"}
    assert edge(rendered, "page:runbooks/hotfix-release", "external:GH-42", "tracks")["metadata"] == {
        "source": "graph.json", "path": "graph/graph.json", "confidence": 0.7}
    # The Markdown link [hotfix runbook](hotfix-release.md) resolves by file name.
    assert edge(rendered, "page:runbooks/rollback", "page:runbooks/hotfix-release", "links_to")


def test_sample_wiki_tag_node_keeps_first_page_path() -> None:
    rendered = graph(project(FIXTURES / "sample-wiki"))
    assert node(rendered, "tag:build-times")["path"] == "hot.md"
    assert node(rendered, "tag:release")["path"] == "concepts/artifact-signing.md"


# -- edge merge (A12) and sidecar parsing (1.9) -----------------------------------------


def _sidecar_wiki(tmp_path: Path, edges: Any, extra: dict[str, str] | None = None) -> Path:
    files = {
        "hot.md": "# Hot\n",
        "index.md": "# Index\n\nSee [[topic]] and [[ghost]].\n",
        "topic.md": "# Topic\n",
        "graph/graph.json": edges if isinstance(edges, str) else json.dumps(edges),
        **(extra or {}),
    }
    return build(tmp_path / "wiki-root", files)


def test_duplicate_wikilink_and_sidecar_edge_merge(tmp_path: Path) -> None:
    root = _sidecar_wiki(tmp_path, [{"from": "index", "to": "topic", "type": "links_to", "confidence": 0.77}])
    rendered = graph(project(root))
    links = [e for e in rendered["edges"]
             if (e["source"], e["target"], e["relation"]) == ("page:index", "page:topic", "links_to")]
    assert links == [{"source": "page:index", "target": "page:topic", "relation": "links_to",
                      "metadata": {"source": "graph.json", "path": "graph/graph.json", "confidence": 0.77}}]


def test_differing_metadata_merges_into_a_list(tmp_path: Path) -> None:
    root = _sidecar_wiki(tmp_path, {"edges": [
        {"from": "index", "to": "topic", "type": "links_to", "confidence": 0.77},
        {"from": "index", "to": "topic", "type": "Links To", "confidence": 0.5},
        {"from": "index", "to": "topic", "type": "links_to", "confidence": 0.77},
    ]})
    rendered = graph(project(root))
    assert edge(rendered, "page:index", "page:topic", "links_to")["metadata"] == {
        "source": "graph.json", "path": "graph/graph.json", "confidence": [0.77, 0.5]}


def test_unresolved_wikilink_and_sidecar_edge_merge(tmp_path: Path) -> None:
    root = _sidecar_wiki(tmp_path, [{"from": "index", "to": "ghost", "type": "links_to"}])
    rendered = graph(project(root))
    assert edge(rendered, "page:index", "placeholder:ghost", "links_to")["metadata"] == {
        "unresolved": True, "source": "graph.json", "path": "graph/graph.json"}
    assert node(rendered, "placeholder:ghost")["metadata"] == {"unresolved": True, "source": "wikilink"}


def test_sidecar_key_rules_and_relations(tmp_path: Path) -> None:
    root = _sidecar_wiki(tmp_path, [
        {"from": "", "source": "index", "to": "topic", "type": "blocks"},  # empty 'from' wins: skipped
        {"source": "topic", "target": "index", "type": "Part Of!!", "confidence": True},
        {"from": "hot", "to": "topic", "confidence": "high"},
        {"from": "hot", "target": "index", "type": "", "confidence": 3},
        "not an object",
        42,
        {"from": "hot"},
    ])
    rendered = graph(project(root))
    sidecar = [(e["source"], e["target"], e["relation"], e["metadata"]) for e in rendered["edges"]
               if e["metadata"].get("source") == "graph.json"]
    assert sidecar == [
        ("page:topic", "page:index", "part_of", {"source": "graph.json", "path": "graph/graph.json"}),
        ("page:hot", "page:topic", "related_to", {"source": "graph.json", "path": "graph/graph.json"}),
        ("page:hot", "page:index", "related_to",
         {"source": "graph.json", "path": "graph/graph.json", "confidence": 3}),
    ]
    assert "blocks" not in {e["relation"] for e in rendered["edges"]}


def test_sidecar_unresolved_endpoint_paths(tmp_path: Path) -> None:
    root = _sidecar_wiki(tmp_path, [
        {"from": "nowhere-a", "to": "topic", "type": "feeds"},
        {"from": "nowhere-b", "to": "nowhere-c", "type": "feeds"},
        {"from": "topic", "to": "https://example.com/spec", "type": "documents"},
    ])
    rendered = graph(project(root))
    assert node(rendered, "placeholder:nowhere-a")["path"] == "topic.md"
    assert node(rendered, "placeholder:nowhere-b")["path"] == ""
    assert node(rendered, "placeholder:nowhere-c")["path"] == ""
    external = node(rendered, "external:https-example.com-spec")
    assert (external["kind"], external["path"], external["metadata"]) == (
        "external_ref", "topic.md", {"unresolved": True, "source": "graph.json"})
    assert edge(rendered, "placeholder:nowhere-b", "placeholder:nowhere-c", "feeds")


@pytest.mark.parametrize("text", ["{not json", '{"edges": {"a": 1}}', '"just a string"', "null"])
def test_unusable_sidecar_is_ignored(tmp_path: Path, text: str) -> None:
    projection = project(_sidecar_wiki(tmp_path, text))
    rendered = graph(projection)
    assert all(e["metadata"].get("source") != "graph.json" for e in rendered["edges"])
    assert projection.diagnostics == ()


def test_root_and_source_root_sidecars_are_both_read_root_first(tmp_path: Path) -> None:
    root = build(tmp_path / "repo", {
        "wiki/index.md": "# Index\n",
        "wiki/concepts/release.md": "# Release\n",
        "graph/graph.json": json.dumps([{"from": "wiki/index.md", "to": "concepts/release", "type": "a"}]),
        "wiki/graph/graph.json": json.dumps([{"from": "index", "to": "wiki/concepts/release", "type": "b"}]),
        "other/graph/graph.json": json.dumps([{"from": "index", "to": "concepts/release", "type": "c"}]),
    })
    rendered = graph(project(root))
    sidecar = [(e["relation"], e["metadata"]["path"]) for e in rendered["edges"] if e["metadata"]]
    assert sidecar == [("a", "graph/graph.json"), ("b", "wiki/graph/graph.json")]
    assert [n["kind"] for n in rendered["nodes"]].count("placeholder") == 0


# -- Dendron hierarchy (2.2 pass 3) -----------------------------------------------------


def test_dendron_parent_of_and_placeholder_parent(tmp_path: Path) -> None:
    root = build(tmp_path / "ws", {
        "dendron.yml": "vaults:\n  - fsPath: notes\n",
        "notes/a.md": "# A\n",
        "notes/a.b.md": "# AB\n",
        "notes/x.y.z.md": "# XYZ\n",
        "notes/root.md": "# Root\n\n[[Alias Text|a.b]]\n",
    })
    rendered = graph(project(root))
    parent_of = [(e["source"], e["target"], e["metadata"]) for e in rendered["edges"]
                 if e["relation"] == "parent_of"]
    assert parent_of == [
        ("page:a", "page:a.b", {"source": "dendron_hierarchy"}),
        ("placeholder:x.y", "page:x.y.z", {"source": "dendron_hierarchy"}),
    ]
    placeholder = node(rendered, "placeholder:x.y")
    assert (placeholder["kind"], placeholder["metadata"]) == (
        "placeholder", {"unresolved": True, "source": "dendron_hierarchy"})
    assert edge(rendered, "page:root", "page:a.b", "links_to")
    assert "Alias Text" not in {n["label"] for n in rendered["nodes"]}


def test_dotted_names_outside_dendron_have_no_hierarchy(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {"a.md": "# A\n", "a.b.md": "# AB\n"})
    rendered = graph(project(root))
    assert "parent_of" not in {e["relation"] for e in rendered["edges"]}


# -- link resolution (2.3) --------------------------------------------------------------


def test_link_resolution_by_id_title_path_and_file_name(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {
        "docs/Product Process.md": "---\ntitle: The Process\n---\n",
        "src.md": (
            "[[docs/Product Process]] [[the process]] [[PRODUCT-PROCESS]] [[docs/product process.md]] "
            "[[Product_Process]] [[Process Guide]]"
        ),
    })
    rendered = graph(project(root))
    links = [(e["target"], e["metadata"]) for e in rendered["edges"]
             if e["source"] == "page:src" and e["relation"] == "links_to"]
    assert links == [("page:docs/Product Process", {}), ("placeholder:Process-Guide", {"unresolved": True})]


def test_nested_source_root_prefixed_keys_resolve(tmp_path: Path) -> None:
    root = build(tmp_path / "repo", {
        "wiki/index.md": "# Index\n\n[[wiki/concepts/release.md]] [[wiki/concepts/release]]\n",
        "wiki/concepts/release.md": "# Release\n",
    })
    rendered = graph(project(root))
    assert triples(rendered).count(("page:index", "page:concepts/release", "links_to")) == 1
    assert not [n for n in rendered["nodes"] if n["kind"] == "placeholder"]


def test_cjk_titles_resolve_without_colliding(tmp_path: Path) -> None:
    # Deliberate deviation: the reference normalised both titles to "" (last page won).
    root = build(tmp_path / "kb", {
        "ja.md": "---\ntitle: リリース手順メモ\n---\n",
        "zh.md": "---\ntitle: 部署说明\n---\n",
        "ko.md": "---\ntitle: 계약 관리\n---\n",
        "src.md": "[[リリース手順メモ]] [[部署说明]] [[계약관리]]\n",
    })
    rendered = graph(project(root))
    assert [e["target"] for e in rendered["edges"] if e["source"] == "page:src"] == [
        "page:ja", "page:zh", "page:ko"]


def test_duplicate_ids_first_page_wins_for_reads_and_nodes(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {
        "a.md": "---\nid: dup\ntitle: First\n---\n",
        "b.md": "---\nid: dup\ntitle: Second\n---\n",
    })
    projection = project(root)
    assert [p.id for p in projection.pages] == ["dup", "dup"]
    found = projection.find_page("dup")
    assert found is not None and found.path == "a.md"
    second = projection.find_page("b.md")
    assert second is not None and second.title == "Second"
    assert [(n["id"], n["label"]) for n in graph(projection)["nodes"] if n["kind"] == "topic"] == [
        ("page:dup", "First")]


# -- approved-only view (2.8, B6) -------------------------------------------------------


def _draft_and_approved(tmp_path: Path) -> Path:
    return build(tmp_path / "kb", {
        "aaa-draft.md": (
            "---\ntitle: Draft Page\ndraft: true\ntags: [shared, draft-only]\n"
            "source_refs: [SHARED-REF, DRAFT-REF]\n---\n# Draft Heading\n\n"
            "[[nowhere]] [[draft-only-target]] [[zzz-approved]]\n"
        ),
        "zzz-approved.md": (
            "---\ntitle: Approved Page\ntags: [shared]\nsource_refs: [SHARED-REF]\n---\n"
            "# Approved Heading\n\n[[nowhere]] [[aaa-draft]]\n"
        ),
        "graph/graph.json": json.dumps([
            {"from": "aaa-draft", "to": "GH-7", "type": "tracks"},
            {"from": "zzz-approved", "to": "GH-7", "type": "tracks"},
            {"from": "aaa-draft", "to": "zzz-approved", "type": "supports"},
        ]),
    })


def test_approved_view_keeps_shared_nodes_without_the_draft_path(tmp_path: Path) -> None:
    projection = project(_draft_and_approved(tmp_path))
    full = graph(projection)
    assert node(full, "tag:shared")["path"] == "aaa-draft.md"  # first occurrence wins
    assert "aaa-draft.md" in json.dumps(full)

    approved = graph(projection, approved=True)
    text = json.dumps(approved, ensure_ascii=False)
    assert "aaa-draft" not in text
    assert "Draft Page" not in text
    for shared in ("tag:shared", "source:SHARED-REF", "placeholder:nowhere", "external:GH-7"):
        assert node(approved, shared)["path"] == "zzz-approved.md", shared
    ids = {n["id"] for n in approved["nodes"]}
    for withheld in ("page:aaa-draft", "tag:draft-only", "source:DRAFT-REF", "placeholder:draft-only-target",
                     "heading:aaa-draft-Draft-Heading"):
        assert withheld not in ids
    assert set(triples(approved)) == {
        ("page:zzz-approved", "heading:zzz-approved-Approved-Heading", "contains"),
        ("page:zzz-approved", "source:SHARED-REF", "cites"),
        ("page:zzz-approved", "tag:shared", "tagged"),
        ("page:zzz-approved", "placeholder:nowhere", "links_to"),
        ("page:zzz-approved", "external:GH-7", "tracks"),
    }


def test_approved_view_filters_metadata_mentioning_withheld_paths() -> None:
    text = "---\ndraft: true\n---\n# D\n"
    draft = parse_page(text, "secret/draft.md", ParseOptions())
    public = parse_page("# P\n", "public.md", ParseOptions())
    nodes = [
        Node("page:secret/draft", "D", "topic", "secret/draft.md", draft),
        Node("page:public", "P", "topic", "public.md", public),
        Node("placeholder:x", "x", "placeholder", "secret/draft.md",
             {"unresolved": True, "note": "from secret/draft.md",
              "deep": {"list": ["a", "secret/draft.md"]}}),
    ]

    edges = [
        Edge("page:secret/draft", "placeholder:x", "links_to", {"unresolved": True}),
        Edge("page:public", "placeholder:x", "links_to", {"unresolved": True, "via": "secret/draft.md"}),
    ]
    view = approved_view(nodes, edges, [draft, public], {"adapter": "generic-markdown"})
    rendered = view.payload(view.nodes, view.edges)
    assert [n["id"] for n in rendered["nodes"]] == ["page:public", "placeholder:x"]
    assert node(rendered, "placeholder:x")["path"] == "public.md"
    assert node(rendered, "placeholder:x")["metadata"] == {"unresolved": True}
    assert rendered["edges"] == [{"source": "page:public", "target": "placeholder:x", "relation": "links_to",
                                  "metadata": {"unresolved": True}}]
    assert "secret/draft" not in json.dumps(rendered)


def test_sample_wiki_approved_graph_hides_withheld_pages() -> None:
    projection = project(FIXTURES / "sample-wiki")
    text = json.dumps(graph(projection, approved=True), ensure_ascii=False)
    for needle in ("incident-comms", "vendor-contacts", "Incident Communications", "Vendor Contacts"):
        assert needle not in text


# -- truncation -------------------------------------------------------------------------


def test_truncated_reference_sample() -> None:
    projection = project(FIXTURES / "shapes/reference-sample")
    full = projection.full_graph.truncated(5)
    assert [n["id"] for n in full["nodes"]] == [
        "page:artwork-review", "page:draft-note", "page:hot", "page:index", "page:requester-return"]
    assert triples(full) == [
        ("page:artwork-review", "page:requester-return", "links_to"),
        ("page:index", "page:hot", "links_to"),
        ("page:index", "page:artwork-review", "links_to"),
    ]
    approved = projection.approved_graph.truncated(5)
    assert [n["id"] for n in approved["nodes"]] == [
        "page:artwork-review", "page:hot", "page:index", "page:requester-return",
        "heading:artwork-review-Artwork-Review-Process"]
    assert len(approved["edges"]) == 4
    assert projection.full_graph.truncated(0) == {"nodes": [], "edges": []}
    assert projection.full_graph.truncated(2)["edges"] == []


@pytest.mark.parametrize("approved", [False, True])
def test_truncated_never_returns_edges_to_omitted_nodes(approved: bool) -> None:
    projection = project(FIXTURES / "sample-wiki")
    view = projection.approved_graph if approved else projection.full_graph
    full = view.payload(view.nodes, view.edges)
    order = [(e["source"], e["target"], e["relation"]) for e in full["edges"]]
    for limit in range(0, len(view.nodes) + 2):
        cut = view.truncated(limit)
        kept = {n["id"] for n in cut["nodes"]}
        assert [n["id"] for n in cut["nodes"]] == [n["id"] for n in full["nodes"][:limit]]
        assert len(cut["edges"]) <= limit
        for e in cut["edges"]:
            assert e["source"] in kept and e["target"] in kept
        closed = [t for t in order if t[0] in kept and t[1] in kept][:limit]
        assert triples(cut) == closed


# -- source refs (4.6 ids) ----------------------------------------------------------------


def test_source_ref_id_collisions_get_distinct_ids(tmp_path: Path) -> None:
    first_hash = hashlib.sha256(b"A-B").hexdigest()[:8]
    third = f"A-B-{first_hash}"
    third_hash = hashlib.sha256(third.encode()).hexdigest()[:8]
    root = build(tmp_path / "kb", {"p.md": f"---\nsource_refs: ['A B', 'A-B', '{third}']\n---\n# P\n"})
    refs = project(root).source_refs(False)
    by_label = {r["label"]: r["id"] for r in refs}
    assert by_label == {"A B": "a-b", "A-B": f"a-b-{first_hash}", third: f"a-b-{first_hash}-{third_hash}"}
    assert [r["id"] for r in refs] == sorted(by_label.values())
    assert refs[0] == {
        "id": "a-b", "label": "A B", "kind": "source_ref", "uri": "llmwiki://kb/source-refs/a-b",
        "linked_pages": ["p.md"], "linked_page_ids": ["p"], "locator": {},
    }


def test_sample_wiki_source_refs_and_visibility() -> None:
    projection = project(FIXTURES / "sample-wiki")
    approved = projection.source_refs(False)
    assert [r["id"] for r in approved] == [
        "adr-0042", "https-packaging.python.org-en-latest", "src-ops-index", "src-rel-001", "src-sign-002"]
    rel = next(r for r in approved if r["id"] == "src-rel-001")
    assert rel["linked_pages"] == ["hot.md", "release-checklist.md", "runbooks/hotfix-release.md"]
    drafts = projection.source_refs(True)
    rel_all = next(r for r in drafts if r["id"] == "src-rel-001")
    assert "runbooks/incident-comms.md" in rel_all["linked_pages"]


# -- signature and bundle id (2.4, D11) ---------------------------------------------------


def test_signature_of_no_entries_is_empty() -> None:
    assert signature_of([]) == ""
    assert signature_of(["a\tfile\t1\tx"]) == "sha256:" + hashlib.sha256(b"a\tfile\t1\tx").hexdigest()


@pytest.mark.parametrize(
    ("signature", "expected"),
    [
        ("", "src"),
        ("sha256:0123456789abcdef0123", "src:sha256:0123456789ab"),
        ("0123456789abcdef0123", "src:0123456789ab"),
    ],
)
def test_bundle_id_of(signature: str, expected: str) -> None:
    assert bundle_id_of("src", signature) == expected


def test_explicit_source_id_is_used(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {"a.md": "# A\n"})
    projection = project(root, source_id="My Source")
    assert projection.source_id == "My Source"
    assert projection.bundle_id.startswith("My Source:sha256:")


def test_bundle_id_is_identical_for_a_copied_folder_and_changes_after_an_edit(tmp_path: Path) -> None:
    one = copy_fixture("shapes/reference-sample", tmp_path / "one")
    two = copy_fixture("shapes/reference-sample", tmp_path / "two")
    first, second = project(one), project(two)
    assert first.signature == second.signature != ""
    assert first.bundle_id == second.bundle_id
    assert first.bundle_id == project(FIXTURES / "shapes/reference-sample").bundle_id

    mirror = FolderMirror(two.resolve(), source_id=None, max_page_bytes=MAX_PAGE_BYTES)
    mirror.full_scan()
    before = mirror.project()
    with (two / "hot.md").open("a", encoding="utf-8") as handle:
        handle.write("\nOne more line.\n")
    mirror.full_scan()
    after = mirror.project()
    assert before.bundle_id == first.bundle_id
    assert after.bundle_id != first.bundle_id
    assert after.signature != first.signature
    assert project(two).signature == after.signature


def test_signature_ignores_files_outside_the_signature_set(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {"a.md": "# A\n"})
    base = project(root).signature
    build(root, {"notes.txt": "x", "image.png": "x", "node_modules/x.md": "# x\n",
                 ".runtime-logs/run.md": "# log\n", "graph.json": "[]", "sub/dist/y.md": "# y\n"})
    assert project(root).signature == base
    build(root, {"sub/graph/graph.json": "[]"})
    assert project(root).signature != base



def test_trash_and_old_versions_kept_by_tools_are_not_pages(tmp_path: Path) -> None:
    """Obsidian moves deleted notes to .trash, desktops to .Trash/.Trashes, Syncthing keeps
    old versions in .stversions: none is a note the user sees, and served they would be a
    deleted page, or a second one with the same title. Other dot-folders are still served
    (the contract's `.raw/`)."""
    live = "---\ntitle: Rollback\n---\n# Rollback\n\nCurrent steps.\n"
    root = build(tmp_path / "vault", {
        ".obsidian/app.json": "{}",
        "Rollback.md": live,
        "Home.md": "# Home\n\nSee [[Rollback]] and [[Gone]].\n",
        ".raw/source-notes.md": "# Source notes\n",
        ".trash/Gone.md": "# Gone\n\nDeleted in Obsidian.\n",
        ".stversions/Rollback~20261201-101010.md": live.replace("Current", "Old"),
        "archive/.Trash/Rollback.md": live,
        ".Trashes/501/Rollback.md": live,
    })
    p = project(root)
    assert p.layout.adapter == "obsidian"
    assert [page.path for page in p.pages] == [".raw/source-notes.md", "Home.md", "Rollback.md"]
    assert p.lookup["rollback"].path == "Rollback.md" and "gone" not in p.lookup
    assert project(root).signature == p.signature
    build(root, {".trash/Another.md": "# Another\n", ".stversions/Home~1.md": "# Home\n"})
    assert project(root).signature == p.signature


def test_page_files_holding_a_nul_byte_are_skipped_as_binary(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {"a.md": "# A\n", "b.md": "# B\n\nAlso text: caf\u00e9.\n"})
    (root / "._a.md").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \x00\x02")
    (root / "c.md").write_bytes(b"# C\n\nText, then\x00binary.\n")
    p = project(root)
    assert [page.path for page in p.pages] == ["a.md", "b.md"]
    assert [(d.path, d.reason, d.skipped) for d in p.diagnostics] == [
        ("._a.md", "binary", True), ("c.md", "binary", True)]

def _line(root: Path, rel: str) -> str:
    data = (root / rel).read_bytes()
    return f"{rel}\tfile\t{len(data)}\t{hashlib.blake2b(data, digest_size=16).hexdigest()}"


def test_signature_walk_order(tmp_path: Path) -> None:
    root = build(tmp_path / "vault", {
        ".obsidian/app.json": "{}",
        "sub/.obsidian/t.md": "# nested marker dir is never descended\n",
        "a.md": "# a\n",
        "Z.md": "# Z\n",
        "b.ORG": "* b\n",
        "notes.txt": "not tracked",
        ".vscode/extensions.json": "{}",
        ".vscode/x.md": "# editor note\n",
        "graph/graph.json": "[]",
        "x/graph/graph.json": "[]",
        "x/graph.json": "[]",
        "logseq/config.edn": "{}",
        "q/quartz.config.ts": "",
        "w/.wiki-compiler.json": "{}",
        "sub/c.md": "# c\n",
        "sub/e.md": "# e\n",
        "sub/deeper/d.md": "# d\n",
        "node_modules/n.md": "# n\n",
        ".runtime-logs/l.md": "# l\n",
    })
    marker_size = os.stat(root / ".obsidian").st_size
    lines = [
        f".obsidian\tdir\t{marker_size}\t",
        _line(root, "Z.md"),
        _line(root, "a.md"),
        _line(root, "b.ORG"),
        _line(root, ".vscode/extensions.json"),
        _line(root, "graph/graph.json"),
        _line(root, "logseq/config.edn"),
        _line(root, "q/quartz.config.ts"),
        _line(root, "sub/c.md"),
        _line(root, "sub/e.md"),
        _line(root, "sub/deeper/d.md"),
        _line(root, "w/.wiki-compiler.json"),
        _line(root, "x/graph/graph.json"),
    ]
    expected = "sha256:" + hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
    projection = project(root)
    assert projection.layout.adapter == "obsidian"
    assert projection.signature == expected


def test_too_large_page_is_skipped_but_still_signed(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {"ok.md": "x" * 100, "big.md": "y" * 101})
    projection = project(root, max_page_bytes=100)
    assert [p.path for p in projection.pages] == ["ok.md"]
    assert [(d.path, d.reason, d.skipped) for d in projection.diagnostics] == [("big.md", "too_large", True)]
    before = projection.signature
    (root / "big.md").write_text("z" * 101, encoding="utf-8")
    assert project(root, max_page_bytes=100).signature != before


# -- raw origins and orientation ----------------------------------------------------------


def test_raw_origin_labels(tmp_path: Path) -> None:
    assert project(FIXTURES / "sample-wiki").raw_origins() == {
        "enabled": True, "metadata_only": True, "public_root_labels": ["raw"],
        "root_label": "sample-operations-wiki"}
    root = build(tmp_path / "kb", {"sources/s.txt": "x", "raw/r.txt": "y", "a.md": "# A\n"})
    assert project(root).raw_origins()["public_root_labels"] == ["raw", "sources"]
    nested = build(tmp_path / "repo", {"wiki/index.md": "# I\n", "raw/r.txt": "outside source root",
                                       "wiki/sources/s.txt": "inside"})
    assert project(nested).raw_origins()["public_root_labels"] == ["sources"]


def test_orientation_fills_with_topics(tmp_path: Path) -> None:
    projection = project(FIXTURES / "sample-wiki")
    assert [p.path for p in projection.ordered(False)][:3] == ["hot.md", "index.md", "overview.md"]
    assert "runbooks/incident-comms.md" not in [p.path for p in projection.ordered(False)]
    root = build(tmp_path / "kb", {"b.md": "# B\n", "a.md": "# A\n", "overview.md": "# O\n",
                                   "draft.md": "---\ndraft: true\n---\n"})
    assert [p.path for p in project(root).ordered(False)] == ["overview.md", "a.md", "b.md"]


# -- the adversarial folder -----------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_adversarial(tmp_path_factory.mktemp("hostile")).resolve()


_RECORDERS: list[list[str]] = []
_HOOKED: list[bool] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _RECORDERS and event in ("open", "os.scandir", "os.listdir") and args:
        target = args[0]
        if isinstance(target, str | bytes | os.PathLike):
            _RECORDERS[-1].append(os.fsdecode(target))


@contextmanager
def recorded_paths() -> Iterator[list[str]]:
    """Every path opened or listed by this process while the block runs."""
    if not _HOOKED:
        sys.addaudithook(_audit)  # audit hooks cannot be removed; this one is idle when not recording
        _HOOKED.append(True)
    seen: list[str] = []
    _RECORDERS.append(seen)
    try:
        yield seen
    finally:
        _RECORDERS.remove(seen)


def test_adversarial_projection_succeeds_with_diagnostics(hostile: Path) -> None:
    projection = project(hostile)
    assert projection.layout.adapter == "generic-markdown"
    assert [p.path for p in projection.pages] == [
        "another-good.md", "broken-frontmatter.md", "crlf.md", "dates.md", "dotdot-id.md", "empty.md",
        "good.md", "loop/page.md", "many-links.md", "not-utf8.md", "numeric-tags.md",
        "yaml-list-frontmatter.md",
    ]
    assert sorted((d.path, d.reason, d.skipped) for d in projection.diagnostics) == [
        ("broken-frontmatter.md", "frontmatter_invalid", False),
        ("escape-link.md", "symlink_ignored", True),
        ("graph/graph.json", "symlink_ignored", True),
        ("huge.md", "too_large", True),
        ("not-utf8.md", "not_utf8", False),
    ]
    assert projection.approved_page_count == projection.page_count == 12


def test_adversarial_page_facts(hostile: Path) -> None:
    projection = project(hostile)

    def get(key: str) -> Any:
        page = projection.find_page(key)
        assert page is not None, key
        return page

    good = get("good")
    assert (good.title, good.tags, good.links) == ("Good Page", ("baseline",), ("another-good",))
    assert "sturdyanchor" in get("another-good").text
    latin = get("not-utf8")
    assert latin.degraded == "not_utf8"
    assert latin.title == "Caf\ufffd Notes"
    broken = get("broken-frontmatter")
    assert (broken.frontmatter, broken.title, broken.degraded) == (
        {}, "Heading From Body", "frontmatter_invalid")
    assert broken.text.startswith("---\ntitle: [unclosed")
    crlf = get("crlf")
    assert (crlf.title, crlf.tags, crlf.headings) == (
        "CRLF Page", ("windows",), ("CRLF Page", "Second Heading"))
    dates = get("dates")
    assert dates.frontmatter == {"title": "Dates Page", "updated_at": "2026-07-10",
                                 "created": "2026-07-10T10:00:00", "review_date": "2026-08-01"}
    assert dates.updated_at == "2026-07-10"
    empty = get("empty")
    assert (empty.title, empty.text, empty.summary) == ("empty", "", "")
    listed = get("yaml-list-frontmatter")
    assert (listed.frontmatter, listed.title, listed.degraded) == ({}, "List Frontmatter", "")
    assert get("numeric-tags").tags == ("review-41", "태그1")
    assert get("loop/page").title == "Loop Page"
    assert projection.find_page("huge") is None


def test_adversarial_outside_content_never_appears(hostile: Path) -> None:
    projection = project(hostile)
    payloads = json.dumps([p.payload() for p in projection.pages], ensure_ascii=False)
    for rendered in (graph(projection), graph(projection, approved=True)):
        text = json.dumps(rendered, ensure_ascii=False)
        assert OUTSIDE_SECRET_WORD not in text
        assert OUTSIDE_GRAPH_RELATION not in text
    assert OUTSIDE_SECRET_WORD not in payloads
    assert projection.find_page("escape-link") is None
    assert projection.sidecars == ()


def test_adversarial_many_links_become_placeholders(hostile: Path) -> None:
    rendered = graph(project(hostile))
    placeholders = [n for n in rendered["nodes"]
                    if n["kind"] == "placeholder" and n["path"] == "many-links.md"]
    assert len(placeholders) == 5000
    assert {n["id"] for n in placeholders} == {f"placeholder:target-{i}" for i in range(5000)}
    links = [e for e in rendered["edges"] if e["source"] == "page:many-links"]
    assert len(links) == 5001  # 5,000 links_to + 1 contains


def test_adversarial_dotdot_id_is_only_an_exact_key(hostile: Path) -> None:
    projection = project(hostile)
    found = projection.find_page("../../etc/passwd")
    assert found is not None and found.path == "dotdot-id.md"
    for key in ("etc/passwd", "../etc/passwd", "/etc/passwd", "dotdot-id", "../../etc/passwd.md"):
        assert projection.find_page(key) is None, key


def test_adversarial_scan_reads_nothing_outside_the_root(hostile: Path) -> None:
    project(hostile)  # warm up lazy imports so only the scan itself is recorded
    root = os.path.realpath(hostile)
    with recorded_paths() as seen:
        projection = project(hostile)
        page = projection.find_page("../../etc/passwd")
        assert page is not None
        json.dumps(page.payload())
        json.dumps(graph(projection))
        json.dumps(graph(projection, approved=True))
    assert any(p.endswith("good.md") for p in seen)  # the recorder works
    outside = [p for p in seen if os.path.commonpath([os.path.realpath(p), root]) != root]
    assert outside == []
    assert not [p for p in seen if "/loop/self" in p or p.endswith("escape-link.md")]


def test_adversarial_scan_is_read_only(hostile: Path) -> None:
    before = tree_digest(hostile)
    outside = tree_digest(hostile.parent)
    projection = project(hostile)
    graph(projection)
    graph(projection, approved=True)
    assert tree_digest(hostile) == before
    assert tree_digest(hostile.parent) == outside


def test_scanning_a_fixture_leaves_it_unchanged() -> None:
    root = FIXTURES / "sample-wiki"
    before = tree_digest(root)
    projection = project(root)
    graph(projection, approved=True)
    projection.source_refs(True)
    assert tree_digest(root) == before
