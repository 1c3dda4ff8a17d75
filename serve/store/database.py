"""Where a root's store lives, its schema, and opening it: a store this build cannot use is
rebuilt, never read."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import structlog

from common.version import __version__
from serve.store.array_files import ArrayFiles
from serve.support.background import started

log = structlog.get_logger("llmwiki.serve.store")

# Bump when the tables change or when parsing changes what a stored page holds: a store of
# another version is dropped and rebuilt from the folder (it is derived, never the truth).
# 2: a page's lists in one JSON column; 3: text_sha1, bodies read per request; 4: the graph
# fragment in its own column, read when first needed; 5: a fragment's dangling link ids;
# 6: the index's arrays in files beside the store (serve/store/array_files.py); 7: the link
# views' backlinks and lookup keys as arrays there too (serve/graph/link_tables.py); 8: a
# file's parse options apart from its page path; 9: the index's terms as a string table there;
# 10: numbers analysed in their normal form too (serve/retrieval/numbers.py); 11: Korean
# words by their morphemes (serve/retrieval/korean.py); 12: the link index's tables
# (serve/store/link_index.py)
SCHEMA_VERSION = 12
# sqlite3's "application_id": a database file of another program is never taken for ours.
APPLICATION_ID = 0x6C6C7731  # "llw1"
BUSY_TIMEOUT_MS = 5000  # another serve process's write in progress: wait, then give up
# Two processes opening a new file at once can each hold a lock the other needs to switch it to
# WAL; SQLite then answers "locked" at once (no wait would end it): the check starts over.
PREPARE_ATTEMPTS = 20
PREPARE_PAUSE_S = 0.02

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files (
    rel TEXT PRIMARY KEY,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL, dev INTEGER NOT NULL,
    digest TEXT NOT NULL, verified_ns INTEGER NOT NULL,
    problem TEXT NOT NULL, skipped INTEGER NOT NULL,
    config_text TEXT,
    parse_path TEXT,  -- a page's path and the options it was parsed with (JSON, shared by
    parse_options TEXT  -- every page of a layout: decoded once per distinct value)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pages (
    rel TEXT NOT NULL UNIQUE REFERENCES files(rel) ON DELETE CASCADE,
    id TEXT NOT NULL, title TEXT NOT NULL, path TEXT NOT NULL, role TEXT NOT NULL,
    summary TEXT NOT NULL, frontmatter_json TEXT NOT NULL,
    review_state TEXT NOT NULL, status TEXT NOT NULL, updated_at TEXT NOT NULL,
    approved INTEGER NOT NULL, line_count INTEGER NOT NULL, body_line INTEGER NOT NULL,
    wiki_title TEXT NOT NULL, description TEXT NOT NULL, degraded TEXT NOT NULL,
    okf_json TEXT NOT NULL,
    -- one JSON object of the page's lists: source_refs, tags, links, headings,
    -- section_lines, aliases
    lists TEXT NOT NULL,
    -- its graph fragment: [member_ids, link_keys, page_keys] (serve.graph.model.Fragment)
    fragment TEXT NOT NULL,
    text_sha1 BLOB NOT NULL,  -- Page.body_sha1: the index's fingerprints, without the body
    text_z BLOB NOT NULL  -- last: a row's large value sits after everything a scan reads
);
CREATE TABLE IF NOT EXISTS sections (
    rel TEXT NOT NULL REFERENCES pages(rel) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    heading TEXT NOT NULL, level INTEGER NOT NULL,
    line_start INTEGER NOT NULL, line_end INTEGER NOT NULL, sha256 BLOB NOT NULL,
    PRIMARY KEY (rel, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sidecar_edges (
    rel TEXT NOT NULL REFERENCES files(rel) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    source TEXT NOT NULL, target TEXT NOT NULL, type TEXT NOT NULL,
    confidence,  -- no type: an integer stays an integer (it is echoed as written)
    PRIMARY KEY (rel, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS graph_counts (
    signature TEXT PRIMARY KEY, nodes INTEGER NOT NULL, edges INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS index_arrays (
    name TEXT PRIMARY KEY, dtype TEXT NOT NULL, shape TEXT NOT NULL,
    file TEXT NOT NULL, sha256 BLOB NOT NULL  -- the array's file (serve/store/array_files.py)
);
CREATE TABLE IF NOT EXISTS index_json (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS link_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS link_arrays (
    name TEXT PRIMARY KEY, dtype TEXT NOT NULL, shape TEXT NOT NULL,
    file TEXT NOT NULL, sha256 BLOB NOT NULL  -- the link index's tables (serve/store/link_index.py)
);
"""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmwiki-serve"


