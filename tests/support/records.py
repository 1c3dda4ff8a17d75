"""Comparing file records by what they hold, wherever a page's body is kept."""

from __future__ import annotations

from typing import Any

from serve.watch.records import FileRecord


def with_body(record: FileRecord) -> tuple[Any, ...]:
    """A record's fields with its page's body and section table read (a page loaded from the
    store has them in the store), and without its graph fragment (a page loaded from the store
    has none until a snapshot makes it: tests/serve/test_store_fragments.py)."""
    page = record.page
    if page is not None:
        record = record._replace(page=page._replace(text_z=page.body_z,
                                                    section_table=page.packed_sections))
    return tuple(record._replace(fragment=None))
