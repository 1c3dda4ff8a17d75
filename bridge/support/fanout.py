"""Bounded fan-out: run one coroutine per item, at most `limit` at once, results in input order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def fan_out(items: Sequence[T], work: Callable[[T], Awaitable[R]], limit: int) -> list[R]:
    """`work` must turn its own failures into results: an exception here cancels the whole group,
    which is right for bugs and cancellation, not for a source being down."""
    semaphore = asyncio.Semaphore(max(1, limit))

    async def run(item: T) -> R:
        async with semaphore:
            return await work(item)

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(run(item)) for item in items]
    return [task.result() for task in tasks]


@contextlib.asynccontextmanager
async def task_group() -> AsyncIterator[asyncio.TaskGroup]:
    """`asyncio.TaskGroup` for one source's concurrent calls: a sibling's failure cancels the rest,
    and a failure of one exception is raised as itself (a `SourceCallError` stays catchable as
    one), not wrapped in an `ExceptionGroup`."""
    error: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failed:
        if len(failed.exceptions) != 1:
            raise
        error = failed.exceptions[0]
        # The group's traceback holds the failed call's frames (and the buffers they read) in a
        # reference cycle; cut it so they go now, not at the next garbage collection.
        failed.__traceback__ = None
    if error is not None:
        raise error  # outside the handler: no __context__ ties the error to the group
