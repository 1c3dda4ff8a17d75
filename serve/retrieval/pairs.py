"""Adjacent word-pair signatures: a small Bloom filter per page that rules out most pages for a
literal phrase without reading their text.

A literal needle that occurs in a page brings its word boundaries with it: every word inside
the needle is a whole word of the page, the first one ends a page word and the last one
starts one. So each adjacent pair of needle words (a, b) is a pair of adjacent page words
whose endings and beginnings agree: the last three bytes of `a` (when the needle has all of
`a`'s end) and the first three of `b`. Those keys go into a per-page Bloom filter; a page
whose filter lacks one of a needle's keys cannot contain the needle. Words are runs of
"word bytes" of the case-folded UTF-8 text (ASCII letters and digits, and every non-ASCII
byte); any tokenisation works as long as pages and needles use the same one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from serve.source.page import Page

SIGNATURE_BITS = 4096  # 512 bytes a page: ~10 MB for 20,000 pages, ~5-10 % false positives a key
SIGNATURE_BYTES = SIGNATURE_BITS // 8
AFFIX = 3  # bytes of each word's edge in a key: longer keys tell more pairs apart
_SHIFT = np.uint64(64 - 12)  # 2**12 == SIGNATURE_BITS
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_WORD_BYTE = np.zeros(256, dtype=bool)
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789":
    _WORD_BYTE[_c] = True
_WORD_BYTE[0x80:] = True


def literal_haystack(page: Page, text: str | None = None) -> str:
    """The case-folded text literal search looks in (one definition for search and signatures)."""
    body = page.text if text is None else text
    return " ".join((page.title, page.path, page.summary, body, " ".join(page.tags),
                     " ".join(page.source_refs))).casefold()


def _runs(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and (exclusive) ends of the runs of word bytes: the class changes alternate."""
    word = _WORD_BYTE[data]
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1
    if word[0]:
        edges = np.concatenate(([0], edges))
    if word[-1]:
        edges = np.concatenate((edges, [len(word)]))
    return edges[0::2], edges[1::2]


def _byte(data: np.ndarray, index: np.ndarray, valid: np.ndarray) -> np.ndarray:
    return np.where(valid, data[np.clip(index, 0, len(data) - 1)], 0).astype(np.uint64)


def _pair_keys(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """One key per adjacent pair of runs: the last AFFIX bytes of the first and the first AFFIX
    of the second, fewer for shorter runs (word bytes are never 0, so padding cannot collide)."""
    suffix = np.zeros(len(starts), dtype=np.uint64)
    prefix = np.zeros(len(starts), dtype=np.uint64)
    for i in range(AFFIX):
        shift = np.uint64(8 * i)
        suffix |= _byte(data, ends - 1 - i, ends - 1 - i >= starts) << shift
        prefix |= _byte(data, starts + i, starts + i < ends) << shift
    keys: np.ndarray = (suffix[:-1] << np.uint64(8 * AFFIX)) | prefix[1:]
    return keys


def _bits(keys: np.ndarray) -> np.ndarray:
    hashed = keys * _MULTIPLIER  # wraps modulo 2**64, which is the point
    first = hashed >> _SHIFT
    second = (hashed >> np.uint64(20)) & np.uint64(SIGNATURE_BITS - 1)
    return np.concatenate((first, second)).astype(np.int64)


def signature(haystack: str) -> np.ndarray:
    """The page's filter: SIGNATURE_BYTES bytes, bit i of the filter is bit i % 8 of byte i // 8."""
    data = np.frombuffer(haystack.encode("utf-8"), dtype=np.uint8)
    row = np.zeros(SIGNATURE_BITS, dtype=bool)
    if len(data):
        starts, ends = _runs(data)
        if len(starts) > 1:
            row[_bits(_pair_keys(data, starts, ends))] = True
    packed: np.ndarray = np.packbits(row, bitorder="little")
    return packed


def signatures(haystacks: Sequence[str]) -> np.ndarray:
    """`signature` of many texts at once (one row each): the texts are joined with a newline,
    which is not a word byte, so no run spans two texts, and pairs across a join are dropped.
    A few numpy passes over the whole batch instead of a dozen small ones per page."""
    rows = np.zeros((len(haystacks), SIGNATURE_BITS), dtype=bool)
    encoded = [text.encode("utf-8") for text in haystacks]
    data = np.frombuffer(b"\n".join(encoded), dtype=np.uint8)
    if len(data):
        starts, ends = _runs(data)
        if len(starts) > 1:
            lengths = np.fromiter((len(e) + 1 for e in encoded), dtype=np.int64, count=len(encoded))
            text_starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            owner = np.searchsorted(text_starts, starts, side="right") - 1
            same = owner[:-1] == owner[1:]
            keys = _pair_keys(data, starts, ends)[same]
            owners = owner[:-1][same]
            rows[np.concatenate((owners, owners)), _bits(keys)] = True
    packed: np.ndarray = np.packbits(rows, axis=1, bitorder="little")
    return packed


def needle_bits(needle: str) -> list[int]:
    """The filter bits every page containing `needle` (case-folded) has set; [] when the needle
    has no pair whose key is certain (fewer than two words, or edge words too short)."""
    data = np.frombuffer(needle.encode("utf-8"), dtype=np.uint8)
    if not len(data):
        return []
    starts, ends = _runs(data)
    if len(starts) < 2:
        return []
    keys = _pair_keys(data, starts, ends)
    lengths = ends - starts
    keep = np.ones(len(keys), dtype=bool)
    # The needle may begin inside a page word and end inside one: their keys are only whole
    # when the needle holds at least three bytes of that side.
    if lengths[0] < AFFIX:
        keep[0] = False
    if lengths[-1] < AFFIX:
        keep[-1] = False
    return sorted(set(_bits(keys[keep]).tolist()))


class PairSignatures:
    """One filter row per document id, grown geometrically as documents are added (by an
    eighth: an edit adds one row, and doubling 10 MB of rows for it would waste as much)."""

    def __init__(self) -> None:
        self.rows = np.zeros((0, SIGNATURE_BYTES), dtype=np.uint8)
        self.count = 0

    def extend(self, rows: Sequence[np.ndarray] | np.ndarray) -> None:
        block = np.asarray(rows, dtype=np.uint8).reshape(-1, SIGNATURE_BYTES)
        needed = self.count + len(block)
        if needed > len(self.rows):
            grown = np.zeros((max(needed, len(self.rows) + len(self.rows) // 8, 64), SIGNATURE_BYTES),
                             dtype=np.uint8)
            grown[: self.count] = self.rows[: self.count]
            self.rows = grown
        self.rows[self.count: needed] = block
        self.count = needed

    def matching(self, bits: Sequence[int]) -> np.ndarray:
        """Per document id, whether every one of `bits` is set in its filter."""
        found = np.ones(self.count, dtype=bool)
        rows = self.rows[: self.count]
        for bit in bits:
            found &= (rows[:, bit >> 3] & (1 << (bit & 7))) != 0
        return found
