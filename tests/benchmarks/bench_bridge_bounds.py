"""Issue 12 section 4, measured on an installed bridge: what hostile callers and sources cost it.

    .venv/bin/python tests/benchmarks/bench_bridge_bounds.py [--bridge PATH/TO/llmwiki-agent-bridge]

Starts `llmwiki-serve` (the sample wiki) and the given bridge as subprocesses on loopback, with
`--timeout-ms 4000` only (so an older bridge without the newer flags runs the same scenarios),
points them at the hostile loopback sources of tests/e2e/hostile_sources.py, and prints one
line per figure: RSS from /proc before and after, statuses, calls made, runs that lost their
healthy source. No product module is imported."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.e2e.hostile_sources import running_hostile_sources  # noqa: E402
from tests.e2e.processes import Service, launch, start_serve, wait_ready_line  # noqa: E402

QUESTION = "How do we roll back a release?"
TIMEOUT_MS = 4000


def source(source_id: str, url: str) -> dict[str, Any]:
    return {"id": source_id, "name": source_id, "protocol": "llmwiki-http", "status": "ready", "url": url}


def run(*sources: dict[str, Any], mode: str = "evidence-only") -> dict[str, Any]:
    return {"data": {"query": QUESTION, "orchestrationMode": mode, "knowledgeSources": list(sources)}}


def rss_mb(service: Service) -> int:
    return service.rss_kib() // 1024


async def post(url: str, body: Any, path: str = "/message:send", method: str = "POST",
               headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=600) as client:
        kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
        return await client.request(method, url + path, headers=headers, **kwargs)


def citations_from(response: httpx.Response, source_id: str) -> int:
    if response.status_code != 200:
        return 0
    data = response.json()["artifacts"][0]["parts"][0]["data"]
    return sum(1 for c in data["citations"] if c["sourceId"] == source_id)


def start(bridge: Path, work: Path, hostile_url: str) -> Service:
    config = work / "settings.json"
    argv = [bridge, "serve", "--host", "127.0.0.1", "--port", "0", "--config", config,
            "--timeout-ms", str(TIMEOUT_MS), "--base-url", f"{hostile_url}/runtime/v1", "--model", "m"]
    # No network guard here: the 64-character label must meet the real resolver's IDNA codec
    # (which refuses it before any lookup); nothing else leaves loopback.
    process, stdout, stderr, guard = launch("bridge", argv, work, {"PYTHONPATH": "",
                                                                   "PYTHONDONTWRITEBYTECODE": "1"})
    ready = wait_ready_line("bridge", process, stdout, stderr)
    return Service("bridge", str(ready["url"]), process, stdout, stderr, guard)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bridge", type=Path, default=Path(sys.executable).parent / "llmwiki-agent-bridge")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-bounds-"))
    with running_hostile_sources() as hostile, running_hostile_sources() as healthy:
        serve = start_serve(work / "serve", REPO / "fixtures" / "sample-wiki")
        bridge = start(args.bridge, work / "bridge", hostile.url)
        try:
            measure(bridge, serve, hostile.url, healthy.url, hostile)
        finally:
            bridge.stop()
            serve.stop()


def measure(bridge: Service, serve: Service, hostile_url: str, healthy_url: str, hostile: Any) -> None:
    good = source("good", serve.url)
    asyncio.run(post(bridge.url, run(good)))
    base = rss_mb(bridge)
    print(f"baseline RSS after one plain run: {base} MB")

    huge = [source(f"huge-{i}", f"{hostile_url}/huge/{i}") for i in range(30)]
    started = time.monotonic()
    response = asyncio.run(post(bridge.url, run(*huge)))
    print(f"30 sources x 200 MB: HTTP {response.status_code}, {time.monotonic() - started:.1f} s, "
          f"RSS {base} -> {rss_mb(bridge)} MB")

    for name, bad in (("nested JSON", source("bad", f"{hostile_url}/nested")),
                      ("64-character label", source("bad", f"http://{'a' * 64}.localhost:1"))):
        response = asyncio.run(post(bridge.url, run(good, bad)))
        print(f"good source + {name}: HTTP {response.status_code}, "
              f"{citations_from(response, 'good')} good citations")

    deep = b"[" * 100_000 + b"]" * 100_000
    statuses = []
    for method, path, headers in (("POST", "/message:send", {}), ("POST", "/mcp", {}),
                                  ("POST", "/a2a/jsonrpc", {}), ("PUT", "/settings/config.json", {}),
                                  ("PUT", "/settings/sources.json", {})):
        answer = asyncio.run(post(bridge.url, deep, path, method, headers))
        statuses.append(f"{method} {path} {answer.status_code}")
    print("bodies nested 1e5 deep: " + ", ".join(statuses))

    before = len(hostile.counted)
    many = [source(f"s{i}", f"{hostile_url}/count/{i}") for i in range(10_000)]
    response = asyncio.run(post(bridge.url, run(*many)))
    print(f"10,000 inline sources: HTTP {response.status_code}, "
          f"{len(hostile.counted) - before} outbound calls")

    started = time.monotonic()
    response = asyncio.run(post(bridge.url, run(source("hanging", f"{hostile_url}/hang"))))
    print(f"one hanging llmwiki-http source, timeout {TIMEOUT_MS} ms: the run took "
          f"{time.monotonic() - started:.1f} s")

    body = run(source("good", f"{healthy_url}/good"), source("hanging", f"{hostile_url}/hang"))

    async def concurrent() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            return await asyncio.gather(*(client.post(f"{bridge.url}/message:send", json=body)
                                          for _ in range(300)))

    started = time.monotonic()
    responses = asyncio.run(concurrent())
    lost = sum(1 for r in responses if citations_from(r, "good") == 0)
    print(f"300 concurrent runs, each hanging + healthy: {lost} lost the healthy source's citations, "
          f"{time.monotonic() - started:.1f} s")

    before_rss, sent = rss_mb(bridge), hostile.sent_bytes
    response = asyncio.run(post(bridge.url, run(good, mode="delegated-runtime")))
    print(f"50 MB runtime answer: HTTP {response.status_code}, {len(response.content) // 1024} KiB returned, "
          f"{(hostile.sent_bytes - sent) // 2**20} MB read from the runtime, "
          f"RSS {before_rss} -> {rss_mb(bridge)} MB")


if __name__ == "__main__":
    main()
