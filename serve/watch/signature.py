"""The projection signature (contract 2.4: SHA-256 over the walk-ordered entry lines joined by
newlines), kept up to date line by line."""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from serve.source.tree import walk_order_key
from serve.watch.records import FileRecord

# Lines per block. An edited line costs making its block again and hashing from it to the
# end; a file added or removed, making the blocks from its own on (the lines are kept encoded).
BLOCK = 1024


def file_line(rel: str, record: FileRecord) -> bytes:
    return f"{rel}\tfile\t{record.stat.size}\t{record.digest}".encode("utf-8", "surrogatepass")


class SignatureLines:
    """The files' signature lines in walk order, in blocks, each with the hash state before it
    (a SHA-256 is sequential: a change can only be hashed from where it is to the end). At
    100,000 files an edited page cost 28 ms of making, joining and hashing every line, and
    costs a few ms this way."""

    def __init__(self) -> None:
        self._order: list[str] | None = None  # files in walk order; None: make all anew
        self._lines: dict[str, bytes] = {}
        self._head = b""  # the marker lines, and the newline after them when files follow
        self._blocks: list[bytes] = []  # each after the first starts with its newline
        self._states: list[Any] = []  # the hash of everything before each block, then the end
        self._edited: set[int] = set()  # blocks to make again in place
        self._moved_from: int | None = None  # the first block whose lines moved

    def digest(self, records: Mapping[str, FileRecord], markers: Sequence[str],
               changed: Iterable[str] | None, *, in_walk_order: bool) -> str:
        """`sha256:<hex>` of the marker lines then every file's line, or "" for none.
        `changed`: the files whose lines may differ since the last call (added, removed or
        re-read), or None to make every line anew; `in_walk_order`: the records' order is
        the walk's (else they are sorted)."""
        if changed is None or self._order is None:
            order = list(records) if in_walk_order else sorted(records, key=walk_order_key)
            self._order = order
            self._lines = {rel: file_line(rel, records[rel]) for rel in order}
            self._blocks, self._states, self._edited, self._moved_from = [], [], set(), 0
        else:
            for rel in changed:
                record = records.get(rel)
                self._change(rel, file_line(rel, record) if record is not None else None)
        order = self._order
        head = "\n".join(markers).encode("utf-8", "surrogatepass")
        if head and order:
            head += b"\n"
        if not head and not order:
            return ""
        rehash = self._make_blocks(len(order))
        if head != self._head or not self._states:
            self._head, self._states = head, [hashlib.sha256(head)]
            rehash = 0
        del self._states[rehash + 1:]
        for block in self._blocks[rehash:]:
            state = self._states[-1].copy()
            state.update(block)
            self._states.append(state)
        return "sha256:" + str(self._states[-1].hexdigest())

    def _change(self, rel: str, line: bytes | None) -> None:
        old = self._lines.get(rel)
        if line == old:
            return
        order = self._order
        assert order is not None
        at = bisect_left(order, walk_order_key(rel), key=walk_order_key)
        if old is not None and line is not None:  # the same place: only its block changes
            self._lines[rel] = line
            self._edited.add(at // BLOCK)
            return
        if line is None:
            del order[at], self._lines[rel]
        else:
            order.insert(at, rel)
            self._lines[rel] = line
        first = at // BLOCK
        self._moved_from = first if self._moved_from is None else min(self._moved_from, first)

    def _make_blocks(self, count: int) -> int:
        """Make the blocks that changed; the first whose hash state is stale."""
        order, lines, blocks = self._order, self._lines, self._blocks
        assert order is not None
        total = -(-count // BLOCK)
        moved = total if self._moved_from is None else self._moved_from
        del blocks[min(moved, total):]
        remade = sorted(k for k in self._edited if k < len(blocks))
        for k in remade:
            blocks[k] = self._block(order, lines, k)
        for k in range(len(blocks), total):
            blocks.append(self._block(order, lines, k))
        self._edited, self._moved_from = set(), None
        return min([moved, *remade, len(self._states) - 1 if self._states else 0])

    @staticmethod
    def _block(order: list[str], lines: dict[str, bytes], k: int) -> bytes:
        body = b"\n".join([lines[rel] for rel in order[k * BLOCK:(k + 1) * BLOCK]])
        return b"\n" + body if k else body
