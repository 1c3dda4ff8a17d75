"""Strings numbered in order, as arrays a store can map rather than decode into a dict: their
UTF-8 bytes end to end (`ends[i]` marks where string i stops), and their CRC-32s sorted, with
`order` the ids in that order. A string is found by a binary search on its hash, then a
comparison of its bytes (two strings may share a hash). The index's terms and the link views'
lookup keys are kept so (serve/store/search_index.py)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

PARTS = {"hashes": "uint32", "order": "int32", "ends": "int64", "bytes": "uint8"}


def hash_of(raw: bytes) -> int:
    """A string's hash, of its UTF-8 bytes: the same in every process (unlike hash())."""
    return zlib.crc32(raw)


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def table_arrays(strings: Iterable[str], prefix: str) -> dict[str, np.ndarray]:
    """The arrays of `strings` (ids in their order), named `prefix` + each part's name."""
    encoded = [encode(text) for text in strings]
    hashes = np.fromiter(map(hash_of, encoded), np.uint32, count=len(encoded))
    order = np.argsort(hashes, kind="stable").astype(np.int32)
    return {prefix + "hashes": hashes[order], prefix + "order": order,
            prefix + "ends": np.cumsum(np.fromiter(map(len, encoded), np.int64, count=len(encoded))),
            prefix + "bytes": np.frombuffer(b"".join(encoded), np.uint8)}


class StringTable:
    """The strings of table_arrays(), read from its arrays in place."""

    __slots__ = ("_hashes", "_order", "_ends", "_bytes")

    def __init__(self, arrays: Mapping[str, np.ndarray], prefix: str) -> None:
        self._hashes, self._order = arrays[prefix + "hashes"], arrays[prefix + "order"]
        self._ends, self._bytes = arrays[prefix + "ends"], arrays[prefix + "bytes"]

    def __len__(self) -> int:
        return len(self._ends)

    def find(self, text: str) -> int:
        """The string's id, or -1."""
        raw = encode(text)
        wanted = np.uint32(hash_of(raw))
        hashes, order, ends = self._hashes, self._order, self._ends
        at = int(np.searchsorted(hashes, wanted))
        while at < len(hashes) and hashes[at] == wanted:
            sid = int(order[at])
            if self._bytes[int(ends[sid - 1]) if sid else 0:int(ends[sid])].tobytes() == raw:
                return sid
            at += 1
        return -1

    def string(self, sid: int) -> str:
        """The string with id `sid`."""
        ends = self._ends
        first = int(ends[sid - 1]) if sid else 0
        return self._bytes[first:int(ends[sid])].tobytes().decode("utf-8", "surrogatepass")

    def strings(self, *, backwards: bool = False) -> Iterator[str]:
        """Every string, by id (last first when `backwards`), without a search each."""
        raw, ends = self._bytes.tobytes(), self._ends.tolist()
        starts = [0, *ends[:-1]] if ends else []
        pairs = zip(starts, ends, strict=True)
        for first, end in (reversed(list(pairs)) if backwards else pairs):
            yield raw[first:end].decode("utf-8", "surrogatepass")


def check_table(arrays: Mapping[str, np.ndarray], prefix: str) -> None:
    """ValueError unless the arrays are a table's, so that no search of them can index out of
    bounds and every string decodes: for arrays from a file someone may have altered."""
    if any(str(arrays[prefix + part].dtype) != dtype or arrays[prefix + part].ndim != 1
           for part, dtype in PARTS.items()):
        raise ValueError(f"{prefix}table: a part is not of its type")
    hashes, order = arrays[prefix + "hashes"], arrays[prefix + "order"]
    ends, raw = arrays[prefix + "ends"], arrays[prefix + "bytes"]
    if not len(hashes) == len(order) == len(ends):
        raise ValueError(f"{prefix}table: parts of other lengths")
    if bool(np.any(hashes[1:] < hashes[:-1])):
        raise ValueError(f"{prefix}table: hashes out of order")
    if len(order) and (int(order.min()) < 0 or int(order.max()) >= len(order)):
        raise ValueError(f"{prefix}table: an id out of range")
    if len(ends) and (int(ends[0]) < 0 or int(ends[-1]) != len(raw)
                      or bool(np.any(np.diff(ends) < 0))):
        raise ValueError(f"{prefix}table: string ends out of order")
    raw.tobytes().decode("utf-8", "surrogatepass")  # UnicodeDecodeError is a ValueError


class FromGet:
    """`[]` and `in` of a mapping whose get() is its one lookup (None: absent): for the tables
    above, read in place, which find a key once rather than twice."""

    def get(self, key: Any, default: Any = None) -> Any:
        raise NotImplementedError

    def __getitem__(self, key: Any) -> Any:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None
