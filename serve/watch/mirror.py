"""The next snapshot of the served folder, derived from the last one or built anew from the records."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from serve.errors import okf_invalid, root_missing, root_unsupported
from serve.graph.model import Fragment, SidecarFile
from serve.snapshot.derive import derive, derive_pages, with_sidecars
from serve.snapshot.fragments import Fill
from serve.snapshot.projection import FileProblem, Projection
from serve.source import okf
from serve.source.layout import HUB_FILES, Layout
from serve.source.page import Page
from serve.watch.tracked import TrackedFiles

log = structlog.get_logger("llmwiki.serve.watch.mirror")
# Known graph sizes by projection signature (from the restart cache).
CountsFor = Callable[[str], "tuple[int, int] | None"]


def page_sort_key(layout: Layout, path: str) -> tuple[object, ...]:
    parts = tuple(path.split("/"))
    if layout.adapter == "logseq":
        return (0 if parts[0] == "pages" else 1, parts)
    return (0, parts)


class FolderMirror(TrackedFiles):
    """Makes the next snapshot of one root from its tracked files (kept by TrackedFiles):
    derived from the previous one when the change allows, else built anew.

    Not thread-safe by itself: the freshness controller serialises calls."""

    def __init__(self, root: Path, *, source_id: str | None, max_page_bytes: int,
                 source_profile: str = "auto") -> None:
        super().__init__(root, max_page_bytes=max_page_bytes, source_profile=source_profile)
        self.source_id = source_id
        self.fill: Fill | None = None  # the store's fragments of the pages read back from it
        self.reported: set[tuple[str, str]] = set()
        self.derived_count = 0  # projections derived from the previous one (content edits)
        self._page_problems: dict[str, FileProblem] = {}  # page files' problems, by file
        # What layout detection saw at the last projection: .md files, how many per
        # directory, and the directories (a change there may change the folder's shape).
        self._md_files: set[str] = set()
        self._md_dirs: dict[str, int] = {}
        self._dirs_seen: frozenset[str] = frozenset()

    def project(self, previous: Projection | None = None,
                counts_for: CountsFor | None = None) -> Projection:
        """The next immutable projection: derived from `previous` when only the content of
        existing pages changed (cost independent of the folder size), else built anew
        (with its graph's size from `counts_for` when known)."""
        if not self.root.is_dir():
            raise root_missing(self.root_str)
        derived = None
        if previous is not None and self.dirty is not None and self.layout is previous.layout:
            derived = self._derive(previous, self.layout)
        if derived is None and previous is not None and self.touched is not None:
            derived = self._derive_pages(previous)
        if derived is not None:
            self.dirty, self.touched = set(), set()
            self.derived_count += 1
            return derived
        projection = self._build(counts_for)
        self.dirty, self.touched = set(), set()
        return projection

    def _derive(self, previous: Projection, layout: Layout) -> Projection | None:
        assert self.dirty is not None
        replaced: list[tuple[Page, Fragment]] = []
        for rel in self.dirty:
            record = self.records.get(rel)
            page_path = layout.page_rel(rel)
            if record is None or page_path is None:
                return None
            record = self._parsed(rel, record, page_path, layout.options)
            if record.page is None or record.fragment is None or okf.invalid_reason(record.page):
                return None
            replaced.append((record.page, record.fragment))
        # Content-only changes keep each file's problem status, so diagnostics carry over.
        return derive(previous, replaced, self.signature(), previous.diagnostics)

    def _derive_pages(self, previous: Projection) -> Projection | None:
        """The next snapshot from `previous` when only page files or the sidecar files were
        added, removed or changed (self.touched), or None when it must be built anew."""
        assert self.touched is not None
        layout = previous.layout
        shape = self._shape_after(self.touched)
        if shape is None and self.detected_layout() != layout:
            return None  # the new files change the folder's shape
        gone: list[str] = []
        added: list[tuple[Page, Fragment]] = []
        sidecar_rels = self._sidecar_rels(layout)
        sidecars_changed = False
        for rel in self.touched:
            if rel in sidecar_rels:
                sidecars_changed = True
                continue
            page_path = layout.page_rel(rel)
            if page_path is None:
                return None  # not a page file: a config, build anew
            if page_path in previous.position:
                gone.append(page_path)
            self._page_problems.pop(rel, None)
            record = self.records.get(rel)
            if record is None:
                continue
            if record.skipped:
                self._page_problems[rel] = FileProblem(rel, record.problem, True)
                continue
            record = self._parsed(rel, record, page_path, layout.options)
            if record.page is None or record.fragment is None:
                self._page_problems[rel] = FileProblem(rel, record.problem or "unreadable", True)
                continue
            if layout.options.okf and okf.invalid_reason(record.page):
                return None  # the build names the invalid page
            if record.page.degraded:
                self._page_problems[rel] = FileProblem(rel, record.page.degraded, False)
            added.append((record.page, record.fragment))
        raw_labels = self._raw_labels(layout)
        if sidecars_changed and raw_labels != list(previous.raw_labels):
            return None  # with_sidecars keeps the labels
        signature, diagnostics = self.signature(), self._diagnostics()
        derived: Projection | None = previous
        if gone or added or not sidecars_changed:
            derived = derive_pages(previous, gone, added, signature, diagnostics, raw_labels,
                                   lambda path: page_sort_key(layout, path))
        if derived is not None and sidecars_changed:
            derived = with_sidecars(derived, self._sidecars(layout), signature, diagnostics)
        if derived is not None:
            self.layout = layout
            self._layout_generation = self.generation
            if shape is None:
                self._seen_shape()
            else:
                self._md_files, self._md_dirs = shape
        return derived

    def _shape_after(self, rels: Iterable[str]) -> tuple[set[str], dict[str, int]] | None:
        """The .md files and their count per directory once `rels` changed, when that
        cannot change what layout detection sees (no hub or config file, no directory
        gaining its first .md file or losing its last, the same directories); else None."""
        if self.dirs != self._dirs_seen:
            return None
        files, counts = set(self._md_files), dict(self._md_dirs)
        # Files that came first, so a rename within a directory never empties it on the way.
        for rel in sorted(rels, key=lambda rel: rel not in self.records):
            head, _, name = rel.rpartition("/")
            if not rel.endswith(".md") or name.lower() in HUB_FILES:
                return None
            was, now = rel in files, rel in self.records
            if was == now:
                continue
            if now:
                files.add(rel)
                counts[head] = counts.get(head, 0) + 1
                if counts[head] == 1:
                    return None
            else:
                files.discard(rel)
                counts[head] -= 1
                if not counts[head]:
                    return None
        return files, counts

    def _seen_shape(self) -> None:
        """Remember what layout detection saw (after a detection over every file)."""
        self._md_files = {rel for rel in self.records if rel.endswith(".md")}
        self._md_dirs = {}
        for rel in self._md_files:
            head = rel.rpartition("/")[0]
            self._md_dirs[head] = self._md_dirs.get(head, 0) + 1
        self._dirs_seen = frozenset(self.dirs)

    def _diagnostics(self) -> list[FileProblem]:
        """Page files' problems by file, then the ignored entries; each logged once."""
        diagnostics = [self._page_problems[rel] for rel in sorted(self._page_problems)]
        diagnostics += [FileProblem(rel, reason, True) for rel, reason in sorted(self.ignored.items())]
        self._report(diagnostics)
        return diagnostics

    def _raw_labels(self, layout: Layout) -> list[str]:
        page_root = layout.page_root
        return [label for label in ("raw", "sources")
                if (f"{page_root}/{label}" if page_root else label) in self.dirs]

    def modified_of(self, layout: Layout) -> Callable[[Page], float | None]:
        """A page file's modification time (epoch seconds) as its record saw it, or None.
        Read without the lock: one dict look-up, and strict freshness has brought the records
        up to the request's snapshot before the request reads them."""
        def modified(page: Page) -> float | None:
            rel = f"{layout.page_root}/{page.path}" if layout.page_root else page.path
            record = self.records.get(rel)
            return None if record is None else record.stat.mtime_ns / 1e9
        return modified

    def _build(self, counts_for: CountsFor | None) -> Projection:
        if self.layout is not None and self._layout_generation == self.generation:
            layout: Layout | None = self.layout
        else:
            layout = self.detected_layout()
        self.layout = layout
        if layout is None:
            raise root_unsupported(self.root_str)
        strict = layout.options.okf
        parsed: list[tuple[Page, Fragment | None]] = []
        problems: dict[str, FileProblem] = {}
        for rel in sorted(self.records):
            record = self.records[rel]
            page_path = layout.page_rel(rel)
            if page_path is None:
                continue
            if record.skipped:
                problems[rel] = FileProblem(rel, record.problem, True)
                continue
            record = self._parsed(rel, record, page_path, layout.options)
            if record.page is None:  # (a page read back from the store has no fragment yet)
                problems[rel] = FileProblem(rel, record.problem or "unreadable", True)
                continue
            if strict and (reason := okf.invalid_reason(record.page)):
                # One invalid document rejects the whole bundle; the first one is named.
                raise okf_invalid(f"{self.root_str}: {reason}")
            if record.page.degraded:
                problems[rel] = FileProblem(rel, record.page.degraded, False)
            parsed.append((record.page, record.fragment))
        self._page_problems = problems
        self._seen_shape()
        diagnostics = self._diagnostics()
        if not parsed:
            if strict:
                raise okf_invalid(f"{self.root_str}: OKF bundle has no serveable markdown pages")
            raise root_unsupported(self.root_str)
        parsed.sort(key=lambda pair: page_sort_key(layout, pair[0].path))
        raw_labels = self._raw_labels(layout)
        signature = self.signature()
        return Projection.build(
            layout=layout,
            pages=[page for page, _ in parsed],
            fragments=[fragment for _, fragment in parsed],
            sidecars=self._sidecars(layout),
            signature=signature,
            root_name=self.root.name,
            source_id=self.source_id,
            raw_labels=raw_labels,
            diagnostics=diagnostics,
            graph_counts=counts_for(signature) if counts_for is not None else None,
            fill=self.fill,
        )

    @staticmethod
    def _sidecar_rels(layout: Layout) -> list[str]:
        """Where this layout's sidecar files (graph/graph.json) may be, root-relative."""
        return list(dict.fromkeys(f"{base}/graph/graph.json" if base else "graph/graph.json"
                                  for base in layout.sidecar_dirs))

    def _sidecars(self, layout: Layout) -> list[SidecarFile]:
        sidecars = []
        for rel in self._sidecar_rels(layout):
            sidecar = self.records.get(rel)
            if sidecar is not None and not sidecar.skipped:
                sidecars.append(SidecarFile(rel, sidecar.sidecar))
        return sidecars

    def _report(self, diagnostics: list[FileProblem]) -> None:
        """Log each problem file once per reason, not on every re-projection."""
        for diag in diagnostics:
            key = (diag.path, diag.reason)
            if key not in self.reported:
                self.reported.add(key)
                log.warning("source_file_problem", file=diag.path, reason=diag.reason,
                            skipped=diag.skipped)
