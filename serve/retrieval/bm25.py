"""BM25 scoring over a lexical index: the ranked pages for a query's terms."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from serve.retrieval.analyzer import HANGUL_RE
from serve.retrieval.fields import weigh_fields
from serve.retrieval.scoring import (
    K1,
    PHRASE_WEIGHT,
    B,
    lead_pair_count,
    lead_terms,
    pool_floor,
    shares,
    term_weight,
)
from serve.source.page import ROLE_RANK, Page

if TYPE_CHECKING:
    from serve.retrieval.index import LexicalIndex


@dataclass(slots=True)
class Hit:
    page: Page
    score: float


def search(index: LexicalIndex, terms: Sequence[str], *, approved_only: bool, limit: int,
           excluded: Iterable[str] = (), min_score: float | None = None,
           sequence: Sequence[str] = (), asked: frozenset[str] = frozenset()) -> list[Hit]:
    """Ranked pages for the query terms: BM25 × role multiplier × field weights (`asked`:
    every term of the question, fields.py), ties by role, path."""
    n_docs = len(index.pages)
    if n_docs == 0 or not terms:
        return []
    corpus_n = index.n_approved if approved_only else index.n_all
    corpus_len = index.len_approved if approved_only else index.len_all
    if corpus_n == 0:
        return []
    avgdl = max(1.0, corpus_len / corpus_n)
    norm = _length_norms(index, avgdl)
    matched: list[tuple[float, float, list[tuple[np.ndarray, np.ndarray]]]] = []
    df_of = index.df_approved if approved_only else index.df_all
    field_weights: dict[str, float] = {}
    for term in terms:
        tid = index.vocab.get(term)
        if tid is None:
            continue
        df = int(df_of[tid])
        if df <= 0:
            continue
        idf = math.log(1.0 + (corpus_n - df + 0.5) / (df + 0.5))
        matched.append((idf, term_weight(term), list(index.postings_of(tid))))
        field_weights[term] = idf * term_weight(term)
    if not matched:
        return []
    # One pass sums every term's share per document, in term order: the same float sums
    # as adding term by term, without a gather and a scatter per term.
    doc_parts = [docs for _, _, slices in matched for docs, _ in slices]
    score_parts = [shares(idf, weight, docs, tfs, norm)
                   for idf, weight, slices in matched for docs, tfs in slices]
    scores: np.ndarray = np.bincount(
        np.concatenate(doc_parts), weights=np.concatenate(score_parts), minlength=n_docs
    ) if doc_parts else np.zeros(n_docs, dtype=np.float64)
    scores *= _doc_weights(index, approved_only)
    scores[[doc for key in excluded if (doc := index.by_path.get(key)) is not None]] = 0.0
    floor = pool_floor(scores)
    if floor is not None:
        # More than RERANK_POOL documents score: the best RERANK_POOL (and all tied with
        # the last) are re-ranked; the rest cannot overtake them, as the phrase bonus only
        # raises scores. The pool does not depend on `limit`, so `limit` only cuts the
        # ranking. np.round(v, 4) >= kth needs v >= kth - 0.00005: round only those.
        kth = round(floor, 4)
        near = np.flatnonzero(scores > max(kth - 2e-4, 0.0))
        candidates = near[np.round(scores[near], 4) >= kth]
    else:
        candidates = np.flatnonzero(scores > 0.0)
    values = scores[candidates]
    pages = index.pages
    hits = [Hit(pages[d], score)
            for d, score in zip(candidates.tolist(), values.tolist(), strict=True)]
    pairs = {f"\0{a}\0{b}\0" for a, b in zip(sequence, sequence[1:], strict=False)}
    # A question with no Korean in it matches nothing a page's Korean morphemes add.
    morphology = any(HANGUL_RE.search(term) for term in sequence)
    lead_of = partial(lead_terms, morphology=morphology)
    if pairs:
        # Phrase evidence: query term pairs that also follow each other in a page's lead.
        for hit in hits:
            found = lead_pair_count(pairs, lead_of(hit.page.summary))
            hit.score *= 1.0 + PHRASE_WEIGHT * found / len(pairs)
    weigh_fields(hits, field_weights, asked, lead_of, morphology)  # names, headings, lead
    if min_score is not None:  # compared with the score the client sees
        hits = [h for h in hits if h.score >= min_score]
    hits.sort(key=lambda h: (-round(h.score, 4), ROLE_RANK.get(h.page.role, 3), h.page.path))
    return hits[:limit]


def _doc_weights(index: LexicalIndex, approved_only: bool) -> np.ndarray:
    """Per document, its role multiplier where it may be found (alive, and approved when
    asked), else 0: one multiplication per search instead of a mask and a multiplier.
    The same floats (x * 1 * m == x * m). Kept until a document is added or removed (the
    stamp holds the array, so no other can take its id)."""
    stamp = (index.alive, len(index.alive), index.dead)
    cached = index._weights
    if cached is None or cached[0] != stamp:
        cached = index._weights = (stamp, {})
    weights = cached[1]
    found = weights.get(approved_only)
    if found is None:
        valid = np.frombuffer(index.alive, dtype=np.uint8).astype(np.float64)
        if approved_only:
            valid *= np.frombuffer(index.approved, dtype=np.uint8)
        valid *= np.frombuffer(index.role_mult, dtype=np.float32)
        found = weights[approved_only] = valid
    return found


def _length_norms(index: LexicalIndex, avgdl: float) -> np.ndarray:
    """K1 * (1 - B + B * doc_len / avgdl) per document (computed in float32, as it was
    per term before), kept while the documents and the average length stay the same."""
    # Lengths are only ever appended, and a rebuilt index has a new array: the array
    # and its length say which lengths these are (the stamp holds the array, so no
    # other can take its id).
    cached = index._norms
    if cached is None or cached[0][0] is not index.doc_len or cached[0][1] != len(index.doc_len):
        cached = index._norms = ((index.doc_len, len(index.doc_len)), {})
    cache = cached[1]
    norm = cache.get(avgdl)
    if norm is None:
        doc_len = np.frombuffer(index.doc_len, dtype=np.float32)
        # Widened once (exactly) here rather than per posting when added to float64 tfs.
        norm = cache[avgdl] = (K1 * (1.0 - B + B * doc_len / avgdl)).astype(np.float64)
        del doc_len
    return norm
