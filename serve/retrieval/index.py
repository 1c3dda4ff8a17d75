"""The lexical index: BM25 over pages, kept in step with snapshots page by page."""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import unicodedata
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice

import numpy as np

from serve.folder import die_with_parent
from serve.retrieval.analyzer import COMPOUND_RE, CONNECTOR_RE, STOPWORDS, analyze
from serve.retrieval.fields import weigh_fields
from serve.retrieval.pairs import PairSignatures, literal_haystack, needle_bits, signature
from serve.retrieval.pairs import signatures as pair_signatures
from serve.source.page import ROLE_RANK, Page

WORD_RE = re.compile(r"[^\W_]+")
CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
K1 = 1.2
B = 0.75
ROLE_MULTIPLIER = {"hot": 1.15, "index": 1.06, "overview": 1.03, "topic": 1.0}
# Extra copies of a page's title, headings, tags and refs in its bag of terms: a field
# boost by repetition (the page text already holds the headings once).
TITLE_COPIES = 2
FIELD_COPIES = 1
LEAD_COPIES = 2
PHRASE_WEIGHT = 0.3
RERANK_POOL = 30  # candidates the phrase bonus may reorder: the most `limit` can be
# Rebuild the postings when this share of documents is dead (replaced or removed).
COMPACT_DEAD_SHARE = 0.3
# A first sync with more pages than this builds the main segment in bulk.
BULK_MIN = 256
SIGNATURE_BATCH = 512  # pages whose pair signatures are computed in one numpy pass
TERM_FINDER_CACHE = 512  # words whose containing terms are remembered until the vocabulary grows
FEW_LITERAL_CANDIDATES = 64  # literal search reads this many page texts without a tighter bound


def page_terms(page: Page, text: str | None = None) -> list[str]:
    """The bag of terms one page is indexed under (`text`: its body, when already at hand)."""
    path = page.path.rsplit(".", 1)[0] if page.path.endswith((".md", ".org")) else page.path
    meta = " ".join((*page.headings, *page.tags, *page.source_refs, path.replace("/", " ")))
    # The summary is the page's lead (its first ~360 characters): counting it again weights
    # what a page says first, which the judged sets show helps (the reference does it too).
    return (analyze(page.title) * TITLE_COPIES + analyze(meta) * FIELD_COPIES
            + analyze(page.summary) * LEAD_COPIES + analyze(page.text if text is None else text))


class Postings:
    """One term's postings in the delta segment (documents added after the bulk build):
    parallel arrays of document ids and term frequencies."""

    __slots__ = ("docs", "tfs")

    def __init__(self) -> None:
        self.docs = array("i")
        self.tfs = array("f")


@dataclass(slots=True)
class Hit:
    page: Page
    score: float


Slice = tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
_BULK_PAGES: Sequence[Page] = ()  # read by forked workers (inherited, never pickled)
PARALLEL_BULK_MIN = 2000


def analyse_range(bounds: tuple[int, int]) -> Slice:
    """Analyse pages [start, stop) of _BULK_PAGES: a local vocabulary, per-posting term
    ids and frequencies, and per-document posting counts and lengths."""
    start, stop = bounds
    vocab: dict[str, int] = {}
    term_ids: list[int] = []
    tfs: list[int] = []
    doc_terms: list[int] = []
    doc_lengths: list[int] = []
    signatures: list[np.ndarray] = []
    haystacks: list[str] = []
    for page in _BULK_PAGES[start:stop]:
        text = page.text  # one decompression for the terms and the pair signature
        counts = Counter(page_terms(page, text))
        haystacks.append(literal_haystack(page, text))
        if len(haystacks) >= SIGNATURE_BATCH:
            signatures.append(pair_signatures(haystacks))
            haystacks = []
        term_ids.extend(vocab.setdefault(term, len(vocab)) for term in counts)
        tfs.extend(counts.values())
        doc_terms.append(len(counts))
        doc_lengths.append(sum(counts.values()))
    return (list(vocab), np.array(term_ids, dtype=np.int32),
            np.minimum(np.array(tfs, dtype=np.int64), 65535).astype(np.uint16),
            np.array(doc_terms, dtype=np.int64), np.array(doc_lengths, dtype=np.int64),
            np.concatenate([*signatures, pair_signatures(haystacks)]))


