"""Hostile folders under the installed `llmwiki-serve`: FIFOs swapped in for pages, sparse giants,
binary files named like pages, pages built to make patterns quadratic, torn writes, names that
cannot be routed, a corrupted restart cache and a draft title page. The server keeps answering
correctly, `/health` within the bound, and SIGTERM still stops it."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.e2e.hostile import HealthWatch, call, copy_wiki, post_json
from tests.e2e.processes import console_script, free_port, run_command, start_serve, stop_checked

pytestmark = pytest.mark.timeout(300)


def _search_ok(url: str, query: str = "rollback") -> float:
    answer = post_json(url, "/search", {"query": query}, timeout=30)
    assert answer.status == 200, (answer.status, answer.body[:300])
    return answer.seconds


def test_fifo_swapped_in_for_a_page_does_not_wedge_the_server(tmp_path: Path) -> None:
    root = copy_wiki(tmp_path)
    service = start_serve(tmp_path / "run", root)
    page = root / "hot.md"
    saved = page.read_bytes()
    stop = threading.Event()

    def swapper() -> None:  # the page flips between a FIFO and a regular file as fast as it can
        turn = 0
        while not stop.is_set():
            fifo, back = root / f".swap-{turn}", root / f".back-{turn}.md"
            os.mkfifo(fifo)
            os.replace(fifo, page)
            back.write_bytes(saved)
            os.replace(back, page)
            turn += 1

    thread = threading.Thread(target=swapper)
    try:
        with HealthWatch(service.url) as watch:
            thread.start()
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                assert _search_ok(service.url, "focus") < 5
            stop.set()
            thread.join()
        watch.check()
        read = call(service.url, "GET", "/read/hot")
        assert read.status == 200 and b"Current Focus" in read.body
    finally:
        stop.set()
        stop_checked(service)


ADVERSARIAL = {"brackets": "[", "parens": "(", "backticks": "`", "hashes": "#", "pipes": "|",
               "wikilink openers": "[[", "link heads": "[a](", "nested": "[[[(((`"}
MIB = 1 << 20


def _adversarial_pages(root: Path) -> None:
    for name, unit in ADVERSARIAL.items():
        (root / f"attack-{name.replace(' ', '-')}.md").write_text(unit * (MIB // len(unit)), encoding="utf-8")


def test_pages_built_to_be_quadratic_load_in_bounded_time(tmp_path: Path) -> None:
    plain_root = copy_wiki(tmp_path / "plain")
    for name in ADVERSARIAL:
        (plain_root / f"plain-{name.replace(' ', '-')}.md").write_text("word " * (MIB // 5), encoding="utf-8")
    started = time.monotonic()
    plain = start_serve(tmp_path / "plain-run", plain_root, "--no-page-cache")
    _search_ok(plain.url)
    plain_seconds = time.monotonic() - started
    stop_checked(plain)

    root = copy_wiki(tmp_path / "attack")
    _adversarial_pages(root)
    started = time.monotonic()
    service = start_serve(tmp_path / "attack-run", root, "--no-page-cache")
    try:
        _search_ok(service.url)
        attack_seconds = time.monotonic() - started
        assert attack_seconds < 3 * plain_seconds + 5, (attack_seconds, plain_seconds)
        # and written into the running folder: the loop never stalls
        with HealthWatch(service.url) as watch:
            (root / "late-attack.md").write_text("[" * MIB, encoding="utf-8")
            assert _search_ok(service.url, "late") < 3 * plain_seconds + 5
        watch.check()
    finally:
        stop_checked(service)


def test_sparse_giant_files_are_skipped_without_reading_them(tmp_path: Path) -> None:
    root = copy_wiki(tmp_path)
    service = start_serve(tmp_path / "run", root)
    giant = root / "giant.md"
    try:
        with HealthWatch(service.url) as watch:
            with giant.open("wb") as out:
                out.truncate(16 << 30)  # sparse: no disk used
            for _ in range(3):
                assert _search_ok(service.url) < 2
                os.utime(giant)
        watch.check()
        listed = call(service.url, "GET", "/read/giant")
        assert listed.status == 404, listed.status
    finally:
        stop_checked(service)
    started = time.monotonic()
    again = start_serve(tmp_path / "restart", root)
    try:
        _search_ok(again.url)
        assert time.monotonic() - started < 20
    finally:
        stop_checked(again)



# The head of the AppleDouble file a Mac writes beside "rollback.md" on an SMB or exFAT volume:
# magic, version, filler, two entries, then an extended attribute (all NUL-padded).
APPLE_DOUBLE = (b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \x00\x02"
                b"\x00\x00\x00\x09\x00\x00\x00\x32\x00\x00\x0f\x1e" + b"\x00" * 40
                + b"ATTR\x00\x00com.apple.quarantine\x00q/0081;5f0e;Safari;" + b"\x00" * 64)


def test_binary_files_named_like_pages_are_skipped_not_served(tmp_path: Path) -> None:
    root = copy_wiki(tmp_path)
    (root / "runbooks" / "._rollback.md").write_bytes(APPLE_DOUBLE)
    service = start_serve(tmp_path / "run", root)
    try:
        health = call(service.url, "GET", "/health").json()
        pages, skipped = health["source"]["page_count"], health["diagnostics"]["skipped_files"]
        assert skipped == 1
        for word in ("quarantine", "Safari"):
            found = post_json(service.url, "/search", {"query": word}).json()["results"]
            assert found == [], (word, found)
        assert call(service.url, "GET", "/read/runbooks/._rollback").status == 404
        # A page that turns binary while served goes, and comes back once it is text again.
        page = root / "runbooks" / "token-rotation.md"
        text = page.read_bytes()
        page.write_bytes(text.replace(b"\n", b"\n\x00", 1))
        health = call(service.url, "GET", "/health").json()
        assert (health["source"]["page_count"], health["diagnostics"]["skipped_files"]) == (pages - 1, 2)
        assert call(service.url, "GET", "/read/runbooks/token-rotation").status == 404
        page.write_bytes(text)
        assert call(service.url, "GET", "/read/runbooks/token-rotation").status == 200
    finally:
        stop_checked(service)
    problems = [e for e in service.log_events() if e.get("event") == "source_file_problem"]
    assert {(e["file"], e["reason"]) for e in problems} == {
        ("runbooks/._rollback.md", "binary"), ("runbooks/token-rotation.md", "binary")}

def test_a_page_rewritten_in_place_is_never_served_torn(tmp_path: Path) -> None:
    root = copy_wiki(tmp_path)
    page = root / "big.md"
    lines = 100_000
    old, new = "# Big\n\n" + "alpha line\n" * lines, "# Big\n\n" + "omega line\n" * lines
    page.write_text(old, encoding="utf-8")
    service = start_serve(tmp_path / "run", root)
    stop = threading.Event()

    def writer() -> None:  # rewrites in place, not atomically: truncate, then write the whole text
        turn = 0
        while not stop.is_set():
            page.write_bytes((new if turn % 2 == 0 else old).encode())
            turn += 1

    thread = threading.Thread(target=writer)
    torn: list[str] = []
    reads = 0
    try:
        thread.start()
        for _ in range(300):
            answer = call(service.url, "GET", "/read/big")
            if answer.status != 200:
                continue  # a page caught empty mid-write may be briefly missing
            reads += 1
            text = answer.json().get("text", "")
            if text and text.count("line") != lines:
                torn.append(f"{text.count('alpha')} alpha / {text.count('omega')} omega")
    finally:
        stop.set()
        thread.join()
        stop_checked(service)
    assert reads >= 100, f"only {reads} reads answered"
    assert not torn, f"{len(torn)} of {reads} reads were torn, e.g. {torn[:3]}"


def test_every_id_the_graph_lists_is_readable(tmp_path: Path) -> None:
    root = copy_wiki(tmp_path)
    for name in ("line\nbreak", "tab\there", "percent%2Fslash", "question?mark", "hash#tag", "space end "):
        (root / f"{name}.md").write_text(f"# Odd {len(name)}\n\nbody\n", encoding="utf-8")
    service = start_serve(tmp_path / "run", root)
    try:
        nodes = call(service.url, "GET", "/graph?limit=2000").json()["nodes"]
        page_ids = [node["id"].removeprefix("page:") for node in nodes if node["id"].startswith("page:")]
        assert len(page_ids) >= 10
        unreadable = [pid for pid in page_ids
                      if call(service.url, "GET", "/read/" + urllib.parse.quote(pid, safe="/")).status != 200]
        assert not unreadable, unreadable
    finally:
        stop_checked(service)


def _cache_file(cache: Path) -> Path:
    """The store (SQLite's -wal and -shm files are gone once serve has stopped; the index's
    array files are in a directory beside it)."""
    files = [p for p in cache.iterdir() if p.is_file()]
    assert len(files) == 1, files
    return files[0]


def _fresh_answers(url: str) -> tuple[int, dict[str, str]]:
    search = post_json(url, "/search", {"query": "certificate", "limit": 30})
    query = post_json(url, "/query", {"query": "release rollback"})
    assert search.status == 200 and query.status == 200, (search.body[:200], query.body[:200])
    graph = call(url, "GET", "/graph?limit=2000")
    assert graph.status == 200
    titles = {r["page_id"]: r["title"] for r in search.json()["results"]}
    return len(graph.json()["nodes"]), titles


def test_a_corrupted_store_is_detected_and_rebuilt(tmp_path: Path) -> None:
    """Damage SQLite's own checks find (its header, a database page zeroed or cut off): serve
    logs it, answers from the folder as if nothing had been stored, and writes the store anew.
    (Bits flipped inside a stored value are not among them: SQLite keeps no checksum of its
    pages, and the store keeps none of its own; docs/configuration.md, "The store".)"""
    root = copy_wiki(tmp_path)
    cache = tmp_path / "cache"
    args = ("--cache-dir", str(cache))
    first = start_serve(tmp_path / "run-0", root, *args)
    try:
        expected = _fresh_answers(first.url)
    finally:
        stop_checked(first)
    pristine = _cache_file(cache).read_bytes()
    page = int.from_bytes(pristine[16:18], "big")  # the database's page size
    assert pristine.startswith(b"SQLite format 3\0") and len(pristine) >= 4 * page
    pages = len(pristine) // page
    # the magic string, the page size, whole pages zeroed through the file, then truncations
    damages: list[tuple[str, int, int]] = [("flip", 7, 1), ("flip", 16, 1)] + [
        ("zero", n * page, page) for n in range(1, pages, max(1, pages // 6))] + [
        ("cut", len(pristine) // 2, 0), ("cut", page + 100, 0)]
    for turn, (kind, at, length) in enumerate(damages):
        target = _cache_file(cache)
        data = bytearray(pristine)
        if kind == "flip":
            data[at] ^= 0x10
        elif kind == "zero":
            data[at:at + length] = bytes(length)
        else:
            del data[at:]
        target.write_bytes(bytes(data))
        service = start_serve(tmp_path / f"run-{turn + 1}", root, *args)
        try:
            assert _fresh_answers(service.url) == expected, f"damage {turn}: {kind} at {at}"
        finally:
            stop_checked(service)
        events = [e.get("event") for e in service.log_events()]
        assert "store_rebuilt" in events, f"damage {turn}: {kind} at {at} was not found"
        assert _cache_file(cache).read_bytes() != bytes(data), "the damaged store was not rewritten"


def test_a_store_disagreeing_with_a_changed_file_is_not_trusted(tmp_path: Path) -> None:
    """A stored page is trusted only while its file is unchanged (its stat, else its digest): a
    store that says otherwise than a file changed since (here: a title altered in the store,
    then a line added to the file) gives way to the file. (A value altered while the file
    stays unchanged is served: the store is the service's own, in a directory only it writes;
    docs/configuration.md, "The store".)"""
    root = copy_wiki(tmp_path)
    cache = tmp_path / "cache"
    args = ("--cache-dir", str(cache))
    first = start_serve(tmp_path / "run-0", root, *args)
    stop_checked(first)
    target = _cache_file(cache)
    conn = sqlite3.connect(target)
    changed = conn.execute("UPDATE pages SET title = 'Current FOCUS' WHERE title = 'Current Focus'")
    assert changed.rowcount == 1, "the store holds no page titled Current Focus"
    conn.commit()
    conn.close()
    hot = root / "hot.md"
    hot.write_text(hot.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    service = start_serve(tmp_path / "run-1", root, *args)
    try:
        read = call(service.url, "GET", "/read/hot").json()
        assert read["title"] == "Current Focus", read["title"]
    finally:
        stop_checked(service)


def test_a_draft_title_page_does_not_name_the_wiki(tmp_path: Path) -> None:
    root = copy_wiki(tmp_path)
    index = root / "index.md"
    index.write_text("---\ntitle: Zeppelin Secret Wiki\nstatus: draft\n"
                     "description: The zeppelin plans nobody may see\n---\n# Zeppelin Secret Wiki\n\n"
                     "Overview of [[Release Checklist]].\n", encoding="utf-8")
    overview = root / "overview.md"
    overview.write_text("---\nstatus: draft\n---\n# Zeppelin Overview\n\nhidden\n", encoding="utf-8")
    service = start_serve(tmp_path / "run", root, "--enable-a2a")
    try:
        surfaces = [call(service.url, "GET", path) for path in
                    ("/health", "/manifest", "/source-bundle", "/source-refs", "/graph?limit=2000",
                     "/.well-known/agent-card.json", "/openapi.json")]
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}}}
        surfaces += [post_json(service.url, "/query", {"query": "release checklist"}),
                     post_json(service.url, "/search", {"query": "zeppelin"}),
                     post_json(service.url, "/mcp", initialize)]
        for answer in surfaces:
            assert answer.status == 200, answer.status
            assert b"Zeppelin" not in answer.body and b"zeppelin" not in answer.body, answer.body[:400]
            assert b"overview.md" not in answer.body, answer.body[:400]
    finally:
        stop_checked(service)


def test_a_root_holding_the_default_cache_dir_fails_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "run" / "home"
    (home / ".cache").mkdir(parents=True)
    (home / "note.md").write_text("# Note\n", encoding="utf-8")
    done = run_command(tmp_path / "run", [console_script("llmwiki-serve"), "serve", home,
                                             "--port", str(free_port())])
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "cache" in lines[0].lower(), lines[0]
