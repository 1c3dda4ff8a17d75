"""A slow first query leaves the event loop free: an A2A query sent while the search index of a
large folder is still being built waits for the build in a worker thread, and /health keeps
answering meanwhile (the rule HTTP and MCP follow)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.benchmarks.generate import generate
from tests.e2e.processes import POLL_SECONDS, Service, start_serve, stop_checked

PAGES = 3000  # enough that the index build takes a while on any machine this runs on
QUERY_SECONDS = 120.0


@pytest.fixture(scope="module")
def large_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("serve-large")
    root = work / "wiki"
    generate(root, PAGES, seed=3)
    service = start_serve(work, root, "--enable-a2a", "--no-page-cache")
    yield service
    stop_checked(service)


def test_an_a2a_query_during_the_index_build_does_not_block_health(large_serve: Service) -> None:
    answered: dict[str, float | int] = {}

    def query() -> None:  # sent at once: /health has just come up, the build has just begun
        started = time.monotonic()
        response = httpx.post(f"{large_serve.url}/message:send", timeout=QUERY_SECONDS,
                              json={"data": {"query": "release checklist rollback"}})
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
    query_seconds = float(answered["seconds"])
    print(f"\nA2A query {query_seconds:.2f} s; {len(health_seconds)} /health, "
          f"slowest {max(health_seconds):.3f} s")
    # The build must still have been running when the query came, or nothing was shown.
    assert query_seconds > 0.3, f"the index was ready after {query_seconds:.2f} s: use more pages"
    assert len(health_seconds) >= 2, health_seconds
    # On the loop, the query would hold every /health behind it for the rest of the build.
    assert max(health_seconds) < query_seconds / 2, (max(health_seconds), query_seconds)
