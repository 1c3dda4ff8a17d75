"""Writes killed part-way: a forked child that dies by SIGKILL at a chosen step."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Callable

from serve.store.database import Database


class Steps:
    """Counts the steps of a write (each SQL statement on a traced connection, and whatever
    else calls step()) and kills this process (SIGKILL) at the `at`-th."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.count = 0

    def step(self, *_: object) -> None:
        self.count += 1
        if self.count == self.at:
            os.kill(os.getpid(), signal.SIGKILL)

    def trace_store(self) -> None:
        """Count every statement of the store's connections opened from now on."""
        real = Database._connect_file

        def traced(database: Database) -> sqlite3.Connection:
            conn = real(database)
            conn.set_trace_callback(self.step)
            return conn

        Database._connect_file = traced  # type: ignore[method-assign]


def killed_in_child(run: Callable[[], bool]) -> bool:
    """run() in a forked child (no pytest clean-up, no exit handlers there); whether it was
    killed by SIGKILL (False: it ended first, and returned True)."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if run() else 3)
        finally:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0
    return False
