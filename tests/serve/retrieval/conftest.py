"""Fixtures shared by the retrieval tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from serve.service import KnowledgeSource
from serve.settings import ServeSettings


@pytest.fixture(scope="session")
def source_of() -> Iterator[Callable[[Path], KnowledgeSource]]:
    """One source per folder for the whole run: the folders never change during it, so the
    snapshots are reused and the gates time search alone."""
    sources: dict[Path, KnowledgeSource] = {}

    def get(root: Path) -> KnowledgeSource:
        if root not in sources:
            sources[root] = KnowledgeSource(ServeSettings(root=root, page_cache=False, inotify=False,
                                                          refresh_interval_seconds=3600.0))
        return sources[root]

    yield get
    for source in sources.values():
        source.close()
