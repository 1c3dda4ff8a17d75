"""Ready means ready (issue 17), against the installed `llmwiki-serve`: `/health?ready=1` answers
503 until queries can be answered and 200 from then on, systemd's READY=1 comes only then, a
restart with the folder unchanged answers from the search index kept in the restart cache, and
a damaged store is rebuilt, never served. Start-up logs say what was loaded and when the
service is ready."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.notify_socket import NotifySocket
from tests.e2e.processes import (
    POLL_SECONDS,
    START_SECONDS,
    Service,
    console_script,
    free_port,
    json_lines,
    launch,
    service_env,
    stop_checked,
)

pytestmark = pytest.mark.timeout(300)

PAGES = 400  # above the bulk-build threshold, so the index goes into the restart cache
WORDS = ("release", "signing", "checksum", "refund", "window", "billing", "rollback", "runbook",
         "queue", "token", "rotation", "vault", "배포", "서명")


def write_folder(root: Path, pages: int = PAGES) -> Path:
    """A small LLMWiki: an index page and `pages - 1` linked topic pages (no product code)."""
    (root / "topics").mkdir(parents=True)
    (root / "index.md").write_text("---\ntitle: Readiness Wiki\nwiki_title: Readiness Wiki\n---\n"
                                   "# Readiness Wiki\n\nSee [[topic-0000]].\n", encoding="utf-8")
    for i in range(pages - 1):
        body = " ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(60 + i % 17))
        (root / "topics" / f"topic-{i:04d}.md").write_text(
            f"---\ntitle: Topic {i}\ntags: [group-{i % 7}]\n---\n# Topic {i}\n\n{body}, item {i}.\n\n"
            f"## Related\n\nSee [[topic-{(i + 1) % (pages - 1):04d}]].\n", encoding="utf-8")
    return root


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_folder(tmp_path / "wiki")


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def post(url: str, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + path, data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read())


def start(work: Path, root: Path, cache: Path, env: dict[str, str] | None = None) -> Service:
    port = free_port()
    argv = [console_script("llmwiki-serve"), "serve", root, "--host", "127.0.0.1", "--port", str(port),
            "--cache-dir", cache]
    process, stdout, stderr, guard = launch("serve", argv, work, env)
    return Service("serve", f"http://127.0.0.1:{port}", process, stdout, stderr, guard)


def readiness_answers(service: Service) -> list[tuple[int, dict[str, Any]]]:
    """Every answer of GET /health?ready=1, polled from spawn until the first 200 (bounded)."""
    answers: list[tuple[int, dict[str, Any]]] = []
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        assert service.process.poll() is None, service.logs()
        try:
            answers.append(get(service.url + "/health?ready=1"))
        except (urllib.error.URLError, ConnectionError, OSError):
            pass  # not listening yet
        else:
            if answers[-1][0] == 200:
                return answers
        time.sleep(POLL_SECONDS)
    raise AssertionError(f"/health?ready=1 not 200 within {START_SECONDS} s\n{service.logs()}")


def the_event(service: Service, name: str) -> dict[str, Any]:
    found = [e for e in service.log_events() if e.get("event") == name]
    assert len(found) == 1, (name, found, service.logs())
    return found[0]


def top_results(url: str) -> list[object]:
    status, search = post(url, "/search", {"query": "rollback runbook signing", "limit": 10})
    assert status == 200
    status, query = post(url, "/query", {"query": "how are tokens rotated in the vault?"})
    assert status == 200
    status, literal = post(url, "/search", {"query": "signing checksum", "mode": "literal",
                                            "limit": 10})
    assert status == 200
    return [[(r["path"], r["score"]) for r in search["results"]],
            [item["path"] for item in query["evidence"]],
            [(r["path"], r["score"]) for r in literal["results"]]]


def check_ready(service: Service, answers: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """503s (not ready, loading or indexing) then one 200 whose index holds every page; the
    health document keeps its `status: ok` throughout."""
    *waiting, (_, body) = answers
    for status, early in waiting:
        assert status == 503, status
        assert early["status"] == "ok" and early["ready"] is False
        assert early["phase"] in ("loading", "indexing") and early["readiness"]["phase"] == early["phase"]
    assert body["ready"] is True and body["phase"] == "ready"
    readiness = body["readiness"]
    assert readiness["pages"] == body["source"]["page_count"] == PAGES
    assert readiness["indexed_documents"] == PAGES
    return dict(readiness)


def test_health_says_ready_only_when_queries_answer_and_a_restart_uses_the_cached_index(
        tmp_path: Path, folder: Path) -> None:
    cache = tmp_path / "cache"
    cold = start(tmp_path / "cold", folder, cache)
    try:
        readiness = check_ready(cold, readiness_answers(cold))
        assert readiness["index_origin"] == "built"
        expected = top_results(cold.url)
        assert get(cold.url + "/health?ready=1")[0] == 200  # stays ready
    finally:
        stop_checked(cold)
    loaded = the_event(cold, "folder_loaded")
    assert (loaded["pages"], loaded["files"], loaded["skipped_files"]) == (PAGES, PAGES, 0)
    assert loaded["records_from_cache"] == 0 and loaded["seconds"] > 0
    ready = the_event(cold, "ready")
    assert ready["url"] == cold.url and ready["index_origin"] == "built"
    assert_only_the_store(cache)

    warm = start(tmp_path / "warm", folder, cache)
    try:
        readiness = check_ready(warm, readiness_answers(warm))
        assert readiness["index_origin"] == "cache"
        assert top_results(warm.url) == expected
    finally:
        stop_checked(warm)
    assert the_event(warm, "index_cache_loaded")["documents"] == PAGES
    assert the_event(warm, "folder_loaded")["records_from_cache"] == PAGES
    assert the_event(warm, "ready")["index_origin"] == "cache"


def test_a_changed_folder_keeps_the_unchanged_pages_of_the_old_index_only(tmp_path: Path,
                                                                         folder: Path) -> None:
    cache = tmp_path / "cache"
    first = start(tmp_path / "first", folder, cache)
    try:
        readiness_answers(first)
        status, before = post(first.url, "/search", {"query": "42"})
        assert status == 200 and "topics/topic-0042.md" in [r["path"] for r in before["results"]]
    finally:
        stop_checked(first)
    page = folder / "topics" / "topic-0042.md"
    page.write_text("---\ntitle: Quetzal\n---\n# Quetzal\n\nNew: quetzalcoatl.\n", encoding="utf-8")
    second = start(tmp_path / "second", folder, cache)
    try:
        # The cached index stands for the unchanged pages; the changed one is indexed anew, and
        # what it said before ("Topic 42", "item 42") is no longer found in it.
        assert check_ready(second, readiness_answers(second))["index_origin"] == "cache"
        status, found = post(second.url, "/search", {"query": "quetzalcoatl"})
        assert status == 200 and [r["path"] for r in found["results"]] == ["topics/topic-0042.md"]
        status, gone = post(second.url, "/search", {"query": "42"})
        assert status == 200 and "topics/topic-0042.md" not in [r["path"] for r in gone["results"]]
    finally:
        stop_checked(second)



def test_a_restart_over_a_changed_folder_derives_the_changes_and_leaves_the_next_restart_exact(
        tmp_path: Path, folder: Path) -> None:
    """Pages edited, added and deleted while serve was stopped: the restart makes the snapshot
    the store was written from, takes its index and link index, and derives the changes from
    them; it answers as a fresh start does, and then writes the new snapshot's index and link
    index, which the restart after it maps as they are (no page indexed again)."""
    cache = tmp_path / "cache"
    store_written(tmp_path / "first", folder, cache)
    topics = folder / "topics"
    (topics / "topic-0042.md").write_text("---\ntitle: Quetzal\n---\n# Quetzal\n\nNew: quetzalcoatl.\n",
                                         encoding="utf-8")
    (topics / "topic-0010.md").unlink()  # linked from topic 9
    (topics / "newcomer.md").write_text("---\ntitle: Quokka Newcomer\n---\n# Quokka Newcomer\n\n"
                                        "See [[topic-0005]] and [[Quetzal]].\n", encoding="utf-8")
    hour_ago = time.time() - 3600  # changed while stopped, not while the first walk runs
    os.utime(topics, (hour_ago, hour_ago))
    questions = ("quokka newcomer", "topic 9 signing", "quetzalcoatl")
    second = start(tmp_path / "second", folder, cache)
    try:
        *_, (status, health) = readiness_answers(second)
        assert status == 200 and health["readiness"]["index_origin"] == "cache"
        assert health["readiness"]["indexed_documents"] == PAGES
        assert logged(second, "restart_from_store")["pages"] == PAGES  # before the change
        served = ([graph_of(second.url, question) for question in questions], counts_of(second.url))
        status, found = post(second.url, "/search", {"query": "quetzalcoatl"})
        assert status == 200 and [r["path"] for r in found["results"]] == ["topics/topic-0042.md"]
        logged(second, "link_index_written")  # the new snapshot's, after the first answers
    finally:
        stop_checked(second)
    assert the_event(second, "index_cache_written")["documents"] == PAGES
    third = start(tmp_path / "third", folder, cache)
    try:
        assert check_ready(third, readiness_answers(third))["index_origin"] == "cache"
        assert the_event(third, "index_cache_loaded")["documents"] == PAGES
        logged(third, "link_index_loaded")
        # (Files written within 2 s of the second's read of them are read again, the racy
        # window: found unchanged, the store's snapshot is the one served.)
        assert not [e for e in third.log_events() if e.get("event") in (
            "index_cache_reused", "index_cache_written", "link_index_written")]
        assert ([graph_of(third.url, question) for question in questions], counts_of(third.url)) == served
    finally:
        stop_checked(third)
    fresh = start(tmp_path / "fresh", folder, tmp_path / "fresh-cache")
    try:
        assert check_ready_count(fresh) == PAGES
        assert ([graph_of(fresh.url, question) for question in questions], counts_of(fresh.url)) == served
    finally:
        stop_checked(fresh)


def graph_of(url: str, question: str) -> tuple[list[str], list[tuple[str, str, str]]]:
    status, pack = post(url, "/query", {"query": question, "limit": 5})
    assert status == 200
    graph = pack["graph"]
    return (sorted(n["id"] for n in graph["nodes"]),
            sorted((e["source"], e["target"], e["relation"]) for e in graph["edges"]))


def counts_of(url: str) -> tuple[int, int, int]:
    status, health = get(url + "/health")
    assert status == 200
    projection = health["source"]["projection"]
    return projection["page_count"], projection["graph_node_count"], projection["graph_edge_count"]


def logged(service: Service, event: str) -> dict[str, Any]:
    """The first log line of `event`, waited for (bounded) as the service writes it."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        found = [line for line in service.log_events() if line.get("event") == event]
        if found:
            return found[0]
        assert service.process.poll() is None, service.logs()
        time.sleep(0.05)
    raise AssertionError(f"no {event} logged: {service.logs()}")


