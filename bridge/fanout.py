"""Bounded fan-out: run one coroutine per item, at most `limit` at once, results in input order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def fan_out(items: Sequence[T], work: Callable[[T], Awaitable[R]], limit: int) -> list[R]:
    """`work` must turn its own failures into results: an exception here cancels the whole group,
    which is right for bugs and cancellation, not for a source being down."""
    semaphore = asyncio.Semaphore(max(1, limit))
    results: dict[int, R] = {}

    async def run(index: int, item: T) -> None:
        async with semaphore:
            results[index] = await work(item)

    async with asyncio.TaskGroup() as group:
        for index, item in enumerate(items):
            group.create_task(run(index, item))
    return [results[index] for index in range(len(items))]
