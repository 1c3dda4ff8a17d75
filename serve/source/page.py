"""One page: the Page record a file is parsed into (source/parse.py), its sections and parse options."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

ROLE_RANK = {"hot": 0, "index": 1, "overview": 2, "topic": 3}


class Section(NamedTuple):
    """Where one heading's section sits in the file (1-based, inclusive line numbers)."""

    heading: str
    level: int
    start_line: int
    end_line: int


class ParseOptions(NamedTuple):
    """Adapter-dependent parsing choices (part of the page cache key)."""

    alias_target_last: bool = False  # Dendron: [[Alias|target]]
    logseq_titles: bool = False  # Logseq: '___' in a file stem means '/'
    okf: bool = False  # the OKF v0.2 profile (serve/source/okf.py parses such pages)
    titles: str = ""  # the shape's title rule (names.TITLE_*); "" = by logseq_titles


class BodyRef(Protocol):
    """A page's body and section table left in the store rather than held in memory, read by
    the request that needs them (serve.store.bodies.StoredBody is the one kind)."""

    @property
    def sha1(self) -> bytes: ...  # of the compressed body, as Page.body_sha1

    def load(self) -> tuple[bytes, tuple[Any, ...]]: ...  # (text_z, section_table)

    def page(self) -> Page: ...  # the whole stored page, its body left in the store

    def keep(self, page: StoredPage) -> None: ...  # `page` holds what page() read: bound them

    # Columns of these bodies' pages (summary, frontmatter_json, lists), of those kept where
    # this one is (None for others), in one pass: read whole one by one, 100,000 pages took
    # 5-8 s for their summaries.
    def columns(self, bodies: Sequence[BodyRef], names: Sequence[str]) -> list[tuple[Any, ...] | None]: ...


class Page(NamedTuple):
    """A parsed page. Immutable; `role` is assigned by the loader from the page's location.

    A NamedTuple (not a dataclass) because tens of thousands are built, cached and
    restored at start-up, and tuples do that at C speed."""

    id: str
    title: str
    path: str
    role: str
    # The body text, zlib-compressed (most of a large folder's memory), or, for a page read
    # back from the store, where to find it there: read it through `body_z` or `text`.
    text_z: bytes | BodyRef
    summary: str
    frontmatter_json: str  # JSON text: one object instead of a tree per page in memory
    review_state: str
    status: str
    source_refs: tuple[str, ...]
    tags: tuple[str, ...]
    links: tuple[str, ...]
    headings: tuple[str, ...]
    updated_at: str
    approved: bool
    line_count: int
    body_line: int
    # (level, start line, end line) of each heading in `headings`, flattened: one tuple per
    # page instead of a Section per heading (a large folder's pages hold 100,000s of them).
    section_lines: tuple[int, ...] = ()
    wiki_title: str = ""
    description: str = ""
    degraded: str = ""  # why the page was degraded while parsing ("" when clean)
    okf_json: str = ""  # JSON of the OKF v0.2 `okf` object ("" when not an OKF page)
    aliases: tuple[str, ...] = ()  # other names links and reads may use (names.aliases_of)
    # serve.source.sections: lines and hash per section (the store's, as text_z): `packed_sections`
    section_table: tuple[Any, ...] | BodyRef = ()

    @property
    def frontmatter(self) -> dict[str, Any]:
        """The parsed frontmatter mapping, JSON-safe (dates as ISO strings)."""
        value: dict[str, Any] = json.loads(self.frontmatter_json)
        return value

    @property
    def sections(self) -> tuple[Section, ...]:
        """Where each heading's section sits in the file (raw origins for citations)."""
        lines = self.section_lines
        return tuple(Section(heading, *lines[3 * i : 3 * i + 3])
                     for i, heading in enumerate(self.headings))

    @property
    def body_z(self) -> bytes:
        """The compressed body, read from the store when it was left there."""
        z = self.text_z
        return z if isinstance(z, bytes) else z.load()[0]

    @property
    def text(self) -> str:
        """The body (after frontmatter), stripped; raw Markdown."""
        return zlib.decompress(self.body_z).decode("utf-8")

    @property
    def packed_sections(self) -> tuple[Any, ...]:
        """The section table (serve.source.sections), read from the store when left there."""
        table = self.section_table
        return table if isinstance(table, tuple) else table.load()[1]

    @property
    def body_sha1(self) -> bytes:
        """A digest of the body, known without reading a stored body."""
        z = self.text_z
        return hashlib.sha1(z, usedforsecurity=False).digest() if isinstance(z, bytes) else z.sha1

    def payload(self) -> dict[str, Any]:
        """The read payload (WikiPage), in wire order."""
        return {
            "id": self.id,
            "title": self.title,
            "path": self.path,
            "role": self.role,
            "text": self.text,
            "summary": self.summary,
            "frontmatter": self.frontmatter,
            "review_state": self.review_state,
            "status": self.status,
            "source_refs": list(self.source_refs),
            "tags": list(self.tags),
            "links": list(self.links),
            "headings": list(self.headings),
            "updated_at": self.updated_at,
            "okf": json.loads(self.okf_json) if self.okf_json else None,
        }


