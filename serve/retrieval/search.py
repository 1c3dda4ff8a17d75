"""Search and context packs over one snapshot: lexical, literal, variants, orientation."""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.filters import Filters
from serve.errors import UserError
from serve.graph.budget import GRAPH_BYTES
from serve.retrieval.answerable import Coverage, IndexLookup, judge, quoted_phrases
from serve.retrieval.bm25 import Hit
from serve.retrieval.filters import Modified
from serve.retrieval.guidance import build_guidance
from serve.retrieval.index import LexicalIndex
from serve.retrieval.items import project_fields, result, section_item, snippet, snippet_size
from serve.retrieval.literal_bounds import literal_bounds, upper_scores
from serve.retrieval.narrowing import (
    FILTERED_OUT,
    NONE_ADMITTED_MATCH,
    Narrowing,
    no_modified,
    without_phrases,
)
from serve.retrieval.pairs import literal_haystack
from serve.retrieval.question import asked_terms, question_terms
from serve.retrieval.scoring import ROLE_MULTIPLIER
from serve.snapshot.projection import Projection
from serve.source.page import ROLE_RANK, Page

MAX_QUERY_TERMS = 64  # a 100 KB query is searched by its first 64 distinct terms
MAX_QUERY_CHARS = 8192
FUSION_K = 60
MEMO_ENTRIES = 64  # per-snapshot results kept (SnapshotCaches.results)
NO_EVIDENCE = "No matching approved LLMWiki page was found."
EMPTY_QUERY = "The query is empty, so no evidence was searched."
VECTOR_DISABLED = (
    "Vector search is not enabled for this server. Use mode=lexical or mode=literal; "
    "vector and hybrid modes need a vector backend, which this server does not have."
)


class SlowSearch(Exception):
    """A literal search needed more page texts than its request's read_budget."""


@dataclass(frozen=True)
class SearchRequest:
    """A validated search or context request (protocol-independent)."""

    query: str = ""
    limit: int = 8
    include_drafts: bool = False  # already combined with the operator's permission
    mode: str = "lexical"
    fields: tuple[str, ...] | None = None
    snippet_chars: int | None = None
    min_score: float | None = None
    exclude_page_ids: tuple[str, ...] = ()
    query_variants: tuple[str, ...] = field(default_factory=tuple)
    # Page texts a literal search may read before giving up with SlowSearch (None: no limit),
    # so a caller can try it where it must not take long and run it elsewhere when it would.
    read_budget: int | None = None
    # Whether a context pack carries the graph around its evidence ({"nodes": [], "edges": []}
    # when not: an agent that never reads the graph need not pay for it).
    include_graph: bool = True
    # The `filters` object, checked (common/filters.py); None when the request sent none.
    filters: Filters | None = None

    def check(self) -> None:
        """Service-level rules (HTTP 400 / JSON-RPC invalid params)."""
        if self.mode in ("vector", "hybrid"):
            if self.min_score is not None:
                raise UserError("min_score is not supported for vector or hybrid search. "
                                "Remove min_score or use lexical/literal mode.")
            raise UserError(VECTOR_DISABLED)
        if self.query_variants:
            if self.mode != "lexical":
                raise UserError("query_variants is supported only with mode=lexical")
            if not self.query.strip():
                raise UserError("query is required when query_variants are supplied")


def _excluded_paths(projection: Projection, entries: Sequence[str]) -> set[str]:
    wanted = {e.strip() for e in entries if e.strip()}
    if not wanted:
        return set()
    return {p.path for p in projection.pages if p.id in wanted or p.path in wanted}


def _literal_score(page: Page, needle: str, count: float) -> float:
    """A literal hit's score for `count` occurrences of the (case-folded) needle."""
    score = (1.0 + min(3.0, math.log(1 + count)) + 1.5 * (needle in page.title.casefold())
             + 0.7 * (needle in page.summary.casefold()))
    return score * ROLE_MULTIPLIER.get(page.role, 1.0)


def _literal_hit(page: Page, needle: str, min_score: float | None) -> Hit | None:
    count = literal_haystack(page).count(needle)
    if not count:
        return None
    score = _literal_score(page, needle, count)
    if min_score is not None and score < min_score:
        return None
    return Hit(page, score)


def _literal_order(hit: Hit) -> tuple[float, int, str]:
    return (-round(hit.score, 4), ROLE_RANK.get(hit.page.role, 3), hit.page.path)


