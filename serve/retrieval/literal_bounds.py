"""Literal search's bounds from the index: which pages can hold a phrase, how often at
most, and the best score each could reach."""

from __future__ import annotations

import re
import unicodedata

import numpy as np

from serve.retrieval.analyzer import COMPOUND_RE, CONNECTOR_RE, STOPWORDS
from serve.retrieval.index import LexicalIndex
from serve.retrieval.pairs import needle_bits

WORD_RE = re.compile(r"[^\W_]+")
CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
FEW_LITERAL_CANDIDATES = 64  # literal search reads this many page texts without a tighter bound


def literal_bounds(index: LexicalIndex, needle: str) -> np.ndarray | None:
    """Per document id, an upper bound on how often `needle` (case-folded) occurs in the
    page (0: it cannot occur), or None when the index cannot bound it at all.

    A page containing the phrase contains each of its words inside one of its own
    word runs, and the analyzer indexes every run whole (lowercased) once per
    occurrence — except CJK runs, indexed as bigrams, and stopwords. So a word occurs
    at most as often as the terms containing it do (times their own repeats of it;
    for CJK, its first bigram), and the phrase at most as often as its rarest word.
    Identifiers with connectors are indexed whole (lowercased) as well, and one inside
    the needle always lies inside one of the page's, so they bound it the same way.
    A page whose word-pair filter (serve/retrieval/pairs.py) lacks one of the needle's
    pairs cannot contain it at all."""
    # Adjacent words must be adjacent in the page too: the pair filters come first, as they
    # cost one pass over a small array.
    bits = needle_bits(needle)
    bound = np.where(index.pair_signatures.matching(bits), np.inf, 0.0) if bits else None
    if bound is not None and np.count_nonzero(bound) <= FEW_LITERAL_CANDIDATES:
        return bound
    # Identifiers are indexed whole too ("publish.yml"): a far tighter bound than their words,
    # so they go first, and their own words add little. Any subset of the words gives a
    # valid bound, so the search stops adding words once few pages are left.
    compounds = [c for c in COMPOUND_RE.findall(needle) if CONNECTOR_RE.search(c)]
    words = [w for w in dict.fromkeys(WORD_RE.findall(needle)) if not any(w in c for c in compounds)]
    for word in [*dict.fromkeys(compounds), *sorted(words, key=len, reverse=True)]:
        within = np.flatnonzero(bound) if bound is not None else None
        counts = _word_counts(index, word, compound=word in compounds, within=within)
        if counts is None:
            continue
        bound = counts if bound is None else np.minimum(bound, counts)
        if np.count_nonzero(bound) <= FEW_LITERAL_CANDIDATES:
            break
    return bound

def _word_counts(index: LexicalIndex, word: str, compound: bool = False,
                 within: np.ndarray | None = None) -> np.ndarray | None:
    """Per document, how often the terms containing `word` occur (times their repeats of
    it), plus its occurrences in the path; exact only for the documents in `within`
    when given (the others cannot be candidates any more)."""
    raw = word  # paths are searched as written, not NFKC-normalised like indexed text
    if not word.isascii():
        word = unicodedata.normalize("NFKC", word)
    if word != word.lower() or len(word) < (3 if word.isascii() else 2):
        return None  # case folding beyond lowercasing, or too short to narrow much
    if not compound and any(word in stopword for stopword in STOPWORDS):
        return None  # it may sit inside a stopword, which is not indexed
    if not compound and CJK_RE.fullmatch(word):
        tid = index.vocab.get(word[:2])
        repeats = {tid: 1} if tid is not None else {}
    else:
        # Case folding can turn a term into other letters ("straße" -> "strasse").
        repeats = index.term_finder.containing(index.vocab, word)
    counts = _weighted_counts(index, repeats)
    # A page's path is indexed as words without its suffix ("notes/a.md" -> "notes a"), so
    # occurrences inside the path are counted from the path itself: only for the pages
    # still in the running when there are few of them (one C-speed scan otherwise).
    paths = index.doc_fields().paths
    for doc, times in paths.search(raw, within).items():
        counts[doc] += times
    return counts


def _weighted_counts(index: LexicalIndex, repeats: dict[int, int]) -> np.ndarray:
    """Per document, the sum over `repeats`' terms of tf × repeat: the main segment's
    slices gathered in one numpy pass (a word may sit in thousands of terms), the delta
    segment's term by term."""
    counts = np.zeros(len(index.pages), dtype=np.float64)
    if not repeats:
        return counts
    tids = np.fromiter(repeats, dtype=np.int64, count=len(repeats))
    weights = np.fromiter(repeats.values(), dtype=np.float64, count=len(repeats))
    in_main = tids < len(index.indptr) - 1
    starts, stops = index.indptr[tids[in_main]], index.indptr[tids[in_main] + 1]
    lengths = stops - starts
    if lengths.sum():
        # Positions start..stop-1 of every slice, as one index array.
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        positions = offsets + np.arange(int(lengths.sum()))
        counts += np.bincount(index.main_docs[positions],
                              weights=index.main_tfs[positions] * np.repeat(weights[in_main], lengths),
                              minlength=len(index.pages))
    for tid, repeat in repeats.items():
        post = index.delta.get(tid)
        if post is not None and post.docs:
            docs = np.frombuffer(post.docs, dtype=np.int32)
            counts += np.bincount(docs, weights=np.frombuffer(post.tfs, dtype=np.float32) * repeat,
                                  minlength=len(index.pages))
    return counts


def upper_scores(index: LexicalIndex, needle: str, bounds: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """For each of `docs`, the highest literal score it could have given its count bound:
    the title and summary bonuses are known exactly (searches of the joined fields)."""
    fields = index.doc_fields()
    bonus = np.zeros(len(index.pages), dtype=np.float64)
    for joined, weight in ((fields.titles, 1.5), (fields.summaries, 0.7)):
        found = joined.search(needle, docs)
        if found:
            bonus[np.fromiter(found, dtype=np.int64, count=len(found))] += weight
    upper: np.ndarray = ((1.0 + np.minimum(3.0, np.log1p(bounds[docs])) + bonus[docs])
                         * fields.role_mult[docs])
    return upper + 1e-9  # never below the exact score, whatever the float rounding
