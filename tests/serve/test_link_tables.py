"""The link views as tables (serve/graph/link_tables.py) answer as the dicts they were made
from: every key, none more, keys sharing a hash, keys no UTF-8 codec takes as they are."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from serve.graph import links
from serve.graph.link_tables import (
    Backlinks,
    KeyTable,
    backlink_arrays,
    check_tables,
    key_arrays,
)
from serve.graph.links import Overlay
from serve.support import string_table


def fake_pages(n: int) -> list[Any]:
    return [SimpleNamespace(path=f"p/{i}.md") for i in range(n)]


def random_views(seed: int, n: int = 60) -> tuple[list[Any], dict[str, list[int]], dict[str, Any]]:
    rng = random.Random(seed)
    pages = fake_pages(n)
    incoming = {}
    for page in rng.sample(pages, n // 2):
        incoming[page.path] = [rng.randrange(n) for _ in range(rng.randrange(1, 6))]
    alphabet = "abcxyz-_/ 0189éü한국\udcff"
    lookup = {"": pages[0]}
    for _ in range(4 * n):
        key = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12)))
        lookup[key] = rng.choice(pages)
    return pages, incoming, lookup


def tables(pages: list[Any], incoming: dict[str, list[int]], lookup: dict[str, Any]
           ) -> tuple[Backlinks, KeyTable, dict[str, np.ndarray]]:
    arrays = {**backlink_arrays(incoming, pages), **key_arrays(lookup, pages)}
    check_tables(arrays, len(pages))
    position = {page.path: i for i, page in enumerate(pages)}
    return (Backlinks(pages, position, arrays["backlink_start"], arrays["backlink_sources"]),
            KeyTable(pages, arrays), arrays)


def same_as_dict(table: Any, expected: dict[str, Any], absent: list[str]) -> None:
    assert len(table) == len(expected)
    assert sorted(table) == sorted(expected)
    assert dict(table.items()) == expected
    for key, value in expected.items():
        assert table[key] == value and table.get(key) == value and key in table
    for key in absent:
        assert key not in table and table.get(key, "none") == "none"
        with pytest.raises(KeyError):
            table[key]


@pytest.mark.parametrize("seed", range(5))
def test_the_tables_answer_as_the_dicts(seed: int) -> None:
    pages, incoming, lookup = random_views(seed)
    backlinks, keys, _ = tables(pages, incoming, lookup)
    unlinked = [page.path for page in pages if page.path not in incoming]
    same_as_dict(backlinks, incoming, [*unlinked, "not/a/page.md"])
    same_as_dict(keys, lookup, ["never-a-key", "abc\udcfe", "zz" * 40])
    assert keys.get(3) is None and backlinks.get(None) is None  # not a str: not a key


def test_keys_that_share_a_hash_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(string_table, "hash_of", lambda raw: len(raw) % 3)
    pages, incoming, lookup = random_views(7)
    _, keys, arrays = tables(pages, incoming, lookup)
    assert len(set(arrays["key_hashes"].tolist())) <= 3
    same_as_dict(keys, lookup, ["never-a-key", "q"])


def test_a_key_table_is_an_overlays_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(links, "FLATTEN_MIN", 0)
    pages, incoming, lookup = random_views(3)
    _, keys, _ = tables(pages, incoming, lookup)
    changed = dict.fromkeys(list(lookup)[:len(lookup) // 2], pages[1])  # enough to flatten
    expected = {**lookup, **changed}
    overlay = Overlay(keys).with_changes({"new key": pages[2], next(iter(lookup)): None})
    assert overlay.get("new key") is pages[2] and next(iter(lookup)) not in overlay
    flat = Overlay(keys).with_changes(changed)
    assert isinstance(flat.base, dict) and dict(flat.items()) == expected


def test_empty_tables() -> None:
    backlinks, keys, _ = tables([], {}, {})
    assert len(backlinks) == len(keys) == 0 and list(keys) == [] and keys.get("a") is None


@pytest.mark.parametrize(("name", "value", "at"), [
    ("backlink_start", 10**9, -1), ("backlink_sources", -1, 0), ("key_pages", 60, 0),
    ("key_ends", 0, -1), ("key_hashes", 0, -1), ("key_bytes", 0xC3, -1), ("key_order", 10**6, 0)])
def test_tables_that_do_not_fit_are_refused(name: str, value: int, at: int) -> None:
    pages, incoming, lookup = random_views(1)
    _, _, arrays = tables(pages, incoming, lookup)
    altered = {key: np.array(array) for key, array in arrays.items()}
    altered[name][at] = value
    with pytest.raises(ValueError):
        check_tables(altered, len(pages))
    with pytest.raises(ValueError):
        check_tables({**arrays, name: arrays[name].astype(np.float32)}, len(pages))
    with pytest.raises(ValueError):
        check_tables(arrays, len(pages) - 1)
