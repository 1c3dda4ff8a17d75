"""A snapshot's backlinks and lookup as tables of numbers, which the store maps at a restart
rather than decoding a dict of every page and key (about 0.7 s and 68 MB at 100,000 pages).

Backlinks: page i's linking pages are `sources[start[i]:start[i + 1]]`, by page position.
Lookup: the keys as a string table (serve/support/string_table.py), and `key_pages[i]` the
position of the page key i names."""

from __future__ import annotations

import itertools
from collections.abc import ItemsView, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from serve.source.page import Page
from serve.support.string_table import PARTS, FromGet, StringTable, check_table, table_arrays

DTYPES = {"backlink_start": "int64", "backlink_sources": "int32", "key_pages": "int32",
          **{"key_" + part: dtype for part, dtype in PARTS.items()}}  # every table


class Backlinks(FromGet, Mapping[str, list[int]]):
    """Page path -> the positions of the pages linking to it, in order, as
    graph.evidence.incoming_links makes them; a page nothing links to is not a key."""

    __slots__ = ("_pages", "_position", "_start", "_sources")

    def __init__(self, pages: Sequence[Page], position: Mapping[str, int], start: np.ndarray,
                 sources: np.ndarray) -> None:
        self._pages, self._position = pages, position
        self._start, self._sources = start, sources

    def get(self, path: object, default: Any = None) -> Any:
        at = self._position.get(path) if isinstance(path, str) else None
        if at is None:
            return default
        first, end = int(self._start[at]), int(self._start[at + 1])
        return self._sources[first:end].tolist() if end > first else default

    def __iter__(self) -> Iterator[str]:
        pages = self._pages
        return (pages[i].path for i in np.flatnonzero(np.diff(self._start)).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(np.diff(self._start)))


class KeyTable(FromGet, Mapping[str, Page]):
    """Lookup key -> the page it names, from the tables (see the module's docstring)."""

    __slots__ = ("_pages", "_keys", "_targets")

    def __init__(self, pages: Sequence[Page], arrays: Mapping[str, np.ndarray]) -> None:
        self._pages, self._keys, self._targets = pages, StringTable(arrays, "key_"), arrays["key_pages"]

    def get(self, key: object, default: Any = None) -> Any:
        row = self._keys.find(key) if isinstance(key, str) else -1
        return self._pages[int(self._targets[row])] if row >= 0 else default

    def __iter__(self) -> Iterator[str]:
        return self._keys.strings()

    def __len__(self) -> int:
        return len(self._keys)

    def items(self) -> ItemsView[str, Page]:
        return _Items(self)

    def _pairs(self) -> Iterator[tuple[str, Page]]:
        """Every key and its page, without a search per key (dict(table.items()) copies the
        table)."""
        pages = self._pages
        return ((key, pages[target]) for key, target in
                zip(self._keys.strings(), self._targets.tolist(), strict=True))


class _Items(ItemsView[str, Page]):
    _mapping: KeyTable

    def __iter__(self) -> Iterator[tuple[str, Page]]:
        return self._mapping._pairs()


def backlink_arrays(incoming: Mapping[str, Sequence[int]], pages: Sequence[Page]) -> dict[str, np.ndarray]:
    """The backlink tables of `incoming` over `pages` (by position)."""
    rows = [incoming.get(page.path, ()) for page in pages]
    start = np.zeros(len(pages) + 1, np.int64)
    np.cumsum([len(row) for row in rows], out=start[1:])
    sources = np.fromiter(itertools.chain.from_iterable(rows), np.int32, count=int(start[-1]))
    return {"backlink_start": start, "backlink_sources": sources}


def key_arrays(lookup: Mapping[str, Page], pages: Sequence[Page]) -> dict[str, np.ndarray]:
    """The key tables of `lookup`, whose pages are among `pages` (by identity)."""
    position = {id(page): i for i, page in enumerate(pages)}
    return {**table_arrays(lookup, "key_"),
            "key_pages": np.fromiter(map(position.__getitem__, map(id, lookup.values())),
                                     np.int32, count=len(lookup))}


def check_tables(arrays: Mapping[str, np.ndarray], pages: int) -> None:
    """ValueError unless the tables fit `pages` pages and each other, so that no read of them
    can index out of bounds and every key decodes: for tables from a file someone may have
    altered (the store runs it beside the start, on a mapping of its own)."""
    if any(str(arrays[name].dtype) != dtype or arrays[name].ndim != 1
           for name, dtype in DTYPES.items()):
        raise ValueError("a link table is not of its type")
    start, sources = arrays["backlink_start"], arrays["backlink_sources"]
    if start.shape != (pages + 1,) or int(start[0]) != 0 or int(start[-1]) != len(sources) \
            or bool(np.any(np.diff(start) < 0)):
        raise ValueError("backlink offsets do not fit the pages")
    if len(sources) and (int(sources.min()) < 0 or int(sources.max()) >= pages):
        raise ValueError("a backlink is not a page")
    check_table(arrays, "key_")
    targets = arrays["key_pages"]
    if len(targets) != len(arrays["key_ends"]):
        raise ValueError("lookup keys and their pages differ in number")
    if len(targets) and (int(targets.min()) < 0 or int(targets.max()) >= pages):
        raise ValueError("a lookup key names no page")
