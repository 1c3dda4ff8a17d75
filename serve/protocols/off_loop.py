"""Which operations leave the event loop: one rule for every protocol adapter.

The KnowledgeSource is synchronous. On an event loop (HTTP, MCP over HTTP, A2A) a call that
may take long would stop every other request, /health included, so it runs in a worker
thread instead: a search before the index exists (it waits for the build), a search that
would first sync the whole index (after a checkout or a recompiled wiki), a literal search
that has to read many page texts, a focused read (it folds and scans a whole page). The
rest stays on the loop: a thread hand-off costs more CPU than a quick call under load (GIL
contention). stdio answers one line at a time and has no loop to keep free."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TypeVar

from serve.errors import NotReady
from serve.retrieval.search import SearchRequest, SlowSearch
from serve.service import KnowledgeSource

T = TypeVar("T")
# How long a search waits for the start-up warm-up (index load or build) before it is told to
# retry (NotReady): the time a request may wait on it at most.
INDEX_WAIT_SECONDS = 3.0
# Page texts a literal search may read on the event loop (about 30 us each, so ~15 ms at
# most) before it is run again in a worker thread; nearly all read far fewer.
LITERAL_INLINE_READS = 512


def search_may_block(source: KnowledgeSource, mode: object) -> bool:
    """Whether a search in `mode` may take long: before the index exists, while it lags the
    folder by a whole sync, or literal."""
    return source.index_lags() or str(mode).strip().lower() == "literal"


async def in_thread(work: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, work)


async def call(work: Callable[[], T], *, may_block: bool) -> T:
    """`work()` in a worker thread when it may block, else here on the loop."""
    return await in_thread(work) if may_block else work()


async def warmed(source: KnowledgeSource, timeout: float = INDEX_WAIT_SECONDS) -> None:
    """Return once the start-up warm-up is done; NotReady after `timeout` seconds. A search
    before then would wait on the index build, for as long as that takes."""
    if source.warmed.is_set():
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    def from_the_warm_up() -> None:
        loop.call_soon_threadsafe(wake)

    if not source.when_warmed(from_the_warm_up):
        return
    try:
        await asyncio.wait_for(done, timeout)
    except TimeoutError:
        raise NotReady() from None


async def search(source: KnowledgeSource, req: SearchRequest,
                 work: Callable[[SearchRequest], T]) -> T:
    """A search or context operation (`work`) for `req`. Most literal searches read a few
    dozen pages, so they are tried on the loop first with a read budget, and only those
    that exceed it move to a thread."""
    if not source.indexing.ready:
        await warmed(source)
        return await in_thread(lambda: work(req))
    if source.index_lags():
        return await in_thread(lambda: work(req))
    if req.mode == "literal":
        try:
            return work(dataclasses.replace(req, read_budget=LITERAL_INLINE_READS))
        except SlowSearch:
            return await in_thread(lambda: work(req))
    return work(req)
