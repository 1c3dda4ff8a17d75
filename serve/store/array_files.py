"""The search index's arrays as files beside the store, in numpy's own format and named by its
rows: mapped rather than read, so a start copies none of them and memory holds only the parts
searches touch.

Each write makes a generation, a directory of its own named by a random token, while it holds
the store's write lock; the rows naming its files, with each file's sha256, are committed in
that transaction, which also removes every other generation (the one replaced, or one a killed
write left). A process that mapped a removed generation keeps reading it: the system keeps a
mapped file until it is let go."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO, Literal, NamedTuple

import numpy as np
from numpy.lib import format as npy

from serve.support.background import started

# What a row may name: a file of one generation, never a path out of the directory.
FILE_NAME = re.compile(r"[0-9a-f]{32}/[a-z_]{1,40}\.npy")


class Row(NamedTuple):
    """One array's row in the store."""

    dtype: str
    shape: list[int]
    file: str  # relative to the directory
    sha256: bytes


class ArrayFiles:
    """The generations of one store's arrays, in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, arrays: Mapping[str, np.ndarray]) -> tuple[str, dict[str, tuple[str, bytes]]]:
        """Each array in a file of a new generation, synced to disk; its token, and name ->
        (file, sha256) for the rows. Call it holding the store's write lock. What fails (a full
        disk) is raised, and the generation is removed."""
        token = uuid.uuid4().hex
        folder = self.directory / token
        self.directory.mkdir(mode=0o700, exist_ok=True)
        folder.mkdir(mode=0o700)
        try:
            written: dict[str, tuple[str, bytes]] = {}
            for name, array in arrays.items():
                file = f"{token}/{name}.npy"
                with open(self.directory / file, "xb") as raw:
                    hashing = _Hashing(raw)
                    # A view (the pair columns of a wider array) is written in chunks, not copied.
                    npy.write_array(hashing, array, allow_pickle=False)
                    raw.flush()
                    os.fsync(raw.fileno())
                written[name] = (file, hashing.sha256.digest())
            _sync_directory(folder)
            _sync_directory(self.directory)
            return token, written
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def keep_only(self, token: str) -> None:
        """Remove every generation but `token`'s. Call it holding the store's write lock: no
        other process is writing one then."""
        with contextlib.suppress(FileNotFoundError), os.scandir(self.directory) as entries:
            for entry in entries:
                if entry.name != token:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)

    def remove(self, token: str) -> None:
        """Remove one generation (a write whose rows were not committed)."""
        shutil.rmtree(self.directory / token, ignore_errors=True)

    def remove_all(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def mapped(self, rows: Mapping[str, Row], mode: Literal["r", "c"] = "c") -> dict[str, np.ndarray]:
        """name -> its file's array, mapped (copy-on-write by default: what this process
        writes stays its own). ValueError when a file is not of its row's dtype and shape,
        OSError when it is gone (another process replaced the generation meanwhile)."""
        out: dict[str, np.ndarray] = {}
        for name, (dtype, shape, file, _) in rows.items():
            mapped = np.load(self._path(file), mmap_mode=mode, allow_pickle=False)
            if str(mapped.dtype) != dtype or list(mapped.shape) != shape:
                raise ValueError(f"{name}: its file is not of the stored dtype and shape")
            out[name] = mapped.view(np.ndarray)
        return out

    def checked_beside(self, rows: Mapping[str, Row],
                       check: Callable[[dict[str, np.ndarray]], None]) -> Callable[[], None]:
        """Start checking, in a thread, that each file is the one written (its sha256), then
        check(the arrays, on a mapping of the thread's own, let go after); what waits for it,
        raising ValueError for a file that fails. Hashing releases the GIL: a start reads the
        rest of the store meanwhile."""

        def run() -> None:
            for name, (_, _, file, sha256) in rows.items():
                with open(self._path(file), "rb") as raw:
                    if hashlib.file_digest(raw, "sha256").digest() != sha256:
                        raise ValueError(f"{name}: its file is not the one written")
            arrays = self.mapped(rows, mode="r")
            try:
                check(arrays)
            finally:
                arrays.clear()  # the mapping goes with the last reference to it

        return started(run, "index-check")

    def _path(self, file: str) -> Path:
        if not FILE_NAME.fullmatch(file):
            raise ValueError("an array row names no file of the store's")
        return self.directory / file


class _Hashing:
    """A file numpy writes into, hashing what passes."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return self.raw.write(data)


def _sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
