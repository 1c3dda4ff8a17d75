"""Heap settings for long-running servers: large blocks get their own mappings."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from serve import memory


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1


def test_large_blocks_are_mapped_and_the_heap_trims_above_8_mb(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.setattr(memory, "_libc", lambda: libc)
    memory.keep_large_blocks_out_of_the_heap()
    assert libc.calls == [("mallopt", -3, 1 << 20), ("mallopt", -1, 8 << 20)]


def test_without_glibc_nothing_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_libc", lambda: None)
    memory.keep_large_blocks_out_of_the_heap()  # no error


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_the_real_call_succeeds() -> None:
    libc: Any = memory._libc()
    if libc is None:
        pytest.skip("no glibc")
    memory.keep_large_blocks_out_of_the_heap()
    assert libc.mallopt(-3, memory.MMAP_THRESHOLD) == 1  # glibc accepts the values
