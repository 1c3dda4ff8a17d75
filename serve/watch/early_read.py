"""A large folder's first read, started in worker processes before the service is imported."""

from __future__ import annotations

from pathlib import Path

import structlog

from serve.source.layout import FolderView, detect_layout
from serve.source.tree import walk_root
from serve.watch.parse_pool import ParseInWorkers, worth_forking
from serve.watch.records import FileRecord
from serve.watch.tracked import TrackedFiles

log = structlog.get_logger("llmwiki.serve.watch.mirror")


class EarlyRead:
    """The first read of a large folder, started before the rest of the service is even
    imported: the workers parse while the parent imports (half a second in which a second
    core would otherwise idle). Its records are offered to the mirror as the restart
    cache's are: each is used only if the file's stat at the mirror's own walk proves it
    unchanged since it was read, so a file edited meanwhile is simply read again."""

    def __init__(self, root: Path, *, max_page_bytes: int, source_profile: str = "auto") -> None:
        self._parsing: ParseInWorkers | None = None
        self._taken: ParseInWorkers | None = None  # being read by records(): its progress counts
        self._failure = ""  # logged by records(): this runs before logging is configured
        try:
            walk = walk_root(str(root))
            if not worth_forking(len(walk.files)):
                return  # small enough to read quickly the ordinary way
            files = TrackedFiles(root, max_page_bytes=max_page_bytes, source_profile=source_profile)
            files.layout = detect_layout(FolderView(walk.files.keys(), walk.dirs,
                                                    walk.marker_dirs.keys(), files._config_text),
                                         root.name, source_profile)
            if files.layout is None:
                return
            self._parsing = ParseInWorkers((files._job(rel, {}), st)
                                           for rel, st in walk.files.items())
        except Exception as exc:  # only a head start: the mirror reads what is missing
            self._failure = type(exc).__name__

    def records(self) -> dict[str, FileRecord]:
        """Wait for the workers; {} when nothing was started or anything failed."""
        parsing, self._parsing = self._parsing, None
        if self._failure:
            log.warning("early_read_failed", error=self._failure)
        if parsing is None:
            return {}
        self._taken = parsing
        try:
            with parsing:
                return dict(parsing.records())
        except Exception as exc:
            log.warning("early_read_failed", error=type(exc).__name__)
            return {}

    @property
    def done(self) -> int:
        """Files read so far by records() (for start-up progress lines)."""
        taken = self._taken
        return taken.done if taken is not None else 0

    def close(self) -> None:
        """Stop the workers without waiting for their results (if not taken already)."""
        parsing, self._parsing = self._parsing, None
        if parsing is not None:
            parsing.cancel()
