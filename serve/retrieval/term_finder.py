"""Finding vocabulary terms and page fields that contain a word: joined-bytes scans."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import islice

import numpy as np

from serve.retrieval.scoring import ROLE_MULTIPLIER
from serve.retrieval.vocabulary import Vocabulary
from serve.source.page import Page, summaries_of

TERM_FINDER_CACHE = 512  # words whose containing terms are remembered until the vocabulary grows


class TermFinder:
    """Finds the vocabulary terms that contain a word: one C-level scan of every term joined
    by newlines instead of a Python loop over the vocabulary (~500,000 terms at 20,000 pages).
    Terms are only ever appended to a vocabulary, so new ones extend the text."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] | Vocabulary | None = None
        self.plain = _JoinedTerms()
        self.folded = _JoinedTerms()  # non-ASCII terms whose case folding differs ("straße")
        self.found: dict[str, dict[int, int]] = {}  # recent words (cleared when terms are added)

    def containing(self, vocab: dict[str, int] | Vocabulary, word: str) -> dict[int, int]:
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
        self.summaries.extend([summary.casefold() for summary in summaries_of(pages)], ids)
        self.paths.extend([p.path.casefold() if p else "" for p in pages], ids)
        self.role_mult = np.concatenate([self.role_mult, np.array(
            [ROLE_MULTIPLIER.get(p.role, 1.0) if p else 0.0 for p in pages], dtype=np.float64)])
        self.size += len(pages)

    def kill(self, doc: int) -> None:
        if doc < self.size:
            self.role_mult[doc] = 0.0
