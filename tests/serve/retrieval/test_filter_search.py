"""Filters and query syntax through the service (issue 27): applied before the limit, listed
when the query has no free words, drafts still withheld, packs that say why they are empty,
dates from the file's modification time, and today's answers kept when neither is used."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from serve.retrieval.filters import request_filters
from serve.retrieval.narrowing import FILTERED_OUT, NONE_ADMITTED_MATCH
from serve.retrieval.search import EMPTY_QUERY, SearchRequest
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from tests.support.folders import copy_fixture

RUNBOOKS = {"runbooks/hotfix-release", "runbooks/rollback", "runbooks/token-rotation"}  # approved


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_fixture("sample-wiki", tmp_path / "roots")


def open_source(root: Path, **settings: Any) -> KnowledgeSource:
    return KnowledgeSource(ServeSettings(root=root, page_cache=False, inotify=False, **settings))


@pytest.fixture
def source(root: Path) -> Iterator[KnowledgeSource]:
    opened = open_source(root)
    yield opened
    opened.close()


def request(source: KnowledgeSource, query: str, filters: Any = None, **values: Any) -> SearchRequest:
    return source.request(query=query, filters=request_filters(filters), **values)


def ids(source: KnowledgeSource, query: str, filters: Any = None, **values: Any) -> list[str]:
    return [r["page_id"] for r in source.search(request(source, query, filters, **values)).results]


def test_filters_apply_before_the_limit(source: KnowledgeSource) -> None:
    unfiltered = ids(source, "release version", limit=1)
    assert unfiltered and unfiltered[0] not in RUNBOOKS  # so the filter has work to do
    first = ids(source, "release version", {"tags_any": ["runbook"]}, limit=1)
    assert len(first) == 1 and first[0] in RUNBOOKS
    every = ids(source, "release version", {"tags_any": ["runbook"]}, limit=30)
    assert set(every) <= RUNBOOKS and every[0] == first[0]


def test_filters_alone_list_every_admitted_page_in_orientation_order(source: KnowledgeSource) -> None:
    listing = ids(source, "", {"path_prefix": ["runbooks/"]}, limit=30)
    assert set(listing) == RUNBOOKS
    overview = ids(source, "", limit=30)  # no filters: today's orientation listing
    assert listing == [page for page in overview if page in RUNBOOKS]
    assert ids(source, "", {"path_prefix": ["runbooks/"]}, limit=2) == listing[:2]
    hubs = ids(source, "   ", {"kinds": ["orientation"]}, limit=30)
    assert hubs[:2] == ["hot", "index"] and set(hubs) <= {"hot", "index", "overview"}


def test_phrases_and_words_alone_list_too_and_narrow_a_ranking(source: KnowledgeSource) -> None:
    with_phrase = ids(source, '"previous version"', {"path_prefix": ["runbooks/"]}, limit=30)
    assert with_phrase == ["runbooks/rollback"]
    without = ids(source, "-yanked", {"path_prefix": ["runbooks/"]}, limit=30)
    assert set(without) == RUNBOOKS - {"runbooks/rollback"}
    ranked = ids(source, 'release "previous version"', limit=30)
    assert ranked == ["runbooks/rollback"]
    assert "runbooks/rollback" not in ids(source, "release rollback -yanked", limit=30)


def test_the_limit_counts_only_pages_that_hold_the_syntax(source: KnowledgeSource) -> None:
    """Pages refused for their text are left out and the ranking asked again, so a page far
    down the unfiltered order still comes back."""
    everything = ids(source, "release", limit=30)
    assert len(everything) > 3
    last = everything[-1]
    title = source.read(last).payload["title"]  # type: ignore[index]
    assert ids(source, f'release "{title}"', limit=1) == [last]
    # -release keeps out every page whose title or body has the word (tags may still rank one).
    kept = ids(source, "release -release", limit=30)
    assert len(kept) < len(everything)
    for page_id in kept:
        payload = source.read(page_id).payload
        assert isinstance(payload, dict)
        assert not re.search(r"(?<!\w)release(?!\w)", f"{payload['title']}\n{payload['text']}", re.I)


def test_no_filters_and_no_syntax_answer_as_before(source: KnowledgeSource) -> None:
    searcher = source.searcher()
    for query in ("How do I roll back a release?", "kubectl get -o yaml", "tail -f", "3차 계약"):
        req = source.request(query=query, limit=8)
        assert ids(source, query, limit=8) == [i["page_id"] for i in searcher.lexical(query, req)]
    pack = source.context(source.request(query=""))
    assert pack["evidence"] == [] and pack["limitations"][0] == EMPTY_QUERY


def test_drafts_stay_withheld(root: Path) -> None:
    shut = open_source(root)
    assert "runbooks/incident-comms" not in ids(shut, "", {"path_prefix": ["runbooks/"]}, limit=30)
    assert "runbooks/incident-comms" not in ids(shut, "incident", {"tags_any": ["runbook"]},
                                                limit=30, include_drafts=True)
    shut.close()
    drafts = open_source(root, allow_drafts=True)
    assert "runbooks/incident-comms" in ids(drafts, "", {"path_prefix": ["runbooks/"]}, limit=30,
                                            include_drafts=True)
    drafts.close()


def test_packs_say_when_the_filters_leave_nothing(source: KnowledgeSource) -> None:
    none = source.context(request(source, "roll back a release", {"path_prefix": ["nowhere/"]}))
    assert none["evidence"] == [] and none["answerable"] is False
    assert FILTERED_OUT in none["limitations"]
    unmatched = source.context(request(source, "signing keys", {"tags_any": ["versioning"]}))
    assert unmatched["evidence"] == [] and unmatched["answerable"] is False
    assert NONE_ADMITTED_MATCH in unmatched["limitations"]
    listed = source.context(request(source, "", {"tags_any": ["runbook"]}))
    assert {e["page_id"] for e in listed["evidence"]} == RUNBOOKS and listed["answerable"] is True
    ranked = source.context(request(source, "how do I roll back", {"tags_any": ["runbook"]}))
    assert ranked["evidence"][0]["page_id"] == "runbooks/rollback" and ranked["answerable"] is True
    assert all(e["page_id"] in RUNBOOKS for e in ranked["evidence"])


def test_literal_search_and_variants_take_filters(source: KnowledgeSource) -> None:
    literal = ids(source, "release", {"tags_any": ["security"]}, mode="literal", limit=30)
    assert literal and set(literal) <= {"concepts/artifact-signing", "runbooks/token-rotation"}
    assert ids(source, '"release"', mode="literal", limit=30) == []  # literal text: no syntax
    fused = ids(source, "roll back", {"tags_any": ["runbook"]}, query_variants=("yank release",),
                limit=30)
    assert fused and set(fused) <= RUNBOOKS


def test_a_page_without_a_frontmatter_date_takes_its_file_time(root: Path) -> None:
    note = root / "notes" / "plain.md"
    note.parent.mkdir()
    note.write_text("# Plain\n\nA note about release trains.\n", encoding="utf-8")
    os.utime(note, (1655251200, 1655251200))  # 2022-06-15 UTC
    source = open_source(root)
    assert ids(source, "", {"date_from": "2022-06-15", "date_to": "2022-06-15"}) == ["notes/plain"]
    assert "notes/plain" not in ids(source, "", {"date_from": "2022-06-16"}, limit=30)
    source.close()


def test_a_vault_page_takes_its_file_time_too(tmp_path: Path) -> None:
    """Dendron serves its vault's pages by their vault-relative path: the time is looked up
    under the vault."""
    root = copy_fixture("shapes/dendron-single", tmp_path / "roots")
    note = root / "vault" / "process.plain.md"
    note.write_text("# Plain\n\nNo dates here.\n", encoding="utf-8")
    os.utime(note, (1655251200, 1655251200))
    source = open_source(root)
    assert ids(source, "", {"date_to": "2022-06-15"}) == ["process.plain"]
    source.close()


def test_the_index_leaves_out_pages_that_cannot_hold_a_phrase(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A phrase whose words are everywhere but never side by side: no page text is read to
    find that out (each page used to be read and refused in turn)."""
    root = tmp_path / "many"
    root.mkdir()
    for n in range(60):
        (root / f"page-{n}.md").write_text(
            f"# Page {n}\n\nThe cache holds entries. Invalidation runs nightly for page {n}.\n",
            encoding="utf-8")
    (root / "answer.md").write_text("# Answer\n\nA cache invalidation happens on deploy.\n",
                                    encoding="utf-8")
    from serve.retrieval import narrowing

    reads: list[str] = []
    real = narrowing.satisfies
    monkeypatch.setattr(narrowing, "satisfies", lambda page, syntax: (reads.append(page.path),
                                                                      real(page, syntax))[1])
    opened = open_source(root)
    try:
        assert ids(opened, 'cache "cache invalidation"', limit=5) == ["answer"]
        assert reads == ["answer.md"], reads
        reads.clear()
        assert ids(opened, 'nightly "invalidation cache"', limit=5) == []
        assert reads == [], reads
    finally:
        opened.close()
