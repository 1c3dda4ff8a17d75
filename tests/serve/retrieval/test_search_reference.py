"""LexicalIndex.search equals the straightforward BM25 loop it replaced (bit for bit), on a
bulk-built index and after incremental edits; pool_floor equals a full sort."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pytest

from serve.retrieval.analyzer import analyze
from serve.retrieval.bm25 import Hit
from serve.retrieval.fields import weigh_fields
from serve.retrieval.index import LexicalIndex
from serve.retrieval.scoring import (
    K1,
    PHRASE_WEIGHT,
    RERANK_POOL,
    B,
    lead_terms,
    pool_floor,
    term_weight,
)
from serve.snapshot.projection import Projection
from serve.source.page import ROLE_RANK
from serve.watch.mirror import FolderMirror
from tests.support.folders import copy_fixture

WORDS = ["release", "rollback", "token", "rotation", "signing", "key", "incident", "pager", "schedule",
         "export", "audit", "ledger", "cache", "replica", "quota", "budget", "canary", "deploy", "review",
         "owner", "runbook"]


def reference_search(index: LexicalIndex, terms: Sequence[str], *, approved_only: bool, limit: int,
                     excluded: Iterable[str] = (), min_score: float | None = None,
                     sequence: Sequence[str] = ()) -> list[Hit]:
    """The ranking as first written: per-term scatter-adds, a full argpartition, and a set
    of lead pairs per page."""
    n_docs = len(index.pages)
    corpus_n = index.n_approved if approved_only else index.n_all
    corpus_len = index.len_approved if approved_only else index.len_all
    if n_docs == 0 or not terms or corpus_n == 0:
        return []
    avgdl = max(1.0, corpus_len / corpus_n)
    doc_len = np.frombuffer(index.doc_len, dtype=np.float32)
    scores = np.zeros(n_docs, dtype=np.float64)
    matched = False
    field_weights: dict[str, float] = {}
    df_of = index.df_approved if approved_only else index.df_all
    for term in terms:
        tid = index.vocab.get(term)
        if tid is None or int(df_of[tid]) <= 0:
            continue
        df = int(df_of[tid])
        matched = True
        idf = math.log(1.0 + (corpus_n - df + 0.5) / (df + 0.5))
        weight = term_weight(term)
        field_weights[term] = idf * weight
        for docs, tfs in index.postings_of(tid):
            tf = tfs.astype(np.float64)
            dl = doc_len[docs]
            scores[docs] += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl)) * weight
    if not matched:
        return []
    valid = np.frombuffer(index.approved if approved_only else index.alive, dtype=np.uint8)
    if approved_only:
        valid = valid & np.frombuffer(index.alive, dtype=np.uint8)
    scores *= valid
    scores *= np.frombuffer(index.role_mult, dtype=np.float32)
    for key in excluded:
        doc = index.by_path.get(key)
        if doc is not None:
            scores[doc] = 0.0
    candidates = np.nonzero(scores > 0.0)[0]
    if len(candidates) > RERANK_POOL:
        top = candidates[np.argpartition(-scores[candidates], RERANK_POOL - 1)[:RERANK_POOL]]
        kth = round(float(scores[top].min()), 4)
        candidates = candidates[np.round(scores[candidates], 4) >= kth]
    hits = [Hit(index.pages[int(d)], float(scores[int(d)])) for d in candidates]  # type: ignore[arg-type]
    pairs = set(zip(sequence, sequence[1:], strict=False))
    if pairs:
        for hit in hits:
            terms_of_lead = analyze(hit.page.summary)
            lead = set(zip(terms_of_lead, terms_of_lead[1:], strict=False))
            hit.score *= 1.0 + PHRASE_WEIGHT * len(pairs & lead) / len(pairs)
    # The field weights (serve/retrieval/fields.py, tested on their own) apply after it.
    weigh_fields(hits, field_weights, lead_of=lead_terms)
    if min_score is not None:
        hits = [h for h in hits if h.score >= min_score]
    hits.sort(key=lambda h: (-round(h.score, 4), ROLE_RANK.get(h.page.role, 3), h.page.path))
    return hits[:limit]


def _projection(root: Path, previous: Projection | None = None,
                mirror: FolderMirror | None = None) -> tuple[Projection, FolderMirror]:
    mirror = mirror or FolderMirror(root.resolve(), source_id=None, max_page_bytes=8 << 20)
    mirror.full_scan()
    return mirror.project(previous), mirror


def _many_pages(root: Path, count: int, seed: int = 7) -> Path:
    """`count` pages over a small vocabulary: many pages match each word, so rankings run
    through the pool and the sampled partition; some are drafts, some hub pages."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    for i in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 60))]
        status = "status: draft\n" if i % 7 == 0 else ""
        name = "index" if i == 0 else f"page-{i:04d}"
        (root / f"{name}.md").write_text(
            f"---\ntitle: {' '.join(words[:3])}\n{status}---\n# {words[0]} {words[-1]}\n\n"
            + " ".join(words) + "\n", encoding="utf-8")
    return root


