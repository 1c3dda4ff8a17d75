"""Real public folders (issue 15): natural-question gates and the per-shape metadata rules.

The folders are snapshots of four public repositories (tests/support/real_folders.py):
an Obsidian vault, a Logseq graph, a Dendron workspace and Korean generic docs. The
questions in fixtures/judged/real-natural.jsonl were written from reading the pages
before any search ran.

Tests marked ``xfail(strict=True)`` state a rule or a target that serve does not meet
yet; each turns into a failure the day it starts passing, so whoever fixes it removes
the mark. Every expected value below was read off the vendored page named beside it.
Metadata is checked through the wire payloads (read, neighbourhood), not parser types.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from serve.errors import KnowledgeSourceError
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from tests.support import judged as J
from tests.support import real_folders as R

K = 10
MIN_QUESTIONS = 60
# The figures after the natural-question ranking (question words, field weights, hubs,
# title naming; service engine) less about 0.02: later work may only raise them.
FLOORS: dict[str, dict[str, float]] = {
    "obsidian-tasks": {"ndcg@10": 0.64, "mrr@10": 0.69},
    "dendron-handbook": {"ndcg@10": 0.74, "mrr@10": 0.77},
    "ezdxf-notes": {"ndcg@10": 0.82, "mrr@10": 0.81},
    "react-ko": {"ndcg@10": 0.76, "mrr@10": 0.80},
}
RANKING = ("natural-question targets of issue 15 not met: filler words, field weights and hub "
           "rules are in (serve/retrieval/question.py, fields.py); what is left is lexical "
           "(synonyms, Korean questions over English pages)")


def xfail(reason: str) -> pytest.MarkDecorator:
    # Only a failed check (or a folder serve refuses) counts: a bug in a test still fails.
    return pytest.mark.xfail(strict=True, reason=reason, raises=(AssertionError, KnowledgeSourceError))


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_root() -> Path:
    """The unpacked folders (cached outside the repository, reused between runs)."""
    root = R.extract()
    if root is None:
        pytest.skip(f"real folders not found: {R.TARBALL} (or ${R.ENV})")
    return root


@pytest.fixture(scope="session")
def source_of(real_root: Path) -> Iterator[Callable[[str], KnowledgeSource]]:
    sources: dict[str, KnowledgeSource] = {}

    def get(name: str) -> KnowledgeSource:
        if name not in sources:
            sources[name] = KnowledgeSource(ServeSettings(
                root=real_root / name, page_cache=False, inotify=False,
                refresh_interval_seconds=3600.0))
        return sources[name]

    yield get
    for source in sources.values():
        source.close()


@pytest.fixture(scope="module")
def scores(source_of: Callable[[str], KnowledgeSource]) -> list[J.QueryScore]:
    return J.score_queries(
        lambda j: R.ranked_ids(source_of(R.name_of(j.folder)), j.query, K), R.load(), K)


def page(source: KnowledgeSource, page_id: str) -> dict[str, Any]:
    result = source.read(page_id)
    assert result.outcome == "found", f"{page_id}: {result.outcome}"
    return result.payload


def folded(values: list[str]) -> set[str]:
    return {v.casefold() for v in values}


def out_edges(source: KnowledgeSource, page_id: str) -> tuple[set[str], set[str]]:
    """(targets of the page's links_to edges, labels of the unresolved ones)."""
    hood = source.neighborhood([page_id], depth=1, direction="out", limit=500).model_dump()
    labels = {node["id"]: node["label"] for node in hood["nodes"]}
    seed = f"page:{page_id}"
    edges = [e for e in hood["edges"] if e["source"] == seed and e["relation"] == "links_to"]
    return ({e["target"] for e in edges},
            {labels.get(e["target"], "") for e in edges if e["metadata"].get("unresolved")})


# -- the judged set (needs no folder) ---------------------------------------------------------


def test_real_set_is_well_formed() -> None:
    judgements = R.load()
    ids = [j.id for j in judgements]
    assert len(ids) == len(set(ids)), "duplicate ids"
    assert len(judgements) >= MIN_QUESTIONS
    per_folder = Counter(R.name_of(j.folder) for j in judgements)
    assert set(per_folder) == set(R.NAMES) and min(per_folder.values()) >= 12, per_folder
    assert len(set(R.SHAPES.values())) >= 3
    languages = Counter(R.language_of(j) for j in judgements)
    assert languages["en"] >= 30 and languages["ko"] >= 20, languages
    for name in R.NAMES:
        mine = [j for j in judgements if R.name_of(j.folder) == name]
        assert any(j.is_leak for j in mine), f"{name}: no unanswerable question"
        assert any(len(j.relevant) > 1 for j in mine), f"{name}: no question with several pages"
    for j in judgements:
        assert j.is_leak or 2 in j.relevant.values(), f"{j.id}: no answering page (grade 2)"


def test_figures_count_the_answering_page_only() -> None:
    j = J.Judgement("en-x-01", "corpus:real/react-ko", "q", {"a": 2, "b": 1}, "real-natural", "en")
    none = J.Judgement("en-x-u1", "corpus:real/react-ko", "q", {}, "real-natural", "en")
    scores = J.score_queries(lambda q: ["b", "x", "a"] if q is j else ["a"], [j, none], K)
    fig = R.figures(scores, K)
    assert fig["questions"] == 1 and fig["unanswerable"] == 1
    assert fig["mrr@10"] == 1.0  # b is relevant (grade 1) ...
    assert fig["top1"] == 0.0 and fig["top3"] == 1.0  # ... but a answers it


# -- pages and shapes ---------------------------------------------------------------------------

SHAPE_CASES = list(R.NAMES)


@pytest.mark.parametrize("name", SHAPE_CASES)
def test_shape_is_detected_and_pages_are_served(
        name: str, source_of: Callable[[str], KnowledgeSource]) -> None:
    manifest = source_of(name).manifest().model_dump()
    assert manifest["adapter"] == R.SHAPES[name]
    assert manifest["approved_page_count"] >= 100


# Judged pages serve withholds by the contract's visibility rules: their questions score 0.
WITHHELD_JUDGED = {
    # area.team.sop.onboarding.first-week has 'published: false' (the answer of en-dendron-17)
    "zux5y28amzhl8zt1d4iuumh",
}


@pytest.mark.parametrize("name", SHAPE_CASES)
def test_judged_pages_exist(name: str, source_of: Callable[[str], KnowledgeSource]) -> None:
    source = source_of(name)
    for j in R.load():
        if R.name_of(j.folder) == name:
            for page_id in j.relevant:
                expected = "withheld" if page_id in WITHHELD_JUDGED else "found"
                assert source.read(page_id).outcome == expected, f"{j.id}: no page {page_id!r}"


# -- natural-question gates ------------------------------------------------------------------


@pytest.mark.parametrize("key", [pytest.param(k, marks=xfail(RANKING)) for k in (*R.NAMES, "all")])
def test_natural_question_targets(key: str, scores: list[J.QueryScore]) -> None:
    figures = R.grouped(scores, K)[key]
    worst = sorted((s for s in scores if not s.judgement.is_leak
                    and key in ("all", R.name_of(s.judgement.folder))), key=lambda s: s.mrr)[:5]
    detail = "; ".join(f"{s.judgement.id} -> {list(s.ranked_ids[:3])}" for s in worst)
    assert figures["mrr@10"] >= R.TARGET_MRR and figures["top3"] >= R.TARGET_TOP3, (
        f"{key}: MRR@10 {figures['mrr@10']:.3f}, top-3 {figures['top3']:.3f} (worst: {detail})")


@pytest.mark.parametrize("key", sorted(FLOORS))
def test_natural_question_floors(key: str, scores: list[J.QueryScore]) -> None:
    figures = R.grouped(scores, K)[key]
    for metric, floor in FLOORS[key].items():
        assert figures[metric] >= floor, f"{key}: {metric} {figures[metric]:.4f} < {floor}"


# -- Obsidian (obsidian-tasks) ------------------------------------------------------------------


def test_obsidian_titles_are_file_names(source_of: Callable[[str], KnowledgeSource]) -> None:
    # e.g. Advanced/Styling.md opens with '# Styling Tasks', Obsidian shows 'Styling'.
    source = source_of("obsidian-tasks")
    wrong = []
    for summary in source.snapshot().approved_pages:
        payload = page(source, summary.id)
        expected = payload["frontmatter"].get("title") or Path(payload["path"]).stem
        if payload["title"] != expected:
            wrong.append(f"{payload['path']}: {payload['title']!r} != {expected!r}")
    assert not wrong, f"{len(wrong)} titles differ: {wrong[:5]}"


OBSIDIAN_NOT_TAGS = [
    # '#ffbfcc' is a CSS colour in a ```css fence; '#task/atHome' is in inline code and CSS.
    ("Advanced/Styling", {"ffbfcc", "task/atHome", "task/strategic"}),
    # colours of a ```css fence: 'color: #f33' ...
    ("Getting Started/Statuses/Example Statuses", {"f33", "0c0", "fa0"}),
    # '#task' appears only in inline code and in a ```markdown fence.
    ("Getting Started/Global Filter", {"task"}),
    # [[#Order of the new task]] and [[#Examples]] link to headings of the same page.
    ("Getting Started/Recurring Tasks", {"Order", "Examples", "Remove"}),
]


@pytest.mark.parametrize(("page_id", "forbidden"), [
    pytest.param(*case)
    for case in OBSIDIAN_NOT_TAGS])
def test_obsidian_tags_not_from_code(page_id: str, forbidden: set[str],
                                     source_of: Callable[[str], KnowledgeSource]) -> None:
    tags = folded(page(source_of("obsidian-tasks"), page_id)["tags"])
    assert not tags & folded(list(forbidden)), f"{page_id}: tags {sorted(tags)}"


@pytest.mark.parametrize(("page_id", "forbidden"), [
    pytest.param("Getting Started/Dates", "2024-09-17"),  # `[[2024-09-17]]` in inline code
    pytest.param("Getting Started/Links", "filename"),  # `[[filename|optional alias]]`
])
def test_obsidian_links_from_prose_only(page_id: str, forbidden: str,
                                        source_of: Callable[[str], KnowledgeSource]) -> None:
    links = page(source_of("obsidian-tasks"), page_id)["links"]
    assert forbidden not in links, f"{page_id}: links {links}"


@pytest.mark.parametrize(("page_id", "inside_code"), [
    pytest.param("Queries/Combining Filters", "Show all tasks I CAN do in this area:"),
    pytest.param("Queries/Line Continuations", "Search for a single backslash:"),
])
def test_obsidian_headings_outside_fences(page_id: str, inside_code: str,
                                          source_of: Callable[[str], KnowledgeSource]) -> None:
    headings = page(source_of("obsidian-tasks"), page_id)["headings"]
    assert inside_code not in headings, f"{page_id}: headings {headings}"


def test_obsidian_real_headings_and_links_are_kept(
        source_of: Callable[[str], KnowledgeSource]) -> None:
    payload = page(source_of("obsidian-tasks"), "Getting Started/Recurring Tasks")
    assert {"Usage", "Order of the new task", "Examples"} <= set(payload["headings"])
    assert {"On Completion", "Task Dependencies"} <= set(payload["links"])


# -- Logseq (ezdxf-notes) ---------------------------------------------------------------------


@pytest.mark.parametrize(("page_id", "title"), [
    ("pages/What is DXF%3F", "What is DXF?"),
    ("pages/Why are ARC coordinates wrong%3F", "Why are ARC coordinates wrong?"),
    ("pages/DXF", "DXF"),  # the page's only heading is '## See also'
    ("pages/B-splines", "B-splines"),
    ("pages/Milo Oien-Rochat", "Milo Oien-Rochat"),
    ("pages/GstarCAD", "GstarCAD"),  # title:: GstarCAD
    ("pages/Are SHX Fonts supported", "Are SHX Fonts supported"),
])
def test_logseq_titles(page_id: str, title: str,
                       source_of: Callable[[str], KnowledgeSource]) -> None:
    assert page(source_of("ezdxf-notes"), page_id)["title"] == title


def test_logseq_property_and_prose_tags(source_of: Callable[[str], KnowledgeSource]) -> None:
    # 'tags:: FAQ, fonts, font-cache' and prose '#TTF', '#SHX' outside code.
    tags = folded(page(source_of("ezdxf-notes"), "pages/Recognize New Installed Fonts")["tags"])
    assert {"faq", "fonts", "font-cache", "ttf", "shx"} <= tags


@pytest.mark.parametrize(("page_id", "forbidden"), [
    # 'INSERT(#B9)', 'SPATIAL_FILTER(#C1)': entity handles in a ``` block
    pytest.param("pages/Exploring the transformation behavior of SPATIAL_FILTER", {"B9", "C1"}),
    # '`ATTDEF(#2F9)`', '`DICTIONARY(#2FA)`': handles in inline code
    pytest.param("journals/2023_11_12", {"2F9", "2FA"}),
])
def test_logseq_tags_not_from_code(page_id: str, forbidden: set[str],
                                   source_of: Callable[[str], KnowledgeSource]) -> None:
    tags = folded(page(source_of("ezdxf-notes"), page_id)["tags"])
    assert not tags & folded(list(forbidden)), f"{page_id}: tags {sorted(tags)}"


def test_logseq_alias_list_resolves_links(source_of: Callable[[str], KnowledgeSource]) -> None:
    # odafc-addon links [[ODA File Converter]]; ODAFileConverter has 'alias:: ODAFC, ODA File Converter'.
    targets, _ = out_edges(source_of("ezdxf-notes"), "pages/odafc-addon")
    assert "page:pages/ODAFileConverter" in targets


def test_logseq_single_alias_resolves_links(source_of: Callable[[str], KnowledgeSource]) -> None:
    _, unresolved = out_edges(source_of("ezdxf-notes"), "pages/Recognize New Installed Fonts")
    assert "config file" not in folded(sorted(unresolved)), f"unresolved: {sorted(unresolved)}"


# -- Dendron (dendron-handbook) -------------------------------------------------------------


# Page ids are the notes' frontmatter ids (notes/<name>.md has 'id: ...').


def test_dendron_titles_and_tags(source_of: Callable[[str], KnowledgeSource]) -> None:
    source = source_of("dendron-handbook")
    assert page(source, "r9XHiz16hDCqndyNhwSjB")["title"] == "Time Off"  # handbook.sop.time-off
    assert page(source, "3oz8nugqzixyr1lxzidhyi2")["title"] == "Directly Responsibile Individual"
    # area.growth.ref.writing-style-guide-for-docs: '#stage.seed: this guide is a work in progress'
    assert "stage.seed" in folded(page(source, "JG8aRMn9RkKtQAaMmkh7p")["tags"])


def test_dendron_cross_vault_links_resolve(source_of: Callable[[str], KnowledgeSource]) -> None:
    # handbook.people.remote-work: [[Communication|dendron://dendron.handbook/handbook.sop.communication]]
    targets, unresolved = out_edges(source_of("dendron-handbook"), "zBlxjKJ0bFMcLJXhch2U0")
    assert "page:Vsq2MH3oisleK9ceK2iGt" in targets, f"unresolved: {sorted(unresolved)}"


# -- generic Markdown (react-ko) ------------------------------------------------------------------


@pytest.mark.parametrize(("page_id", "title"), [
    ("learn/thinking-in-react", "React로 사고하기"),  # title: React로 사고하기
    ("learn/manipulating-the-dom-with-refs", "Ref로 DOM 조작하기"),  # title: 'Ref로 DOM 조작하기'
    # no title in its frontmatter (it says 'link: "<link>"'), no level-1 heading
    ("reference/react-dom/components/link", "link"),
])
def test_generic_titles(page_id: str, title: str,
                        source_of: Callable[[str], KnowledgeSource]) -> None:
    assert page(source_of("react-ko"), page_id)["title"] == title


@pytest.mark.parametrize(("page_id", "forbidden"), [
    # '.highlighted { background: #d2eaff; }' in a ```css fence
    pytest.param("learn/choosing-the-state-structure", {"d2eaff"}),
    # '[대부분의 경우](#special-rendering-behavior)', '[아래 예시를 참고하세요.](#usage)'
    pytest.param("reference/react-dom/components/link", {"special-rendering-behavior", "usage"}),
])
def test_generic_tags_not_from_code_or_urls(page_id: str, forbidden: set[str],
                                            source_of: Callable[[str], KnowledgeSource]) -> None:
    tags = folded(page(source_of("react-ko"), page_id)["tags"])
    assert not tags & forbidden, f"{page_id}: tags {sorted(tags)}"


def test_generic_links_not_from_fence_info(source_of: Callable[[str], KnowledgeSource]) -> None:
    links = page(source_of("react-ko"), "reference/react/useState")["links"]
    assert '2, 2, "setName"' not in links, f"links {links[:8]}"
