"""Giving freed heap memory back to the operating system after large one-off builds."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 - glibc only
    except (OSError, AttributeError):
        return None
    return libc


def release_free_memory() -> None:
    """Ask glibc to return free heap pages. Building the index or loading a large folder
    frees hundreds of MB of temporaries that glibc would otherwise keep (tens-of-MB blocks
    land on the heap once its mmap threshold has grown), so the process would stay that
    large. A no-op where malloc_trim is unavailable."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


# mallopt() parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
TRIM_THRESHOLD = 8 << 20


def keep_large_blocks_out_of_the_heap() -> None:
    """Serve every allocation of 1 MB or more with its own mapping, returned to the system when
    freed. By default glibc raises that threshold each time such a block is freed (up to
    32 MB), so the index build's tens-of-MB temporaries end up on the heap, between blocks
    that stay, where neither free() nor malloc_trim gives them back: about 55 MB of a
    20,000-page server's resident memory, and 75 MB of its peak. Fixing the threshold
    also fixes the heap's trim threshold, at 128 KB unless set: 8 MB keeps the heap from
    shrinking and growing on every request. A no-op where mallopt is unavailable."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
