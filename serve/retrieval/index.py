"""The lexical index: the documents and postings BM25 scores, kept in step with snapshots page by page."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from serve.retrieval import bm25, index_arrays
from serve.retrieval.bm25 import Hit
from serve.retrieval.documents import analyse_slices, page_terms
from serve.retrieval.pairs import PairSignatures, literal_haystack, signature
from serve.retrieval.scoring import ROLE_MULTIPLIER
from serve.retrieval.term_finder import DocFields, TermFinder
from serve.retrieval.vocabulary import Vocabulary
from serve.source.page import Page

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


class LexicalIndex:
    """The documents and postings of the current snapshot's pages, scored by bm25.py and
    kept in the store by index_arrays.py.

    A bulk build puts every page in a compact main segment (CSR: per-term slices of two
    numpy arrays). Later changes append documents to a small delta segment, and a changed
    page's old document is marked dead, so an edit costs the work of indexing one page.
    Document frequencies and lengths are kept for two corpora, approved pages and all
    pages, as the contract asks. Dead documents go at the next rebuild, which happens
    when they pile up."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] | Vocabulary = {}
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
        parts: list[index_arrays.Part] = []
        slices.reverse()
        self.pair_signatures.reserve(len(pages))
        while slices:
            local_vocab, term_ids, tfs, doc_terms, doc_lengths, signatures = slices.pop()
            self.pair_signatures.extend_columns(signatures, len(doc_lengths))
            mapping = np.array([vocab.setdefault(t, len(vocab)) for t in local_vocab], dtype=np.int32)
            start = len(self.pages)
            parts.append(index_arrays.Part(mapping[term_ids] if len(term_ids) else term_ids, tfs,
                                           start, doc_terms))
            self._documents(pages[start: start + len(doc_lengths)],
                            [float(length) for length in doc_lengths.tolist()])
            del local_vocab, term_ids, tfs, signatures, mapping
        size = len(vocab)
        approved = np.frombuffer(self.approved, dtype=np.uint8)[: len(pages)]
        self.indptr, self.main_docs, self.main_tfs, df_all, df_approved = (
            index_arrays.main_segment(parts, approved, size))
        capacity = max(1024, size)
        self.df_all = np.zeros(capacity, np.int32)
        self.df_approved = np.zeros(capacity, np.int32)
        self.df_all[:size] = df_all
        self.df_approved[:size] = df_approved

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

    # -- the restart cache (serve/store/search_index.py keeps it; index_arrays.py does the work)

    def is_bulk_of(self, pages: Sequence[Page]) -> bool:
        return index_arrays.is_bulk_of(self, pages)

    def exported(self) -> tuple[list[str], dict[str, np.ndarray]]:
        return index_arrays.exported(self)

    @classmethod
    def restored(cls, pages: Sequence[Page], terms: index_arrays.Terms,
                 arrays: dict[str, np.ndarray]) -> LexicalIndex:
        return index_arrays.restored(cls(), pages, terms, arrays)

    @classmethod
    def reused(cls, pages: Sequence[Page], terms: index_arrays.Terms, arrays: dict[str, np.ndarray],
               kept: Sequence[int]) -> LexicalIndex:
        return index_arrays.reused(cls(), pages, terms, arrays, kept)

    def share(self, written: dict[str, np.ndarray], arrays: dict[str, np.ndarray]) -> bool:
        """Take `arrays`, the store's copies (mapped files) of the `written` exported() state,
        in place of this index's main segment and pair signatures when they are still that
        state's: memory then holds only what searches read of them. Whether it did (not once
        the index was built again or edits added documents)."""
        documents = len(written["doc_len"])
        if (self.main_docs is not written["main_docs"] or self.delta or self.dead
                or len(self.pages) != documents or self.pair_signatures.count != documents):
            return False
        self.indptr, self.main_docs, self.main_tfs = (
            arrays["indptr"], arrays["main_docs"], arrays["main_tfs"])
        self.pair_signatures = PairSignatures(arrays["pair_columns"], len(self.pages))
        return True

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
        """Ranked pages for the query terms (bm25.py)."""
        return bm25.search(self, terms, approved_only=approved_only, limit=limit, excluded=excluded,
                           min_score=min_score, sequence=sequence, asked=asked)