def store_written(run: Path, folder: Path, cache: Path) -> None:
    """A first start that writes the store for the restarts a test makes, and stops."""
    first = start(run, folder, cache)
    try:
        readiness_answers(first)
    finally:
        stop_checked(first)


def test_pages_added_and_deleted_after_a_restart_show_as_a_fresh_start_shows_them(
        tmp_path: Path, folder: Path) -> None:
    """A restart starts from the restart cache's link views and maps its link index, and
    reads no page's graph fragment: the pages that come and go after it (each deriving the
    next link index from the mapped one), and the typed edges of a graph/graph.json written
    then, must still be linked, counted and shown in context packs and the whole graph exactly
    as a service started afresh on the changed folder shows them."""
    cache = tmp_path / "cache"
    store_written(tmp_path / "first", folder, cache)
    questions = ("quokka newcomer", "topic 5 rollback", "topic 9 signing", "topic 11 vault")
    warm = start(tmp_path / "warm", folder, cache)
    try:
        assert check_ready(warm, readiness_answers(warm))["index_origin"] == "cache"
        logged(warm, "link_index_loaded")  # read after the warm-up, before the changes below
        pages, nodes, edges = counts_of(warm.url)
        newcomer = folder / "topics" / "newcomer.md"
        newcomer.write_text("---\ntitle: Quokka Newcomer\n---\n# Quokka Newcomer\n\nSee "
                            "[[topic-0005]], [[Topic 11]] and [[not-written-yet]].\n", encoding="utf-8")
        # Strict freshness: the next request sees the new page, its links and its backlinks.
        assert counts_of(warm.url)[0] == pages + 1
        ids, links = graph_of(warm.url, questions[0])
        assert "page:topics/newcomer" in ids
        assert ("page:topics/newcomer", "page:topics/topic-0005", "links_to") in links
        (folder / "topics" / "topic-0010.md").unlink()  # linked from topic 9
        (folder / "topics" / "second.md").write_text(
            "---\ntitle: Second Newcomer\n---\n# Second Newcomer\n\nSee [[Quokka Newcomer]].\n",
            encoding="utf-8")
        (folder / "graph").mkdir()
        (folder / "graph" / "graph.json").write_text(json.dumps({"edges": [
            {"source": "topic-0005", "target": "Quokka Newcomer", "type": "supports"},
            {"source": "Second Newcomer", "target": "GH-7", "type": "tracks"}]}), encoding="utf-8")
        after = counts_of(warm.url)
        assert after[0] == pages + 1 and after[1:] != (nodes, edges)
        served = [graph_of(warm.url, question) for question in questions]
        assert ("page:topics/topic-0005", "page:topics/newcomer", "supports") in served[0][1]
        status, whole = get(warm.url + f"/graph?limit={2 * PAGES}")  # every page's own items
        assert status == 200 and len(whole["nodes"]) > PAGES
    finally:
        stop_checked(warm)
    fresh = start(tmp_path / "fresh", folder, tmp_path / "fresh-cache")
    try:
        assert check_ready_count(fresh) == PAGES + 1
        assert counts_of(fresh.url) == after
        assert [graph_of(fresh.url, question) for question in questions] == served
        assert get(fresh.url + f"/graph?limit={2 * PAGES}") == (200, whole)
    finally:
        stop_checked(fresh)


