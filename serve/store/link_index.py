"""The link index in the store, used only for the snapshot it was made of.

Its maps are the tables of serve/graph/index_tables.py, files in numpy's format in a directory
of their own beside the store (serve/store/array_files.py: one generation per write, mapped,
kept by a process that maps it when another replaces it), named by `link_arrays`; `link_meta`
names the snapshot (its signature, a digest of its page paths) and holds the two counts. A
restart of the same snapshot maps them, checked beside the start (every file's sha256, every
offset and entry in range), so that the first page added, deleted or renamed derives the
next index from them instead of building one from every page."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence

import structlog

from serve.graph.index_tables import DTYPES, check_tables, mapped, tables
from serve.graph.links import LinkIndex, Overlay
from serve.source.page import Page
from serve.store.array_files import Row
from serve.store.database import Database, transaction
from serve.store.generations import write_generation
from serve.store.search_index import paths_digest

log = structlog.get_logger("llmwiki.serve.store")

MAPS = ("own", "alias", "linkers", "targets", "refs")


def _head(signature: str, pages: Sequence[Page], source_root: str) -> dict[str, str]:
    return {"signature": signature, "documents": str(len(pages)), "paths": paths_digest(pages),
            "source_root": source_root}


class StoredLinks:
    """The link index of one store."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.saved_signature = ""  # the snapshot whose link index the store holds, once known

    def load(self, signature: str, pages: Sequence[Page], position: Mapping[str, int],
             lookup: Mapping[str, Page], source_root: str) -> LinkIndex | None:
        """The link index of the snapshot with this signature and pages (resolving links by
        `lookup`, the snapshot's), or None (logged) when the store holds another's or its
        tables do not fit."""
        files = self.database.link_arrays
        try:
            with self.database.connect() as conn, transaction(conn, write=False):
                head = dict(conn.execute("SELECT key, value FROM link_meta"))
                rows = {name: Row(dtype, json.loads(shape), file, sha256) for name, dtype, shape, file, sha256
                        in conn.execute("SELECT name, dtype, shape, file, sha256 FROM link_arrays")}
            if not head or any(head.get(k) != v for k, v in _head(signature, pages, source_root).items()):
                return None
            if set(rows) != set(DTYPES) or any(row.dtype != DTYPES[name] for name, row in rows.items()):
                raise ValueError("the store does not hold every link table")
            checked = files.checked_beside(rows, lambda arrays: check_tables(arrays, len(pages)))
            arrays = files.mapped(rows)
            checked()
            maps = {name: Overlay(table) for name, table in mapped(arrays, pages, position).items()}
            index = LinkIndex(lookup, maps["own"], maps["alias"], maps["linkers"], maps["targets"],
                              maps["refs"], int(head["member_nodes"]), int(head["segment_edges"]),
                              source_root)
        except (sqlite3.Error, OSError, ValueError, KeyError, TypeError) as exc:
            # Altered or half-gone: a miss, never served (the index is built when needed).
            log.warning("link_index_rejected", error=type(exc).__name__, reason=str(exc)[:200])
            return None
        self.saved_signature = signature
        log.info("link_index_loaded", documents=len(pages))
        return index

    def save(self, signature: str, pages: Sequence[Page], position: Mapping[str, int],
             links: LinkIndex) -> bool:
        """Replace the stored link index with `links`, the snapshot's with this signature, in
        one transaction; whether it was written (a failure is logged and leaves the store's
        as it was). A store in memory keeps none: it is never read back."""
        if self.database.mode == "memory" or signature == self.saved_signature:
            return False
        try:
            arrays = tables({name: getattr(links, name) for name in MAPS}, pages, position)
        except KeyError as exc:  # not this snapshot's index: a bug, logged, never written
            log.error("link_index_unfit", error=type(exc).__name__)
            return False
        head = {**_head(signature, pages, links.source_root), "member_nodes": str(links.member_nodes),
                "segment_edges": str(links.segment_edges)}
        try:
            write_generation(self.database, self.database.link_arrays, arrays,
                             ("link_arrays", "link_meta"), head)
        except (sqlite3.Error, UnicodeEncodeError, OSError) as exc:
            log.warning("store_write_failed", part="links", error=type(exc).__name__,
                        reason=str(exc)[:200])
            return False
        self.saved_signature = signature
        log.info("link_index_written", documents=len(pages))
        return True
