"""The bridge's one timestamp form: UTC, milliseconds, `Z`."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def elapsed_ms(started: float) -> int:
    """Whole milliseconds since `started` (a `time.perf_counter()` reading)."""
    return round((time.perf_counter() - started) * 1000)
