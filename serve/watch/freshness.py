"""Which snapshot is current: strict per-request freshness at constant cost per request."""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
import threading
import time
from functools import partial
from pathlib import Path
from time import time_ns  # wall clock for mtimes (tests replace the `time` module's clock)
from typing import Protocol

import structlog

from serve.errors import KnowledgeSourceError, WikiRootError, root_missing
from serve.settings import DEFAULT_MAX_PAGE_BYTES
from serve.snapshot.projection import Projection
from serve.source.reading import TooLarge, read_regular
from serve.source.tree import MARKER_DIRS, PAGE_SUFFIXES, is_tracked_file, is_walked_dir
from serve.watch import inotify
from serve.watch.mirror import FolderMirror

# Directory mtimes come from the kernel's coarse clock: allow for its granularity.
DIR_MTIME_SLACK_NS = 50_000_000

WRITE_SETTLE_SECONDS = 2.0
MARKER_LIMIT = 1 << 20  # a producer manifest is small; a larger one counts as absent

log = structlog.get_logger("llmwiki.serve.watch.freshness")


class Restore(Protocol):
    """What the store holds for a restart: its index's snapshot (serve/indexing.py)."""

    def stored_signature(self) -> str:
        """The signature of the snapshot the store's index was made of ("" for none)."""
        ...

    def restore(self, projection: Projection) -> bool:
        """Give `projection`, that snapshot made again, the store's index, link views and
        link index; whether it took them."""
        ...


