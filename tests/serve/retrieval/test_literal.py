"""Literal search: the index-bounded, early-stopping scan returns exactly what a full scan does."""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from serve.retrieval.analyzer import STOPWORDS
from serve.retrieval.index import LexicalIndex
from serve.retrieval.literal_bounds import literal_bounds
from serve.retrieval.scoring import ROLE_MULTIPLIER
from serve.retrieval.search import Searcher, SearchRequest, SlowSearch
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from serve.snapshot.projection import Projection
from serve.source.page import ROLE_RANK, Page
from serve.watch.mirror import FolderMirror
from tests.benchmarks.generate import generate
from tests.support.folders import copy_fixture


def _projection(root: Path) -> Projection:
    mirror = FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project()


def _brute_force(projection: Projection, needle: str, limit: int, include_drafts: bool,
                 min_score: float | None = None) -> list[tuple[str, float]]:
    """The definition: every visible page's case-folded text, counted, scored, sorted."""
    hits: list[tuple[tuple[float, int, str], str, float]] = []
    for page in projection.visible_pages(include_drafts):
        haystack = " ".join((page.title, page.path, page.summary, page.text,
                             " ".join(page.tags), " ".join(page.source_refs))).casefold()
        count = haystack.count(needle)
        if not count:
            continue
        score = (1.0 + min(3.0, math.log(1 + count)) + 1.5 * (needle in page.title.casefold())
                 + 0.7 * (needle in page.summary.casefold())) * ROLE_MULTIPLIER.get(page.role, 1.0)
        if min_score is not None and score < min_score:
            continue
        hits.append(((-round(score, 4), ROLE_RANK.get(page.role, 3), page.path), page.path,
                     round(score, 4)))
    hits.sort()
    return [(path, score) for _, path, score in hits[:limit]]


def _needles(pages: tuple[Page, ...], rng: random.Random, count: int) -> list[str]:
    """Substrings people search for: whole words, word fragments, phrases across words and
    punctuation, identifiers, Korean, numbers — cut at random points of real page text."""
    needles: list[str] = []
    while len(needles) < count:
        page = rng.choice(pages)
        text = rng.choice((page.text, page.title, page.summary)) or page.text
        if len(text) < 4:
            continue
        start = rng.randrange(len(text) - 3)
        needle = " ".join(text[start:start + rng.randint(2, 28)].split()).casefold()
        if needle:
            needles.append(needle)
    return needles


def _short_word_needles(pages: tuple[Page, ...], rng: random.Random, count: int) -> list[str]:
    """Phrases of stopwords and short words ("but this", "no payout", "is on the"), which the
    index does not hold: whole, and with the first word cut to its end or the last to its
    start (a needle may begin and end inside page words)."""
    needles: list[str] = []
    while len(needles) < count:
        words = rng.choice(pages).text.casefold().split()
        spots = [i for i in range(len(words) - 1)
                 if words[i] in STOPWORDS or len(words[i]) <= 3 or len(words[i + 1]) <= 3]
        if not spots:
            continue
        start = rng.choice(spots)
        phrase = words[start:start + rng.randint(2, 3)]
        needles.append(" ".join(phrase))
        if len(phrase[0]) > 1:
            needles.append(" ".join([phrase[0][-rng.randint(1, 2):], *phrase[1:]]))
        if len(phrase[-1]) > 1:
            needles.append(" ".join([*phrase[:-1], phrase[-1][:rng.randint(1, 2)]]))
    return needles


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Projection, Searcher]:
    root = tmp_path_factory.mktemp("literal") / "generated"
    generate(root, 400, seed=11)
    copy_fixture("sample-wiki", root / "extra")  # hubs, drafts, Korean, identifiers
    projection = _projection(root)
    index = LexicalIndex()
    index.sync(projection.pages)
    return projection, Searcher(projection, index)