def everything_read(service: Service, root: Path, questions: tuple[str, ...]) -> dict[str, Any]:
    """Every page's read (its id is its path without .md), the source refs, the source bundle
    and whole context packs."""
    status, refs = get(service.url + "/source-refs")
    assert status == 200
    ids = sorted(path.relative_to(root).with_suffix("").as_posix() for path in root.rglob("*.md"))
    reads = {}
    for page_id in ids:
        status, reads[page_id] = get(service.url + "/read/" + urllib.request.quote(page_id))
        assert status == 200, (page_id, reads[page_id])
    status, bundle = get(service.url + "/source-bundle")
    assert status == 200
    packs = [post(service.url, "/query", {"query": question}) for question in questions]
    return {"refs": refs, "reads": reads, "bundle": bundle, "packs": packs}


def test_every_page_read_after_a_restart_is_the_page_a_fresh_start_reads(
        tmp_path: Path, folder: Path) -> None:
    """A restart reads of each stored page only what every request needs (id, title, path,
    role, approval); reads, source refs, the bundle and packs ask for the rest (frontmatter,
    tags, links, headings, summaries), which must be what a service started afresh parses."""
    cache = tmp_path / "cache"
    store_written(tmp_path / "first", folder, cache)
    questions = ("topic 5 rollback", "how are tokens rotated in the vault?", "group-3 signing")
    warm = start(tmp_path / "warm", folder, cache)
    try:
        assert check_ready(warm, readiness_answers(warm))["index_origin"] == "cache"
        restarted = everything_read(warm, folder, questions)
    finally:
        stop_checked(warm)
    assert the_event(warm, "folder_loaded")["files_parsed"] == 0
    fresh = start(tmp_path / "fresh", folder, tmp_path / "fresh-cache")
    try:
        readiness_answers(fresh)
        expected = everything_read(fresh, folder, questions)
    finally:
        stop_checked(fresh)
    assert len(restarted["reads"]) == PAGES
    assert restarted["reads"]["topics/topic-0003"]["tags"] == ["group-3"]
    assert restarted == expected


