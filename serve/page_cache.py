"""The restart cache: parsed pages kept outside the served root, trusted only per file."""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import tempfile
from pathlib import Path

import structlog

from common.version import __version__
from serve.records import FileRecord, decode_record, encode_record
from serve.settings import DEFAULT_MAX_PAGE_BYTES
from serve.source.page import Page

log = structlog.get_logger("llmwiki.serve.cache")

# Bump when parsing changes what a Page holds, so old caches are ignored.
CACHE_FORMAT = 5  # 5: Page.okf_json, root index.md head kept for OKF detection
SAVE_CHUNK = 500


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmwiki-serve"


def is_inside(path: Path, root: Path) -> bool:
    path, root = path.resolve(), root.resolve()
    return path == root or root in path.parents


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
            # A length-prefixed head, then length-prefixed chunks up to the end of the file.
            view = memoryview(data)
            end = 8 + int.from_bytes(view[:8], "big")
            header, counts = marshal.loads(view[8:end])
            if header != self.header:
                return {}
            records: dict[str, FileRecord] = {}
            while end < len(view):
                start = end + 8
                end = start + int.from_bytes(view[end:start], "big")
                if end > len(view):
                    raise ValueError("truncated")
                for rel, raw in marshal.loads(view[start:end]):
                    records[rel] = decode_record(raw)
            self.counts = {str(sig): (int(n), int(e)) for sig, (n, e) in counts.items()}
            return records
        except Exception as exc:  # a corrupt or foreign cache is only a miss
            log.warning("page_cache_unreadable", error=type(exc).__name__)
            return {}

    def save(self, records: dict[str, FileRecord],
             counts: dict[str, tuple[int, int]] | None = None) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a cache."""
        # Encoded in chunks: marshal holds the GIL for a whole call, and this runs in a
        # thread beside the event loop, which must keep answering meanwhile. Each chunk is
        # written as soon as it is encoded, so the whole cache is never in memory at once.
        items = [(rel, rec) for rel, rec in records.items() if not rec.skipped]
        tmp = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".pages-", dir=self.path.parent)
            with os.fdopen(fd, "wb") as handle:
                head = marshal.dumps((self.header, counts or {}))
                handle.write(len(head).to_bytes(8, "big"))
                handle.write(head)
                for start in range(0, len(items), SAVE_CHUNK):
                    part = items[start : start + SAVE_CHUNK]
                    chunk = marshal.dumps([(rel, encode_record(rec)) for rel, rec in part])
                    handle.write(len(chunk).to_bytes(8, "big"))
                    handle.write(chunk)
            os.replace(tmp, self.path)
            tmp = None
        except (OSError, ValueError) as exc:
            log.warning("page_cache_write_failed", error=type(exc).__name__)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
