"""The search index in the store, used as it is only for the snapshot it was built from.

Its arrays are files in numpy's format beside the store, mapped rather than read
(serve/store/array_files.py), each named with its dtype, shape and sha256 by a row of
`index_arrays`, and so are its terms and the first context pack's backlinks and lookup keys
(string tables: serve/support/string_table.py, graph/link_tables.py); which page holds each
tag or section node is JSON in `index_json`, and `index_meta` names the snapshot (every file's
path, size and digest, and a digest of the page paths in index order). For a later snapshot in
which few pages changed, each document's fingerprint (documents.fingerprints) says which pages
it still stands for; the others are dead, and the changed pages are indexed as edits are.
Every array's shape is checked against the pages, and every file's digest and document ids
beside the start, before use, so a store altered behind our back is a miss, and can never make
a search index out of bounds."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import structlog

from serve.graph.link_tables import DTYPES as TABLE_DTYPES
from serve.graph.link_tables import Backlinks, KeyTable, backlink_arrays, check_tables, key_arrays
from serve.retrieval.documents import fingerprints
from serve.retrieval.index import COMPACT_DEAD_SHARE, LexicalIndex
from serve.retrieval.index_arrays import check_values
from serve.retrieval.pairs import SIGNATURE_BITS
from serve.retrieval.vocabulary import Vocabulary
from serve.source.page import Page
from serve.store.array_files import Row
from serve.store.database import Database, transaction
from serve.store.generations import write_generation
from serve.support.string_table import PARTS, StringTable, check_table, table_arrays

log = structlog.get_logger("llmwiki.serve.store")

INDEX_ARRAYS = ("indptr", "main_docs", "main_tfs", "df_all", "df_approved", "doc_len",
                "pair_columns", "approved", "fingerprints")
ARRAYS = (*INDEX_ARRAYS, *(f"term_{part}" for part in PARTS), *TABLE_DTYPES)
FINGERPRINT_BYTES = 16
DTYPES = frozenset({"int64", "int32", "uint32", "uint16", "uint8", "float32"})


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
        self._written_rows: dict[str, Row] = {}  # its arrays' rows

    def signature(self) -> str:
        """The signature of the snapshot whose index the store holds ("" for none, or a store
        that cannot be read)."""
        try:
            with self.database.connect() as conn, transaction(conn, write=False):
                row = conn.execute("SELECT value FROM index_meta WHERE key = 'signature'").fetchone()
        except sqlite3.Error:
            return ""
        return str(row[0]) if row is not None else ""

    def load(self, signature: str, pages: Sequence[Page],
             position: Mapping[str, int]) -> Loaded | None:
        """The index (and link views) built for the snapshot with this signature and pages, or
        for an earlier one most of whose pages it still holds (no views then, and the pages it
        lacks are to be indexed); None (logged) when there is none, or it is for a snapshot too
        different, or it does not fit."""
        started = time.perf_counter()
        try:
            with self.database.connect() as conn, transaction(conn, write=False):
                loaded = self._decode(conn, signature, pages, position)
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

    def _decode(self, conn: sqlite3.Connection, signature: str, pages: Sequence[Page],
                position: Mapping[str, int]) -> Loaded:
        head = dict(conn.execute("SELECT key, value FROM index_meta"))
        if not head:
            raise _Absent
        exact = all(head.get(k) == v for k, v in _head(signature, pages).items())
        rows: dict[str, Row] = {}
        for name, dtype, shape, file, sha256 in conn.execute(
                "SELECT name, dtype, shape, file, sha256 FROM index_arrays"):
            rows[name] = Row(dtype, json.loads(shape), file, sha256)
            _check(name, dtype, rows[name].shape)
        if set(rows) != set(ARRAYS):
            raise ValueError("the store does not hold every array")
        documents, columns = rows["doc_len"].shape, rows["pair_columns"]
        if len(documents) != 1 or columns.dtype != "uint8" or columns.shape != [
                SIGNATURE_BITS, -(-documents[0] // 8)]:
            raise ValueError("pair_columns does not fit the documents")
        files = self.database.arrays

        def check(arrays: dict[str, np.ndarray]) -> None:
            check_values(arrays)
            check_table(arrays, "term_")
            check_tables(arrays, len(pages))

        checked = files.checked_beside(rows, check)
        arrays = files.mapped(rows)
        owners = json.loads(self._json(conn, "owners")) if exact else None
        checked()
        terms = Vocabulary(StringTable(arrays, "term_"))
        if exact:
            return Loaded(LexicalIndex.restored(pages, terms, arrays),
                          Views.mapped(owners, arrays, pages, position), [])
        return self._reused(pages, terms, arrays)

    @staticmethod
    def _json(conn: sqlite3.Connection, name: str) -> str:
        row = conn.execute("SELECT value FROM index_json WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ValueError(f"the store lacks the index's {name}")
        return str(row[0])

    @staticmethod
    def _reused(pages: Sequence[Page], terms: Vocabulary, arrays: dict[str, np.ndarray]) -> Loaded:
        """The stored index for a later snapshot, when few of its documents died and few pages
        are new to it (else _Stale: a bulk build is quicker than that many edits)."""
        prints = arrays["fingerprints"]
        if prints.shape != (len(arrays["doc_len"]), FINGERPRINT_BYTES):
            raise ValueError("the fingerprints do not fit the documents")
        position = {row: i for i, row in enumerate(fingerprints(pages))}
        kept = [position.get(row, -1) for row in map(bytes, prints)]
        standing = len(kept) - kept.count(-1)
        limit = COMPACT_DEAD_SHARE * max(len(kept), len(pages))
        if not standing or len(kept) - standing > limit or len(pages) - standing > limit:
            raise _Stale
        index = LexicalIndex.reused(pages, terms, arrays, kept)
        covered = set(kept)
        return Loaded(index, None, [page for i, page in enumerate(pages) if i not in covered])

    def write(self, pending: Pending) -> bool:
        """Replace the stored index in one transaction; whether it was written (a failure is
        logged and leaves the previous index in place). A store in memory keeps none: it is
        never read back."""
        if self.database.mode == "memory":
            return False
        pages = pending.pages
        prints = b"".join(fingerprints(pages))
        arrays = {**pending.arrays, "fingerprints": np.frombuffer(prints, dtype=np.uint8).reshape(
            len(pages), FINGERPRINT_BYTES), **table_arrays(pending.terms, "term_"),
            **pending.views.tables(pages)}

        def owners(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM index_json")
            conn.execute("INSERT INTO index_json VALUES (?, ?)", (
                "owners", json.dumps(pending.views.owners, ensure_ascii=False)))

        try:
            rows = write_generation(self.database, self.database.arrays, arrays,
                                    ("index_arrays", "index_meta"),
                                    _head(pending.signature, pages), owners)
        except (sqlite3.Error, UnicodeEncodeError, OSError) as exc:
            log.warning("store_write_failed", part="index", error=type(exc).__name__,
                        reason=str(exc)[:200])
            self.database.failing = True
            return False
        self.database.failing = False
        self.saved_signature = self.written_signature = pending.signature
        self._written_rows = rows
        log.info("index_cache_written", documents=len(pages), terms=len(pending.terms))
        return True

    def share(self, pending: Pending, index: LexicalIndex) -> bool:
        """After write(pending): give `index` the written files, mapped, in place of its own
        main segment and pair signatures, when it is still the build written (LexicalIndex.share);
        whether it took them. Call it under the index lock."""
        if self.written_signature != pending.signature or not self._written_rows:
            return False
        try:
            arrays = self.database.arrays.mapped(self._written_rows)
        except (OSError, ValueError):  # another process wrote the store's index meanwhile
            return False
        return index.share(pending.arrays, arrays)


def _check(name: str, dtype: str, shape: object) -> None:
    if dtype not in DTYPES or not isinstance(shape, list) or not all(
            isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"{name} has an unknown type or shape")


@dataclass(frozen=True, slots=True)
class Loaded:
    """What StoredIndex.load found: the index; the link views when it is the snapshot's own
    (else None); the pages it lacks, to be indexed with LexicalIndex.update."""

    index: LexicalIndex
    views: Views | None
    missing: list[Page]


@dataclass(frozen=True, slots=True)
class Pending:
    """An index (exported() state) and its snapshot's link views, taken for writing."""

    signature: str
    pages: tuple[Page, ...]
    terms: list[str]
    arrays: dict[str, np.ndarray]
    views: Views


