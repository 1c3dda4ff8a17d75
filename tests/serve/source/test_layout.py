"""Folder shape detection (contract 1.1-1.3, 1.7, 1.8) per fixture and per rule."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from serve.errors import WikiRootError
from serve.snapshot.projection import Projection
from serve.watch.mirror import FolderMirror
from tests.support.folders import FIXTURES, tree_digest

UNSUPPORTED = "No supported wiki files were found under the configured root."
MISSING = "Configured wiki root does not exist or is not a directory."


def project(root: Path) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


def build(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def pages_of(projection: Projection) -> list[tuple[str, str, str]]:
    return [(p.path, p.id, p.role) for p in projection.pages]


def graph(projection: Projection, *, approved: bool = False) -> dict[str, list[dict[str, Any]]]:
    """The graph as rendered on the wire (full or approved-only)."""
    view = projection.approved_graph if approved else projection.full_graph
    return view.payload(view.nodes, view.edges)


# -- every fixture folder -----------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    adapter: str
    implementation: str
    metadata: dict[str, str]
    title: str
    source_id: str
    pages: list[tuple[str, str, str]]  # (path, id, role) in page order
    not_pages: tuple[str, ...] = ()  # root-relative Markdown files that must not be pages
    description: str = ""


# pages, approved pages, full graph nodes / edges, approved graph nodes / edges
# (fixtures/README.md summary table).
COUNTS: dict[str, tuple[int, int, int, int, int, int]] = {
    "sample-wiki": (14, 12, 76, 102, 72, 96),
    "shapes/reference-sample": (5, 4, 18, 16, 15, 14),
    "shapes/native-wiki-root": (3, 3, 14, 13, 14, 13),
    "shapes/llmwiki-compiler-output": (3, 3, 8, 8, 8, 8),
    "shapes/obsidian-vault": (6, 6, 15, 16, 15, 16),
    "shapes/logseq-graph": (5, 5, 9, 10, 9, 10),
    "shapes/dendron-single": (3, 3, 6, 5, 6, 5),
    "shapes/dendron-multi": (5, 5, 11, 11, 11, 11),
    "shapes/foam-workspace": (3, 3, 7, 8, 7, 8),
    "shapes/foam-jsonc": (4, 4, 9, 9, 9, 9),
    "shapes/obsidian-properties": (5, 4, 12, 11, 10, 10),
    "shapes/dendron-self-contained": (3, 3, 9, 8, 9, 8),
    "shapes/quartz-site": (3, 2, 7, 5, 5, 4),
    "shapes/quartz-yaml-site": (2, 2, 4, 3, 4, 3),
    "shapes/openwiki-repo": (3, 3, 7, 6, 7, 6),
    "shapes/generic-markdown": (6, 5, 15, 12, 13, 11),
    "shapes/korean-wiki": (9, 8, 34, 34, 32, 33),
    "shapes/okf-bundle": (6, 5, 24, 23, 20, 20),
}


SHAPES: dict[str, Shape] = {
    "shapes/dendron-multi": Shape(
        "dendron", "dendronhq/dendron", {"source_root": ".", "vault_roots": "vault,assets"},
        "dendron-multi", "dendron-multi",
        [
            ("assets/brand.logo.usage.md", "assets/brand.logo.usage", "topic"),
            ("assets/root.md", "assets/root", "topic"),
            ("vault/root.md", "vault/root", "topic"),
            ("vault/team.md", "vault/team", "topic"),
            ("vault/team.onboarding.md", "vault/team.onboarding", "topic"),
        ],
        ("scratch/ignored.md",),
    ),
    "shapes/dendron-single": Shape(
        "dendron", "dendronhq/dendron", {"source_root": "vault"}, "vault", "vault",
        [
            ("process.md", "process", "topic"),
            ("process.review.md", "process.review", "topic"),
            ("root.md", "root", "topic"),
        ],
        ("notes/outside.md",),
    ),
    "shapes/foam-workspace": Shape(
        "foam", "foambubble/foam", {"source_root": "."}, "Foam Workspace", "foam-workspace",
        [
            ("Decision Log.md", "Decision Log", "topic"),
            ("Team Notes.md", "Team Notes", "topic"),
            ("index.md", "index", "index"),
        ],
        (".foam/templates/new-note.md", ".vscode/notes.md"),
        "A team knowledge garden edited with Foam.",
    ),
    "shapes/foam-jsonc": Shape(  # no .foam marker: the JSONC extensions.json says Foam
        "foam", "foambubble/foam", {"source_root": "."}, "foam-jsonc", "foam-jsonc",
        [
            ("guides/compost-guide.md", "guides/compost-guide", "topic"),
            ("readme.md", "readme", "topic"),
            ("seed-starting.md", "seed-starting", "topic"),
            ("watering-schedule.md", "watering-schedule", "topic"),
        ],
    ),
    "shapes/obsidian-properties": Shape(
        "obsidian", "Obsidian vault", {"source_root": "."}, "obsidian-properties",
        "obsidian-properties",
        [
            ("Cities.md", "Cities", "topic"),
            ("Places/Blue Bottle Kiyosumi.md", "Places/Blue Bottle Kiyosumi", "topic"),
            ("Places/Tokyo.md", "Places/Tokyo", "topic"),
            ("Places.md", "Places", "topic"),
            ("Trip Plan.md", "Trip Plan", "topic"),
        ],
    ),
    "shapes/dendron-self-contained": Shape(  # vault fsPath '.', selfContained: notes/
        "dendron", "dendronhq/dendron", {"source_root": "notes"}, "notes", "notes",
        [
            ("handbook.people.remote-work.md", "people0remote00000001", "topic"),
            ("handbook.sop.time-off.md", "sop0timeoff0000000001", "topic"),
            ("root.md", "rootnote0000000000001", "topic"),
        ],
        ("README.md",),
    ),
    "shapes/okf-bundle": Shape(
        "okf-v0.2", "Open Knowledge Format v0.2",
        {"source_root": ".", "source_profile": "okf-v0.2", "format_version": "0.2"},
        "Finance Knowledge Bundle", "finance-knowledge-bundle",
        [
            ("computations/revenue-ytd.md", "computations/revenue-ytd", "topic"),
            ("dependencies/payments-auth.md", "dependencies/payments-auth", "topic"),
            ("drafts/proposed-contract.md", "drafts/proposed-contract", "topic"),
            ("index.md", "index", "index"),
            ("metrics/index.md", "metrics/index", "index"),
            ("metrics/revenue.md", "revenue-metric", "topic"),
        ],
        ("log.md",),
        "Metrics, computations and dependencies of the finance team, as an OKF v0.2 bundle.",
    ),
    "shapes/generic-markdown": Shape(
        "generic-markdown", "generic-markdown", {"source_root": "."}, "generic-markdown",
        "generic-markdown",
        [
            ("billing/refund-handler.md", "billing/refund-handler", "topic"),
            ("billing/refund.v1-beta.md", "billing/refund.v1-beta", "topic"),
            ("guide/quickstart.md", "guide/quickstart", "topic"),
            ("ops/deploy-notes.md", "ops/deploy-notes", "topic"),
            ("ops/vendor-escalation.md", "ops/vendor-escalation", "topic"),
            ("team.md", "team", "topic"),
        ],
    ),
    "shapes/korean-wiki": Shape(
        "llmwiki-markdown", "llmwiki-markdown", {"source_root": "."}, "제품 운영 위키", "제품-운영-위키",
        [
            ("hot.md", "hot", "hot"),
            ("index.md", "index", "index"),
            ("ja-release-notes.md", "ja-release-notes", "topic"),
            ("zh-deploy-notes.md", "zh-deploy-notes", "topic"),
            ("계약-관리.md", "계약-관리", "topic"),
            ("릴리스-체크리스트.md", "릴리스-체크리스트", "topic"),
            ("장애-대응.md", "장애-대응", "topic"),
            ("초안-메모.md", "초안-메모", "topic"),
            ("환불-정책.md", "환불-정책", "topic"),
        ],
        (),
        "제품 운영팀이 함께 쓰는 계약, 릴리스, 환불 관련 문서 모음입니다.",
    ),
    "shapes/llmwiki-compiler-output": Shape(
        "llmwiki-markdown", "llmwiki-markdown", {"source_root": "."}, "Compiler Output",
        "compiler-output",
        [
            ("hot.md", "hot", "hot"),
            ("index.md", "index", "index"),
            ("packaging-topic.md", "packaging-topic", "topic"),
        ],
        (),
        "Pages emitted by an LLMWiki compiler run.",
    ),
    "shapes/logseq-graph": Shape(
        "logseq", "logseq/logseq", {"source_root": "."}, "logseq-graph", "logseq-graph",
        [
            ("pages/Org-Page.org", "pages/Org-Page", "topic"),
            ("pages/Product.md", "pages/Product", "topic"),
            ("pages/Project___Alpha.md", "pages/Project___Alpha", "topic"),
            ("pages/Workflow.md", "pages/Workflow", "topic"),
            ("journals/2026_07_01.md", "journals/2026_07_01", "topic"),
        ],
    ),
    "shapes/native-wiki-root": Shape(
        "llmwiki-markdown", "llmwiki-markdown", {"source_root": "wiki"}, "Native Wiki Fixture",
        "native-wiki-fixture",
        [
            ("CRITICAL_FACTS.md", "CRITICAL_FACTS", "topic"),
            ("concepts/release.md", "concepts/release", "topic"),
            ("overview.md", "overview", "overview"),
        ],
        ("README.md",),
        "A compiled wiki that lives in a nested wiki folder of a repository.",
    ),
    "shapes/obsidian-vault": Shape(
        "obsidian", "Obsidian vault", {"source_root": "."}, "Obsidian Product Vault",
        "obsidian-product-vault",
        [
            (".raw/personal-agent-notes/runtime-ingest.md", ".raw/personal-agent-notes/runtime-ingest",
             "topic"),
            ("Product Process.md", "Product Process", "topic"),
            ("Release Checklist.md", "Release Checklist", "topic"),
            ("wiki/hot.md", "wiki/hot", "hot"),
            ("wiki/index.md", "wiki/index", "index"),
            ("wiki/overview.md", "wiki/overview", "overview"),
        ],
        (".obsidian/templates/template.md",),
        "Product process notes kept in an Obsidian vault.",
    ),
    "shapes/openwiki-repo": Shape(
        "llmwiki-markdown", "llmwiki-markdown", {"source_root": "openwiki"}, "Ledger Service OpenWiki",
        "ledger-service-openwiki",
        [
            ("architecture/overview.md", "architecture/overview", "topic"),
            ("guides/setup.md", "guides/setup", "topic"),
            ("quickstart.md", "quickstart", "index"),
        ],
        ("README.md", "docs/contributing.md"),
        "Agent-facing documentation for the ledger service repository.",
    ),
    "shapes/quartz-site": Shape(
        "quartz", "jackyzha0/quartz", {"content_root": "content", "source_root": "content"},
        "Quartz Garden", "quartz-garden",
        [
            ("drafts/unfinished.md", "drafts/unfinished", "topic"),
            ("index.md", "index", "index"),
            ("topic.md", "topic", "topic"),
        ],
        (),
        "A published digital garden built with Quartz.",
    ),
    "shapes/quartz-yaml-site": Shape(
        "quartz", "jackyzha0/quartz", {"content_root": "content", "source_root": "content"},
        "Quartz YAML Notes", "quartz-yaml-notes",
        [("index.md", "index", "index"), ("notes.md", "notes", "topic")],
    ),
    "shapes/reference-sample": Shape(
        "llmwiki-markdown", "llmwiki-markdown", {"source_root": "."}, "Sample Packaging LLMWiki",
        "sample-packaging-llmwiki",
        [
            ("artwork-review.md", "artwork-review", "topic"),
            ("draft-note.md", "draft-note", "topic"),
            ("hot.md", "hot", "hot"),
            ("index.md", "index", "index"),
            ("requester-return.md", "requester-return", "topic"),
        ],
        (),
        "Synthetic packaging operations knowledge base.",
    ),
    "sample-wiki": Shape(
        "llmwiki-markdown", "llmwiki-markdown", {"source_root": "."}, "Sample Operations Wiki",
        "sample-operations-wiki",
        [
            ("concepts/artifact-signing.md", "concepts/artifact-signing", "topic"),
            ("concepts/config-flags.md", "concepts/config-flags", "topic"),
            ("concepts/semantic-versioning.md", "concepts/semantic-versioning", "topic"),
            ("hot.md", "hot", "hot"),
            ("index.md", "index", "index"),
            ("ko/release-checklist-ko.md", "ko/release-checklist-ko", "topic"),
            ("overview.md", "overview", "overview"),
            ("packaging-pipeline.md", "packaging-pipeline", "topic"),
            ("release-checklist.md", "release-checklist", "topic"),
            ("runbooks/hotfix-release.md", "runbooks/hotfix-release", "topic"),
            ("runbooks/incident-comms.md", "runbooks/incident-comms", "topic"),
            ("runbooks/rollback.md", "runbooks/rollback", "topic"),
            ("runbooks/token-rotation.md", "runbooks/token-rotation", "topic"),
            ("vendor-contacts.md", "vendor-contacts", "topic"),
        ],
        (),
        "Release and packaging operations notes for a small software team.",
    ),
}


def test_every_fixture_folder_has_expectations() -> None:
    folders = {f"shapes/{p.name}" for p in (FIXTURES / "shapes").iterdir() if p.is_dir()}
    folders.discard("shapes/marker-only")
    folders.add("sample-wiki")
    assert folders == set(SHAPES) == set(COUNTS)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_fixture_shape(name: str) -> None:
    expected = SHAPES[name]
    projection = project(FIXTURES / name)
    assert projection.layout.adapter == expected.adapter
    assert projection.layout.implementation == expected.implementation
    assert projection.layout.metadata == expected.metadata
    assert list(projection.layout.metadata) == list(expected.metadata)  # key order
    assert projection.title == expected.title
    assert projection.source_id == expected.source_id
    assert projection.description == expected.description
    assert pages_of(projection) == expected.pages
    assert projection.diagnostics == ()


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_fixture_counts(name: str) -> None:
    projection = project(FIXTURES / name)
    full, approved = projection.full_graph, projection.approved_graph
    assert (
        projection.page_count,
        projection.approved_page_count,
        len(full.nodes),
        len(full.edges),
        len(approved.nodes),
        len(approved.edges),
    ) == COUNTS[name]
    metadata = projection.projection_metadata()
    assert (metadata["graph_node_count"], metadata["graph_edge_count"]) == COUNTS[name][2:4]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_fixture_files_that_are_not_pages(name: str) -> None:
    expected = SHAPES[name]
    root = FIXTURES / name
    projection = project(root)
    page_root = expected.metadata["source_root"]
    served = {p.path if page_root == "." else f"{page_root}/{p.path}" for p in projection.pages}
    for rel in expected.not_pages:
        assert (root / rel).is_file(), rel  # the fixture really holds it
        assert rel not in served
        last_line = (root / rel).read_text(encoding="utf-8").strip().splitlines()[-1]
        assert all(last_line not in p.text for p in projection.pages), rel


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_scanning_a_fixture_never_modifies_it(name: str) -> None:
    root = FIXTURES / name
    before = tree_digest(root)
    projection = project(root)
    assert projection.page_count >= 1
    _ = projection.approved_graph.nodes
    assert tree_digest(root) == before


# -- root errors (1.1, A3) --------------------------------------------------------------


@pytest.mark.parametrize("marker", ["dendron", "foam", "logseq", "quartz"])
def test_marker_only_roots_are_unsupported(marker: str) -> None:
    mirror = FolderMirror((FIXTURES / "shapes/marker-only" / marker).resolve(), source_id=None,
                          max_page_bytes=8 << 20)
    mirror.full_scan()
    with pytest.raises(WikiRootError) as caught:
        mirror.project()
    assert caught.value.code == "wiki_root_unsupported"
    assert caught.value.safe_message == UNSUPPORTED


def test_folder_of_marker_only_folders_is_unsupported() -> None:
    with pytest.raises(WikiRootError) as caught:
        project(FIXTURES / "shapes/marker-only")
    assert caught.value.code == "wiki_root_unsupported"


def test_empty_directory_is_unsupported(tmp_path: Path) -> None:
    with pytest.raises(WikiRootError) as caught:
        project(tmp_path)
    assert caught.value.code == "wiki_root_unsupported"


def test_missing_root(tmp_path: Path) -> None:
    mirror = FolderMirror(tmp_path / "absent", source_id=None, max_page_bytes=8 << 20)
    with pytest.raises(WikiRootError) as caught:
        mirror.full_scan()
    assert caught.value.code == "wiki_root_missing"
    assert caught.value.safe_message == MISSING
    with pytest.raises(WikiRootError) as again:
        mirror.project()
    assert again.value.code == "wiki_root_missing"


def test_file_as_root_is_missing(tmp_path: Path) -> None:
    target = tmp_path / "page.md"
    target.write_text("# Page\n", encoding="utf-8")
    with pytest.raises(WikiRootError) as caught:
        project(target)
    assert caught.value.code == "wiki_root_missing"


def test_root_deleted_after_scan_is_missing(tmp_path: Path) -> None:
    root = build(tmp_path / "w", {"a.md": "# A\n"})
    mirror = FolderMirror(root, source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    (root / "a.md").unlink()
    root.rmdir()
    with pytest.raises(WikiRootError) as caught:
        mirror.project()
    assert caught.value.code == "wiki_root_missing"


@pytest.mark.parametrize(
    ("files", "detected_by"),
    [
        ({"dendron.yml": "vaults:\n  - fsPath: vault\n", "hot.md": "# Hot\n", "index.md": "# Index\n"},
         "dendron with a missing vault"),
        ({"logseq/config.edn": "{}", "index.md": "# Index\n", "hot.md": "# Hot\n"},
         "logseq without pages/ or journals/"),
        ({"quartz.config.ts": "export default {}", "content/readme.txt": "x", "index.md": "# Index\n"},
         "quartz whose content/ holds no pages"),
    ],
)
def test_no_fall_through_once_an_adapter_detects(tmp_path: Path, files: dict[str, str],
                                                 detected_by: str) -> None:
    root = build(tmp_path / "root", files)
    with pytest.raises(WikiRootError) as caught:
        project(root)
    assert caught.value.code == "wiki_root_unsupported", detected_by


def test_obsidian_marker_with_only_templates_is_unsupported(tmp_path: Path) -> None:
    root = build(tmp_path / "vault", {".obsidian/templates/t.md": "# T\n", ".obsidian/app.json": "{}"})
    with pytest.raises(WikiRootError) as caught:
        project(root)
    assert caught.value.code == "wiki_root_unsupported"


# -- adapter order and markers (1.2) ----------------------------------------------------


def test_obsidian_wins_over_logseq_and_llmwiki(tmp_path: Path) -> None:
    root = build(tmp_path / "v", {
        ".obsidian/app.json": "{}", "pages/a.md": "# A\n", "journals/b.md": "# B\n",
        "hot.md": "# Hot\n", "index.md": "# Index\n",
    })
    projection = project(root)
    assert projection.layout.adapter == "obsidian"
    assert [p.path for p in projection.pages] == ["hot.md", "index.md", "journals/b.md", "pages/a.md"]


def test_logseq_by_pages_and_journals_dirs(tmp_path: Path) -> None:
    root = build(tmp_path / "g", {"pages/A.md": "- a\n", "journals/2026_01_01.md": "- j\n",
                                  "other/x.md": "# not served\n"})
    projection = project(root)
    assert projection.layout.adapter == "logseq"
    assert [p.path for p in projection.pages] == ["pages/A.md", "journals/2026_01_01.md"]


def test_logseq_org_suffix_is_case_insensitive(tmp_path: Path) -> None:
    root = build(tmp_path / "g", {"logseq/config.edn": "{}", "pages/Upper.ORG": "* x\n",
                                  "pages/Lower.md": "- y\n", "pages/skip.txt": "z"})
    projection = project(root)
    assert [p.path for p in projection.pages] == ["pages/Lower.md", "pages/Upper.ORG"]


def test_dendron_wins_over_foam_and_quartz(tmp_path: Path) -> None:
    root = build(tmp_path / "d", {"dendron.yml": "version: 5\n", ".foam/keep": "", "quartz.config.ts": "",
                                  "note.md": "# Note\n"})
    projection = project(root)
    assert projection.layout.adapter == "dendron"
    assert projection.layout.metadata == {"source_root": "."}
    assert [p.path for p in projection.pages] == ["note.md"]


@pytest.mark.parametrize(
    "files",
    [
        {".foam/templates/t.md": "# T\n"},
        {".foam": "marker file\n"},
        {".vscode/extensions.json": json.dumps(
            {"recommendations": ["ms-python.python", "Foam.Foam-VSCode"]})},
    ],
    ids=["foam-dir", "foam-file", "vscode-recommendation"],
)
def test_foam_markers(tmp_path: Path, files: dict[str, str]) -> None:
    root = build(tmp_path / "f", {**files, "hot.md": "# Hot\n", "index.md": "# Index\n"})
    projection = project(root)
    assert projection.layout.adapter == "foam"
    assert [p.path for p in projection.pages] == ["hot.md", "index.md"]


@pytest.mark.parametrize(
    "extensions",
    ['{"recommendations": ["ms-python.python"]}', '{"recommendations": "foam"}', "not json", "[\"foam\"]"],
)
def test_vscode_extensions_without_foam_recommendation_is_not_foam(tmp_path: Path, extensions: str) -> None:
    root = build(tmp_path / "f", {".vscode/extensions.json": extensions, "note.md": "# N\n"})
    assert project(root).layout.adapter == "generic-markdown"


@pytest.mark.parametrize("config", ["quartz.config.ts", "quartz.config.js", "quartz.config.yaml",
                                    "quartz.config.yml"])
def test_quartz_configs(tmp_path: Path, config: str) -> None:
    root = build(tmp_path / "q", {config: "", "content/index.md": "---\ntitle: Garden\n---\n",
                                  "outside.md": "# Outside\n"})
    projection = project(root)
    assert projection.layout.adapter == "quartz"
    assert projection.layout.metadata == {"content_root": "content", "source_root": "content"}
    assert [p.path for p in projection.pages] == ["index.md"]


def test_quartz_without_content_dir_serves_the_root(tmp_path: Path) -> None:
    root = build(tmp_path / "q", {"quartz.config.ts": "", "index.md": "# Home\n", "notes/a.md": "# A\n"})
    projection = project(root)
    assert projection.layout.metadata == {"content_root": ".", "source_root": "."}
    assert pages_of(projection) == [("index.md", "index", "index"), ("notes/a.md", "notes/a", "topic")]


# -- LLMWiki source root (1.2.1) --------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "source_root"),
    [
        ({"wiki/.wiki-compiler.json": "{}", "wiki/a.md": "# A\n"}, "wiki"),
        ({"wiki/Overview.md": "# O\n", "wiki/a.md": "# A\n"}, "wiki"),
        ({"wiki/critical_facts.md": "# C\n"}, "wiki"),
        ({"wiki/entities/acme.md": "# Acme\n"}, "wiki"),
        ({"openwiki/quickstart.md": "# Q\n"}, "openwiki"),
        ({"wiki/hot.md": "# H\n", "openwiki/index.md": "# I\n"}, "wiki"),
        ({".wiki-compiler.json": "{}", "a.md": "# A\n"}, "."),
        ({"hot.md": "# H\n", "overview.md": "# O\n"}, "."),
        ({"hot.md": "# H\n", "index.md": "# I\n"}, "."),
        ({"index.md": "# I\n", "syntheses/deep/x.md": "# X\n"}, "."),
        ({"quickstart.md": "# Q\n", "questions/q.md": "# Q\n"}, "."),
    ],
)
def test_llmwiki_source_root_rules(tmp_path: Path, files: dict[str, str], source_root: str) -> None:
    root = build(tmp_path / "repo", {**files, "README.md": "# Repo readme\n"})
    projection = project(root)
    assert projection.layout.adapter == "llmwiki-markdown"
    assert projection.layout.metadata == {"source_root": source_root}
    if source_root != ".":
        assert all(not p.path.startswith(f"{source_root}/") for p in projection.pages)
        assert "README.md" not in {p.path for p in projection.pages}


@pytest.mark.parametrize(
    "files",
    [
        {"wiki/a.md": "# A\n"},  # a wiki/ folder with plain pages only
        {"hot.md": "# H\n"},  # hot without index or overview
        {"concepts/a.md": "# A\n"},  # typed pages without a hub file
        {"index.md": "# I\n", "concepts/readme.txt": "no pages"},  # typed dir without pages
        {"quickstart.md": "# Q\n"},  # quickstart in a root not named wiki/openwiki
    ],
)
def test_not_llmwiki(tmp_path: Path, files: dict[str, str]) -> None:
    root = build(tmp_path / "notes", files)
    projection = project(root)
    assert projection.layout.adapter == "generic-markdown"
    assert projection.layout.metadata == {"source_root": "."}


@pytest.mark.parametrize("name", ["wiki", "OpenWiki"])
def test_root_named_wiki_with_quickstart_is_llmwiki(tmp_path: Path, name: str) -> None:
    root = build(tmp_path / name, {"quickstart.md": "# Q\n", "a.md": "# A\n"})
    projection = project(root)
    assert projection.layout.adapter == "llmwiki-markdown"
    assert projection.layout.metadata == {"source_root": "."}
    assert pages_of(projection) == [("a.md", "a", "topic"), ("quickstart.md", "quickstart", "index")]


def test_symlinked_wiki_dir_is_not_a_source_root(tmp_path: Path) -> None:
    root = build(tmp_path / "repo", {"real/index.md": "# I\n", "real/hot.md": "# H\n", "top.md": "# T\n"})
    os.symlink(root / "real", root / "wiki", target_is_directory=True)
    projection = project(root)
    assert projection.layout.adapter == "generic-markdown"
    assert [p.path for p in projection.pages] == ["real/hot.md", "real/index.md", "top.md"]


def test_nested_source_root_serves_only_its_subtree(tmp_path: Path) -> None:
    root = build(tmp_path / "repo", {
        "wiki/index.md": "---\nwiki_title: Nested\n---\n# I\n",
        "wiki/concepts/release.md": "# Release\n",
        "README.md": "# Readme\n",
        "raw/capture.md": "# Raw\n",
        "log.md": "# Log\n",
    })
    projection = project(root)
    assert pages_of(projection) == [
        ("concepts/release.md", "concepts/release", "topic"),
        ("index.md", "index", "index"),
    ]
    assert projection.title == "Nested"


# -- A6 / A7 / A8 / A9 / A10 ------------------------------------------------------------


def test_native_nested_root_paths_are_source_root_relative() -> None:
    projection = project(FIXTURES / "shapes/native-wiki-root")
    assert projection.find_page("overview") is not None
    assert projection.find_page("concepts/release.md") is not None
    for key in ("wiki/overview", "wiki/overview.md", "wiki/concepts/release.md", "README", "README.md"):
        assert projection.find_page(key) is None, key
    assert projection.role_page_path("overview") == "overview.md"
    assert projection.role_page_path("index") == ""


def test_openwiki_quickstart_is_index_and_orients_first() -> None:
    projection = project(FIXTURES / "shapes/openwiki-repo")
    assert projection.role_page_path("index") == "quickstart.md"
    assert [p.path for p in projection.ordered(False)][:2] == ["quickstart.md", "architecture/overview.md"]
    texts = " ".join(p.text for p in projection.pages)
    assert "REPOREADME" not in texts


def test_root_quickstart_is_index_in_generic_markdown(tmp_path: Path) -> None:
    root = build(tmp_path / "docs", {"quickstart.md": "# Quickstart\n",
                                     "architecture/overview.md": "# Arch\n"})
    projection = project(root)
    assert projection.layout.adapter == "generic-markdown"
    assert pages_of(projection) == [
        ("architecture/overview.md", "architecture/overview", "topic"),
        ("quickstart.md", "quickstart", "index"),
    ]
    assert projection.role_page_path("index") == "quickstart.md"
    assert [p.path for p in projection.ordered(False)] == ["quickstart.md", "architecture/overview.md"]


def test_generic_nested_quickstart_stays_topic() -> None:
    projection = project(FIXTURES / "shapes/generic-markdown")
    quickstart = projection.find_page("guide/quickstart")
    assert quickstart is not None
    assert quickstart.role == "topic"
    assert projection.role_page_path("index") == ""


def test_obsidian_nested_hubs_roles_and_orientation() -> None:
    projection = project(FIXTURES / "shapes/obsidian-vault")
    assert projection.role_page_path("hot") == "wiki/hot.md"
    assert projection.role_page_path("index") == "wiki/index.md"
    assert projection.role_page_path("overview") == "wiki/overview.md"
    orientation = [p.path for p in projection.ordered(False)][:3]
    assert orientation == ["wiki/hot.md", "wiki/index.md", "wiki/overview.md"]
    texts = " ".join(p.text for p in projection.pages)
    assert "TEMPLATEONLY" not in texts
    assert projection.find_page(".raw/personal-agent-notes/runtime-ingest") is not None


def test_obsidian_title_based_wikilinks_resolve() -> None:
    projection = project(FIXTURES / "shapes/obsidian-vault")
    edges = {(e["source"], e["target"]) for e in graph(projection)["edges"] if e["relation"] == "links_to"}
    assert ("page:Product Process", "page:Release Checklist") in edges
    assert ("page:Release Checklist", "page:Product Process") in edges
    # 'Process Guide' is an alias of Product Process (its frontmatter `aliases:`).
    assert ("page:Release Checklist", "placeholder:Process-Guide") not in edges
    assert not {target for _, target in edges if target.startswith("placeholder:Process")}


def test_root_sidecar_endpoints_resolve_to_nested_pages() -> None:
    rendered = graph(project(FIXTURES / "shapes/native-wiki-root"))
    supports = [e for e in rendered["edges"] if e["relation"] == "supports"]
    assert [(e["source"], e["target"]) for e in supports] == [("page:overview", "page:concepts/release")]
    tracks = [e for e in rendered["edges"] if e["relation"] == "tracks"]
    assert [(e["source"], e["target"]) for e in tracks] == [("page:concepts/release", "external:GH-42")]
    placeholders = [n["id"] for n in rendered["nodes"] if n["kind"] == "placeholder"]
    assert placeholders == ["placeholder:missing-topic"]


def test_nested_area_index_is_topic_and_not_the_title_page(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {
        "team.md": "# Team\n",
        "area/index.md": "---\nwiki_title: Nested Title\n---\n# Area Index\n",
    })
    projection = project(root)
    assert projection.layout.adapter == "generic-markdown"
    assert pages_of(projection) == [("area/index.md", "area/index", "topic"), ("team.md", "team", "topic")]
    assert projection.title == "kb"
    assert projection.source_id == "kb"
    assert projection.role_page_path("index") == ""


def test_nested_area_index_in_llmwiki_root(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {
        "hot.md": "# Hot\n",
        "index.md": "---\nwiki_title: Root Title\n---\n# Root\n",
        "area/index.md": "---\nwiki_title: Nested Title\n---\n# Area\n",
        "area/overview.md": "# Area Overview\n",
    })
    projection = project(root)
    roles = {p.path: p.role for p in projection.pages}
    assert roles == {"area/index.md": "topic", "area/overview.md": "topic", "hot.md": "hot",
                     "index.md": "index"}
    assert projection.title == "Root Title"


# -- hub roots for whole-tree adapters (1.2.2) and roles (1.8) --------------------------


def test_generic_hub_roots(tmp_path: Path) -> None:
    root = build(tmp_path / "site", {
        "docs/index.md": "# Docs Index\n",
        "docs/overview.md": "# Docs Overview\n",
        "guide/quickstart.md": "# Quick\n",
        "kb/index.md": "# KB\n",
        "kb/concepts/x.md": "# X\n",
        "deep/a/index.md": "# Deep\n",
        "marked/.wiki-compiler.json": "{}",
        "marked/hot.md": "# Marked Hot\n",
    })
    roles = {p.path: p.role for p in project(root).pages}
    assert roles == {
        "deep/a/index.md": "topic",
        "docs/index.md": "index",
        "docs/overview.md": "overview",
        "guide/quickstart.md": "topic",
        "kb/concepts/x.md": "topic",
        "kb/index.md": "index",
        "marked/hot.md": "hot",
    }


def test_hub_file_names_are_case_insensitive_and_critical_facts_is_topic(tmp_path: Path) -> None:
    root = build(tmp_path / "site", {"HOT.md": "# H\n", "Index.md": "# I\n", "OverView.md": "# O\n",
                                     "critical_facts.md": "# C\n"})
    roles = {p.path: p.role for p in project(root).pages}
    assert roles == {"HOT.md": "hot", "Index.md": "index", "OverView.md": "overview",
                     "critical_facts.md": "topic"}


def test_llmwiki_has_no_extra_hub_roots(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {"hot.md": "# H\n", "index.md": "# I\n",
                                   "docs/index.md": "# DI\n", "docs/overview.md": "# DO\n"})
    roles = {p.path: p.role for p in project(root).pages}
    assert roles == {"docs/index.md": "topic", "docs/overview.md": "topic", "hot.md": "hot",
                     "index.md": "index"}


def test_title_page_prefers_index_over_overview(tmp_path: Path) -> None:
    root = build(tmp_path / "kb", {
        "hot.md": "# H\n",
        "overview.md": "---\nwiki_title: From Overview\n---\n",
        "index.md": "---\ntitle: Index Title\ndescription: 12\n---\n",
    })
    projection = project(root)
    assert projection.title == "Index Title"
    assert projection.description == "12"
    assert projection.source_id == "index-title"


# -- inclusion rules (1.3) --------------------------------------------------------------


def test_ignored_directories_and_vscode_markdown_are_not_pages(tmp_path: Path) -> None:
    root = build(tmp_path / "site", {
        "keep.md": "# Keep\n",
        "upper.MD": "# Upper suffix is not a page\n",
        "asset.txt": "not markdown",
        ".git/x.md": "# git\n",
        "node_modules/pkg/readme.md": "# npm\n",
        ".venv/lib/x.md": "# venv\n",
        "__pycache__/x.md": "# cache\n",
        "dist/x.md": "# dist\n",
        "sub/build/x.md": "# nested build\n",
        ".runtime-logs/x.md": "# logs\n",
        ".vscode/notes.md": "# vscode\n",
        ".hidden/served.md": "# Hidden But Served\n",
    })
    assert [p.path for p in project(root).pages] == [".hidden/served.md", "keep.md"]


def test_root_inside_a_directory_named_build_is_served(tmp_path: Path) -> None:
    root = build(tmp_path / "build" / "dist" / "wiki-root", {"page.md": "# Page\n"})
    assert [p.path for p in project(root).pages] == ["page.md"]


def test_symlinked_markdown_inside_the_root_is_ignored(tmp_path: Path) -> None:
    root = build(tmp_path / "site", {"real.md": "# Real\n"})
    os.symlink(root / "real.md", root / "alias.md")
    projection = project(root)
    assert [p.path for p in projection.pages] == ["real.md"]
    assert [(d.path, d.reason, d.skipped) for d in projection.diagnostics] == [
        ("alias.md", "symlink_ignored", True)
    ]


def test_page_order_compares_path_parts(tmp_path: Path) -> None:
    root = build(tmp_path / "site", {"a-b.md": "# AB\n", "a/x.md": "# AX\n", "a.md": "# A\n",
                                     "B.md": "# B\n"})
    assert [p.path for p in project(root).pages] == ["B.md", "a/x.md", "a-b.md", "a.md"]


# -- Dendron (1.2.3, A13) ---------------------------------------------------------------


def test_dendron_single_vault_hierarchy_and_alias() -> None:
    projection = project(FIXTURES / "shapes/dendron-single")
    rendered = graph(projection)
    edges = [(e["source"], e["target"], e["relation"]) for e in rendered["edges"]]
    assert ("page:process", "page:process.review", "parent_of") in edges
    assert edges.count(("page:root", "page:process.review", "links_to")) == 1
    labels = {n["label"] for n in rendered["nodes"]}
    assert "Review Note" not in labels
    assert projection.find_page("root") is not None
    assert "OUTSIDEVAULT" not in " ".join(p.text for p in projection.pages)


def test_dendron_multi_vault_paths_and_placeholder_parent() -> None:
    projection = project(FIXTURES / "shapes/dendron-multi")
    assert "SCRATCHONLY" not in " ".join(p.text for p in projection.pages)
    rendered = graph(projection)
    parent_of = [(e["source"], e["target"]) for e in rendered["edges"] if e["relation"] == "parent_of"]
    assert parent_of == [
        ("placeholder:assets-brand.logo", "page:assets/brand.logo.usage"),
        ("page:vault/team", "page:vault/team.onboarding"),
    ]
    node = next(n for n in rendered["nodes"] if n["id"] == "placeholder:assets-brand.logo")
    assert node["kind"] == "placeholder"
    assert node["metadata"] == {"unresolved": True, "source": "dendron_hierarchy"}


@pytest.mark.parametrize(
    ("config", "metadata", "paths"),
    [
        ("vaults:\n  - fsPath: ./v1\n", {"source_root": "v1"}, ["a.md"]),
        ("vaults:\n  - fsPath: 'v1\\'\n", {"source_root": "v1"}, ["a.md"]),
        ("workspace:\n  vaults:\n    - fsPath: v1\nvaults:\n  - fsPath: v2\n",
         {"source_root": ".", "vault_roots": "v1,v2"}, ["v1/a.md", "v2/b.md"]),
        ("vaults:\n  - fsPath: v1\n  - fsPath: v1\n", {"source_root": "v1"}, ["a.md"]),
        ("vaults:\n  - fsPath: v1\n  - fsPath: ../outside\n  - fsPath: ''\n  - just-a-string\n",
         {"source_root": "v1"}, ["a.md"]),
        ("version: 5\n", {"source_root": "."}, ["loose.md", "v1/a.md", "v2/b.md"]),
    ],
    ids=["dot-slash", "backslash", "workspace-and-top-level", "duplicate", "dropped-entries", "no-vaults"],
)
def test_dendron_vault_configuration(tmp_path: Path, config: str, metadata: dict[str, str],
                                     paths: list[str]) -> None:
    root = build(tmp_path / "ws", {"dendron.yml": config, "v1/a.md": "# A\n", "v2/b.md": "# B\n",
                                   "loose.md": "# Loose\n"})
    projection = project(root)
    assert projection.layout.adapter == "dendron"
    assert projection.layout.metadata == metadata
    assert [p.path for p in projection.pages] == paths


def test_dendron_multi_vault_skips_missing_vault_dirs(tmp_path: Path) -> None:
    root = build(tmp_path / "ws", {"dendron.yml": "vaults:\n  - fsPath: v1\n  - fsPath: gone\n",
                                   "v1/a.md": "# A\n"})
    projection = project(root)
    assert projection.layout.metadata["source_root"] == "."
    assert [p.path for p in projection.pages] == ["v1/a.md"]


# -- Logseq (A17) -----------------------------------------------------------------------


def test_logseq_namespace_title_tags_and_org_page() -> None:
    projection = project(FIXTURES / "shapes/logseq-graph")
    alpha = projection.find_page("pages/Project___Alpha")
    assert alpha is not None
    assert alpha.title == "Project/Alpha"
    assert alpha.tags == ("project/alpha",)
    assert "tag:project-alpha" in {n["id"] for n in graph(projection)["nodes"]}
    org = projection.find_page("pages/Org-Page")
    assert org is not None
    # Logseq shows a page by its file name as it is ('-' stays)
    assert (org.title, org.tags, org.headings, org.links) == ("Org-Page", ("org-fixture",), (), ("Product",))
    workflow = projection.find_page("pages/Workflow")
    assert workflow is not None
    assert workflow.tags == ("process", "workflow")
    rendered = graph(projection)
    edges = {(e["source"], e["target"]) for e in rendered["edges"] if e["relation"] == "links_to"}
    assert ("page:pages/Product", "page:pages/Project___Alpha") in edges  # [[Project/Alpha]] by title
    assert projection.role_page_path("hot") == projection.role_page_path("index") == ""


# -- parsing through the folder (A18, A19, A20) -----------------------------------------


def test_invalid_frontmatter_page_still_loads(tmp_path: Path) -> None:
    root = build(tmp_path / "w", {
        "broken.md": "---\ntitle: [unclosed\n---\n# Heading From Body\n\nText.\n",
        "ok.md": "# Ok\n",
    })
    projection = project(root)
    broken = projection.find_page("broken")
    assert broken is not None
    assert broken.frontmatter == {}
    assert broken.title == "Heading From Body"
    assert [(d.path, d.reason, d.skipped) for d in projection.diagnostics] == [
        ("broken.md", "frontmatter_invalid", False)
    ]
    assert projection.approved_page_count == 2


def test_dates_come_back_json_safe(tmp_path: Path) -> None:
    root = build(tmp_path / "w", {
        "d.md": "---\nupdated_at: 2026-07-10\ncreated: 2026-07-10T10:00:00\n---\n# D\n",
    })
    page = project(root).pages[0]
    assert page.frontmatter == {"updated_at": "2026-07-10", "created": "2026-07-10T10:00:00"}
    assert page.updated_at == "2026-07-10"
    json.dumps(page.payload())


def test_numeric_hashtags_are_not_tags(tmp_path: Path) -> None:
    root = build(tmp_path / "w", {"t.md": "# T\n\nIssue #20 and #123, but #review-41 and #태그1.\n"})
    projection = project(root)
    assert projection.pages[0].tags == ("review-41", "태그1")
    tag_ids = [n["id"] for n in graph(projection)["nodes"] if n["kind"] == "tag"]
    assert tag_ids == ["tag:review-41", "tag:태그1"]


def test_crlf_and_bom_files_parse_like_lf(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    (root / "crlf.md").write_bytes(
        b"---\r\ntitle: CRLF Page\r\ntags:\r\n  - windows\r\n---\r\n# H\r\n[[bom]]\r\n")
    (root / "bom.md").write_bytes(b"\xef\xbb\xbf---\ntitle: Bom Page\n---\n# B\n")
    projection = project(root)
    crlf = projection.find_page("crlf")
    bom = projection.find_page("bom")
    assert crlf is not None and bom is not None
    assert (crlf.title, crlf.tags, crlf.links, crlf.text) == (
        "CRLF Page", ("windows",), ("bom",), "# H\n[[bom]]")
    assert bom.title == "Bom Page"
    assert bom.frontmatter == {"title": "Bom Page"}
    assert projection.diagnostics == ()
