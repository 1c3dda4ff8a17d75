"""The lexical index: BM25 over pages, kept in step with snapshots page by page."""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from serve.retrieval.documents import analyse_slices, page_terms
from serve.retrieval.fields import weigh_fields
from serve.retrieval.pairs import SIGNATURE_BITS, PairSignatures, literal_haystack, signature
from serve.retrieval.scoring import (
    K1,
    PHRASE_WEIGHT,
    ROLE_MULTIPLIER,
    B,
    lead_pair_count,
    lead_terms,
    pool_floor,
    shares,
    term_weight,
)
from serve.retrieval.term_finder import DocFields, TermFinder
from serve.source.page import ROLE_RANK, Page

# Gives the pair signatures of a restored index's documents (their pages; None for a dead one).
PairColumns = Callable[[Sequence[Page | None]], np.ndarray]
# Rebuild the postings when this share of documents is dead (replaced or removed).
COMPACT_DEAD_SHARE = 0.3
# A first sync with more pages than this builds the main segment in bulk.
BULK_MIN = 256


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
        # Per-search arrays kept while the documents stay the same (see _doc_weights and
        # _length_norms): each with the stamp that says which documents it was made for.
        self._weights: tuple[tuple[object, ...], dict[bool, np.ndarray]] | None = None
        self._norms: tuple[tuple[object, ...], dict[float, np.ndarray]] | None = None

    # -- maintenance ----------------------------------------------------------------

    def sync(self, pages: Sequence[Page]) -> int:
        """Bring the index to exactly `pages`; returns how many documents changed."""
        if not self.by_path and len(pages) > BULK_MIN:
            self._bulk(pages)
            return len(pages)
        by_path, indexed = self.by_path, self.pages
        differ = sum(1 for page in pages if (doc := by_path.get(page.path)) is None
                     or indexed[doc] is not page)
        if differ > COMPACT_DEAD_SHARE * max(len(pages), self.n_all) and len(pages) > BULK_MIN:
            self.rebuild(pages)
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

    def remove(self, paths: Iterable[str]) -> int:
        """Drop the documents at `paths` (pages that went), leaving every other document as
        it is. Returns how many documents went."""
        gone = 0
        for path in paths:
            doc = self.by_path.pop(path, None)
            if doc is not None:
                self._remove(doc)
                gone += 1
        self._compact_if_needed()
        return gone

    def _put(self, page: Page) -> bool:
        doc = self.by_path.get(page.path)
        if doc is not None and self.pages[doc] is page:
            return False
        if doc is not None:
            self._remove(doc)
        self._add(page)
        return True

    def rebuild(self, pages: Sequence[Page]) -> None:
        """Index exactly `pages`, built anew in bulk: quicker than editing in most of them one
        by one (a checkout or a recompiled wiki), which would leave it to be compacted anyway."""
        self.__init__()  # type: ignore[misc]
        self._bulk(pages)

    def _compact_if_needed(self) -> None:
        if self.dead > COMPACT_DEAD_SHARE * max(1, len(self.pages)) and self.dead > 64:
            self.rebuild([p for p in self.pages if p is not None])

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

    def _documents(self, pages: Sequence[Page], lengths: Sequence[float]) -> None:
        """_document of each page in turn, with list and array operations instead of a call
        per page (a bulk build and its restore add 20,000s): the same sums in the same order."""
        first = len(self.pages)
        approved = bytes(1 if page.approved else 0 for page in pages)
        self.pages.extend(pages)
        self.doc_len.extend(lengths)
        self.alive.extend(b"\1" * len(pages))
        self.approved.extend(approved)
        self.role_mult.extend([ROLE_MULTIPLIER.get(page.role, 1.0) for page in pages])
        self.by_path.update(zip([page.path for page in pages], range(first, first + len(pages)),
                                strict=True))
        len_all, len_approved = self.len_all, self.len_approved
        for length, ok in zip(lengths, approved, strict=True):
            len_all += length
            if ok:
                len_approved += length
        self.len_all, self.len_approved = len_all, len_approved
        self.n_all += len(pages)
        self.n_approved += approved.count(1)

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
        self.pair_signatures.reserve(len(pages))
        while slices:
            local_vocab, term_ids, tfs, doc_terms, doc_lengths, signatures = slices.pop()
            self.pair_signatures.extend_columns(signatures, len(doc_lengths))
            mapping = np.array([vocab.setdefault(t, len(vocab)) for t in local_vocab], dtype=np.int32)
            term_parts.append(mapping[term_ids] if len(term_ids) else term_ids)
            tf_parts.append(tfs)
            lengths.append(doc_terms)
            start = len(self.pages)
            self._documents(pages[start: start + len(doc_lengths)],
                            [float(length) for length in doc_lengths.tolist()])
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

    # -- the restart cache (serve/store/search_index.py keeps it) -----------

    def is_bulk_of(self, pages: Sequence[Page]) -> bool:
        """Whether the index is exactly a bulk build of `pages`, in their order (no later
        edits): only such a state is written to the restart cache."""
        return (not self.delta and self.dead == 0 and len(self.pages) == len(pages)
                and all(a is b for a, b in zip(self.pages, pages, strict=True)))

    def exported(self) -> tuple[list[str], dict[str, np.ndarray]]:
        """The terms in id order and the arrays restored() takes back, safe to read after the
        index lock is released: what edits change in place (document frequencies, lengths) is
        copied; the main segment is only ever replaced, never written; and an edit sets filter
        bits only for documents past the count, which restored() never reads."""
        size = len(self.vocab)
        signatures = self.pair_signatures
        return list(self.vocab), {
            "indptr": self.indptr, "main_docs": self.main_docs, "main_tfs": self.main_tfs,
            "df_all": self.df_all[:size].copy(), "df_approved": self.df_approved[:size].copy(),
            "doc_len": np.frombuffer(self.doc_len, dtype=np.float32).copy(),
            "pair_columns": signatures.columns[:, : -(-signatures.count // 8)],
            "approved": np.frombuffer(self.approved, dtype=np.uint8).copy(),
        }

    @classmethod
    def restored(cls, pages: Sequence[Page], terms: list[str], arrays: dict[str, np.ndarray],
                 pair_columns: PairColumns | None = None) -> LexicalIndex:
        """The index a bulk build of `pages` made, from exported() state. The arrays come from
        a file someone may have altered: every shape and id is checked against the pages, so
        a search can never index out of bounds (ValueError when anything does not fit).
        With `pair_columns`, the arrays lack "pair_columns": the pair signatures are left
        unread until a literal search needs them, then pair_columns(the documents' pages)
        gives them (see PairSignatures.unread)."""
        index = cls._segments(len(pages), terms, arrays)
        index._documents(pages, arrays["doc_len"].tolist())  # the same sums, in the same order, as _bulk
        index._pair_signatures_from(arrays, pair_columns)
        return index

    @classmethod
    def reused(cls, pages: Sequence[Page], terms: list[str], arrays: dict[str, np.ndarray],
               kept: Sequence[int], pair_columns: PairColumns | None = None) -> LexicalIndex:
        """The index of exported() state for a later snapshot: document d stands for
        pages[kept[d]], indexed alike (see documents.fingerprint), or is dead when kept[d] is
        -1 (its page changed or is gone). The caller indexes the pages no document stands for
        with update(), as after edits. ValueError when the arrays do not fit. `pair_columns`:
        as for restored() (a dead document's page is None)."""
        n = len(kept)
        index = cls._segments(n, terms, arrays)
        approved = arrays["approved"]
        standing = [k for k in kept if k != -1]
        if any(not 0 <= k < len(pages) for k in standing) or len(set(standing)) != len(standing):
            raise ValueError("a kept document is not a page of its own")
        if bool(np.any(approved > 1)):
            raise ValueError("index approvals are not flags")
        lengths = arrays["doc_len"].tolist()
        index.pages = [pages[k] if k >= 0 else None for k in kept]
        index._pair_signatures_from(arrays, pair_columns)
        # A kept document's approval is its page's (the fingerprint holds it); a dead one keeps
        # the file's, which its share of the file's document frequencies was counted with.
        flags = [(1 if p.approved else 0) if p is not None else a
                 for p, a in zip(index.pages, approved.tolist(), strict=True)]
        index.doc_len.extend(lengths)
        index.alive.extend(bytes(1 if k >= 0 else 0 for k in kept))
        index.approved.extend(bytes(flags))
        index.role_mult.extend([ROLE_MULTIPLIER.get(p.role, 1.0) if p is not None else 0.0
                                for p in index.pages])
        index.by_path = {p.path: d for d, p in enumerate(index.pages) if p is not None}
        for page, length, ok in zip(index.pages, lengths, flags, strict=True):
            if page is not None:
                index.n_all += 1
                index.len_all += length
                if ok:
                    index.n_approved += 1
                    index.len_approved += length
        index.dead = n - index.n_all
        if index.dead:  # the dead documents' terms no longer count in the document frequencies
            size = len(terms)
            docs = index.main_docs
            dead_posting = np.frombuffer(index.alive, dtype=np.uint8)[docs] == 0
            dead_approved = dead_posting & (np.frombuffer(index.approved, dtype=np.uint8)[docs] == 1)
            term_of = np.repeat(np.arange(size), np.diff(index.indptr))
            for df, dead in ((index.df_all, dead_posting), (index.df_approved, dead_approved)):
                df[:size] -= np.bincount(term_of[dead], minlength=size).astype(np.int32)
        return index

    @classmethod
    def _segments(cls, n: int, terms: list[str], arrays: dict[str, np.ndarray]) -> LexicalIndex:
        """An index holding the main segment, document frequencies and pair signatures of `n`
        documents from exported() state, and no documents yet. The arrays come from a file
        someone may have altered: every shape and id is checked, so a search can never index
        out of bounds (ValueError when anything does not fit)."""
        size = len(terms)
        indptr, docs, tfs = arrays["indptr"], arrays["main_docs"], arrays["main_tfs"]
        doc_len = arrays["doc_len"]
        columns = arrays.get("pair_columns")
        checks = (
            len(set(terms)) == size, indptr.shape == (size + 1,), docs.ndim == 1,
            tfs.shape == docs.shape, arrays["df_all"].shape == (size,),
            arrays["df_approved"].shape == (size,), doc_len.shape == (n,),
            arrays["approved"].shape == (n,), arrays["approved"].dtype == np.uint8,
            columns is None or columns.shape == (SIGNATURE_BITS, -(-n // 8)),
            docs.dtype in (np.uint16, np.int32), tfs.dtype in (np.uint8, np.uint16),
        )
        if not all(checks):
            raise ValueError("index arrays do not fit the pages")
        if size and (int(indptr[0]) != 0 or int(indptr[-1]) != len(docs)
                     or bool(np.any(np.diff(indptr) < 0))):
            raise ValueError("index term offsets out of order")
        if len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= n):
            raise ValueError("index document id out of range")
        index = cls()
        index.vocab = dict(zip(terms, range(size), strict=True))
        index.indptr, index.main_docs, index.main_tfs = indptr, docs, tfs
        capacity = max(1024, size)
        index.df_all = np.zeros(capacity, np.int32)
        index.df_approved = np.zeros(capacity, np.int32)
        index.df_all[:size] = arrays["df_all"]
        index.df_approved[:size] = arrays["df_approved"]
        return index

    def _pair_signatures_from(self, arrays: dict[str, np.ndarray],
                              pair_columns: PairColumns | None) -> None:
        """The pair signatures of a restored index's documents: the array (checked by
        _segments) or, unread until needed, what pair_columns gives for them."""
        if pair_columns is not None:
            self.unread_pair_signatures(pair_columns)
            return
        self.pair_signatures = PairSignatures.unread(len(arrays["doc_len"]), lambda: arrays["pair_columns"])
        self.pair_signatures.columns  # noqa: B018 - read now: the array is here already

    def unread_pair_signatures(self, pair_columns: PairColumns) -> None:
        """Let the pair signatures of the documents so far go, for pair_columns(their pages)
        to give back when a literal search first needs them (PairSignatures.unread)."""
        n = len(self.pages)
        documents = self.pages  # this very list: documents keep their ids, dead ones are None
        self.pair_signatures = PairSignatures.unread(n, lambda: pair_columns(documents[:n]))

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

    def doc_fields(self) -> DocFields:
        """Per-document fields for literal search, made on first use and extended with the
        documents added since."""
        fields = self._fields
        if fields.size < len(self.pages):
            fields.extend(self.pages[fields.size:])
        return fields

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
        score_parts = [shares(idf, weight, docs, tfs, norm)
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
        cached = self._weights
        if cached is None or cached[0] != stamp:
            cached = self._weights = (stamp, {})
        weights = cached[1]
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
        cached = self._norms
        if cached is None or cached[0][0] is not self.doc_len or cached[0][1] != len(self.doc_len):
            cached = self._norms = ((self.doc_len, len(self.doc_len)), {})
        cache = cached[1]
        norm = cache.get(avgdl)
        if norm is None:
            doc_len = np.frombuffer(self.doc_len, dtype=np.float32)
            # Widened once (exactly) here rather than per posting when added to float64 tfs.
            norm = cache[avgdl] = (K1 * (1.0 - B + B * doc_len / avgdl)).astype(np.float64)
            del doc_len
        return norm