def check_ready_count(service: Service) -> int:
    *_, (status, body) = readiness_answers(service)
    assert status == 200 and body["readiness"]["index_origin"] == "built"
    return int(body["readiness"]["pages"])


def assert_only_the_store(cache: Path) -> None:
    """The cache directory holds the store's file, its index's and its link index's array
    files, and nothing else (no -wal left once serve has stopped)."""
    path = store_file(cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [path.name, arrays_of(path).name, path.with_suffix(".links").name])


def store_file(cache: Path) -> Path:
    [found] = [p for p in cache.iterdir() if p.name.startswith("store-") and p.suffix == ".sqlite3"]
    return found


def arrays_of(path: Path) -> Path:
    """The directory of the index's array files beside the store file."""
    return path.with_suffix(".arrays")


def stored_index(path: Path) -> list[tuple[str, str, bytes]]:
    """The index as the store holds it, read with the standard library's sqlite3: each array's
    dtype, shape and digest (its file checked against the digest) and the JSON rows."""
    conn = sqlite3.connect(path)
    try:
        arrays = conn.execute("SELECT name, dtype || shape, file, sha256 FROM index_arrays "
                              "ORDER BY name").fetchall()
        rows = conn.execute("SELECT name, value FROM index_json ORDER BY name").fetchall()
    finally:
        conn.close()
    for name, _, file, digest in arrays:
        assert hashlib.sha256((arrays_of(path) / file).read_bytes()).digest() == digest, name
    return ([(name, kind, digest) for name, kind, _, digest in arrays]
            + [(name, "json", value.encode()) for name, value in rows])


