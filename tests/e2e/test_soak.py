"""The soak: the installed serve on a generated 2,000-page folder and the bridge over it, 8 clients
making a bounded number of mixed requests while another thread edits, adds, renames and deletes
pages and folders. Zero errors, no stale read once an edit has completed, RSS bounded, and churn
does not collapse throughput (an add or a delete must not rebuild the whole projection)."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.generate import generate
from tests.e2e.hostile import Answer, call, post_json
from tests.e2e.processes import Service, start_bridge, start_serve, stop_checked

pytestmark = pytest.mark.timeout(600)

PAGES = 2000
CLIENTS = 8
REQUESTS_PER_CLIENT = 40
RSS_BOUND_KIB = 700 * 1024


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Service, Path]]:
    work = tmp_path_factory.mktemp("soak")
    root = work / "wiki"
    generate(root, PAGES, seed=11)
    serve = start_serve(work / "serve", root, "--no-page-cache")
    (work / "bridge").mkdir()
    source = {"id": "wiki", "name": "Soak Wiki", "protocol": "llmwiki-http", "status": "ready",
              "url": serve.url}
    bridge = start_bridge(work / "bridge", "--default-mode", "evidence-only", settings={"sources": [source]})
    yield serve, bridge, root
    stop_checked(bridge)
    stop_checked(serve)


def _stable_ids(serve: Service) -> list[str]:
    """Page ids the editor never touches (it works under `churn/` only)."""
    nodes = call(serve.url, "GET", "/graph?limit=2000").json()["nodes"]
    return [n["id"].removeprefix("page:") for n in nodes if n["id"].startswith("page:")]


def _requests(serve: Service, bridge: Service, ids: list[str]) -> list[Callable[[random.Random], Answer]]:
    words = ["release", "rollback", "token", "signing", "incident", "deploy", "cache", "index"]

    def query(rng: random.Random) -> Answer:
        question = f"how do I {rng.choice(words)} the {rng.choice(words)}"
        return post_json(serve.url, "/query", {"query": question})

    def lexical(rng: random.Random) -> Answer:
        return post_json(serve.url, "/search", {"query": rng.choice(words), "limit": 10})

    def literal(rng: random.Random) -> Answer:
        return post_json(serve.url, "/search", {"query": rng.choice(words), "mode": "literal"})

    def read(rng: random.Random) -> Answer:
        return call(serve.url, "GET", "/read/" + rng.choice(ids))

    def neighbourhood(rng: random.Random) -> Answer:
        return call(serve.url, "GET", f"/graph/neighborhood?seed={rng.choice(ids)}&depth=1")

    def mcp(rng: random.Random) -> Answer:
        answer = post_json(serve.url, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "llmwiki_search", "arguments": {"query": rng.choice(words)}}})
        if answer.status == 200 and ("error" in answer.json() or answer.json()["result"].get("isError")):
            return Answer(599, answer.body, answer.seconds)
        return answer

    def bridge_run(rng: random.Random) -> Answer:
        question = {"data": {"query": f"what about {rng.choice(words)}?"}}
        answer = post_json(bridge.url, "/message:send", question, timeout=60)
        if answer.status == 200:
            data = answer.json()["artifacts"][0]["parts"][0]["data"]
            if not data["citations"]:
                return Answer(598, answer.body, answer.seconds)
        return answer

    return [query, lexical, literal, read, neighbourhood, mcp, bridge_run]


def _client(seed: int, kinds: list[Callable[[random.Random], Answer]], count: int) -> list[str]:
    rng = random.Random(seed)
    errors = []
    for _ in range(count):
        kind = rng.choice(kinds)
        answer = kind(rng)
        if answer.status != 200:
            errors.append(f"{kind.__name__}: {answer.status} {answer.body[:200]!r}")
    return errors


class Editor:
    """Edits, adds, renames and deletes pages and folders under `churn/`, checking after each
    completed change that serve already shows it."""

    def __init__(self, serve: Service, root: Path) -> None:
        self.serve = serve
        self.base = root / "churn"
        self.base.mkdir(exist_ok=True)
        self.stop = threading.Event()
        self.stale: list[str] = []
        self.changes = 0

    def _page(self, path: Path, token: str) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(f"---\ntitle: Churn {token}\n---\n# Churn {token}\n\nThe marker is {token}.\n",
                       encoding="utf-8")
        os.replace(tmp, path)

    def _expect(self, page_id: str, token: str | None) -> None:
        answer = call(self.serve.url, "GET", "/read/" + page_id)
        if token is None:
            if answer.status != 404:
                self.stale.append(f"{page_id} still readable after delete ({answer.status})")
        elif answer.status != 200 or token not in answer.json().get("text", ""):
            self.stale.append(f"{page_id} does not show {token} ({answer.status})")

    def run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            token = f"zq{turn:05d}x"
            step = turn % 5
            if step == 0:  # add
                self._page(self.base / f"page-{turn}.md", token)
                self._expect(f"churn/page-{turn}", token)
            elif step == 1:  # edit the page just added
                self._page(self.base / f"page-{turn - 1}.md", token)
                self._expect(f"churn/page-{turn - 1}", token)
            elif step == 2:  # rename it
                os.replace(self.base / f"page-{turn - 2}.md", self.base / f"moved-{turn}.md")
                self._expect(f"churn/page-{turn - 2}", None)
                self._expect(f"churn/moved-{turn}", f"zq{turn - 1:05d}x")
            elif step == 3:  # delete it
                (self.base / f"moved-{turn - 1}.md").unlink()
                self._expect(f"churn/moved-{turn - 1}", None)
            else:  # a folder with a page appears, then goes
                folder = self.base / f"dir-{turn}"
                folder.mkdir()
                self._page(folder / "inner.md", token)
                self._expect(f"churn/dir-{turn}/inner", token)
                (folder / "inner.md").unlink()
                folder.rmdir()
                self._expect(f"churn/dir-{turn}/inner", None)
            self.changes += 1
            turn += 1
            self.stop.wait(0.05)


def _round(serve: Service, bridge: Service, ids: list[str], editor: Editor | None,
           seed: int) -> tuple[float, list[str]]:
    kinds = _requests(serve, bridge, ids)
    thread = threading.Thread(target=editor.run) if editor else None
    if thread:
        thread.start()
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            results = list(pool.map(lambda i: _client(seed + i, kinds, REQUESTS_PER_CLIENT), range(CLIENTS)))
    finally:
        if editor and thread:
            editor.stop.set()
            thread.join(60)
    rate = CLIENTS * REQUESTS_PER_CLIENT / (time.monotonic() - started)
    return rate, [error for errors in results for error in errors]


@pytest.fixture(scope="module")
def rounds(soak: tuple[Service, Service, Path]) -> dict[str, Any]:
    """One quiet round, then one with the editor at work; both tests below read the figures."""
    serve, bridge, root = soak
    ids = _stable_ids(serve)
    assert len(ids) > 500
    quiet_rate, quiet_errors = _round(serve, bridge, ids, None, seed=1)
    editor = Editor(serve, root)
    churn_rate, churn_errors = _round(serve, bridge, ids, editor, seed=100)
    figures = {"quiet_rps": round(quiet_rate, 1), "churn_rps": round(churn_rate, 1),
               "changes": editor.changes, "serve_rss_mib": serve.rss_kib() // 1024,
               "bridge_rss_mib": bridge.rss_kib() // 1024}
    print(json.dumps(figures))
    return {"figures": figures, "quiet_errors": quiet_errors, "churn_errors": churn_errors,
            "stale": editor.stale}


def test_soak_with_churn_has_no_errors_no_stale_reads_and_bounded_rss(rounds: dict[str, Any]) -> None:
    figures = rounds["figures"]
    assert not rounds["quiet_errors"], rounds["quiet_errors"][:5]
    assert not rounds["churn_errors"], rounds["churn_errors"][:5]
    assert figures["changes"] >= 10, figures
    assert not rounds["stale"], rounds["stale"][:5]
    assert figures["serve_rss_mib"] * 1024 < RSS_BOUND_KIB, figures
    assert figures["bridge_rss_mib"] * 1024 < RSS_BOUND_KIB, figures


def test_churn_does_not_collapse_throughput(rounds: dict[str, Any]) -> None:
    figures = rounds["figures"]
    assert figures["churn_rps"] >= 0.5 * figures["quiet_rps"], figures