def test_bounded_literal_search_equals_a_full_scan(corpus: tuple[Projection, Searcher]) -> None:
    projection, searcher = corpus
    rng = random.Random(5)
    needles = _needles(projection.pages, rng, 200)
    needles += ["the", "release", "publish.yml", "refund_window_days", "3차 계약", "v0.4.1",
                "not present anywhere zzqx", "a", "ß", "2026-", "but this", "no payout", "is on",
                "o pa", "a b", "of the"]
    needles += _short_word_needles(projection.pages, rng, 120)
    checked = 0
    for needle in needles:
        for include_drafts in (False, True):
            limit = rng.choice((1, 3, 8, 30))
            req = SearchRequest(query=needle, mode="literal", limit=limit, include_drafts=include_drafts)
            got = [(r["path"], r["score"]) for r in searcher.search(req)]
            expected = _brute_force(projection, " ".join(needle.split()).casefold(), limit, include_drafts)
            assert got == expected, (needle, include_drafts, limit)
            checked += bool(expected)
    assert checked > 450  # most needles come from real text, so most must find something


def test_bounded_literal_search_honours_min_score_and_exclusions(
        corpus: tuple[Projection, Searcher]) -> None:
    projection, searcher = corpus
    req = SearchRequest(query="release", mode="literal", limit=10, min_score=4.5)
    got = [(r["path"], r["score"]) for r in searcher.search(req)]
    assert got == _brute_force(projection, "release", 10, False, min_score=4.5)
    assert got and all(score >= 4.5 for _, score in got)
    first = got[0][0]
    req = SearchRequest(query="release", mode="literal", limit=10, exclude_page_ids=[first])
    assert first not in [r["path"] for r in searcher.search(req)]


def test_identifier_needles_are_bounded_by_their_whole_term(corpus: tuple[Projection, Searcher]) -> None:
    _, searcher = corpus
    index = searcher.index
    words_only = literal_bounds(index, "publish yml")
    whole = literal_bounds(index, "publish.yml")
    assert words_only is not None and whole is not None
    assert (whole <= words_only).all()
    assert float(whole.sum()) < float(words_only.sum())  # counts of the whole term: tighter
    assert re.fullmatch(r"[0-9.]+", "0.4.1") and literal_bounds(index, "v0.4.1") is not None


def test_literal_and_lexical_search_after_edits_equal_a_fresh_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Edits reach the index page by page (update, not a walk over all pages) and the literal
    fields are extended, not rebuilt: results must still equal a full scan and a new index."""
    root = tmp_path / "generated"
    generate(root, 300, seed=3)
    source = KnowledgeSource(ServeSettings(root=root, page_cache=False))
    try:
        source.warm()
        full_syncs: list[int] = []
        sync = LexicalIndex.sync

        def counted(index: LexicalIndex, pages: Sequence[Page]) -> int:
            if index is source.indexing.index:
                full_syncs.append(len(pages))
            return sync(index, pages)

        monkeypatch.setattr(LexicalIndex, "sync", counted)
        rng = random.Random(9)
        targets = rng.sample([p for p in source.snapshot().pages if p.role == "topic"], 6)
        for step, page in enumerate(targets):
            path = root / page.path
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(f"\nThe release marker{step} is not in this draft. But this one is.\n")
            searcher = source.searcher()
            projection = searcher.projection
            fresh = LexicalIndex()
            fresh.sync(projection.pages)
            for query in (f"marker{step}", "release checklist", "rollback token"):
                req = SearchRequest(query=query, limit=10)
                assert searcher.search(req) == Searcher(projection, fresh).search(req), query
            for needle in (f"marker{step}", "but this", "is not in", "release", "rollback"):
                req = SearchRequest(query=needle, mode="literal", limit=8)
                got = [(r["path"], r["score"]) for r in searcher.search(req)]
                assert got == _brute_force(projection, needle, 8, False), needle
            assert (page.path, ) == tuple(
                r["path"] for r in searcher.search(SearchRequest(query=f"marker{step}", mode="literal")))
        assert full_syncs == []  # every edit reached the index as its own pages
    finally:
        source.close()


def test_a_literal_search_over_its_read_budget_stops(corpus: tuple[Projection, Searcher]) -> None:
    projection, searcher = corpus
    req = SearchRequest(query="the", mode="literal", limit=8)
    expected = [(r["path"], r["score"]) for r in searcher.search(req)]
    assert expected == _brute_force(projection, "the", 8, False)
    with pytest.raises(SlowSearch):
        searcher.search(dataclasses.replace(req, read_budget=10))  # "the" is in nearly every page
    enough = dataclasses.replace(req, read_budget=len(projection.pages))
    assert [(r["path"], r["score"]) for r in searcher.search(enough)] == expected