def cache_key(root: Path) -> str:
    """The part of a store's file name that says which root it is for."""
    return hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:24]


def is_inside(path: Path, root: Path) -> bool:
    path, root = path.resolve(), root.resolve()
    return path == root or root in path.parents


def store_path(cache_dir: Path, root: Path) -> Path:
    return cache_dir / f"store-{cache_key(root)}.sqlite3"


class Database:
    """One root's SQLite file, opened per use (a connection per thread and operation: the
    engine, not our code, keeps readers and the writer apart). `identity` is what the store's
    content depends on besides the folder (root, parse limits): a store made under another is
    dropped. When the file cannot be used at all (read-only or full directory), the store lives
    in memory for this process: `mode` says which ("disk" or "memory")."""

    def __init__(self, cache_dir: Path, root: Path, identity: dict[str, str]) -> None:
        if is_inside(cache_dir, root):
            raise ValueError("the store's directory must be outside the served root")
        self.path = store_path(cache_dir, root)
        self.arrays = ArrayFiles(self.path.with_suffix(".arrays"))
        self.link_arrays = ArrayFiles(self.path.with_suffix(".links"))  # serve/store/link_index.py
        self.identity = {"version": __version__, "root": str(root), **identity}
        self.mode = "disk"
        self.failing = False  # the last write failed (a full disk, say): logged, tried again
        self._memory: sqlite3.Connection | None = None  # the fallback's one connection
        self._memory_lock = threading.RLock()
        self._ready = False
        self.generation = 0  # bumped when the file is made anew: kept readers are then dropped
        self._readers = threading.local()

    @property
    def state(self) -> Literal["disk", "memory", "failing"]:
        """Where the store lives now: on disk, in memory, or on a disk its last write failed."""
        if self.mode == "memory":
            return "memory"
        return "failing" if self.failing else "disk"

    def _connect_file(self) -> sqlite3.Connection:
        # Private to the service: the store is trusted for any file whose stat is unchanged.
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never torn
            return conn
        except BaseException:
            conn.close()
            raise

    def _prepare(self) -> None:
        """Make sure the file holds this build's schema and identity, else rebuild it empty.
        A damaged or foreign file is logged and replaced; a directory where nothing can be
        written sends the store to memory. A file another process is creating right now is
        waited for, never taken for a damaged one."""
        for attempt in range(1, PREPARE_ATTEMPTS + 1):
            try:
                self._check_or_create()
                return
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or attempt == PREPARE_ATTEMPTS:
                    self._to_memory(exc)
                    return
                time.sleep(PREPARE_PAUSE_S * attempt)
            except (sqlite3.Error, OSError) as exc:
                self._to_memory(exc)
                return

    def _check_or_create(self) -> None:
        try:
            conn = self._connect_file()
        except sqlite3.OperationalError:
            raise  # cannot be opened at all (permissions, no space): memory
        except sqlite3.DatabaseError:
            reason = "damaged"  # not a database: the engine refused its header
        else:
            try:
                reason = self._unusable(conn)
            finally:
                conn.close()
        if reason:
            if reason != "new":  # a new file may be another process's, being created
                log.warning("store_rebuilt", reason=reason)
                self._remove_files()
            conn = self._connect_file()
            try:
                self._create(conn)
            finally:
                conn.close()

    def _unusable(self, conn: sqlite3.Connection) -> str:
        """Why this file cannot serve as the store ("" when it can, "new" when empty)."""
        try:
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                return "no_wal"
            # One read transaction: another process's creation is seen whole or not at all.
            with transaction(conn, write=False):
                tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
                app = conn.execute("PRAGMA application_id").fetchone()[0]
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if app == 0 and version == 0 and tables == 0:
                    return "new"
                if app != APPLICATION_ID:
                    return "foreign"
                if version != SCHEMA_VERSION:
                    return "older" if version < SCHEMA_VERSION else "newer"
                stored = dict(conn.execute("SELECT key, value FROM meta"))
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise  # another process holds it (creating it, say): _prepare waits
            return "damaged"
        except sqlite3.DatabaseError:
            return "damaged"
        return "" if stored == self.identity else "other_settings"

    def _create(self, conn: sqlite3.Connection) -> None:
        if self._memory is None and self.mode == "disk":
            os.chmod(self.path, 0o600)  # the engine gives its -wal and -shm files the same
        conn.execute("PRAGMA journal_mode = WAL")
        with transaction(conn):
            for statement in filter(str.strip, SCHEMA.split(";")):
                conn.execute(statement)
            # Two processes may create one new store at once: the second's statements find the
            # first's tables, in a transaction that waited for it.
            conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", self.identity.items())
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        self.arrays.remove_all()
        self.link_arrays.remove_all()

    def _to_memory(self, exc: BaseException) -> None:
        log.warning("store_in_memory", reason="the cache directory cannot hold the store",
                    error=type(exc).__name__)
        self.mode = "memory"
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        self._create(conn)
        self._memory = conn

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection to the store, closed (or, in memory, released) after use."""
        if not self._ready or (self._memory is None and not self.path.exists()):
            self._prepare()  # first use, or the file was deleted meanwhile: made anew
            self._ready = True
            self.generation += 1
        if self._memory is not None:
            with self._memory_lock:
                yield self._memory
            return
        conn = self._connect_file()
        try:
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A connection for a request's short reads (page bodies): each thread keeps one,
        opened at its first read rather than at every read, until the file is rebuilt."""
        if self._memory is not None or not self._ready or not self.path.exists():
            with self.connect() as conn:  # (made anew when it was removed)
                yield conn
            return
        kept: tuple[int, sqlite3.Connection] | None = getattr(self._readers, "kept", None)
        if kept is None or kept[0] != self.generation:
            if kept is not None:
                kept[1].close()
            kept = self._readers.kept = (self.generation, self._connect_file())
        yield kept[1]

    def check_beside(self) -> Callable[[], bool]:
        """Start the engine's own check of every page of the file (PRAGMA quick_check) on a
        connection of its own; what says whether it passed. A restart reads its records
        meanwhile (the check runs in SQLite, without the GIL) and serves them only if it did:
        a damaged store is rebuilt, never served."""
        if self._memory is not None:
            return lambda: True

        def check() -> bool:
            try:
                conn = self._connect_file()
                try:
                    return bool(conn.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok")
                finally:
                    conn.close()  # before the answer: nothing of SQLite's is held after it
            except sqlite3.OperationalError as exc:
                return _busy(exc)  # busy: another process writes, which is no damage
            except sqlite3.DatabaseError:
                return False
            except Exception as exc:  # could not check (the read itself went through): logged
                log.warning("store_check_failed", error=type(exc).__name__)
                return True

        return started(check, "store-check")

    def reset(self, reason: str) -> None:
        """Drop a store found damaged while reading it: the next use builds it anew."""
        log.warning("store_rebuilt", reason=reason)
        if self._memory is None:
            self._remove_files()
        self._ready = False
        self.generation += 1


def _busy(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, *, write: bool = True) -> Iterator[None]:
    """One transaction: IMMEDIATE for a writer (it waits for another process's write rather
    than failing half-way), DEFERRED for a reader, whose snapshot then holds to its end.
    Inside another transaction it is part of that one: the outer one ends it."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    else:
        if conn.in_transaction:
            conn.execute("COMMIT")
