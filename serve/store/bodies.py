"""Pages and their bodies left in the store: read by the request that needs one and kept only
while among the last read (RECENT_BODIES, RECENT_PAGES), or held from just before the store
replaces a page's row until no snapshot refers to it. A page the store no longer has (its
file was removed while serve ran) is parsed again from the folder, when the file still has
the same content."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

import structlog

from serve.errors import NotReady
from serve.source import sections
from serve.source.page import BodyRef, Page, ParseOptions, StoredPage
from serve.store.database import Database, transaction
from serve.watch.file_read import read_file

log = structlog.get_logger("llmwiki.serve.store")

# Bodies read lately, by content (rel, digest, sha1: never stale): a context pack reads each
# evidence page's text and sections in two places, and agents ask around the same pages.
# Bounded (about 2.5 KB an entry): emptied when full.
RECENT_BODIES = 512
# Pages read whole lately keep what was read (a search's hits, a pack's evidence and neighbour
# pages), about 3 KB each; the oldest lets go when more are read (StoredPage.forget).
RECENT_PAGES = 4096
_BODY = ("SELECT p.text_z FROM pages p JOIN files f ON f.rel = p.rel "
         "WHERE p.rel = ? AND f.digest = ?")
# A page's tuple-valued fields are held in one JSON object (one decode per page read); the
# others are columns, and section_table is its own table.
LIST_FIELDS = ("source_refs", "tags", "links", "headings", "section_lines", "aliases")
# What a pass over every row (Bodies.columns) may read: small columns, never a body.
READABLE = frozenset(("summary", "frontmatter_json", "lists"))
PAGE_COLUMNS = tuple(f for f in Page._fields
                     if f not in LIST_FIELDS and f not in ("section_table", "text_z"))
_PAGE = (f"SELECT {', '.join(f'p.{name}' for name in PAGE_COLUMNS)}, p.lists "
         "FROM pages p JOIN files f ON f.rel = p.rel WHERE p.rel = ? AND f.digest = ?")
_SECTIONS = ("SELECT heading, level, line_start, line_end, sha256 FROM sections "
             "WHERE rel = ? ORDER BY position")


class BodyUnavailable(NotReady):
    """A page's body is neither in the store nor in the folder as this snapshot knows it: the
    file changed, and another process sharing the store wrote its newer page first, or the
    store was removed. The next snapshot has the page as the folder holds it now."""

    code = "page_changing"
    safe_message = "The folder changed while this request read it; retry shortly."
    retry_after_seconds = 1


def read_body(conn: sqlite3.Connection, rel: str, digest: str) -> tuple[bytes, tuple[Any, ...]] | None:
    """The stored (text_z, section table) of `rel` when its row is of the file with `digest`."""
    with transaction(conn, write=False):  # both statements see one state of the store
        row = conn.execute(_BODY, (rel, digest)).fetchone()
        if row is None:
            return None
        table = conn.execute(_SECTIONS, (rel,)).fetchall()
    return row[0], sections.pack(table) if table else ()


def page_of(row: tuple[Any, ...], body: StoredBody) -> Page:
    """A page from its columns (PAGE_COLUMNS, then lists), its body left in the store."""
    *columns, lists_json = row
    values: dict[str, Any] = dict(zip(PAGE_COLUMNS, columns, strict=True))
    values["approved"] = bool(values["approved"])
    lists = json.loads(lists_json)
    for name in LIST_FIELDS:
        values[name] = tuple(lists[name])
    return Page(**values, text_z=body, section_table=body)


class Bodies:
    """Where the stored bodies of one root are read: the store, else the folder (the root
    and page size limit the store was made for)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.root = database.identity["root"]
        self.max_page_bytes = int(database.identity["max_page_bytes"])
        self._recent: dict[tuple[str, str, bytes], tuple[bytes, tuple[Any, ...]]] = {}
        self._keeping: dict[int, StoredPage] = {}  # by id, oldest first
        self._keeping_lock = threading.Lock()

    def read(self, body: StoredBody) -> tuple[bytes, tuple[Any, ...]]:
        key = (body.rel, body.digest, body.sha1)
        found = self._recent.get(key)
        if found is None:
            found = self._read(body)
            if len(self._recent) >= RECENT_BODIES:
                self._recent.clear()
            self._recent[key] = found
        return found

    def keep(self, page: StoredPage) -> None:
        """`page` now holds what it read: the oldest such page lets go past RECENT_PAGES."""
        with self._keeping_lock:
            keeping = self._keeping
            keeping.pop(id(page), None)
            keeping[id(page)] = page
            while len(keeping) > RECENT_PAGES:
                keeping.pop(next(iter(keeping))).forget()

    @property
    def kept(self) -> int:
        """How many pages hold what they read (tests, observability)."""
        return len(self._keeping)

    def columns(self, bodies: Sequence[BodyRef], names: Sequence[str]) -> list[tuple[Any, ...] | None]:
        """The columns `names` (of READABLE) of the pages of `bodies` kept in this store, in one
        pass over its rows; None for a body of another store, or whose row is now of other
        content, or when the store cannot be read (its page is then read as ever)."""
        if not set(names) <= READABLE:
            raise ValueError(f"not a column a pass may read: {sorted(set(names) - READABLE)}")
        wanted = {(b.rel, b.digest) for b in bodies if isinstance(b, StoredBody) and b.bodies is self}
        found: dict[tuple[str, str], tuple[Any, ...]] = {}
        if wanted:
            try:
                with self.database.reading() as conn, transaction(conn, write=False):
                    for rel, digest, *values in conn.execute(
                            f"SELECT p.rel, f.digest, {', '.join(f'p.{n}' for n in names)} "
                            "FROM pages p JOIN files f ON f.rel = p.rel"):
                        if (rel, digest) in wanted:
                            found[rel, digest] = tuple(values)
            except sqlite3.Error as exc:
                log.warning("store_read_failed", part="columns", error=type(exc).__name__,
                            reason=str(exc)[:200])
        return [found.get((b.rel, b.digest)) if isinstance(b, StoredBody) else None
                for b in bodies]

    def page(self, body: StoredBody) -> Page:
        """The whole page `body` belongs to, from the store, else parsed again from the
        folder."""
        try:
            with self.database.reading() as conn:
                row = conn.execute(_PAGE, (body.rel, body.digest)).fetchone()
        except (sqlite3.Error, ValueError) as exc:
            log.warning("store_read_failed", part="page", error=type(exc).__name__,
                        reason=str(exc)[:200])
            row = None
        if row is not None:
            try:
                return page_of(row, body)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("store_read_failed", part="page", error=type(exc).__name__,
                            reason=str(exc)[:200])
        return self._reparsed(body)

    def _read(self, body: StoredBody) -> tuple[bytes, tuple[Any, ...]]:
        try:
            with self.database.reading() as conn:
                found = read_body(conn, body.rel, body.digest)
        except sqlite3.Error as exc:
            log.warning("store_read_failed", error=type(exc).__name__, reason=str(exc)[:200])
            found = None
        if found is None:
            page = self._reparsed(body)
            found = page.body_z, page.packed_sections
        return found

    def _reparsed(self, body: StoredBody) -> Page:
        """The page parsed again from the folder, when the file still has `body`'s content;
        else BodyUnavailable (the request may retry)."""
        page_path, options = body.parse_key
        result = read_file((body.rel, os.path.join(self.root, body.rel), page_path, options,
                            self.max_page_bytes, "", ""))
        if result.page is None or result.digest != body.digest:
            raise BodyUnavailable(f"no page of digest {body.digest} in the store or the folder")
        return result.page


