"""Slow work leaves the event loop free. An A2A query sent while the search index of a large
folder is still being built waits for the build a bounded time (off the loop), then is told to
retry (503 with Retry-After) rather than held for the whole build. A search after most pages
changed at once rebuilds the index in a worker thread. /health keeps answering meanwhile (the
rule HTTP and MCP follow)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.benchmarks.generate import generate
from tests.e2e.processes import (
    POLL_SECONDS,
    Service,
    console_script,
    free_port,
    launch,
    stop_checked,
    wait_http_ok,
)

PAGES = 3000  # enough that the index build takes a while on any machine this runs on
QUERY_SECONDS = 120.0
WAIT_BOUND_SECONDS = 3.0 + 5.0  # serve's wait for the index (off_loop), with room for a busy machine


@pytest.fixture(scope="module")
def large_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("serve-large")
    root = work / "wiki"
    generate(root, PAGES, seed=3)
    port = free_port()
    argv = [console_script("llmwiki-serve"), "serve", root, "--host", "127.0.0.1", "--port", str(port),
            "--enable-a2a", "--no-page-cache"]
    process, stdout, stderr, guard = launch("serve", argv, work)
    url = f"http://127.0.0.1:{port}"
    wait_http_ok("serve", url + "/health", process, stdout, stderr)  # listening, not yet ready
    service = Service("serve", url, process, stdout, stderr, guard)
    yield service
    stop_checked(service)


def test_an_a2a_query_during_the_index_build_does_not_block_health(large_serve: Service) -> None:
    answered: dict[str, float | int] = {}
    refused: list[tuple[float, str, str]] = []  # each 503: seconds, Retry-After, code

    def query() -> None:  # sent at once: /health has just come up, the build has just begun
        started = time.monotonic()
        while time.monotonic() - started < QUERY_SECONDS:
            sent = time.monotonic()
            response = httpx.post(f"{large_serve.url}/message:send", timeout=QUERY_SECONDS,
                                  json={"data": {"query": "release checklist rollback"}})
            if response.status_code != 503:
                break
            refused.append((time.monotonic() - sent, response.headers.get("Retry-After", ""),
                            response.json()["error"]["code"]))
            time.sleep(float(response.headers.get("Retry-After", "1")))  # as the server asks
        answered.update(status=response.status_code, seconds=time.monotonic() - started)

    sender = threading.Thread(target=query)
    sender.start()
    health_seconds: list[float] = []
    with httpx.Client(base_url=large_serve.url, timeout=QUERY_SECONDS) as client:
        while sender.is_alive() and len(health_seconds) < 10_000:
            started = time.monotonic()
            assert client.get("/health").status_code == 200
            health_seconds.append(time.monotonic() - started)
            time.sleep(POLL_SECONDS)  # a client's pace, not a flood competing with the build
    sender.join(QUERY_SECONDS)
    assert answered.get("status") == 200, answered
    for seconds, retry_after, code in refused:  # no request waited on the build past the bound
        assert seconds < WAIT_BOUND_SECONDS and retry_after.isdigit() and code == "index_not_ready"
    query_seconds = float(answered["seconds"])
    print(f"\nA2A query {query_seconds:.2f} s; {len(health_seconds)} /health, "
          f"slowest {max(health_seconds):.3f} s")
    # The build must still have been running when the query came, or nothing was shown.
    assert query_seconds > 0.3, f"the index was ready after {query_seconds:.2f} s: use more pages"
    assert len(health_seconds) >= 2, health_seconds
    # On the loop, the query would hold every /health behind it for the rest of the build.
    assert max(health_seconds) < query_seconds / 2, (max(health_seconds), query_seconds)


@pytest.fixture(scope="module")
def checkout_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Path]]:
    work = tmp_path_factory.mktemp("serve-checkout")
    root = work / "wiki"
    generate(root, PAGES, seed=4)
    port = free_port()
    argv = [console_script("llmwiki-serve"), "serve", root, "--host", "127.0.0.1", "--port", str(port),
            "--no-page-cache"]
    process, stdout, stderr, guard = launch("serve", argv, work)
    url = f"http://127.0.0.1:{port}"
    wait_http_ok("serve", url + "/health?ready=1", process, stdout, stderr)
    service = Service("serve", url, process, stdout, stderr, guard)
    yield service, root
    stop_checked(service)


def test_a_change_to_most_pages_leaves_health_answering_while_the_index_catches_up(
        checkout_serve: tuple[Service, Path]) -> None:
    """A checkout or a recompiled wiki rewrites most pages at once: the next search rebuilds the
    index (seconds at scale) in a worker thread, and /health keeps answering meanwhile."""
    service, root = checkout_serve
    pages = sorted(root.rglob("*.md"))
    for number, page in enumerate(pages[: len(pages) * 2 // 3]):
        page.write_text(page.read_text(encoding="utf-8") + f"\nCheckout marker q{number}x.\n",
                        encoding="utf-8")
    answered: dict[str, object] = {}

    def query() -> None:
        started = time.monotonic()
        response = httpx.post(f"{service.url}/search", timeout=QUERY_SECONDS,
                              json={"query": "q0x", "mode": "literal", "include_drafts": True})
        answered.update(status=response.status_code, seconds=time.monotonic() - started,
                        paths=[r["path"] for r in response.json()["results"]])

    sender = threading.Thread(target=query)
    sender.start()
    during = 0
    with httpx.Client(base_url=service.url, timeout=QUERY_SECONDS) as client:
        while sender.is_alive():
            assert client.get("/health").status_code == 200
            during += sender.is_alive()
            time.sleep(POLL_SECONDS)
    sender.join(QUERY_SECONDS)
    assert answered["status"] == 200, answered
    assert answered["paths"] == [pages[0].relative_to(root).as_posix()], answered
    seconds = float(answered["seconds"])  # type: ignore[arg-type]
    print(f"\nsearch after the checkout {seconds:.2f} s; {during} /health meanwhile")
    assert seconds > 0.3, "the rebuild was too quick to show anything: use more pages"
    # On the loop, the rebuild would hold every /health until the search was answered.
    assert during >= 3, (during, seconds)
