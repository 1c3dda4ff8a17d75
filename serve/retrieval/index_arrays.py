"""A bulk-built lexical index as arrays for the store, and the index made again from them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from serve.retrieval.pairs import SIGNATURE_BITS, PairSignatures
from serve.retrieval.scoring import ROLE_MULTIPLIER
from serve.retrieval.vocabulary import Vocabulary
from serve.source.page import Page

if TYPE_CHECKING:
    from serve.retrieval.index import LexicalIndex

# serve/store/search_index.py keeps these arrays; LexicalIndex.exported, .restored and
# .reused are these functions.

# The terms a restored index takes: in id order, or the store's table of them.
Terms = Sequence[str] | Vocabulary
# Postings placed at a time by main_segment(): its temporary arrays are about 30 bytes a posting.
PLACE_CHUNK = 1 << 20


class Part(NamedTuple):
    """One analysed slice of a bulk build: its postings' term ids (the index's) and term
    frequencies, by document, and its documents' first id and posting counts."""

    terms: np.ndarray
    tfs: np.ndarray
    first_doc: int
    per_doc: np.ndarray


def main_segment(parts: list[Part], approved: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    """The main segment of a bulk build (term offsets, documents and term frequencies in term
    order, documents in order within a term) and the document frequencies (all, approved) of
    its `size` terms. Each posting is placed where it goes, a chunk of documents at a time:
    sorting all postings at once held 17 bytes a posting (31 million at 100,000 generated
    pages), this holds the parts and the result, 11. `parts` is emptied as it goes."""
    counts = np.zeros(size, np.int64)
    approved_counts = np.zeros(size, np.int64)
    for part in parts:
        for d0, d1, p0, p1 in _chunks(part.per_doc):
            chunk = part.terms[p0:p1]
            counts += np.bincount(chunk, minlength=size)
            ok = np.repeat(approved[part.first_doc + d0: part.first_doc + d1], part.per_doc[d0:d1])
            approved_counts += np.bincount(chunk[ok.astype(bool)], minlength=size)
    indptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    documents = sum(len(part.per_doc) for part in parts)
    # Half the size of int32 ids while every main-segment document id fits in 16 bits; term
    # frequencies as one byte when they fit (they almost always do): exact either way.
    doc_type = np.uint16 if documents <= 1 << 16 else np.int32
    tf_max = max((int(part.tfs.max()) for part in parts if len(part.tfs)), default=0)
    docs = np.empty(int(indptr[-1]), dtype=doc_type)
    tfs = np.empty(int(indptr[-1]), dtype=np.uint8 if tf_max <= 255 else np.uint16)
    free = indptr[:-1].copy()  # where each term's next posting goes
    parts.reverse()
    while parts:
        part = parts.pop()
        for d0, d1, p0, p1 in _chunks(part.per_doc):
            chunk = part.terms[p0:p1]
            order = np.argsort(chunk, kind="stable")  # by term; documents stay in order
            ranked = chunk[order]
            here = np.bincount(chunk, minlength=size)
            place = free[ranked] + (np.arange(len(chunk)) - (np.cumsum(here) - here)[ranked])
            ids = np.arange(part.first_doc + d0, part.first_doc + d1, dtype=doc_type)
            docs[place] = np.repeat(ids, part.per_doc[d0:d1])[order]
            tfs[place] = part.tfs[p0:p1][order]
            free += here
        del part
    return indptr, docs, tfs, counts, approved_counts


def _chunks(per_doc: np.ndarray) -> Iterator[tuple[int, int, int, int]]:
    """(first document, end document, first posting, end posting) of runs of whole documents
    of about PLACE_CHUNK postings each."""
    ends = np.cumsum(per_doc)
    doc = 0
    while doc < len(per_doc):
        start = int(ends[doc - 1]) if doc else 0
        stop = max(doc + 1, int(np.searchsorted(ends, start + PLACE_CHUNK, side="right")))
        yield doc, stop, start, int(ends[stop - 1])
        doc = stop


def is_bulk_of(index: LexicalIndex, pages: Sequence[Page]) -> bool:
    """Whether the index is exactly a bulk build of `pages`, in their order (no later
    edits): only such a state is written to the restart cache."""
    return (not index.delta and index.dead == 0 and len(index.pages) == len(pages)
            and all(a is b for a, b in zip(index.pages, pages, strict=True)))


def exported(index: LexicalIndex) -> tuple[list[str], dict[str, np.ndarray]]:
    """The terms in id order and the arrays restored() takes back, safe to read after the
    index lock is released: what edits change in place (document frequencies, lengths) is
    copied; the main segment is only ever replaced, never written; and an edit sets filter
    bits only for documents past the count, which restored() never reads."""
    size = len(index.vocab)
    signatures = index.pair_signatures
    return list(index.vocab), {
        "indptr": index.indptr, "main_docs": index.main_docs, "main_tfs": index.main_tfs,
        "df_all": index.df_all[:size].copy(), "df_approved": index.df_approved[:size].copy(),
        "doc_len": np.frombuffer(index.doc_len, dtype=np.float32).copy(),
        "pair_columns": signatures.packed(),
        "approved": np.frombuffer(index.approved, dtype=np.uint8).copy(),
    }


def restored(index: LexicalIndex, pages: Sequence[Page], terms: Terms,
             arrays: dict[str, np.ndarray]) -> LexicalIndex:
    """`index` (new, empty) made the index a bulk build of `pages` made, from exported()
    state. Every shape is checked against the pages (ValueError when anything does not fit);
    the values of arrays from a file someone may have altered are checked by check_values()
    before this takes them. The arrays are taken as they are, never written (the store's are
    its files, mapped)."""
    _segments(index, len(pages), terms, arrays)
    index._documents(pages, arrays["doc_len"].tolist())  # the same sums, in the same order, as _bulk
    index.pair_signatures = PairSignatures(arrays["pair_columns"], len(pages))
    return index


def reused(index: LexicalIndex, pages: Sequence[Page], terms: Terms, arrays: dict[str, np.ndarray],
           kept: Sequence[int]) -> LexicalIndex:
    """`index` (new, empty) made the index of exported() state for a later snapshot:
    document d stands for pages[kept[d]], indexed alike (see documents.fingerprints), or is
    dead when kept[d] is -1 (its page changed or is gone). The caller indexes the pages no
    document stands for with update(), as after edits. ValueError when the arrays do not
    fit (their values: as for restored())."""
    n = len(kept)
    _segments(index, n, terms, arrays)
    approved = arrays["approved"]
    standing = [k for k in kept if k != -1]
    if any(not 0 <= k < len(pages) for k in standing) or len(set(standing)) != len(standing):
        raise ValueError("a kept document is not a page of its own")
    if bool(np.any(approved > 1)):
        raise ValueError("index approvals are not flags")
    lengths = arrays["doc_len"].tolist()
    index.pages = [pages[k] if k >= 0 else None for k in kept]
    index.pair_signatures = PairSignatures(arrays["pair_columns"], n)
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


def _segments(index: LexicalIndex, n: int, terms: Terms, arrays: dict[str, np.ndarray]) -> None:
    """Give `index` (new, empty) the main segment and document frequencies of `n` documents
    from exported() state, and no documents yet (ValueError when a shape does not fit)."""
    size = len(terms)
    indptr, docs, tfs = arrays["indptr"], arrays["main_docs"], arrays["main_tfs"]
    doc_len = arrays["doc_len"]
    # (A store's table finds a term it holds twice under one id: no search reads out of bounds.)
    vocab = terms if isinstance(terms, Vocabulary) else dict(zip(terms, range(size), strict=True))
    checks = (
        len(vocab) == size, indptr.shape == (size + 1,), docs.ndim == 1,
        tfs.shape == docs.shape, arrays["df_all"].shape == (size,),
        arrays["df_approved"].shape == (size,), doc_len.shape == (n,),
        arrays["approved"].shape == (n,), arrays["approved"].dtype == np.uint8,
        arrays["pair_columns"].shape == (SIGNATURE_BITS, -(-n // 8)),
        docs.dtype in (np.uint16, np.int32), tfs.dtype in (np.uint8, np.uint16),
    )
    if not all(checks):
        raise ValueError("index arrays do not fit the pages")
    index.vocab = vocab  # a term twice would have left it short (checked above)
    index.indptr, index.main_docs, index.main_tfs = indptr, docs, tfs
    capacity = max(1024, size)
    index.df_all = np.zeros(capacity, np.int32)
    index.df_approved = np.zeros(capacity, np.int32)
    index.df_all[:size] = arrays["df_all"]
    index.df_approved[:size] = arrays["df_approved"]


def check_values(arrays: dict[str, np.ndarray]) -> None:
    """What restored() leaves to the store, for arrays from a file someone may have altered:
    the term offsets are in order and every document id is one of the documents, so a search
    can never index out of bounds (ValueError otherwise). It reads every posting: the store
    runs it on a mapping of its own, beside the start, and lets that mapping go."""
    indptr, docs = arrays["indptr"], arrays["main_docs"]
    if len(indptr) and (int(indptr[0]) != 0 or int(indptr[-1]) != len(docs)
                        or bool(np.any(np.diff(indptr) < 0))):
        raise ValueError("index term offsets out of order")
    if len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= len(arrays["doc_len"])):
        raise ValueError("index document id out of range")
