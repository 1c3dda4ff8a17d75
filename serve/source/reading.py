"""Reading one file of the served folder without ever blocking or reading more than allowed.

The folder is not ours: any entry can be swapped for a FIFO, a device, a symlink or a sparse
giant between the walk and the read, or be rewritten while we read it."""

from __future__ import annotations

import os
import stat as stat_mod

# Opening a FIFO without O_NONBLOCK waits for a writer, forever; O_NOFOLLOW refuses an entry
# swapped for a symlink after it was listed.
_OPEN_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))
# Reads of a file that keeps changing underneath; after that it counts as changing this time.
READ_ATTEMPTS = 4
_TAIL = 1 << 16  # small: each os.read allocates its whole size first


class NotRegularFile(OSError):
    """The entry is a FIFO, socket, device or directory now, whatever the walk saw."""


class FileChanging(OSError):
    """The file's size or times moved during every read attempt: it is being written."""


class TooLarge(Exception):
    """The file is over the size limit; it was not read."""

    def __init__(self, size: int, mtime_ns: int) -> None:
        super().__init__(size)
        self.size = size
        self.mtime_ns = mtime_ns


def _signature(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def read_regular(path: str, limit: int) -> bytes:
    """The whole content of the regular file at `path`, which must be at most `limit` bytes.

    Raises `TooLarge` (nothing read), `NotRegularFile`, `FileChanging` when no attempt saw the
    same size and times before and after reading, or another `OSError`."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        for _ in range(READ_ATTEMPTS):
            before = os.fstat(fd)
            if not stat_mod.S_ISREG(before.st_mode):
                raise NotRegularFile(path)
            if before.st_size > limit:
                raise TooLarge(before.st_size, before.st_mtime_ns)
            data = _read_from_start(fd, limit)
            if len(data) > limit:
                continue  # grew past the limit while read: the next fstat decides
            after = os.fstat(fd)
            if _signature(after) == _signature(before) and len(data) == after.st_size:
                return data
        raise FileChanging(path)
    finally:
        os.close(fd)


def read_head(path: str, limit: int) -> bytes:
    """At most the first `limit` bytes of the regular file at `path` (a config file's or a
    marker's head); raises `NotRegularFile` or another `OSError`."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(path)
        return os.pread(fd, limit, 0)
    finally:
        os.close(fd)


def _read_from_start(fd: int, limit: int) -> bytes:
    """Up to `limit` + 1 bytes from offset 0: one read of the size fstat reports (plus a byte,
    to see the end) is nearly always the whole file; the loop covers a file that grew."""
    first = os.pread(fd, min(os.fstat(fd).st_size, limit) + 1, 0)
    parts, total = [first], len(first)
    while total <= limit and (more := os.pread(fd, min(_TAIL, limit + 1 - total), total)):
        parts.append(more)
        total += len(more)
    return first if len(parts) == 1 else b"".join(parts)