class Freshness:
    """Keeps the published Projection in step with the folder.

    Strict mode asks the kernel (inotify) what changed since the last request: when
    nothing did, a request costs one stat of the root and one non-blocking read. Only
    the files named by notifications are re-read; everything else is reused. Without
    inotify (other platforms, watch limit reached, queue overflow) it falls back to a
    stat walk, still re-reading only files whose stat changed."""

    def __init__(
        self,
        root: Path,
        *,
        source_id: str | None = None,
        refresh_interval_seconds: float = 0.0,
        producer_manifest: str | None = None,
        max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
        source_profile: str = "auto",
        use_inotify: bool = True,
        known_counts: dict[str, tuple[int, int]] | None = None,
    ) -> None:
        if refresh_interval_seconds < 0:
            raise ValueError("refresh_interval_seconds must be >= 0")
        self.root = root
        self.interval = refresh_interval_seconds
        self.producer_manifest = producer_manifest
        self.mirror = FolderMirror(root, source_id=source_id, max_page_bytes=max_page_bytes,
                                   source_profile=source_profile)
        self.use_inotify = use_inotify and inotify.available()
        self.lock = threading.RLock()
        self.current: Projection | None = None
        self.error: KnowledgeSourceError | None = None
        self.last_check = float("-inf")
        self.root_identity: tuple[int, int] | None = None
        self.watcher: inotify.Inotify | None = None
        self.watches: dict[int, str] = {}
        self.writing: dict[str, float] = {}  # files modified in place and not yet closed, since when
        self.later: list[inotify.Event] = []  # read during a check's file reads: the next check's
        self.modified_later: set[str] = set()  # the files those events say were modified
        self.marker_state: tuple[object, ...] | None = None
        self.known_counts = dict(known_counts or {})
        self.walks = 0  # full walks done (observability and tests)
        self.projections = 0
        self.restore: Restore | None = None  # the store, for the first scan (see _from_store)
        self._restored: tuple[Projection, int] | None = None  # the store's snapshot, and when

    # -- public -----------------------------------------------------------------------

    def snapshot(self, *, refresh: bool = False) -> Projection:
        """The current projection, brought up to date first (per the freshness policy)."""
        with self.lock:
            now = time.monotonic()
            if (not refresh and self.interval > 0 and self.current is not None
                    and now - self.last_check < self.interval):
                return self.current
            self.last_check = now
            self._check(refresh)
            if self.error is not None:
                raise self.error
            assert self.current is not None
            return self.current

    def close(self) -> None:
        with self.lock:
            self._stop_watching()

    @property
    def mode(self) -> str:
        if self.producer_manifest and self._marker_path() is not None:
            return "producer-manifest"
        return "inotify" if self.watcher is not None else "scan"

    # -- checks -----------------------------------------------------------------------

    def _check(self, refresh: bool) -> None:
        identity = self._root_identity()
        if identity is None:
            self._stop_watching()
            self.current = None
            self.error = root_missing(str(self.root))
            self.root_identity = None
            return
        if refresh or identity != self.root_identity or (self.current is None and self.error is None):
            self.root_identity = identity
            self._rebuild_all()
            return
        if self.producer_manifest:
            marker = self._marker_path()
            if marker is not None:
                state = self._marker_state(marker)
                if state == self.marker_state:
                    return
                self.marker_state = state
                self._rescan()
                return
        if self.watcher is not None:
            self._apply_events()
        else:
            self._rescan()

    def _root_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.root)
        except OSError:
            return None
        if not stat_mod.S_ISDIR(st.st_mode):
            return None
        return (st.st_dev, st.st_ino)

    def _rebuild_all(self) -> None:
        self._stop_watching()
        if self.use_inotify:
            self._start_watching()
        self._rescan(force_project=True)
        if self.producer_manifest:
            marker = self._marker_path()
            self.marker_state = self._marker_state(marker) if marker else None

    def _rescan(self, force_project: bool = False) -> None:
        before = self._fingerprint()
        started = time_ns()
        restore, self.restore = self.restore, None  # the first scan's only
        try:
            self.walks += 1
            if restore is not None and self.current is None:
                self.mirror.full_scan(partial(self._from_store, restore))
            else:
                self.mirror.full_scan()
        except WikiRootError as exc:
            self.current, self.error, self._restored = None, exc, None
            return
        if self.watcher is not None:
            # A directory only reports changes once watched: entries made in it while the walk
            # ran, before its watch, would never be seen. Its mtime says whether that can be.
            touched = self._modified_since(self._watch_new_dirs(), started - DIR_MTIME_SLACK_NS)
            if touched:
                self.mirror.rescan_dirs(touched)
        restored, self._restored = self._restored, None
        if restored is not None and restored == (self.current, self._fingerprint()):
            return  # the files read again were as the store had them: its snapshot is current
        if force_project or self._fingerprint() != before or self.current is None:
            self._project()

    def _from_store(self, restore: Restore) -> None:
        """A restart over a folder changed since the store was written (called by the first
        scan with the store's records taken, the changes not yet): when those records are the
        snapshot the store's index was made of, that snapshot is made and given the index,
        link views and link index, and the changes are then derived from it as edits made
        while serving are, rather than every page's index entries and graph worked out anew."""
        mirror = self.mirror
        mirror.settle_layout()  # (an OKF bundle's signature says so)
        if mirror.signature() != restore.stored_signature():
            return
        self._project()
        if self.current is not None and restore.restore(self.current):
            self._restored = (self.current, self._fingerprint())
            log.info("restart_from_store", pages=len(self.current.pages))
        else:
            self.current, self.error = None, None

    def _project(self) -> None:
        try:
            # Graph sizes known from the restart cache go in when the snapshot is made.
            self.current = self.mirror.project(self.current, self.known_counts.get)
            self.error = None
            self.projections += 1
        except KnowledgeSourceError as exc:
            self.current, self.error = None, exc

    def _fingerprint(self) -> int:
        return self.mirror.generation

    # -- producer manifest --------------------------------------------------------------

    def _marker_path(self) -> Path | None:
        """The marker when it is a regular, non-symlink file inside the root, else None."""
        assert self.producer_manifest is not None
        candidate = Path(self.producer_manifest)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            if candidate.is_symlink() or not candidate.is_file():
                return None
            resolved = candidate.resolve()
        except OSError:
            return None
        root = self.root.resolve()
        if root not in resolved.parents:
            return None
        return resolved

    @staticmethod
    def _marker_state(marker: Path) -> tuple[object, ...] | None:
        try:
            st = os.stat(marker)
            digest = hashlib.blake2b(read_regular(str(marker), MARKER_LIMIT), digest_size=16).hexdigest()
        except (OSError, TooLarge):
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino, digest)

    # -- inotify ------------------------------------------------------------------------

    def _start_watching(self) -> None:
        try:
            self.watcher = inotify.Inotify()
        except OSError as exc:
            log.warning("inotify_unavailable", error=exc.strerror or type(exc).__name__)
            self.watcher = None

    def _stop_watching(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
        self.watcher = None
        self.watches = {}
        self.writing = {}
        self.later, self.modified_later = [], set()

    def _modified_since(self, rel_dirs: list[str], since_ns: int) -> list[str]:
        touched = []
        for rel in rel_dirs:
            path = os.path.join(self.mirror.root_str, rel) if rel else self.mirror.root_str
            try:
                if os.stat(path).st_mtime_ns >= since_ns:
                    touched.append(rel)
            except OSError:
                touched.append(rel)  # gone or changed: let the rescan find out
        return touched

    def _watch_new_dirs(self) -> list[str]:
        """Add watches for walked dirs that have none yet; returns the new ones."""
        assert self.watcher is not None
        watched = set(self.watches.values())
        added: list[str] = []
        for rel in sorted(self.mirror.dirs - watched):
            path = os.path.join(self.mirror.root_str, rel) if rel else self.mirror.root_str
            try:
                wd = self.watcher.add_watch(path)
            except OSError as exc:
                if exc.errno in (2, 20):  # gone or not a dir any more: the next walk says so
                    continue
                log.warning("inotify_watch_failed_falling_back_to_scan",
                            error=exc.strerror or type(exc).__name__)
                self._stop_watching()
                return added
            self.watches[wd] = rel
            added.append(rel)
        return added

    def _apply_events(self) -> None:
        assert self.watcher is not None
        events = [*self.later, *self.watcher.read_events()]
        self.later, self.modified_later = [], set()
        if not events and not self.writing:
            return
        now = time.monotonic()
        files: set[str] = set()
        dirs: set[str] = set()
        full = False
        for event in events:
            if event.mask & inotify.IN_Q_OVERFLOW:
                full = True
                continue
            base = self.watches.get(event.wd)
            if base is None:
                continue
            if event.mask & inotify.IN_IGNORED:
                self.watches.pop(event.wd, None)
                continue
            if event.mask & (inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF):
                if base == "":
                    full = True
                continue
            if not event.name:
                continue
            rel = _joined(base, event.name)
            if event.mask & inotify.IN_ISDIR:
                if base == "" and event.name in MARKER_DIRS:
                    full = True  # editor marker created or removed: the adapter may switch
                elif is_walked_dir(rel) and event.mask & (
                    inotify.IN_CREATE | inotify.IN_MOVED_TO | inotify.IN_DELETE | inotify.IN_MOVED_FROM
                ):
                    dirs.add(rel)
                    if event.mask & (inotify.IN_DELETE | inotify.IN_MOVED_FROM):
                        self._unwatch_subtree(rel)
            elif is_tracked_file(rel) or event.name.lower().endswith(PAGE_SUFFIXES):
                files.add(rel)
                if event.mask & inotify.IN_MODIFY and not event.mask & inotify.IN_CLOSE_WRITE:
                    self.writing.setdefault(rel, now)
                else:
                    self.writing.pop(rel, None)
        # A file written in place (modified, not yet closed) keeps its last whole version until
        # its writer closes it, or WRITE_SETTLE_SECONDS pass for a writer that keeps it open.
        for rel, since in list(self.writing.items()):
            if now - since < WRITE_SETTLE_SECONDS:
                files.discard(rel)
            else:
                files.add(rel)
                del self.writing[rel]
        if full:
            self._rebuild_all()
            return
        before = self._fingerprint()
        if dirs:
            self.mirror.rescan_dirs(dirs)
            new = self._watch_new_dirs() if self.watcher is not None else []
            if new:  # files created before their directory's watch existed
                self.mirror.rescan_dirs(new)
        if files:
            self.mirror.refresh_files(files, self._rewritten_while_read)
        if self._fingerprint() != before or self.current is None:
            self._project()

    def _rewritten_while_read(self, rel: str) -> bool:
        """Whether `rel` was modified again after the events that named it were read. A writer
        that reopened it just then (truncated it, wrote part, was preempted) leaves a size and
        times that stay put while it is read, so the read's own check passes; the truncation's
        event is queued by then. Such a read is dropped: the file keeps its last whole version
        until its writer closes it (the event is handled at the next check)."""
        assert self.watcher is not None
        events = self.watcher.read_events()
        self.later += events
        self.modified_later.update(self._event_rel(event) or "" for event in events
                                   if event.mask & inotify.IN_MODIFY)
        return rel in self.modified_later

    def _event_rel(self, event: inotify.Event) -> str | None:
        base = self.watches.get(event.wd)
        if base is None or not event.name:
            return None
        return _joined(base, event.name)

    def _unwatch_subtree(self, rel_dir: str) -> None:
        assert self.watcher is not None
        prefix = rel_dir + "/"
        for wd, rel in list(self.watches.items()):
            if rel == rel_dir or rel.startswith(prefix):
                self.watcher.rm_watch(wd)
                del self.watches[wd]


def _joined(base: str, name: str) -> str:
    """The root-relative path of `name` in the watched directory `base` ("" for the root)."""
    return f"{base}/{name}" if base else name
