"""Work started in a thread of its own now, its answer waited for later."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def started(call: Callable[[], T], name: str) -> Callable[[], T]:
    """Run `call` in a daemon thread named `name`; what waits for its result (raising what it
    raised). For work that releases the GIL (SQLite, system calls) beside other work."""
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(call())
        except BaseException as exc:  # raised to whoever waits
            done.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done.result
