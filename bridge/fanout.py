"""Bounded fan-out: run one coroutine per item, at most `limit` at once, results in input order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def fan_out(items: Sequence[T], work: Callable[[T], Awaitable[R]], limit: int, *,
                  start_order: Sequence[int] | None = None) -> list[R]:
    """`work` must turn its own failures into results: an exception here cancels the whole group,
    which is right for bugs and cancellation, not for a source being down. `start_order` (a
    permutation of the item indexes) is the order items take free slots in; the results keep the
    input order whatever it is."""
    semaphore = asyncio.Semaphore(max(1, limit))
    results: dict[int, R] = {}

    async def run(index: int, item: T) -> None:
        async with semaphore:
            results[index] = await work(item)

    order = range(len(items)) if start_order is None else start_order
    if sorted(order) != list(range(len(items))):
        raise ValueError("start_order must be a permutation of the item indexes")
    async with asyncio.TaskGroup() as group:
        for index in order:
            group.create_task(run(index, items[index]))
    return [results[index] for index in range(len(items))]