class StoredBody:
    """Where one page's body and section table sit in the store: the file's row (`rel`) of
    the content `digest`. Not kept by this object when read (Bodies keeps the last few), so
    memory is bounded by what requests touch; `hold` keeps them before a save replaces or
    drops the row, for the snapshots that still show this page (they let go of this object,
    and so of the body, when they go)."""

    __slots__ = ("bodies", "rel", "digest", "sha1", "parse_key", "held")

    def __init__(self, bodies: Bodies, rel: str, digest: str, sha1: bytes,
                 parse_key: tuple[str, ParseOptions]) -> None:
        self.bodies, self.rel, self.digest, self.sha1 = bodies, rel, digest, sha1
        self.parse_key = parse_key  # the file's page path and parse options, for the folder
        self.held: tuple[bytes, tuple[Any, ...]] | None = None

    def load(self) -> tuple[bytes, tuple[Any, ...]]:
        held = self.held
        return held if held is not None else self.bodies.read(self)

    def page(self) -> Page:
        """The whole page this body belongs to (serve.source.page.StoredPage reads it)."""
        return self.bodies.page(self)

    def keep(self, page: StoredPage) -> None:
        self.bodies.keep(page)

    def columns(self, bodies: Sequence[BodyRef], names: Sequence[str]) -> list[tuple[Any, ...] | None]:
        return self.bodies.columns(bodies, names)

    def hold(self, conn: sqlite3.Connection) -> None:
        """Read the body into memory from `conn` (a save's transaction, before it writes)."""
        if self.held is None:
            found = read_body(conn, self.rel, self.digest)
            if found is not None:
                self.held = found

    def release(self) -> None:
        """Read from the store again: the row was written anew with this very content."""
        self.held = None

    def __eq__(self, other: object) -> bool:  # the same file content: the same body
        return (isinstance(other, StoredBody) and other.rel == self.rel
                and other.digest == self.digest and other.sha1 == self.sha1)

    def __hash__(self) -> int:
        return hash((self.rel, self.digest))

    def __repr__(self) -> str:
        return f"StoredBody({self.rel!r}, {self.digest!r})"
