"""A set of arrays replaced in one transaction: files of a new generation (array_files.py) and
the rows that name them, for the search index and the link index alike."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping

import numpy as np

from serve.store.array_files import ArrayFiles, Row
from serve.store.database import Database, transaction


def write_generation(database: Database, files: ArrayFiles, arrays: Mapping[str, np.ndarray],
                     tables: tuple[str, str], meta: Mapping[str, str],
                     also: Callable[[sqlite3.Connection], None] | None = None) -> dict[str, Row]:
    """Write `arrays` as a new generation of `files` and name it in one transaction: the rows
    of `tables` (its arrays' table, its meta table; both emptied first), and whatever `also`
    writes in it; the rows written. What fails is raised, and the generation removed; the
    other generations are removed once it is named (the one replaced, any a killed write
    left)."""
    arrays_table, meta_table = tables
    token = ""
    try:
        with database.connect() as conn, transaction(conn):
            token, written = files.write(arrays)  # under the write lock: one writer at a time
            rows = {name: Row(str(array.dtype), list(array.shape), *written[name])
                    for name, array in arrays.items()}
            conn.execute(f"DELETE FROM {meta_table}")
            conn.execute(f"DELETE FROM {arrays_table}")
            conn.executemany(f"INSERT INTO {arrays_table} VALUES (?, ?, ?, ?, ?)", [
                (name, row.dtype, json.dumps(row.shape), row.file, row.sha256)
                for name, row in rows.items()])
            if also is not None:
                also(conn)
            conn.executemany(f"INSERT INTO {meta_table} VALUES (?, ?)", meta.items())
            files.keep_only(token)
    except BaseException:
        if token:
            files.remove(token)  # its rows were not committed
        raise
    return rows
