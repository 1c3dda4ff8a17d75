"""Shared serve test fixtures: fixture copies in tmp_path and a live HTTP client factory."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # so `tests.support` imports however pytest is launched
    sys.path.insert(0, str(REPO))

import serve.watch.records as records_module  # noqa: E402
from serve.protocols.http import SOURCE_KEY, create_app  # noqa: E402
from serve.service import KnowledgeSource  # noqa: E402
from serve.settings import ServeSettings  # noqa: E402
from tests.support.folders import copy_fixture  # noqa: E402

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]


@pytest.fixture
def sources() -> Iterator[list[KnowledgeSource]]:
    """Sources a test makes (appended by it), closed after it."""
    made: list[KnowledgeSource] = []
    yield made
    for source in made:
        source.close()


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """A private restart-cache directory (never the user's real cache)."""
    return tmp_path / "cache"


@pytest.fixture
def sample_root(tmp_path: Path) -> Path:
    """A private, mutable copy of fixtures/sample-wiki."""
    return copy_fixture("sample-wiki", tmp_path / "roots")


@pytest.fixture
def trust_fresh_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture copy was written moments ago, so every file's ctime falls inside the 2 s
    racy window in which FileRecord.trusted_for refuses to trust an equal stat (a rewrite in
    the same clock tick could keep size and mtime). A ctime cannot be set into the past, and
    sleeping 2 s per test is what the house style forbids, so these tests shrink the window
    to 0; the stat comparison itself (size, mtime, ctime, inode, device) still applies."""
    monkeypatch.setattr(records_module, "RACY_WINDOW_NS", 0)


@pytest.fixture
def restarted(sample_root: Path, cache_dir: Path, trust_fresh_files: None) -> Iterator[KnowledgeSource]:
    """A source started on a store an earlier run of the same folder saved (the files' stat
    is trusted only outside the racy window: closed, as the store tests do)."""
    first = KnowledgeSource(ServeSettings(root=sample_root, cache_dir=cache_dir))
    first.snapshot()
    first.save_cache()
    first.close()
    source = KnowledgeSource(ServeSettings(root=sample_root, cache_dir=cache_dir))
    yield source
    source.close()


@pytest.fixture
def serve_client(aiohttp_client: Any, cache_dir: Path) -> ClientFactory:
    """Start the real app for a root on a loopback port and return a client talking to it once
    it is ready (as /health?ready=1 would say: searches need not wait for the index)."""

    async def start(root: Path, **overrides: Any) -> Client:
        overrides.setdefault("cache_dir", cache_dir)
        settings = ServeSettings(root=root, **overrides)
        client: Client = await aiohttp_client(create_app(settings))
        warmed = client.app[SOURCE_KEY].warmed
        assert await asyncio.get_running_loop().run_in_executor(None, warmed.wait, 120)
        return client

    return start