@dataclass(frozen=True, slots=True)
class Views:
    """A snapshot's link views (see Projection.incoming, .owners(False) and .lookup)."""

    incoming: Mapping[str, list[int]]
    owners: dict[str, str]
    lookup: Mapping[str, Page]

    def tables(self, pages: Sequence[Page]) -> dict[str, np.ndarray]:
        """The backlinks and lookup as the store keeps them (graph/link_tables.py)."""
        return {**backlink_arrays(self.incoming, pages), **key_arrays(self.lookup, pages)}

    @classmethod
    def mapped(cls, owners: object, arrays: Mapping[str, np.ndarray], pages: Sequence[Page],
               position: Mapping[str, int]) -> Views:
        """The views from the store: the owners' JSON, the tables checked by check_tables;
        ValueError when the owners are not of their shape or name no page."""
        if not isinstance(owners, dict):
            raise ValueError("link views: the owners are not an object")
        if not all(isinstance(nid, str) and owner in position for nid, owner in owners.items()):
            raise ValueError("link views: an owner is not a page")
        return cls(Backlinks(pages, position, arrays["backlink_start"], arrays["backlink_sources"]),
                   owners, KeyTable(pages, arrays))


class _Absent(Exception):
    """The store holds no index yet."""


class _Stale(Exception):
    """The store holds another snapshot's index: expected after any change to the folder."""
