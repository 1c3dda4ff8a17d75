"""The projection signature kept line by line equals the contract's, made whole, after any
sequence of edits, additions, removals and marker changes."""

from __future__ import annotations

import random

import pytest

from serve.source.tree import FileStat, walk_order_key
from serve.watch import signature
from serve.watch.records import FileRecord
from serve.watch.signature import SignatureLines
from tests.support.signature import signature_of


def record(size: int, digest: str) -> FileRecord:
    return FileRecord(FileStat(size, 0, 0, 0, 0), digest, 0)


def whole(records: dict[str, FileRecord], markers: list[str]) -> str:
    """The contract's signature, every line made and joined (contract 2.4)."""
    return signature_of([*markers, *(f"{rel}\tfile\t{records[rel].stat.size}\t{records[rel].digest}"
                                     for rel in sorted(records, key=walk_order_key))])


@pytest.mark.parametrize("seed", range(6))
def test_a_signature_kept_line_by_line_is_the_whole_signature(
        monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(signature, "BLOCK", 4)  # many blocks, each boundary crossed
    rng = random.Random(seed)
    names = [f"{d}/{n}.md" for d in ("a", "b/c", "b", "z", "배포") for n in ("x", "y", "README", "q1")]
    records = {rel: record(rng.randrange(99), f"d{rng.randrange(9)}") for rel in rng.sample(names, 12)}
    markers: list[str] = []
    lines = SignatureLines()
    assert lines.digest(records, markers, None, in_walk_order=False) == whole(records, markers)
    for _ in range(300):
        changed: set[str] = set()
        for _ in range(rng.choice((1, 1, 2, 5))):
            rel = rng.choice(names)
            kind = rng.random()
            if kind < 0.5 and rel in records:  # an edit: a new digest (or the same bytes)
                records[rel] = record(records[rel].stat.size + rng.randrange(2), f"d{rng.randrange(9)}")
            elif kind < 0.75:
                records[rel] = record(rng.randrange(99), "new")
            else:
                records.pop(rel, None)
            changed.add(rel)
        if rng.random() < 0.1:
            markers = sorted(rng.sample(["m/.obsidian\tdir\t0\t", "n\tdir\t3\t"], rng.randrange(3)))
        got = lines.digest(records, markers, changed | {rng.choice(names)}, in_walk_order=False)
        assert got == whole(records, markers)
    assert lines.digest({}, [], None, in_walk_order=False) == "" == whole({}, [])
    assert lines.digest({}, ["m\tdir\t0\t"], set(), in_walk_order=False) == whole({}, ["m\tdir\t0\t"])