# What a page read back from the store holds from the start: what a start, a search's
# ranking and the stored link views ask of every page. The rest is read when first asked.
KNOWN_AT_START = ("id", "title", "path", "role", "approved", "degraded")


class _Unread:
    """Stands in the tuple for a field a StoredPage has not read: never seen through its
    attributes, and refused by anything that would copy it out as a value (json, say)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unread>"


_UNREAD = _Unread()
_KNOWN_AT = tuple(Page._fields.index(name) for name in KNOWN_AT_START)
_APPROVED_AT, _TEXT_AT, _TABLE_AT = map(Page._fields.index, ("approved", "text_z", "section_table"))


class StoredPage(Page):
    """A page read back from the store by KNOWN_AT_START only: its other fields are read
    from the store when first asked for (`whole`) and kept with it while it is among the
    pages read last (the store lets go of older ones), so memory is bounded by what requests
    touch, not by the folder. A Page to every reader: attributes, iteration, indexing,
    equality and _replace all see the whole page. A restart so builds no per-page lists,
    summaries or frontmatter for the folder."""

    # (A tuple subclass cannot declare slots: a held page sits in __dict__, made on demand.)

    def __new__(cls, body: BodyRef, known: Sequence[Any]) -> StoredPage:
        """`known`: the values of KNOWN_AT_START, in order (`approved` may be a stored 0 or 1)."""
        values: list[Any] = [_UNREAD] * len(Page._fields)
        for at, value in zip(_KNOWN_AT, known, strict=True):
            values[at] = value
        values[_APPROVED_AT] = bool(values[_APPROVED_AT])
        values[_TEXT_AT] = values[_TABLE_AT] = body
        page: StoredPage = tuple.__new__(cls, values)
        return page

    @property
    def whole(self) -> Page:
        """Every field: read from the store on first use and kept with it until the store
        makes room for pages read since (BodyRef.keep), or held (placed as this page is)."""
        found: Page | None = self.__dict__.get("_whole")
        if found is None:
            shared: list[Page | None] | None = self.__dict__.get("_held")
            found = shared[0] if shared is not None else None
            if found is None:
                body = self.text_z
                assert not isinstance(body, bytes)
                found = body.page()
                body.keep(self)
            if found.role != self.role:
                found = found._replace(role=self.role)
            self.__dict__["_whole"] = found
        return found

    def forget(self) -> None:
        """Let go of the page read (the store made room): read again when next asked for."""
        self.__dict__.pop("_whole", None)

    @property
    def held(self) -> bool:
        """Whether the whole page is kept with it (by itself or a copy placed elsewhere)."""
        shared: list[Page | None] | None = self.__dict__.get("_held")
        return shared is not None and shared[0] is not None

    def hold(self) -> None:
        """Keep the whole page with it from now on: a save is about to replace or drop its row,
        and the snapshots that show this page must go on reading it as it was."""
        shared = self.__dict__.setdefault("_held", [None])
        if shared[0] is None:
            body = self.text_z
            assert not isinstance(body, bytes)
            shared[0] = body.page()

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.whole)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return self.whole[index]

    def __eq__(self, other: object) -> bool:
        return self is other or self.whole == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.whole)

    def __repr__(self) -> str:
        return f"StoredPage({self.path!r}, id={self.id!r})"

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Page, tuple(self.whole))

    def _asdict(self) -> dict[str, Any]:
        return self.whole._asdict()

    def _replace(self, **changes: Any) -> Page:  # type: ignore[override]
        if changes.keys() <= {"role"}:  # placing it: still read when first needed
            body = self.text_z
            assert not isinstance(body, bytes)
            known = {name: getattr(self, name) for name in KNOWN_AT_START} | changes
            moved = StoredPage(body, list(known.values()))
            # One hold serves both: the copies share the cell (made here if need be).
            moved.__dict__["_held"] = self.__dict__.setdefault("_held", [None])
            return moved
        return self.whole._replace(**changes)


def _unread(pages: Sequence[Page | None]) -> list[tuple[int, StoredPage, BodyRef]]:
    """The pages left in the store with nothing of them read yet, with where they are."""
    out: list[tuple[int, StoredPage, BodyRef]] = []
    for at, page in enumerate(pages):
        body = page.text_z if isinstance(page, StoredPage) and not page.__dict__ else None
        if body is not None and not isinstance(body, bytes):
            out.append((at, page, body))  # type: ignore[arg-type]  # (a StoredPage here)
    return out


def summaries_of(pages: Sequence[Page | None]) -> list[str]:
    """Each page's summary ("" for None), those of pages left in the store read together
    (fields_of) rather than each page read whole."""
    found = iter(fields_of([page for page in pages if page is not None], ("summary",)))
    return ["" if page is None else next(found)[0] for page in pages]


# What fields_of() reads of a page left in the store beside what it holds from the start:
# its summary column, and fields of its lists column.
LISTED = frozenset(("source_refs", "tags", "headings", "aliases"))


def fields_of(pages: Sequence[Page], names: Sequence[str]) -> list[tuple[Any, ...]]:
    """Each page's fields `names` (those it holds from the start, body_sha1, summary and
    LISTED), in that order; those of pages left in the store read together, from the columns
    the names need (read whole one by one, 100,000 pages took 6 s for their fingerprints and
    5-8 s for their summaries)."""
    found: list[tuple[Any, ...] | None] = [None] * len(pages)
    unread = _unread(pages)
    asked = set(names)
    columns = [column for column, fields in (("summary", {"summary"}), ("lists", LISTED))
               if fields & asked]
    if unread and asked <= {*KNOWN_AT_START, "body_sha1", "summary", *LISTED}:
        rows: list[tuple[Any, ...] | None] = (
            unread[0][2].columns([body for _, _, body in unread], columns) if columns
            else [()] * len(unread))
        for (at, page, body), row in zip(unread, rows, strict=True):
            if row is None:
                continue
            values: dict[str, Any] = {"body_sha1": body.sha1}
            for column, value in zip(columns, row, strict=True):
                if column == "summary":
                    values["summary"] = value
                else:
                    values.update((name, tuple(items)) for name, items in json.loads(value).items())
            found[at] = tuple(values[name] if name in values else getattr(page, name)
                              for name in names)
    return [got if got is not None else tuple(getattr(page, name) for name in names)
            for got, page in zip(found, pages, strict=True)]


def tags_and_frontmatter_of(pages: Sequence[Page]) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Each page's tags and frontmatter, those of pages left in the store read together
    (filters ask for every page's: read whole one by one, 20,000 pages took 0.7 s)."""
    found: list[tuple[tuple[str, ...], dict[str, Any]] | None] = [None] * len(pages)
    unread = _unread(pages)
    if unread:
        rows = unread[0][2].columns([body for _, _, body in unread], ("frontmatter_json", "lists"))
        for (at, _, _), row in zip(unread, rows, strict=True):
            if row is not None:
                found[at] = (tuple(json.loads(row[1])["tags"]), json.loads(row[0]))
    return [got if got is not None else (page.tags, page.frontmatter)
            for got, page in zip(found, pages, strict=True)]


def _read_when_asked(name: str) -> property:
    return property(lambda page: getattr(page.whole, name), doc=f"Page.{name}, read when asked")


for _name in Page._fields:
    if _name not in (*KNOWN_AT_START, "text_z", "section_table"):
        setattr(StoredPage, _name, _read_when_asked(_name))
