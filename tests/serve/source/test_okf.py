"""The OKF v0.2 input profile: detection, strict validation, page fields and the okf object."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from serve.errors import WikiRootError
from serve.settings import ServeSettings, parse_source_profile, resolve_settings
from serve.snapshot.projection import Projection
from serve.source import okf
from serve.source.layout import FolderView, detect_layout
from serve.source.page import Page, ParseOptions
from serve.watch.mirror import FolderMirror
from tests.support.folders import FIXTURES
from tests.support.signature import signature_of

OKF = ParseOptions(okf=True)
ROOT_INDEX = '---\nokf_version: "0.2"\ntitle: Bundle\n---\n# Bundle\n'


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def mirror_of(root: Path, profile: str = "auto") -> FolderMirror:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20,
                          source_profile=profile)
    mirror.full_scan()
    return mirror


def project(root: Path, profile: str = "auto") -> Projection:
    return mirror_of(root, profile).project()


def rejected(root: Path, profile: str = "auto") -> str:
    """The operator text of the okf_v0_2_invalid error the root gives, without its ')'."""
    with pytest.raises(WikiRootError) as caught:
        project(root, profile)
    assert caught.value.code == "okf_v0_2_invalid"
    assert caught.value.safe_message == "Configured root is not a valid OKF v0.2 bundle."
    return str(caught.value).removesuffix(")")


def concept(frontmatter: str, body: str = "# Concept\n", path: str = "concept.md") -> Page:
    return okf.parse_okf_page(f"---\n{frontmatter}\n---\n{body}", path, OKF)


def okf_of(page: Page) -> dict[str, Any]:
    assert not okf.invalid_reason(page), page.degraded
    value: dict[str, Any] = json.loads(page.okf_json)
    return value


# -- detection ------------------------------------------------------------------------------


@pytest.mark.parametrize("declaration", ['okf_version: "0.2"', "okf_version: 0.2",
                                         'okfVersion: "0.2"', "okf_version: '0.2'"])
def test_root_index_declaring_0_2_is_detected(tmp_path: Path, declaration: str) -> None:
    write(tmp_path, {"index.md": f"---\n{declaration}\n---\n# Root\n",
                     "concept.md": "---\ntype: Note\n---\n# C\n"})
    projection = project(tmp_path)
    assert projection.layout.adapter == "okf-v0.2"
    assert projection.layout.implementation == "Open Knowledge Format v0.2"
    assert projection.layout.metadata == {"source_root": ".", "source_profile": "okf-v0.2",
                                          "format_version": "0.2"}


@pytest.mark.parametrize("index", [
    '---\nokf_version: "0.3"\n---\n# Root\n',  # another version
    "---\ntitle: Root\n---\n# Root\n",  # no declaration
    '# Root\n\nokf_version: "0.2"\n',  # no frontmatter
    '---\nokf_version: "0.2"\ntitle: [broken\n---\n# Root\n',  # strict parse fails
    '---\nokf_version: "0.2"\n# never closed\n',  # unclosed block
])
def test_other_roots_are_not_okf(tmp_path: Path, index: str) -> None:
    write(tmp_path, {"index.md": index, "notes.md": "# Notes\n"})
    assert project(tmp_path).layout.adapter == "generic-markdown"


def test_nested_index_does_not_declare_a_bundle(tmp_path: Path) -> None:
    write(tmp_path, {"area/index.md": ROOT_INDEX, "notes.md": "# Notes\n"})
    assert project(tmp_path).layout.adapter == "generic-markdown"


def test_symlinked_root_index_is_not_a_marker(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", {"index.md": ROOT_INDEX})
    root = write(tmp_path / "root", {"notes.md": "# Notes\n"})
    os.symlink(outside / "index.md", root / "index.md")
    assert project(root).layout.adapter == "generic-markdown"


def test_okf_is_detected_before_every_other_adapter(tmp_path: Path) -> None:
    write(tmp_path, {"index.md": ROOT_INDEX, "hot.md": "---\ntype: Note\n---\n# Hot\n",
                     "dendron.yml": "vaults: []\n"})
    (tmp_path / ".obsidian").mkdir()
    projection = project(tmp_path)
    assert projection.layout.adapter == "okf-v0.2"
    assert projection.find_page("hot") is not None
    assert projection.find_page("hot").role == "topic"  # type: ignore[union-attr]


def test_forced_profile_loads_an_unmarked_folder(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "---\ntype: Note\n---\n# A\n", "index.md": "# Plain index\n"})
    assert project(tmp_path).layout.adapter == "generic-markdown"
    projection = project(tmp_path, "okf-v0.2")
    assert projection.layout.adapter == "okf-v0.2"
    assert [p.path for p in projection.pages] == ["a.md", "index.md"]


def test_forced_profile_has_no_generic_fallback(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "# A without type\n"})
    assert "a.md is missing required type" in rejected(tmp_path, "okf-v0.2")


def test_detection_reads_only_the_root_index_head() -> None:
    reads: list[str] = []

    def read_text(rel: str) -> str | None:
        reads.append(rel)
        return okf.marker_head("---\ntitle: Plain\n---\n# Plain\n")

    view = FolderView(["index.md", "a.md", "b/c.md"], ["", "b"], [], read_text)
    layout = detect_layout(view, "root")
    assert layout is not None and layout.adapter == "generic-markdown"
    assert reads == ["index.md"]
    reads.clear()
    view = FolderView(["a.md"], [""], [], read_text)
    detect_layout(view, "root")
    assert reads == []  # no root index: nothing read


def test_marker_head_is_the_frontmatter_block() -> None:
    text = '---\nokf_version: "0.2"\n---\n# Body\n' + "x" * 100_000
    head = okf.marker_head(text)
    assert head == '---\nokf_version: "0.2"\n---'
    assert okf.marker_head(text[: okf.MARKER_READ_BYTES]) == head  # a truncated read agrees
    assert okf.marker_head("# no frontmatter\n") == ""
    assert okf.marker_head("---\n" + "k: v\n" * 20_000 + "---\n") == ""  # beyond the limit
    assert okf.declared_version(head) == "0.2"
    assert okf.declared_version("") == ""


def test_marker_head_survives_the_restart_cache_and_edits(tmp_path: Path) -> None:
    write(tmp_path, {"index.md": "---\ntitle: Plain\n---\n# Plain\n", "a.md": "---\ntype: N\n---\n# A\n"})
    mirror = mirror_of(tmp_path)
    assert mirror.project().layout.adapter == "generic-markdown"
    assert mirror.records["index.md"].text == "---\ntitle: Plain\n---"
    # Declaring the version is a content edit of a page, yet it switches the adapter.
    (tmp_path / "index.md").write_text(ROOT_INDEX, encoding="utf-8")
    mirror.refresh_files(["index.md"])
    assert mirror.project(None).layout.adapter == "okf-v0.2"


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "reason"), [
    ("---\ntype: Note\n# never closed\n", "OKF frontmatter is not closed in concept.md"),
    ("---\ntype: [broken\n---\n# C\n", "OKF frontmatter is invalid in concept.md"),
    ("---\n- a\n- b\n---\n# C\n", "OKF frontmatter must be a mapping in concept.md"),
    ("---\ntitle: No type\n---\n# C\n", "OKF concept concept.md is missing required type"),
    ("---\ntype: '  '\n---\n# C\n", "OKF concept concept.md is missing required type"),
    ("# No frontmatter at all\n", "OKF concept concept.md is missing required type"),
    ("---\ntype: attested computation\n---\n# C\n",
     "OKF Attested Computation is missing required runtime"),
    ("---\ntype: Note\nsources: rev-policy\n---\n# C\n", "OKF sources must be a list"),
    ("---\ntype: Note\nsources: [rev-policy]\n---\n# C\n", "OKF sources entries must be mappings"),
    ("---\ntype: Note\nsources:\n  - id: x\n---\n# C\n", "OKF sources entries require resource"),
    ("---\ntype: Note\nverified: yes\n---\n# C\n", "OKF verified must be a mapping or list"),
    ("---\ntype: Note\nverified:\n  at: 2026-01-01\n---\n# C\n", "OKF verified.by is required"),
    ("---\ntype: Note\nverified: [human:x]\n---\n# C\n", "OKF verified must be a mapping"),
    ("---\ntype: Note\ngenerated: agent:x\n---\n# C\n", "OKF generated must be a mapping"),
    ("---\ntype: Note\ngenerated:\n  at: 2026-01-01\n---\n# C\n", "OKF generated.by is required"),
    ("---\ntype: Note\nparameters:\n  a: 1\n---\n# C\n", "OKF parameters must be a list"),
    ("---\ntype: Note\nparameters: [1, 2]\n---\n# C\n", "OKF parameters entries must be mappings"),
])
def test_each_rule_rejects_the_whole_bundle(tmp_path: Path, text: str, reason: str) -> None:
    page = okf.parse_okf_page(text, "concept.md", OKF)
    assert okf.invalid_reason(page) == reason
    assert not page.approved
    write(tmp_path, {"index.md": ROOT_INDEX, "good.md": "---\ntype: Note\n---\n# Good\n",
                     "concept.md": text})
    assert rejected(tmp_path).endswith(f": {reason}")


def test_the_first_invalid_document_is_named(tmp_path: Path) -> None:
    write(tmp_path, {"index.md": ROOT_INDEX, "b.md": "# no type\n", "a.md": "# no type\n"})
    assert rejected(tmp_path).endswith("OKF concept a.md is missing required type")


def test_root_index_declaring_another_version_is_rejected_when_forced(tmp_path: Path) -> None:
    write(tmp_path, {"index.md": '---\nokfVersion: "0.3"\n---\n# Root\n',
                     "a.md": "---\ntype: Note\n---\n# A\n"})
    assert rejected(tmp_path, "okf-v0.2").endswith(
        "root index.md declares an unsupported OKF version")
    # Only the root index declares the bundle's version.
    nested = okf.parse_okf_page('---\nokf_version: "0.3"\n---\n# N\n', "area/index.md", OKF)
    assert okf.invalid_reason(nested) == ""


def test_index_pages_need_no_type_and_logs_are_never_read(tmp_path: Path) -> None:
    write(tmp_path, {"index.md": ROOT_INDEX, "area/index.md": "# Area\n",
                     "a.md": "---\ntype: Note\n---\n# A\n",
                     "log.md": "---\n[broken: yaml\n---\n", "area/LOG.md": "# no type\n"})
    projection = project(tmp_path)
    assert [(p.path, p.role) for p in projection.pages] == [
        ("a.md", "topic"), ("area/index.md", "index"), ("index.md", "index")]


def test_a_bundle_without_serveable_pages_is_invalid(tmp_path: Path) -> None:
    write(tmp_path, {"log.md": "# Log\n"})
    assert rejected(tmp_path, "okf-v0.2").endswith("OKF bundle has no serveable markdown pages")


@pytest.mark.parametrize("name", ["missing-type", "bad-sources", "broken-yaml"])
def test_invalid_fixtures_are_rejected(name: str) -> None:
    rejected(FIXTURES / "adversarial" / f"okf-invalid-{name}")


def test_wrong_version_fixture_is_generic_unless_forced() -> None:
    root = FIXTURES / "adversarial/okf-invalid-wrong-version"
    assert project(root).layout.adapter == "generic-markdown"
    rejected(root, "okf-v0.2")


# -- page fields ----------------------------------------------------------------------------


def test_page_fields() -> None:
    page = concept(
        "id: custom/Metric.md\nobject_id: ignored\ntitle: Revenue\ntype: Metric\n"
        "description: '  Recognised   revenue. '\nreview_state: approved\n"
        "sources:\n  - id: rev-policy\n    resource: policies/rev.md\n  - resource: ledger.csv\n"
        "source_refs: [SRC-1, REV-POLICY, ledger.csv]\ntags: [finance]\n"
        "generated:\n  by: agent:bot\n  at: 2026-07-01T09:30:00Z",
        "# Heading\n\nBody #inline with [[Other|alias]] and [x](./y.md).\n")
    assert page.id == "custom/Metric"
    assert page.title == "Revenue"
    assert page.summary == "Recognised revenue."
    assert page.review_state == "unknown"
    assert page.status == "stable"
    assert page.source_refs == ("rev-policy", "ledger.csv", "SRC-1")
    assert page.updated_at == "2026-07-01T09:30:00Z"
    assert page.tags == ("finance", "inline")
    assert page.links == ("Other", "y")
    assert page.headings == ("Heading",)
    assert page.approved


def test_page_fields_fall_back_like_generic_pages() -> None:
    page = concept("type: Note\nobject_id: not-used\nstatus: Evergreen", "# Title From Heading\n\nSome text.")
    assert page.id == "concept"  # path, never object_id
    assert page.title == "Title From Heading"
    assert page.summary == "Title From Heading Some text."
    assert page.status == "Evergreen"
    assert page.updated_at == ""
    assert page.payload()["okf"] == okf_of(page)


@pytest.mark.parametrize(("frontmatter", "approved"), [
    ("status: draft", False), ("status: deprecated", True), ("draft: true", False),
    ("published: false", False), ("review_state: draft", True),  # review_state is ignored
])
def test_visibility_uses_the_normal_rules(frontmatter: str, approved: bool) -> None:
    assert concept(f"type: Note\n{frontmatter}").approved is approved


def test_non_okf_pages_have_no_okf_object(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "# A\n"})
    page = project(tmp_path).pages[0]
    assert page.okf_json == ""
    assert page.payload()["okf"] is None


# -- the okf object -------------------------------------------------------------------------


def test_okf_object_of_an_attested_computation() -> None:
    page = concept(
        "type: Attested Computation\nruntime: python\ncomputation: sum(x)\n"
        "parameters:\n  - name: year\n    value: 2026\nexecutor:\n  name: runner\n"
        "attester:\n  name: ci\n  at: 2026-07-03T08:00:00Z\n"
        "verified:\n  by: machine:check\n  at: 2026-07-03\nstale_after: 2026-12-31\n"
        "resource: computations/ytd\nokf_version: '0.2'\nokfVersion: '0.2'\nx-owner: team\n"
        "nested:\n  when: 2026-01-02T03:04:05+02:00\n  n: 1.5")
    assert okf_of(page) == {
        "version": "0.2",
        "role": "concept",
        "concept_type": "Attested Computation",
        "description": "",
        "resource": "computations/ytd",
        "generated": None,
        "verified": [{"by": "machine:check", "at": "2026-07-03"}],
        "trust_tier": "machine-confirmed",
        "status": "stable",
        "stale_after": "2026-12-31",
        "usage_window": {},
        "runtime": "python",
        "parameters": [{"name": "year", "value": 2026}],
        "computation": "sum(x)",
        "executor": {"name": "runner"},
        "attester": {"name": "ci", "at": "2026-07-03T08:00:00Z"},
        "sources": [],
        "extra": {"x-owner": "team", "nested": {"when": "2026-01-02T03:04:05+02:00", "n": 1.5}},
    }


@pytest.mark.parametrize(("verified", "tier"), [
    ("", "unverified"),
    ("verified: []", "unverified"),
    ("verified:\n  by: agent:checker", "machine-confirmed"),
    ("verified:\n  - by: agent:a\n  - by: human:reviewer", "human-reviewed"),
    ("verified:\n  - by: humans:team", "machine-confirmed"),  # the prefix is exact
])
def test_trust_tiers(verified: str, tier: str) -> None:
    assert okf_of(concept(f"type: Note\n{verified}"))["trust_tier"] == tier


def test_sources_and_their_fields() -> None:
    document = okf_of(concept(
        "type: Note\nusage_window:\n  days: 90\nsources:\n"
        "  - id: a\n    resource: r/a.md\n    title: '  A   Title '\n    author: Ann\n"
        "    usage_count: 42\n    last_modified: 2026-06-30\n    excerpt_hash: h1\n"
        "  - resource: r/b.md\n    usage_count: 2.5\n    usage_window:\n      days: 7\n"
        "  - resource: r/c.md\n    usage_count: true\n"
        "  - resource: r/d.md\n    usage_count: '12'"))
    sources = document["sources"]
    assert sources[0] == {"id": "a", "resource": "r/a.md", "title": "A Title", "author": "Ann",
                          "usage_count": 42, "last_modified": "2026-06-30",
                          "usage_window": {"days": 90}, "extra": {"excerpt_hash": "h1"}}
    assert sources[1]["usage_count"] == 2.5 and sources[1]["usage_window"] == {"days": 7}
    assert sources[2]["usage_count"] is None  # booleans are not counts
    assert sources[3]["usage_count"] is None  # neither are strings
    assert [okf.source_key(s) for s in sources] == ["a", "r/b.md", "r/c.md", "r/d.md"]
    assert [okf.source_label(s) for s in sources] == ["A Title", "r/b.md", "r/c.md", "r/d.md"]


@pytest.mark.parametrize(("value", "text"), [
    ("2026-07-01T09:30:00Z", "2026-07-01T09:30:00Z"),
    ("2026-07-01 09:30:00", "2026-07-01T09:30:00"),
    ("2026-07-01T09:30:00+02:00", "2026-07-01T09:30:00+02:00"),
    ("2026-07-01", "2026-07-01"),
    ("12", "12"),
    ("1.5", "1.5"),
    ("yes", "True"),
    ("'  spaced \t  out '", "spaced out"),
])
def test_scalar_formatting(value: str, text: str) -> None:
    assert okf_of(concept(f"type: Note\nstale_after: {value}"))["stale_after"] == text


def test_roles_and_generated() -> None:
    index = okf.parse_okf_page("---\ngenerated:\n  by: agent:x\n---\n# I\n", "a/INDEX.md", OKF)
    assert okf_of(index)["role"] == "index"
    assert okf_of(index)["concept_type"] == ""
    assert okf_of(index)["generated"] == {"by": "agent:x", "at": ""}
    assert okf.document_role("x/log.md") == "log"


# -- projection -----------------------------------------------------------------------------


def test_signature_formula(tmp_path: Path) -> None:
    root = write(tmp_path / "bundle", {"index.md": ROOT_INDEX, "a.md": "---\ntype: N\n---\n# A\n"})
    mirror = mirror_of(root)
    projection = mirror.project()
    lines = []
    for rel in ("a.md", "index.md"):
        data = (root / rel).read_bytes()
        lines.append(f"{rel}\tfile\t{len(data)}\t{hashlib.blake2b(data, digest_size=16).hexdigest()}")
    base = signature_of(lines)
    expected = "sha256:" + hashlib.sha256(f"{base}\tokf-v0.2\t0.2".encode()).hexdigest()
    assert projection.signature == expected
    assert projection.bundle_id == f"bundle:sha256:{expected[7:19]}"


def test_fixture_bundle() -> None:
    projection = project(FIXTURES / "shapes/okf-bundle")
    assert projection.title == "Finance Knowledge Bundle"
    assert projection.find_page("log") is None
    assert projection.find_page("metrics/index").role == "index"  # type: ignore[union-attr]
    revenue = projection.find_page("revenue-metric")
    assert revenue is not None
    document = okf_of(revenue)
    assert document["trust_tier"] == "human-reviewed"
    assert document["extra"]["x-llmwiki"] == {"owner": "finance", "rank": 2}
    assert document["sources"][0]["extra"] == {"excerpt_hash": "sha256:revpolicyfixture"}
    ytd = okf_of(projection.find_page("computations/revenue-ytd"))  # type: ignore[arg-type]
    assert (ytd["runtime"], ytd["trust_tier"]) == ("python", "machine-confirmed")
    assert ytd["executor"] == {"name": "ledger-runner", "version": "1.4.0"}
    assert not projection.find_page("drafts/proposed-contract").approved  # type: ignore[union-attr]
    assert projection.find_page("dependencies/payments-auth").approved  # type: ignore[union-attr]


def test_fixture_graph_members() -> None:
    projection = project(FIXTURES / "shapes/okf-bundle")
    nodes = {n.id: n for n in projection.nodes}
    edges = {(e.source, e.target, e.relation): e.meta for e in projection.edges}
    assert nodes["okf_type:metric"].kind == "okf_type"
    assert nodes["okf_type:metric"].meta == {"source_profile": "okf-v0.2"}
    assert nodes["okf_resource:metrics-revenue"].label == "metrics/revenue"
    source = nodes["source:rev-policy"]
    assert (source.kind, source.label) == ("source_ref", "Revenue Recognition Policy")
    assert source.meta["okf"]["usage_count"] == 42  # type: ignore[index]
    assert edges[("page:revenue-metric", "okf_type:metric", "typed_as")] == {
        "source": "okf.type", "source_profile": "okf-v0.2"}
    assert edges[("page:revenue-metric", "okf_resource:metrics-revenue", "describes")] == {
        "source": "okf.resource", "source_profile": "okf-v0.2"}
    assert edges[("page:revenue-metric", "source:rev-policy", "cites")] == {
        "source": "okf.sources", "source_profile": "okf-v0.2"}
    assert edges[("page:revenue-metric", "source:SRC-FIN-7", "cites")] is None  # a plain ref
    assert ("page:revenue-metric", "page:computations/revenue-ytd", "links_to") in edges
    # Headings come first, then the OKF members, then plain refs and tags.
    order = [e[1] for e in edges if e[0] == "page:revenue-metric"]
    assert order[:4] == ["heading:revenue-metric-Revenue-Metric", "heading:revenue-metric-Definition",
                         "okf_type:metric", "okf_resource:metrics-revenue"]


def test_a_content_edit_of_okf_metadata_rebuilds_the_graph(tmp_path: Path) -> None:
    root = write(tmp_path, {"index.md": ROOT_INDEX,
                            "a.md": "---\ntype: Note\nsources:\n  - id: s\n    resource: r\n"
                                    "    title: Old\n---\n# A\n"})
    mirror = mirror_of(root)
    first = mirror.project()
    assert {n.label for n in first.nodes if n.id == "source:s"} == {"Old"}
    (root / "a.md").write_text("---\ntype: Note\nsources:\n  - id: s\n    resource: r\n"
                               "    title: New\n---\n# A\n", encoding="utf-8")
    mirror.refresh_files(["a.md"])
    second = mirror.project(first)
    assert {n.label for n in second.nodes if n.id == "source:s"} == {"New"}
    (root / "a.md").write_text("---\ntype: Note\nsources: nope\n---\n# A\n", encoding="utf-8")
    mirror.refresh_files(["a.md"])
    with pytest.raises(WikiRootError):
        mirror.project(second)


def test_profile_values(tmp_path: Path) -> None:
    assert parse_source_profile(" okf-v0.2 ") == "okf-v0.2"
    with pytest.raises(ValueError, match="^source_profile must be auto or okf-v0.2$"):
        parse_source_profile("okf")
    with pytest.raises(ValueError, match="^source_profile must be auto or okf-v0.2$"):
        ServeSettings(root=tmp_path, source_profile="OKF-v0.2")
    assert resolve_settings(tmp_path, {}, {"LLMWIKI_SOURCE_PROFILE": "okf-v0.2"}).source_profile == "okf-v0.2"
    assert resolve_settings(tmp_path, {"source_profile": "auto"},
                            {"LLMWIKI_SOURCE_PROFILE": "okf-v0.2"}).source_profile == "auto"
    with pytest.raises(ValueError, match="source_profile must be auto or okf-v0.2"):
        resolve_settings(tmp_path, {}, {"LLMWIKI_SOURCE_PROFILE": "bogus"})
