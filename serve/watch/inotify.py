"""A minimal Linux inotify binding (ctypes): non-blocking reads of change notifications."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys
import weakref
from dataclasses import dataclass

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

DIR_MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
    | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
)
_HEADER = struct.Struct("iIII")


@dataclass(frozen=True, slots=True)
class Event:
    wd: int
    mask: int
    cookie: int
    name: str


def available() -> bool:
    return sys.platform.startswith("linux") and _libc() is not None


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
        lib.inotify_init1  # noqa: B018 - probe the symbol
    except (OSError, AttributeError):
        return None
    return lib


class Inotify:
    """One inotify instance; raises OSError when the kernel refuses (e.g. watch limit)."""

    def __init__(self) -> None:
        lib = _libc()
        if lib is None:
            raise OSError("inotify is not available")
        self._lib = lib
        fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self.fd: int = fd
        # Instances are limited per user (often 128): give the descriptor back even when
        # an owner forgets to close.
        self._finalizer = weakref.finalize(self, os.close, fd)

    def add_watch(self, path: str, mask: int = DIR_MASK) -> int:
        wd = self._lib.inotify_add_watch(self.fd, os.fsencode(path), ctypes.c_uint32(mask))
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
        return int(wd)

    def rm_watch(self, wd: int) -> None:
        self._lib.inotify_rm_watch(self.fd, wd)

    def read_events(self) -> list[Event]:
        """Every queued event, without blocking; [] when nothing changed."""
        events: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return events
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, cookie, length = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size
                raw = data[offset : offset + length].split(b"\0", 1)[0]
                offset += length
                events.append(Event(wd, mask, cookie, os.fsdecode(raw)))

    def close(self) -> None:
        if self.fd >= 0:
            self._finalizer()
            self.fd = -1
