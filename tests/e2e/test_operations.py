"""What an operator relies on, as deployed: /metrics (off by default, Prometheus text when on, behind
the same checks as every route), OpenAPI documents that match the routes, start-up failures that
say what and where in one line, and a SIGTERM that lets requests in flight finish."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import SAMPLE_WIKI
from tests.e2e.model_server import MODEL, ModelServer
from tests.e2e.processes import (
    STOP_SECONDS,
    Service,
    console_script,
    free_port,
    run_command,
    start_bridge,
    start_serve,
    stop_checked,
)
from tests.e2e.slow_source import running_slow_source

TOKEN = "ops-bridge-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUESTION = "How do we roll back a release?"
SHUTDOWN_SECONDS = 3.0  # the bound given to the services under test
# What the contract says each service answers; the documents must list at least these.
SERVE_OPERATIONS = {("GET", "/health"), ("GET", "/manifest"), ("GET", "/source-bundle"),
                    ("GET", "/source-refs"), ("POST", "/query"), ("POST", "/search"),
                    ("GET", "/read/{page_id}"), ("GET", "/graph"), ("GET", "/graph/neighborhood"),
                    ("POST", "/mcp"), ("POST", "/mcp/stream"), ("GET", "/openapi.json"), ("GET", "/docs"),
                    ("GET", "/diagnostics/projection-store"), ("GET", "/.well-known/agent-card.json"),
                    ("POST", "/message:send"), ("POST", "/a2a/jsonrpc")}
BRIDGE_OPERATIONS = {("GET", "/health"), ("GET", "/settings"), ("GET", "/sources"),
                     ("POST", "/sources/probe"),
                     ("GET", "/settings.json"), ("PUT", "/settings/config.json"),
                     ("GET", "/settings/sources.json"), ("PUT", "/settings/sources.json"),
                     ("GET", "/.well-known/agent-card.json"), ("POST", "/message:send"),
                     ("POST", "/a2a/jsonrpc"), ("POST", "/mcp"), ("GET", "/openapi.json")}


# -- helpers ---------------------------------------------------------------------------------------


def http_source(source_id: str, url: str) -> dict[str, str]:
    return {"id": source_id, "name": source_id, "protocol": "llmwiki-http", "status": "ready", "url": url}


def families(text: str) -> dict[str, Metric]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def sample_value(family: Metric, suffix: str = "", **labels: str) -> float:
    """The sum of the family's samples named `<family><suffix>` whose labels include `labels`."""
    return sum(s.value for s in family.samples
               if s.name == family.name + suffix and labels.items() <= s.labels.items())


def wait_for_event(service: Service, name: str, timeout: float = STOP_SECONDS) -> dict[str, Any]:
    """The service's first log event `name` (JSON on stderr), polled until it appears."""
    deadline = time.monotonic() + timeout
    while True:
        for event in service.log_events():
            if event.get("event") == name:
                return event
        if time.monotonic() > deadline:
            raise AssertionError(f"{service.name} logged no {name!r} within {timeout} s\n{service.logs()}")
        time.sleep(0.02)