def _queries(rng: random.Random) -> list[str]:
    queries = ["release", "rollback signing key", "token rotation token", "zzqqxx release", "계약 release"]
    queries += [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(40)]
    return queries


def _same(index: LexicalIndex, queries: Sequence[str], excluded: Sequence[str]) -> None:
    for query in queries:
        sequence = analyze(query)
        terms = list(dict.fromkeys(sequence))
        for approved_only in (True, False):
            for options in ({"limit": 8}, {"limit": 30, "excluded": excluded},
                            {"limit": 5, "min_score": 1.0}):
                got = index.search(terms, approved_only=approved_only, sequence=sequence, **options)
                want = reference_search(index, terms, approved_only=approved_only, sequence=sequence,
                                        **options)
                assert [(h.page.path, h.score) for h in got] == [(h.page.path, h.score) for h in want], (
                    query, approved_only, options)


@pytest.mark.parametrize("count", [40, 900])
def test_search_equals_the_reference_through_edits(tmp_path: Path, count: int) -> None:
    root = _many_pages(tmp_path / "many", count)
    first, mirror = _projection(root)
    index = LexicalIndex()
    index.sync(first.pages)
    rng = random.Random(count)
    queries = _queries(rng)
    excluded = [first.pages[3].path, first.pages[10].path, "no/such.md"]
    _same(index, queries, excluded)
    # Edits put documents in the delta segment and leave dead ones behind.
    for i in range(1, 30, 3):
        page = root / f"page-{i:04d}.md"
        page.write_text(page.read_text(encoding="utf-8") + "\nrelease rollback canary\n", encoding="utf-8")
    (root / "page-0002.md").unlink()
    (root / "page-new.md").write_text("# Release notes\nrelease token rotation\n", encoding="utf-8")
    second, _ = _projection(root, first, mirror)
    index.sync(second.pages)
    assert index.delta
    _same(index, queries, excluded)


@pytest.mark.parametrize("fixture", ["sample-wiki", "shapes/korean-wiki"])
def test_search_equals_the_reference_on_fixtures(tmp_path: Path, fixture: str) -> None:
    p, _ = _projection(copy_fixture(fixture, tmp_path))
    index = LexicalIndex()
    index.sync(p.pages)
    queries = ["release checklist", "rollback", "token rotation", "publish.yml", "3차 계약", "incident",
               "release readiness review", "계약 관리 절차"]
    _same(index, queries, [p.pages[0].path])


def test_pool_floor_is_the_pool_th_largest_score() -> None:
    rng = np.random.default_rng(3)
    for size in (5, 30, 31, 200, 481, 511, 2000, 20000):
        for positives in (0, 10, RERANK_POOL, RERANK_POOL + 1, 100, size):
            for ties in (False, True):
                scores = np.zeros(size)
                chosen = rng.choice(size, min(size, positives), replace=False)
                values = rng.integers(1, 4, len(chosen)) / 7 if ties else rng.random(len(chosen)) * 9
                scores[chosen] = values
                positive = np.sort(scores[scores > 0])[::-1]
                expected = float(positive[RERANK_POOL - 1]) if len(positive) > RERANK_POOL else None
                assert pool_floor(scores) == expected, (size, positives, ties)
    # A sample that happens to miss the top (all of it in one stretch) still gives the floor.
    scores = np.zeros(20000)
    scores[-40:] = np.arange(1, 41)
    assert pool_floor(scores) == 11.0
