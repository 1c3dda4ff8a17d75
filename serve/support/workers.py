"""Forked worker processes for CPU-bound bulk work (parsing, index analysis)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor


def cpu_count() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def die_with_parent(parent: int) -> None:
    """A forked worker holds the parent's pipe ends, so it would wait forever if the
    parent were killed; ask the kernel to end it with the parent."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def fork_pool(workers: int, initializer: Callable[..., None] = die_with_parent,
              *initargs: object) -> ProcessPoolExecutor:
    """A pool of forked workers (they inherit the parent's memory: what they read need not
    be pickled), each started with `initializer(parent pid, *initargs)`."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=initializer, initargs=(os.getpid(), *initargs))
