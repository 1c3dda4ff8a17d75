"""Adjacent word-pair signatures: a small Bloom filter per page that rules out most pages for a
literal phrase without reading their text.

A literal needle that occurs in a page brings its word boundaries with it: every word inside
the needle is a whole word of the page, the first one ends a page word and the last one
starts one. So each adjacent pair of needle words (a, b) is a pair of adjacent page words
whose endings and beginnings agree: the last three bytes of `a` (when the needle has all of
`a`'s end) and the first three of `b`. Each pair also gives a short key of two bytes a side,
which needles whose edge words have only two bytes can use ("no payout", "is on"), and which
tells apart most pages that share a long key's filter bits by chance. Both keys go into a
per-page Bloom filter; a page whose filter lacks one of a needle's keys cannot contain the
needle. Words are runs of
"word bytes" of the case-folded UTF-8 text (ASCII letters and digits, and every non-ASCII
byte); any tokenisation works as long as pages and needles use the same one.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from serve.source.page import Page

SIGNATURE_BITS = 8192  # 1 KB a page: ~20 MB for 20,000 pages, ~4 % false positives a key
SIGNATURE_BYTES = SIGNATURE_BITS // 8
SIGNATURE_BATCH = 512  # pages whose pair signatures are computed in one numpy pass (8 | it)
REORDER_ROWS = 256  # bits of every filter read at a time by reordered(): 25 MB at 100,000 pages
REORDER_RUNS = 256  # runs of documents past which reordered() goes bit by bit
AFFIX = 3  # bytes of each word's edge in a long key: longer keys tell more pairs apart
SHORT_AFFIX = 2
_SHIFT = np.uint64(64 - 13)  # 2**13 == SIGNATURE_BITS
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_SHORT_TAG = np.uint64(1 << 62)  # short keys use 32 bits: the tag keeps them apart from long ones
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


def _pair_keys(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
               affix: int = AFFIX) -> np.ndarray:
    """One key per adjacent pair of runs: the last `affix` bytes of the first and the first
    `affix` of the second, fewer for shorter runs (word bytes are never 0, so padding cannot
    collide); short keys (affix 2) carry a tag bit that no long key has."""
    suffix = np.zeros(len(starts), dtype=np.uint64)
    prefix = np.zeros(len(starts), dtype=np.uint64)
    for i in range(affix):
        shift = np.uint64(8 * i)
        suffix |= _byte(data, ends - 1 - i, ends - 1 - i >= starts) << shift
        prefix |= _byte(data, starts + i, starts + i < ends) << shift
    keys: np.ndarray = (suffix[:-1] << np.uint64(8 * affix)) | prefix[1:]
    if affix != AFFIX:
        keys |= _SHORT_TAG
    return keys


def _all_keys(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Long and short keys of every adjacent pair (the long ones first, then the short)."""
    return np.concatenate((_pair_keys(data, starts, ends), _pair_keys(data, starts, ends, SHORT_AFFIX)))


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
            row[_bits(_all_keys(data, starts, ends))] = True
    packed: np.ndarray = np.packbits(row, bitorder="little")
    return packed


def _rows(haystacks: Sequence[str]) -> np.ndarray:
    """`signature` of many texts at once, unpacked (one row of bits each): the texts are joined
    with a newline, which is not a word byte, so no run spans two texts, and pairs across a
    join are dropped. A few numpy passes over the whole batch instead of a dozen small ones
    per page."""
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
            keys = _all_keys(data, starts, ends)[np.concatenate((same, same))]
            owners = owner[:-1][same]
            rows[np.concatenate((owners, owners, owners, owners)), _bits(keys)] = True
    return rows


def signatures(haystacks: Sequence[str]) -> np.ndarray:
    """`signature` of many texts at once: one row of SIGNATURE_BYTES bytes each."""
    packed: np.ndarray = np.packbits(_rows(haystacks), axis=1, bitorder="little")
    return packed


def signature_columns(haystacks: Sequence[str]) -> np.ndarray:
    """The same filters laid out as PairSignatures keeps them (row b: bit b of each text's
    filter, 8 texts a byte), so that a bulk build appends them without transposing."""
    columns: np.ndarray = np.ascontiguousarray(
        np.packbits(_rows(haystacks), axis=0, bitorder="little").T)
    return columns


