"""The installed serve, restarted on its store over a folder with some Korean pages: an English
question maps none of the Korean analyzer's dictionary (mecab-ko's, 50 MB); a Korean one does.
Seen from outside, in the process's memory maps."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.hostile import post_json
from tests.e2e.processes import Service, start_serve, stop_checked

PAGES = 300  # above the bulk-build threshold, so the index goes into the store
LOGGED_SECONDS = 60


def write_folder(root: Path) -> None:
    (root / "notes").mkdir(parents=True)
    (root / "index.md").write_text("# Notes\n\nSee [[note-0000]].\n", encoding="utf-8")
    for i in range(PAGES - 1):
        # The Korean pages are the only ones about signing: an English question finds them.
        korean = "## 서명 확인\n\n배포 전에 서명을 확인합니다. signing keys. " if i % 10 == 0 else ""
        link = f"note-{(i + 1) % (PAGES - 1):04d}"
        (root / "notes" / f"note-{i:04d}.md").write_text(
            f"# Note {i}\n\n{korean}release checksum rollback {i}. See [[{link}]].\n", encoding="utf-8")


def logged(service: Service, event: str) -> None:
    deadline = time.monotonic() + LOGGED_SECONDS
    while time.monotonic() < deadline:
        if any(line.get("event") == event for line in service.log_events()):
            return
        assert service.process.poll() is None, service.logs()
        time.sleep(0.05)
    raise AssertionError(f"no {event} logged: {service.logs()}")


def analyzer_mapped(service: Service) -> bool:
    return "mecab" in Path(f"/proc/{service.pid}/maps").read_text()


@pytest.fixture
def restarted(tmp_path: Path) -> Iterator[Service]:
    root, cache = tmp_path / "wiki", tmp_path / "cache"
    write_folder(root)
    first = start_serve(tmp_path / "first", root, "--cache-dir", str(cache))
    try:
        logged(first, "index_cache_written")  # the cold start analysed the Korean pages
    finally:
        stop_checked(first)
    service = start_serve(tmp_path / "again", root, "--cache-dir", str(cache))
    yield service
    stop_checked(service)


def test_an_english_question_maps_no_korean_dictionary_and_a_korean_one_does(restarted: Service) -> None:
    reply = post_json(restarted.url, "/query", {"query": "signing keys checksum"})
    assert reply.status == 200, reply.body[:300]
    assert reply.json()["evidence"][0]["page_id"].endswith("0"), reply.body[:300]  # a Korean page
    assert not analyzer_mapped(restarted)
    reply = post_json(restarted.url, "/query", {"query": "배포 전에 서명 확인"})
    assert reply.status == 200 and reply.json()["evidence"], reply.body[:300]
    assert analyzer_mapped(restarted)
