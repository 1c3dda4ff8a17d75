"""Comparing two runs' answers: the same JSON without what differs from run to run (ids, clocks,
durations), named by the caller."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


def without(value: Any, volatile: Collection[str]) -> Any:
    """`value` with every object key in `volatile` dropped, at any depth."""
    if isinstance(value, dict):
        return {k: without(v, volatile) for k, v in value.items() if k not in volatile}
    if isinstance(value, list):
        return [without(v, volatile) for v in value]
    return value
