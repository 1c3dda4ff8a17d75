"""A snapshot's graph fragments, one per page in page order, made when first needed for the
pages read back from the store."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload

from serve.graph.model import Fragment, page_fragment, shared_strings
from serve.source.page import Page

# What the store holds of these pages' fragments (None where its row is of other content).
# Missing fragments asked for together are always read so: making one from a page read back
# from the store would first read that page's other fields (serve.source.page.StoredPage).
Fill = Callable[[Sequence[Page]], list[Fragment | None]]


def made(page: Page) -> Fragment:
    return shared_strings(page_fragment(page))


class Fragments(Sequence[Fragment]):
    """The fragments of `pages`, with None in `entries` for those not made yet.

    A fragment is a function of its page, so a restart leaves it out: building one per page
    cost a fifth of a restart and a quarter of the pages' memory, and a start needs none (the
    store's link views stand in for the lookup and backlinks). One asked for by index (an
    evidence page, a read by name) is made from its page; the first pass over all of them
    (the link index, a lookup built anew) reads those missing from the store at once
    (`fill`), and makes any it lacks. Requests on several threads may fill the same entry:
    each writes an equal value."""

    __slots__ = ("_pages", "_entries", "_fill")

    def __init__(self, pages: Sequence[Page], entries: list[Fragment | None],
                 fill: Fill | None = None) -> None:
        if len(pages) != len(entries):
            raise ValueError("one fragment entry per page")
        self._pages, self._entries, self._fill = pages, entries, fill

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> Fragment: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Fragment]: ...

    def __getitem__(self, index: int | slice) -> Fragment | Sequence[Fragment]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        fragment = self._entries[index]
        if fragment is None:
            fragment = self._entries[index] = made(self._pages[index])
        return fragment

    def __iter__(self) -> Iterator[Fragment]:
        self.complete()
        return iter(self._entries)  # type: ignore[arg-type]  # every entry is filled now

    def complete(self) -> None:
        """Make every missing entry: those the store has read in one pass, the others made."""
        entries = self._entries
        missing = [i for i, fragment in enumerate(entries) if fragment is None]
        if not missing:
            return
        pages = self._pages
        found: list[Fragment | None] = [None] * len(missing)
        if self._fill is not None:
            found = self._fill([pages[i] for i in missing])
        for i, fragment in zip(missing, found, strict=True):
            entries[i] = fragment if fragment is not None else made(pages[i])

    @property
    def missing(self) -> int:
        """How many are not made yet (observability and tests)."""
        return self._entries.count(None)

    def entries(self) -> list[Fragment | None]:
        """A copy of the entries, for the next snapshot's (see with_entries)."""
        return list(self._entries)

    def with_entries(self, pages: Sequence[Page], entries: list[Fragment | None]) -> Fragments:
        """The fragments of another snapshot's pages, read from the same store."""
        return Fragments(pages, entries, self._fill)
