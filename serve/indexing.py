"""The search index kept in step with the current snapshot, and in the store for the next start."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Literal

import structlog

from serve.retrieval import compaction
from serve.retrieval.filters import Modified
from serve.retrieval.index import BULK_MIN, COMPACT_DEAD_SHARE, LexicalIndex
from serve.retrieval.narrowing import no_modified
from serve.retrieval.search import Searcher
from serve.snapshot import graph
from serve.snapshot.projection import Projection
from serve.store.database import Database
from serve.store.link_index import StoredLinks
from serve.store.search_index import Loaded, Pending, StoredIndex, Views
from serve.support.memory import release_free_memory

log = structlog.get_logger("llmwiki.serve.store")


class IndexKeeper:
    """One folder's search index. It grows in place, so syncing it and reading it must not
    interleave: every use holds `lock` (the start-up warm-up and literal scans run in worker
    threads). `stored` is the store's copy, tried once at the first sync; `links` the
    store's link index, taken with the link views."""

    def __init__(self, store: Database | None) -> None:
        self.stored = StoredIndex(store) if store is not None else None
        self.links = StoredLinks(store) if store is not None else None
        self.index = LexicalIndex()
        self.lock = threading.Lock()
        self.indexed: Projection | None = None  # the snapshot the index was last synced to
        self.builds = 0  # full builds, and the last one's duration (for /metrics)
        self.build_seconds = 0.0
        self.origin: Literal["cache", "built", ""] = ""
        self._stored_tried = False
        self._restored: Projection | None = None  # the snapshot whose index the store held

    @property
    def ready(self) -> bool:
        """Whether the index has been built once (later syncs are quick)."""
        return self.indexed is not None

    def lags(self, projection: Projection) -> bool:
        """Whether a search of `projection` would first sync the whole index (or build it):
        after a checkout or a recompiled wiki, seconds of work that must not hold the event
        loop."""
        indexed = self.indexed
        return indexed is None or _edits_since(indexed, projection) is None

    def searcher(self, projection: Projection, modified: Modified = no_modified) -> Searcher:
        """A searcher over `projection`, with the index brought up to it (`modified`: a page
        file's modification time, for date filters)."""
        with self.lock:
            self._sync(projection)
            self.indexed = projection
        return Searcher(projection, self.index, self.lock, modified)

    def stored_signature(self) -> str:
        """The signature of the snapshot whose index the store holds ("" for none)."""
        return self.stored.signature() if self.stored is not None else ""

    def restore(self, projection: Projection) -> bool:
        """Take the store's index, link views and link index for `projection`, the snapshot
        they were made of, before anything else is indexed (a restart whose folder changed
        meanwhile derives the changes from it); whether it did."""
        if self.stored is None or self.indexed is not None:
            return False
        with self.lock:
            stored = self.stored.load(projection.signature, projection.pages, projection.position)
            if stored is None or stored.views is None:
                return False
            self._stored_tried = True
            self._take(stored, projection)
            self.indexed = projection
        self._adopt_links(projection)  # what derives the changes' graph
        return True

    def _take(self, stored: Loaded, projection: Projection) -> None:
        """Take the store's index for `projection` (under the lock; the caller publishes it),
        with the link views when it is the snapshot's own, and the pages changed since indexed."""
        self.index, views = stored.index, stored.views
        if views is not None:
            projection.adopt_link_views(views.incoming, views.owners, views.lookup)
        self.index.update(stored.missing)
        self.origin = "cache"

    def warm(self, projection: Projection) -> None:
        """Sync (or load) the index and the link views the first context pack needs, and keep
        a bulk-built index in the store, all before the index is published (a search meanwhile
        waits for it): the index then reads the store's files in place of its own arrays
        before any request can see it."""
        with self.lock:
            self._sync(projection)
            if graph.built_links(projection) is None:  # (else context-pack graphs read that)
                len(projection.incoming)  # the link index behind context-pack graphs
                len(projection.owners(False))
            len(projection.approved_position)  # what the first edit's snapshot needs
            len(projection.facts)
            pending = self._pending(projection)
            if pending is not None:
                self._write(pending, contextlib.nullcontext())
                del pending
            self.indexed = projection
        release_free_memory()

    def save(self) -> None:
        """Keep the index of the snapshot it serves in the store: a bulk build as it is, one
        kept up by edits (a restart over a folder changed meanwhile, or a session's edits at
        shutdown) laid out as a bulk build first, off the lock (compaction.py); then the
        snapshot's link index (see _save_links). After a restart, the first save (after the
        warm-up: the first answer does not wait for it) reads the link index of the
        restart's snapshot."""
        restored, self._restored = self._restored, None
        if restored is not None:
            self._adopt_links(restored)
        state = None
        with self.lock:
            indexed = self.indexed
            pending = self._pending(indexed) if indexed is not None else None
            if pending is None and indexed is not None and self._compactable(indexed):
                state = compaction.frozen(self.index)
        if state is not None and indexed is not None:
            pending = self._compacted(indexed, state)
            del state
        if pending is not None:
            self._write(pending, self.lock)
            del pending
        if indexed is not None:
            self._save_links(indexed)

    def _adopt_links(self, projection: Projection) -> None:
        if self.links is not None:
            found = self.links.load(projection.signature, projection.pages, projection.position,
                                    projection.lookup, graph.source_root(projection))
            if found is not None:
                graph.adopt_links(projection, found)

    def _save_links(self, projection: Projection) -> None:
        """Keep the link index of `projection` beside its index in the store (a restart takes
        it with the link views), so that a restart's first added, deleted or renamed page
        derives the next one from it. Made here when every fragment is in memory (a start
        that parsed the folder); else only one made already is kept (reading every fragment
        back from the store would hold them all in memory)."""
        if (self.links is None or self.stored is None or projection.signature == self.links.saved_signature
                or projection.signature != self.stored.saved_signature):
            return
        links = graph.built_links(projection)
        if links is not None:
            self.links.save(projection.signature, projection.pages, projection.position, links)
        elif projection.fragments.missing == 0 and self.links.save(
                projection.signature, projection.pages, projection.position, graph.new_links(projection)):
            # Built for the store and let go: the snapshot takes the store's mapped tables,
            # which hold no object per key (30 MB less at 20,000 pages than the index built).
            self._adopt_links(projection)

    def _sync(self, projection: Projection) -> None:
        """Bring the index up to `projection` (under the lock): from the store the first time,
        else in bulk or by the pages that changed; the caller publishes it."""
        indexed = self.indexed
        if indexed is None and not self._stored_tried:
            self._stored_tried = True  # one try: later snapshots differ from the stored one
            stored = (self.stored.load(projection.signature, projection.pages, projection.position)
                      if self.stored is not None else None)
            if stored is not None:
                self._take(stored, projection)
                if stored.views is not None:  # the snapshot's own: its link index is read
                    self._restored = projection  # after the warm-up
                indexed = projection
        if indexed is projection:
            return
        changed = _edits_since(indexed, projection) if indexed is not None else None
        if changed is None:
            started = time.perf_counter()
            self.index.sync(projection.pages)
            self.build_seconds = time.perf_counter() - started
            self.builds += 1
            self.origin = self.origin or "built"
        else:  # a few pages changed, came or went: only they are looked at
            pages, position = projection.pages, projection.position
            self.index.remove([path for path in changed if path not in position])
            self.index.update([pages[position[path]] for path in sorted(changed)
                               if path in position])

    def _pending(self, indexed: Projection) -> Pending | None:
        """What the store's write needs of the index of `indexed` when it is a bulk build of
        its pages the store lacks (under the lock: exported() copies only what edits change in
        place), or None."""
        if (self.stored is None or indexed.signature == self.stored.saved_signature
                or not self.index.is_bulk_of(indexed.pages)):
            return None
        terms, arrays = self.index.exported()
        return Pending(indexed.signature, tuple(indexed.pages), terms, arrays, _views(indexed))

    def _compactable(self, indexed: Projection) -> bool:
        """Whether to lay out the index of `indexed` (under the lock, not a bulk build) for the
        store: a folder of a bulk build's size whose link views are at hand (a restart's warm-up
        makes them, a link index gives them), and a store that keeps what it is given."""
        return (self.stored is not None and self.stored.database.mode != "memory"
                and indexed.signature != self.stored.saved_signature
                and len(indexed.pages) > BULK_MIN and graph.link_views_at_hand(indexed))

    @staticmethod
    def _compacted(indexed: Projection, state: compaction.Frozen) -> Pending | None:
        try:
            terms, arrays = compaction.compacted(state, indexed.pages, indexed.position)
        except ValueError as exc:  # a bug: logged, and the store keeps what it has
            log.error("index_compaction_failed", reason=str(exc)[:200])
            return None
        return Pending(indexed.signature, tuple(indexed.pages), terms, arrays, _views(indexed))

    def _write(self, pending: Pending, lock: contextlib.AbstractContextManager[object]) -> None:
        """Write the index to the store, then let the index read the written files in place of
        its own arrays (StoredIndex.share) under `lock`: the index lock, or nothing for a
        caller holding it already."""
        assert self.stored is not None
        if self.stored.write(pending):
            with lock:
                self.stored.share(pending, self.index)
        del pending
        release_free_memory()


def _views(indexed: Projection) -> Views:
    return Views(*graph.link_views(indexed))


def _edits_since(indexed: Projection, projection: Projection) -> set[str] | None:
    """The paths whose pages to edit into an index synced to `indexed` to bring it up to
    `projection`, or None when it is synced whole: `projection` is not derived from it, or so
    many pages changed (a checkout, a recompiled wiki) that sync's rebuild in bulk is quicker
    than editing them in one by one."""
    changed = projection.changed_since(indexed)
    if changed is None or len(changed) > COMPACT_DEAD_SHARE * len(projection.pages):
        return None
    return changed
