"""The restart cache: parsed pages kept outside the served root, trusted only per file."""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

import structlog

from common.version import __version__
from serve.folder import FileRecord
from serve.graph import Fragment
from serve.settings import DEFAULT_MAX_PAGE_BYTES
from serve.source.page import Page, ParseOptions, Section
from serve.source.sidecar import SidecarEdge
from serve.source.tree import FileStat

log = structlog.get_logger("llmwiki.serve.cache")

# Bump when parsing changes what a Page holds, so old caches are ignored.
CACHE_FORMAT = 2
_new = tuple.__new__


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmwiki-serve"


def is_inside(path: Path, root: Path) -> bool:
    path, root = path.resolve(), root.resolve()
    return path == root or root in path.parents


def encode_record(record: FileRecord) -> tuple[Any, ...]:
    """A record as builtin values only (marshal-able: no code runs when it is loaded)."""
    page = record.page
    flat_page = None
    if page is not None:
        flat_page = (*page[:17], tuple(tuple(s) for s in page.sections), *page[18:])
    parse_key = None
    if record.parse_key is not None:
        parse_key = (record.parse_key[0], tuple(record.parse_key[1]))
    # Field order is FileRecord's; decode_record rebuilds it positionally.
    return (
        tuple(record.stat), record.digest, record.verified_ns, flat_page,
        tuple(record.fragment) if record.fragment is not None else None, parse_key,
        record.text, tuple(tuple(e) for e in record.sidecar), record.problem, record.skipped,
    )


def decode_record(raw: tuple[Any, ...]) -> FileRecord:
    stat, digest, verified_ns, flat_page, fragment, parse_key, text, sidecar, problem, skipped = raw
    page = None
    if flat_page is not None:
        sections = tuple(_new(Section, s) for s in flat_page[17])
        page = _new(Page, (*flat_page[:17], sections, *flat_page[18:]))
    return _new(FileRecord, (
        _new(FileStat, stat), digest, verified_ns, page,
        _new(Fragment, fragment) if fragment is not None else None,
        (parse_key[0], _new(ParseOptions, parse_key[1])) if parse_key else None,
        text, tuple(_new(SidecarEdge, e) for e in sidecar), problem, skipped,
    ))


class PageCache:
    """Parsed file records for one root. Each record is re-validated against the file's
    stat (device, inode, size, mtime and ctime) before use, so a stale entry is never
    served: it is simply re-read. Stored with marshal, which loads fast and, unlike
    pickle, cannot run code if someone tampers with the file."""

    def __init__(self, cache_dir: Path, root: Path, *,
                 max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> None:
        if is_inside(cache_dir, root):
            raise ValueError("the page cache directory must be outside the served root")
        key = hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:24]
        self.path = cache_dir / f"pages-{key}.marshal"
        # Settings that change what a parsed record holds are part of the header.
        self.header = (CACHE_FORMAT, __version__, str(root), max_page_bytes,
                       Page._fields, FileRecord._fields)
        # Graph sizes by projection signature: the graph is a function of the folder's
        # content, so an unchanged folder need not count it again on restart.
        self.counts: dict[str, tuple[int, int]] = {}

    def load(self) -> dict[str, FileRecord]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("page_cache_unreadable", error=type(exc).__name__)
            return {}
        try:
            header, entries, counts = marshal.loads(data)
            if header != self.header:
                return {}
            records = {rel: decode_record(raw) for rel, raw in entries}
            self.counts = {str(sig): (int(n), int(e)) for sig, (n, e) in counts.items()}
            return records
        except Exception as exc:  # a corrupt or foreign cache is only a miss
            log.warning("page_cache_unreadable", error=type(exc).__name__)
            return {}

    def save(self, records: dict[str, FileRecord],
             counts: dict[str, tuple[int, int]] | None = None) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a cache."""
        entries = [(rel, encode_record(rec)) for rel, rec in records.items() if not rec.skipped]
        tmp = None
        try:
            payload = marshal.dumps((self.header, entries, counts or {}))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".pages-", dir=self.path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
            os.replace(tmp, self.path)
            tmp = None
        except (OSError, ValueError) as exc:
            log.warning("page_cache_write_failed", error=type(exc).__name__)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
