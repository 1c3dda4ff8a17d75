"""The restart cache: parsed pages kept outside the served root, trusted only per file."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import structlog

from common.version import __version__
from serve.folder import FileRecord
from serve.settings import DEFAULT_MAX_PAGE_BYTES

log = structlog.get_logger("llmwiki.serve.cache")

# Bump when parsing changes what a Page holds, so old caches are ignored.
CACHE_FORMAT = 1


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmwiki-serve"


def is_inside(path: Path, root: Path) -> bool:
    path, root = path.resolve(), root.resolve()
    return path == root or root in path.parents


class PageCache:
    """Pickled file records for one root. Each record is re-validated against the file's
    stat (device, inode, size, mtime and ctime) before use, so a stale entry is never
    served: it is simply re-read."""

    def __init__(self, cache_dir: Path, root: Path, *,
                 max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> None:
        if is_inside(cache_dir, root):
            raise ValueError("the page cache directory must be outside the served root")
        key = hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:24]
        self.path = cache_dir / f"pages-{key}.pickle"
        # Settings that change what a parsed record holds are part of the header.
        self.header = (CACHE_FORMAT, __version__, str(root), max_page_bytes)

    def load(self) -> dict[str, FileRecord]:
        try:
            with open(self.path, "rb") as handle:
                header, records = pickle.load(handle)  # noqa: S301 - our own file, user cache dir
        except FileNotFoundError:
            return {}
        except Exception as exc:  # a corrupt or foreign cache is just a miss
            log.warning("page_cache_unreadable", error=type(exc).__name__)
            return {}
        if header != self.header or not isinstance(records, dict):
            return {}
        return records

    def save(self, records: dict[str, FileRecord]) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a cache."""
        keep = {rel: rec for rel, rec in records.items() if not rec.skipped}
        tmp = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".pages-", dir=self.path.parent)
            with os.fdopen(fd, "wb") as handle:
                pickle.dump((self.header, keep), handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
            tmp = None
        except (OSError, pickle.PicklingError) as exc:
            log.warning("page_cache_write_failed", error=type(exc).__name__)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