def refuses_connections(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def exit_status_within(service: Service, seconds: float) -> int:
    try:
        return service.process.wait(seconds)
    except subprocess.TimeoutExpired:
        service.process.kill()
        raise AssertionError(f"{service.name} was still running {seconds} s after SIGTERM") from None


def assert_one_line_failure(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.fixture(scope="module")
def metered_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_serve(tmp_path_factory.mktemp("metered-serve"), SAMPLE_WIKI, "--metrics", "--enable-a2a")
    yield service
    stop_checked(service)


@pytest.fixture(scope="module")
def plain_bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_bridge(tmp_path_factory.mktemp("plain-bridge"))
    yield service
    stop_checked(service)


@pytest.fixture(scope="module")
def metered_bridge(tmp_path_factory: pytest.TempPathFactory, model: ModelServer) -> Iterator[Service]:
    service = start_bridge(tmp_path_factory.mktemp("metered-bridge"), "--metrics", "--bearer-token", TOKEN,
                           "--base-url", model.url, "--model", MODEL, "--timeout-ms", "5000")
    yield service
    stop_checked(service)


# -- /metrics --------------------------------------------------------------------------------------


def test_metrics_are_off_by_default(our_serve: Service, plain_bridge: Service) -> None:
    assert httpx.get(f"{our_serve.url}/metrics").status_code == 404
    assert httpx.get(f"{plain_bridge.url}/metrics").status_code == 404
    # And not documented where they do not exist.
    assert "/metrics" not in httpx.get(f"{our_serve.url}/openapi.json").json()["paths"]
    assert "/metrics" not in httpx.get(f"{plain_bridge.url}/openapi.json").json()["paths"]


def test_serve_metrics_count_routes_by_their_pattern(metered_serve: Service) -> None:
    url = metered_serve.url
    assert httpx.post(f"{url}/query", json={"query": QUESTION}).status_code == 200
    for page in ("index.md", "overview.md", "no-such-page"):
        httpx.get(f"{url}/read/{page}")
    assert httpx.get(f"{url}/unknown/path/42").status_code == 404
    response = httpx.get(f"{url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = families(response.text)
    requests = found["llmwiki_serve_http_requests"]
    assert requests.type == "counter"
    assert sample_value(requests, "_total", route="/query", method="POST", status="200") == 1
    assert sample_value(requests, "_total", route="/read/{page_id}", status="200") == 2
    assert sample_value(requests, "_total", route="/read/{page_id}", status="404") == 1
    assert sample_value(requests, "_total", route="(unmatched)", status="404") == 1
    routes = {s.labels["route"] for s in requests.samples}
    assert not any("index.md" in r or "unknown" in r for r in routes), routes  # bounded labels
    latency = found["llmwiki_serve_http_request_duration_seconds"]
    assert latency.type == "histogram"
    assert sample_value(latency, "_count", route="/query") == 1
    assert sample_value(latency, "_bucket", route="/query", le="+Inf") == 1
    assert sample_value(found["llmwiki_serve_projection_pages"], visibility="all") == 14
    assert sample_value(found["llmwiki_serve_projection_pages"], visibility="approved") == 12
    assert sample_value(found["llmwiki_serve_projection_refreshes"], "_total") >= 1
    assert sample_value(found["llmwiki_serve_index_builds"], "_total") >= 1
    assert sample_value(found["llmwiki_serve_index_build_seconds"]) > 0
    assert sample_value(found["llmwiki_serve_index_ready"]) == 1


def test_serve_metrics_obey_the_host_and_origin_checks(metered_serve: Service) -> None:
    url = f"{metered_serve.url}/metrics"
    assert httpx.get(url, headers={"Host": "rebound.example"}).status_code == 421
    assert httpx.get(url, headers={"Origin": "https://evil.example"}).status_code == 403
    assert "/metrics" in httpx.get(f"{metered_serve.url}/openapi.json").json()["paths"]


def test_bridge_metrics_need_the_token_and_count_sources_and_the_runtime(
        metered_bridge: Service, our_serve: Service) -> None:
    url = metered_bridge.url
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/metrics", headers={**AUTH, "Host": "rebound.example"}).status_code == 421
    dead = free_port()  # nothing listens there: that source's query fails
    sources = [http_source("wiki", our_serve.url), http_source("dead", f"http://127.0.0.1:{dead}")]
    body = {"data": {"query": QUESTION, "orchestrationMode": "delegated-runtime",
                     "knowledgeSources": sources}}
    run = httpx.post(f"{url}/message:send", json=body, headers=AUTH, timeout=60)
    assert run.status_code == 200, run.text[:2000]
    response = httpx.get(f"{url}/metrics", headers=AUTH)
    assert response.status_code == 200
    found = families(response.text)
    queries = found["llmwiki_bridge_source_queries"]
    assert sample_value(queries, "_total", protocol="llmwiki-http", outcome="ok") == 1
    assert sample_value(queries, "_total", protocol="llmwiki-http", outcome="error") == 1
    assert sample_value(found["llmwiki_bridge_source_query_duration_seconds"], "_count",
                        protocol="llmwiki-http") == 2
    runtime = found["llmwiki_bridge_runtime_request_duration_seconds"]
    assert sample_value(runtime, "_count", adapter="chat-completions", outcome="ok") >= 1
    requests = found["llmwiki_bridge_http_requests"]
    assert sample_value(requests, "_total", route="/message:send", status="200") == 1
    assert sample_value(requests, "_total", route="/metrics", status="401") == 1
    assert sample_value(requests, "_total", route="/metrics", status="421") == 1


# -- OpenAPI ---------------------------------------------------------------------------------------


def _probe(url: str, method: str, path: str) -> int:
    """The route's status; an A2A TaskNotFound (404 in AIP-193's shape, for the made-up task id)
    shows the route exists, so it reads as 200 here."""
    path = path.replace("{page_id}", "index.md").replace("{task_id}", "t").replace("{config_id}", "c")
    kwargs: dict[str, Any] = {"json": {}} if method in ("POST", "PUT") else {}
    response = httpx.request(method, url + path, timeout=30, **kwargs)
    if response.status_code == 404 and response.json().get("error", {}).get("status") == "NOT_FOUND":
        return 200
    return response.status_code


def _documented(url: str) -> set[tuple[str, str]]:
    document = httpx.get(f"{url}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    return {(method.upper(), path) for path, item in document["paths"].items() for method in item}


def test_serve_openapi_lists_every_route_and_only_routes(our_serve: Service) -> None:
    documented = _documented(our_serve.url)
    assert documented >= SERVE_OPERATIONS, SERVE_OPERATIONS - documented
    for method, path in sorted(documented):
        # A route serve does not have answers 404 (or 405 for another method): never for these.
        assert _probe(our_serve.url, method, path) not in (404, 405), (method, path)


def test_bridge_openapi_lists_every_route_and_only_routes(plain_bridge: Service) -> None:
    documented = _documented(plain_bridge.url)
    assert documented >= BRIDGE_OPERATIONS, BRIDGE_OPERATIONS - documented
    for method, path in sorted(documented):
        assert _probe(plain_bridge.url, method, path) not in (404, 405), (method, path)


# -- start-up failures -----------------------------------------------------------------------------


@pytest.fixture
def occupied_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _serve_fails(tmp_path: Path, root: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_command(tmp_path / "run", [console_script("llmwiki-serve"), "serve", root,
                                          "--host", "127.0.0.1", "--port", str(free_port()), *args])


def test_serve_refuses_a_missing_root(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    assert_one_line_failure(_serve_fails(tmp_path, missing), "does not exist", str(missing))


def test_serve_refuses_a_root_that_is_a_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page, not a folder\n", encoding="utf-8")
    assert_one_line_failure(_serve_fails(tmp_path, page), "not a directory", str(page))


def test_serve_refuses_a_root_it_cannot_open(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)  # a root no one can open, root included
    assert_one_line_failure(_serve_fails(tmp_path, loop), "cannot be opened", str(loop))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder whatever its mode (the symlink-loop "
                                                "case above covers the error path as root)")
def test_serve_refuses_a_root_without_read_permission(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o000)
    try:
        assert_one_line_failure(_serve_fails(tmp_path, locked), "cannot be", "Permission denied", str(locked))
    finally:
        locked.chmod(0o700)


def test_serve_refuses_a_port_in_use(tmp_path: Path, occupied_port: int) -> None:
    started = time.monotonic()
    result = run_command(tmp_path / "run", [console_script("llmwiki-serve"), "serve", SAMPLE_WIKI,
                                            "--host", "127.0.0.1", "--port", str(occupied_port)])
    assert_one_line_failure(result, "cannot listen", f"127.0.0.1:{occupied_port}", "Address already in use")
    assert time.monotonic() - started < 30


def _bridge_fails(tmp_path: Path, config: Path, port: int = 0) -> subprocess.CompletedProcess[str]:
    return run_command(tmp_path / "run", [console_script("llmwiki-agent-bridge"), "serve",
                                          "--host", "127.0.0.1", "--port", str(port), "--config", config])


def test_bridge_refuses_a_port_in_use(tmp_path: Path, occupied_port: int) -> None:
    result = _bridge_fails(tmp_path, tmp_path / "settings.json", occupied_port)
    assert_one_line_failure(result, "cannot listen", f"127.0.0.1:{occupied_port}", "Address already in use")


@pytest.mark.parametrize(("content", "words"), [
    ('{"version": 1, "config": {', ("not valid JSON",)),
    ("[1, 2]", ("must hold a JSON object",)),
    ('{"version": 1, "sources": [{"id": "x"}]}', ("invalid source",)),
    (None, ("could not be read",)),  # a directory where the file should be
])
def test_bridge_refuses_a_settings_file_it_cannot_use(tmp_path: Path, content: str | None,
                                                      words: tuple[str, ...]) -> None:
    config = tmp_path / "settings.json"
    if content is None:
        config.mkdir()
    else:
        config.write_text(content, encoding="utf-8")
    assert_one_line_failure(_bridge_fails(tmp_path, config), *words, str(config))


# -- SIGTERM ---------------------------------------------------------------------------------------


def test_sigterm_lets_a_bridge_run_in_flight_finish(tmp_path: Path) -> None:
    with running_slow_source() as slow:
        bridge = start_bridge(tmp_path, "--shutdown-timeout-ms", str(int(SHUTDOWN_SECONDS * 1000)))
        body = {"data": {"query": QUESTION, "orchestrationMode": "evidence-only",
                         "knowledgeSources": [http_source("slow", slow.url)]}}
        answers: list[httpx.Response] = []
        client = threading.Thread(target=lambda: answers.append(
            httpx.post(f"{bridge.url}/message:send", json=body, timeout=30)))
        client.start()
        assert slow.arrived.wait(30), bridge.logs()  # the run is in flight, waiting on the source
        stopped_at = time.monotonic()
        bridge.process.send_signal(signal.SIGTERM)
        wait_for_event(bridge, "stopping")
        assert refuses_connections(bridge.url)  # stopped accepting, the run still going
        slow.release()
        client.join(30)
        status = exit_status_within(bridge, SHUTDOWN_SECONDS + STOP_SECONDS)
    assert answers and answers[0].status_code == 200, bridge.logs()
    result = answers[0].json()["artifacts"][0]["parts"][0]["data"]
    assert [c["sourceId"] for c in result["citations"]] == ["slow"]
    assert status == 0, bridge.logs()
    assert time.monotonic() - stopped_at < SHUTDOWN_SECONDS + STOP_SECONDS
    assert wait_for_event(bridge, "stopped")
    assert "Traceback" not in bridge.stderr.read_text(errors="replace")


def _start_upload(url: str, length: int) -> socket.socket:
    """A POST /query whose headers are sent and whose handling has begun (serve answered the
    `Expect: 100-continue` once it routed the request); the body is the caller's to send, or not."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall((f"POST /query HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n").encode())
    interim = b""
    while not interim.endswith(b"\r\n\r\n"):
        chunk = sock.recv(1)
        assert chunk, "serve closed the connection before it began the request"
        interim += chunk
    assert interim.startswith(b"HTTP/1.1 100"), interim
    return sock


def test_sigterm_stops_serve_accepting_and_bounds_a_stalled_upload(tmp_path: Path) -> None:
    """aiohttp reads no more request data once shutdown begins, so an upload still arriving cannot
    finish; what matters is that it holds the stop no longer than the bound (it held it 60 s)."""
    serve = start_serve(tmp_path, SAMPLE_WIKI, "--no-page-cache",
                        "--shutdown-timeout-seconds", str(SHUTDOWN_SECONDS))
    with _start_upload(serve.url, 1000):  # the body never comes (the body timeout is 30 s)
        stopped_at = time.monotonic()
        serve.process.send_signal(signal.SIGTERM)
        wait_for_event(serve, "stopping")
        assert refuses_connections(serve.url)
        status = exit_status_within(serve, SHUTDOWN_SECONDS + STOP_SECONDS)
        waited = time.monotonic() - stopped_at
    assert status == 0, serve.logs()
    # The request in flight was waited for, up to the bound and no longer.
    assert SHUTDOWN_SECONDS - 0.5 <= waited < SHUTDOWN_SECONDS + STOP_SECONDS, waited
    assert wait_for_event(serve, "stopped")
    assert "Traceback" not in serve.stderr.read_text(errors="replace")
