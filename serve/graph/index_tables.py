"""A link index's maps (serve/graph/links.py) as tables of numbers, which the store maps at a
restart: the first page added, deleted or renamed after it then derives the next index from
them, key by key, instead of building one from every page's fragment (seconds at 100,000
pages, on the request that sees the change).

Key -> paths (`own`, `alias`, `linkers`): the keys as a string table under the map's prefix,
and key i's pages `pages[start[i]:start[i + 1]]`, by page position, in the map's order. Node
ids are one string table (`node_`); node i's referrers are `refs_pages[refs_start[i]:...]`,
and page p's edge targets `targets_nodes[targets_start[p]:...]`, node ids by number."""

from __future__ import annotations

import itertools
from collections.abc import ItemsView, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

from serve.graph.links import PairsView
from serve.source.page import Page
from serve.support.string_table import PARTS, FromGet, StringTable, check_table, table_arrays

KEY_MAPS = ("own", "alias", "linkers")
DTYPES = {**{f"{name}_{part}": dtype for name in (*KEY_MAPS, "node") for part, dtype in PARTS.items()},
          **{f"{name}_start": "int64" for name in (*KEY_MAPS, "refs", "targets")},
          **{f"{name}_pages": "int32" for name in (*KEY_MAPS, "refs")}, "targets_nodes": "int32"}


class Paths(Sequence[str]):
    """The paths of pages listed by position, made as they are read: a hub's or a tag's
    referrers are thousands, and most readers want the first visible one."""

    __slots__ = ("_pages", "_rows")
    CHUNK = 256

    def __init__(self, pages: Sequence[Page], rows: np.ndarray) -> None:
        self._pages, self._rows = pages, rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return Paths(self._pages, self._rows[index])
        return self._pages[int(self._rows[index])].path

    def __iter__(self) -> Iterator[str]:
        pages, rows = self._pages, self._rows
        for first in range(0, len(rows), self.CHUNK):
            for i in rows[first:first + self.CHUNK].tolist():
                yield pages[i].path


class PathLists(FromGet, Mapping[str, Sequence[str]]):
    """Key -> the paths of the pages listed for it, read from the tables in place."""

    __slots__ = ("_pages", "_keys", "_start", "_rows")

    def __init__(self, pages: Sequence[Page], keys: StringTable, start: np.ndarray, rows: np.ndarray) -> None:
        self._pages, self._keys, self._start, self._rows = pages, keys, start, rows

    def get(self, key: object, default: Any = None) -> Any:
        row = self._keys.find(key) if isinstance(key, str) else -1
        return self._paths(row) if row >= 0 else default

    def _paths(self, row: int) -> Paths:
        start = self._start
        return Paths(self._pages, self._rows[int(start[row]):int(start[row + 1])])

    def __iter__(self) -> Iterator[str]:
        return self._keys.strings()

    def __len__(self) -> int:
        return len(self._keys)

    def items(self) -> ItemsView[str, Sequence[str]]:
        return PairsView(self)

    def pairs(self) -> Iterator[tuple[str, Sequence[str]]]:
        return ((key, self._paths(row)) for row, key in enumerate(self._keys.strings()))


class TargetLists(FromGet, Mapping[str, Sequence[str]]):
    """Page path -> the node ids its edges point at, read from the tables in place."""

    __slots__ = ("_pages", "_position", "_nodes", "_start", "_rows")

    def __init__(self, pages: Sequence[Page], position: Mapping[str, int], nodes: StringTable,
                 start: np.ndarray, rows: np.ndarray) -> None:
        self._pages, self._position, self._nodes = pages, position, nodes
        self._start, self._rows = start, rows

    def get(self, path: object, default: Any = None) -> Any:
        at = self._position.get(path) if isinstance(path, str) else None
        return default if at is None else self._targets(at)

    def _targets(self, at: int) -> tuple[str, ...]:
        string = self._nodes.string
        return tuple(map(string, self._rows[int(self._start[at]):int(self._start[at + 1])].tolist()))

    def __iter__(self) -> Iterator[str]:
        return (page.path for page in self._pages)

    def __len__(self) -> int:
        return len(self._pages)

    def items(self) -> ItemsView[str, Sequence[str]]:
        return PairsView(self)

    def pairs(self) -> Iterator[tuple[str, Sequence[str]]]:
        return ((page.path, self._targets(at)) for at, page in enumerate(self._pages))