def analyse_slices(pages: Sequence[Page]) -> list[Slice]:
    global _BULK_PAGES
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if len(pages) < PARALLEL_BULK_MIN or workers < 2:
        _BULK_PAGES = pages
        try:
            return [analyse_range((0, len(pages)))]
        finally:
            _BULK_PAGES = ()
    step = -(-len(pages) // workers)
    bounds = [(i, min(len(pages), i + step)) for i in range(0, len(pages), step)]
    _BULK_PAGES = pages
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            return list(pool.map(analyse_range, bounds))
    finally:
        _BULK_PAGES = ()


@lru_cache(maxsize=16384)
def lead_terms(summary: str) -> str:
    """The lead's terms as "\\0a\\0b\\0...\\0": terms a, b follow each other in the lead iff
    "\\0a\\0b\\0" is in it (terms hold no NUL). A string a tenth the size of a set of pairs,
    so the cache holds every lead a busy query mix needs (a miss is an analysis)."""
    return "\0" + "\0".join(analyze(summary)) + "\0"


def lead_pair_count(pairs: Iterable[str], lead: str) -> int:
    """How many of `pairs` (each "\\0a\\0b\\0") occur in a lead_terms() string."""
    found = 0
    for pair in pairs:  # a plain loop: a generator costs more than the test (hot path)
        if pair in lead:
            found += 1
    return found


def _shares(idf: float, weight: float, docs: np.ndarray, tfs: np.ndarray, norm: np.ndarray) -> np.ndarray:
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


class TermFinder:
    """Finds the vocabulary terms that contain a word: one C-level scan of every term joined
    by newlines instead of a Python loop over the vocabulary (~500,000 terms at 20,000 pages).
    Terms are only ever appended to a vocabulary, so new ones extend the text."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] | None = None
        self.plain = _JoinedTerms()
        self.folded = _JoinedTerms()  # non-ASCII terms whose case folding differs ("straße")
        self.found: dict[str, dict[int, int]] = {}  # recent words (cleared when terms are added)

    def containing(self, vocab: dict[str, int], word: str) -> dict[int, int]:
        """Term id -> how many times `word` occurs in that term (or in its case folding)."""
        if vocab is not self.vocab or self.plain.size > len(vocab):
            self.__init__()  # type: ignore[misc]  # a rebuilt index has a new vocabulary
            self.vocab = vocab
        if self.plain.size < len(vocab):
            # The newest terms, from the end of the (insertion-ordered) vocabulary.
            new = list(islice(reversed(vocab), len(vocab) - self.plain.size))[::-1]
            self.plain.extend(new, range(self.plain.size, len(vocab)))
            odd = [(t.casefold(), vocab[t]) for t in new if not t.isascii() and t.casefold() != t]
            self.folded.extend([t for t, _ in odd], [tid for _, tid in odd])
            self.found.clear()
        cached = self.found.get(word)
        if cached is not None:
            return cached
        found = self.plain.find(word)
        for tid, repeats in self.folded.find(word).items():
            found[tid] = max(repeats, found.get(tid, 0))
        if len(self.found) >= TERM_FINDER_CACHE:
            self.found.clear()
        self.found[word] = found
        return found


class _JoinedTerms:
    """Strings as UTF-8 joined by newlines, each with an id (bytes search is the fastest the
    runtime has); find() counts a word's occurrences per id. Rows can be appended."""

    def __init__(self, terms: Sequence[str] = ()) -> None:
        self.text = bytearray()  # grown in place: appending a few rows copies nothing
        self.starts = array("q")
        self.ids = array("i")
        self.size = 0
        if terms:
            self.extend(terms, range(len(terms)))

    def extend(self, terms: Sequence[str], ids: Iterable[int]) -> None:
        encoded = [term.encode("utf-8") for term in terms]
        offset = len(self.text) + (1 if self.size else 0)
        for term in encoded:
            self.starts.append(offset)
            offset += len(term) + 1
        self.ids.extend(ids)
        if encoded:
            if self.size:
                self.text += b"\n"
            self.text += b"\n".join(encoded)
        self.size += len(encoded)

    def find(self, word: str) -> dict[int, int]:
        found: dict[int, int] = {}
        key = word.encode("utf-8")
        if not key or b"\n" in key:
            return found
        text, starts, ids = self.text, self.starts, self.ids
        at = text.find(key)
        while at != -1:
            tid = ids[bisect_right(starts, at) - 1]
            found[tid] = found.get(tid, 0) + 1
            at = text.find(key, at + len(key))  # a row may hold the word twice
        return found

    def search(self, word: str, rows: np.ndarray | None) -> dict[int, int]:
        """find(), but counting only in `rows` (row positions, which are also the ids when the
        rows were given at construction) when they are under an eighth of all."""
        if rows is None or len(rows) >= self.size // 8:
            return self.find(word)
        found: dict[int, int] = {}
        key = word.encode("utf-8")
        if not key or b"\n" in key:
            return found
        text, starts, last = self.text, self.starts, self.size - 1
        for row in rows.tolist():
            end = starts[row + 1] - 1 if row < last else len(text)
            times = text.count(key, starts[row], end)
            if times:
                found[self.ids[row]] = times
        return found


class DocFields:
    """Per document id: case-folded title, summary and path (UTF-8, joined), and the role
    multiplier. Documents are appended as the index adds them; one that died since keeps
    its fields (callers only look at live documents) but gets multiplier 0."""

    def __init__(self) -> None:
        self.size = 0
        self.titles = _JoinedTerms()
        self.summaries = _JoinedTerms()
        self.paths = _JoinedTerms()
        self.role_mult = np.zeros(0, dtype=np.float64)

    def extend(self, pages: Sequence[Page | None]) -> None:
        ids = range(self.size, self.size + len(pages))
        self.titles.extend([p.title.casefold() if p else "" for p in pages], ids)
        self.summaries.extend([p.summary.casefold() if p else "" for p in pages], ids)
        self.paths.extend([p.path.casefold() if p else "" for p in pages], ids)
        self.role_mult = np.concatenate([self.role_mult, np.array(
            [ROLE_MULTIPLIER.get(p.role, 1.0) if p else 0.0 for p in pages], dtype=np.float64)])
        self.size += len(pages)

    def kill(self, doc: int) -> None:
        if doc < self.size:
            self.role_mult[doc] = 0.0


class LexicalIndex:
    """BM25 over the pages of the current snapshot.

    A bulk build puts every page in a compact main segment (CSR: per-term slices of two
    numpy arrays). Later changes append documents to a small delta segment, and a changed
    page's old document is marked dead, so an edit costs the work of indexing one page.
    Document frequencies and lengths are kept for two corpora, approved pages and all
    pages, as the contract asks. Dead documents go at the next rebuild, which happens
    when they pile up."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.indptr = np.zeros(1, dtype=np.int64)
        self.main_docs: np.ndarray = np.zeros(0, dtype=np.int32)  # uint16 when ids fit
        self.main_tfs: np.ndarray = np.zeros(0, dtype=np.uint16)  # uint8 when they fit
        self.delta: dict[int, Postings] = {}
        self.df_all = np.zeros(0, dtype=np.int32)
        self.df_approved = np.zeros(0, dtype=np.int32)
        self.pages: list[Page | None] = []  # by document id; None when dead
        self.doc_len = array("f")
        self.alive = bytearray()
        self.approved = bytearray()
        self.role_mult = array("f")
        self.by_path: dict[str, int] = {}
        self.n_all = self.n_approved = 0
        self.len_all = self.len_approved = 0.0
        self.dead = 0
        self.term_finder = TermFinder()
        self.pair_signatures = PairSignatures()  # one row per document id
        self._fields = DocFields()

    # -- maintenance ----------------------------------------------------------------

    def sync(self, pages: Sequence[Page]) -> int:
        """Bring the index to exactly `pages`; returns how many documents changed."""
        if not self.by_path and len(pages) > BULK_MIN:
            self._bulk(pages)
            return len(pages)
        changed = sum(self._put(page) for page in pages)
        seen = {page.path for page in pages}
        for path in [p for p in self.by_path if p not in seen]:
            self._remove(self.by_path.pop(path))
            changed += 1
        self._compact_if_needed()
        return changed

    def update(self, pages: Iterable[Page]) -> int:
        """Index `pages` in place of the documents at their paths (or as new ones), leaving
        every other document as it is: an edit costs the work of its own pages, not a walk
        over all of them. Returns how many documents changed."""
        changed = sum(self._put(page) for page in pages)
        self._compact_if_needed()
        return changed

    def _put(self, page: Page) -> bool:
        doc = self.by_path.get(page.path)
        if doc is not None and self.pages[doc] is page:
            return False
        if doc is not None:
            self._remove(doc)
        self._add(page)
        return True

    def _compact_if_needed(self) -> None:
        if self.dead > COMPACT_DEAD_SHARE * max(1, len(self.pages)) and self.dead > 64:
            live = [p for p in self.pages if p is not None]
            self.__init__()  # type: ignore[misc]
            self._bulk(live)

    def _term_id(self, term: str) -> int:
        tid = self.vocab.get(term)
        if tid is None:
            tid = self.vocab[term] = len(self.vocab)
            if tid >= len(self.df_all):  # grow the per-term arrays geometrically
                size = max(1024, 2 * len(self.df_all))
                self.df_all = np.concatenate([self.df_all, np.zeros(size - len(self.df_all), np.int32)])
                self.df_approved = np.concatenate(
                    [self.df_approved, np.zeros(size - len(self.df_approved), np.int32)])
        return tid

    def _document(self, page: Page, length: float) -> int:
        doc = len(self.pages)
        approved = page.approved
        self.pages.append(page)
        self.doc_len.append(length)
        self.alive.append(1)
        self.approved.append(1 if approved else 0)
        self.role_mult.append(ROLE_MULTIPLIER.get(page.role, 1.0))
        self.by_path[page.path] = doc
        self.n_all += 1
        self.len_all += length
        if approved:
            self.n_approved += 1
            self.len_approved += length
        return doc

    def _bulk(self, pages: Sequence[Page]) -> None:
        """Index many pages at once into the main segment. Analysis runs in forked worker
        processes when there are many pages: it is CPU-bound, and the temporary objects
        it creates then never swell this process's heap. Each temporary array here is
        dropped as soon as it is used: the build's peak memory is mostly these arrays."""
        vocab = self.vocab
        slices = analyse_slices(pages)
        term_parts: list[np.ndarray] = []
        tf_parts: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        slices.reverse()
        while slices:
            local_vocab, term_ids, tfs, doc_terms, doc_lengths, signatures = slices.pop()
            self.pair_signatures.extend(signatures)
            mapping = np.array([vocab.setdefault(t, len(vocab)) for t in local_vocab], dtype=np.int32)
            term_parts.append(mapping[term_ids] if len(term_ids) else term_ids)
            tf_parts.append(tfs)
            lengths.append(doc_terms)
            for page, length in zip(pages[len(self.pages):], doc_lengths.tolist(), strict=False):
                self._document(page, float(length))
            del local_vocab, term_ids, tfs, signatures, mapping
        all_terms = np.concatenate(term_parts) if term_parts else np.zeros(0, np.int32)
        del term_parts
        per_doc = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        size = len(vocab)
        counts_per_term = np.bincount(all_terms, minlength=size)
        approved = np.repeat(np.frombuffer(self.approved, dtype=np.uint8)[: len(pages)], per_doc)
        approved_per_term = np.bincount(all_terms, weights=approved, minlength=size)
        del approved
        self.indptr = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(counts_per_term, out=self.indptr[1:])
        order = np.argsort(all_terms, kind="stable")  # by term; documents stay in order
        del all_terms
        all_tfs = np.concatenate(tf_parts) if tf_parts else np.zeros(0, np.uint16)
        del tf_parts
        # Term frequencies as one byte when they fit (they almost always do): exact either way.
        if not len(all_tfs) or int(all_tfs.max()) <= 255:
            all_tfs = all_tfs.astype(np.uint8)
        self.main_tfs = all_tfs[order]
        del all_tfs
        # Half the size of int32 ids while every main-segment document id fits in 16 bits.
        doc_type = np.uint16 if len(pages) <= 1 << 16 else np.int32
        all_docs = np.repeat(np.arange(len(pages), dtype=doc_type), per_doc)
        self.main_docs = all_docs[order]
        del all_docs, order
        capacity = max(1024, size)
        self.df_all = np.zeros(capacity, np.int32)
        self.df_approved = np.zeros(capacity, np.int32)
        self.df_all[:size] = counts_per_term
        self.df_approved[:size] = approved_per_term

    def _add(self, page: Page) -> None:
        text = page.text
        counts = Counter(page_terms(page, text))
        doc = self._document(page, float(sum(counts.values())))
        self.pair_signatures.extend([signature(literal_haystack(page, text))])
        approved = page.approved
        for term, tf in counts.items():
            tid = self._term_id(term)
            post = self.delta.get(tid)
            if post is None:
                post = self.delta[tid] = Postings()
            post.docs.append(doc)
            post.tfs.append(tf)
            self.df_all[tid] += 1
            if approved:
                self.df_approved[tid] += 1

    def _remove(self, doc: int) -> None:
        page = self.pages[doc]
        if page is None:
            return
        approved = bool(self.approved[doc])
        for term in set(page_terms(page)):  # the same terms it was indexed under
            tid = self.vocab[term]
            self.df_all[tid] -= 1
            if approved:
                self.df_approved[tid] -= 1
        length = self.doc_len[doc]
        self.n_all -= 1
        self.len_all -= length
        if approved:
            self.n_approved -= 1
            self.len_approved -= length
        self.pages[doc] = None
        self.alive[doc] = 0
        self._fields.kill(doc)
        self.dead += 1

    def _weighted_counts(self, repeats: dict[int, int]) -> np.ndarray:
        """Per document, the sum over `repeats`' terms of tf × repeat: the main segment's
        slices gathered in one numpy pass (a word may sit in thousands of terms), the delta
        segment's term by term."""
        counts = np.zeros(len(self.pages), dtype=np.float64)
        if not repeats:
            return counts
        tids = np.fromiter(repeats, dtype=np.int64, count=len(repeats))
        weights = np.fromiter(repeats.values(), dtype=np.float64, count=len(repeats))
        in_main = tids < len(self.indptr) - 1
        starts, stops = self.indptr[tids[in_main]], self.indptr[tids[in_main] + 1]
        lengths = stops - starts
        if lengths.sum():
            # Positions start..stop-1 of every slice, as one index array.
            offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
            positions = offsets + np.arange(int(lengths.sum()))
            counts += np.bincount(self.main_docs[positions],
                                  weights=self.main_tfs[positions] * np.repeat(weights[in_main], lengths),
                                  minlength=len(self.pages))
        for tid, repeat in repeats.items():
            post = self.delta.get(tid)
            if post is not None and post.docs:
                docs = np.frombuffer(post.docs, dtype=np.int32)
                counts += np.bincount(docs, weights=np.frombuffer(post.tfs, dtype=np.float32) * repeat,
                                      minlength=len(self.pages))
        return counts

    def postings_of(self, tid: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The (documents, term frequencies) slices of one term, main then delta."""
        if tid < len(self.indptr) - 1:
            start, stop = int(self.indptr[tid]), int(self.indptr[tid + 1])
            if stop > start:
                yield self.main_docs[start:stop], self.main_tfs[start:stop]
        post = self.delta.get(tid)
        if post is not None and post.docs:
            yield (np.frombuffer(post.docs, dtype=np.int32).copy(),
                   np.frombuffer(post.tfs, dtype=np.float32).copy())

    # -- search ---------------------------------------------------------------------

    def literal_bounds(self, needle: str) -> np.ndarray | None:
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
        bound = np.where(self.pair_signatures.matching(bits), np.inf, 0.0) if bits else None
        if bound is not None and np.count_nonzero(bound) <= FEW_LITERAL_CANDIDATES:
            return bound
        # Identifiers are indexed whole too ("publish.yml"): a far tighter bound than their words,
        # so they go first, and their own words add little. Any subset of the words gives a
        # valid bound, so the search stops adding words once few pages are left.
        compounds = [c for c in COMPOUND_RE.findall(needle) if CONNECTOR_RE.search(c)]
        words = [w for w in dict.fromkeys(WORD_RE.findall(needle)) if not any(w in c for c in compounds)]
        for word in [*dict.fromkeys(compounds), *sorted(words, key=len, reverse=True)]:
            within = np.flatnonzero(bound) if bound is not None else None
            counts = self._word_counts(word, compound=word in compounds, within=within)
            if counts is None:
                continue
            bound = counts if bound is None else np.minimum(bound, counts)
            if np.count_nonzero(bound) <= FEW_LITERAL_CANDIDATES:
                break
        return bound

    def literal_candidates(self, needle: str) -> set[str] | None:
        """Paths of the pages that may contain `needle`, or None when every page may."""
        bound = self.literal_bounds(needle)
        if bound is None:
            return None
        return {page.path for d in np.flatnonzero(bound).tolist() if (page := self.pages[d]) is not None}

    def _word_counts(self, word: str, compound: bool = False,
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
            tid = self.vocab.get(word[:2])
            repeats = {tid: 1} if tid is not None else {}
        else:
            # Case folding can turn a term into other letters ("straße" -> "strasse").
            repeats = self.term_finder.containing(self.vocab, word)
        counts = self._weighted_counts(repeats)
        # A page's path is indexed as words without its suffix ("notes/a.md" -> "notes a"), so
        # occurrences inside the path are counted from the path itself: only for the pages
        # still in the running when there are few of them (one C-speed scan otherwise).
        paths = self.doc_fields().paths
        for doc, times in paths.search(raw, within).items():
            counts[doc] += times
        return counts

    def doc_fields(self) -> DocFields:
        """Per-document fields for literal search, made on first use and extended with the
        documents added since."""
        fields = self._fields
        if fields.size < len(self.pages):
            fields.extend(self.pages[fields.size:])
        return fields

    def literal_upper_scores(self, needle: str, bounds: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """For each of `docs`, the highest literal score it could have given its count bound:
        the title and summary bonuses are known exactly (searches of the joined fields)."""
        fields = self.doc_fields()
        bonus = np.zeros(len(self.pages), dtype=np.float64)
        for joined, weight in ((fields.titles, 1.5), (fields.summaries, 0.7)):
            found = joined.search(needle, docs)
            if found:
                bonus[np.fromiter(found, dtype=np.int64, count=len(found))] += weight
        upper: np.ndarray = ((1.0 + np.minimum(3.0, np.log1p(bounds[docs])) + bonus[docs])
                             * fields.role_mult[docs])
        return upper + 1e-9  # never below the exact score, whatever the float rounding

    def search(self, terms: Sequence[str], *, approved_only: bool, limit: int,
               excluded: Iterable[str] = (), min_score: float | None = None,
               sequence: Sequence[str] = (), asked: frozenset[str] = frozenset()) -> list[Hit]:
        """Ranked pages for the query terms: BM25 × role multiplier × field weights (`asked`:
        every term of the question, fields.py), ties by role, path."""
        n_docs = len(self.pages)
        if n_docs == 0 or not terms:
            return []
        corpus_n = self.n_approved if approved_only else self.n_all
        corpus_len = self.len_approved if approved_only else self.len_all
        if corpus_n == 0:
            return []
        avgdl = max(1.0, corpus_len / corpus_n)
        norm = self._length_norms(avgdl)
        matched: list[tuple[float, float, list[tuple[np.ndarray, np.ndarray]]]] = []
        df_of = self.df_approved if approved_only else self.df_all
        field_weights: dict[str, float] = {}
        for term in terms:
            tid = self.vocab.get(term)
            if tid is None:
                continue
            df = int(df_of[tid])
            if df <= 0:
                continue
            idf = math.log(1.0 + (corpus_n - df + 0.5) / (df + 0.5))
            matched.append((idf, term_weight(term), list(self.postings_of(tid))))
            field_weights[term] = idf * term_weight(term)
        if not matched:
            return []
        # One pass sums every term's share per document, in term order: the same float sums
        # as adding term by term, without a gather and a scatter per term.
        doc_parts = [docs for _, _, slices in matched for docs, _ in slices]
        score_parts = [_shares(idf, weight, docs, tfs, norm)
                       for idf, weight, slices in matched for docs, tfs in slices]
        scores: np.ndarray = np.bincount(
            np.concatenate(doc_parts), weights=np.concatenate(score_parts), minlength=n_docs
        ) if doc_parts else np.zeros(n_docs, dtype=np.float64)
        scores *= self._doc_weights(approved_only)
        scores[[doc for key in excluded if (doc := self.by_path.get(key)) is not None]] = 0.0
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
        pages = self.pages
        hits = [Hit(pages[d], score)
                for d, score in zip(candidates.tolist(), values.tolist(), strict=True)]
        pairs = {f"\0{a}\0{b}\0" for a, b in zip(sequence, sequence[1:], strict=False)}
        if pairs:
            # Phrase evidence: query term pairs that also follow each other in a page's lead.
            for hit in hits:
                found = lead_pair_count(pairs, lead_terms(hit.page.summary))
                hit.score *= 1.0 + PHRASE_WEIGHT * found / len(pairs)
        weigh_fields(hits, field_weights, asked, lead_terms)  # names, headings, lead
        if min_score is not None:  # compared with the score the client sees
            hits = [h for h in hits if h.score >= min_score]
        hits.sort(key=lambda h: (-round(h.score, 4), ROLE_RANK.get(h.page.role, 3), h.page.path))
        return hits[:limit]

    def _doc_weights(self, approved_only: bool) -> np.ndarray:
        """Per document, its role multiplier where it may be found (alive, and approved when
        asked), else 0: one multiplication per search instead of a mask and a multiplier.
        The same floats (x * 1 * m == x * m). Kept until a document is added or removed (the
        stamp holds the array, so no other can take its id)."""
        stamp = (self.alive, len(self.alive), self.dead)
        cached = self.__dict__.get("_weights")
        if cached is None or cached[0] != stamp:
            cached = self.__dict__["_weights"] = (stamp, {})
        weights: dict[bool, np.ndarray] = cached[1]
        found = weights.get(approved_only)
        if found is None:
            valid = np.frombuffer(self.alive, dtype=np.uint8).astype(np.float64)
            if approved_only:
                valid *= np.frombuffer(self.approved, dtype=np.uint8)
            valid *= np.frombuffer(self.role_mult, dtype=np.float32)
            found = weights[approved_only] = valid
        return found

    def _length_norms(self, avgdl: float) -> np.ndarray:
        """K1 * (1 - B + B * doc_len / avgdl) per document (computed in float32, as it was
        per term before), kept while the documents and the average length stay the same."""
        # Lengths are only ever appended, and a rebuilt index has a new array: the array
        # and its length say which lengths these are (the stamp holds the array, so no
        # other can take its id).
        stamp = self.__dict__.get("_norms_stamp")
        if stamp is None or stamp[0] is not self.doc_len or stamp[1] != len(self.doc_len):
            self.__dict__["_norms_stamp"] = (self.doc_len, len(self.doc_len))
            self.__dict__["_norms"] = {}
        cache: dict[float, np.ndarray] = self.__dict__["_norms"]
        norm = cache.get(avgdl)
        if norm is None:
            doc_len = np.frombuffer(self.doc_len, dtype=np.float32)
            # Widened once (exactly) here rather than per posting when added to float64 tfs.
            norm = cache[avgdl] = (K1 * (1.0 - B + B * doc_len / avgdl)).astype(np.float64)
            del doc_len
        return norm
