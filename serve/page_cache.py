"""The restart cache: parsed pages kept outside the served root, trusted only per file."""

from __future__ import annotations

import contextlib
import hashlib
import io
import marshal
import os
import sys
import tempfile
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from common.version import __version__
from serve.records import FileRecord, decode_record, encode_record
from serve.settings import DEFAULT_MAX_PAGE_BYTES
from serve.source.page import Page

log = structlog.get_logger("llmwiki.serve.cache")

# Bump when parsing changes what a Page holds, so old caches are ignored.
CACHE_FORMAT = 9  # 9: page files holding a NUL byte skipped; 8: SHA-1 section checksums
SAVE_CHUNK = 500
_LENGTH, _SUM = 8, 16  # each section: its length, its checksum, then the payload


def _checksum(*chunks: bytes | bytearray | memoryview) -> bytes:
    """A section's first 16 bytes of SHA-1 (of its chunks, in order): it finds damage (a
    truncated or altered file), not forgery, which nothing in a cache can run anyway; SHA-1
    is hashed in hardware on most CPUs, several times faster than BLAKE2b over the hundred
    megabytes a restart reads."""
    digest = hashlib.sha1(usedforsecurity=False)
    for chunk in chunks:
        digest.update(chunk)
    return digest.digest()[:_SUM]


def section_header(*chunks: memoryview) -> bytes:
    """What goes before a section whose payload is these byte chunks, one after the other: its
    length and checksum (the chunks are then written as they are, copied into nothing)."""
    return sum(chunk.nbytes for chunk in chunks).to_bytes(_LENGTH, "big") + _checksum(*chunks)


def section(payload: bytes) -> bytes:
    return section_header(memoryview(payload)) + payload


@dataclass(frozen=True, slots=True)
class SectionRef:
    """Where a section's payload sits in its file, and the checksum it must have there."""

    offset: int
    length: int
    checksum: bytes

    @classmethod
    def after(cls, offset: int, header: bytes) -> SectionRef:
        """The section whose header (section_header) was written at `offset`."""
        return cls(offset + len(header), int.from_bytes(header[:_LENGTH], "big"), header[_LENGTH:])


def read_sections(handle: io.BufferedReader, unread: Collection[int] = ()) -> Iterator[
        bytearray | SectionRef | None]:
    """Each section's payload in order, None for one whose checksum fails, read from an open
    file one section at a time (never the whole file at once); it ends at the end of the file
    or at a length that runs past it (a truncated file). The sections numbered in `unread`
    (from 0) are skipped unread and their checksum unchecked: a SectionRef stands for each, for
    read_section() to read it later."""
    size = os.fstat(handle.fileno()).st_size
    at = number = 0
    while at + _LENGTH + _SUM <= size:
        header = handle.read(_LENGTH + _SUM)
        ref = SectionRef.after(at, header)
        at = ref.offset + ref.length
        if len(header) < _LENGTH + _SUM or at > size:
            return
        if number in unread:
            handle.seek(at)
            yield ref
        else:
            payload = bytearray(ref.length)
            if handle.readinto(payload) != ref.length:
                return
            yield payload if _checksum(payload) == ref.checksum else None
        number += 1


def read_section(path: Path, ref: SectionRef) -> bytearray:
    """The payload `ref` names in the file at `path`; ValueError when it is not there whole or
    fails its checksum (the file was damaged or replaced since), OSError when it cannot be read."""
    payload = bytearray(ref.length)
    with path.open("rb") as handle:
        handle.seek(ref.offset)
        if handle.readinto(payload) != ref.length:
            raise ValueError("the section is cut short")
    if _checksum(payload) != ref.checksum:
        raise ValueError("the section fails its checksum")
    return payload


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmwiki-serve"


def cache_key(root: Path) -> str:
    """The part of a cache file's name that says which root it is for."""
    return hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:24]


def write_atomically(path: Path, parts: Iterator[bytes | memoryview], prefix: str) -> bool:
    """Write `parts` to a temporary file beside `path` and rename it over `path`, so a crash
    never leaves half a cache; whether it was written (a failure is logged, never raised)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            for part in parts:
                handle.write(part)
        os.replace(tmp, path)
        tmp = None
        return True
    except (OSError, ValueError) as exc:
        log.warning("cache_write_failed", file=path.name, error=type(exc).__name__)
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


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
        self.path = cache_dir / f"pages-{cache_key(root)}.marshal"
        # Settings that change what a parsed record holds are part of the header.
        # marshal's format belongs to the interpreter that wrote it.
        self.header = (CACHE_FORMAT, __version__, sys.implementation.cache_tag, marshal.version,
                       str(root), max_page_bytes, Page._fields, FileRecord._fields)
        # Graph sizes by projection signature: the graph is a function of the folder's
        # content, so an unchanged folder need not count it again on restart.
        self.counts: dict[str, tuple[int, int]] = {}

    def load(self) -> dict[str, FileRecord]:
        try:
            with self.path.open("rb") as handle:
                return self._records(read_sections(handle))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("page_cache_unreadable", error=type(exc).__name__)
            return {}

    def _records(self, parts: Iterator[bytearray | SectionRef | None]) -> dict[str, FileRecord]:
        try:
            head = next(parts, None)
            if not isinstance(head, bytearray):
                raise ValueError("the head fails its checksum")
            header, counts = marshal.loads(head)
            if header != self.header:
                return {}
            self.counts = {str(sig): (int(n), int(e)) for sig, (n, e) in counts.items()}
        except Exception as exc:  # a corrupt or foreign cache is only a miss
            log.warning("page_cache_unreadable", error=type(exc).__name__)
            return {}
        records: dict[str, FileRecord] = {}
        damaged = 0
        for payload in parts:
            try:
                if not isinstance(payload, bytearray):
                    raise ValueError("checksum")
                chunk = [(str(rel), decode_record(raw)) for rel, raw in marshal.loads(payload)]
            except Exception:  # only this chunk's files are read again from the folder
                damaged += 1
                continue
            records.update(chunk)
        if damaged:
            log.warning("page_cache_damaged", chunks=damaged)
        return records

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
                handle.write(section(marshal.dumps((self.header, counts or {}))))
                for start in range(0, len(items), SAVE_CHUNK):
                    part = items[start : start + SAVE_CHUNK]
                    handle.write(section(marshal.dumps([(rel, encode_record(rec)) for rel, rec in part])))
            os.replace(tmp, self.path)
            tmp = None
        except (OSError, ValueError) as exc:
            log.warning("page_cache_write_failed", error=type(exc).__name__)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
