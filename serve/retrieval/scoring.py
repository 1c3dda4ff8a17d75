"""BM25 scoring pieces: constants, per-term shares, the rerank pool, phrase evidence."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from serve.retrieval.analyzer import analyze

K1 = 1.2
B = 0.75
ROLE_MULTIPLIER = {"hot": 1.15, "index": 1.06, "overview": 1.03, "topic": 1.0}
PHRASE_WEIGHT = 0.3
RERANK_POOL = 30  # candidates the phrase bonus may reorder: the most `limit` can be


@lru_cache(maxsize=16384)
def lead_terms(summary: str, morphology: bool = True) -> str:
    """The lead's terms as "\\0a\\0b\\0...\\0": terms a, b follow each other in the lead iff
    "\\0a\\0b\\0" is in it (terms hold no NUL). A string a tenth the size of a set of pairs,
    so the cache holds every lead a busy query mix needs (a miss is an analysis). Without
    `morphology` for a question with no Korean in it (analyzer.analyze)."""
    return "\0" + "\0".join(analyze(summary, morphology=morphology)) + "\0"


def lead_pair_count(pairs: Iterable[str], lead: str) -> int:
    """How many of `pairs` (each "\\0a\\0b\\0") occur in a lead_terms() string."""
    found = 0
    for pair in pairs:  # a plain loop: a generator costs more than the test (hot path)
        if pair in lead:
            found += 1
    return found


def shares(idf: float, weight: float, docs: np.ndarray, tfs: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """One term's BM25 share per posting: idf * tf * (K1 + 1) / (tf + norm) * weight, in
    that order (the order fixes the float results), in place."""
    tf = tfs.astype(np.float64)
    denominator = tf + norm.take(docs)
    tf *= idf
    tf *= K1 + 1.0
    tf /= denominator
    if weight != 1.0:
        tf *= weight
    return tf


def pool_floor(scores: np.ndarray) -> float | None:
    """The RERANK_POOL-th largest score, or None unless more than RERANK_POOL are positive.
    Partitioning 20,000 scores costs more than computing them, so only those at or above a
    guess from a sample are partitioned, when more than RERANK_POOL are (the largest are all
    among them)."""
    values: np.ndarray | None = None
    if len(scores) > 16 * RERANK_POOL:
        step = max(1, len(scores) // 512)
        sample = scores[::step]
        # About `step` scores lie at or above each sampled one: aim for 4 pools' worth.
        rank = min(len(sample), -(-4 * RERANK_POOL // step))
        guess = float(np.partition(sample, len(sample) - rank)[len(sample) - rank])
        if guess > 0.0:
            top = scores[scores >= guess]
            if len(top) > RERANK_POOL:
                values = top
    if values is None:
        values = scores[scores > 0.0]
        if len(values) <= RERANK_POOL:
            return None
    return float(np.partition(values, len(values) - RERANK_POOL)[len(values) - RERANK_POOL])


def term_weight(term: str) -> float:
    """Digits and lone Hangul syllables say little on their own (contract weights)."""
    if term.isdigit():
        return 0.2
    if len(term) == 1 and "\uac00" <= term <= "\ud7a3":
        return 0.4
    return 1.0
