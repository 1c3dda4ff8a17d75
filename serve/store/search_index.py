"""The search index in the store, used as it is only for the snapshot it was built from.

Its arrays are rows of `index_arrays` (numpy's dtype and shape in columns, the bytes as a
BLOB written through SQLite's incremental blob I/O, so no second copy is made), the terms and
the first context pack's link views are JSON in `index_json`, and `index_meta` names the
snapshot (every file's path, size and digest, and a digest of the page paths in index order).
The pair signatures, which only literal search reads, stay in the store until a literal search
first needs them. For a later snapshot in which few pages changed, each document's fingerprint
(documents.fingerprint) says which pages it still stands for; the others are dead, and the
changed pages are indexed as edits are. Every array is checked against the pages before use
(LexicalIndex.restored), so a store altered behind our back can fail a search, never index
out of bounds."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import structlog

from serve.retrieval.documents import fingerprint
from serve.retrieval.index import COMPACT_DEAD_SHARE, LexicalIndex, PairColumns
from serve.retrieval.pairs import SIGNATURE_BITS, PairSignatures, page_signature_columns
from serve.source.page import Page
from serve.store.database import Database, transaction

log = structlog.get_logger("llmwiki.serve.store")

ARRAYS = ("indptr", "main_docs", "main_tfs", "df_all", "df_approved", "doc_len", "pair_columns",
          "approved", "fingerprints")
FINGERPRINT_BYTES = 16
DTYPES = frozenset({"int64", "int32", "uint16", "uint8", "float32"})
BLOB_CHUNK = 1 << 20


def paths_digest(pages: Sequence[Page]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for page in pages:
        digest.update(page.path.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def _head(signature: str, pages: Sequence[Page]) -> dict[str, str]:
    return {"signature": signature, "documents": str(len(pages)), "paths": paths_digest(pages)}


class StoredIndex:
    """The search index of one store."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.saved_signature = ""  # the snapshot whose index the store holds, once known
        self.written_signature = ""  # the snapshot this process last wrote

    def load(self, signature: str, pages: Sequence[Page]) -> Loaded | None:
        """The index (and link views) built for the snapshot with this signature and pages, or
        for an earlier one most of whose pages it still holds (no views then, and the pages it
        lacks are to be indexed); None (logged) when there is none, or it is for a snapshot too
        different, or it does not fit."""
        started = time.perf_counter()
        try:
            with self.database.connect() as conn, transaction(conn, write=False):
                loaded = self._decode(conn, signature, pages)
        except _Absent:
            return None
        except _Stale:
            log.info("index_cache_stale")
            return None
        except sqlite3.DatabaseError as exc:
            self.database.reset(f"unreadable index ({type(exc).__name__})")
            return None
        except Exception as exc:  # altered: a miss, never served
            log.warning("index_cache_rejected", error=type(exc).__name__, reason=str(exc)[:200])
            return None
        seconds = round(time.perf_counter() - started, 3)
        if loaded.views is not None:
            self.saved_signature = signature
            log.info("index_cache_loaded", documents=len(pages), terms=len(loaded.index.vocab),
                     seconds=seconds)
        else:
            log.info("index_cache_reused", documents=len(pages), kept=loaded.index.n_all,
                     dead=loaded.index.dead, to_index=len(loaded.missing), seconds=seconds)
        return loaded

    def _decode(self, conn: sqlite3.Connection, signature: str, pages: Sequence[Page]) -> Loaded:
        head = dict(conn.execute("SELECT key, value FROM index_meta"))
        if not head:
            raise _Absent
        exact = all(head.get(k) == v for k, v in _head(signature, pages).items())
        shapes: dict[str, tuple[str, list[int]]] = {}
        for name, dtype, shape in conn.execute("SELECT name, dtype, shape FROM index_arrays"):
            shapes[name] = (dtype, json.loads(shape))
        if set(shapes) != set(ARRAYS):
            raise ValueError("the store does not hold every array")
        arrays: dict[str, np.ndarray] = {}
        for name, data in conn.execute(
                "SELECT name, data FROM index_arrays WHERE name != 'pair_columns'"):
            dtype, shape = shapes[name]
            _check(name, dtype, shape)
            # A bytearray: the array is writable, as the index's edits need.
            arrays[name] = np.frombuffer(bytearray(data), dtype=np.dtype(dtype)).reshape(shape)
        dtype, shape = shapes["pair_columns"]
        _check("pair_columns", dtype, shape)
        if dtype != "uint8" or shape != [SIGNATURE_BITS, -(-len(arrays["doc_len"]) // 8)]:
            raise ValueError("pair_columns does not fit the documents")
        terms = json.loads(self._json(conn, "terms"))
        if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
            raise ValueError("the terms are not a list of strings")
        columns = self._pair_columns(head["signature"], math.prod(shape))
        if exact:
            views = Views.decoded(json.loads(self._json(conn, "views")), pages)
            return Loaded(LexicalIndex.restored(pages, terms, arrays, columns), views, [])
        return self._reused(pages, terms, arrays, columns)

    @staticmethod
    def _json(conn: sqlite3.Connection, name: str) -> str:
        row = conn.execute("SELECT value FROM index_json WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ValueError(f"the store lacks the index's {name}")
        return str(row[0])

    def _pair_columns(self, signature: str, size: int) -> PairColumns:
        """What gives the stored pair signatures of the index of `signature` when a literal
        search first needs them: read then, in a transaction that checks the store still holds
        that index; if it no longer does (or they do not fit), they are made again from the
        documents' pages, as a bulk build makes them, and the index is to be written again."""

        def read(documents: Sequence[Page | None]) -> np.ndarray:
            started = time.perf_counter()
            try:
                with self.database.connect() as conn, transaction(conn, write=False):
                    held = conn.execute("SELECT value FROM index_meta WHERE key = 'signature'"
                                        ).fetchone()
                    row = conn.execute("SELECT data FROM index_arrays WHERE name = 'pair_columns'"
                                       ).fetchone()
                if held is None or held[0] != signature or row is None or len(row[0]) != size:
                    raise ValueError("the store holds another index now")
                columns = np.frombuffer(bytearray(row[0]), dtype=np.uint8).reshape(SIGNATURE_BITS, -1)
                log.info("index_cache_signatures_read", bytes=size,
                         seconds=round(time.perf_counter() - started, 3))
                return columns
            except (sqlite3.Error, ValueError) as exc:
                columns = page_signature_columns(documents)
                self.saved_signature = ""
                log.warning("index_cache_signatures_remade", error=type(exc).__name__,
                            reason=str(exc)[:200], documents=len(documents),
                            seconds=round(time.perf_counter() - started, 3))
                return columns

        return read

    @staticmethod
    def _reused(pages: Sequence[Page], terms: list[str], arrays: dict[str, np.ndarray],
                columns: PairColumns) -> Loaded:
        """The stored index for a later snapshot, when few of its documents died and few pages
        are new to it (else _Stale: a bulk build is quicker than that many edits)."""
        prints = arrays["fingerprints"]
        if prints.shape != (len(arrays["doc_len"]), FINGERPRINT_BYTES):
            raise ValueError("the fingerprints do not fit the documents")
        position = {fingerprint(page): i for i, page in enumerate(pages)}
        kept = [position.get(row, -1) for row in map(bytes, prints)]
        standing = len(kept) - kept.count(-1)
        limit = COMPACT_DEAD_SHARE * max(len(kept), len(pages))
        if not standing or len(kept) - standing > limit or len(pages) - standing > limit:
            raise _Stale
        index = LexicalIndex.reused(pages, terms, arrays, kept, columns)
        covered = set(kept)
        return Loaded(index, None, [page for i, page in enumerate(pages) if i not in covered])

    def prepare(self, signature: str, pages: Sequence[Page], index: LexicalIndex,
                views: Views) -> Pending | None:
        """What write() needs for the index of the snapshot with this signature (a bulk build
        of `pages`), or None when the store already holds it. Cheap (exported() copies only
        what edits change in place): a caller may hold the index lock for this alone."""
        if signature == self.saved_signature:
            return None
        terms, arrays = index.exported()
        return Pending(signature, tuple(pages), terms, arrays, views, index.pair_signatures)

    def write(self, pending: Pending) -> bool:
        """Replace the stored index in one transaction; whether it was written (a failure is
        logged and leaves the previous index in place)."""
        pages = pending.pages
        prints = b"".join(map(fingerprint, pages))
        arrays = {**pending.arrays, "fingerprints": np.frombuffer(prints, dtype=np.uint8).reshape(
            len(pages), FINGERPRINT_BYTES)}
        try:
            with self.database.connect() as conn, transaction(conn):
                conn.execute("DELETE FROM index_meta")
                conn.execute("DELETE FROM index_arrays")
                conn.execute("DELETE FROM index_json")
                for name in ARRAYS:
                    _write_array(conn, name, arrays[name])
                conn.executemany("INSERT INTO index_json VALUES (?, ?)", [
                    ("terms", json.dumps(pending.terms, ensure_ascii=False)),
                    ("views", json.dumps(pending.views.encoded(pages), ensure_ascii=False))])
                conn.executemany("INSERT INTO index_meta VALUES (?, ?)",
                                 _head(pending.signature, pages).items())
        except (sqlite3.Error, UnicodeEncodeError) as exc:
            log.warning("store_write_failed", part="index", error=type(exc).__name__,
                        reason=str(exc)[:200])
            self.database.failing = True
            return False
        self.database.failing = False
        self.saved_signature = self.written_signature = pending.signature
        log.info("index_cache_written", documents=len(pages), terms=len(pending.terms))
        return True

    def leave_signatures(self, pending: Pending, index: LexicalIndex) -> bool:
        """After write(pending): let the pair signatures of `index` go from memory, to be read
        back from the store when a literal search first needs them, when it still holds
        exactly the documents written (else they stay, as after edits). Whether they went.
        Call it under the index lock."""
        signatures = index.pair_signatures
        if (self.written_signature != pending.signature
                or signatures is not pending.pair_signatures or not signatures.is_read
                or signatures.count != len(pending.pages) or not index.is_bulk_of(pending.pages)):
            return False
        size = SIGNATURE_BITS * -(-signatures.count // 8)
        index.unread_pair_signatures(self._pair_columns(pending.signature, size))
        return True


def _check(name: str, dtype: str, shape: object) -> None:
    if dtype not in DTYPES or not isinstance(shape, list) or not all(
            isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"{name} has an unknown type or shape")


def _write_array(conn: sqlite3.Connection, name: str, array: np.ndarray) -> None:
    """One array's row, its bytes written into the BLOB from the array's own memory (row by
    row where it is not contiguous: the pair columns are a view of a wider array)."""
    rows = [array] if array.ndim < 2 or array.flags.c_contiguous else list(array)
    size = sum(row.nbytes for row in rows)
    cursor = conn.execute("INSERT INTO index_arrays (name, dtype, shape, data) "
                          "VALUES (?, ?, ?, zeroblob(?))",
                          (name, str(array.dtype), json.dumps(list(array.shape)), size))
    rowid = cursor.lastrowid
    if not size or rowid is None:
        return
    with conn.blobopen("index_arrays", "data", rowid) as blob:
        for part in rows:
            data = np.ascontiguousarray(part).data.cast("B")
            for at in range(0, data.nbytes, BLOB_CHUNK):
                blob.write(data[at:at + BLOB_CHUNK])


@dataclass(frozen=True, slots=True)
class Loaded:
    """What StoredIndex.load found: the index; the link views when it is the snapshot's own
    (else None); the pages it lacks, to be indexed with LexicalIndex.update."""

    index: LexicalIndex
    views: Views | None
    missing: list[Page]


@dataclass(frozen=True, slots=True)
class Pending:
    """An index and its snapshot's link views, taken for writing (see StoredIndex.prepare)."""

    signature: str
    pages: tuple[Page, ...]
    terms: list[str]
    arrays: dict[str, np.ndarray]
    views: Views
    pair_signatures: PairSignatures  # the index's, which leave_signatures may let go


@dataclass(frozen=True, slots=True)
class Views:
    """A snapshot's link views (see Projection.incoming, .owners(False) and .lookup)."""

    incoming: dict[str, list[int]]
    owners: dict[str, str]
    lookup: dict[str, Page]

    def encoded(self, pages: Sequence[Page]) -> dict[str, object]:
        position = {id(page): i for i, page in enumerate(pages)}
        return {"incoming": self.incoming, "owners": self.owners,
                "lookup": {key: position[id(page)] for key, page in self.lookup.items()}}

    @classmethod
    def decoded(cls, data: object, pages: Sequence[Page]) -> Views:
        """The views from encoded() data; ValueError when anything is not of its shape or
        points past the pages."""
        if not isinstance(data, dict):
            raise ValueError("link views: not an object")
        incoming, owners, lookup = data.get("incoming"), data.get("owners"), data.get("lookup")
        if not (isinstance(incoming, dict) and isinstance(owners, dict) and isinstance(lookup, dict)):
            raise ValueError("link views: missing parts")
        n = len(pages)
        paths = {page.path for page in pages}
        for path, positions in incoming.items():
            if path not in paths or not isinstance(positions, list) or not all(
                    type(i) is int and 0 <= i < n for i in positions):
                raise ValueError("link views: an incoming list does not fit the pages")
        if not all(isinstance(nid, str) and owner in paths for nid, owner in owners.items()):
            raise ValueError("link views: an owner is not a page")
        if not all(type(i) is int and 0 <= i < n for i in lookup.values()):
            raise ValueError("link views: a lookup entry does not fit the pages")
        return cls(incoming, owners, {key: pages[i] for key, i in lookup.items()})


class _Absent(Exception):
    """The store holds no index yet."""


class _Stale(Exception):
    """The store holds another snapshot's index: expected after any change to the folder."""
