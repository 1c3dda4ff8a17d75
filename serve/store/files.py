"""The store's file records: each tracked file's stat and digest, and the page parsed from it."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from serve.graph.model import Fragment, shared_strings
from serve.snapshot.fragments import made
from serve.source import sections
from serve.source.page import KNOWN_AT_START, Page, ParseOptions, StoredPage
from serve.source.sidecar import SidecarEdge
from serve.source.tree import FileStat
from serve.store.bodies import LIST_FIELDS, PAGE_COLUMNS, Bodies, StoredBody
from serve.store.database import Database, transaction
from serve.watch.records import FileRecord

log = structlog.get_logger("llmwiki.serve.store")

# A start reads of each page only what StoredPage holds from the start: its other columns,
# its body and sections (StoredBody finds them) and its graph fragment (fragments()) are read
# when first asked for.
START_COLUMNS = (*KNOWN_AT_START, "text_sha1")
FILE_COLUMNS = ("rel", "size", "mtime_ns", "ctime_ns", "ino", "dev", "digest", "verified_ns",
                "problem", "skipped", "config_text", "parse_path", "parse_options")
WRITE_BATCH = 500  # rows bound per executemany: the event loop's thread gets the GIL between


def _page_row(rel: str, page: Page, fragment: Fragment | None) -> tuple[Any, ...]:
    lists = {name: getattr(page, name) for name in LIST_FIELDS}
    values = [int(page.approved) if name == "approved" else getattr(page, name)
              for name in PAGE_COLUMNS]
    return (rel, *values, json.dumps(lists, ensure_ascii=False),
            json.dumps(fragment or made(page), ensure_ascii=False), page.body_sha1, page.body_z)


def _file_row(rel: str, record: FileRecord) -> tuple[Any, ...]:
    path = options = None
    if record.parse_key is not None:
        path, options = record.parse_key[0], json.dumps(list(record.parse_key[1]))
    st = record.stat
    return (rel, st.size, st.mtime_ns, st.ctime_ns, st.ino, st.dev, record.digest,
            record.verified_ns, record.problem, int(record.skipped), record.text, path, options)


class FileRecords:
    """Reads and writes the file records of one store. A save writes only what changed since
    the records this object last loaded or saved (compared by identity: a record is replaced,
    never changed in place), in one transaction."""

    def __init__(self, database: Database) -> None:
        self.database, self.bodies = database, Bodies(database)
        self._saved: dict[str, FileRecord] = {}
        self._generation = -1  # the database's when _saved was last true of it
        self.counts: dict[str, tuple[int, int]] = {}  # graph sizes by snapshot signature

    @property
    def behind(self) -> bool:
        """Whether the store lost what this object saved (its file was removed, or made anew
        since): the next save writes every record."""
        database = self.database
        return self._generation != database.generation or (
            database.mode == "disk" and not database.path.exists())

    def load(self) -> dict[str, FileRecord]:
        """Every stored record, read in one transaction; {} (logged) when the store is
        damaged, which is then rebuilt."""
        checked: Callable[[], bool] | None = None
        try:
            with self.database.connect() as conn:  # (its schema and identity checked first)
                checked = self.database.check_beside()
                with transaction(conn, write=False):
                    records = self._read(conn)
                    self.counts = {sig: (n, e) for sig, n, e in conn.execute(
                        "SELECT signature, nodes, edges FROM graph_counts")}
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError, IndexError) as exc:
            if checked is not None:
                checked()  # the check ends before the file is removed
            self.database.reset(f"unreadable records ({type(exc).__name__})")
            return self._lost()
        if not checked():
            self.database.reset("damaged")
            return self._lost()
        self._saved = dict(records)
        self._generation = self.database.generation
        return records

    def _lost(self) -> dict[str, FileRecord]:
        self.counts = {}
        return {}

    def fragments(self, pages: Sequence[Page]) -> list[Fragment | None]:
        """The stored graph fragments of pages read back from this store, one pass over its
        rows (snapshot.fragments.Fill); None for a page whose row is now of other content, or
        that was not read from the store, or when the store cannot be read."""
        wanted: dict[str, str] = {}
        for page in pages:
            body = page.text_z
            if isinstance(body, StoredBody) and body.bodies is self.bodies:
                wanted[body.rel] = body.digest
        found: dict[str, Fragment] = {}
        try:
            with self.database.reading() as conn:
                for rel, digest, data in conn.execute(
                        "SELECT p.rel, f.digest, p.fragment FROM pages p JOIN files f ON f.rel = p.rel"):
                    if wanted.get(rel) == digest:
                        found[rel] = Fragment(*map(tuple, json.loads(data)))
        except (sqlite3.Error, ValueError, TypeError) as exc:
            log.warning("store_read_failed", part="fragments", error=type(exc).__name__,
                        reason=str(exc)[:200])
            return [None] * len(pages)
        out: list[Fragment | None] = []
        for page in pages:
            body = page.text_z
            fragment = found.get(body.rel) if isinstance(body, StoredBody) else None
            out.append(shared_strings(fragment) if fragment is not None else None)
        return out

    def _read(self, conn: sqlite3.Connection) -> dict[str, FileRecord]:
        """One pass over the files, with their pages' columns but not their bodies."""
        edges: dict[str, list[SidecarEdge]] = defaultdict(list)
        for rel, source, target, kind, confidence in conn.execute(
                "SELECT rel, source, target, type, confidence FROM sidecar_edges "
                "ORDER BY rel, position"):
            edges[rel].append(SidecarEdge(source, target, kind, confidence))
        options: dict[str, ParseOptions] = {}  # one object per distinct value
        records: dict[str, FileRecord] = {}
        files = ", ".join(f"f.{name}" for name in FILE_COLUMNS)
        pages = ", ".join(f"p.{name}" for name in START_COLUMNS)
        width = len(FILE_COLUMNS)
        for row in conn.execute(f"SELECT {files}, {pages} FROM files f "
                                "LEFT JOIN pages p ON p.rel = f.rel ORDER BY f.rel"):
            (rel, size, mtime, ctime, ino, dev, digest, verified, problem, skipped, text,
             path, parse) = row[:width]
            page = None
            parse_key = None
            if parse is not None:
                found = options.get(parse)
                if found is None:
                    found = options[parse] = ParseOptions(*json.loads(parse))
                parse_key = (path, found)
            if row[width] is not None and parse_key is not None:
                *known, sha1 = row[width:]
                page = StoredPage(StoredBody(self.bodies, rel, digest, sha1, parse_key), known)
            records[rel] = FileRecord(
                FileStat(size, mtime, ctime, ino, dev), digest, verified, page, None,
                parse_key, text, tuple(edges.get(rel, ())), problem, bool(skipped))
        return records

    def save(self, records: Mapping[str, FileRecord],
             counts: Mapping[str, tuple[int, int]] | None = None) -> bool:
        """Write what changed since the last load or save; whether it was written (a failure,
        a full disk say, is logged and leaves the store as it was)."""
        if self.behind:
            self._saved = {}  # the file was made anew since (removed while serving): write all
        kept = {rel: rec for rel, rec in records.items() if not rec.skipped}
        gone = [rel for rel in self._saved if rel not in kept]
        changed = [(rel, rec) for rel, rec in kept.items() if self._saved.get(rel) is not rec]
        if not gone and not changed and not counts:
            return True
        try:
            with self.database.connect() as conn, transaction(conn):
                # Snapshots may still show the pages whose rows this replaces or drops, and
                # a rewritten page may be one read from the store: their bodies are read
                # first, in this transaction.
                for rel in (*gone, *(rel for rel, _ in changed)):
                    _hold(self._saved.get(rel), conn)
                for _, rec in changed:
                    _hold(rec, conn)
                self._write(conn, gone, changed, counts or {})
        except (sqlite3.Error, UnicodeEncodeError) as exc:
            log.warning("store_write_failed", error=type(exc).__name__, reason=str(exc)[:200])
            self.database.failing = True
            return False
        self._saved = kept
        self._generation = self.database.generation
        self.database.failing = False
        for rel, rec in changed:  # a row written anew with the same content serves again
            body = rec.page.text_z if rec.page is not None else None
            if isinstance(body, StoredBody) and body.rel == rel and body.digest == rec.digest:
                body.release()
        return True

    @staticmethod
    def _write(conn: sqlite3.Connection, gone: list[str], changed: list[tuple[str, FileRecord]],
               counts: Mapping[str, tuple[int, int]]) -> None:
        drop = [(rel,) for rel in gone] + [(rel,) for rel, _ in changed]
        for start in range(0, len(drop), WRITE_BATCH):
            conn.executemany("DELETE FROM files WHERE rel = ?", drop[start:start + WRITE_BATCH])
        columns = ", ".join(("rel", *PAGE_COLUMNS, "lists", "fragment", "text_sha1", "text_z"))
        page_sql = (f"INSERT INTO pages ({columns}) "
                    f"VALUES ({', '.join('?' * (5 + len(PAGE_COLUMNS)))})")
        file_sql = f"INSERT INTO files VALUES ({', '.join('?' * len(FILE_COLUMNS))})"
        for start in range(0, len(changed), WRITE_BATCH):
            batch = changed[start:start + WRITE_BATCH]
            conn.executemany(file_sql, [_file_row(rel, rec) for rel, rec in batch])
            conn.executemany(page_sql, [_page_row(rel, rec.page, rec.fragment)
                                        for rel, rec in batch if rec.page is not None])
            conn.executemany("INSERT INTO sections VALUES (?, ?, ?, ?, ?, ?, ?)", [
                (rel, position, *entry) for rel, rec in batch if rec.page is not None
                for position, entry in enumerate(sections.entries(rec.page.packed_sections))])
            conn.executemany("INSERT INTO sidecar_edges VALUES (?, ?, ?, ?, ?, ?)", [
                (rel, position, *edge) for rel, rec in batch
                for position, edge in enumerate(rec.sidecar)])
        if counts:
            # Sizes of earlier snapshots are of no use to a restart: only the latest is kept.
            conn.execute("DELETE FROM graph_counts")
            conn.executemany("INSERT INTO graph_counts VALUES (?, ?, ?)",
                             [(sig, n, e) for sig, (n, e) in counts.items()])


def _hold(record: FileRecord | None, conn: sqlite3.Connection) -> None:
    page = record.page if record is not None else None
    if isinstance(page, StoredPage):
        page.hold()  # read now: the write below replaces or drops its row
    body = page.text_z if page is not None else None
    if isinstance(body, StoredBody):
        body.hold(conn)