def needle_bits(needle: str) -> list[int]:
    """The filter bits every page containing `needle` (case-folded) has set; [] when the needle
    has no pair whose key is certain (fewer than two words, or edge words too short)."""
    data = np.frombuffer(needle.encode("utf-8"), dtype=np.uint8)
    if not len(data):
        return []
    starts, ends = _runs(data)
    if len(starts) < 2:
        return []
    lengths = ends - starts
    wanted = []
    for affix in (AFFIX, SHORT_AFFIX):
        keys = _pair_keys(data, starts, ends, affix)
        keep = np.ones(len(keys), dtype=bool)
        # The needle may begin inside a page word and end inside one: their keys are only
        # whole when the needle holds at least `affix` bytes of that side.
        if lengths[0] < affix:
            keep[0] = False
        if lengths[-1] < affix:
            keep[-1] = False
        wanted.append(keys[keep])
    return sorted(set(_bits(np.concatenate(wanted)).tolist()))


class PairSignatures:
    """The filters of every document id, stored bit by bit: row b holds bit b of each
    document's filter, packed 8 documents a byte. A needle's test then reads a few rows of
    n/8 bytes instead of one byte in every document's filter.

    The first documents' filters may be an array this never writes (`base`: the store's file,
    mapped, so only the rows a literal search reads are ever in memory); documents added
    after them get a growing array of their own."""

    def __init__(self, base: np.ndarray | None = None, count: int = 0) -> None:
        if base is None:
            base = np.zeros((SIGNATURE_BITS, 0), dtype=np.uint8)
        if base.shape != (SIGNATURE_BITS, -(-count // 8)) or base.dtype != np.uint8:
            raise ValueError("signature columns do not fit their documents")
        self._base, self._base_count = base, count
        self._columns = np.zeros((SIGNATURE_BITS, 0), dtype=np.uint8)  # documents after those
        self._added = 0

    @property
    def count(self) -> int:
        return self._base_count + self._added

    def packed(self) -> np.ndarray:
        """Every document's filter in signature_columns' layout (bits x document bytes)."""
        added = self._columns[:, : -(-self._added // 8)]
        if not self._added:
            return self._base
        if not self._base_count:
            return added
        bits = np.concatenate([np.unpackbits(self._base, axis=1, count=self._base_count, bitorder="little"),
                               np.unpackbits(added, axis=1, count=self._added, bitorder="little")], axis=1)
        return np.packbits(bits, axis=1, bitorder="little")

    def reserve(self, count: int) -> None:
        """Room for `count` added documents; rows are widened by an eighth or more when full,
        with room to spare, so the first edits after a build copy nothing."""
        needed = -(-count // 8)
        width = self._columns.shape[1]
        if needed > width:
            grown = np.zeros((SIGNATURE_BITS, max(needed + needed // 16, width + width // 8) + 8),
                             dtype=np.uint8)
            grown[:, :width] = self._columns
            self._columns = grown

    def extend_columns(self, columns: np.ndarray, count: int) -> None:
        """Append `count` documents' filters in signature_columns' layout; the documents added
        so far must fill whole bytes (ValueError otherwise)."""
        width = -(-count // 8)
        if self._added % 8 or columns.shape != (SIGNATURE_BITS, width):
            raise ValueError("signature columns do not start at a byte or do not fit the count")
        self.reserve(self._added + count)
        first = self._added // 8
        self._columns[:, first: first + width] = columns
        self._added += count

    def extend(self, rows: Sequence[np.ndarray] | np.ndarray) -> None:
        """Append documents' filters (SIGNATURE_BYTES bytes each, as signature() makes them)."""
        block = np.asarray(rows, dtype=np.uint8).reshape(-1, SIGNATURE_BYTES)
        self.reserve(self._added + len(block))
        done = 0
        while done < len(block) and (self._added % 8 or len(block) - done < 8):
            self._set_one(block[done])  # up to the next byte boundary, or a few documents
            done += 1
        while done < len(block):
            # Whole bytes of documents at once: transpose a chunk's bits.
            chunk = block[done: done + 1024]
            chunk = chunk[: len(chunk) - len(chunk) % 8]
            bits = np.unpackbits(chunk, axis=1, bitorder="little")  # documents x bits
            packed = np.packbits(bits.T, axis=1, bitorder="little")  # bits x document bytes
            first = self._added // 8
            self._columns[:, first: first + packed.shape[1]] = packed
            self._added += len(chunk)
            done += len(chunk)
            while done < len(block) and len(block) - done < 8:
                self._set_one(block[done])
                done += 1

    def _set_one(self, row: np.ndarray) -> None:
        doc = self._added
        on = np.flatnonzero(np.unpackbits(row, bitorder="little"))
        self._columns[on, doc >> 3] |= np.uint8(1 << (doc & 7))
        self._added += 1

    def frozen(self) -> PairSignatures:
        """These documents' filters, as they are now, sharing this one's arrays: documents
        added later change only bits of their own, so it reads safely while they come."""
        copy = PairSignatures(self._base, self._base_count)
        copy._columns, copy._added = self._columns, self._added
        return copy

    def reordered(self, order: np.ndarray) -> np.ndarray:
        """The filters of the documents `order` names (ids, in that order), packed as packed()
        packs them. An index after a few edits keeps its documents in runs, each copied as
        bytes shifted into place (0.3 s for 100,000 documents and a few edits, where unpacking
        every bit, a block at a time, took 6.6 s); many runs go bit by bit."""
        out = np.zeros((SIGNATURE_BITS, -(-len(order) // 8)), dtype=np.uint8)
        runs = self._runs(np.asarray(order, dtype=np.int64))
        if len(runs) > REORDER_RUNS:
            return self._reordered_by_bits(order, out)
        for new, old, length in runs:
            source, first = ((self._base, old) if old < self._base_count
                             else (self._columns, old - self._base_count))
            _copy_bits(source, first, out, new, length)
        return out

    def _runs(self, order: np.ndarray) -> list[tuple[int, int, int]]:
        """(first new id, first old id, length) of the runs of consecutive ids in `order`, each
        within one of the two arrays."""
        if not len(order):
            return []
        starts = [0, *(np.flatnonzero(np.diff(order) != 1) + 1).tolist(), len(order)]
        runs = []
        split = self._base_count
        for start, end in itertools.pairwise(starts):
            old, length = int(order[start]), end - start
            if old < split < old + length:
                runs.append((start, old, split - old))
                start, old, length = start + split - old, split, length - (split - old)
            runs.append((start, old, length))
        return runs

    def _reordered_by_bits(self, order: np.ndarray, out: np.ndarray) -> np.ndarray:
        """reordered() a block of bits at a time (unpacked whole, 100,000 documents' would
        take 800 MB)."""
        parts = [(columns, count) for columns, count in
                 ((self._base, self._base_count), (self._columns, self._added)) if count]
        for row in range(0, SIGNATURE_BITS, REORDER_ROWS):
            bits = np.concatenate(
                [np.unpackbits(columns[row: row + REORDER_ROWS], axis=1, count=count, bitorder="little")
                 for columns, count in parts], axis=1)
            out[row: row + REORDER_ROWS] = np.packbits(bits[:, order], axis=1, bitorder="little")
        return out

    def matching(self, bits: Sequence[int]) -> np.ndarray:
        """Per document id, whether every one of `bits` is set in its filter."""
        if not bits:
            return np.ones(self.count, dtype=bool)
        parts = [_matching(columns, count, bits) for columns, count in
                 ((self._base, self._base_count), (self._columns, self._added)) if count]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _copy_bits(source: np.ndarray, first: int, out: np.ndarray, at: int, length: int) -> None:
    """Copy documents [first, first + length) of `source` to [at, at + length) of `out`
    (packed columns, little bit order; `out`'s bits there are still 0): bit by bit up to a
    byte of `out`, then whole bytes, each made of two of `source` shifted, then the rest."""
    head = min(length, -at % 8)
    for k in range(head):
        _copy_bit(source, first + k, out, at + k)
    first, at, length = first + head, at + head, length - head
    whole = length // 8
    if whole:
        shift, lo, to = first & 7, first >> 3, at >> 3
        for row in range(0, SIGNATURE_BITS, REORDER_ROWS):
            block: np.ndarray = source[row: row + REORDER_ROWS, lo: lo + whole + 1].astype(np.uint16)
            if block.shape[1] < whole + 1:  # the last byte: nothing after it to shift in
                block = np.pad(block, ((0, 0), (0, whole + 1 - block.shape[1])))
            if shift:
                block = (block[:, :whole] >> shift) | (block[:, 1:] << (8 - shift))
            out[row: row + REORDER_ROWS, to: to + whole] = block[:, :whole].astype(np.uint8)
    for k in range(whole * 8, length):
        _copy_bit(source, first + k, out, at + k)


def _copy_bit(source: np.ndarray, doc: int, out: np.ndarray, at: int) -> None:
    out[:, at >> 3] |= ((source[:, doc >> 3] >> (doc & 7)) & 1) << (at & 7)


def _matching(columns: np.ndarray, count: int, bits: Sequence[int]) -> np.ndarray:
    used = -(-count // 8)
    found = columns[bits[0], :used].copy()
    for bit in bits[1:]:
        found &= columns[bit, :used]
    matched: np.ndarray = np.unpackbits(found, bitorder="little", count=count).astype(bool)
    return matched