class Searcher:
    """Runs searches against one snapshot and the index synced to it."""

    def __init__(self, projection: Projection, index: LexicalIndex,
                 lock: AbstractContextManager[Any] | None = None,
                 modified: Modified = no_modified) -> None:
        self.projection = projection
        self.index = index
        self.lock = lock if lock is not None else nullcontext()
        self.modified = modified  # a page file's modification time, for date filters

    def narrowing(self, req: SearchRequest) -> Narrowing:
        return Narrowing(self.projection, req.filters, req.query, include_drafts=req.include_drafts,
                         literal=req.mode == "literal", modified=self.modified)

    def visible(self, include_drafts: bool) -> tuple[Page, ...]:
        return self.projection.visible_pages(include_drafts)

    def item(self, page: Page, score: float, route: str, needles: Sequence[str],
             snippet_chars: int | None, literal: str = "",
             fields: Sequence[str] | None = None) -> dict[str, Any]:
        p = self.projection
        return section_item(page, score, route, needles, snippet_chars, source_id=p.source_id,
                            bundle_id=p.bundle_id, page_root=p.layout.page_root, literal=literal,
                            fields=fields)

    def overview(self, req: SearchRequest, route: str = "overview",
                 narrow: Narrowing | None = None) -> list[dict[str, Any]]:
        """The pages in orientation order, less those excluded, refused by the filters or
        lacking the query's syntax (the full listing of a filtered request without free words)."""
        pages = self.projection.ordered(req.include_drafts)
        excluded = _excluded_paths(self.projection, req.exclude_page_ids)
        if narrow is not None:
            excluded |= narrow.refused()
        items: list[dict[str, Any]] = []
        for page in pages:
            if page.path in excluded or (narrow is not None and not narrow.keeps(page)):
                continue
            score = round(1.0 - 0.01 * len(items), 4)
            items.append(self.item(page, score, route, (), req.snippet_chars, fields=req.fields))
            if len(items) >= req.limit:
                break
        return items

    def search(self, req: SearchRequest) -> list[dict[str, Any]]:
        """The ranked results for a request (fields not yet projected)."""
        req.check()
        return self._results(req, self.narrowing(req))

    def _results(self, req: SearchRequest, narrow: Narrowing) -> list[dict[str, Any]]:
        if req.mode == "literal":
            return self.literal(req, narrow)
        # Only filters (no free words), or only -words: a listing, not a ranking.
        if not req.query.strip() or narrow.listing or not narrow.syntax.ranked.strip():
            return self.overview(req, narrow=narrow)
        if req.query_variants:
            return self.fused(req, narrow)
        return self.lexical(narrow.syntax.ranked, req, narrow)

    def lexical(self, query: str, req: SearchRequest,
                narrow: Narrowing | None = None) -> list[dict[str, Any]]:
        hits, needles = self._lexical_hits(query, req, narrow)
        return [self.item(h.page, round(h.score, 4), "search", needles, req.snippet_chars,
                          fields=req.fields)
                for h in hits]

    def _lexical_hits(self, query: str, req: SearchRequest,
                      narrow: Narrowing | None = None) -> tuple[list[Hit], list[str]]:
        """The ranked hits for one query text and the needles its snippets look for; pages the
        filters refuse are left out before ranking, as exclude_page_ids are."""
        sequence = question_terms(query[:MAX_QUERY_CHARS])  # filler words go (question.py)
        terms = list(dict.fromkeys(sequence))[:MAX_QUERY_TERMS]
        if not terms:
            return [], []
        excluded = _excluded_paths(self.projection, req.exclude_page_ids)
        if narrow is not None:
            excluded |= narrow.refused()
            if narrow.syntax.phrases:
                with self.lock:
                    excluded |= without_phrases(self.index, narrow.syntax.phrases)

        def ranked(leave_out: set[str]) -> list[Hit]:
            with self.lock:
                return self.index.search(terms, approved_only=not req.include_drafts,
                                         limit=req.limit, excluded=leave_out,
                                         min_score=req.min_score,
                                         sequence=sequence[:MAX_QUERY_TERMS * 4],
                                         asked=asked_terms(query[:MAX_QUERY_CHARS]))

        hits = (narrow.ranked_hits(ranked, excluded) if narrow is not None
                and narrow.syntax.constrains else ranked(excluded))
        return hits, [t for t in terms if len(t) > 1] or terms

    def fused(self, req: SearchRequest, narrow: Narrowing) -> list[dict[str, Any]]:
        """Reciprocal-rank fusion of the query and up to two variants (contract 5.7)."""
        channels: list[str] = []
        seen: set[str] = set()
        for text in (narrow.syntax.ranked.strip(), *req.query_variants):
            key = unicodedata.normalize("NFC", text).casefold()
            if key not in seen:
                seen.add(key)
                channels.append(text)
        if len(channels) == 1:
            return self.lexical(channels[0], req, narrow)
        ranked = [self._lexical_hits(text, req, narrow) for text in channels[:3]]
        fused: dict[str, float] = {}
        best_rank: dict[str, int] = {}
        # Each page's item is made as the first channel that found it would have made it
        # (its snippet looks for that channel's needles), and only for the pages returned.
        first_of: dict[str, tuple[Hit, list[str]]] = {}
        for hits, needles in ranked:
            for rank, hit in enumerate(hits, start=1):
                path = hit.page.path
                fused[path] = fused.get(path, 0.0) + 1.0 / (FUSION_K + rank)
                best_rank[path] = min(best_rank.get(path, rank), rank)
                first_of.setdefault(path, (hit, needles))
        primary = {hit.page.path: rank for rank, hit in enumerate(ranked[0][0], start=1)}
        order = sorted(fused, key=lambda p: (-fused[p], primary.get(p, 1_000_000), best_rank[p],
                                             ROLE_RANK.get(first_of[p][0].page.role, 3), p))
        return [self.item(first_of[p][0].page, round(fused[p], 6), "search", first_of[p][1],
                          req.snippet_chars, fields=req.fields)
                for p in order[: req.limit]]

    def literal(self, req: SearchRequest, narrow: Narrowing | None = None) -> list[dict[str, Any]]:
        """Case-folded substring matching (Korean and numeric phrases included).

        The index bounds how often the needle can occur in each page, which bounds the score
        a page can reach; page texts (each a decompression) are then checked best bound
        first, stopping once no unchecked page can enter the top."""
        phrase = " ".join(req.query.split())
        if not phrase:
            return self.overview(req, narrow=narrow)
        needle = phrase.casefold()
        excluded = _excluded_paths(self.projection, req.exclude_page_ids)
        if narrow is not None:
            excluded |= narrow.refused()
        index = self.index
        with self.lock:  # the index may move on to a newer snapshot later: fresher is fine
            bounds = literal_bounds(index, needle)
            alive = np.frombuffer(index.alive, dtype=np.uint8).astype(bool)
            if bounds is None:
                bounds = np.where(alive, np.inf, 0.0)
            usable = alive & (bounds > 0)
            if not req.include_drafts:
                usable &= np.frombuffer(index.approved, dtype=np.uint8).astype(bool)
            for path in excluded:
                if (doc := index.by_path.get(path)) is not None:
                    usable[doc] = False
            docs = np.flatnonzero(usable)
            upper = upper_scores(index, needle, bounds, docs)
            if req.min_score is not None:
                keep = upper >= req.min_score
                docs, upper = docs[keep], upper[keep]
            order = np.argsort(-upper, kind="stable")
            pages = index.pages
        hits: list[Hit] = []
        floor = -math.inf  # the weakest score in a full top, rounded as results are
        budget = math.inf if req.read_budget is None else req.read_budget
        for read, position in enumerate(order.tolist()):
            if len(hits) >= req.limit and upper[position] < floor - 1e-4:
                break  # every page left scores below the top's weakest: none can enter
            if read >= budget:
                raise SlowSearch(f"literal search needs more than {budget} page texts")
            page = pages[int(docs[position])]
            if page is None:
                continue
            hit = _literal_hit(page, needle, req.min_score)
            if hit is None:
                continue
            hits.append(hit)
            if len(hits) >= req.limit:
                hits.sort(key=_literal_order)
                del hits[req.limit:]
                floor = round(hits[-1].score, 4)
        hits.sort(key=_literal_order)
        return [self.item(h.page, round(h.score, 4), "literal", (), req.snippet_chars,
                          literal=needle, fields=req.fields)
                for h in hits[: req.limit]]

    def orientation(self, req: SearchRequest) -> list[dict[str, Any]]:
        """Entry pages (hot, index, overview, quickstart) for navigation: at most three,
        never evidence by themselves, so with the reference's keys only (no section: the
        same in every pack, and not what the question matched)."""
        # The same for every query: made once per snapshot and snippet size (a few sizes
        # at most), then copied (a caller may change what it is given).
        memo = self.projection.caches.results
        key = ("orientation", req.include_drafts, snippet_size(req.snippet_chars))
        items: list[dict[str, Any]] | None = memo.get(key)
        if items is None:
            hubs = self.projection.entry_pages(req.include_drafts)
            items = [result(page, round(1.0 - 0.01 * i, 4), "orientation",
                            snippet(page, (), req.snippet_chars))
                     for i, page in enumerate(hubs[:3])]
            if len(memo) < MEMO_ENTRIES:
                memo[key] = items
        return [{**item, "source_refs": list(item["source_refs"])} for item in items]

    def context(self, req: SearchRequest, *, graph_limit: int) -> dict[str, Any]:
        """The context pack: orientation, ranked evidence, limitations, the graph around
        the evidence, and retrieval guidance."""
        head, seeds, guidance = self._context_parts(req)
        # Read back from the JSON the snapshot keeps per evidence page (cheaper than a walk
        # that has to visit each page's every link, and the same payload).
        graph = json.loads(self._graph_json(req, seeds, graph_limit))
        return {**head, "graph": graph, "retrieval_guidance": guidance}

    def _graph_json(self, req: SearchRequest, seeds: Sequence[Page], graph_limit: int) -> str:
        """The pack's graph: the evidence's neighbourhood within its size budget, or none."""
        return self.projection.evidence_graph_json(
            seeds, req.include_drafts, graph_limit if req.include_graph else 0, size=GRAPH_BYTES)

    def coverage(self, req: SearchRequest, seeds: Sequence[Page],
                 narrow: Narrowing | None = None) -> Coverage:
        """Whether the evidence pages hold the question's distinctive terms (answerable.py).
        A literal hit holds the whole phrase, and a filtered listing is what was asked for;
        with variants, one covered wording is enough (the first one's gaps are named
        otherwise). -words are not the question's terms."""
        if req.mode == "literal" or (narrow is not None and narrow.listing):
            return Coverage(True)
        query = narrow.syntax.ranked if narrow is not None else req.query
        with self.lock:
            lookup = IndexLookup(self.index, seeds, approved_only=not req.include_drafts)
            first = judge(query[:MAX_QUERY_CHARS], lookup)
            if first.answerable or any(judge(v[:MAX_QUERY_CHARS], lookup).answerable
                                       for v in req.query_variants):
                return Coverage(True)
            return first

    def _context_parts(self, req: SearchRequest) -> tuple[dict[str, Any], list[Page], dict[str, Any]]:
        """The pack's fields before the graph, the pages that seed the graph, and the
        guidance after it."""
        req.check()
        p = self.projection
        narrow = self.narrowing(req)
        blank = not req.query.strip() and req.filters is None  # filters alone list pages
        evidence = [] if blank else self._results(req, narrow)
        limitations = []
        if blank:
            limitations.append(EMPTY_QUERY)
        elif not evidence:
            limitations.append(self._why_none(req, narrow))
            if narrow.syntax.phrases:  # name them, as a pack whose evidence lacks them does
                limitations.append(Coverage(False, tuple(quoted_phrases(req.query))).limitation())
        withheld = p.page_count - p.approved_page_count
        if not req.include_drafts and withheld > 0:
            limitations.append(f"{withheld} draft or unapproved page(s) were withheld.")
        # Evidence items carry their page's path: the pages themselves seed the graph.
        seeds = [p.pages[i] for item in evidence if (i := p.position.get(item["path"])) is not None]
        coverage = self.coverage(req, seeds, narrow) if evidence else Coverage(False)
        if coverage.missing:
            limitations.append(coverage.limitation())
        head = {
            "query": req.query,
            "wiki_title": p.title,
            "description": p.description,
            "adapter": p.layout.adapter,
            "implementation": p.layout.implementation,
            "page_count": p.page_count,
            "approved_page_count": p.approved_page_count,
            "answerable": coverage.answerable,
            "orientation": [project_fields(i, req.fields) for i in self.orientation(req)],
            "evidence": [project_fields(i, req.fields) for i in evidence],
            "limitations": limitations,
        }
        guidance = build_guidance(self.visible(req.include_drafts), p.layout.adapter, req.query,
                                  hubs=p.entry_pages(req.include_drafts))
        return head, seeds, guidance

    def _why_none(self, req: SearchRequest, narrow: Narrowing) -> str:
        """The limitation of a pack without evidence: the filters left no page at all, or no
        page they (and the query's syntax) admit matched, or no page matched."""
        if narrow.filtered and narrow.admits_none(_excluded_paths(self.projection, req.exclude_page_ids)):
            return FILTERED_OUT
        return NONE_ADMITTED_MATCH if narrow.filtered or narrow.syntax.constrains else NO_EVIDENCE
