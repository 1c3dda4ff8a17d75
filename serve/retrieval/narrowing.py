"""What one request's filters and query syntax leave of a snapshot (issue 27): the pages the
filters refuse (kept per snapshot), and whether a page holds the query's phrases and none of
its -words. Search (search.py) takes the refused pages as it takes exclude_page_ids, before
ranking and before the limit."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

import numpy as np

from common.filters import Filters
from serve.retrieval.bm25 import Hit
from serve.retrieval.filters import Modified, PageFacts, PageFilter
from serve.retrieval.index import LexicalIndex
from serve.retrieval.literal_bounds import literal_bounds
from serve.retrieval.query_syntax import parse_query, satisfies
from serve.snapshot.projection import Projection
from serve.source.page import Page

MEMO_ENTRIES = 64  # the snapshot's shared memo (SnapshotCaches.results) takes no more
FILTERED_OUT = "The filters admit no page here, so no evidence was searched."
NONE_ADMITTED_MATCH = ("No page the filters and the query's phrases and -words admit matched "
                       "the question.")


def no_modified(page: Page) -> float | None:
    return None


class Narrowing:
    """A request's filters (None: not given) and its query's syntax over one snapshot."""

    def __init__(self, projection: Projection, filters: Filters | None, query: str, *,
                 include_drafts: bool, literal: bool = False, modified: Modified = no_modified) -> None:
        self.projection = projection
        self.filters = filters
        self.include_drafts = include_drafts
        # A literal search looks for its text as written: no syntax there.
        self.syntax = parse_query("" if literal else query)
        self.modified = modified
        self._kept: dict[str, bool] = {}

    @property
    def filtered(self) -> bool:
        return self.filters is not None

    @property
    def listing(self) -> bool:
        """Filters and no free words: the answer lists the admitted pages (orientation order)."""
        return self.filters is not None and not self.syntax.free.strip()

    def refused(self) -> frozenset[str]:
        """Paths of the visible pages the filters refuse (none without filters). A function of
        the snapshot, the filters and the visibility, so kept in the snapshot's memo."""
        if self.filters is None:
            return frozenset()
        memo = self.projection.caches.results
        key = ("filters", self.filters, self.include_drafts)
        found: frozenset[str] | None = memo.get(key)
        if found is None:
            rule = PageFilter(self.filters, self.projection.layout.adapter, self.modified)
            pages = self.projection.visible_pages(self.include_drafts)
            facts = self._facts(pages) if rule.reads_pages else None
            found = frozenset(page.path for at, page in enumerate(pages)
                              if not rule.admits(page, facts, at))
            if len(memo) < MEMO_ENTRIES:
                memo[key] = found
        return found

    def _facts(self, pages: Sequence[Page]) -> PageFacts:
        """Every visible page's tags and date, made once per snapshot for every filter after
        (a new tag or date range costs a pass over them, not a read of every page)."""
        memo = self.projection.caches.results
        key = ("filter facts", self.include_drafts)
        facts: PageFacts | None = memo.get(key)
        if facts is None:
            facts = PageFacts.of(pages, self.projection.layout.adapter, self.modified)
            memo[key] = facts  # before the bound: every filter of this snapshot needs it
        return facts

    def admits_none(self, excluded: Collection[str] = ()) -> bool:
        """Whether the filters leave no visible page (besides those `excluded`)."""
        refused = self.refused()
        return all(page.path in refused or page.path in excluded
                   for page in self.projection.visible_pages(self.include_drafts))

    def keeps(self, page: Page) -> bool:
        """The query's phrases are in the page and none of its -words (each page read once)."""
        if not self.syntax.constrains:
            return True
        kept = self._kept.get(page.path)
        if kept is None:
            kept = self._kept[page.path] = satisfies(page, self.syntax)
        return kept

    def ranked_hits(self, search: Callable[[set[str]], list[Hit]], excluded: set[str]) -> list[Hit]:
        """`search(excluded)`'s hits, every one of them holding the syntax: the pages that do not
        are excluded and the search asked again, until its answer holds (each round leaves out at
        least one page more, so it ends), so the limit counts only pages that qualify."""
        refused = set(excluded)
        while True:
            hits = search(refused)
            bad = [hit.page.path for hit in hits if not self.keeps(hit.page)]
            if not bad:
                return hits
            refused.update(bad)



def without_phrases(index: LexicalIndex, phrases: Iterable[str]) -> set[str]:
    """Paths of the indexed pages that the index shows cannot hold one of the phrases (literal
    search's bounds: a word or a pair of words the phrase needs is not in the page). Left out
    before ranking, so a phrase few pages hold is not found by reading and refusing every
    page ranked above them (a phrase no page held read them all: 13-18 s at 20,000 pages)."""
    out: set[str] = set()
    pages = index.pages
    for phrase in phrases:
        bounds = literal_bounds(index, phrase)
        if bounds is None:
            continue
        for doc in np.flatnonzero(bounds == 0).tolist():
            page = pages[doc]
            if page is not None:
                out.add(page.path)
    return out
