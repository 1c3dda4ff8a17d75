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
