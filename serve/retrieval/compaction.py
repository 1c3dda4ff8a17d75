"""An index kept up by edits laid out again as a bulk build of its pages lays it out, from its
own postings (no page analysed again): what the store keeps for the next start."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from serve.retrieval.index_arrays import PLACE_CHUNK
from serve.retrieval.pairs import PairSignatures
from serve.source.page import Page

if TYPE_CHECKING:
    from serve.retrieval.index import LexicalIndex


class Frozen(NamedTuple):
    """What compacted() reads of an index, taken under the index lock (frozen()): copies of
    what edits change in place, the rest (the main segment, the store's signature files) as
    it is, since edits only ever replace it."""

    terms: list[str]  # in id order
    indptr: np.ndarray
    main_docs: np.ndarray
    main_tfs: np.ndarray
    delta: dict[int, tuple[np.ndarray, np.ndarray]]  # term id -> (documents, frequencies)
    pages: list[Page | None]  # by document id; None when dead
    doc_len: np.ndarray
    df_all: np.ndarray
    df_approved: np.ndarray
    signatures: PairSignatures


def frozen(index: LexicalIndex) -> Frozen:
    """The state compacted() needs, safe to read after the index lock is released."""
    size = len(index.vocab)
    delta = {tid: (np.frombuffer(post.docs, dtype=np.int32).copy(),
                   np.frombuffer(post.tfs, dtype=np.float32).copy())
             for tid, post in index.delta.items() if post.docs}
    return Frozen(list(index.vocab), index.indptr, index.main_docs, index.main_tfs, delta,
                  list(index.pages), np.frombuffer(index.doc_len, dtype=np.float32).copy(),
                  index.df_all[:size].copy(), index.df_approved[:size].copy(),
                  index.pair_signatures.frozen())


def compacted(state: Frozen, pages: Sequence[Page],
              position: Mapping[str, int]) -> tuple[list[str], dict[str, np.ndarray]]:
    """The terms and exported() arrays of a bulk build of `pages` (whose path -> index is
    `position`), made from `state`, an index whose live documents are exactly those pages:
    the same documents, lengths, frequencies and filters in page order, and only the terms some
    page holds (a term of dead documents alone goes). ValueError when the index is not of
    those pages or its counts disagree with its postings (then nothing is to be written)."""
    old_of = _documents(state.pages, pages, position)
    new_of = np.full(len(state.pages), -1, dtype=np.int64)
    new_of[old_of] = np.arange(len(pages))
    size = len(state.terms)
    total = int(state.df_all.sum())
    doc_type = np.uint16 if len(pages) <= 1 << 16 else np.int32
    docs = np.empty(total, dtype=doc_type)
    tfs = np.empty(total, dtype=np.uint16)
    counts = np.zeros(size, dtype=np.int64)
    filled = 0
    for t0, t1, terms, chunk_docs, chunk_tfs in _postings(state, new_of, size):
        if filled + len(chunk_docs) > total:
            raise ValueError("the index holds more postings than its document frequencies")
        order = np.lexsort((chunk_docs, terms))  # by term, documents in order within a term
        docs[filled: filled + len(order)] = chunk_docs[order]
        tfs[filled: filled + len(order)] = chunk_tfs[order]
        filled += len(order)
        counts[t0:t1] = np.bincount(terms - t0, minlength=t1 - t0)
    if filled != total or not np.array_equal(counts, state.df_all):
        raise ValueError("the index's document frequencies disagree with its postings")
    held = counts > 0
    indptr = np.zeros(int(held.sum()) + 1, dtype=np.int64)
    np.cumsum(counts[held], out=indptr[1:])
    small = total == 0 or int(tfs.max()) <= 255
    return [term for term, keep in zip(state.terms, held.tolist(), strict=True) if keep], {
        "indptr": indptr, "main_docs": docs, "main_tfs": tfs.astype(np.uint8) if small else tfs,
        "df_all": state.df_all[held], "df_approved": state.df_approved[held],
        "doc_len": state.doc_len[old_of],
        "pair_columns": state.signatures.reordered(old_of),
        "approved": np.frombuffer(bytes(1 if page.approved else 0 for page in pages), dtype=np.uint8),
    }


def _documents(indexed: Sequence[Page | None], pages: Sequence[Page],
               position: Mapping[str, int]) -> np.ndarray:
    """The document id of each page, in page order (ValueError unless the live documents are
    exactly `pages`, the same objects)."""
    old_of = np.full(len(pages), -1, dtype=np.int64)
    live = 0
    for doc, page in enumerate(indexed):
        if page is None:
            continue
        at = position.get(page.path)
        if at is None or pages[at] is not page or old_of[at] != -1:
            raise ValueError("the index is not of these pages")
        old_of[at] = doc
        live += 1
    if live != len(pages):
        raise ValueError("the index lacks some of these pages")
    return old_of


def _postings(state: Frozen, new_of: np.ndarray, size: int
              ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """(first term, end term, term ids, page-order document ids, frequencies) of the live
    postings of runs of terms of about PLACE_CHUNK postings each: the main segment's, then the
    delta's of the same terms."""
    tids = sorted(state.delta)
    lengths = [len(state.delta[tid][0]) for tid in tids]
    delta_terms = np.repeat(np.array(tids, dtype=np.int64), lengths)
    delta_docs = new_of[np.concatenate([state.delta[tid][0] for tid in tids])] if tids else (
        np.zeros(0, dtype=np.int64))
    delta_tfs = (np.concatenate([state.delta[tid][1] for tid in tids]).astype(np.uint16) if tids
                 else np.zeros(0, dtype=np.uint16))
    indptr = state.indptr
    main = len(indptr) - 1  # terms the main segment has slices for
    t0 = 0
    while t0 < size:
        if t0 < main:
            t1 = max(t0 + 1, int(np.searchsorted(indptr, indptr[t0] + PLACE_CHUNK, side="right")) - 1)
            t1 = min(t1, main)
        else:
            t1 = size
        m0, m1 = min(t0, main), min(t1, main)
        p0, p1 = int(indptr[m0]), int(indptr[m1])
        terms = np.repeat(np.arange(m0, m1, dtype=np.int64), np.diff(indptr[m0: m1 + 1]))
        a, b = (int(i) for i in np.searchsorted(delta_terms, (t0, t1)))
        docs = np.concatenate([new_of[state.main_docs[p0:p1]], delta_docs[a:b]])
        terms = np.concatenate([terms, delta_terms[a:b]])
        tfs = np.concatenate([state.main_tfs[p0:p1].astype(np.uint16), delta_tfs[a:b]])
        live = docs >= 0
        yield t0, t1, terms[live], docs[live], tfs[live]
        t0 = t1