def array_file(path: Path, name: str) -> Path:
    conn = sqlite3.connect(path)
    try:
        [(file,)] = conn.execute("SELECT file FROM index_arrays WHERE name = ?", (name,))
    finally:
        conn.close()
    return arrays_of(path) / file


def alter(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(statement)
    conn.commit()
    conn.close()


def cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


# Ways a store can be found damaged: the engine's own checks (a cut file, a header that is not
# SQLite's), rows altered behind serve's back, and the index's array files cut or altered.
DAMAGES = {
    "file cut": lambda path: cut(path, path.stat().st_size // 2),
    "header": lambda path: path.write_bytes(b"\0" * 100 + path.read_bytes()[100:]),
    "owners": lambda path: alter(path, "UPDATE index_json SET value = '[1' WHERE name = 'owners'"),
    "terms": lambda path: flip_last_byte(array_file(path, "term_bytes")),
    "array gone": lambda path: alter(path, "DELETE FROM index_arrays WHERE name = 'main_docs'"),
    "array cut": lambda path: cut(array_file(path, "indptr"), 9),
    "pair signatures": lambda path: cut(array_file(path, "pair_columns"), 99),
    "array altered": lambda path: flip_last_byte(array_file(path, "main_tfs")),
    "array files gone": lambda path: shutil.rmtree(arrays_of(path)),
}


def test_a_damaged_store_is_rebuilt_not_served(tmp_path: Path, folder: Path) -> None:
    cache = tmp_path / "cache"
    first = start(tmp_path / "run-0", folder, cache)
    try:
        readiness_answers(first)
        expected = top_results(first.url)
    finally:
        stop_checked(first)
    pristine_file = store_file(cache).read_bytes()
    pristine_arrays = tmp_path / "pristine-arrays"
    shutil.copytree(arrays_of(store_file(cache)), pristine_arrays)
    pristine = stored_index(store_file(cache))
    for turn, (name, damage) in enumerate(DAMAGES.items()):
        store_file(cache).write_bytes(pristine_file)
        shutil.rmtree(arrays_of(store_file(cache)), ignore_errors=True)
        shutil.copytree(pristine_arrays, arrays_of(store_file(cache)))
        damage(store_file(cache))
        service = start(tmp_path / f"run-{turn + 1}", folder, cache)
        try:
            origin = check_ready(service, readiness_answers(service))["index_origin"]
            assert top_results(service.url) == expected, f"damage {name}"
        finally:
            stop_checked(service)
        events = {e.get("event") for e in service.log_events()}
        assert {"index_cache_rejected", "store_rebuilt"} & events, f"damage {name} was served"
        assert origin == "built", service.logs()
        assert stored_index(store_file(cache)) == pristine, "the rebuilt index was not written back"
        assert len(os.listdir(arrays_of(store_file(cache)))) == 1, "an old generation was left"


def test_two_serve_processes_share_one_store(tmp_path: Path, folder: Path) -> None:
    """Replicas on one host may point --cache-dir at one directory: both start, both answer,
    both see an edit at once, and the next start uses what they stored."""
    cache = tmp_path / "cache"
    one = start(tmp_path / "one", folder, cache)
    two = start(tmp_path / "two", folder, cache)
    try:
        check_ready(one, readiness_answers(one))
        check_ready(two, readiness_answers(two))
        assert top_results(one.url) == top_results(two.url)
        (folder / "topics" / "shared.md").write_text(
            "---\ntitle: Shared Quokka\n---\n# Shared Quokka\n\nseen by both replicas\n",
            encoding="utf-8")
        for service in (one, two):
            status, found = post(service.url, "/search", {"query": "quokka replicas"})
            assert status == 200 and [r["path"] for r in found["results"]][:1] == [
                "topics/shared.md"]
    finally:
        stop_checked(one)
        stop_checked(two)
    for service in (one, two):
        assert "store_write_failed" not in [e.get("event") for e in service.log_events()]
    third = start(tmp_path / "three", folder, cache)
    try:
        readiness_answers(third)
        status, found = post(third.url, "/search", {"query": "quokka replicas"})
        assert status == 200 and found["results"][0]["path"] == "topics/shared.md"
    finally:
        stop_checked(third)
    assert the_event(third, "folder_loaded")["records_from_cache"] == PAGES + 1


def test_a_cache_directory_that_cannot_hold_the_store_keeps_serving_and_says_so(
        tmp_path: Path, folder: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory\n", encoding="utf-8")
    service = start(tmp_path / "run", folder, blocked / "cache")
    try:
        check_ready(service, readiness_answers(service))
        status, health = get(service.url + "/health")
        assert status == 200 and health["diagnostics"]["store"] == "memory"
        status, found = post(service.url, "/search", {"query": "rollback runbook"})
        assert status == 200 and found["results"]
    finally:
        stop_checked(service)
    assert "store_in_memory" in [e.get("event") for e in service.log_events()]
    assert blocked.read_text(encoding="utf-8") == "not a directory\n"


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        path = tmp_path / "notify.sock"
        sock.bind(str(path))
        yield NotifySocket(sock, str(path))


def test_ready_is_sent_to_systemd_only_once_queries_answer(tmp_path: Path, folder: Path,
                                                          notify_socket: NotifySocket) -> None:
    service = start(tmp_path / "run", folder, tmp_path / "cache",
                    env={"NOTIFY_SOCKET": notify_socket.address})
    try:
        state = notify_socket.await_state("READY", service.process, service.stderr)
        # No retry: the moment READY=1 arrives, the service must already be ready.
        status, body = get(service.url + "/health?ready=1")
        assert status == 200 and body["readiness"]["indexed_documents"] == PAGES
        assert state["STATUS"] == f"ready: {service.url}"
        status, answer = post(service.url, "/query", {"query": "refund window"})
        assert status == 200 and answer["evidence"]
    finally:
        stop_checked(service)


def test_a_one_shot_query_uses_and_leaves_the_restart_cache(tmp_path: Path, folder: Path) -> None:
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMWIKI_")}
    argv = [str(console_script("llmwiki-serve")), "query", str(folder), "rollback runbook",
            "--limit", "3"]
    first = subprocess.run(argv, env={**env, "LLMWIKI_SERVE_CACHE_DIR": str(cache)},
                           capture_output=True, text=True, timeout=START_SECONDS, check=False)
    assert first.returncode == 0, first.stderr
    assert_only_the_store(cache)
    second = subprocess.run(argv, env={**env, "LLMWIKI_SERVE_CACHE_DIR": str(cache)},
                            capture_output=True, text=True, timeout=START_SECONDS, check=False)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == json.loads(first.stdout)
    assert '"index_cache_written"' in first.stderr and '"index_cache_loaded"' in second.stderr
    assert "Traceback" not in first.stderr + second.stderr


async def _stdio_session(root: Path, cache: Path, work: Path) -> tuple[list[Any], list[dict[str, Any]]]:
    """One session of the official MCP client with `llmwiki-serve mcp ROOT`, launched as an IDE
    launches it; the search results and the server's JSON log lines."""
    work.mkdir(parents=True)
    params = StdioServerParameters(
        command=str(console_script("llmwiki-serve")),
        args=["mcp", str(root), "--cache-dir", str(cache), "--log-format", "json"],
        env=service_env(work, {"E2E_GUARD_LOG": str(work / "guard")}), cwd=str(work))
    with (work / "stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            found = await client.call_tool("llmwiki_search", {"query": "rollback runbook signing",
                                                              "limit": 5})
            assert found.is_error is False and found.structured_content is not None
    results = [(r["path"], r["score"]) for r in found.structured_content["results"]]
    assert not (work / "guard").exists() or not (work / "guard").read_text()
    return results, json_lines(work / "stderr")


async def test_stdio_sessions_keep_the_restart_cache_as_serve_does(tmp_path: Path, folder: Path) -> None:
    """IDE and desktop clients start `llmwiki-serve mcp ROOT` once per session: the first session
    writes the restart cache, the next ones answer from it instead of parsing the folder and
    building the index again."""
    cache = tmp_path / "cache"
    first, first_log = await _stdio_session(folder, cache, tmp_path / "first")
    assert first
    assert_only_the_store(cache)
    assert "index_cache_written" in [e.get("event") for e in first_log]
    again, again_log = await _stdio_session(folder, cache, tmp_path / "again")
    assert again == first
    events = {e.get("event"): e for e in again_log}
    assert events["index_cache_loaded"]["documents"] == PAGES, again_log
    assert "index_cache_written" not in events


def read_text(url: str, page_id: str) -> str:
    with urllib.request.urlopen(f"{url}/read/{page_id}", timeout=10) as response:
        assert response.status == 200
        return str(json.loads(response.read())["text"])


def test_a_restart_reads_bodies_from_the_store_and_keeps_serving_when_it_is_removed(
        tmp_path: Path, folder: Path) -> None:
    """A restart leaves page bodies in the store (a read fetches one); the cache directory
    cleaned while serving loses nothing: bodies come from the folder again, the next save
    writes a whole store, and the start after it parses nothing."""
    cache = tmp_path / "cache"
    page = "topics/topic-0007"
    expected = (folder / f"{page}.md").read_text(encoding="utf-8").split("---\n", 2)[2].strip()
    first = start(tmp_path / "run-0", folder, cache)
    try:
        readiness_answers(first)
        assert read_text(first.url, page) == expected
    finally:
        stop_checked(first)
    second = start(tmp_path / "run-1", folder, cache)
    try:
        readiness_answers(second)
        assert read_text(second.url, page) == expected
        before = top_results(second.url)
        for path in cache.iterdir():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        assert read_text(second.url, page) == expected
        status, query = post(second.url, "/query", {"query": "how are tokens rotated in the vault?"})
        assert status == 200 and query["evidence"]
        assert top_results(second.url) == before
    finally:
        stop_checked(second)
    assert the_event(second, "folder_loaded")["files_parsed"] == 0
    third = start(tmp_path / "run-2", folder, cache)
    try:
        readiness_answers(third)
        assert read_text(third.url, page) == expected
    finally:
        stop_checked(third)
    loaded = the_event(third, "folder_loaded")
    assert loaded["records_from_cache"] == PAGES and loaded["files_parsed"] == 0


def identity_and_packs(url: str, questions: tuple[str, ...]) -> tuple[object, ...]:
    """The projection's signature and bundle id as /health says them, and whole packs."""
    status, health = get(url + "/health")
    assert status == 200
    packs = [post(url, "/query", {"query": question}) for question in questions]
    return health["source"]["projection"]["signature"], health["source"]["bundle_id"], packs


def test_after_edits_the_signature_and_packs_are_a_fresh_starts(tmp_path: Path, folder: Path) -> None:
    """An edit is worked into the running snapshot (the signature hashed from the edited line
    on, the entry pages, title and guidance kept unless a hub page changed): what /health and
    packs say must be what a service started afresh on the changed folder says."""
    questions = ("topic 3 rollback quokka", "readiness wiki overview", "how are tokens rotated?")
    cache = tmp_path / "cache"
    store_written(tmp_path / "first", folder, cache)
    running = start(tmp_path / "running", folder, cache)
    try:
        readiness_answers(running)
        before = identity_and_packs(running.url, questions)
        changes = [
            lambda: rewrite_text(folder / "topics" / "topic-0003.md", "\nA quokka was here.\n"),
            lambda: rewrite_text(folder / "index.md", "\nAn overview of the readiness wiki.\n"),
            lambda: (folder / "topics" / "topic-0010.md").unlink(),
            lambda: (folder / "topics" / "quokka.md").write_text(
                "---\ntitle: Quokka\n---\n# Quokka\n\nrollback quokka, see [[topic-0003]].\n",
                encoding="utf-8"),
        ]
        for turn, change in enumerate(changes):
            change()
            after = identity_and_packs(running.url, questions)
            assert after[0] != before[0] and after[1] != before[1], f"change {turn} not seen"
            fresh = start(tmp_path / f"fresh-{turn}", folder, tmp_path / f"fresh-cache-{turn}")
            try:
                readiness_answers(fresh)
                assert identity_and_packs(fresh.url, questions) == after, f"change {turn}"
            finally:
                stop_checked(fresh)
            before = after
    finally:
        stop_checked(running)


def rewrite_text(path: Path, added: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + added, encoding="utf-8")
