"""What a page is indexed under, and the analysis of many pages at once (forked workers)."""

from __future__ import annotations

import gc
import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from serve.retrieval.analyzer import analyze
from serve.retrieval.pairs import SIGNATURE_BATCH, literal_haystack, signature_columns
from serve.source.page import Page, fields_of
from serve.support.workers import cpu_count, die_with_parent, fork_pool

# Extra copies of a page's title, headings, tags and refs in its bag of terms: a field
# boost by repetition (the page text already holds the headings once).
TITLE_COPIES = 2
FIELD_COPIES = 1
LEAD_COPIES = 2
PARALLEL_BULK_MIN = 2000


def page_terms(page: Page, text: str | None = None) -> list[str]:
    """The bag of terms one page is indexed under (`text`: its body, when already at hand)."""
    path = page.path.rsplit(".", 1)[0] if page.path.endswith((".md", ".org")) else page.path
    meta = " ".join((*page.headings, *page.tags, *page.source_refs, path.replace("/", " ")))
    # The summary is the page's lead (its first ~360 characters): counting it again weights
    # what a page says first, which the judged sets show helps (the reference does it too).
    return (analyze(page.title) * TITLE_COPIES + analyze(meta) * FIELD_COPIES
            + analyze(page.summary) * LEAD_COPIES + analyze(page.text if text is None else text))


FINGERPRINTED = ("body_sha1", "path", "title", "summary", "headings", "tags", "source_refs",
                 "approved", "role")


def fingerprints(pages: Sequence[Page]) -> list[bytes]:
    """A digest of everything the index takes from each page: page_terms' and
    literal_haystack's fields and the document's approval and role. Two pages with equal
    fingerprints are indexed alike, so a kept index's document can stand for a page of a
    later snapshot. The fields of pages left in the store are read together (fields_of)."""
    return [_digest(fields) for fields in fields_of(pages, FINGERPRINTED)]


def _digest(fields: tuple[Any, ...]) -> bytes:
    digest = hashlib.sha1(fields[0], usedforsecurity=False)
    digest.update(repr(fields[1:]).encode("utf-8", "surrogatepass"))
    return digest.digest()[:16]


# A slice of pages analysed: its local vocabulary, per-posting term ids and frequencies,
# per-document posting counts and lengths, and pair signatures (signature_columns' layout).
Slice = tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def analyse_range(pages: Sequence[Page], bounds: tuple[int, int]) -> Slice:
    """Analyse pages [start, stop) of `pages`."""
    start, stop = bounds
    vocab: dict[str, int] = {}
    term_ids: list[int] = []
    tfs: list[int] = []
    doc_terms: list[int] = []
    doc_lengths: list[int] = []
    signatures: list[np.ndarray] = []
    haystacks: list[str] = []
    for page in pages[start:stop]:
        text = page.text  # one decompression for the terms and the pair signature
        counts = Counter(page_terms(page, text))
        haystacks.append(literal_haystack(page, text))
        if len(haystacks) >= SIGNATURE_BATCH:
            signatures.append(signature_columns(haystacks))
            haystacks = []
        term_ids.extend(vocab.setdefault(term, len(vocab)) for term in counts)
        tfs.extend(counts.values())
        doc_terms.append(len(counts))
        doc_lengths.append(sum(counts.values()))
    return (list(vocab), np.array(term_ids, dtype=np.int32),
            np.minimum(np.array(tfs, dtype=np.int64), 65535).astype(np.uint16),
            np.array(doc_terms, dtype=np.int64), np.array(doc_lengths, dtype=np.int64),
            np.concatenate([*signatures, signature_columns(haystacks)], axis=1))


# Set in each analysis worker by its initializer: the pages, inherited through fork (never
# pickled). The parent process never sets it.
_worker_pages: Sequence[Page] = ()


def _start_worker(parent: int, pages: Sequence[Page]) -> None:
    """As a parse worker starts (serve/watch/parse_pool.py): what the analysis builds is acyclic, and
    a collection would traverse the parent's whole heap, forked with it, copying its pages."""
    global _worker_pages
    gc.disable()
    die_with_parent(parent)
    _worker_pages = pages


def _analyse_in_worker(bounds: tuple[int, int]) -> Slice:
    return analyse_range(_worker_pages, bounds)


def analyse_slices(pages: Sequence[Page]) -> list[Slice]:
    """The pages analysed in slices, in page order: in forked workers when there are many."""
    workers = cpu_count()
    if len(pages) < PARALLEL_BULK_MIN or workers < 2:
        return [analyse_range(pages, (0, len(pages)))]
    # Each slice but the last holds whole bytes of signature columns: they are appended as is.
    step = -(-len(pages) // workers // 8) * 8
    bounds = [(i, min(len(pages), i + step)) for i in range(0, len(pages), step)]
    with fork_pool(workers, _start_worker, pages) as pool:
        return list(pool.map(_analyse_in_worker, bounds))