def mapped(arrays: Mapping[str, np.ndarray], pages: Sequence[Page],
           position: Mapping[str, int]) -> dict[str, Mapping[str, Sequence[str]]]:
    """The maps of tables checked by check_tables: own, alias, linkers, refs and targets."""
    out: dict[str, Mapping[str, Sequence[str]]] = {
        name: PathLists(pages, StringTable(arrays, name + "_"), arrays[name + "_start"],
                        arrays[name + "_pages"]) for name in KEY_MAPS}
    nodes = StringTable(arrays, "node_")
    out["refs"] = PathLists(pages, nodes, arrays["refs_start"], arrays["refs_pages"])
    out["targets"] = TargetLists(pages, position, nodes, arrays["targets_start"], arrays["targets_nodes"])
    return out


def _lists(prefix: str, lists: Sequence[Sequence[int]], rows: str = "pages") -> dict[str, np.ndarray]:
    """`lists` as offsets (`prefix_start`) into their entries end to end (`prefix_rows`)."""
    start = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(row) for row in lists], out=start[1:])
    entries = np.fromiter(itertools.chain.from_iterable(lists), np.int32, count=int(start[-1]))
    return {f"{prefix}_start": start, f"{prefix}_{rows}": entries}


def tables(maps: Mapping[str, Mapping[str, Sequence[str]]], pages: Sequence[Page],
           position: Mapping[str, int]) -> dict[str, np.ndarray]:
    """The tables of a link index's maps (`maps`: own, alias, linkers, refs, targets) over
    `pages`, whose positions `position` gives. KeyError when a map names a path that is not
    a page, or a target no page refers to: such an index is not of these pages."""
    out: dict[str, np.ndarray] = {}
    number: dict[str, int] = {}
    for name in (*KEY_MAPS, "refs"):
        pairs = list(maps[name].items())
        keys = [key for key, _ in pairs]
        out.update(table_arrays(keys, ("node" if name == "refs" else name) + "_"))
        out.update(_lists(name, [[position[p] for p in paths] for _, paths in pairs]))
        if name == "refs":
            number = dict(zip(keys, range(len(keys)), strict=True))
    targets = maps["targets"]
    out.update(_lists("targets", [[number[nid] for nid in targets.get(page.path, ())]
                                  for page in pages], rows="nodes"))
    return out


def check_tables(arrays: Mapping[str, np.ndarray], pages: int) -> None:
    """ValueError unless the tables fit `pages` pages and each other, so that no read of them
    can index out of bounds and every string decodes (tables from a file someone may alter)."""
    if any(str(arrays[name].dtype) != dtype or arrays[name].ndim != 1 for name, dtype in DTYPES.items()):
        raise ValueError("a link index table is not of its type")
    for name in (*KEY_MAPS, "node"):
        check_table(arrays, name + "_")
    nodes = len(arrays["node_ends"])
    for name in KEY_MAPS:
        _check_lists(arrays[name + "_start"], arrays[name + "_pages"], len(arrays[name + "_ends"]), pages)
    _check_lists(arrays["refs_start"], arrays["refs_pages"], nodes, pages)
    _check_lists(arrays["targets_start"], arrays["targets_nodes"], pages, nodes)


def _check_lists(start: np.ndarray, rows: np.ndarray, count: int, bound: int) -> None:
    if start.shape != (count + 1,) or int(start[0]) != 0 or int(start[-1]) != len(rows) \
            or bool(np.any(np.diff(start) < 0)):
        raise ValueError("link index offsets do not fit their keys")
    if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= bound):
        raise ValueError("a link index entry is out of range")
