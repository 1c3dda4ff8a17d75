"""The vocabulary of an index restored from the store: its terms in a mapped string table
(ids 0 to n - 1), and the terms edits add since in a dict of their own (ids from n). Decoding
every term into a dict cost a restart 0.14 s and 31 MB at 100,000 pages (351,000 terms)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from serve.support.string_table import FromGet, StringTable


class Vocabulary(FromGet, MutableMapping[str, int]):
    """Term -> term id, in id order, as the dict of a fresh build is (terms are only ever added,
    each with the next id)."""

    __slots__ = ("_table", "_size", "_added")

    def __init__(self, table: StringTable) -> None:
        self._table, self._size = table, len(table)
        self._added: dict[str, int] = {}

    def get(self, term: object, default: Any = None) -> Any:
        if not isinstance(term, str):
            return default
        tid = self._table.find(term)
        return tid if tid >= 0 else self._added.get(term, default)

    def __setitem__(self, term: str, tid: int) -> None:
        if tid != len(self) or term in self:
            raise ValueError("a vocabulary only takes a new term, with the next id")
        self._added[term] = tid

    def __delitem__(self, term: str) -> None:
        raise TypeError("terms are never removed from a vocabulary")

    def __len__(self) -> int:
        return self._size + len(self._added)

    def __iter__(self) -> Iterator[str]:
        yield from self._table.strings()
        yield from self._added

    def __reversed__(self) -> Iterator[str]:
        yield from reversed(self._added)
        yield from self._table.strings(backwards=True)
