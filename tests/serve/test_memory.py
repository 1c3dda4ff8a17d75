"""Heap settings for long-running servers: large blocks get their own mappings."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from serve.support import memory


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int | str, ...]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


def test_large_blocks_are_mapped_and_the_heap_trims_above_8_mb(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.setattr(memory, "_libc", lambda: libc)
    memory.keep_large_blocks_out_of_the_heap()
    assert libc.calls == [("mallopt", -3, 1 << 20), ("mallopt", -1, 8 << 20)]


def test_free_heap_pages_are_given_back_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.setattr(memory, "_libc", lambda: libc)
    memory.release_free_memory()
    assert libc.calls == [("malloc_trim", 0)]  # pad 0: keep nothing spare at the heap's top


def test_without_glibc_nothing_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where there is no glibc both calls return without touching any C library."""
    seen: list[str] = []

    def absent() -> None:
        seen.append("looked up")
        return None

    monkeypatch.setattr(memory, "_libc", absent)
    assert memory.keep_large_blocks_out_of_the_heap() is None
    assert memory.release_free_memory() is None
    assert seen == ["looked up", "looked up"]  # each asked for the library and stopped there


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_the_real_call_succeeds() -> None:
    libc: Any = memory._libc()
    if libc is None:
        pytest.skip("no glibc")
    memory.keep_large_blocks_out_of_the_heap()
    assert libc.mallopt(-3, memory.MMAP_THRESHOLD) == 1  # glibc accepts the values
    assert libc.mallopt(-1, memory.TRIM_THRESHOLD) == 1
    assert libc.malloc_trim(0) in (0, 1)  # 1: memory was released, 0: there was none to give
