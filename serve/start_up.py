"""Start-up that talks: what the loaded folder holds, progress while a long load or index build
runs, and how long it took. The HTTP service logs events (structlog: JSON lines unless stderr
is a terminal); a one-shot command writes short sentences to stderr, and only when it is slow."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog

from serve.errors import KnowledgeSourceError
from serve.service import KnowledgeSource

log = structlog.get_logger("llmwiki.serve")
PROGRESS_SECONDS = 2.0
FIRST_REASONS = 3  # skipped files named in the loaded line, with their reasons


def progress(source: KnowledgeSource) -> dict[str, Any]:
    """What the service is doing now, for a progress line."""
    mirror = source.freshness.mirror
    return {"phase": source.phase, "seconds": round(time.monotonic() - source.started, 1),
            "files_parsed": mirror.parsed_count + source.early_progress(),
            "records_from_cache": len(source.loaded_keys)}


def folder_shape(source: KnowledgeSource) -> dict[str, Any]:
    """The loaded line's fields: the folder's shape, page counts, skipped files (how many, the
    first few with their reasons), what the restart cache supplied and how long it took."""
    mirror = source.freshness.mirror
    try:
        p = source.snapshot()
    except KnowledgeSourceError as exc:
        return {"loaded": False, "code": exc.code}
    skipped = [d for d in p.diagnostics if d.skipped]
    reasons = Counter(d.reason for d in skipped)
    return {
        "root": source.root.name, "adapter": p.layout.adapter, "directories": len(mirror.dirs),
        "files": len(mirror.records), "pages": p.page_count,
        "approved_pages": p.approved_page_count, "drafts_or_private": p.page_count - p.approved_page_count,
        "skipped_files": len(skipped), "skipped_reasons": dict(reasons.most_common()),
        "first_skipped": [f"{d.path}: {d.reason}" for d in skipped[:FIRST_REASONS]],
        "degraded_files": len(p.diagnostics) - len(skipped),
        "records_from_cache": len(source.loaded_keys),
        "files_parsed": mirror.parsed_count + source.early_progress(),
        "seconds": round(time.monotonic() - source.started, 3),
    }


class Ticker:
    """Calls `say` every PROGRESS_SECONDS from a daemon thread until stopped."""

    def __init__(self, say: Callable[[], None], interval: float = PROGRESS_SECONDS) -> None:
        self._say, self._interval = say, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="start-up-progress", daemon=True)

    def start(self) -> Ticker:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._say()
            except Exception:  # a progress line is never worth a failure
                return

    def stop(self) -> None:
        self._stop.set()


def service_progress(source: KnowledgeSource) -> Ticker:
    """The HTTP service's progress lines, until the source is ready."""
    def say() -> None:
        if source.phase != "ready":
            log.info("starting", **progress(source))
    return Ticker(say).start()


def one_shot_progress(source: KnowledgeSource, doing: str) -> Ticker:
    """A one-shot command's progress sentences on stderr (none when it is quick)."""
    def say() -> None:
        now = progress(source)
        phase = now["phase"]
        what = (f"reading the folder: {now['files_parsed']} files parsed" if phase == "loading"
                else "building the search index" if not source.indexing.ready else doing)
        sys.stderr.write(f"llmwiki-serve: {what} ({now['seconds']:.0f} s)\n")
        sys.stderr.flush()
    return Ticker(say).start()
