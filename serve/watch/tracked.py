"""The file records of one served root, kept in step with the folder by walks and change notices."""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Callable, Iterable
from pathlib import Path

from serve.errors import root_missing
from serve.snapshot.derive import REBUILD_SHARE
from serve.source import okf
from serve.source.layout import FolderView, Layout, detect_layout
from serve.source.page import ParseOptions
from serve.source.reading import read_head
from serve.source.tree import (
    NAME_NOT_UTF8,
    SYMLINK_IGNORED,
    FileStat,
    Walk,
    is_tracked_file,
    shown_name,
    utf8_name,
    walk_dir,
    walk_root,
)
from serve.watch.file_read import CHANGING, ReadJob, decode_text, read_file
from serve.watch.parse_pool import read_all
from serve.watch.records import FileRecord
from serve.watch.signature import SignatureLines


class TrackedFiles:
    """The records of one root's tracked files (read and parsed), its directories, markers and
    ignored entries, and what changed since the last snapshot was made from them
    (serve/watch/mirror.py makes it).

    Not thread-safe by itself: the freshness controller serialises calls."""

    def __init__(self, root: Path, *, max_page_bytes: int, source_profile: str = "auto") -> None:
        self.root = root
        self.source_profile = source_profile
        self.root_str = str(root)
        self.max_page_bytes = max_page_bytes
        self.records: dict[str, FileRecord] = {}
        self.dirs: set[str] = set()
        self.markers: dict[str, int] = {}
        self.ignored: dict[str, str] = {}  # ignored and reported entries (see Walk.ignored)
        self.layout: Layout | None = None
        self.parsed_count = 0  # pages parsed from bytes (not reused) since construction
        self.generation = 0  # bumped whenever anything the projection reads has changed
        self.in_walk_order = False  # records' insertion order is the signature's order
        self._layout_generation = -1  # generation at which self.layout was detected
        # Pages whose content changed since the last projection, or None when anything
        # else changed (files added or removed, config, sidecars): then build anew.
        self.dirty: set[str] | None = None
        # Files added, removed or changed in any way since the last projection, or None when
        # something other than page files changed (config, sidecars, markers): with a set,
        # the next projection is derived page by page (snapshot/derive.py derive_pages).
        self.touched: set[str] | None = None
        self._signature = SignatureLines()
        # Files whose signature lines changed since the signature was last made (None: make
        # them all anew).
        self._line_changes: set[str] | None = None
        # Records still being read (the store's, then an EarlyRead's), taken by the first full
        # scan after its walk, so that walk overlaps the reading; each overrides those before.
        self.pending: list[Callable[[], dict[str, FileRecord]]] = []

    def _structural_change(self, rels: Iterable[str] | None) -> None:
        """Files were added, removed or re-read as other than a content edit (`rels`), or
        something else changed (None)."""
        if self.dirty and self._line_changes is not None:
            self._line_changes.update(self.dirty)  # their lines are patched with the others
        self.dirty = None
        if rels is None:
            self.touched = None
            self._line_changes = None
        else:
            rels = tuple(rels)
            if self.touched is not None:
                self.touched.update(rels)
            if self._line_changes is not None:
                self._line_changes.update(rels)

    # -- scanning -------------------------------------------------------------------

    def full_scan(self, from_store: Callable[[], None] | None = None) -> None:
        """Walk the whole root; reuse records whose stat proves them unchanged. `from_store`
        (a restart's first scan): called once the store's records are taken, when the walk
        finds the folder changed since, before the changes are, unless so much changed that a
        snapshot derived from theirs would be built anew (snapshot/derive.py): with the walk's
        directories, markers and ignored entries standing for those of the store's snapshot
        (the store keeps none)."""
        if not self.root.is_dir():
            raise root_missing(self.root_str)
        walk = walk_root(self.root_str)
        while self.pending:
            self.records = {**self.records, **self.pending.pop(0)()}
        if from_store is not None and self._from_store_pays(walk):
            self.dirs, self.markers = set(walk.dirs), dict(walk.marker_dirs)
            self.ignored, self.in_walk_order = dict(walk.ignored), False
            from_store()
        # Knowing the layout before reading lets each page be parsed as it is read, so a
        # large folder's bytes are never all in memory at once.
        consulted: dict[str, str | None] = {}

        def config_text(rel: str) -> str | None:
            consulted[rel] = text = self._config_text(rel)
            return text

        self.layout = detect_layout(
            FolderView(walk.files.keys(), walk.dirs, walk.marker_dirs.keys(), config_text),
            self.root.name, self.source_profile)
        self._adopt_walk(walk, replace_all=True)
        # The records now hold exactly this walk's files, dirs and markers, so the layout
        # just detected is the one _build would detect from view(), unless a config file
        # detection read now reads differently there (e.g. it changed since its record).
        if all(self._record_text(rel) == text for rel, text in consulted.items()):
            self._layout_generation = self.generation

    def _from_store_pays(self, walk: Walk) -> bool:
        """Whether the walk finds files no record proves (new ones, or a stat that does not
        prove its record: changed, or only too recent to trust), but not so many surely
        changed (new, gone, or another size or mtime) that a snapshot derived from the
        store's would be built anew."""
        records = self.records
        unproved = changed = 0
        for rel, st in walk.files.items():
            record = records.get(rel)
            if record is None or not record.trusted_for(st):
                unproved += 1
                if record is None or (record.stat.size, record.stat.mtime_ns) != (st.size, st.mtime_ns):
                    changed += 1
        changed += sum(1 for rel in records if rel not in walk.files)
        return bool(records) and (unproved > 0 or changed > 0) and changed <= REBUILD_SHARE * len(records)

    def rescan_dirs(self, rel_dirs: Iterable[str]) -> None:
        """Re-walk the given sub-trees (created, moved or overflowed directories)."""
        for rel_dir in sorted(set(rel_dirs)):
            if rel_dir == "":
                self.full_scan()
                return
            self._forget_subtree(rel_dir)
            base = os.path.join(self.root_str, rel_dir)
            try:
                st = os.lstat(base)
            except OSError:
                continue
            if not stat_mod.S_ISDIR(st.st_mode):
                continue
            walk = Walk(files={}, dirs=[], marker_dirs={})
            walk_dir(self.root_str, rel_dir, walk)
            self._adopt_walk(walk, replace_all=False)

    def _inside_real_dirs(self, rel: str) -> bool:
        """Whether every directory above `rel` is a real (walked, non-symlink) directory, so
        a path cannot reach outside the root through a directory swapped for a symlink."""
        parent = rel.rpartition("/")[0]
        if not parent:
            return True
        if parent not in self.dirs:
            return False
        return os.path.realpath(os.path.join(self.root_str, parent)) == os.path.join(self.root_str, parent)

    def refresh_files(self, rels: Iterable[str], distrust: Callable[[str], bool] | None = None) -> None:
        """Re-read individual files named by change notifications (added, edited, gone); a read
        that `distrust` refuses (asked right after it) is dropped, the file left as it was."""
        for rel in rels:
            path = os.path.join(self.root_str, rel)
            before = self.records.get(rel)
            try:
                st = os.lstat(path) if self._inside_real_dirs(rel) else None
            except OSError:
                st = None
            if not utf8_name(rel):  # never tracked (see walk_dir)
                self._note_ignored(shown_name(rel), NAME_NOT_UTF8, st is not None and is_tracked_file(rel))
                continue
            self._note_ignored(rel, SYMLINK_IGNORED, st is not None and stat_mod.S_ISLNK(st.st_mode))
            if st is None or not stat_mod.S_ISREG(st.st_mode) or not is_tracked_file(rel):
                if self.records.pop(rel, None) is not None:
                    self.generation += 1
                    self._structural_change((rel,))
                continue
            if rel not in self.records:
                self.in_walk_order = False
            fresh = self._read(rel, FileStat.of(st))
            if distrust is not None and distrust(rel):
                continue
            if before is not None and before.digest == fresh.digest and before.page is not None:
                fresh = before._replace(stat=fresh.stat, verified_ns=fresh.verified_ns)
            elif before is None or before.digest != fresh.digest or before.problem != fresh.problem:
                self.generation += 1
                # A changed OKF marker head may switch the adapter: that is no content edit.
                if (before is not None and self.dirty is not None and before.page is not None
                        and fresh.page is not None and before.problem == fresh.problem
                        and before.text == fresh.text):
                    self.dirty.add(rel)  # an existing page's content changed
                    if self.touched is not None:
                        self.touched.add(rel)
                else:
                    self._structural_change((rel,))
            self.records[rel] = fresh

    def _note_ignored(self, rel: str, reason: str, now: bool) -> None:
        """Record or clear one ignored entry after a change notification."""
        if now:
            self.ignored[rel] = reason
        elif self.ignored.get(rel) == reason:
            del self.ignored[rel]

    def _forget_subtree(self, rel_dir: str) -> None:
        prefix = rel_dir + "/"
        gone = [r for r in self.records if r.startswith(prefix)]
        for rel in gone:
            del self.records[rel]
        if gone or rel_dir in self.dirs:
            self.generation += 1
            self._structural_change(gone)
        self.dirs = {d for d in self.dirs if d != rel_dir and not d.startswith(prefix)}
        self.ignored = {rel: why for rel, why in self.ignored.items() if not rel.startswith(prefix)}

    def _adopt_walk(self, walk: Walk, *, replace_all: bool) -> None:
        old = self.records
        changed = False
        touched: set[str] | None = set()
        if replace_all:
            self.records = {}
            self.in_walk_order = True
            new_dirs, new_markers, new_ignored = set(walk.dirs), dict(walk.marker_dirs), dict(walk.ignored)
            gone = old.keys() - walk.files.keys()
            touched = set(gone)
            changed = (new_dirs != self.dirs or new_markers != self.markers
                       or new_ignored != self.ignored or bool(gone))
            if new_markers != self.markers:
                touched = None  # an editor marker: the adapter may switch
            self.dirs, self.markers, self.ignored = new_dirs, new_markers, new_ignored
        else:
            self.in_walk_order = False
            changed = bool(set(walk.dirs) - self.dirs) or bool(walk.ignored.keys() - self.ignored.keys())
            self.dirs.update(walk.dirs)
            self.ignored.update(walk.ignored)
        adopted: dict[str, FileRecord] = {}
        untrusted: list[tuple[str, FileStat]] = []
        for rel, st in walk.files.items():
            record = old.get(rel)
            if record is not None and record.trusted_for(st):
                adopted[rel] = record
            else:
                untrusted.append((rel, st))
        fresh_records = self._read_many(untrusted, old)
        for rel, st in untrusted:
            record = old.get(rel)
            fresh = fresh_records[rel]
            if record is None or fresh.digest != record.digest or fresh.problem != record.problem:
                changed = True
                if touched is not None:
                    touched.add(rel)
            elif record.page is not None:  # same bytes: keep the parsed page
                fresh = record._replace(stat=st, verified_ns=fresh.verified_ns)
            adopted[rel] = fresh
        # Inserted in walk order, re-read files included: after a full walk that order is the
        # signature's, so a file read again (edited, or too recent to trust) must not move.
        for rel in walk.files:
            self.records[rel] = adopted[rel]
        if changed:
            self.generation += 1
            self._structural_change(touched)

    def _record_text(self, rel: str) -> str | None:
        """What view() reads for `rel`."""
        record = self.records.get(rel)
        return record.text if record is not None else None

    def _config_text(self, rel: str) -> str | None:
        record = self.records.get(rel)
        if record is not None and record.text is not None:
            return record.text
        marker = rel == okf.MARKER
        try:
            text = decode_text(read_head(os.path.join(self.root_str, rel),
                                         okf.MARKER_READ_BYTES if marker else 1 << 20))[0]
        except OSError:
            return None
        return okf.marker_head(text) if marker else text

    def _job(self, rel: str, previous: dict[str, FileRecord]) -> ReadJob:
        layout = self.layout
        page_path = layout.page_rel(rel) if layout is not None else None
        options = layout.options if layout is not None else ParseOptions()
        known = previous.get(rel)
        # Same bytes as a record already parsed this way: no need to parse them again.
        reusable = (known is not None and known.page is not None
                    and known.parse_key == (page_path, options))
        role = layout.role_of(page_path) if layout is not None and page_path is not None else "topic"
        return (rel, os.path.join(self.root_str, rel), page_path, options, self.max_page_bytes,
                known.digest if reusable and known is not None else "", role)

    def _read(self, rel: str, st: FileStat) -> FileRecord:
        return self._read_many([(rel, st)], self.records)[rel]

    def _read_many(self, items: list[tuple[str, FileStat]],
                   previous: dict[str, FileRecord]) -> dict[str, FileRecord]:
        """Read (and parse) many files; spread over worker processes when there are many."""
        jobs = [(self._job(rel, previous), st) for rel, st in items]
        out = {}
        for rel, record in read_all(jobs):
            if record.page is not None:
                self.parsed_count += 1
            known = previous.get(rel)
            if record.problem == CHANGING and known is not None:
                # Being written: the last whole version stays until a read sees the file settled.
                record = known._replace(verified_ns=0)
            elif (known is not None and known.page is not None and record.page is None
                    and record.digest == known.digest and not record.skipped):
                record = known._replace(stat=record.stat, verified_ns=record.verified_ns)
            out[rel] = record
        return out

    def view(self) -> FolderView:
        return FolderView(self.records.keys(), self.dirs, self.markers.keys(), self._record_text)

    def detected_layout(self) -> Layout | None:
        """The layout detection sees in the records as they are now."""
        return detect_layout(self.view(), self.root.name, self.source_profile)

    def settle_layout(self) -> None:
        """Detect the layout in the records as they are now, and keep it for the next build."""
        self.layout = self.detected_layout()
        self._layout_generation = self.generation

    def _parsed(self, rel: str, record: FileRecord, page_path: str,
                options: ParseOptions) -> FileRecord:
        """The record with its page parsed for this layout (re-reading bytes if needed)."""
        key = (page_path, options)
        if record.page is not None and record.parse_key == key:
            return record
        # Not parsed for this layout yet (the layout changed): read the bytes again, and
        # use them only if they are still the bytes the record describes.
        result = read_file((rel, os.path.join(self.root_str, rel), page_path, options,
                            self.max_page_bytes, "", self.layout.role_of(page_path)
                            if self.layout is not None else "topic"))
        if result.page is None or result.digest != record.digest:
            return record
        self.parsed_count += 1
        record = record._replace(page=result.page, fragment=result.fragment, parse_key=key,
                                 problem=result.problem)
        self.records[rel] = record
        return record

    def signature(self) -> str:
        changed = self._line_changes
        if changed is not None and self.dirty:
            changed = changed | self.dirty  # content edits: same files, same order, new digests
        markers = [f"{rel}\tdir\t{size}\t" for rel, size in sorted(self.markers.items())]
        base = self._signature.digest(self.records, markers, changed,
                                      in_walk_order=self.in_walk_order)
        self._line_changes = set()
        return okf.signature(base) if self.layout is not None and self.layout.options.okf else base
