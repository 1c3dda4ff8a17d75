"""The search index in the restart cache: the same answers as a fresh build, used only for the
snapshot it was built from, and a damaged or altered file is a miss that is rebuilt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import serve.records as records_module
from serve.index_cache import ARRAYS, IndexCache
from serve.page_cache import section, sections
from serve.retrieval.index import LexicalIndex
from serve.service import KnowledgeSource
from serve.settings import ServeSettings

PAGES = 320  # above the index's bulk threshold: only a bulk build is written
QUERIES = ("release signing checksum", "refund window billing", "rollback runbook 17",
           "배포 서명")


@pytest.fixture(autouse=True)
def trust_fresh_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written moments ago fall in the racy window in which a stat is not trusted; the
    index's validity does not depend on it (see test_page_cache.py)."""
    monkeypatch.setattr(records_module, "RACY_WINDOW_NS", 0)


def write_folder(root: Path, pages: int = PAGES) -> None:
    words = ("release", "signing", "checksum", "refund", "window", "billing", "rollback",
             "runbook", "cache", "queue", "배포", "서명")
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "index.md").write_text("---\ntitle: Index\nwiki_title: Cache test\n---\n# Index\n")
    for i in range(pages - 1):
        body = " ".join(words[(i * 7 + k) % len(words)] for k in range(40 + i % 13))
        (root / "wiki" / f"page-{i:04d}.md").write_text(
            f"---\ntitle: Page {i}\ntags: [t{i % 5}]\n---\n# Page {i}\n\n{body} number {i}.\n"
            f"See [[page-{(i + 1) % (pages - 1):04d}]].\n")


def started(root: Path, cache: Path) -> KnowledgeSource:
    source = KnowledgeSource(ServeSettings(root=root, cache_dir=cache, inotify=False))
    source.load()
    source.warm()
    return source


def answers(source: KnowledgeSource) -> list[object]:
    out: list[object] = []
    for query in QUERIES:
        for mode in ("lexical", "literal"):
            result = source.search(source.request(query=query, mode=mode, limit=10))
            out.append([(r["path"], round(r["score"], 6)) for r in result.results])
    out.append(json.dumps(source.context(source.request(query=QUERIES[0])), sort_keys=True))
    return out


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, Path]:
    root, cache = tmp_path / "root", tmp_path / "cache"
    write_folder(root)
    return root, cache


def test_a_restart_answers_from_the_cached_index_as_a_fresh_build_does(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    first = started(root, cache)
    assert first.index_origin == "built"
    expected = answers(first)
    first.close()
    assert IndexCache(cache, root.resolve()).path.is_file()
    second = started(root, cache)
    assert second.index_origin == "cache"
    assert second.phase == "ready"
    assert answers(second) == expected
    second.close()


def test_a_slightly_changed_folder_reuses_the_documents_of_unchanged_pages(
        folder: tuple[Path, Path], tmp_path: Path) -> None:
    root, cache = folder
    started(root, cache).close()
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nA new word: zanzibar.\n")
    (root / "wiki" / "page-0007.md").unlink()
    (root / "wiki" / "page-new.md").write_text("---\ntitle: New\n---\n# New\n\nrefund zanzibar queue\n")
    again = started(root, cache)
    assert again.index_origin == "cache"
    assert again.index.dead == 2  # the edited page's old document and the deleted page's
    assert sorted(r["path"] for r in again.search(again.request(query="zanzibar")).results) == [
        "page-0003.md", "page-new.md"]
    fresh = started(root, tmp_path / "fresh-cache")
    assert fresh.index_origin == "built"
    assert answers(again) == answers(fresh)
    again.close()
    fresh.close()


def test_a_much_changed_folder_rebuilds_the_index(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    started(root, cache).close()
    for i in range(0, PAGES - 1, 2):  # half the pages
        page = root / "wiki" / f"page-{i:04d}.md"
        page.write_text(page.read_text() + "\nzanzibar\n")
    again = started(root, cache)
    assert again.index_origin == "built"
    found = [r["path"] for r in again.search(again.request(query="zanzibar")).results]
    assert found and all(int(path[5:9]) % 2 == 0 for path in found)
    again.close()


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", [0.0, 0.5, 0.99])
def test_a_damaged_index_file_is_rebuilt_not_served(folder: tuple[Path, Path], where: float) -> None:
    root, cache = folder
    first = started(root, cache)
    expected = answers(first)
    first.close()
    path = IndexCache(cache, root.resolve()).path
    flip_byte(path, int(where * (path.stat().st_size - 1)))
    again = started(root, cache)
    assert again.index_origin == "built"
    assert answers(again) == expected
    again.close()


def rewrite_array(path: Path, name: str, change: object) -> None:
    """Alter one array and recompute its checksum, as someone who can write the file could."""
    parts = [bytes(p) for p in sections(memoryview(path.read_bytes())) if p is not None]
    head = json.loads(parts[0])
    at = 2 + ARRAYS.index(name)
    dtype, shape = head["arrays"][name]
    values = np.frombuffer(parts[at], dtype=dtype).reshape(shape).copy()
    change(values)  # type: ignore[operator]
    parts[at] = values.tobytes()
    path.write_bytes(b"".join(section(p) for p in parts))


def out_of_range(values: np.ndarray) -> None:
    values[0] = np.iinfo(values.dtype).max


def reversed_offsets(values: np.ndarray) -> None:
    values[1], values[2] = values[2] + 5, values[1]


@pytest.mark.parametrize(("name", "change"), [("main_docs", out_of_range),
                                               ("indptr", reversed_offsets)])
def test_an_altered_index_with_valid_checksums_is_rejected(folder: tuple[Path, Path], name: str,
                                                           change: object) -> None:
    root, cache = folder
    first = started(root, cache)
    expected = answers(first)
    first.close()
    rewrite_array(IndexCache(cache, root.resolve()).path, name, change)
    again = started(root, cache)
    assert again.index_origin == "built"
    assert answers(again) == expected
    again.close()


def test_restored_refuses_arrays_that_do_not_fit_the_pages(folder: tuple[Path, Path]) -> None:
    root, cache = folder
    source = started(root, cache)
    pages = source.snapshot().pages
    terms, arrays = source.index.exported()
    copies = {name: np.array(value) for name, value in arrays.items()}
    assert LexicalIndex.restored(pages, terms, copies).n_all == len(pages)
    with pytest.raises(ValueError):
        LexicalIndex.restored(pages[:-1], terms, copies)
    with pytest.raises(ValueError):
        LexicalIndex.restored(pages, terms[:-1], copies)
    source.close()


def test_altered_fingerprints_are_rejected_when_a_later_snapshot_would_use_them(
        folder: tuple[Path, Path]) -> None:
    root, cache = folder
    started(root, cache).close()

    def doubled(values: np.ndarray) -> None:
        values[1] = values[0]  # two documents would stand for one page

    rewrite_array(IndexCache(cache, root.resolve()).path, "fingerprints", doubled)
    page = root / "wiki" / "page-0003.md"
    page.write_text(page.read_text() + "\nzanzibar\n")
    again = started(root, cache)
    assert again.index_origin == "built"
    assert [r["path"] for r in again.search(again.request(query="zanzibar")).results] == ["page-0003.md"]
    again.close()
