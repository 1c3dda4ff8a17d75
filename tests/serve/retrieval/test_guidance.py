"""Retrieval guidance (contract 5.8, checklist C10): derivations, closed schema, redaction, budget."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from common.guidance import RetrievalGuidance
from serve.retrieval.guidance import CHARACTER_BUDGET, build_guidance
from serve.retrieval.guidance_text import (
    clean_markdown,
    identifiers_in,
    is_sensitive,
    safe_path,
    terms_from_text,
    trim,
)
from serve.snapshot.projection import Projection
from serve.watch.mirror import FolderMirror
from tests.support.folders import FIXTURES, build_adversarial, copy_fixture, tree_digest
from tests.support.guidance import assert_serve_guidance

KEYS = [
    "schema_version",
    "orientation_source",
    "content_trust",
    "max_query_variants",
    "character_budget",
    "folder_cards",
    "page_cards",
    "suggested_terms",
    "exact_identifiers",
    "fallback_modes",
]

SERVABLE_FIXTURES = [
    "sample-wiki",
    "shapes/reference-sample",
    "shapes/native-wiki-root",
    "shapes/llmwiki-compiler-output",
    "shapes/obsidian-vault",
    "shapes/logseq-graph",
    "shapes/dendron-single",
    "shapes/dendron-multi",
    "shapes/foam-workspace",
    "shapes/quartz-site",
    "shapes/quartz-yaml-site",
    "shapes/openwiki-repo",
    "shapes/generic-markdown",
    "shapes/korean-wiki",
]
QUERIES = ["", "release readiness", "refund", "3차 계약", "BillingRefundHandler", "???", "password: hunter2"]


def project(root: Path) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


def guidance(projection: Projection, query: str, *, drafts: bool = False, **kwargs: Any) -> dict[str, Any]:
    return build_guidance(projection.visible_pages(drafts), projection.layout.adapter, query, **kwargs)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def all_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [key, *all_strings(item)]]
    if isinstance(value, list):
        return [s for item in value for s in all_strings(item)]
    return []


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# -- the observed authored example (contract 5.8, Appendix A) ---------------------------


def test_reference_sample_authored_example_exactly() -> None:
    result = guidance(project(FIXTURES / "shapes/reference-sample"), "release readiness")
    assert_serve_guidance(result)
    assert list(result) == KEYS
    assert result["schema_version"] == "llmwiki.retrieval_guidance.v1"
    assert result["orientation_source"] == "authored"
    assert result["content_trust"] == "untrusted_source_evidence"
    assert (result["max_query_variants"], result["character_budget"]) == (2, 4000)
    assert result["folder_cards"] == [
        {"path": ".", "page_count": 2, "terms": ["Current", "Focus", "LLMWiki", "Packaging", "Sample"]}
    ]
    assert [card["page_id"] for card in result["page_cards"]] == ["hot", "index"]
    assert result["suggested_terms"] == [
        "release", "readiness", "Current", "Focus", "Sample", "Packaging", "LLMWiki",
    ]
    assert result["exact_identifiers"] == [
        "hot.md", "SRC-HOT", "index.md", "SRC-INDEX", "LLMWiki", "artwork-review",
    ]
    assert result["fallback_modes"] == ["literal"]


def test_reference_sample_page_cards_in_full() -> None:
    hot, index = guidance(project(FIXTURES / "shapes/reference-sample"), "release readiness")["page_cards"]
    assert hot == {
        "page_id": "hot",
        "title": "Current Focus",
        "path": "hot.md",
        "headings": ["Current Focus"],
        "terms": ["Current", "Focus"],
        "exact_identifiers": ["hot.md", "SRC-HOT"],
        "excerpt": "Current Focus The current focus is required label copy, artwork approval and "
        "release readiness for each launch.",
    }
    assert list(index) == ["page_id", "title", "path", "headings", "terms", "exact_identifiers", "excerpt"]
    assert index["terms"] == ["Sample", "Packaging", "LLMWiki"]
    # Wikilinks are cleaned to their text: `[[artwork-review]]` -> `artwork-review`.
    assert "[[" not in index["excerpt"] and "artwork-review for checks" in index["excerpt"]


def test_reference_sample_drafts_never_leak_into_approved_guidance() -> None:
    projection = project(FIXTURES / "shapes/reference-sample")
    text = compact(guidance(projection, "draft note"))
    assert "Draft Note" not in text and "SRC-DRAFT" not in text and "draft-note" not in text


# -- closed schema over every fixture ----------------------------------------------------


@pytest.mark.parametrize("drafts", [False, True])
@pytest.mark.parametrize("name", SERVABLE_FIXTURES)
def test_every_fixture_gives_closed_schema_guidance(name: str, drafts: bool) -> None:
    projection = project(FIXTURES / name)
    for query in QUERIES:
        result = guidance(projection, query, drafts=drafts)
        assert_serve_guidance(result)
        assert list(result) == KEYS
        assert len(compact(result)) <= CHARACTER_BUDGET
        assert json.loads(compact(result)) == result  # plain JSON values only
        assert "hunter2" not in compact(result)


def test_adversarial_folder_gives_closed_schema_guidance(tmp_path: Path) -> None:
    projection = project(build_adversarial(tmp_path, huge_bytes=256 * 1024))
    for query in QUERIES:
        result = guidance(projection, query)
        assert_serve_guidance(result)
        assert result["orientation_source"] == "projection_extractive"
        text = compact(result)
        assert "OUTSIDESECRET" not in text and str(tmp_path) not in text
        assert not any(s.startswith("/") for s in all_strings(result))


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("sample-wiki", "authored"),
        ("shapes/obsidian-vault", "authored"),  # nested wiki/ hubs have roles
        ("shapes/openwiki-repo", "authored"),  # root quickstart.md is an index hub
        ("shapes/generic-markdown", "projection_extractive"),
        ("shapes/logseq-graph", "none"),
        ("shapes/dendron-single", "none"),
    ],
)
def test_orientation_source_per_shape(name: str, source: str) -> None:
    assert guidance(project(FIXTURES / name), "release")["orientation_source"] == source


def test_none_source_has_empty_lists_but_fallback_modes() -> None:
    result = guidance(project(FIXTURES / "shapes/logseq-graph"), "product workflow")
    assert result["orientation_source"] == "none"
    assert [result[k] for k in ("folder_cards", "page_cards", "suggested_terms", "exact_identifiers")] == [
        [], [], [], [],
    ]
    assert result["fallback_modes"] == ["literal"]


def test_authored_folder_cards_come_from_hub_pages_only() -> None:
    result = guidance(project(FIXTURES / "shapes/obsidian-vault"), "")
    assert [c["path"] for c in result["page_cards"]] == ["wiki/hot.md", "wiki/index.md", "wiki/overview.md"]
    assert result["folder_cards"][0]["path"] == "wiki"
    assert result["folder_cards"][0]["page_count"] == 3
    assert [c["path"] for c in result["folder_cards"]] == ["wiki"]


# -- projection_extractive (generic Markdown) ---------------------------------------------


def test_generic_markdown_extractive_sketch(tmp_path: Path) -> None:
    root = copy_fixture("shapes/generic-markdown", tmp_path)
    before = tree_digest(root)
    projection = project(root)
    for query in ["refund handler", "", "deploy"]:
        result = guidance(projection, query)  # approved pages only
        assert_serve_guidance(result)
        assert result["orientation_source"] == "projection_extractive"
        assert "BillingRefundHandler" in result["exact_identifiers"]
        assert "refund.v1-beta.md" in result["exact_identifiers"]
        text = compact(result)
        for needle in ("ZEPHYRQUILL", "Vendor Escalation", "vendor-escalation", "127.0.0.1", "healthz",
                       str(root), str(tmp_path)):
            assert needle not in text
        assert not any(s.startswith("/") for s in all_strings(result))
    assert tree_digest(root) == before  # zero writes


def test_generic_markdown_ranks_overlapping_pages_first() -> None:
    projection = project(FIXTURES / "shapes/generic-markdown")
    first = guidance(projection, "quickstart")["page_cards"][0]
    assert first["page_id"] == "guide/quickstart"
    # Documented choice: query terms are compared casefolded, not case-sensitively.
    assert guidance(projection, "QUICKSTART")["page_cards"][0]["page_id"] == "guide/quickstart"
    # Without overlap, pages keep (role rank, path) order.
    assert [c["path"] for c in guidance(projection, "")["page_cards"]] == [
        "billing/refund-handler.md", "billing/refund.v1-beta.md", "guide/quickstart.md", "team.md",
    ]


def test_generic_markdown_folder_cards_group_by_parent_and_order_by_overlap() -> None:
    projection = project(FIXTURES / "shapes/generic-markdown")
    plain = guidance(projection, "")["folder_cards"]
    assert [(c["path"], c["page_count"]) for c in plain] == [
        ("billing", 2), (".", 1), ("guide", 1), ("ops", 1),
    ]
    # `Refund` is in both billing pages, so it leads; ties are ordered by folded term.
    assert plain[0]["terms"][0] == "Refund"
    assert [c["path"] for c in guidance(projection, "deploy")["folder_cards"]][0] == "ops"


def test_nested_quickstart_is_not_authored(tmp_path: Path) -> None:
    projection = project(FIXTURES / "shapes/generic-markdown")
    assert {p.path: p.role for p in projection.pages}["guide/quickstart.md"] == "topic"
    root = tmp_path / "nested-only"
    write(root, "guide/quickstart.md", "# Quickstart\n\nInstall the tools and run the tests first.\n")
    write(root, "notes/other.md", "# Other Page\n\nSomething else that is long enough to be an excerpt.\n")
    nested = project(root)
    assert nested.layout.adapter == "generic-markdown"
    assert guidance(nested, "quickstart")["orientation_source"] == "projection_extractive"


def test_extractive_falls_back_to_none_when_nothing_is_produced(tmp_path: Path) -> None:
    root = tmp_path / "unsafe-only"
    write(root, "secret.md", "# Something\n\nA page whose file stem is a sensitive word.\n")
    projection = project(root)
    assert projection.layout.adapter == "generic-markdown"
    assert guidance(projection, "")["orientation_source"] == "none"
    # A query term is a suggested term, so the sketch is used (with no cards at all).
    result = guidance(projection, "something")
    assert result["orientation_source"] == "projection_extractive"
    assert (result["page_cards"], result["folder_cards"]) == ([], [])
    assert result["suggested_terms"] == ["something"]


# -- adversarial values ----------------------------------------------------------------------


ADVERSARIAL_NEEDLES = [
    "hunter2",
    "abcdefghijklmnop",
    "sk-proj",
    "127.0.0.1",
    "8765",
    "/home/alice",
    "alice",
    "session_id",
    "s3cr3tvalue",
    "10.1.2.3",
    "corp.internal",
    "AKIAABCDEFGHIJKLMNOP",
]


def hostile_root(tmp_path: Path) -> Path:
    root = tmp_path / "hostile-generic"
    write(root, "bad-title.md", '---\ntitle: "password: hunter2"\n---\n# Body\n\n'
          "A plain paragraph that would otherwise make a perfectly good excerpt.\n")
    write(root, "bad-headings.md", "---\ntitle: Mixed Headings\n"
          "tags: [sk-proj-abcdefghijklmnop, steady-tag]\n---\n"
          "# Mixed Headings\n\nThis page is fine and mentions the GoodIdentifier helper.\n\n"
          "## Bearer abcdefghijklmnop\n\n## http://127.0.0.1:8765/x\n\n## /home/alice/notes\n\n"
          "## session_id=s3cr3tvalue\n\n## Kept Heading\n\n## Uses 10.1.2.3 and corp.internal\n")
    write(root, "bad-excerpt.md", "# Excerpt Source\n\n"
          "Token AKIAABCDEFGHIJKLMNOP was pasted here by mistake.\n\n"
          "Visit http://127.0.0.1:8765/x for the local dashboard please.\n\n"
          "The second safe paragraph becomes the excerpt instead.\n")
    write(root, "credentials/session.md", "# Session Notes\n\nNotes stored under an unsafe folder name.\n")
    return root


def test_adversarial_values_are_omitted(tmp_path: Path) -> None:
    projection = project(hostile_root(tmp_path))
    assert projection.layout.adapter == "generic-markdown"
    for query in ["", "mixed headings", "Bearer abcdefghijklmnop", "password: hunter2"]:
        result = guidance(projection, query, drafts=True)
        assert_serve_guidance(result)
        text = compact(result)
        for needle in ADVERSARIAL_NEEDLES:
            assert needle not in text, (query, needle)
        assert not any(s.startswith("/") for s in all_strings(result))
    cards = {c["page_id"]: c for c in guidance(projection, "")["page_cards"]}
    # A sensitive title drops the card; a sensitive path (`session` stem) drops it too.
    assert "bad-title" not in cards and "credentials/session" not in cards
    mixed = cards["bad-headings"]
    assert mixed["headings"] == ["Mixed Headings", "Kept Heading"]
    assert mixed["exact_identifiers"] == ["bad-headings.md", "steady-tag", "GoodIdentifier"]
    assert cards["bad-excerpt"]["excerpt"] == "The second safe paragraph becomes the excerpt instead."
    folder_paths = [c["path"] for c in guidance(projection, "")["folder_cards"]]
    assert folder_paths == ["."]  # credentials/session.md is skipped: unsafe path


def test_overlong_and_unsafe_paths_get_no_card(tmp_path: Path) -> None:
    projection = project(hostile_root(tmp_path))
    template = next(p for p in projection.pages if p.path == "bad-headings.md")
    long_segment = "a" * 2000
    pages = (
        template._replace(path=f"{long_segment}.md", id="long-path"),
        template._replace(path="../escape.md", id="dotdot-path"),
        template._replace(path="C:/Users/alice/x.md", id="drive-path"),
        template._replace(path="/home/alice/notes.md", id="absolute-path"),
        template._replace(path="ok/fine.md", id="x" * 600),
        template._replace(path="ok/page.md", id="ok/page"),
    )
    result = build_guidance(pages, "generic-markdown", "")
    assert_serve_guidance(result)
    assert [c["page_id"] for c in result["page_cards"]] == ["ok/page"]
    assert [(c["path"], c["page_count"]) for c in result["folder_cards"]] == [("ok", 2)]
    text = compact(result)
    assert long_segment not in text and "escape" not in text and "alice" not in text and "x" * 600 not in text


# -- budget, empty and Korean queries, vector modes ----------------------------------------


def test_budget_holds_for_many_long_pages(tmp_path: Path) -> None:
    root = tmp_path / "long-pages"
    for i in range(40):
        headings = "\n\n".join(f"## Heading Number {i} {'Lengthy' * 30} {j}" for j in range(12))
        refs = ", ".join(f"REF-{i}-{j}-{'X' * 30}" for j in range(6))
        write(root, f"area{i % 9}/{'very-long-directory-name-' * 4}{i}/page-{i}.md",
              f"---\ntitle: Page {i} {'Verbose ' * 40}\nsource_refs: [{refs}]\ntags: [t{i}a, t{i}b]\n---\n"
              f"# Page {i}\n\n{'Words about ServiceHandler.v2 and more text. ' * 30}\n\n{headings}\n")
    result = guidance(project(root), "verbose lengthy words")
    assert_serve_guidance(result)
    assert result["orientation_source"] == "projection_extractive"
    assert len(compact(result)) <= CHARACTER_BUDGET
    # Every card here is bigger than what the folder cards and terms leave: all are dropped.
    assert result["page_cards"] == []
    assert result["folder_cards"] and result["suggested_terms"]
    assert len(compact(result)) > CHARACTER_BUDGET - 1500  # trimmed close to the budget


def test_budget_keeps_as_many_page_cards_as_fit(tmp_path: Path) -> None:
    root = tmp_path / "medium-pages"
    for i in range(30):
        write(root, f"topic-{i:02d}.md",
              f"---\ntitle: Topic {i} {'Detailed ' * 10}\n---\n# Topic {i}\n\n"
              f"{'A sentence about the topic and its ServiceHandler. ' * 10}\n\n## Section {i}\n")
    result = guidance(project(root), "")
    assert_serve_guidance(result)
    assert len(compact(result)) <= CHARACTER_BUDGET
    assert 1 <= len(result["page_cards"]) < 12
    kept = len(result["page_cards"])
    assert [c["page_id"] for c in result["page_cards"]] == [f"topic-{i:02d}" for i in range(kept)]
    assert all(len(c["excerpt"]) <= 240 and len(c["title"]) <= 240 for c in result["page_cards"])
    # Only page cards were dropped: the folder card and term lists are complete.
    assert result["suggested_terms"] == ["Topic", "Detailed", "Section"]
    assert result["folder_cards"] == [
        {"path": ".", "page_count": 30, "terms": ["Detailed", "Section", "Topic"]}
    ]


def test_budget_drops_page_cards_before_folder_cards(tmp_path: Path) -> None:
    root = tmp_path / "huge-cards"
    for i in range(20):
        body = "Body sentence here. " * 40
        write(root, f"d{i}/p.md", f"---\ntitle: {'Title ' * 50}{i}\n---\n# H\n\n{body}\n")
    projection = project(root)
    result = guidance(projection, "")
    assert_serve_guidance(result)
    assert len(compact(result)) <= CHARACTER_BUDGET
    kept = len(result["page_cards"])
    assert 1 <= kept < 12
    # Folder cards and term lists are untouched while page cards remain.
    assert len(result["folder_cards"]) == 8 and len(result["exact_identifiers"]) == 12
    # The next card (cards do not depend on the query or the other pages) would not fit.
    next_page = sorted(projection.approved_pages, key=lambda p: p.path)[kept]
    next_card = build_guidance((next_page,), "generic-markdown", "")["page_cards"][0]
    assert next_card["path"] == next_page.path
    assert len(compact(result)) + 1 + len(compact(next_card)) > CHARACTER_BUDGET


def test_empty_query() -> None:
    authored = guidance(project(FIXTURES / "shapes/reference-sample"), "")
    assert authored["suggested_terms"] == ["Current", "Focus", "Sample", "Packaging", "LLMWiki"]
    extractive = guidance(project(FIXTURES / "shapes/generic-markdown"), "   ")
    assert extractive["orientation_source"] == "projection_extractive"
    assert extractive["suggested_terms"][0] == "Refund"
    for result in (authored, extractive):
        assert_serve_guidance(result)


def test_korean_query_terms_are_suggested() -> None:
    result = guidance(project(FIXTURES / "shapes/korean-wiki"), "릴리스 체크리스트 3차 계약")
    assert_serve_guidance(result)
    assert result["orientation_source"] == "authored"
    # Query terms come first, exactly as typed; `3차` is skipped (a term starts with a letter
    # and `차` alone is too short).
    assert result["suggested_terms"][:3] == ["릴리스", "체크리스트", "계약"]
    assert "제품" in result["suggested_terms"]  # page terms from the Korean hub pages follow


def test_vector_available_adds_hybrid_and_vector() -> None:
    projection = project(FIXTURES / "shapes/reference-sample")
    with_vector = guidance(projection, "x", vector_available=True)
    assert with_vector["fallback_modes"] == ["literal", "hybrid", "vector"]
    assert guidance(projection, "x")["fallback_modes"] == ["literal"]
    none = guidance(project(FIXTURES / "shapes/logseq-graph"), "x", vector_available=True)
    assert none["fallback_modes"] == ["literal", "hybrid", "vector"]


def test_results_are_independent_copies_and_cache_agnostic() -> None:
    projection = project(FIXTURES / "shapes/generic-markdown")
    first = guidance(projection, "refund")
    first["page_cards"][0]["terms"].append("MUTATED")
    first["folder_cards"].clear()
    again = guidance(projection, "refund")
    assert "MUTATED" not in compact(again) and again["folder_cards"]
    as_list = build_guidance(list(projection.approved_pages), "generic-markdown", "refund")
    assert as_list == again


def test_large_generic_folder_is_not_quadratic() -> None:
    projection = project(FIXTURES / "shapes/generic-markdown")
    base = projection.approved_pages
    pages = tuple(p._replace(path=f"x{i}/{p.path}", id=f"x{i}/{p.id}") for i in range(2000) for p in base)
    started = time.perf_counter()
    result = build_guidance(pages, "generic-markdown", "refund")
    cold = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(20):
        build_guidance(pages, "generic-markdown", "refund deploy")
    warm = (time.perf_counter() - started) / 20
    assert_serve_guidance(result)
    assert result["page_cards"][0]["page_id"] == "x0/billing/refund-handler"
    assert cold < 10.0 and warm < 0.1, (cold, warm)


# -- what the checks reject -----------------------------------------------------------------


@pytest.fixture
def valid() -> dict[str, Any]:
    return guidance(project(FIXTURES / "shapes/reference-sample"), "release readiness")


def mutations() -> list[tuple[str, Any]]:
    def extra_key(g: dict[str, Any]) -> None:
        g["extra"] = 1

    def missing_key(g: dict[str, Any]) -> None:
        del g["fallback_modes"]

    def set_key(key: str, value: Any) -> Any:
        def apply(g: dict[str, Any]) -> None:
            g[key] = value

        return apply

    def card(key: str, value: Any) -> Any:
        def apply(g: dict[str, Any]) -> None:
            g["page_cards"][0][key] = value

        return apply

    def folder(key: str, value: Any) -> Any:
        def apply(g: dict[str, Any]) -> None:
            g["folder_cards"][0][key] = value

        return apply

    def card_extra(g: dict[str, Any]) -> None:
        g["page_cards"][0]["score"] = 1.0

    return [
        ("extra key", extra_key),
        ("missing key", missing_key),
        ("null", set_key("suggested_terms", None)),
        ("schema_version", set_key("schema_version", "llmwiki.retrieval_guidance.v2")),
        ("orientation_source", set_key("orientation_source", "model")),
        ("content_trust", set_key("content_trust", "trusted")),
        ("max_query_variants", set_key("max_query_variants", 3)),
        ("budget bool", set_key("character_budget", True)),
        ("budget range", set_key("character_budget", 6001)),
        ("too many terms", set_key("suggested_terms", [f"t{i}" for i in range(17)])),
        ("duplicate terms", set_key("suggested_terms", ["Release", "release"])),
        ("empty term", set_key("suggested_terms", [""])),
        ("long term", set_key("suggested_terms", ["x" * 121])),
        ("fallback order", set_key("fallback_modes", ["vector", "literal"])),
        ("fallback unknown", set_key("fallback_modes", ["literal", "semantic"])),
        ("fallback duplicate", set_key("fallback_modes", ["literal", "literal"])),
        ("card extra key", card_extra),
        ("card absolute path", card("path", "/etc/hot.md")),
        ("card dotdot path", card("path", "../hot.md")),
        ("card url path", card("path", "https://x/hot.md")),
        ("card backslash path", card("path", "a\\hot.md")),
        ("card long excerpt", card("excerpt", "x" * 241)),
        ("card empty title", card("title", "")),
        ("card too many headings", card("headings", [f"h{i}" for i in range(9)])),
        ("card null", card("headings", None)),
        ("folder page_count zero", folder("page_count", 0)),
        ("folder too many terms", folder("terms", [f"t{i}" for i in range(9)])),
        ("too many folder cards", lambda g: g.__setitem__("folder_cards", g["folder_cards"] * 9)),
        ("over budget", set_key("character_budget", 100)),
    ]


def serve_rule_mutations() -> list[tuple[str, Any]]:
    """Valid for the shared shape (the bridge accepts them), but never what serve emits."""

    def reordered(g: dict[str, Any]) -> None:
        g["schema_version"] = g.pop("schema_version")

    def card(key: str, value: Any) -> Any:
        def apply(g: dict[str, Any]) -> None:
            g["page_cards"][0][key] = value

        return apply

    def set_key(key: str, value: Any) -> Any:
        def apply(g: dict[str, Any]) -> None:
            g[key] = value

        return apply

    return [
        ("reordered keys", reordered),
        ("untrimmed term", set_key("suggested_terms", [" release"])),
        ("card sensitive excerpt", card("excerpt", "connect to http://127.0.0.1:8080/x now")),
        ("folder dot segment", lambda g: g["folder_cards"][0].__setitem__("path", "./x")),
        ("none with terms", set_key("orientation_source", "none")),
        # within the shared budget (which counts only the strings), not within serve's
        ("over the compact budget", lambda g: g.__setitem__("character_budget", len(compact(g)) - 1)),
    ]


@pytest.mark.parametrize(("label", "mutate"), mutations(), ids=[m[0] for m in mutations()])
def test_the_model_rejects(valid: dict[str, Any], label: str, mutate: Any) -> None:
    RetrievalGuidance.model_validate(valid)
    broken = copy.deepcopy(valid)
    mutate(broken)
    with pytest.raises(ValidationError):
        RetrievalGuidance.model_validate(broken)


@pytest.mark.parametrize(("label", "mutate"), serve_rule_mutations(),
                         ids=[m[0] for m in serve_rule_mutations()])
def test_serve_rules_reject(valid: dict[str, Any], label: str, mutate: Any) -> None:
    assert_serve_guidance(valid)
    broken = copy.deepcopy(valid)
    mutate(broken)
    RetrievalGuidance.model_validate(broken)  # the shared shape allows it
    with pytest.raises(AssertionError):
        assert_serve_guidance(broken)


def test_the_model_rejects_non_objects() -> None:
    for value in (None, [], "guidance", 4000):
        with pytest.raises(ValidationError):
            RetrievalGuidance.model_validate(value)


# -- the text rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "password: hunter2",
        "db_password=x",
        "API-Key: abc",
        "api key = abc",
        "Access tokens: many",
        "client_secret=abc",
        "Cookie: a=b",
        "session id: 42",
        "session_id=abc",
        "private key: ...",
        "Authorization: Basic xyz",
        "Bearer abcdefghijklmnop",
        "use sk-abcdefghijklmnop",
        "sk-proj-abcdefghijklmnop",
        "ghp_abcdefghijklmnop",
        "gho_abcdefghijklmnop",
        "github_pat_abcdefghijklmnop",
        "xoxb-abcdefghijklmnop",
        "AKIAABCDEFGHIJKLMNOP",
        "redis://cache:6379",
        "file:///etc/hosts",
        "https://user:pass@example.com/x",
        "http://127.0.0.1:8765/x",
        "http://localhost:3000",
        "http://0.0.0.0/",
        "http://10.0.0.5/x",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest",
        "http://100.64.0.1/",
        "http://172.20.0.1/",
        "http://[::1]:80/",
        "http://[fd00::1]/",
        "https://wiki.corp/x",
        "https://build.internal/x",
        "https://intranet.example.com/x",
        "https://vpn-gw.example.com",
        "see printer.local for scans",
        "127.0.0.1:8080/healthz",
        "C:\\Users\\alice",
        "D:/data/file.txt",
        "/Users/alice/notes",
        "/home/alice/notes",
        "/root/.ssh",
        "/var/log/app.log",
        "/tmp/x",
        "password",
        "Session-ID",
        "private_key",
        "Token",
    ],
)
def test_sensitive_text(text: str) -> None:
    assert is_sensitive(text)


@pytest.mark.parametrize(
    "text",
    [
        "Token Rotation",
        "Release checklist for v1.2.3",
        "refund.v1-beta.md",
        "https://example.com/home/docs",
        "docs/home/index.md",
        "the sk-learn style is short",
        "task-abcdefghijklmnop",
        "Bearer tokens are rotated",
        "artwork-review",
        "version 1.2.3.4 ships",
        "a:b",
        "",
    ],
)
def test_not_sensitive_text(text: str) -> None:
    assert not is_sensitive(text)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("hot.md", "hot.md"),
        ("  billing\\refund.v1-beta.md ", "billing/refund.v1-beta.md"),
        ("runbooks/token-rotation.md", "runbooks/token-rotation.md"),
        ("", None),
        ("/abs.md", None),
        ("a//b.md", None),
        ("./a.md", None),
        ("a/../b.md", None),
        ("C:/x.md", None),
        ("https://x/y.md", None),
        ("a\x00b.md", None),
        ("x" * 1025, None),
        ("secret.md", None),
        ("notes/Private-Key.md", None),
        ("credentials/x.md", None),
        ("home/alice.md", "home/alice.md"),
    ],
)
def test_safe_path(value: str, expected: str | None) -> None:
    assert safe_path(value) == expected


def test_clean_markdown() -> None:
    text = (
        "# 1. Title [link text](https://example.com) and ![alt text](img.png)\n"
        "- [[target|Alias]] and [[plain-target]] <b>bold</b><br/>\n"
        "```python\nsecret_code = 1\n```\n"
        "| a | b |\n"
        "2024 numbers vanish   here\n"
    )
    assert clean_markdown(text) == (
        "Title link text and alt text Alias and plain-target bold numbers vanish here"
    )


def test_trim() -> None:
    assert trim("  a   b  ", 10) == "a b"
    assert trim("abcdefghij", 10) == "abcdefghij"
    assert trim("abcdef ghijk", 10) == "abcdef..."
    assert len(trim("x" * 500, 240)) == 240


def test_terms_from_text() -> None:
    assert terms_from_text("The wiki notes about Release, release and RELEASE readiness") == [
        "Release", "readiness",
    ]
    assert terms_from_text("token password rotation x 42 v1-beta") == ["rotation", "v1-beta"]
    assert terms_from_text("password: hunter2 and more") == []
    assert len(terms_from_text(" ".join(f"word{i}" for i in range(50)))) == 32
    # NFC-casefold uniqueness: decomposed and composed spellings are one term.
    assert terms_from_text("Café CAFE\u0301") == ["Café"]
    assert terms_from_text("릴리스 체크리스트") == ["릴리스", "체크리스트"]


def test_identifiers_in() -> None:
    found = identifiers_in(
        "LLMWiki uses BillingRefundHandler in pkg.mod with a:b",
        "ABC-123, v1.2 and 1.2.3-rc.1 plus refund.v1-beta.md and artwork-review.",
        "REFUND_WINDOW_DAYS 릴리스-체크 plain words Here",
    )
    assert found == [
        "LLMWiki", "BillingRefundHandler", "pkg.mod", "a:b",
        "ABC-123", "v1.2", "1.2.3-rc.1", "refund.v1-beta.md", "artwork-review",
        "REFUND_WINDOW_DAYS", "릴리스-체크",
    ]
